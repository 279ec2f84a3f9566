"""Event-log throughput: sessionledger vs raw sqlite3 vs the ``eventsourcing`` library.

Run ``.venv/bin/python bench/eventlog.py`` (``--quick`` for a smoke run of a few seconds).
Prints one table of medians over interleaved runs, then the ratios with their targets.

Workloads (events per second, higher is better; every measurement on fresh files):

1. single    durable append of one event per commit (synchronous=FULL everywhere), timed
             after ``--warm`` untimed ones (:data:`WARM_APPENDS`): each log in its steady
             state, its write-ahead file wrapped once;
2. batches   100 events per commit;
3. replay    read every event back: sessionledger ``read_all()`` with typed payloads,
             eventsourcing ``repository.get`` of aggregates holding the same events,
             raw sqlite3 a plain ``SELECT`` of the same rows without decoding;
4. group     durable single-event appends from 1 thread vs N concurrent threads, each
             thread to its own session (sessionledger's group commit; raw sqlite3 with one
             connection per thread as the comparison);
5. async     the same appends awaited by 1 vs N coroutines on one event loop
             (``append_async``: the store's writer thread commits each group and settles it
             with one wake-up of the loop); every chain verified after the run, untimed.

Runs are interleaved: ``for run in 1..R: for workload: for system (rotated order)``, so drift
of the machine (page cache, thermal, neighbours) hits every system alike; the table shows the
median of the R samples; each ratio also shows its range over same-run pairs.
``--profile single|batches|replay`` instead runs one sessionledger workload under cProfile
(timed part only). ``--db postgresql://…`` adds two columns: sessionledger's PostgreSQL store
and the ``eventsourcing`` library's PostgreSQL recorder (``eventsourcing.postgres``), each
measurement in a schema of its own, dropped after it. See docs/performance.md for results.
"""

from __future__ import annotations

import sys
from pathlib import Path

# Run as a script, this file's directory comes first on sys.path, and this file is itself
# called ``eventlog``: drop the directory so ``import eventlog`` finds the package.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
if str(_HERE.parent) not in sys.path:
    sys.path.append(str(_HERE.parent))

import argparse  # noqa: E402
import asyncio  # noqa: E402
import os  # noqa: E402
import platform  # noqa: E402
import random  # noqa: E402
import shutil  # noqa: E402
import sqlite3  # noqa: E402
import statistics  # noqa: E402
import tempfile  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable, Sequence  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from typing import Any  # noqa: E402
from uuid import UUID  # noqa: E402

import sqlite_utils  # noqa: E402
from eventsourcing.application import Application  # noqa: E402
from eventsourcing.domain import Aggregate, event  # noqa: E402

from eventlog import (  # noqa: E402
    GENESIS_HASH,
    AppendBatch,
    ExecutionStateData,
    GoalData,
    NewEvent,
    SessionCreated,
    canonical_json,
    open_store,
)
from eventlog.envelope import build_row, encode_event  # noqa: E402
from eventlog.sqlite import create_schema  # noqa: E402

SYSTEMS = ("sessionledger", "raw sqlite3", "eventsourcing")
SL, RAW, ES = SYSTEMS
PG_SYSTEMS = ("sessionledger pg", "eventsourcing pg")
SL_PG, ES_PG = PG_SYSTEMS
PG_URL: str | None = None
"""``--db``: the PostgreSQL database the pg columns use (one schema per measurement)."""
_schemas: list[str] = []
RECORDED_AT = "2026-11-29T19:10:56.123Z"
BUSY_TIMEOUT_MS = 5000

# --------------------------------------------------------------------------------------------
# Payloads: SessionCreated with realistic, per-event distinct field values.

_USERS = ("dev", "alice", "bkumar", "ci-runner", "mgarcia")
_PROJECTS = ("sessionledger", "billing-service", "infra/terraform-modules", "mobile-app",
             "ml/pipelines", "docs-site", "payments-gateway", "monorepo/packages/web")
_WORDS = ("refactor", "the", "session", "store", "so", "that", "replay", "stays", "fast",
          "and", "add", "tests", "for", "timeouts", "migrate", "config", "parser", "fix",
          "flaky", "integration", "suite", "document", "public", "api", "bump", "deps")
_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


