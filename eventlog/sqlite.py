"""The embedded default backend: one SQLite file, WAL, group commit (SPEC EL-7 … EL-9).

Schema is created with sqlite-utils (so other tools see a plain, documented table); the hot
paths use the connection directly. Writes go through one write connection owned by the
:class:`GroupCommitter`; every group is one ``BEGIN IMMEDIATE`` transaction in which each batch
is checked (idempotency key, expected version) before it writes, so a batch failing its
check fails alone. A write that still breaks a constraint means the head records and rows
disagree (a damaged file): the whole group rolls back and every caller gets the error. Readers
borrow one of a few pooled connections (:mod:`eventlog.readers`, however many threads read);
WAL lets them read while the writer writes. Other processes are
waited for with a busy timeout and bounded, jittered retries: callers never see
"database is locked". A disk that refuses a read or write (I/O error, full, read-only) is
raised as :class:`~eventlog.errors.StorageFault`, never as the driver's error; a process out
of file descriptors as :class:`~eventlog.errors.DescriptorsExhausted`, not as a disk fault; any
other driver error (a file that is not a database, a damaged image, a table not of the shape
the store or a view expects) as :class:`~eventlog.errors.UnreadableStore`. No ``sqlite3``
error leaves the store.
"""

from __future__ import annotations

import random
import sqlite3
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

import sqlite_utils

from .appending import (
    GroupAppends,
    GroupCommitter,
    PreparedBatch,
    Subscribers,
)
from .chain import ChainReport, verify_chain
from .envelope import (
    AppendResult,
    Clock,
    RawRow,
    RecordedEvent,
    SystemClock,
    decode_rows,
    now_text,
    paged_rows,
)
from .errors import EventLogError, StoreBusy, StoreClosed, UnreadableStore
from .inline import REBUILD_CHUNK, InlineProjection, Progress
from .readers import ReaderPool
from .sqlite_group import write_group
from .sqlite_schema import (
    COLUMNS,
    HIGH_WATER,
    chunked_rows,
    create_schema,
    fetch_rows,
    is_busy,
    storage_fault,
    text_or_bytes,
)
from .store import Listener, SessionHead
from .upcasting import UpcasterRegistry, default_upcasters

__all__ = ["SQLiteEventStore", "create_schema"]

T = TypeVar("T")
_PAGE = 2000
_BUSY_TIMEOUT_MS = 5000
_MAX_ATTEMPTS = 12
_HEADS_CACHED = 50_000


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
        self._retry(lambda: create_schema(sqlite_utils.Database(self._writer)))
        self._retry(self._refresh_stale_projections)
        self._committer: GroupCommitter[PreparedBatch, AppendResult] = GroupCommitter(
            self._commit
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
        # Projection tables may cascade from the sessions' summary rows (SPEC TD-4).
        conn.execute("PRAGMA foreign_keys = ON")
        return conn

    def _open_writer(self) -> sqlite3.Connection:
        """The write connection. A path SQLite cannot open as a database file (a directory, a
        file it may not read) is :class:`UnreadableStore`, like a file that is no database."""
        try:
            return self._connect()
        except sqlite3.DatabaseError as exc:
            raise UnreadableStore(str(exc)) from exc

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

    # -- writing ---------------------------------------------------------------------------

    def _commit(self, group: Sequence[PreparedBatch]) -> list[AppendResult | BaseException]:
        if self._closed:
            raise StoreClosed("the store is closed")
        try:
            outcomes = self._commit_once(group)
        except sqlite3.DatabaseError as exc:
            self._raise_unless_busy(exc)
            outcomes = self._retry(lambda: self._commit_once(group))
        if self._listeners:
            committed = [
                e for o in outcomes if isinstance(o, AppendResult) and not o.replayed
                for e in o.events
            ]
            if committed:
                self._listeners.publish(committed)
        return outcomes

    def _commit_once(self, group: Sequence[PreparedBatch]) -> list[AppendResult | BaseException]:
        conn = self._writer
        conn.execute("BEGIN IMMEDIATE")
        try:
            done = write_group(
                conn, group, heads=self._heads, position=self._high_water(conn),
                now=now_text(self._clock), upcasters=self._upcasters,
                projections=self._projections,
            )
            conn.execute("COMMIT")
        except BaseException:
            self._known_position = None
            self._heads.clear()
            if conn.in_transaction:
                conn.execute("ROLLBACK")
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
        conn = self._writer
        conn.execute("BEGIN IMMEDIATE")
        try:
            recorded = dict(conn.execute("SELECT name, version FROM projection_versions"))
            stale = [
                p for p in self._projections
                if recorded.get(p.name) != p.version or not p.is_present(conn)
            ]
            if stale:
                self._refold(conn, stale, progress=None)
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise

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
            conn = self._writer
            conn.execute("BEGIN IMMEDIATE")
            try:
                done = self._refold(conn, self._projections, progress=progress)
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            return done

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
            conn = self._writer
            conn.execute("BEGIN IMMEDIATE")
            try:
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
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
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

    def _pages(
        self, sql: str, key: tuple[Any, ...], after: int, limit: int | None
    ) -> Iterator[RawRow]:
        def fetch(params: tuple[Any, ...]) -> list[RawRow]:
            rows: list[RawRow] = self._read(lambda conn: fetch_rows(conn, sql, params))
            return rows

        return paged_rows(fetch, key, after, limit, page=_PAGE)

    def read_session(
        self, session_id: str, *, after: int = 0, limit: int | None = None
    ) -> Iterator[RecordedEvent]:
        sql = (f"SELECT {COLUMNS} FROM events WHERE session_id = ? AND seq > ? "
               "ORDER BY seq LIMIT ?")
        yield from decode_rows(self._pages(sql, (session_id,), after, limit),
                               upcasters=self._upcasters)

    def read_all(self, *, after: int = 0, limit: int | None = None) -> Iterator[RecordedEvent]:
        sql = (f"SELECT {COLUMNS} FROM events WHERE global_position > ? "
               "ORDER BY global_position LIMIT ?")
        yield from decode_rows(self._pages(sql, (), after, limit), upcasters=self._upcasters)

    def raw_session(self, session_id: str) -> Iterator[tuple[Any, ...]]:
        # Tolerates rows whose seq was tampered into a non-integer or below 1 (they sort last)
        # and text that is not valid UTF-8 (it comes back as bytes, a wrong-type break).
        sql = (f"SELECT {COLUMNS} FROM events WHERE session_id = ? "
               "ORDER BY typeof(seq) != 'integer' OR seq < 1, seq, global_position")
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
        self._readers.close()
