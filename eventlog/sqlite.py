"""The embedded default backend: one SQLite file, WAL, group commit (EL-7 … EL-9, EG-5).

This module answers everything the store does with the file: its tables and SQL text
(:func:`create_schema`), the bounded pool of reader connections (:class:`ReaderPool`, also lent
to the PostgreSQL backend), the rows and heads of a group written in one ``BEGIN IMMEDIATE``
transaction, and the translation of every driver error into the log's own errors.
The store itself is :class:`SQLiteEventStore`; what it promises is below.
"""

from __future__ import annotations

import random
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from functools import lru_cache
from itertools import chain
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar

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
    StorageFault,
    StoreBusy,
    StoreClosed,
    UnreadableStore,
    descriptors_exhausted,
)
from .inline import REBUILD_CHUNK, InlineProjection, Progress
from .upcasting import UpcasterRegistry, default_upcasters

if TYPE_CHECKING:
    import sqlite_utils

__all__ = [
    "COLUMNS",
    "HIGH_WATER",
    "INSERT",
    "READERS",
    "UPSERT_HEAD",
    "ReaderPool",
    "SQLiteEventStore",
    "chunked_rows",
    "create_schema",
    "ensure_schema",
    "insert_events_sql",
    "is_busy",
    "storage_fault",
    "text_or_bytes",
    "upsert_heads_sql",
]


# The embedded default backend: one SQLite file, WAL, group commit (EL-7 … EL-9).
#
# Schema is created with sqlite-utils (so other tools see a plain, documented table); the hot
# paths use the connection directly. Writes go through one write connection owned by the
# :class:`GroupCommitter`; every group is one ``BEGIN IMMEDIATE`` transaction in which each batch
# is checked (idempotency key, expected version) before it writes, so a batch failing its
# check fails alone. A write that still breaks a constraint means the head records and rows
# disagree (a damaged file): the whole group rolls back and every caller gets the error. Readers
# borrow one of a few pooled connections (:class:`ReaderPool`, however many threads read);
# WAL lets them read while the writer writes. Other processes are
# waited for with a busy timeout and bounded, jittered retries: callers never see
# "database is locked". A disk that refuses a read or write (I/O error, full, read-only) is
# raised as :class:`~eventlog.errors.StorageFault`, never as the driver's error; a process out
# of file descriptors as :class:`~eventlog.errors.DescriptorsExhausted`, not as a disk fault; any
# other driver error (a file that is not a database, a damaged image, a table not of the shape
# the store or a view expects) as :class:`~eventlog.errors.UnreadableStore`. No ``sqlite3``
# error leaves the store.

T = TypeVar("T")
_PAGE = 2000
_BUSY_TIMEOUT_MS = 5000
_MAX_ATTEMPTS = 12
_HEADS_CACHED = 50_000
_WRITER_CACHE_KIB = 65_536
"""The write connection's page cache (64 MiB, allocated as pages are used)."""
_CHECKPOINT_PAGES = 10_000
"""WAL pages between automatic checkpoints of the write connection (SQLite's default 1,000)."""