@dataclass(frozen=True, slots=True)
class Fields:
    """One event's field values, turned into each system's own event type when appended."""

    workspace: str
    host: str
    parent_session_id: str | None
    mode: str
    plan_enabled: bool
    goal: str | None


def _pools() -> tuple[list[str], list[str]]:
    """Parent ids and goal texts to draw from (built once, so setup stays cheap)."""
    rng = random.Random(20261129)
    parents = ["sess_" + "".join(rng.choice(_ALPHABET) for _ in range(26)) for _ in range(512)]
    goals = [" ".join(rng.choice(_WORDS) for _ in range(rng.randint(6, 28))).capitalize()
             for _ in range(512)]
    return parents, goals


_PARENTS, _GOALS = _pools()
_HOSTS = ("protocol", "tui", "headless")
_MODES = ("build", "edit", "yolo", "auto")


def make_fields(count: int, seed: int) -> list[Fields]:
    """``count`` distinct payloads (every workspace differs, so nothing can be cached).

    About 250 bytes of canonical JSON each: a workspace path, the host, a parent session id
    for 30%, Plan on for 40% and a goal of 6-28 words for about half (never with Plan).
    """
    rng = random.Random(seed)
    rand, pick = rng.random, rng.choice
    out = []
    for i in range(count):
        workspace = f"/home/{pick(_USERS)}/src/{pick(_PROJECTS)}/checkouts/task-{seed:04d}-{i:07d}"
        plan = rand() < 0.4  # Plan and a goal are exclusive (ES-1)
        goal = pick(_GOALS) if not plan and rand() < 0.8 else None
        out.append(Fields(workspace, pick(_HOSTS), pick(_PARENTS) if rand() < 0.3 else None,
                          pick(_MODES), plan, goal))
    return out


def sl_event(f: Fields) -> NewEvent:
    """The sessionledger payload (validated pydantic model) with its actor."""
    state = ExecutionStateData(
        mode=f.mode,  # type: ignore[arg-type]
        plan_enabled=f.plan_enabled,
        goal=GoalData(objective=f.goal) if f.goal else None,
    )
    payload = SessionCreated(workspace=f.workspace, host=f.host,  # type: ignore[arg-type]
                             parent_session_id=f.parent_session_id, execution_state=state)
    return NewEvent(payload, actor="user")


def es_kwargs(f: Fields) -> dict[str, Any]:
    """The same values as keyword arguments of the eventsourcing aggregate's event."""
    return {
        "workspace": f.workspace, "host": f.host, "parent_session_id": f.parent_session_id,
        "execution_state": {"mode": f.mode, "planEnabled": f.plan_enabled,
                            "goal": {"objective": f.goal} if f.goal else None},
    }


def session_ids(prefix: str, count: int) -> list[str]:
    return [f"sess_{prefix}{i:0{26 - len(prefix)}d}" for i in range(count)]


# --------------------------------------------------------------------------------------------
# eventsourcing: an aggregate whose events carry the same fields as SessionCreated.


class BenchSession(Aggregate):
    """A session aggregate: created once, then one ``Recorded`` event per further event."""

    @event("Created")
    def __init__(self, workspace: str, host: str, parent_session_id: str | None,
                 execution_state: dict[str, Any]) -> None:
        self.workspace = workspace
        self.host = host
        self.parent_session_id = parent_session_id
        self.execution_state = execution_state

    @event("Recorded")
    def record(self, workspace: str, host: str, parent_session_id: str | None,
               execution_state: dict[str, Any]) -> None:
        self.workspace = workspace
        self.host = host
        self.parent_session_id = parent_session_id
        self.execution_state = execution_state


def _pg_schema(path: Path) -> str:
    """A schema for one measurement's "file", remembered so :func:`drop_schemas` drops it."""
    name = f"bench_{os.getpid()}_{path.parent.name}_{path.stem}".lower()
    _schemas.append(name)
    return name


def sl_url(system: str, path: Path, *, options: str = "") -> str:
    """The store URL of sessionledger's column: a SQLite file, or a PostgreSQL schema."""
    if system == SL_PG:
        assert PG_URL is not None
        return f"{PG_URL}?schema={_pg_schema(path)}"
    return f"sqlite:///{path}{options}"


def drop_schemas() -> None:
    """Drop the schemas the last measurement made."""
    if not _schemas:
        return
    import psycopg

    assert PG_URL is not None
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        for name in dict.fromkeys(_schemas):
            conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')
    _schemas.clear()


