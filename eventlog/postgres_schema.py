"""The PostgreSQL tables and the SQL text the store runs against them (SPEC EL-8, EL-9).

The same tables as the SQLite file, with PostgreSQL's types: ``events`` (EL-9's columns,
``global_position BIGINT PRIMARY KEY``, ``UNIQUE (session_id, seq)``), ``streams`` (each
session's head), ``meta`` (the purge high-water mark) and ``projection_versions``. Every
statement uses psycopg's ``%s`` placeholders. Parsing the store URL lives here too.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from .appending import PreparedBatch
from .errors import EventLogError, InvalidStoreUrl

__all__ = [
    "APPEND_LOCK",
    "COLUMNS",
    "HIGH_WATER",
    "INSERT",
    "SCHEMA",
    "UPSERT_HEAD",
    "ImportRefused",
    "TextNotStorable",
    "check_text",
    "storable",
    "parse_url",
]

COLUMNS = (
    "global_position, session_id, seq, type, schema_version, data, recorded_at, actor, "
    "causation_id, correlation_id, idempotency_key, prev_hash, hash"
)
INSERT = f"INSERT INTO events ({COLUMNS}) VALUES ({', '.join(['%s'] * 13)})"
UPSERT_HEAD = (
    "INSERT INTO streams (session_id, version, head_hash, created_at, updated_at) "
    "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (session_id) DO UPDATE SET "
    "version = excluded.version, head_hash = excluded.head_hash, "
    "updated_at = excluded.updated_at"
)
HIGH_WATER = (
    "SELECT greatest(coalesce((SELECT max(global_position) FROM events), 0), "
    "coalesce((SELECT value FROM meta WHERE key = 'purged_through'), 0))"
)
"""The last global position ever used: purged positions are never handed out again."""

APPEND_LOCK = 0x5E55_1ED6
"""The ``pg_advisory_xact_lock`` key every append transaction takes first (D109): appends are
serialised, so global positions are handed out in commit order."""

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS events ("
    "global_position BIGINT PRIMARY KEY, session_id TEXT NOT NULL, seq BIGINT NOT NULL, "
    "type TEXT NOT NULL, schema_version INTEGER NOT NULL, data TEXT NOT NULL, "
    "recorded_at TEXT NOT NULL, actor TEXT NOT NULL, causation_id TEXT, "
    "correlation_id TEXT, idempotency_key TEXT, prev_hash TEXT NOT NULL, hash TEXT NOT NULL, "
    "CONSTRAINT events_session_seq UNIQUE (session_id, seq))",
    "CREATE INDEX IF NOT EXISTS events_idempotency ON events (session_id, idempotency_key) "
    "WHERE idempotency_key IS NOT NULL",
    "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value BIGINT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS projection_versions "
    "(name TEXT PRIMARY KEY, version INTEGER NOT NULL)",
    "CREATE TABLE IF NOT EXISTS streams (session_id TEXT PRIMARY KEY, "
    "version BIGINT NOT NULL, head_hash TEXT NOT NULL, created_at TEXT NOT NULL, "
    "updated_at TEXT NOT NULL)",
)

_SCHEMA_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


def parse_url(url: str) -> tuple[str, str | None]:
    """``postgresql://…[?schema=name]`` → the libpq URL and the schema to use, if any.

    ``schema`` is ours (the store's tables live in that schema, created if missing); every
    other query parameter is libpq's and passed on.
    """
    parts = urlsplit(url)
    if parts.scheme != "postgresql":
        raise InvalidStoreUrl(f"not a postgresql URL: {url!r}")
    options = parse_qsl(parts.query, keep_blank_values=True)
    schema = None
    kept: list[tuple[str, Any]] = []
    for key, value in options:
        if key == "schema":
            if not _SCHEMA_NAME.match(value):
                raise InvalidStoreUrl(f"schema must be a lower-case SQL name, not {value!r}")
            schema = value
        else:
            kept.append((key, value))
    return urlunsplit(parts._replace(query=urlencode(kept))), schema


class TextNotStorable(EventLogError, ValueError):
    """PostgreSQL's ``text`` holds only valid UTF-8 without U+0000: an envelope string with
    U+0000 or a lone surrogate is refused and nothing of its batch is appended (D110).
    Payloads are unaffected: canonical JSON writes U+0000 as ``\\u0000``."""


def check_text(prepared: PreparedBatch) -> None:
    """Raise :class:`TextNotStorable` if an envelope string of the batch cannot be stored."""
    batch = prepared.batch
    texts = [batch.session_id, batch.idempotency_key]
    for new in batch.events:
        texts += (new.actor, new.causation_id, new.correlation_id)
    for text in texts:
        if text is not None and not storable(text):
            raise TextNotStorable(
                f"session {batch.session_id!r}: PostgreSQL text cannot hold {text!r} "
                "(U+0000 or a lone surrogate)"
            )


def storable(text: str) -> bool:
    """Whether PostgreSQL ``text`` can hold ``text`` (valid UTF-8, no U+0000)."""
    if "\x00" in text:
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


class ImportRefused(EventLogError):
    """A copy into a PostgreSQL store was refused and rolled back: the store was not empty,
    or a chain did not verify on arrival (``eventlog.migrate``)."""
