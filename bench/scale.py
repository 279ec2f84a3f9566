"""Scale: what the server costs as the log and the number of waiting sessions grow (issue 24).

Run ``.venv/bin/python bench/scale.py`` (``--quick`` for a smoke run; ``--case NAME`` for one
case, repeatable; every case by default). Each case is a function of its own in ``CASES``,
printing its table and ratios against the targets of issue 24's acceptance.

``pending`` (acceptance 3): CPU per AskUserQuestion and idle CPU of a real ``sessionledger
serve`` at N = 8, 100, 1,000 and 3,000 sessions with a pending question (``--sizes``). For each
N, with the server stopped, the bench tops the SQLite file up to N protocol sessions, each
asking one AskUserQuestion, in process (the same service calls the routes make; the grace and
deadline are an hour and two, so no timer fires during the run), then starts ``serve`` on a
free loopback port over that file with the same durations and waits for its scheduler's first
pass. Then, on the server process alone (``psutil``: user + system CPU seconds):

* idle: CPU over ``--idle-s`` seconds with no requests, as % of one core;
* per question: ``--rounds`` rounds, each of ``--questions`` probe sessions created untimed,
  then one AskUserQuestion in each, sent one after the other over HTTP (202, pending), and
  ``--settle-s`` to let the scheduler's passes after the last commit finish; the server's CPU
  over that span divided by the number of questions (the median round is shown), gross: the
  idle CPU of the span is included. The probes are then denied (untimed), so every round
  starts at N pending.

``--case audit`` (issue 24 item 4: audit <= 3x typed replay): writes ``--events`` events of
mixed types over ``--sessions`` interleaved sessions with ``bench/rebuild.py``'s builder, folds
the read models once, then in FRESH processes, interleaved over ``--runs`` runs, times

1. the typed replay of the log (``store.read_all()``, every payload decoded),
2. ``audit_log`` (what ``sessionledger audit`` runs: every chain, every read model against a
   fresh fold of its session, the findings), and
3. ``store.rebuild_projections()`` (drop every read model and fold the whole log),

and prints seconds, events/s and each one's ratio to the replay's time (target: audit <= 3).

``--case bulk`` (issue 24 item 4: bulk append at 1 M events >= 0.8x its rate at 10 k): builds
two logs with the same builder, one of 10,000 events and one of ``--events``, then, over
``--runs`` interleaved runs, appends a window of ``--window`` more events to a fresh copy of
each in a fresh process (``append_many`` of ``--group`` one-message batches to random
sessions, ``synchronous=normal``, as the builder does) and prints the rate of each and their
ratio. Beside it, the anchor: plain ``sqlite3`` writing the same windows of rows into fresh
copies of the same two logs (the rows and ``events_session_seq`` only: no heads, no hashing,
no Python of the store), so the part of the slow-down that is SQLite's own B-tree, a leaf of
the per-session index dirtied per session per group, shows beside the store's.

The server of ``pending`` runs the code of ``--server-root`` (default: this checkout), so an
older checkout's server can be measured with this script: ``--server-root ../old``.
See docs/performance.md.
"""

from __future__ import annotations

import sys
from pathlib import Path

# Run as a script, this file's directory comes first on sys.path, and bench/eventlog.py would
# shadow the ``eventlog`` package: drop the directory, so the checkout's packages are found.
_HERE = Path(__file__).resolve().parent
_ROOT = _HERE.parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
if str(_ROOT) not in sys.path:
    sys.path.append(str(_ROOT))
if str(_HERE) not in sys.path:
    sys.path.append(str(_HERE))  # bench/rebuild.py's builder

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import platform  # noqa: E402
import random  # noqa: E402
import shutil  # noqa: E402
import signal  # noqa: E402
import socket  # noqa: E402
import sqlite3  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable, Iterator, Sequence  # noqa: E402
from contextlib import contextmanager  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from typing import Any  # noqa: E402

import httpx  # noqa: E402
import psutil  # noqa: E402
from rebuild import build  # noqa: E402

from eventlog import AppendBatch, MessageRecorded, NewEvent, open_store  # noqa: E402

STARTUP_TIMEOUT_S = 60.0


def question(text: str) -> dict[str, Any]:
    return {"questions": [{
        "question": text, "header": "Choice", "multiSelect": False,
        "options": [{"label": "Postgres (Recommended)", "description": "the server"},
                    {"label": "SQLite", "description": "one file"}],
    }]}