def es_app(path: Path, system: str = ES) -> Application[UUID]:
    if system == ES_PG:
        from urllib.parse import urlsplit

        assert PG_URL is not None
        parts = urlsplit(PG_URL)
        schema = _pg_schema(path)
        import psycopg

        with psycopg.connect(PG_URL, autocommit=True) as conn:
            conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
        return Application(env={
            "PERSISTENCE_MODULE": "eventsourcing.postgres",
            "POSTGRES_DBNAME": parts.path.lstrip("/"), "POSTGRES_HOST": parts.hostname or "",
            "POSTGRES_PORT": str(parts.port or 5432), "POSTGRES_USER": parts.username or "",
            "POSTGRES_PASSWORD": parts.password or "", "POSTGRES_SCHEMA": schema,
        })
    return Application(env={"PERSISTENCE_MODULE": "eventsourcing.sqlite",
                            "SQLITE_DBNAME": str(path)})


class EsSessions:
    """Aggregates kept in memory; the first event of each creates it."""

    def __init__(self, count: int) -> None:
        self.aggs: list[BenchSession | None] = [None] * count

    def trigger(self, index: int, f: Fields) -> BenchSession:
        agg = self.aggs[index]
        if agg is None:
            agg = self.aggs[index] = BenchSession(**es_kwargs(f))
        else:
            agg.record(**es_kwargs(f))
        return agg


# --------------------------------------------------------------------------------------------
# raw sqlite3: the same schema, the same rows, just the SQL.

_RAW_INSERT = (
    "INSERT INTO events (global_position, session_id, seq, type, schema_version, data, "
    "recorded_at, actor, causation_id, correlation_id, idempotency_key, prev_hash, hash) "
    "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)"
)
_RAW_HEAD = (
    "INSERT INTO streams (session_id, version, head_hash, created_at, updated_at) "
    "VALUES (?,?,?,?,?) ON CONFLICT(session_id) DO UPDATE SET version=excluded.version, "
    "head_hash=excluded.head_hash, updated_at=excluded.updated_at"
)
_RAW_SELECT = (
    "SELECT global_position, session_id, seq, type, schema_version, data, recorded_at, "
    "actor, causation_id, correlation_id, idempotency_key, prev_hash, hash FROM events "
    "ORDER BY global_position"
)


def raw_connect(path: Path, *, create: bool = False) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False,
                           timeout=BUSY_TIMEOUT_MS / 1000)
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    if create:
        create_schema(sqlite_utils.Database(conn))
    return conn


class RawRows:
    """Precomputed rows, byte-for-byte what sessionledger writes (built outside the timing).

    ``global_position`` is left NULL so SQLite assigns it (INTEGER PRIMARY KEY): the values
    end up the same as sessionledger's, which computes them itself.
    """

    def __init__(self, sessions: int) -> None:
        self.heads: list[tuple[int, str]] = [(0, GENESIS_HASH)] * sessions

    def rows(self, ids: Sequence[str], index: int, fields: Sequence[Fields]) -> list[tuple]:
        version, prev = self.heads[index]
        out = []
        for f in fields:
            version += 1
            new = sl_event(f)
            row = build_row(global_position=None, session_id=ids[index],  # type: ignore[arg-type]
                            seq=version, new=new, data_json=encode_event(new.event),
                            recorded_at=RECORDED_AT, idempotency_key=None, prev_hash=prev)
            prev = row[12]
            out.append(row)
        self.heads[index] = (version, prev)
        return out


def raw_commit_retrying(conn: sqlite3.Connection, rows: Sequence[tuple]) -> None:
    """``raw_commit``, retried while another connection holds the lock past the busy timeout.

    With 32 connections contending, SQLite's sleeping busy handler can starve one writer
    beyond ``busy_timeout``; a real application would retry, so the baseline does too.
    """
    for attempt in range(1000):
        try:
            raw_commit(conn, rows)
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) and "busy" not in str(exc):
                raise
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            time.sleep(random.uniform(0.0, 0.001 * min(attempt + 1, 10)))
    raise RuntimeError("raw sqlite3: database stayed locked")


