"""The SQLite file's tables and the SQL text the store runs against them (SPEC EL-9).

``events`` is the published table; ``streams`` holds each session's head (version, head hash,
times); ``meta`` the purge high-water mark; ``projection_versions`` the schema version of each
inline projection's tables. Tables are created with sqlite-utils so other tools see plain,
documented tables.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from functools import lru_cache
from typing import Any

import sqlite_utils

from .envelope import RawRow
from .errors import DescriptorsExhausted, StorageFault
from .readers import descriptors_exhausted

__all__ = [
    "COLUMNS",
    "HIGH_WATER",
    "INSERT",
    "UPSERT_HEAD",
    "insert_events_sql",
    "upsert_heads_sql",
    "chunked_rows",
    "create_schema",
    "is_busy",
    "storage_fault",
    "text_or_bytes",
]

COLUMNS = (
    "global_position, session_id, seq, type, schema_version, data, recorded_at, actor, "
    "causation_id, correlation_id, idempotency_key, prev_hash, hash"
)
INSERT = f"INSERT INTO events ({COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)"
UPSERT_HEAD = (
    "INSERT INTO streams (session_id, version, head_hash, created_at, updated_at) "
    "VALUES (?,?,?,?,?) ON CONFLICT(session_id) DO UPDATE SET version=excluded.version, "
    "head_hash=excluded.head_hash, updated_at=excluded.updated_at"
)
_UPSERT_HEAD_PREFIX = (
    "INSERT INTO streams (session_id, version, head_hash, created_at, updated_at) "
)
_UPSERT_HEAD_SUFFIX = (
    " ON CONFLICT(session_id) DO UPDATE SET version=excluded.version, "
    "head_hash=excluded.head_hash, updated_at=excluded.updated_at"
)


@lru_cache(maxsize=64)
def insert_events_sql(rows: int) -> str:
    """One ``INSERT`` of ``rows`` event rows: one statement step however many rows."""
    return f"INSERT INTO events ({COLUMNS}) VALUES " + ",".join(
        ["(?,?,?,?,?,?,?,?,?,?,?,?,?)"] * rows
    )


@lru_cache(maxsize=64)
def upsert_heads_sql(heads: int) -> str:
    """One upsert of ``heads`` (session_id, version, head_hash, created_at, updated_at)."""
    return _UPSERT_HEAD_PREFIX + "VALUES " + ",".join(["(?,?,?,?,?)"] * heads) + _UPSERT_HEAD_SUFFIX


HIGH_WATER = (
    "SELECT max(coalesce((SELECT max(global_position) FROM events), 0), "
    "coalesce((SELECT value FROM meta WHERE key = 'purged_through'), 0))"
)
"""The last global position ever used: purged positions are never handed out again."""


def create_schema(db: sqlite_utils.Database) -> None:
    """Create the ``events`` table of SPEC EL-9 and the per-session head records."""
    db["events"].create(  # type: ignore[union-attr]
        {
            "global_position": int, "session_id": str, "seq": int, "type": str,
            "schema_version": int, "data": str, "recorded_at": str, "actor": str,
            "causation_id": str, "correlation_id": str, "idempotency_key": str,
            "prev_hash": str, "hash": str,
        },
        pk="global_position",
        not_null={"session_id", "seq", "type", "schema_version", "data", "recorded_at",
                  "actor", "prev_hash", "hash"},
        if_not_exists=True,
    )
    db["events"].create_index(  # type: ignore[union-attr]
        ["session_id", "seq"], index_name="events_session_seq", unique=True,
        if_not_exists=True,
    )
    db.execute(
        "CREATE INDEX IF NOT EXISTS events_idempotency ON events (session_id, idempotency_key)"
        " WHERE idempotency_key IS NOT NULL"
    )
    db["meta"].create(  # type: ignore[union-attr]
        {"key": str, "value": int}, pk="key", not_null={"value"}, if_not_exists=True,
    )
    db["projection_versions"].create(  # type: ignore[union-attr]
        {"name": str, "version": int}, pk="name", not_null={"version"}, if_not_exists=True,
    )
    db["streams"].create(  # type: ignore[union-attr]
        {"session_id": str, "version": int, "head_hash": str, "created_at": str,
         "updated_at": str},
        pk="session_id",
        not_null={"version", "head_hash", "created_at", "updated_at"},
        if_not_exists=True,
    )


def chunked_rows(conn: sqlite3.Connection, sql: str, size: int) -> Iterator[list[RawRow]]:
    """Pages of rows by global position; ``sql`` takes (after, limit)."""
    after = 0
    while rows := fetch_rows(conn, sql, (after, size)):
        yield rows
        after = rows[-1][0]


def fetch_rows(conn: sqlite3.Connection, sql: str, params: tuple[Any, ...]) -> list[RawRow]:
    """Every row of ``sql``; a page holding TEXT that is not UTF-8 (bit rot, another tool)
    is read again with such text as bytes, for the reader to report (SPEC EG-1)."""
    try:
        return conn.execute(sql, params).fetchall()
    except sqlite3.OperationalError as exc:
        if not str(exc).startswith("Could not decode to UTF-8"):
            raise
    conn.text_factory = text_or_bytes
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.text_factory = str


def text_or_bytes(raw: bytes) -> str | bytes:
    """Decode TEXT as UTF-8, leaving undecodable (corrupted) text as bytes."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw


def is_busy(exc: sqlite3.OperationalError) -> bool:
    text = str(exc).lower()
    return "locked" in text or "busy" in text


_STORAGE_CODES = {
    8: "SQLITE_READONLY", 10: "SQLITE_IOERR", 13: "SQLITE_FULL", 14: "SQLITE_CANTOPEN",
}
"""Primary result codes that mean the disk refused a read or write (the low byte of the
extended code, so SQLITE_IOERR_WRITE counts as SQLITE_IOERR)."""
_OPENING_CODES = frozenset({10, 14})
"""SQLITE_IOERR and SQLITE_CANTOPEN: what opening a file without a descriptor left gives."""
_STORAGE_TEXTS = (
    "disk i/o error", "database or disk is full", "readonly database",
    "unable to open database file",
)


def storage_fault(
    path: object, exc: sqlite3.OperationalError
) -> StorageFault | DescriptorsExhausted | None:
    """The :class:`StorageFault` that ``exc`` stands for, or None for any other error.

    SQLite says "unable to open database file" (``SQLITE_CANTOPEN``) or "disk I/O error" also
    when the process has no file descriptor left: that is :class:`DescriptorsExhausted`.
    """
    code: int | None = getattr(exc, "sqlite_errorcode", None)
    reason = str(exc)
    if code is not None:
        if code & 0xFF not in _STORAGE_CODES:
            return None
    elif not any(text in reason.lower() for text in _STORAGE_TEXTS):
        return None
    if (code is None or code & 0xFF in _OPENING_CODES) and descriptors_exhausted(exc):
        return DescriptorsExhausted(f"{path}: {reason}: no file descriptor left")
    name: str | None = getattr(exc, "sqlite_errorname", None)
    if name is None and code is not None:
        name = _STORAGE_CODES[code & 0xFF]
    suffix = f" ({name})" if name else ""
    return StorageFault(f"{path}: {reason}{suffix}", reason=reason, error_name=name)
