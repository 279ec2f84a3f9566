"""In-memory twin of the SQLite store, for fast tests (as hypothesis keeps one for its examples).

It keeps the very rows the SQLite table would hold, so numbering, hashing, idempotency and
chain checks behave identically; the conformance suite runs against both.
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

from .appending import (
    INLINE_BUDGET_S,
    GroupAppends,
    GroupCommitter,
    Head,
    Listener,
    PreparedBatch,
    Subscribers,
    write_group,
)
from .chain import ChainReport, listed, verified_stream, verify_chain
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
from .errors import StoreClosed
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
        inline_budget_s: float = INLINE_BUDGET_S,
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
        # Nothing but this process writes here: a lone coroutine's batch may always commit
        # on its loop's thread (D196).
        self._committer: GroupCommitter[PreparedBatch, AppendResult] = GroupCommitter(
            self._commit, commit_now=self._commit, inline_budget_s=inline_budget_s
        )

    @property
    def url(self) -> str:
        return "memory://"

    def _commit(self, group: Sequence[PreparedBatch]) -> list[AppendResult | BaseException]:
        with self._lock:
            if self._closed:
                raise StoreClosed("the store is closed")
            heads = {
                sid: (h.version, h.head_hash) if (h := self.heads.get(sid)) else (0, GENESIS_HASH)
                for sid in dict.fromkeys(p.batch.session_id for p in group)
            }
            now = now_text(self._clock)
            done = write_group(
                group, heads=heads, position=self._high_water, now=now,
                earlier_rows=self._earlier_rows,
                write=lambda rows, written, events: self._write(rows, written, events, now),
                upcasters=self._upcasters,
            )
            committed = [
                e for o in done.outcomes if isinstance(o, AppendResult) and not o.replayed
                for e in o.events
            ]
            if committed:
                self._listeners.publish(committed)
            return done.outcomes

    def _earlier_rows(self, session_id: str, key: str) -> list[RawRow]:
        return [
            row for i in self._by_session.get(session_id, [])
            if (row := self.rows[i])[10] == key
        ]

    def _write(
        self,
        rows: list[RawRow],
        written: dict[str, Head],
        events: list[RecordedEvent],
        now: str,
    ) -> None:
        start = len(self.rows)
        self.rows.extend(rows)
        for index, row in enumerate(rows, start):
            self._by_session.setdefault(row[1], []).append(index)
        for session_id, (version, head_hash) in written.items():
            head = self.heads.get(session_id)
            self.heads[session_id] = SessionHead(
                session_id, version, head_hash, head.created_at if head else now, now
            )
        self._high_water = rows[-1][0]
        for projection in self._projections:
            projection.apply(self, events)

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

    def verify_and_read(
        self, session_id: str
    ) -> tuple[ChainReport, list[RecordedEvent] | None]:
        """:func:`~eventlog.chain.listed` over :meth:`verify_and_stream`."""
        return listed(self.verify_and_stream(session_id))

    def verify_and_stream(
        self, session_id: str
    ) -> tuple[ChainReport, Iterator[RecordedEvent] | None]:
        """:func:`~eventlog.chain.verified_stream` over one read of the session's rows."""
        head = self.session_head(session_id)
        return verified_stream(
            session_id, list(self.raw_session(session_id)),
            head=(head.version, head.head_hash) if head else None, upcasters=self._upcasters,
        )

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
        self._committer.stop()  # the async writer thread, once it answered what is queued
