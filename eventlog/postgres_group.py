"""One group of batches written in the PostgreSQL store's append transaction.

The same steps as :func:`eventlog.sqlite.write_group`: the heads of the group's sessions are read in
one ``SELECT … = ANY``, every batch is checked (idempotency key, expected version) and chained
in Python before anything is written, so a refused batch fails alone; then the rows and heads
go in with pipelined ``executemany`` and each inline projection folds the group's events. The
caller holds the append lock (D109) and owns the transaction.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from .appending import (
    PreparedBatch,
    check_expected,
    earlier_batch,
    plan_rows,
    result_from_rows,
)
from .encoding import GENESIS_HASH
from .envelope import AppendResult, RawRow, RecordedEvent
from .errors import EventLogError
from .inline import InlineProjection
from .postgres_schema import COLUMNS, INSERT, UPSERT_HEAD, check_text, storable
from .sqlite import GroupWrite
from .upcasting import UpcasterRegistry

if TYPE_CHECKING:
    import psycopg

__all__ = ["copy_rows", "write_group"]

Head = tuple[int, str]


def _heads(conn: psycopg.Connection, group: Sequence[PreparedBatch]) -> dict[str, Head]:
    sessions = list(dict.fromkeys(p.batch.session_id for p in group))
    sessions = [s for s in sessions if storable(s)]
    heads: dict[str, Head] = {s: (0, GENESIS_HASH) for s in sessions}
    rows = conn.execute(
        "SELECT session_id, version, head_hash FROM streams WHERE session_id = ANY(%s)",
        (sessions,),
    ).fetchall()
    for session_id, version, head_hash in rows:
        heads[session_id] = (int(version), head_hash)
    return heads


_REPLAY = (
    f"SELECT {COLUMNS} FROM events WHERE session_id = %s AND idempotency_key = %s "
    "ORDER BY seq"
)
"""The rows of an earlier batch with the same idempotency key."""


def write_group(
    conn: psycopg.Connection,
    group: Sequence[PreparedBatch],
    *,
    position: int,
    now: str,
    upcasters: UpcasterRegistry,
    projections: Sequence[InlineProjection],
) -> GroupWrite:
    """Check, chain and write ``group`` after ``position`` inside the caller's transaction."""
    heads = _heads(conn, group)
    outcomes: list[AppendResult | BaseException] = []
    rows: list[RawRow] = []
    written: dict[str, Head] = {}
    keyed: dict[tuple[str, str], AppendResult] = {}
    events: list[RecordedEvent] = []
    for prepared in group:
        batch = prepared.batch
        try:
            check_text(prepared)
            replayed = earlier_batch(conn, _REPLAY, prepared, keyed, upcasters)
            if replayed is not None:
                outcomes.append(replayed)
                continue
            version, prev_hash = heads[batch.session_id]
            check_expected(batch, version)
        except EventLogError as exc:
            outcomes.append(exc)
            continue
        batch_rows = plan_rows(
            prepared, version=version, prev_hash=prev_hash, next_position=position + 1,
            recorded_at=now,
        )
        result = result_from_rows(prepared, batch_rows)
        position = batch_rows[-1][0]
        heads[batch.session_id] = written[batch.session_id] = (
            batch_rows[-1][2], batch_rows[-1][12]
        )
        if batch.idempotency_key is not None:
            keyed[(batch.session_id, batch.idempotency_key)] = result
        rows.extend(batch_rows)
        events.extend(result.events)
        outcomes.append(result)
    if rows:
        with conn.cursor() as cursor:
            cursor.executemany(INSERT, rows)
            cursor.executemany(
                UPSERT_HEAD, [(s, v, h, now, now) for s, (v, h) in written.items()]
            )
        for projection in projections:
            projection.apply(conn, events)
    return GroupWrite(outcomes, position)


def copy_rows(conn: psycopg.Connection, rows: Iterable[RawRow]) -> dict[str, Head]:
    """``COPY`` rows verbatim, numbered 1, 2, 3 … in the order given; write each session's
    head (version, head hash, first and last time). Returns the heads written."""
    heads: dict[str, Head] = {}
    times: dict[str, tuple[str, str]] = {}
    position = 0
    with conn.cursor() as cursor:
        with cursor.copy(f"COPY events ({COLUMNS}) FROM STDIN") as copy:
            for row in rows:
                position += 1
                copy.write_row((position, *row[1:]))
                sid = row[1]
                heads[sid] = (row[2], row[12])
                first = times.get(sid)
                times[sid] = (row[6] if first is None else first[0], row[6])
        cursor.executemany(
            UPSERT_HEAD, [(s, v, h, *times[s]) for s, (v, h) in heads.items()]
        )
    return heads
