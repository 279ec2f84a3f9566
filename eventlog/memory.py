"""In-memory twin of the SQLite store, for fast tests (STYLE: hypothesis' in-memory database).

It keeps the very rows the SQLite table would hold, so numbering, hashing, idempotency and
chain checks behave identically; the conformance suite runs against both.
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

from .appending import (
    GroupAppends,
    GroupCommitter,
    Listener,
    PreparedBatch,
    Subscribers,
    check_expected,
    plan_rows,
    result_from_rows,
)
from .chain import ChainReport, verify_chain
from .encoding import GENESIS_HASH
from .envelope import (
    AppendResult,
    Clock,
    RawRow,
    RecordedEvent,
    SessionHead,
    SystemClock,
    decode_row,
    now_text,
)
from .errors import EventLogError, StoreClosed
from .inline import InlineProjection, Progress, chunked
from .upcasting import UpcasterRegistry, default_upcasters

__all__ = ["MemoryEventStore"]

T = TypeVar("T")


class MemoryEventStore(GroupAppends):
    """Event store held in process memory; lost on exit."""

    def __init__(
        self,
        *,
        clock: Clock | None = None,
        upcasters: UpcasterRegistry = default_upcasters,
        projections: Sequence[InlineProjection] = (),
    ) -> None:
        self._clock = clock or SystemClock()
        self._upcasters = upcasters
        self.rows: list[RawRow] = []
        self.heads: dict[str, SessionHead] = {}
        self._by_session: dict[str, list[int]] = {}
        self._listeners: Subscribers[Sequence[RecordedEvent]] = Subscribers()
        self._lock = threading.RLock()
        self._closed = False
        self._projections = tuple(projections)
        self._high_water = 0
        for projection in self._projections:
            projection.create(self)
        self._committer: GroupCommitter[PreparedBatch, AppendResult] = GroupCommitter(
            self._commit
        )

    @property
    def url(self) -> str:
        return "memory://"

    def _commit(self, group: Sequence[PreparedBatch]) -> list[AppendResult | BaseException]:
        with self._lock:
            if self._closed:
                raise StoreClosed("the store is closed")
            outcomes: list[AppendResult | BaseException] = []
            committed: list[RecordedEvent] = []
            for prepared in group:
                try:
                    result = self._apply(prepared)
                except EventLogError as exc:
                    outcomes.append(exc)
                    continue
                outcomes.append(result)
                if not result.replayed:
                    committed.extend(result.events)
            if committed:
                self._listeners.publish(committed)
            return outcomes

    def _apply(self, prepared: PreparedBatch) -> AppendResult:
        batch = prepared.batch
        indexes = self._by_session.get(batch.session_id, [])
        if batch.idempotency_key is not None:
            earlier = [self.rows[i] for i in indexes if self.rows[i][10] == batch.idempotency_key]
            if earlier:
                events = tuple(decode_row(r, upcasters=self._upcasters) for r in earlier)
                return AppendResult(batch.session_id, events, replayed=True)
        head = self.heads.get(batch.session_id)
        version = head.version if head else 0
        check_expected(batch, version)
        now = now_text(self._clock)
        rows = plan_rows(
            prepared,
            version=version,
            prev_hash=head.head_hash if head else GENESIS_HASH,
            next_position=self._high_water + 1,
            recorded_at=now,
        )
        start = len(self.rows)
        self.rows.extend(rows)
        self._by_session.setdefault(batch.session_id, []).extend(
            range(start, start + len(rows))
        )
        self.heads[batch.session_id] = SessionHead(
            batch.session_id, rows[-1][2], rows[-1][12], head.created_at if head else now, now
        )
        self._high_water = rows[-1][0]
        result = result_from_rows(prepared, rows)
        for projection in self._projections:
            projection.apply(self, result.events)
        return result

    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosed("the store is closed")

    def read_session(
        self, session_id: str, *, after: int = 0, limit: int | None = None
    ) -> Iterator[RecordedEvent]:
        self._check_open()
        with self._lock:
            rows = [self.rows[i] for i in self._by_session.get(session_id, [])]
        picked = [r for r in rows if r[2] > after]
        for row in picked[:limit] if limit is not None else picked:
            yield decode_row(row, upcasters=self._upcasters)

    def read_all(self, *, after: int = 0, limit: int | None = None) -> Iterator[RecordedEvent]:
        self._check_open()
        with self._lock:
            start = bisect.bisect_right(self.rows, after, key=lambda r: r[0])
            end = None if limit is None else start + limit
            picked = self.rows[start:end]
        for row in picked:
            yield decode_row(row, upcasters=self._upcasters)

    def raw_session(self, session_id: str) -> Iterator[tuple[Any, ...]]:
        # Like SQLite: rows whose seq was tampered into a non-integer or below 1 sort last.
        self._check_open()
        with self._lock:
            rows = sorted(
                (self.rows[i] for i in self._by_session.get(session_id, [])),
                key=lambda r: (0, r[2]) if type(r[2]) is int and r[2] >= 1 else (1, 0),
            )
        yield from rows

    def version(self, session_id: str) -> int:
        self._check_open()
        head = self.heads.get(session_id)
        return head.version if head else 0

    def head_position(self) -> int:
        self._check_open()
        return self._high_water

    def session_heads(self) -> list[SessionHead]:
        self._check_open()
        with self._lock:
            return sorted(self.heads.values(), key=lambda h: (h.updated_at, h.session_id),
                          reverse=True)

    def session_head(self, session_id: str) -> SessionHead | None:
        self._check_open()
        return self.heads.get(session_id)

    def verify(self, session_id: str | None = None) -> list[ChainReport]:
        self._check_open()
        with self._lock:
            ids = [session_id] if session_id is not None else sorted(
                set(self.heads) | set(self._by_session)
            )
        return [
            verify_chain(
                sid,
                self.raw_session(sid),
                head=(h.version, h.head_hash) if (h := self.heads.get(sid)) else None,
            )
            for sid in ids
        ]

    def rebuild_projections(self, *, progress: Progress | None = None) -> int:
        """Drop every projection and fold the whole log again; the events folded."""
        with self._committer.exclusive(), self._lock:
            self._check_open()
            for projection in self._projections:
                projection.drop(self)
                projection.create(self)
            done = 0
            for chunk in chunked(decode_row(r, upcasters=self._upcasters) for r in self.rows):
                for projection in self._projections:
                    projection.apply(self, chunk)
                done += len(chunk)
                if progress is not None:
                    progress(done, len(self.rows))
            return done

    def read_view(self, query: Callable[[Any], T]) -> T:
        """Run ``query`` against the in-memory projections (they are their own tables)."""
        with self._lock:
            self._check_open()
            return query(self)

    def purge(self, session_id: str) -> int:
        """Remove one session's events and head record; positions are never reused."""
        with self._committer.exclusive(), self._lock:
            self._check_open()
            kept = [r for r in self.rows if r[1] != session_id]
            removed = len(self.rows) - len(kept)
            self.rows[:] = kept
            self._by_session = {}
            for index, row in enumerate(self.rows):
                self._by_session.setdefault(row[1], []).append(index)
            self.heads.pop(session_id, None)
            for projection in self._projections:
                projection.forget(self, session_id)
            return removed

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        return self._listeners.add(listener)

    def close(self) -> None:
        with self._committer.exclusive(), self._lock:
            self._closed = True