class SQLiteEventStore(GroupAppends):
    """Event store in one SQLite file (the embedded default)."""

    def __init__(
        self,
        path: str | Path,
        *,
        synchronous: str = "full",
        clock: Clock | None = None,
        upcasters: UpcasterRegistry = default_upcasters,
        projections: Sequence[InlineProjection] = (),
        inline_budget_s: float = INLINE_BUDGET_S,
    ) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._synchronous = synchronous.upper()
        self._clock = clock or SystemClock()
        self._upcasters = upcasters
        self._listeners: Subscribers[Sequence[RecordedEvent]] = Subscribers()
        self._closed = False
        self._writer = self._open_writer()
        self._readers: ReaderPool[sqlite3.Connection] = ReaderPool(
            self._connect, close=sqlite3.Connection.close,
            wait_s=_BUSY_TIMEOUT_MS / 1000,
        )
        self._projections = tuple(projections)
        self._known_position: int | None = None
        self._data_version = -1
        self._heads: dict[str, tuple[int, str]] = {}
        """(version, head hash) per session as this connection last wrote or read it: valid
        while no other connection has committed (``PRAGMA data_version`` unchanged)."""
        self._retry(lambda: ensure_schema(self._writer))
        self._retry(self._refresh_stale_projections)
        self._committer: GroupCommitter[PreparedBatch, AppendResult] = GroupCommitter(
            self._commit, commit_now=self._commit_now, inline_budget_s=inline_budget_s
        )

    @property
    def url(self) -> str:
        suffix = "?synchronous=normal" if self._synchronous == "NORMAL" else ""
        return f"sqlite:///{self.path}{suffix}"

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(
            self.path, isolation_level=None, check_same_thread=False,
            timeout=_BUSY_TIMEOUT_MS / 1000,
        )
        conn.execute(f"PRAGMA busy_timeout = {_BUSY_TIMEOUT_MS}")
        self._retry(lambda: conn.execute("PRAGMA journal_mode = WAL"))
        conn.execute(f"PRAGMA synchronous = {self._synchronous}")
        # Projection tables may cascade from the sessions' summary rows (TD-4).
        conn.execute("PRAGMA foreign_keys = ON")
        return conn

    def _open_writer(self) -> sqlite3.Connection:
        """The write connection. A path SQLite cannot open as a database file (a directory, a
        file it may not read) is :class:`UnreadableStore`, like a file that is no database."""
        try:
            conn = self._connect()
        except sqlite3.DatabaseError as exc:
            raise UnreadableStore(str(exc)) from exc
        # Bulk appends over many sessions dirty one leaf of ``events_session_seq`` per session
        # in every group: ~1,900 of 2,000 sessions' leaves per 5,000-batch group once the log
        # is large, against a few dozen pages at 10 k events. With SQLite's defaults (a 2 MB
        # cache, a checkpoint every 1,000 WAL pages) such a group spilled its dirty pages out
        # of the cache mid-transaction and checkpointed after every commit, copying the same
        # leaves again each time (issue 24: bulk append slowed as the log grew). The writer
        # keeps a cache that holds a group's pages and checkpoints every 10,000 pages (40 MB
        # of WAL), so a leaf written by several groups is copied once. Durability is the
        # WAL's, unchanged.
        conn.execute(f"PRAGMA cache_size = -{_WRITER_CACHE_KIB}")
        conn.execute(f"PRAGMA wal_autocheckpoint = {_CHECKPOINT_PAGES}")
        return conn

    def _retry(self, action: Callable[[], Any]) -> Any:
        for attempt in range(_MAX_ATTEMPTS):
            try:
                return action()
            except sqlite3.DatabaseError as exc:
                self._raise_unless_busy(exc)
                time.sleep(random.uniform(0.001, 0.01 * (attempt + 1)))
        raise StoreBusy(f"{self.path}: database stayed locked through {_MAX_ATTEMPTS} tries")

    def _raise_unless_busy(self, exc: sqlite3.DatabaseError) -> None:
        """Return when another process holds the lock (try again); otherwise raise the log's
        own error for ``exc``."""
        if isinstance(exc, sqlite3.OperationalError) and is_busy(exc):
            return
        raise self._translated(exc) from exc

    def _translated(self, exc: sqlite3.DatabaseError) -> EventLogError:
        """The log's error for a driver error that is not "busy": a disk that refused a read
        or write is a :class:`StorageFault` (the transaction was rolled back; nothing was
        appended), anything else the driver refuses an :class:`UnreadableStore`."""
        if isinstance(exc, sqlite3.OperationalError):
            fault = storage_fault(self.path, exc)
            if fault is not None:
                return fault
        return UnreadableStore(str(exc))

    @contextmanager
    def _transaction(self, *, wait: bool = True) -> Iterator[sqlite3.Connection]:
        """The write connection in one ``BEGIN IMMEDIATE`` transaction, committed when the
        block ends and rolled back on any exception.

        A driver error leaves as the log's own error (:meth:`_translated`), except "busy"
        (another process holds the lock), which leaves as it is for the caller to retry.
        ``wait=False``: busy at once, without SQLite's busy timeout, when another connection
        holds the write lock (the commit on an event loop's thread, D196).
        """
        conn = self._writer
        try:
            if wait:
                conn.execute("BEGIN IMMEDIATE")
            else:
                conn.execute("PRAGMA busy_timeout = 0")
                try:
                    conn.execute("BEGIN IMMEDIATE")
                finally:
                    conn.execute(f"PRAGMA busy_timeout = {_BUSY_TIMEOUT_MS}")
            try:
                yield conn
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
        except sqlite3.DatabaseError as exc:
            self._raise_unless_busy(exc)
            raise

    # -- writing ---------------------------------------------------------------------------

    def _commit(self, group: Sequence[PreparedBatch]) -> list[AppendResult | BaseException]:
        if self._closed:
            raise StoreClosed("the store is closed")
        try:
            outcomes = self._commit_once(group)
        except sqlite3.DatabaseError:  # busy: any other error left as the log's own
            outcomes = self._retry(lambda: self._commit_once(group))
        self._publish(outcomes)
        return outcomes

    def _commit_now(
        self, group: Sequence[PreparedBatch]
    ) -> list[AppendResult | BaseException] | None:
        """:meth:`_commit` when no other connection holds the write lock; ``None``, nothing
        written, when one does: a commit on the event loop's thread must not wait (D196)."""
        if self._closed:
            raise StoreClosed("the store is closed")
        try:
            outcomes = self._commit_once(group, wait=False)
        except sqlite3.DatabaseError:  # busy: any other error left as the log's own
            return None
        self._publish(outcomes)
        return outcomes

    def _publish(self, outcomes: list[AppendResult | BaseException]) -> None:
        """Tell the listeners what a commit appended (not what it found already written)."""
        if self._listeners:
            committed = [
                e for o in outcomes if isinstance(o, AppendResult) and not o.replayed
                for e in o.events
            ]
            if committed:
                self._listeners.publish(committed)

    def _commit_once(
        self, group: Sequence[PreparedBatch], *, wait: bool = True
    ) -> list[AppendResult | BaseException]:
        try:
            with self._transaction(wait=wait) as conn:
                position = self._high_water(conn)
                now = now_text(self._clock)
                _load_heads(conn, self._heads, group)
                done = write_group(
                    group, heads=self._heads, position=position, now=now,
                    earlier_rows=lambda session_id, key: conn.execute(
                        _REPLAY, (session_id, key)
                    ).fetchall(),
                    write=lambda rows, written, events: _write_rows(
                        conn, rows, written, events, now=now, projections=self._projections
                    ),
                    upcasters=self._upcasters,
                )
        except BaseException:
            self._known_position = None
            self._heads.clear()
            raise
        self._known_position = done.last_position
        return done.outcomes

    def _high_water(self, conn: sqlite3.Connection) -> int:
        """The last position used; re-read only when another connection has written.

        ``PRAGMA data_version`` changes exactly when another connection commits to the file,
        so a lone server process pays one cheap pragma instead of the max() query.
        """
        (version,) = conn.execute("PRAGMA data_version").fetchone()
        if self._known_position is None or version != self._data_version:
            (self._known_position,) = conn.execute(HIGH_WATER).fetchone()
            self._data_version = version
            self._heads.clear()
        elif len(self._heads) > _HEADS_CACHED:
            self._heads.clear()
        return int(self._known_position)

    # -- projections -----------------------------------------------------------------------

    def _refresh_stale_projections(self) -> None:
        """Rebuild, in one transaction, every projection whose recorded version differs."""
        with self._transaction() as conn:
            recorded = dict(conn.execute("SELECT name, version FROM projection_versions"))
            stale = [
                p for p in self._projections
                if recorded.get(p.name) != p.version or not p.is_present(conn)
            ]
            if stale:
                self._refold(conn, stale, progress=None)

    def _refold(
        self,
        conn: sqlite3.Connection,
        projections: Sequence[InlineProjection],
        *,
        progress: Progress | None,
    ) -> int:
        for projection in projections:
            projection.drop(conn)
            projection.create(conn)
        total = int(conn.execute("SELECT count(*) FROM events").fetchone()[0])
        done = 0
        sql = (f"SELECT {COLUMNS} FROM events WHERE global_position > ? "
               "ORDER BY global_position LIMIT ?")
        upcasters = self._upcasters
        for rows in chunked_rows(conn, sql, REBUILD_CHUNK):
            events = list(decode_rows(rows, upcasters=upcasters))
            for projection in projections:
                projection.apply(conn, events)
            done += len(events)
            if progress is not None:
                progress(done, total)
        conn.executemany(
            "INSERT INTO projection_versions (name, version) VALUES (?, ?) "
            "ON CONFLICT(name) DO UPDATE SET version = excluded.version",
            [(p.name, p.version) for p in projections],
        )
        return done

    def rebuild_projections(self, *, progress: Progress | None = None) -> int:
        """Drop every projection and fold the whole log again; the events folded."""

        def run() -> int:
            with self._transaction() as conn:
                return self._refold(conn, self._projections, progress=progress)

        with self._committer.exclusive():
            if self._closed:
                raise StoreClosed("the store is closed")
            return int(self._retry(run))

    def read_view(self, query: Callable[[Any], T]) -> T:
        """Run ``query`` with a read connection (projections read their tables with it)."""
        return self._read(query)

    def purge(self, session_id: str) -> int:
        """Remove every event and the head record of one session; the rows removed.

        Other sessions' chains are untouched (chains are per session). Global positions of
        the purged events are never reused, so the log has a gap where they were.
        """

        def run() -> int:
            with self._transaction() as conn:
                (high_water,) = conn.execute(HIGH_WATER).fetchone()
                conn.execute(
                    "INSERT INTO meta (key, value) VALUES ('purged_through', ?) "
                    "ON CONFLICT(key) DO UPDATE SET value = excluded.value", (high_water,),
                )
                removed = conn.execute(
                    "DELETE FROM events WHERE session_id = ?", (session_id,)
                ).rowcount
                conn.execute("DELETE FROM streams WHERE session_id = ?", (session_id,))
                self._heads.pop(session_id, None)
                for projection in self._projections:
                    projection.forget(conn, session_id)
            return int(removed)

        with self._committer.exclusive():
            if self._closed:
                raise StoreClosed("the store is closed")
            return int(self._retry(run))

    # -- reading ---------------------------------------------------------------------------

    def _read(self, query: Callable[[sqlite3.Connection], T]) -> T:
        """``query`` on a pooled read connection, retried while another process writes."""

        def run() -> T:
            if self._closed:
                raise StoreClosed("the store is closed")
            with self._readers.connection() as conn:
                return query(conn)

        return self._retry(run)  # type: ignore[no-any-return]

    def _fetch(self, sql: str) -> Callable[[tuple[Any, ...]], list[RawRow]]:
        """One page of ``sql``'s rows for these parameters, on a pooled connection."""
        def fetch(params: tuple[Any, ...]) -> list[RawRow]:
            rows: list[RawRow] = self._read(lambda conn: fetch_rows(conn, sql, params))
            return rows

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
        sql = (f"SELECT {COLUMNS} FROM events WHERE global_position > ? "
               "ORDER BY global_position LIMIT ?")
        yield from decode_rows(self._pages(sql, (), after, limit), upcasters=self._upcasters)

    def raw_session(self, session_id: str) -> Iterator[tuple[Any, ...]]:
        # Tolerates rows whose seq was tampered into a non-integer or below 1 (they sort last)
        # and text that is not valid UTF-8 (it comes back as bytes, a wrong-type break).
        sql = _RAW_SESSION
        if self._closed:
            raise StoreClosed("the store is closed")
        with self._readers.connection() as conn:  # held while the caller iterates
            cursor = self._retry(lambda: conn.execute(sql, (session_id,)))
            while True:
                conn.text_factory = text_or_bytes
                try:
                    batch = cursor.fetchmany(_PAGE)
                except sqlite3.DatabaseError as exc:
                    raise self._translated(exc) from exc
                finally:
                    conn.text_factory = str
                if not batch:
                    return
                yield from batch

    def _read_version(self, conn: sqlite3.Connection, session_id: str) -> int:
        row = conn.execute(
            "SELECT version FROM streams WHERE session_id = ?", (session_id,)
        ).fetchone()
        return int(row[0]) if row else 0

    def version(self, session_id: str) -> int:
        return int(self._read(lambda conn: self._read_version(conn, session_id)))

    def head_position(self) -> int:
        return int(self._read(lambda conn: conn.execute(HIGH_WATER).fetchone()[0]))

    def session_heads(self) -> list[SessionHead]:
        rows = self._read(lambda conn: conn.execute(
            "SELECT session_id, version, head_hash, created_at, updated_at FROM streams "
            "ORDER BY updated_at DESC, session_id DESC"
        ).fetchall())
        return [SessionHead(*row) for row in rows]

    def session_head(self, session_id: str) -> SessionHead | None:
        row = self._read(lambda conn: conn.execute(
            "SELECT session_id, version, head_hash, created_at, updated_at FROM streams "
            "WHERE session_id = ?", (session_id,),
        ).fetchone())
        return SessionHead(*row) if row else None

    def verify(self, session_id: str | None = None) -> list[ChainReport]:
        if session_id is None:
            ids = [r[0] for r in self._read(lambda conn: conn.execute(
                "SELECT session_id FROM streams UNION SELECT DISTINCT session_id FROM events "
                "ORDER BY 1"
            ).fetchall())]
        else:
            ids = [session_id]
        reports = []
        for sid in ids:
            reports.append(verify_chain(sid, self.raw_session(sid), head=self._head_row(sid)))
        return reports

    def verify_and_read(
        self, session_id: str
    ) -> tuple[ChainReport, list[RecordedEvent] | None]:
        """:func:`~eventlog.chain.listed` over :meth:`verify_and_stream`."""
        return listed(self.verify_and_stream(session_id))

    def verify_and_stream(
        self, session_id: str
    ) -> tuple[ChainReport, Iterator[RecordedEvent] | None]:
        """:func:`~eventlog.chain.verified_pages`: a sound session in the memory of a page
        (rows as ``str``, as bytes only where the text is not UTF-8, like every read: no
        per-value text callback on a sound page). A damaged one is read whole in index
        order, where a damaged row may sit elsewhere than raw_session puts it: the report is
        the one of raw_session's order (a sound chain is the same in both)."""
        return verified_pages(
            session_id, head=lambda: self._head_row(session_id),
            fetch=self._fetch(_SESSION_PAGE), stray=self._fetch(_STRAY_ROW),
            whole=lambda: self._fetch(_RAW_SESSION)((session_id,)),
            upcasters=self._upcasters, page=_PAGE,
        )

    def _head_row(self, session_id: str) -> Any:
        return self._read(lambda conn: conn.execute(
            "SELECT version, head_hash FROM streams WHERE session_id = ?", (session_id,)
        ).fetchone())

    # -- lifecycle -------------------------------------------------------------------------

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        return self._listeners.add(listener)

    def close(self) -> None:
        """Wait for the group in flight, then refuse new work and close every connection."""
        with self._committer.exclusive():
            if self._closed:
                return
            self._closed = True
            self._writer.close()
        self._committer.stop()  # the async writer thread, once it answered what is queued
        self._readers.close()


