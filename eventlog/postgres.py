"""The scale-out backend: one PostgreSQL database shared by any number of processes (EL-8).

This module answers everything the store does with the database: its tables, SQL text and URL
(:func:`parse_url`), the rows and heads of a group written under the append lock (D109), the
verbatim copy of another log into it (:func:`copy_rows`), and the commits of other processes
heard through ``LISTEN/NOTIFY`` (:class:`CommitFollower`, D116). The store itself is
:class:`PostgresEventStore`; psycopg 3 (the ``postgres`` extra) is imported only when one opens.
"""

from __future__ import annotations

import logging
import re
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from .appending import (
    GroupAppends,
    GroupCommitter,
    Head,
    Listener,
    PreparedBatch,
    Subscribers,
    write_group,
)
from .chain import ChainReport, listed, verified_pages, verify_chain
from .encoding import GENESIS_HASH
from .envelope import (
    AppendResult,
    Clock,
    RawRow,
    RecordedEvent,
    SessionHead,
    SystemClock,
    decode_rows,
    now_text,
    paged_rows,
)
from .errors import (
    DescriptorsExhausted,
    EventLogError,
    InvalidStoreUrl,
    StorageFault,
    StoreClosed,
    descriptors_exhausted,
)
from .inline import REBUILD_CHUNK, InlineProjection, Progress
from .sqlite import ReaderPool
from .upcasting import UpcasterRegistry, default_upcasters

if TYPE_CHECKING:
    import psycopg

__all__ = [
    "APPEND_LOCK",
    "COLUMNS",
    "HIGH_WATER",
    "INSERT",
    "SCHEMA",
    "UPSERT_HEAD",
    "CommitFollower",
    "ImportRefused",
    "PostgresEventStore",
    "TextNotStorable",
    "channel_for",
    "check_text",
    "copy_rows",
    "notify_payload",
    "parse_url",
    "storable",
]


# -- the store ---------------------------------------------------------------------------------
#
# Same protocol and guarantees as :mod:`eventlog.sqlite`. Appends go through a
# :class:`GroupCommitter` (concurrent appends in one process share a transaction); each group's
# transaction first takes a transaction-scoped advisory lock (``pg_advisory_xact_lock``, D109),
# so appends from every process are serialised and global positions are handed out in commit
# order: a reader of the global stream never sees position *n + 1* before *n*, and never skips
# an event that commits late. Inline projections are updated in that transaction (their tables
# in :mod:`projections`). Readers borrow one of a few pooled autocommit connections
# (:class:`eventlog.sqlite.ReaderPool`). Each append transaction also sends a ``NOTIFY``, and
# while the store has listeners a thread ``LISTEN``s for it, so they hear other processes'
# commits too (:class:`CommitFollower`, D116).

T = TypeVar("T")
_PAGE = 2000
_HEAD_COLUMNS = "session_id, version, head_hash, created_at, updated_at"


def _psycopg() -> Any:
    try:
        import psycopg
    except ImportError as exc:  # pragma: no cover - depends on the installed extras
        raise InvalidStoreUrl(
            "a postgresql:// store needs psycopg: pip install 'sessionledger[postgres]'"
        ) from exc
    return psycopg


