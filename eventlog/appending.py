"""Backend-neutral steps of an append: encode, check the version, chain the new rows.

Backends call these inside their transaction so every store numbers, hashes and refuses
batches the same way; only reading and writing rows differs between them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .catalog import CATALOG
from .encoding import session_hasher
from .envelope import (
    AppendBatch,
    AppendResult,
    NewEvent,
    RawRow,
    RecordedEvent,
    decode_row,
    encode_event,
)
from .errors import ConcurrencyConflict, EventLogError, UnknownEventType
from .group_commit import GroupCommitter
from .upcasting import UpcasterRegistry

__all__ = [
    "GroupAppends",
    "Listener",
    "PreparedBatch",
    "check_expected",
    "earlier_batch",
    "plan_rows",
    "prepare",
    "result_from_rows",
    "typed_outcomes",
]

Listener = Callable[[Sequence[RecordedEvent]], None]
"""Called after each commit with the committed events, in global order.

A store's own commits are told on the committing thread. On PostgreSQL a listener also hears
the commits of other processes (and other store instances) on the same database and schema,
from the store's listening thread, soon after they commit (D116): each event once, those of
one process in global order, though another process's events may come after a later commit
of this one. Listeners that only wake a reader of the log from its cursor need not care
where an event came from."""



@dataclass(frozen=True, slots=True)
class PreparedBatch:
    """A batch with its payloads already encoded (done before taking the writer lock)."""

    batch: AppendBatch
    data_json: tuple[str, ...]


def prepare(batch: AppendBatch) -> PreparedBatch:
    """Encode every payload of the batch to canonical JSON.

    Only catalog types may be written: anything else could never be read back.
    """
    encoded: list[str] = []
    for new in batch.events:
        event = new.event
        if CATALOG.get(event.type) is not type(event):
            raise UnknownEventType(event.type, session_id=batch.session_id)
        encoded.append(encode_event(event))
    return PreparedBatch(batch, tuple(encoded))


def earlier_batch(
    conn: Any,
    sql: str,
    prepared: PreparedBatch,
    keyed: dict[tuple[str, str], AppendResult],
    upcasters: UpcasterRegistry,
) -> AppendResult | None:
    """The earlier batch with the same idempotency key (in this group or the log), if any.

    ``sql`` selects a session's rows with one idempotency key in ``seq`` order, in the
    backend's placeholder style; ``conn`` is the backend's DB-API connection.
    """
    batch = prepared.batch
    if batch.idempotency_key is None:
        return None
    earlier_here = keyed.get((batch.session_id, batch.idempotency_key))
    if earlier_here is not None:
        return AppendResult(batch.session_id, earlier_here.events, replayed=True)
    rows = conn.execute(sql, (batch.session_id, batch.idempotency_key)).fetchall()
    if not rows:
        return None
    events = tuple(decode_row(r, upcasters=upcasters) for r in rows)
    return AppendResult(batch.session_id, events, replayed=True)


def check_expected(batch: AppendBatch, version: int) -> None:
    """Raise ConcurrencyConflict unless the session is at the version the caller expects."""
    if batch.expected_version is not None and batch.expected_version != version:
        raise ConcurrencyConflict(
            batch.session_id, expected=batch.expected_version, actual=version
        )


def plan_rows(
    prepared: PreparedBatch,
    *,
    version: int,
    prev_hash: str,
    next_position: int,
    recorded_at: str,
) -> list[RawRow]:
    """The rows that extend the session's chain from ``version``/``prev_hash``.

    :func:`eventlog.envelope.build_row` per event, unrolled: this loop runs for every event
    ever appended.
    """
    batch = prepared.batch
    session_id = batch.session_id
    key = batch.idempotency_key
    rows: list[RawRow] = []
    hasher = session_hasher(session_id, recorded_at)
    seq = version
    position = next_position
    for new, data_json in zip(batch.events, prepared.data_json, strict=True):
        seq += 1
        event = new.event
        event_type = event.type
        schema_version = event.schema_version
        actor, causation_id, correlation_id = new.actor, new.causation_id, new.correlation_id
        digest = hasher(
            prev_hash, seq, event_type, schema_version, data_json, actor, causation_id,
            correlation_id,
        )
        rows.append((
            position, session_id, seq, event_type, schema_version, data_json, recorded_at,
            actor, causation_id, correlation_id, key, prev_hash, digest,
        ))
        prev_hash = digest
        position += 1
    return rows


def result_from_rows(
    prepared: PreparedBatch, rows: Sequence[RawRow], *, replayed: bool = False
) -> AppendResult:
    """Envelopes for freshly written rows, reusing the caller's payload objects."""
    events = tuple(
        RecordedEvent(
            r[0], r[1], r[2], r[3], r[4], new.event, r[6], r[7], r[8], r[9], r[11], r[12]
        )
        for r, new in zip(rows, prepared.batch.events, strict=False)
    )
    return AppendResult(prepared.batch.session_id, events, replayed=replayed)


def typed_outcomes(
    outcomes: Sequence[AppendResult | BaseException],
) -> list[AppendResult | EventLogError]:
    """Per-batch outcomes; anything but a log error (a broken disk, a bug) is raised."""
    typed: list[AppendResult | EventLogError] = []
    for outcome in outcomes:
        if isinstance(outcome, BaseException) and not isinstance(outcome, EventLogError):
            raise outcome
        typed.append(outcome)
    return typed


class GroupAppends:
    """``append`` and ``append_many`` of every backend: encode the payloads on the caller's
    thread, then hand the batches to the store's group committer (DESIGN "Writing")."""

    _committer: GroupCommitter[PreparedBatch, AppendResult]

    def append(
        self,
        session_id: str,
        events: Sequence[NewEvent],
        *,
        expected_version: int | None = None,
        idempotency_key: str | None = None,
    ) -> AppendResult:
        batch = AppendBatch(session_id, tuple(events), expected_version, idempotency_key)
        return self._committer.submit(prepare(batch))

    def append_many(self, batches: Sequence[AppendBatch]) -> list[AppendResult | EventLogError]:
        return typed_outcomes(self._committer.submit_many([prepare(b) for b in batches]))