def raw_commit(conn: sqlite3.Connection, rows: Sequence[tuple]) -> None:
    conn.execute("BEGIN IMMEDIATE")
    if len(rows) == 1:
        conn.execute(_RAW_INSERT, rows[0])
    else:
        conn.executemany(_RAW_INSERT, rows)
    last = rows[-1]
    conn.execute(_RAW_HEAD, (last[1], last[2], last[12], RECORDED_AT, RECORDED_AT))
    conn.execute("COMMIT")


# --------------------------------------------------------------------------------------------
# Workloads. Each takes a fresh directory and returns events per second.

_profiler: Any = None  # a cProfile.Profile when --profile is given: on only while timing


def _tic() -> float:
    if _profiler is not None:
        _profiler.enable()
    return time.perf_counter()


def _toc(start: float) -> float:
    elapsed = time.perf_counter() - start
    if _profiler is not None:
        _profiler.disable()
    return elapsed


SESSIONS = 10  # sessions (aggregates) the single/batch workloads spread their appends over
WARM_APPENDS = 4000
"""Untimed single appends before the timed ones (every system alike): enough for each log's
write-ahead file to wrap once (sessionledger checkpoints every 10,000 WAL pages, ~3,400 such
appends; SQLite's default, the raw and eventsourcing logs', every 1,000). Until it first wraps,
every commit extends the WAL file, and its fsync then also writes the file's metadata: a fresh
store's first 10,000 pages commit 1.7 times slower than every later page (D195)."""


def single_append(
    system: str, workdir: Path, events: int, seed: int, warm: int = 0
) -> float:
    """``events`` single-event appends, timed, after ``warm`` untimed ones on the same log
    (``--warm``: the log's write-ahead file has then wrapped once, as in a server that has
    been running; see the module docstring)."""
    fields = make_fields(warm + events, seed)
    db = workdir / "single.db"
    if system in (SL, SL_PG):
        ids = session_ids("S", SESSIONS)
        versions = [0] * SESSIONS
        store = open_store(sl_url(system, db))

        def sl_append(i: int) -> None:
            k = i % SESSIONS
            store.append(ids[k], [sl_event(fields[i])], expected_version=versions[k])
            versions[k] += 1

        try:
            for i in range(warm):
                sl_append(i)
            start = _tic()
            for i in range(warm, warm + events):
                sl_append(i)
            elapsed = _toc(start)
        finally:
            store.close()
    elif system == RAW:
        ids = session_ids("S", SESSIONS)
        planner = RawRows(SESSIONS)
        rows = [planner.rows(ids, i % SESSIONS, [f]) for i, f in enumerate(fields)]
        conn = raw_connect(db, create=True)
        try:
            for one in rows[:warm]:
                raw_commit(conn, one)
            start = _tic()
            for one in rows[warm:]:
                raw_commit(conn, one)
            elapsed = _toc(start)
        finally:
            conn.close()
    else:
        app = es_app(db, system)
        sessions = EsSessions(SESSIONS)
        try:
            for i in range(warm):
                app.save(sessions.trigger(i % SESSIONS, fields[i]))
            start = _tic()
            for i in range(warm, warm + events):
                app.save(sessions.trigger(i % SESSIONS, fields[i]))
            elapsed = _toc(start)
        finally:
            app.close()
    return events / elapsed


def batch_append(system: str, workdir: Path, batches: int, size: int, seed: int) -> float:
    fields = make_fields(batches * size, seed)
    chunks = [fields[b * size:(b + 1) * size] for b in range(batches)]
    db = workdir / "batches.db"
    if system in (SL, SL_PG):
        ids = session_ids("B", SESSIONS)
        versions = [0] * SESSIONS
        store = open_store(sl_url(system, db))
        try:
            start = _tic()
            for b, chunk in enumerate(chunks):
                k = b % SESSIONS
                store.append(ids[k], [sl_event(f) for f in chunk], expected_version=versions[k])
                versions[k] += size
            elapsed = _toc(start)
        finally:
            store.close()
    elif system == RAW:
        ids = session_ids("B", SESSIONS)
        planner = RawRows(SESSIONS)
        rows = [planner.rows(ids, b % SESSIONS, chunk) for b, chunk in enumerate(chunks)]
        conn = raw_connect(db, create=True)
        try:
            start = _tic()
            for batch in rows:
                raw_commit(conn, batch)
            elapsed = _toc(start)
        finally:
            conn.close()
    else:
        app = es_app(db, system)
        sessions = EsSessions(SESSIONS)
        try:
            start = _tic()
            for b, chunk in enumerate(chunks):
                agg = None
                for f in chunk:
                    agg = sessions.trigger(b % SESSIONS, f)
                app.save(agg)
            elapsed = _toc(start)
        finally:
            app.close()
    return batches * size / elapsed


