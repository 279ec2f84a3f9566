"""One group of batches written with a fixed handful of statements, however large the group.

The SQLite store's writer hands a whole group (DESIGN "Writing") to :func:`write_group` inside
its ``BEGIN IMMEDIATE`` transaction. Every batch is checked and chained in Python against the
session heads — cached by the store, the missing ones fetched in one ``SELECT … IN`` — before
anything is written, so a refused batch fails alone without a savepoint. Then the new rows go
in with multi-row ``INSERT``s, the heads with multi-row upserts, and each inline projection
folds the group's events in one call. Few statement *steps* matter beyond their own cost:
each step releases the GIL (``executemany`` steps once per row), and with many writer threads
waiting, getting the GIL back is what made large groups slow.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import chain

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
from .sqlite_schema import COLUMNS, insert_events_sql, upsert_heads_sql
from .upcasting import UpcasterRegistry

__all__ = ["GroupWrite", "write_group"]

Head = tuple[int, str]
_IN_CHUNK = 500
_ROWS_PER_STATEMENT = 64
"""Rows per multi-row statement: 13 x 64 = 832 variables, far below SQLite's limit, and few
distinct statement texts for the connection's statement cache."""


@dataclass(slots=True)
class GroupWrite:
    """What a group did: per batch its result or the log error it alone failed with."""

    outcomes: list[AppendResult | BaseException]
    last_position: int


def _load_heads(
    conn: sqlite3.Connection, heads: dict[str, Head], group: Sequence[PreparedBatch]
) -> None:
    missing = [s for s in dict.fromkeys(p.batch.session_id for p in group) if s not in heads]
    if not missing:
        return
    for start in range(0, len(missing), _IN_CHUNK):
        part = missing[start : start + _IN_CHUNK]
        marks = ",".join("?" * len(part))
        for session_id, version, head_hash in conn.execute(
            f"SELECT session_id, version, head_hash FROM streams WHERE session_id IN ({marks})",
            part,
        ):
            heads[session_id] = (version, head_hash)
        for session_id in part:
            heads.setdefault(session_id, (0, GENESIS_HASH))


_REPLAY = (
    f"SELECT {COLUMNS} FROM events WHERE session_id = ? AND idempotency_key = ? "
    "ORDER BY seq"
)
"""The rows of an earlier batch with the same idempotency key."""


def _insert(conn: sqlite3.Connection, rows: list[RawRow]) -> None:
    if len(rows) == 1:
        conn.execute(insert_events_sql(1), rows[0])
        return
    for start in range(0, len(rows), _ROWS_PER_STATEMENT):
        part = rows[start : start + _ROWS_PER_STATEMENT]
        conn.execute(insert_events_sql(len(part)), list(chain.from_iterable(part)))


def _upsert_heads(conn: sqlite3.Connection, written: dict[str, Head], now: str) -> None:
    if len(written) == 1:
        ((session_id, (version, head_hash)),) = written.items()
        conn.execute(upsert_heads_sql(1), (session_id, version, head_hash, now, now))
        return
    heads = list(written.items())
    for start in range(0, len(heads), _ROWS_PER_STATEMENT):
        part = heads[start : start + _ROWS_PER_STATEMENT]
        values = [x for s, (v, h) in part for x in (s, v, h, now, now)]
        conn.execute(upsert_heads_sql(len(part)), values)


def write_group(
    conn: sqlite3.Connection,
    group: Sequence[PreparedBatch],
    *,
    heads: dict[str, Head],
    position: int,
    now: str,
    upcasters: UpcasterRegistry,
    projections: Sequence[InlineProjection],
) -> GroupWrite:
    """Check, chain and write ``group`` after ``position``; ``heads`` is updated in place.

    The caller owns the transaction: on any exception it rolls back and forgets ``heads``.
    """
    _load_heads(conn, heads, group)
    outcomes: list[AppendResult | BaseException] = []
    rows: list[RawRow] = []
    written: dict[str, Head] = {}
    keyed: dict[tuple[str, str], AppendResult] = {}
    events: list[RecordedEvent] = []
    for prepared in group:
        batch = prepared.batch
        try:
            if batch.idempotency_key is not None:
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
        last = batch_rows[-1]
        position = last[0]
        heads[batch.session_id] = written[batch.session_id] = (last[2], last[12])
        if batch.idempotency_key is not None:
            keyed[(batch.session_id, batch.idempotency_key)] = result
        rows.extend(batch_rows)
        if projections:
            events.extend(result.events)
        outcomes.append(result)
    if rows:
        _insert(conn, rows)
        _upsert_heads(conn, written, now)
        for projection in projections:
            projection.apply(conn, events)
    return GroupWrite(outcomes, position)