class PostgresEventStore(GroupAppends):
    """Event store in a PostgreSQL database (``postgresql://…[?schema=name]``)."""

    def __init__(
        self,
        url: str,
        *,
        clock: Clock | None = None,
        upcasters: UpcasterRegistry = default_upcasters,
        projections: Sequence[InlineProjection] = (),
    ) -> None:
        self._url = url
        self._conninfo, self._schema = parse_url(url)
        self._clock = clock or SystemClock()
        self._upcasters = upcasters
        self._projections = tuple(projections)
        self._listeners: Subscribers[Sequence[RecordedEvent]] = Subscribers()
        self._closed = False
        self._token = uuid.uuid4().hex[:12]
        self._follower: CommitFollower | None = None
        self._follow_lock = threading.Lock()
        self._writer = self._connect(create_schema=True)
        try:
            self._in_lock(self._create)
            schema = self._writer.execute("SELECT current_schema()").fetchone()
            self._channel = channel_for(str(schema[0] if schema else "public"))
        except BaseException:
            self._writer.close()
            raise
        self._committer: GroupCommitter[PreparedBatch, AppendResult] = GroupCommitter(
            self._commit
        )
        self._readers: ReaderPool[psycopg.Connection] = ReaderPool(
            self._connect, close=lambda conn: conn.close(),
            usable=lambda conn: not (conn.closed or conn.broken),
        )

    @property
    def url(self) -> str:
        return self._url

    def _connect(self, *, create_schema: bool = False) -> psycopg.Connection:
        driver = _psycopg()
        try:
            conn: psycopg.Connection = driver.connect(self._conninfo, autocommit=True)
        except driver.OperationalError as exc:
            raise self._fault(exc) from exc
        if self._schema is not None:
            if create_schema:
                conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{self._schema}"')
            conn.execute(f'SET search_path TO "{self._schema}"')
        return conn

    def _in_lock(self, action: Callable[[psycopg.Connection], T]) -> T:
        """Run ``action`` in a write transaction holding the append lock (D109).

        A lost server connection is a :class:`StorageFault` (the transaction is gone, nothing
        was appended); the next write connects again.
        """
        driver = _psycopg()
        try:
            if self._writer.broken or self._writer.closed:
                self._writer = self._connect()
            conn = self._writer
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (APPEND_LOCK,))
                return action(conn)
        except driver.OperationalError as exc:
            raise self._fault(exc) from exc

    def _fault(self, exc: Exception) -> StorageFault | DescriptorsExhausted:
        reason = str(exc).strip() or exc.__class__.__name__
        if descriptors_exhausted(exc):  # "could not create socket: Too many open files"
            return DescriptorsExhausted(f"PostgreSQL: {reason}: no file descriptor left")
        name = getattr(exc, "sqlstate", None)
        where = self._url.split("@")[-1]  # no credentials in messages
        medium = _medium(name)
        return StorageFault(f"PostgreSQL at {where}: {reason}", reason=reason, error_name=name,
                            medium=medium)

    def _create(self, conn: psycopg.Connection) -> None:
        for statement in SCHEMA:
            conn.execute(statement)
        recorded: dict[str, int] = dict(
            conn.execute("SELECT name, version FROM projection_versions").fetchall()
        )
        stale = [
            p for p in self._projections
            if recorded.get(p.name) != p.version or not p.is_present(conn)
        ]
        if stale:
            self._refold(conn, stale, progress=None)

    # -- writing ---------------------------------------------------------------------------

    def _commit(self, group: Sequence[PreparedBatch]) -> list[AppendResult | BaseException]:
        if self._closed:
            raise StoreClosed("the store is closed")
        now = now_text(self._clock)

        follower = self._follower
        committed: list[RecordedEvent] = []

        def write(conn: psycopg.Connection) -> list[AppendResult | BaseException]:
            (position,) = conn.execute(HIGH_WATER).fetchone()  # type: ignore[misc]
            done = write_group(
                group, heads=_group_heads(conn, group), position=int(position), now=now,
                earlier_rows=lambda session_id, key: conn.execute(
                    _REPLAY, (session_id, key)
                ).fetchall(),
                write=lambda rows, written, events: _write_rows(
                    conn, rows, written, events, now=now, projections=self._projections
                ),
                upcasters=self._upcasters, check=check_text,
            )
            committed[:] = [
                e for o in done.outcomes if isinstance(o, AppendResult) and not o.replayed
                for e in o.events
            ]
            if committed:  # delivered at commit, to every process listening (D116)
                if follower is not None:
                    follower.expect(committed)
                conn.execute("SELECT pg_notify(%s, %s)",
                             (self._channel, notify_payload(done.last_position, self._token)))
            return done.outcomes

        try:
            outcomes = self._in_lock(write)
        except BaseException:
            if follower is not None:
                follower.forget(committed)
            raise
        if committed and self._listeners:
            self._listeners.publish(committed)
        return outcomes

    # -- projections -----------------------------------------------------------------------

    def _refold(
        self,
        conn: psycopg.Connection,
        projections: Sequence[InlineProjection],
        *,
        progress: Progress | None,
    ) -> int:
        for projection in projections:
            projection.drop(conn)
            projection.create(conn)
        (total,) = conn.execute("SELECT count(*) FROM events").fetchone()  # type: ignore[misc]
        done = after = 0
        sql = (f"SELECT {COLUMNS} FROM events WHERE global_position > %s "
               "ORDER BY global_position LIMIT %s")
        while rows := conn.execute(sql, (after, REBUILD_CHUNK)).fetchall():
            after = rows[-1][0]
            events = list(decode_rows(rows, upcasters=self._upcasters))
            for projection in projections:
                projection.apply(conn, events)
            done += len(events)
            if progress is not None:
                progress(done, int(total))
        with conn.cursor() as cursor:
            cursor.executemany(
                "INSERT INTO projection_versions (name, version) VALUES (%s, %s) "
                "ON CONFLICT (name) DO UPDATE SET version = excluded.version",
                [(p.name, p.version) for p in projections],
            )
        return done

    def rebuild_projections(self, *, progress: Progress | None = None) -> int:
        """Drop every projection and fold the whole log again; the events folded."""
        with self._committer.exclusive():
            if self._closed:
                raise StoreClosed("the store is closed")
            return self._in_lock(
                lambda conn: self._refold(conn, self._projections, progress=progress)
            )

    def read_view(self, query: Callable[[Any], T]) -> T:
        """Run ``query`` with a read connection (projections read their tables with it)."""
        return self._read(query)

    def _read(self, query: Callable[[psycopg.Connection], T]) -> T:
        """Run ``query`` on a pooled read connection; a lost server or a failing disk is a
        :class:`StorageFault`, and the next read replaces the broken connection."""
        driver = _psycopg()
        if self._closed:
            raise StoreClosed("the store is closed")
        try:
            with self._readers.connection() as conn:
                return query(conn)
        except driver.OperationalError as exc:
            raise self._fault(exc) from exc

    def purge(self, session_id: str) -> int:
        """Remove every event and the head record of one session; positions never reused."""

        def run(conn: psycopg.Connection) -> int:
            (high_water,) = conn.execute(HIGH_WATER).fetchone()  # type: ignore[misc]
            conn.execute(
                "INSERT INTO meta (key, value) VALUES ('purged_through', %s) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value", (high_water,),
            )
            removed = conn.execute(
                "DELETE FROM events WHERE session_id = %s", (session_id,)
            ).rowcount
            conn.execute("DELETE FROM streams WHERE session_id = %s", (session_id,))
            for projection in self._projections:
                projection.forget(conn, session_id)
            return int(removed)

        with self._committer.exclusive():
            if self._closed:
                raise StoreClosed("the store is closed")
            return self._in_lock(run)

    def import_rows(self, rows: Iterable[RawRow]) -> list[ChainReport]:
        """Copy stored rows verbatim into this empty store (``eventlog.migrate``).

        Everything but ``global_position`` is kept — times, ids, idempotency keys, hashes —
        and positions are numbered 1, 2, 3 … in the order given (the source's global order).
        In one transaction: the rows, the session heads, a check of every chain as it
        arrived, the projections folded. A chain that does not verify, or a store that is
        not empty, rolls everything back and raises :class:`ImportRefused`.
        """

        def run(conn: psycopg.Connection) -> list[ChainReport]:
            (position,) = conn.execute(HIGH_WATER).fetchone()  # type: ignore[misc]
            if position:
                raise ImportRefused(f"{self._url}: the store is not empty (position {position})")
            heads = copy_rows(conn, rows)
            reports = [
                verify_chain(sid, conn.execute(_RAW_SESSION, (sid,)).fetchall(), head=head)
                for sid, head in sorted(heads.items())
            ]
            broken = [r for r in reports if not r.ok]
            if broken:
                first = broken[0]
                raise ImportRefused(
                    f"session {first.session_id} breaks at seq {first.first_bad_seq} on "
                    f"arrival: {first.reason}"
                )
            self._refold(conn, self._projections, progress=None)
            return reports

        with self._committer.exclusive():
            if self._closed:
                raise StoreClosed("the store is closed")
            return self._in_lock(run)

    # -- reading ---------------------------------------------------------------------------

    def _fetch(self, sql: str) -> Callable[[tuple[Any, ...]], list[RawRow]]:
        """One page of ``sql``'s rows for these parameters, on a pooled connection."""
        def fetch(params: tuple[Any, ...]) -> list[RawRow]:
            return self._read(lambda conn: conn.execute(sql, params).fetchall())

        return fetch

    def _pages(
        self, sql: str, key: tuple[Any, ...], after: int, limit: int | None
    ) -> Iterator[RawRow]:
        return paged_rows(self._fetch(sql), key, after, limit, page=_PAGE)

    def read_session(
        self, session_id: str, *, after: int = 0, limit: int | None = None
    ) -> Iterator[RecordedEvent]:
        yield from decode_rows(self._pages(_SESSION_PAGE, (session_id,), after, limit),
                               upcasters=self._upcasters)

    def read_all(self, *, after: int = 0, limit: int | None = None) -> Iterator[RecordedEvent]:
        sql = (f"SELECT {COLUMNS} FROM events WHERE global_position > %s "
               "ORDER BY global_position LIMIT %s")
        yield from decode_rows(self._pages(sql, (), after, limit), upcasters=self._upcasters)

    def raw_session(self, session_id: str) -> Iterator[tuple[Any, ...]]:
        yield from self._read(lambda conn: conn.execute(_RAW_SESSION, (session_id,)).fetchall())

    def version(self, session_id: str) -> int:
        row = self._read(lambda conn: conn.execute(
            "SELECT version FROM streams WHERE session_id = %s", (session_id,)
        ).fetchone())
        return int(row[0]) if row else 0

    def head_position(self) -> int:
        (position,) = self._read(lambda conn: conn.execute(HIGH_WATER).fetchone())  # type: ignore[misc]
        return int(position)

    def session_heads(self) -> list[SessionHead]:
        rows = self._read(lambda conn: conn.execute(
            f"SELECT {_HEAD_COLUMNS} FROM streams "
            'ORDER BY updated_at DESC, session_id COLLATE "C" DESC'
        ).fetchall())
        return [SessionHead(r[0], int(r[1]), r[2], r[3], r[4]) for r in rows]

    def session_head(self, session_id: str) -> SessionHead | None:
        row = self._read(lambda conn: conn.execute(
            f"SELECT {_HEAD_COLUMNS} FROM streams WHERE session_id = %s", (session_id,)
        ).fetchone())
        return SessionHead(row[0], int(row[1]), row[2], row[3], row[4]) if row else None

    def verify(self, session_id: str | None = None) -> list[ChainReport]:
        if session_id is None:
            ids = [r[0] for r in self._read(lambda conn: conn.execute(
                "SELECT session_id FROM (SELECT session_id FROM streams UNION "
                "SELECT session_id FROM events) AS ids ORDER BY session_id COLLATE \"C\""
            ).fetchall())]
        else:
            ids = [session_id]
        reports = []
        for sid in ids:
            head = self._head_row(sid)
            recorded = (int(head[0]), head[1]) if head else None
            reports.append(verify_chain(sid, self.raw_session(sid), head=recorded))
        return reports

    def verify_and_read(
        self, session_id: str
    ) -> tuple[ChainReport, list[RecordedEvent] | None]:
        """:func:`~eventlog.chain.listed` over :meth:`verify_and_stream`."""
        return listed(self.verify_and_stream(session_id))

    def verify_and_stream(
        self, session_id: str
    ) -> tuple[ChainReport, Iterator[RecordedEvent] | None]:
        """:func:`~eventlog.chain.verified_pages`: a sound session in the memory of a page;
        a damaged one read whole as :meth:`raw_session` orders it."""
        def head() -> tuple[int, str] | None:
            row = self._head_row(session_id)
            return (int(row[0]), row[1]) if row else None

        return verified_pages(
            session_id, head=head, fetch=self._fetch(_SESSION_PAGE),
            stray=self._fetch(_STRAY_ROW), whole=lambda: list(self.raw_session(session_id)),
            upcasters=self._upcasters, page=_PAGE,
        )

    def _head_row(self, session_id: str) -> Any:
        return self._read(lambda conn: conn.execute(
            "SELECT version, head_hash FROM streams WHERE session_id = %s", (session_id,)
        ).fetchone())

    # -- lifecycle -------------------------------------------------------------------------

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Call ``listener`` after each commit: this store's, on the committing thread, and
        other processes' on this database, from a listening thread (D116). The thread and
        its connection run while anyone listens and stop with the last unsubscribe."""
        remove = self._listeners.add(listener)
        try:
            self._follow()
        except BaseException:
            remove()
            raise

        def unsubscribe() -> None:
            remove()
            self._unfollow_if_unheard()

        return unsubscribe

    def _unfollow_if_unheard(self) -> None:
        with self._follow_lock:
            if self._listeners or self._follower is None:
                return
            follower, self._follower = self._follower, None
        follower.stop()

    def _follow(self) -> None:
        """Start listening for other processes' commits (at the first subscriber)."""
        with self._follow_lock:
            if self._follower is not None:
                return
            # With no group in flight, every commit after the cursor is either expected by
            # the follower (ours) or read by it (another process's).
            with self._committer.exclusive():
                if self._closed:
                    raise StoreClosed("the store is closed")
                follower = CommitFollower(
                    connect=self._connect, channel=self._channel, token=self._token,
                    read_after=lambda after: self.read_all(after=after),
                    publish=self._listeners.publish, cursor=self.head_position(),
                )
                self._follower = follower
            follower.start()

    def close(self) -> None:
        """Wait for the group in flight, then refuse new work and close every connection."""
        with self._follow_lock:
            if self._follower is not None:
                self._follower.stop()
        with self._committer.exclusive():
            if self._closed:
                return
            self._closed = True
            self._writer.close()
        self._committer.stop()  # the async writer thread, once it answered what is queued
        self._readers.close()