def replay(system: str, workdir: Path, sessions: int, per_session: int, seed: int) -> float:
    """Build (untimed) ``sessions * per_session`` events, then time reading them back."""
    fields = make_fields(sessions * per_session, seed)
    chunks = [fields[s * per_session:(s + 1) * per_session] for s in range(sessions)]
    total = sessions * per_session
    db = workdir / "replay.db"
    if system in (SL, SL_PG):
        ids = session_ids("R", sessions)
        url = sl_url(system, db)
        store = open_store(sl_url(system, db, options="?synchronous=normal"))
        for start_at in range(0, sessions, 100):
            store.append_many([AppendBatch(ids[s], tuple(sl_event(f) for f in chunks[s]), 0)
                               for s in range(start_at, min(start_at + 100, sessions))])
        store.close()
        store = open_store(url)  # fresh store: nothing cached in-process
        try:
            start = _tic()
            count = 0
            for recorded in store.read_all():
                if recorded.data.workspace:  # touch the typed payload
                    count += 1
            elapsed = _toc(start)
        finally:
            store.close()
    elif system == RAW:
        ids = session_ids("R", sessions)
        planner = RawRows(sessions)
        conn = raw_connect(db, create=True)
        for s, chunk in enumerate(chunks):
            raw_commit(conn, planner.rows(ids, s, chunk))
        conn.close()
        conn = raw_connect(db)
        try:
            start = _tic()
            count = 0
            for _row in conn.execute(_RAW_SELECT):
                count += 1
            elapsed = _toc(start)
        finally:
            conn.close()
    else:
        app = es_app(db, system)
        es_sessions = EsSessions(sessions)
        agg_ids = []
        for s, chunk in enumerate(chunks):
            for f in chunk:
                agg = es_sessions.trigger(s, f)
            app.save(agg)
            agg_ids.append(agg.id)
            es_sessions.aggs[s] = None  # keep memory flat while building
        app.close()
        app = es_app(db, system)
        try:
            start = _tic()
            count = 0
            for agg_id in agg_ids:
                count += app.repository.get(agg_id).version
            elapsed = _toc(start)
        finally:
            app.close()
    if count != total:
        raise RuntimeError(f"{system}: replayed {count} events, expected {total}")
    return total / elapsed


def group_commit(system: str, workdir: Path, writers: int, per_writer: int, seed: int) -> float:
    """``writers`` threads, each appending ``per_writer`` single events to its own session."""
    fields = make_fields(writers * per_writer, seed)
    per = [fields[w * per_writer:(w + 1) * per_writer] for w in range(writers)]
    db = workdir / "group.db"
    ids = session_ids("G", writers)
    errors: list[BaseException] = []
    barrier = threading.Barrier(writers + 1)
    cleanup: Callable[[], None]

    if system in (SL, SL_PG):
        store = open_store(sl_url(system, db))
        cleanup = store.close

        def work(w: int) -> None:
            for version, f in enumerate(per[w]):
                store.append(ids[w], [sl_event(f)], expected_version=version)

    elif system == RAW:
        raw_connect(db, create=True).close()
        planner = RawRows(writers)
        rows = [[planner.rows(ids, w, [f]) for f in per[w]] for w in range(writers)]
        conns = [raw_connect(db) for _ in range(writers)]

        def cleanup() -> None:
            for c in conns:
                c.close()

        def work(w: int) -> None:
            conn = conns[w]
            for one in rows[w]:
                raw_commit_retrying(conn, one)

    else:
        raise ValueError(system)

    # Each writer stamps its own start and end: the main thread may not get the GIL back
    # right after the barrier, so its own clock could start late.
    starts = [0.0] * writers
    ends = [0.0] * writers

    def guarded(w: int) -> None:
        try:
            barrier.wait()
            starts[w] = time.perf_counter()
            work(w)
            ends[w] = time.perf_counter()
        except BaseException as exc:  # reported below
            errors.append(exc)
            barrier.abort()

    threads = [threading.Thread(target=guarded, args=(w,)) for w in range(writers)]
    for t in threads:
        t.start()
    try:
        barrier.wait()
    except threading.BrokenBarrierError:
        pass  # a writer failed before the start: its error is raised below
    finally:
        for t in threads:
            t.join()
        cleanup()
    if errors:
        raise RuntimeError(f"{system}: a writer failed") from errors[0]
    return writers * per_writer / (max(ends) - min(starts))


