"""The scale-out backend: one PostgreSQL database shared by any number of processes (EL-8).

Same protocol and guarantees as :mod:`eventlog.sqlite`. Appends go through a
:class:`GroupCommitter` (concurrent appends in one process share a transaction); each group's
transaction first takes a transaction-scoped advisory lock (``pg_advisory_xact_lock``, D109),
so appends from every process are serialised and global positions are handed out in commit
order: a reader of the global stream never sees position *n + 1* before *n*, and never skips
an event that commits late. Inline projections are updated in that transaction (their tables
in :mod:`projections`). Readers borrow one of a few pooled autocommit connections
(:class:`eventlog.sqlite.ReaderPool`). Each append
transaction also sends a ``NOTIFY``, and while the store has listeners a thread ``LISTEN``s
for it, so they hear other processes' commits too (:mod:`eventlog.postgres_listen`, D116).

psycopg 3 (the ``postgres`` extra) is imported only when a store is opened.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from .appending import (
    GroupAppends,
    GroupCommitter,
    Listener,
    PreparedBatch,
    Subscribers,
    write_group,
)
from .chain import ChainReport, verify_chain
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
from .errors import DescriptorsExhausted, InvalidStoreUrl, StorageFault, StoreClosed
from .inline import REBUILD_CHUNK, InlineProjection, Progress
from .postgres_group import REPLAY, copy_rows, group_heads, write_rows
from .postgres_listen import CommitFollower, channel_for, notify_payload
from .postgres_schema import (
    APPEND_LOCK,
    COLUMNS,
    HIGH_WATER,
    SCHEMA,
    ImportRefused,
    check_text,
    parse_url,
)
from .sqlite import ReaderPool, descriptors_exhausted
from .upcasting import UpcasterRegistry, default_upcasters

if TYPE_CHECKING:
    import psycopg

__all__ = ["PostgresEventStore"]

T = TypeVar("T")
_PAGE = 2000
_HEAD_COLUMNS = "session_id, version, head_hash, created_at, updated_at"
_RAW_SESSION = (f"SELECT {COLUMNS} FROM events WHERE session_id = %s "
                "ORDER BY seq < 1, seq, global_position")
"""A session's rows as stored; rows whose seq was tampered below 1 sort last (as on SQLite)."""


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
        return StorageFault(f"PostgreSQL at {where}: {reason}", reason=reason, error_name=name)

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
                group, heads=group_heads(conn, group), position=int(position), now=now,
                earlier_rows=lambda session_id, key: conn.execute(
                    REPLAY, (session_id, key)
                ).fetchall(),
                write=lambda rows, written, events: write_rows(
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

    def _pages(
        self, sql: str, key: tuple[Any, ...], after: int, limit: int | None
    ) -> Iterator[RawRow]:
        def fetch(params: tuple[Any, ...]) -> list[RawRow]:
            return self._read(lambda conn: conn.execute(sql, params).fetchall())

        return paged_rows(fetch, key, after, limit, page=_PAGE)

    def read_session(
        self, session_id: str, *, after: int = 0, limit: int | None = None
    ) -> Iterator[RecordedEvent]:
        sql = (f"SELECT {COLUMNS} FROM events WHERE session_id = %s AND seq > %s "
               "ORDER BY seq LIMIT %s")
        yield from decode_rows(self._pages(sql, (session_id,), after, limit),
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
        self._readers.close()