# -- reader connections ------------------------------------------------------------------------
#
# Reader connections: a small bounded pool shared by every thread (EG-5).
#
# A store reads through at most :data:`READERS` connections, whatever the number of threads
# asking: a thread borrows an idle connection (or opens one while fewer are open), runs its
# query and gives it back. A thread that already holds one (a query run inside another) gets
# the same connection again, so nesting cannot wait for itself. When every connection is
# borrowed a reader waits up to ``wait_s`` and then gets :class:`~eventlog.errors.StoreBusy`.
# Connections stay open until the store closes, so a burst of clients served by new worker
# threads opens no new files (a connection per thread, closed only at shutdown, grew by every
# thread the pool ever started, issue 19).
#
# :func:`~eventlog.errors.descriptors_exhausted` tells "the process has no file descriptor left"
# (EMFILE, ENFILE) from a disk fault: SQLite reports both as "unable to open database file".

C = TypeVar("C")

READERS = 8
"""Reader connections a store keeps open at most (each is two or three descriptors on SQLite:
the file, its WAL and the shared-memory index)."""
class ReaderPool(Generic[C]):
    """At most ``size`` connections made by ``connect``, lent one per thread at a time.

    ``usable(conn)`` says whether an idle connection may be lent again (a PostgreSQL
    connection the server dropped is closed and replaced); ``close(conn)`` closes one.
    ``connect`` failing for want of descriptors raises :class:`DescriptorsExhausted`.
    """

    def __init__(
        self,
        connect: Callable[[], C],
        *,
        close: Callable[[C], None],
        usable: Callable[[C], bool] = lambda _conn: True,
        size: int = READERS,
        wait_s: float = 5.0,
    ) -> None:
        self._connect = connect
        self._close = close
        self._usable = usable
        self.size = size
        self._wait_s = wait_s
        self._lock = threading.Condition()
        self._idle: list[C] = []
        self._open = 0
        self._closed = False
        self._held: dict[int, C] = {}
        """The connection each thread holds, by thread id at the time it borrowed."""

    @property
    def open_count(self) -> int:
        """Connections open now, idle or lent (never more than ``size``)."""
        return self._open

    @contextmanager
    def connection(self) -> Iterator[C]:
        """A connection for this thread for the duration of the block."""
        thread = threading.get_ident()
        held = self._held.get(thread)
        if held is not None:  # a query inside a query: the same connection
            yield held
            return
        conn = self._borrow()
        self._held[thread] = conn
        try:
            yield conn
        finally:
            # By the id it was borrowed under: a generator may be finished on another thread.
            del self._held[thread]
            self._give_back(conn)

    def _borrow(self) -> C:
        with self._lock:
            while True:
                if self._closed:
                    raise StoreClosed("the store is closed")
                while self._idle:
                    conn = self._idle.pop()
                    if self._usable(conn):
                        return conn
                    self._open -= 1
                    self._close_quietly(conn)
                if self._open < self.size:
                    self._open += 1  # reserved: opened below, outside the lock
                    break
                if not self._lock.wait(self._wait_s):
                    raise StoreBusy(
                        f"all {self.size} reader connections stayed busy for {self._wait_s}s"
                    )
        try:
            return self._connect()
        except BaseException as exc:
            with self._lock:
                self._open -= 1
                self._lock.notify()
            if (isinstance(exc, Exception) and not isinstance(exc, DescriptorsExhausted)
                    and descriptors_exhausted(exc)):
                raise DescriptorsExhausted(
                    f"no file descriptor left to open a reader connection: {exc}"
                ) from exc
            raise

    def _give_back(self, conn: C) -> None:
        with self._lock:
            if self._closed:
                self._open -= 1
                self._close_quietly(conn)
            else:
                self._idle.append(conn)
            self._lock.notify()

    def _close_quietly(self, conn: C) -> None:
        try:
            self._close(conn)
        except Exception:  # a connection that cannot close is gone anyway
            pass

    def close(self) -> None:
        """Close the idle connections now and each lent one when it comes back."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
            self._open -= len(idle)
            for conn in idle:
                self._close_quietly(conn)
            self._lock.notify_all()


# -- tables and SQL text -----------------------------------------------------------------------
#
# The SQLite file's tables and the SQL text the store runs against them (EL-9).
#
# ``events`` is the published table; ``streams`` holds each session's head (version, head hash,
# times); ``meta`` the purge high-water mark; ``projection_versions`` the schema version of each
# inline projection's tables. Tables are created with sqlite-utils so other tools see plain,
# documented tables.

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


_SCHEMA_NAMES = frozenset({"events", "events_session_seq", "events_idempotency", "meta",
                           "projection_versions", "streams"})
"""The tables and indexes :func:`create_schema` makes."""


def ensure_schema(conn: sqlite3.Connection) -> None:
    """Create the schema unless every part of it is there already (then ``sqlite_utils`` is
    not even imported: a process that appends one event, like a command hook, starts sooner —
    issue 38)."""
    found = {name for (name,) in conn.execute(
        "SELECT name FROM sqlite_master WHERE type IN ('table', 'index')")}
    if not _SCHEMA_NAMES <= found:
        import sqlite_utils

        create_schema(sqlite_utils.Database(conn))


def create_schema(db: sqlite_utils.Database) -> None:
    """Create the ``events`` table of EL-9 and the per-session head records."""
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
    is read again with such text as bytes, for the reader to report (EG-1)."""
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