def machine_note() -> str:
    try:
        load = f"{os.getloadavg()[0]:.2f}"
    except OSError:
        load = "n/a"
    return (f"python {platform.python_version()}, {os.cpu_count()} CPUs, "
            f"{platform.system()} {platform.machine()}, 1-min load average {load}")


# --------------------------------------------------------------------------------------------
# A real server over a SQLite file.


@contextmanager
def running_server(
    directory: Path, db: Path, workspace: Path, extra: Sequence[str], server_root: Path
) -> Iterator[tuple[str, psutil.Process]]:
    """``python -m sessionledger serve`` of ``server_root``'s code on a free loopback port;
    SIGTERM on exit."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if k != "SESSIONLEDGER_DB"}
    env["PYTHONPATH"] = os.pathsep.join(
        [str(server_root), *filter(None, [env.get("PYTHONPATH")])])
    command = [sys.executable, "-m", "sessionledger", "serve", "--port", str(port),
               "--workspace", str(workspace), "--db", f"sqlite:///{db}", *extra]
    log_path = directory / "server.log"
    with log_path.open("ab") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env,
                                   cwd=server_root)
    base_url = f"http://127.0.0.1:{port}"
    try:
        _wait_healthy(base_url, process, log_path)
        yield base_url, psutil.Process(process.pid)
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _wait_healthy(base_url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while time.monotonic() < deadline and process.poll() is None:
        try:
            if httpx.get(f"{base_url}/healthz", timeout=1.0).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.05)
    raise RuntimeError(f"server did not start:\n{log.read_text(errors='replace')}")


def cpu_s(process: psutil.Process) -> float:
    """User + system CPU seconds of the process (all its threads)."""
    times = process.cpu_times()
    return float(times.user + times.system)


# --------------------------------------------------------------------------------------------
# Case ``pending``: CPU per question and idle CPU by the number of pending sessions (24.3).


@dataclass
class PendingLevel:
    pending: int
    idle_pct: float
    per_question_ms: list[float]
    ask_p50_ms: float

    @property
    def question_ms(self) -> float:
        return statistics.median(self.per_question_ms)


def top_up(db: Path, workspace: Path, grace_s: float, deadline_s: float, have: int,
           want: int) -> None:
    """Add protocol sessions each waiting on one AskUserQuestion until ``want`` (in process,
    with the server stopped)."""
    from sessionledger import SessionService
    from statemachine.interaction import TimerConfig

    service = SessionService.open(f"sqlite:///{db}", workspace_root=workspace,
                                  timer_config=TimerConfig(grace_s, deadline_s))
    try:
        for n in range(have, want):
            sid = str(service.create_session()["sessionId"])
            answer = service.tools.call(sid, "AskUserQuestion", question(f"Pending {n}?"))
            assert answer.status_code == 202, answer.document
    finally:
        service.close()


def _round(client: httpx.Client, server: psutil.Process, args: argparse.Namespace,
           tag: str) -> tuple[float, list[float]]:
    """One round of probe questions: the server's CPU ms per question and each ask's wall ms."""
    probes = [client.post("/v1/sessions", json={}).json()["sessionId"]
              for _ in range(args.questions)]
    time.sleep(args.settle_s)
    walls: list[float] = []
    waiting: list[tuple[str, str]] = []
    before = cpu_s(server)
    for i, sid in enumerate(probes):
        started = time.perf_counter()
        response = client.post(f"/v1/sessions/{sid}/tool-calls", json={
            "tool": "AskUserQuestion", "input": question(f"Probe {tag}.{i}?")})
        walls.append((time.perf_counter() - started) * 1000)
        if response.status_code != 202:
            raise RuntimeError(f"AskUserQuestion answered {response.status_code}: "
                               f"{response.text[:300]}")
        waiting.append((sid, response.json()["interactionId"]))
    time.sleep(args.settle_s)
    spent = cpu_s(server) - before
    for sid, iid in waiting:  # back to N pending
        denied = client.post(f"/v1/sessions/{sid}/interactions/{iid}/respond",
                             json={"decision": "deny"})
        if denied.status_code != 200:
            raise RuntimeError(f"deny answered {denied.status_code}: {denied.text[:300]}")
    time.sleep(args.settle_s)
    return spent * 1000 / len(probes), walls


def measure_pending(args: argparse.Namespace, tmp: Path) -> list[PendingLevel]:
    db, workspace = tmp / "ledger.db", tmp / "workspace"
    workspace.mkdir()
    durations = ["--question-grace-s", str(args.grace_s),
                 "--question-deadline-s", str(args.deadline_s)]
    levels: list[PendingLevel] = []
    have = 0
    for size in args.sizes:
        started = time.perf_counter()
        top_up(db, workspace, args.grace_s, args.deadline_s, have, size)
        have = size
        print(f"  {size} pending sessions written in {time.perf_counter() - started:.1f} s",
              file=sys.stderr)
        with running_server(tmp, db, workspace, durations, args.server_root) as (url, server), \
                httpx.Client(base_url=url, timeout=60.0) as client:
            time.sleep(args.settle_s * 4)  # the scheduler's first pass loads every timer
            before = cpu_s(server)
            time.sleep(args.idle_s)
            idle_pct = 100 * (cpu_s(server) - before) / args.idle_s
            per_question: list[float] = []
            walls: list[float] = []
            for r in range(args.rounds):
                ms, wall = _round(client, server, args, f"{size}.{r}")
                per_question.append(ms)
                walls += wall
        levels.append(PendingLevel(size, idle_pct, per_question, statistics.median(walls)))
        print(f"  {size}: idle {idle_pct:.2f} %, per question "
              f"{', '.join(f'{m:.2f}' for m in per_question)} ms", file=sys.stderr)
    return levels


def render_pending(args: argparse.Namespace, levels: list[PendingLevel]) -> str:
    lines = [
        f"pending bench: sessionledger serve on loopback over SQLite (synchronous=FULL); "
        f"server CPU (user+system); {args.rounds} round(s) of {args.questions} questions "
        f"per size, median round; idle over {args.idle_s:g} s",
        f"  {machine_note()}",
        "",
        f"{'pending sessions':<20}{'CPU/question ms':>17}{'per-round range':>18}"
        f"{'ask p50 ms':>12}{'idle % of a core':>18}",
        "-" * 85,
    ]
    for level in levels:
        spread = f"{min(level.per_question_ms):.2f}-{max(level.per_question_ms):.2f}"
        lines.append(f"{level.pending:<20,}{level.question_ms:>17.2f}{spread:>18}"
                     f"{level.ask_p50_ms:>12.2f}{level.idle_pct:>18.2f}")
    by_size = {level.pending: level for level in levels}
    low, high = min(by_size), max(by_size)
    lines += ["", f"{'ratio / figure':<54}{'measured':>9}{'target':>10}{'result':>8}",
              "-" * 81]
    ratio = by_size[high].question_ms / by_size[low].question_ms
    lines.append(f"{f'CPU per question: {high:,} pending / {low:,}':<54}{ratio:>9.3f}"
                 f"{'<= 1.20':>10}{'PASS' if ratio <= 1.2 else 'MISS':>8}")
    idle = by_size[max(by_size)].idle_pct
    lines.append(f"{f'idle CPU at {high:,} pending, % of a core':<54}{idle:>9.2f}"
                 f"{'< 2.00':>10}{'PASS' if idle < 2.0 else 'MISS':>8}")
    if 1000 in by_size and high != 1000:  # the acceptance names 1,000 against 8
        ratio = by_size[1000].question_ms / by_size[low].question_ms
        lines.append(f"{f'CPU per question: 1,000 pending / {low:,}':<54}{ratio:>9.3f}"
                     f"{'<= 1.20':>10}{'PASS' if ratio <= 1.2 else 'MISS':>8}")
    return "\n".join(lines)


def case_pending(args: argparse.Namespace) -> str:
    with tempfile.TemporaryDirectory(prefix="sl-scale-", dir=args.tmp) as tmp:
        return render_pending(args, measure_pending(args, Path(tmp)))


def pending_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("case pending")
    g.add_argument("--sizes", type=_sizes, default=[8, 100, 1000, 3000],
                   help="pending sessions, comma-separated, ascending (default 8,100,1000,3000)")
    g.add_argument("--questions", type=int, default=100, help="probe questions per round")
    g.add_argument("--rounds", type=int, default=3, help="rounds per size (median shown)")
    g.add_argument("--idle-s", type=float, default=10.0, help="idle window per size, seconds")
    g.add_argument("--settle-s", type=float, default=0.5,
                   help="wait after a batch for the scheduler's passes, seconds")
    g.add_argument("--grace-s", type=float, default=3600.0, help="the server's question grace")
    g.add_argument("--deadline-s", type=float, default=7200.0,
                   help="the server's question deadline")


def pending_quick(args: argparse.Namespace) -> None:
    args.sizes, args.questions, args.rounds, args.idle_s = [8, 100], 10, 1, 2.0
    args.settle_s = 0.3


def _sizes(text: str) -> list[int]:
    sizes = [int(part) for part in text.split(",") if part.strip()]
    if not sizes or sizes != sorted(sizes) or sizes[0] < 1:
        raise argparse.ArgumentTypeError("sizes must be positive and ascending")
    return sizes


SMALL = 10_000
"""The size bulk append is compared against."""


def _loadavg() -> str:
    try:
        return f"{os.getloadavg()[0]:.2f}"
    except OSError:
        return "?"


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[len(ordered) // 2]


def _child(args: list[str]) -> dict[str, float]:
    """Run one measurement of this script in a fresh process; its last line is JSON."""
    out = subprocess.run(
        [sys.executable, __file__, *args], check=True, capture_output=True, text=True,
    ).stdout
    result: dict[str, float] = json.loads(out.strip().splitlines()[-1])
    return result


# -- audit and rebuild beside replay -----------------------------------------------------------

AUDIT_PARTS = ("replay", "audit", "rebuild")


def measure_audit_part(path: Path, what: str) -> dict[str, float]:
    """One of :data:`AUDIT_PARTS` on the log at ``path``, in this process."""
    from projections import open_projected_store
    from sessionledger.service.audit import audit_log

    url = f"sqlite:///{path}"
    if what == "replay":
        store = open_store(url)
        started = time.perf_counter()
        count = sum(1 for event in store.read_all() if event.data is not None)
    elif what == "audit":
        store, projections = open_projected_store(url)
        started = time.perf_counter()
        reports = audit_log(store, projections)
        count = sum(r.events for r in reports)
        if not all(r.ok for r in reports):
            raise SystemExit("the audit found faults in a sound log")
    else:
        store, _ = open_projected_store(url)
        started = time.perf_counter()
        count = store.rebuild_projections()
    seconds = time.perf_counter() - started
    store.close()
    return {"events": count, "seconds": seconds}


def case_audit(args: argparse.Namespace) -> int:
    """Audit and rebuild of the log beside its typed replay (target: audit <= 3x replay)."""
    from projections import open_projected_store

    with tempfile.TemporaryDirectory(dir=args.tmp) as tmp:
        path = Path(tmp) / "ledger.db"
        took = build(path, args.events, args.sessions, args.group)
        store, _ = open_projected_store(f"sqlite:///{path}")  # folds the read models once
        store.close()
        print(f"scale bench, audit: {args.events:,} events over {args.sessions:,} sessions, "
              f"built in {took:.1f} s; median of {args.runs} interleaved run(s), fresh "
              f"processes; 1-min load average {_loadavg()}")
        runs: dict[str, list[dict[str, float]]] = {w: [] for w in AUDIT_PARTS}
        for _ in range(args.runs):
            for what in AUDIT_PARTS:
                runs[what].append(_child(["--child", what, "--path", str(path)]))
    seconds = {w: _median([r["seconds"] for r in runs[w]]) for w in AUDIT_PARTS}
    print(f"{'measurement':<36}{'events':>12}{'seconds':>10}{'events/s':>12}{'x replay':>10}")
    names = {"replay": "typed replay (read_all)", "audit": "audit (every session)",
             "rebuild": "rebuild every read model"}
    for what in AUDIT_PARTS:
        events = int(runs[what][0]["events"])
        print(f"{names[what]:<36}{events:>12,}{seconds[what]:>10.2f}"
              f"{events / seconds[what]:>12,.0f}{seconds[what] / seconds['replay']:>10.2f}")
    ratio = seconds["audit"] / seconds["replay"]
    per_run = [a["seconds"] / r["seconds"] for a, r in zip(runs["audit"], runs["replay"],
                                                             strict=True)]
    print(f"audit / replay time: {ratio:.2f} (per run {min(per_run):.2f}-{max(per_run):.2f}; "
          f"target <= 3.00) {'PASS' if ratio <= 3 else 'MISS'}; load average {_loadavg()} "
          "after")
    return 0


# -- bulk append at 10 k and at 1 M events -----------------------------------------------------


def append_window(path: Path, events: int, sessions: int, group: int, seed: int) -> float:
    """Append ``events`` one-message batches to random sessions of the log at ``path`` in
    ``append_many`` calls of ``group`` batches; the rate in events/s."""
    rng = random.Random(seed)
    store = open_store(f"sqlite:///{path}?synchronous=normal")
    groups = []
    for start in range(0, events, group):
        groups.append([
            AppendBatch(f"sess_{rng.randrange(sessions):06d}", (NewEvent(
                MessageRecorded(role="user", content="x" * rng.randint(20, 200)),
                actor="user",
            ),))
            for _ in range(min(group, events - start))
        ])
    started = time.perf_counter()
    for batches in groups:
        for outcome in store.append_many(batches):
            if not hasattr(outcome, "events"):
                raise SystemExit(f"append failed: {outcome!r}")
    seconds = time.perf_counter() - started
    store.close()
    return events / seconds


def raw_window(path: Path, events: int, sessions: int, group: int, seed: int) -> float:
    """The anchor of :func:`append_window`: the same windows of rows written by plain
    ``sqlite3`` into the same log file, with none of the store's work but the rows and the
    one index any per-session log needs (``events_session_seq``): each group one
    ``executemany`` of ``INSERT`` in one transaction, next ``seq`` per session and fixed
    64-character hashes, the store writer's own cache and checkpoint settings. Its rate at 1 M
    events over its rate at 10 k is what SQLite's B-tree leaves to any log of this shape."""
    from eventlog.sqlite import _CHECKPOINT_PAGES, _WRITER_CACHE_KIB

    rng = random.Random(seed)
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute(f"PRAGMA cache_size = -{_WRITER_CACHE_KIB}")
    conn.execute(f"PRAGMA wal_autocheckpoint = {_CHECKPOINT_PAGES}")
    seqs = dict(conn.execute("SELECT session_id, max(seq) FROM events GROUP BY session_id"))
    (position,) = conn.execute("SELECT max(global_position) FROM events").fetchone()
    groups = []
    for start in range(0, events, group):
        rows = []
        for _ in range(min(group, events - start)):
            session = f"sess_{rng.randrange(sessions):06d}"
            seqs[session] = seqs.get(session, 0) + 1
            position += 1
            content = json.dumps({"content": "x" * rng.randint(20, 200), "role": "user"})
            rows.append((position, session, seqs[session], "MessageRecorded", 1, content,
                         "2026-01-01T00:00:00.000000Z", "user", "0" * 64, "f" * 64))
        groups.append(rows)
    started = time.perf_counter()
    for rows in groups:
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany(
            "INSERT INTO events (global_position, session_id, seq, type, schema_version, data,"
            " recorded_at, actor, prev_hash, hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
        conn.execute("COMMIT")
    seconds = time.perf_counter() - started
    conn.close()
    return events / seconds


def _fresh_copy(source: Path, target: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        if Path(f"{target}{suffix}").exists():
            Path(f"{target}{suffix}").unlink()
    shutil.copyfile(source, target)
    with open(target, "rb+") as copy:  # on disk before the window: its first checkpoint's
        os.fsync(copy.fileno())        # fsync must not write out the whole copy


def case_bulk(args: argparse.Namespace) -> int:
    """Bulk append rate at 10,000 events and at ``--events`` (target: ratio >= 0.8)."""
    sizes = (SMALL, args.events)
    with tempfile.TemporaryDirectory(dir=args.tmp) as tmp:
        built: dict[int, Path] = {}
        for size in sizes:
            built[size] = Path(tmp) / f"log-{size}.db"
            took = build(built[size], size, args.sessions, args.group)
            store = open_store(f"sqlite:///{built[size]}")  # checkpoint: one file to copy
            store.close()
            print(f"built {size:,} events over {args.sessions:,} sessions in {took:.1f} s "
                  f"({size / took:,.0f} events/s)")
        print(f"scale bench, bulk: windows of {args.window:,} events in append_many calls of "
              f"{args.group:,} batches; median of {args.runs} interleaved run(s), fresh copies "
              f"and processes; 1-min load average {_loadavg()}")
        rates: dict[tuple[str, int], list[float]] = {(w, s): [] for w in WRITERS for s in sizes}
        work = Path(tmp) / "work.db"
        for run in range(args.runs):
            for writer in WRITERS:
                for size in sizes:
                    _fresh_copy(built[size], work)
                    rates[writer, size].append(_child([
                        "--child", writer, "--path", str(work), "--window", str(args.window),
                        "--sessions", str(args.sessions), "--group", str(args.group),
                        "--seed", str(run),
                    ])["rate"])
    print(f"{'writer':<34}{'log size before':>16}{'events/s':>12}{'per run':>20}")
    ratios = {}
    for writer in WRITERS:
        for size in sizes:
            spread = f"{min(rates[writer, size]):,.0f}-{max(rates[writer, size]):,.0f}"
            print(f"{WRITERS[writer]:<34}{size:>16,}{_median(rates[writer, size]):>12,.0f}"
                  f"{spread:>20}")
        ratios[writer] = _median(rates[writer, args.events]) / _median(rates[writer, SMALL])
    per_run = [b / s for b, s in zip(rates["window", args.events], rates["window", SMALL],
                                     strict=True)]
    extra = {w: 1e6 / _median(rates[w, args.events]) - 1e6 / _median(rates[w, SMALL])
             for w in WRITERS}
    print(f"(anchor) plain sqlite3 at {args.events:,} / at {SMALL:,}: {ratios['raw']:.2f}")
    print(f"time added per event at {args.events:,} over at {SMALL:,}: store "
          f"{extra['window']:.1f} us, plain sqlite3 {extra['raw']:.1f} us (the store can reach "
          f"0.80 only if its time per event at {SMALL:,} is at least 4x the time it adds)")
    ratio = ratios["window"]
    print(f"bulk append at {args.events:,} / at {SMALL:,}: {ratio:.2f} (per run "
          f"{min(per_run):.2f}-{max(per_run):.2f}; target >= 0.80) "
          f"{'PASS' if ratio >= 0.8 else 'MISS'}; load average {_loadavg()} after")
    return 0


WRITERS = {"window": "sessionledger append_many", "raw": "(anchor) plain sqlite3 rows"}
"""Case bulk's writers: the store, and plain ``sqlite3`` writing the same rows."""


def audit_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("cases audit and bulk")
    g.add_argument("--events", type=int, default=1_000_000, help="log size")
    g.add_argument("--sessions", type=int, default=2_000)
    g.add_argument("--group", type=int, default=5_000, help="batches per append_many")
    g.add_argument("--window", type=int, default=30_000,
                   help="events appended per bulk measurement")
    g.add_argument("--runs", type=int, default=3, help="interleaved runs (median shown)")
    g.add_argument("--child", choices=(*AUDIT_PARTS, *WRITERS), help=argparse.SUPPRESS)
    g.add_argument("--path", type=Path, help=argparse.SUPPRESS)
    g.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)


def log_quick(args: argparse.Namespace) -> None:
    args.events, args.sessions, args.group, args.window, args.runs = 20_000, 200, 1_000, 5_000, 1


def _printed(run: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], str]:
    def case(args: argparse.Namespace) -> str:
        run(args)
        return ""

    return case