def async_group_commit(
    system: str, workdir: Path, writers: int, per_writer: int, seed: int
) -> float:
    """``writers`` coroutines on one loop, each awaiting ``per_writer`` single-event
    ``append_async`` calls to its own session (the payloads of :func:`group_commit`)."""
    fields = make_fields(writers * per_writer, seed)
    per = [fields[w * per_writer:(w + 1) * per_writer] for w in range(writers)]
    ids = session_ids("A", writers)
    store = open_store(sl_url(system, workdir / "async.db"))

    async def work(w: int) -> None:
        for version, f in enumerate(per[w]):
            await store.append_async(ids[w], [sl_event(f)], expected_version=version)

    async def timed() -> float:
        start = _tic()
        await asyncio.gather(*(work(w) for w in range(writers)))
        return _toc(start)

    try:
        elapsed = asyncio.run(timed())
        # After the run, untimed: every append landed and every chain verifies.
        if store.head_position() != writers * per_writer:
            raise RuntimeError(f"{system}: {store.head_position()} events after the run")
        bad = [r for r in store.verify() if not r.ok]
        if bad or any(store.version(sid) != per_writer for sid in ids):
            raise RuntimeError(f"{system}: chains broken after the run: {bad}")
    finally:
        store.close()
    return writers * per_writer / elapsed


# --------------------------------------------------------------------------------------------
# Orchestration and printout.


@dataclass(frozen=True, slots=True)
class Workload:
    key: str
    label: str
    systems: tuple[str, ...]
    run: Callable[[str, Path, int], float]


def workloads(args: argparse.Namespace) -> list[Workload]:
    w = args.writers
    every = SYSTEMS + PG_SYSTEMS if args.db else SYSTEMS
    grouped = (SL, RAW, SL_PG) if args.db else (SL, RAW)
    awaited = (SL, SL_PG) if args.db else (SL,)
    return [
        Workload("single", "1. single append (1 event/commit)", every,
                 lambda s, d, seed: single_append(s, d, args.single, seed, args.warm)),
        Workload("batches", f"2. batches ({args.batch_size} events/commit)", every,
                 lambda s, d, seed: batch_append(s, d, args.batches, args.batch_size, seed)),
        Workload("replay", "3. replay (read all, typed decode)", every,
                 lambda s, d, seed: replay(s, d, args.replay_sessions,
                                           args.replay_per_session, seed)),
        Workload("group1", "4a. group commit, 1 writer", grouped,
                 lambda s, d, seed: group_commit(s, d, 1, args.group_single, seed)),
        Workload("groupN", f"4b. group commit, {w} writers", grouped,
                 lambda s, d, seed: group_commit(s, d, w, args.group_per_writer, seed)),
        Workload("async1", "5a. async group commit, 1 coroutine", awaited,
                 lambda s, d, seed: async_group_commit(s, d, 1, args.group_single, seed)),
        Workload("asyncN", f"5b. async group commit, {w} coroutines", awaited,
                 lambda s, d, seed: async_group_commit(s, d, w, args.group_per_writer, seed)),
    ]


def measure(args: argparse.Namespace, tmp: Path) -> dict[str, dict[str, list[float]]]:
    samples: dict[str, dict[str, list[float]]] = {}
    counter = 0
    for run in range(args.runs):
        for wl in workloads(args):
            order = list(wl.systems)
            shift = run % len(order)
            order = order[shift:] + order[:shift]  # rotate who goes first each run
            for system in order:
                counter += 1
                workdir = tmp / f"m{counter:04d}"
                workdir.mkdir()
                try:
                    rate = wl.run(system, workdir, args.seed + counter)
                finally:
                    shutil.rmtree(workdir, ignore_errors=True)
                    drop_schemas()
                samples.setdefault(wl.key, {}).setdefault(system, []).append(rate)
                if args.verbose:
                    print(f"  run {run + 1} {wl.key:8} {system:14} {rate:12,.0f}/s",
                          file=sys.stderr, flush=True)
    return samples


