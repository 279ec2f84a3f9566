"""What the PostgreSQL store does in :func:`eventlog.appending.write_group`.

The heads of the group's sessions are read in one ``SELECT … = ANY``; the rows and heads go in
with pipelined ``executemany`` and each inline projection folds the group's events. The caller
holds the append lock (D109) and owns the transaction.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from .appending import Head, PreparedBatch
from .encoding import GENESIS_HASH
from .envelope import RawRow, RecordedEvent
from .inline import InlineProjection
from .postgres_schema import COLUMNS, INSERT, UPSERT_HEAD, storable

if TYPE_CHECKING:
    import psycopg

__all__ = ["REPLAY", "copy_rows", "group_heads", "write_rows"]


def group_heads(conn: psycopg.Connection, group: Sequence[PreparedBatch]) -> dict[str, Head]:
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


REPLAY = (
    f"SELECT {COLUMNS} FROM events WHERE session_id = %s AND idempotency_key = %s "
    "ORDER BY seq"
)
"""The rows of an earlier batch with the same idempotency key."""


def write_rows(
    conn: psycopg.Connection,
    rows: list[RawRow],
    written: dict[str, Head],
    events: list[RecordedEvent],
    *,
    now: str,
    projections: Sequence[InlineProjection],
) -> None:
    """A group's new rows and heads, and its events folded into the inline projections."""
    with conn.cursor() as cursor:
        cursor.executemany(INSERT, rows)
        cursor.executemany(UPSERT_HEAD, [(s, v, h, now, now) for s, (v, h) in written.items()])
    for projection in projections:
        projection.apply(conn, events)


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