# -- the group write ---------------------------------------------------------------------------
#
# What the SQLite store does in :func:`eventlog.appending.write_group`: a fixed handful of
# statements per group, however large. The heads missing from the store's cache are fetched in
# one ``SELECT … IN``; the new rows go in with multi-row ``INSERT``s, the heads with multi-row
# upserts, and each inline projection folds the group's events in one call. Few statement
# *steps* matter beyond their own cost: each step releases the GIL (``executemany`` steps once
# per row), and with many writer threads waiting, getting the GIL back is what made large
# groups slow.

_IN_CHUNK = 500
_ROWS_PER_STATEMENT = 64
"""Rows per multi-row statement: 13 x 64 = 832 variables, far below SQLite's limit, and few
distinct statement texts for the connection's statement cache."""


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


_RAW_SESSION = (
    f"SELECT {COLUMNS} FROM events WHERE session_id = ? "
    "ORDER BY typeof(seq) != 'integer' OR seq < 1, seq, global_position"
)
"""A session's rows for the chain check, damaged ones included (see ``raw_session``)."""
_SESSION_PAGE = (f"SELECT {COLUMNS} FROM events WHERE session_id = ? AND seq > ? "
                 "ORDER BY seq LIMIT ?")
_STRAY_ROW = "SELECT seq FROM events WHERE session_id = ? AND (seq IS NULL OR seq < 1) LIMIT 1"
"""A row of the session no page reads: ``seq`` below 1 or none (tampered)."""
"""A page of a session's rows straight from ``events_session_seq``, without the sort: in
``raw_session``'s order when every ``seq`` is an integer from 1 up (which a sound chain
proves)."""

_REPLAY = (
    f"SELECT {COLUMNS} FROM events WHERE session_id = ? AND idempotency_key = ? "
    "ORDER BY global_position"
)
"""The rows of an earlier batch with the same idempotency key. Ordered by position (which is
seq order within a session) so that SQLite reads them from ``events_idempotency``: ``ORDER BY
seq`` made it walk the session's whole ``(session_id, seq)`` index instead, a cost growing
with the session's length on every keyed append."""


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


def _write_rows(
    conn: sqlite3.Connection,
    rows: list[RawRow],
    written: dict[str, Head],
    events: list[RecordedEvent],
    *,
    now: str,
    projections: Sequence[InlineProjection],
) -> None:
    """A group's new rows and heads, and its events folded into the inline projections."""
    _insert(conn, rows)
    _upsert_heads(conn, written, now)
    for projection in projections:
        projection.apply(conn, events)