def cpu_check() -> float:
    """Microseconds for a fixed bit of pure-Python work (best of 5): shows how fast the
    machine was while the bench ran, since shared VMs drift by a factor of two."""
    sample = {"workspace": "/home/dev/src/project", "host": "tui", "n": [1, 2, 3], "ok": True}
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(2000):
            canonical_json(sample)
        best = min(best, (time.perf_counter() - start) / 2000)
    return best * 1e6


def sqlite_fs_note() -> str:
    return (f"python {platform.python_version()}, SQLite {sqlite3.sqlite_version}, "
            f"{os.cpu_count()} CPUs, {platform.system()} {platform.machine()}")


def render(
    args: argparse.Namespace, samples: dict[str, dict[str, list[float]]], load: str
) -> str:
    med = {k: {s: statistics.median(v) for s, v in per.items()} for k, per in samples.items()}
    lines = [
        f"eventlog bench: median of {args.runs} interleaved run(s), events/s "
        "(higher is better), synchronous=FULL",
        f"  {sqlite_fs_note()}",
        f"  {load}",
        "",
    ]
    columns = SYSTEMS + PG_SYSTEMS if args.db else SYSTEMS
    lines += [f"{'workload':<40}" + "".join(f"{c:>17}" for c in columns),
              "-" * (40 + 17 * len(columns))]
    for wl in workloads(args):
        cells = [f"{med[wl.key][s]:>17,.0f}" if s in med[wl.key] else f"{'n/a':>17}"
                 for s in columns]
        lines.append(f"{wl.label:<40}{''.join(cells)}")
    w = args.writers
    # (label, numerator (workload, system), denominator (workload, system), target)
    ratios = [
        ("single: sessionledger / raw", ("single", SL), ("single", RAW), 0.6),
        ("single: sessionledger / eventsourcing", ("single", SL), ("single", ES), 1.2),
        ("batches: sessionledger / raw", ("batches", SL), ("batches", RAW), 0.4),
        ("batches: sessionledger / eventsourcing", ("batches", SL), ("batches", ES), 1.5),
        ("replay: sessionledger / eventsourcing", ("replay", SL), ("replay", ES), 4.0),
        ("replay: sessionledger / raw SELECT", ("replay", SL), ("replay", RAW), 0.25),
        (f"group commit: {w} writers / 1 writer (sessionledger)", ("groupN", SL),
         ("group1", SL), 3.0),
        (f"(for comparison) {w} writers / 1 writer (raw sqlite3)", ("groupN", RAW),
         ("group1", RAW), None),
        (f"async group commit: {w} coroutines / 1 (sessionledger)", ("asyncN", SL),
         ("async1", SL), 5.0),
        (f"(for comparison) {w} coroutines / {w} threads", ("asyncN", SL), ("groupN", SL),
         None),
        (f"(for comparison) {w} coroutines / 1 thread writer", ("asyncN", SL), ("group1", SL),
         None),
    ]
    if args.db:
        ratios += [
            ("single: sessionledger pg / eventsourcing pg", ("single", SL_PG),
             ("single", ES_PG), None),
            ("batches: sessionledger pg / eventsourcing pg", ("batches", SL_PG),
             ("batches", ES_PG), None),
            ("replay: sessionledger pg / eventsourcing pg", ("replay", SL_PG),
             ("replay", ES_PG), None),
            (f"group commit: {w} writers / 1 writer (sessionledger pg)", ("groupN", SL_PG),
             ("group1", SL_PG), None),
            (f"async group commit: {w} coroutines / 1 (sessionledger pg)", ("asyncN", SL_PG),
             ("async1", SL_PG), None),
        ]
    lines += ["", f"{'ratio (of the medians above)':<54}{'measured':>9}{'per-run range':>16}"
                  f"{'target':>9}{'result':>8}", "-" * 96]
    for label, (nw, ns), (dw, ds), target in ratios:
        value = med[nw][ns] / med[dw][ds]
        # Same-run pairs: the two sides ran back to back, so drift of the machine cancels.
        paired = [a / b for a, b in zip(samples[nw][ns], samples[dw][ds], strict=True)]
        spread = f"{min(paired):.2f}-{max(paired):.2f}"
        if target is None:
            tail = f"{'-':>9}{'-':>8}"
        else:
            tail = f"{'>= ' + format(target, '.2f'):>9}{'PASS' if value >= target else 'MISS':>8}"
        lines.append(f"{label:<54}{value:>9.3f}{spread:>16}{tail}")
    return "\n".join(lines)