# --------------------------------------------------------------------------------------------
# Cases and orchestration. A case is (run, add its options, shrink them for --quick).


@dataclass(frozen=True)
class Case:
    run: Callable[[argparse.Namespace], str]
    options: Callable[[argparse.ArgumentParser], None]
    quick: Callable[[argparse.Namespace], None]


CASES: dict[str, Case] = {
    "pending": Case(case_pending, pending_options, pending_quick),
    "audit": Case(_printed(case_audit), audit_options, log_quick),
    "bulk": Case(_printed(case_bulk), lambda _p: None, log_quick),
}


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--case", action="append", choices=sorted(CASES), default=None,
                   help="the case to run (repeatable; default: every case)")
    p.add_argument("--quick", action="store_true",
                   help="tiny sizes: a smoke test, numbers meaningless")
    p.add_argument("--tmp", type=Path, default=None,
                   help="directory for the database files (default: system temp dir)")
    p.add_argument("--server-root", type=Path, default=_ROOT,
                   help="the checkout whose code the server runs (default: this one)")
    for case in CASES.values():
        case.options(p)
    args = p.parse_args(argv)
    args.case = args.case or list(CASES)
    args.server_root = args.server_root.resolve()
    if args.quick:
        for name in args.case:
            CASES[name].quick(args)
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.child in WRITERS:  # one measurement of case bulk, in a fresh process
        window = append_window if args.child == "window" else raw_window
        rate = window(args.path, args.window, args.sessions, args.group, args.seed)
        print(json.dumps({"rate": rate}))
        return 0
    if args.child:  # one measurement of case audit
        print(json.dumps(measure_audit_part(args.path, args.child)))
        return 0
    started = time.perf_counter()
    for name in args.case:
        table = CASES[name].run(args)
        if table:
            print(table, flush=True)
        print()
    print(f"(total wall time {time.perf_counter() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