# -- tables, SQL text and the store URL --------------------------------------------------------
#
# The tables the store keeps (EL-8, EL-9), the same as the SQLite file's, with
# PostgreSQL's types: ``events`` (EL-9's columns, ``global_position BIGINT PRIMARY KEY``,
# ``UNIQUE (session_id, seq)``), ``streams`` (each session's head), ``meta`` (the purge
# high-water mark) and ``projection_versions``. Every statement uses psycopg's ``%s``
# placeholders. The store URL is parsed here too.

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

def _medium(sqlstate: str | None) -> str:
    """What failed, by the error's SQLSTATE: the server's disk (53100 disk full, class 58 I/O),
    the connection (none: it was never made or was lost; class 08; 57P01-57P05, the server
    shutting down or restarting; 53300, no connection slot left), or the database server."""
    if sqlstate is None or sqlstate.startswith(("08", "57P")) or sqlstate == "53300":
        return "database connection"
    if sqlstate == "53100" or sqlstate.startswith("58"):
        return "disk"
    return "database server"


_SESSION_PAGE = (f"SELECT {COLUMNS} FROM events WHERE session_id = %s AND seq > %s "
                 "ORDER BY seq LIMIT %s")
"""A page of a session's events in ``seq`` order."""
_STRAY_ROW = "SELECT seq FROM events WHERE session_id = %s AND (seq IS NULL OR seq < 1) LIMIT 1"
"""A row of the session no page reads: ``seq`` below 1 or none (tampered)."""
_RAW_SESSION = (f"SELECT {COLUMNS} FROM events WHERE session_id = %s "
                "ORDER BY seq < 1, seq, global_position")