def _loadavg() -> str:
    try:
        return f"{os.getloadavg()[0]:.2f}"
    except OSError:
        return "n/a"


def profile(args: argparse.Namespace) -> int:
    """Run one sessionledger workload once under cProfile; print where the time goes."""
    import cProfile
    import pstats

    global _profiler
    chosen = {wl.key: wl for wl in workloads(args)}[args.profile]
    _profiler = cProfile.Profile()
    with tempfile.TemporaryDirectory(prefix="sl-bench-", dir=args.tmp) as tmp:
        rate = chosen.run(SL, Path(tmp), args.seed)
    print(f"{chosen.label}, sessionledger, timed part only, under cProfile: {rate:,.0f} "
          "events/s (with profiling overhead)")
    stats = pstats.Stats(_profiler, stream=sys.stdout)
    stats.sort_stats(args.profile_sort).print_stats(args.profile_top)
    return 0


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=5, help="interleaved runs (median is shown)")
    p.add_argument("--single", type=int, default=3000, help="events in the single workload")
    p.add_argument("--warm", type=int, default=WARM_APPENDS,
                   help="untimed appends before the single workload's timed ones")
    p.add_argument("--batches", type=int, default=300, help="batches in the batch workload")
    p.add_argument("--batch-size", type=int, default=100, help="events per batch")
    p.add_argument("--replay-sessions", type=int, default=400,
                   help="sessions (aggregates) in the replay workload")
    p.add_argument("--replay-per-session", type=int, default=100,
                   help="events per session (aggregate) in the replay workload")
    p.add_argument("--writers", type=int, default=32,
                   help="concurrent writers (workloads 4b, 5b)")
    p.add_argument("--group-single", type=int, default=3000,
                   help="events the lone writer appends (workloads 4a, 5a)")
    p.add_argument("--group-per-writer", type=int, default=150,
                   help="events each concurrent writer appends (workloads 4b, 5b)")
    p.add_argument("--seed", type=int, default=1, help="payload generator seed")
    p.add_argument("--tmp", type=Path, default=None,
                   help="directory for the database files (default: system temp dir)")
    p.add_argument("--quick", action="store_true",
                   help="tiny counts and one run: a smoke test, numbers meaningless")
    p.add_argument("--profile", choices=("single", "batches", "replay"),
                   help="instead of the table: profile one sessionledger workload")
    p.add_argument("--profile-sort", default="tottime", help="pstats sort key")
    p.add_argument("--profile-top", type=int, default=25, help="rows of the profile to print")
    p.add_argument("-v", "--verbose", action="store_true", help="every sample to stderr")
    p.add_argument("--db", default=None, metavar="postgresql://…",
                   help="also measure sessionledger and eventsourcing on this PostgreSQL "
                   "database (needs the postgres extra and psycopg_pool)")
    args = p.parse_args(argv)
    if args.db is not None and not args.db.startswith("postgresql://"):
        p.error("--db takes a postgresql:// URL (the SQLite columns always run)")
    if args.quick:
        args.runs, args.single, args.batches, args.warm = 1, 50, 5, 20
        args.replay_sessions, args.replay_per_session = 10, 50
        args.group_single, args.group_per_writer = 50, 3
    return args


def main(argv: Sequence[str] | None = None) -> int:
    global PG_URL
    args = parse_args(argv)
    PG_URL = args.db
    if args.profile:
        return profile(args)
    started = time.perf_counter()
    load_before, cpu_before = _loadavg(), cpu_check()
    with tempfile.TemporaryDirectory(prefix="sl-bench-", dir=args.tmp) as tmp:
        samples = measure(args, Path(tmp))
    print(render(args, samples,
                 f"1-min load average {load_before} before, {_loadavg()} after; CPU check "
                 f"{cpu_before:.2f} us before, {cpu_check():.2f} us after (lower is faster)"))
    print(f"\n(total wall time {time.perf_counter() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