"""A session's rows as stored; rows whose seq was tampered below 1 sort last (as on SQLite)."""

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


# -- the group write ---------------------------------------------------------------------------
#
# What the store does in :func:`eventlog.appending.write_group`: the heads of the group's
# sessions are read in one ``SELECT … = ANY``; the rows and heads go in with pipelined
# ``executemany`` and each inline projection folds the group's events. The caller holds the
# append lock (D109) and owns the transaction.


def _group_heads(conn: psycopg.Connection, group: Sequence[PreparedBatch]) -> dict[str, Head]:
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


def _write_rows(
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


# -- other processes' commits ------------------------------------------------------------------
#
# Heard through PostgreSQL's ``LISTEN/NOTIFY`` (D116, issue 11). Every append transaction of
# :class:`PostgresEventStore` ends with one
# ``pg_notify(channel, '<high-water position> <token>')``, delivered to listening sessions
# when (and only if) the transaction commits, in commit order. The channel is named after the
# store's schema (:func:`channel_for`), so stores in different schemas of one database do not
# hear each other; the token names the store instance that committed.
#
# While a store has subscribers, a :class:`CommitFollower` daemon thread holds a connection of
# its own with ``LISTEN`` on the channel. It keeps a cursor (the last global position it has
# accounted for). A notification at or below the cursor is stale; one from this store whose
# positions were all committed here (:meth:`CommitFollower.expect`, called inside the append
# transaction) only moves the cursor, since the committing thread publishes those events
# itself; any other reads the events after the cursor and publishes them in global order,
# skipping those this store committed (matched by position *and* hash, so a position a failed
# transaction had registered and another process then used is not mistaken for ours). Reading
# from the cursor rather than trusting the payload means coalesced or missed notifications lose
# nothing; after a lost connection the thread connects again, listens, and catches up the same
# way. The thread stops with the last unsubscribe or when the store closes.

_log = logging.getLogger("eventlog")

WAIT_S = 0.2
"""How long one wait for notifications lasts before the thread checks whether to stop."""
RETRY_S = (0.1, 0.5, 1.0, 2.0, 5.0)
"""Pauses before connecting again after a failure (the last one repeats)."""
PUBLISH_CHUNK = 500
"""At most this many events are handed to the listeners in one call."""
_SHORTCUT_SPAN = 10_000
"""A notification of our own covering more positions than this is checked by reading."""


def channel_for(schema: str) -> str:
    """The ``NOTIFY`` channel of the store whose tables are in ``schema`` (≤ 63 bytes)."""
    return f"sessionledger_{schema}"[:63]


def notify_payload(position: int, token: str) -> str:
    """What an append transaction sends: the new high-water position and the store's token."""
    return f"{position} {token}"


def _parse(payload: str) -> tuple[int | None, str]:
    text, _, token = payload.partition(" ")
    try:
        return int(text), token
    except ValueError:
        return None, token


class CommitFollower:
    """Publishes the commits of other processes to a store's listeners (see the module)."""

    def __init__(
        self,
        *,
        connect: Callable[[], psycopg.Connection],
        channel: str,
        token: str,
        read_after: Callable[[int], Iterator[RecordedEvent]],
        publish: Callable[[Sequence[RecordedEvent]], None],
        cursor: int,
    ) -> None:
        self._connect = connect
        self._channel = channel
        self._token = token
        self._read_after = read_after
        self._publish = publish
        self._cursor = cursor
        self._own: dict[int, str] = {}
        self._own_lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name=f"eventlog-listen-{channel}", daemon=True
        )

    @property
    def cursor(self) -> int:
        """The last global position accounted for (published, or committed here)."""
        return self._cursor

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Ask the thread to stop and wait for it (at most ``timeout`` seconds)."""
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    # -- the committing side ---------------------------------------------------------------

    def expect(self, events: Iterable[RecordedEvent]) -> None:
        """Note events this store is committing (called inside the transaction): the thread
        will not publish them, the committing thread does."""
        with self._own_lock:
            for event in events:
                self._own[event.global_position] = event.hash

    def forget(self, events: Iterable[RecordedEvent]) -> None:
        """The transaction that was to commit ``events`` did not (their positions may be
        handed out again, to another process)."""
        with self._own_lock:
            for event in events:
                if self._own.get(event.global_position) == event.hash:
                    del self._own[event.global_position]

    # -- the listening thread --------------------------------------------------------------

    def _run(self) -> None:
        failures = 0
        while not self._stop.is_set():
            try:
                conn = self._connect()
                try:
                    conn.execute(f'LISTEN "{self._channel}"')
                    self._catch_up()  # what committed while we were not listening
                    failures = 0
                    while not self._stop.is_set():
                        for note in conn.notifies(timeout=WAIT_S):
                            if self._stop.is_set():
                                break
                            self._heard(note.payload)
                finally:
                    conn.close()
            except Exception as exc:  # a lost connection, a closed store, a failed read
                if self._stop.is_set():
                    return
                pause = RETRY_S[min(failures, len(RETRY_S) - 1)]
                failures += 1
                _log.warning("listening for commits on %s failed (%s); again in %.1fs",
                             self._channel, exc, pause)
                self._stop.wait(pause)

    def _heard(self, payload: str) -> None:
        position, token = _parse(payload)
        if position is not None and position <= self._cursor:
            return
        if position is not None and token == self._token and self._all_own(position):
            self._cursor = position
            return
        self._catch_up()

    def _all_own(self, position: int) -> bool:
        """Whether every position after the cursor up to ``position`` was committed here; if
        so they are forgotten (the committing thread publishes them)."""
        span = range(self._cursor + 1, position + 1)
        if len(span) > _SHORTCUT_SPAN:
            return False
        with self._own_lock:
            if not all(p in self._own for p in span):
                return False
            for p in span:
                del self._own[p]
        return True

    def _catch_up(self) -> None:
        """Publish, in global order, every event after the cursor not committed here."""
        fresh: list[RecordedEvent] = []
        for event in self._read_after(self._cursor):
            with self._own_lock:
                mine = self._own.pop(event.global_position, None) == event.hash
            if not mine:
                fresh.append(event)
            self._cursor = event.global_position
            if len(fresh) >= PUBLISH_CHUNK:
                self._publish(fresh)
                fresh = []
        if fresh:
            self._publish(fresh)
        with self._own_lock:
            for p in [p for p in self._own if p <= self._cursor]:
                del self._own[p]
