"""TodoWrite end to end beside the foundation's single durable append (issue 5, acceptance 5).

Run ``.venv/bin/python bench/todos.py`` (``--quick`` for a smoke run of a few seconds). Two
workloads, each on fresh SQLite files in a temporary directory, ``synchronous=FULL``:

1. single append — the event-log bench's workload 1 (``bench/eventlog.py``): one
   ``SessionCreated``-sized event per ``store.append`` over 10 sessions, the payload built
   inside the timing; here each append is also timed on its own for p50/p99;
2. TodoWrite, 20 items — ``SessionService.tools.call(session, "TodoWrite", {"todos": […]})``:
   the real service path (contract validation, the workspace's permission rules, the handler
   with the current list read from the todo projection, one appended batch of four events,
   the inline projections updated in the same transaction, the call document it answers
   with), 20 items of realistic text whose statuses move forward call by call,
   over 10 sessions.

Both are timed after untimed warm-up operations on the same files (``--warm-appends``,
``--warm-writes``), enough for the write-ahead file to wrap once: a server that has been
running commits into a WAL it overwrites, where a fresh store's first 10,000 pages each
extend the file and its fsync writes the file's metadata too (D195).

Runs are interleaved (``for run: for workload``, order rotated), and the table shows the
median over runs of each run's p50, p99 and operations per second, then the ratio TodoWrite
writes/s over single appends/s (median and per-run range) against the target of at least 0.5:
a tool call is one durable commit, like one append, so the rest of the path may cost at most
as much as the commit itself. A second table shows the time each operation spends inside
the store's write transaction (``BEGIN IMMEDIATE`` … ``COMMIT``: chaining, rows, inline
projections, fsync) and the ratio a TodoWrite could reach if nothing outside that transaction
cost anything — an upper bound for any speed-up of the service path around the store — and
the same if only the transaction's SQL statements (``COMMIT`` and its fsync included) cost
anything: an upper bound for any speed-up of the Python at all. Speed
is never asserted in tests (``tests/test_bench_smoke.py`` only runs ``--quick``). See
docs/performance.md.
"""

from __future__ import annotations

import sys
from pathlib import Path

# Run as a script, this file's directory comes first on sys.path and holds ``eventlog.py``
# (the throughput bench): drop it so ``import eventlog`` finds the package.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
if str(_HERE.parent) not in sys.path:
    sys.path.append(str(_HERE.parent))
sys.path.append(str(_HERE))  # last: ``eventlog`` is still the package, ``foundation`` is ours

import argparse  # noqa: E402
import shutil  # noqa: E402
import sqlite3  # noqa: E402
import statistics  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable, Sequence  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from typing import Any  # noqa: E402

from foundation import load_eventlog_bench  # noqa: E402

from eventlog import open_store  # noqa: E402
from eventlog.sqlite import SQLiteEventStore  # noqa: E402
from sessionledger import SessionService  # noqa: E402

EL = load_eventlog_bench()
SESSIONS = EL.SESSIONS
ITEMS = 20
TARGET = 0.5

_TASKS = (
    "Read the session store and list where todo rows are written",
    "Add the todo table migration with a cascade on the session row",
    "Write the TodoWrite contract: strict items, no id, exact schema text",
    "Return oldTodos, todos and the status summary from the handler",
    "Report unfinished items that disappeared from the new list",
    "Show completed/total progress in the sidebar",
    "Cover renames, reorders and removals with tests",
    "Run the property test over both backends with restarts",
    "Measure TodoWrite latency against a single durable append",
    "Document the rebuild coupling between summary and todo tables",
    "Check the CLI prints the list in order with its progress",
    "Make bad input a 422 that names the field",
    "Verify a deleted session shows no todos",
    "Audit: compare the todo rows with a fresh fold of the log",
    "Fix the flaky reconnect test in the SSE suite",
    "Bump pydantic and re-run the strict-mode tests",
    "Review the permission rules for session-scoped tools in Plan",
    "Write the changelog entry for issue 5",
    "Profile the append path with 20-item lists",
    "Tidy docs/performance.md with this run's table",
)
_PRIORITIES = ("high", "medium", "low")


def todo_list(session: int, call: int) -> list[dict[str, str]]:
    """A 20-item list as a model would re-send it: statuses move forward call by call."""
    done = call % (ITEMS + 1)
    todos = []
    for j, task in enumerate(_TASKS[:ITEMS]):
        status = "completed" if j < done else "in_progress" if j == done else "pending"
        todos.append({"content": f"{task} (s{session})", "status": status,
                      "priority": _PRIORITIES[j % 3]})
    return todos


@dataclass(frozen=True, slots=True)
class Sample:
    """One run of one workload: each operation's seconds, the run's wall time, and the time
    spent in (and the number of) the store's write transactions."""

    latencies: list[float]
    elapsed: float
    in_transaction: float = 0.0
    transactions: int = 0
    in_statements: float = 0.0

    @property
    def transaction_ms(self) -> float:
        """Milliseconds per operation inside the store's transactions."""
        return 1e3 * self.in_transaction / len(self.latencies)

    @property
    def statements_ms(self) -> float:
        """Milliseconds per operation in the transactions' SQL statements (``COMMIT`` and
        its fsync included)."""
        return 1e3 * self.in_statements / len(self.latencies)

    @property
    def rate(self) -> float:
        return len(self.latencies) / self.elapsed

    def quantile(self, q: float) -> float:
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


class _TimedStatements:
    """The store's writer connection, with the time of every statement added to ``spent``
    (``execute``/``executemany`` only: the rest passes through)."""

    def __init__(self, conn: sqlite3.Connection, spent: list[float]) -> None:
        self._conn = conn
        self._spent = spent

    def _timed(self, run: Callable[..., sqlite3.Cursor], *args: Any) -> sqlite3.Cursor:
        t0 = time.perf_counter()
        try:
            return run(*args)
        finally:
            self._spent[2] += time.perf_counter() - t0

    def execute(self, *args: Any) -> sqlite3.Cursor:
        return self._timed(self._conn.execute, *args)

    def executemany(self, *args: Any) -> sqlite3.Cursor:
        return self._timed(self._conn.executemany, *args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)


def _timed(count: int, step: Callable[[int], Any]) -> Sample:
    """Run ``step`` ``count`` times, timing each call and the store's transactions in it:
    ``SQLiteEventStore._commit_once`` (``BEGIN IMMEDIATE`` … ``COMMIT``: chaining, the rows,
    the inline projections, the fsync), wrapped only while this runs."""
    latencies = []
    clock = time.perf_counter
    spent = [0.0, 0.0, 0.0]  # seconds in transactions, transactions, seconds in statements
    original = SQLiteEventStore._commit_once

    def timed_commit(store: SQLiteEventStore, group: Sequence[Any]) -> Any:
        writer = store._writer
        store._writer = _TimedStatements(writer, spent)  # type: ignore[assignment]
        t0 = clock()
        try:
            return original(store, group)
        finally:
            spent[0] += clock() - t0
            spent[1] += 1
            store._writer = writer

    SQLiteEventStore._commit_once = timed_commit  # type: ignore[method-assign,assignment]
    try:
        started = clock()
        for i in range(count):
            t0 = clock()
            step(i)
            latencies.append(clock() - t0)
        elapsed = clock() - started
    finally:
        SQLiteEventStore._commit_once = original  # type: ignore[method-assign]
    return Sample(latencies, elapsed, spent[0], int(spent[1]), spent[2])


def single_append(workdir: Path, count: int, seed: int, warm: int = 0) -> Sample:
    """Workload 1 of bench/eventlog.py (sessionledger), each append timed on its own, after
    ``warm`` untimed ones (the log's write-ahead file wrapped once: its steady state)."""
    fields = EL.make_fields(warm + count, seed)
    ids = EL.session_ids("S", SESSIONS)
    versions = [0] * SESSIONS
    store = open_store(f"sqlite:///{workdir / 'single.db'}")

    def step(i: int) -> None:
        k = i % SESSIONS
        store.append(ids[k], [EL.sl_event(fields[i])], expected_version=versions[k])
        versions[k] += 1

    try:
        for i in range(warm):
            step(i)
        return _timed(count, lambda i: step(warm + i))
    finally:
        store.close()


def todo_write(workdir: Path, count: int, seed: int, warm: int = 0) -> Sample:
    """TodoWrite of a 20-item list through the service, round robin over the sessions, after
    ``warm`` untimed ones (as the single append: the write-ahead file wrapped once)."""
    root = workdir / "workspace"
    root.mkdir()
    service = SessionService.open(f"sqlite:///{workdir / 'todos.db'}", workspace_root=root)
    try:
        ids = [service.create_session()["sessionId"] for _ in range(SESSIONS)]
        lists = [todo_list(i % SESSIONS, seed + i // SESSIONS) for i in range(warm + count)]
        call = service.tools.call

        def step(i: int) -> None:
            answer = call(ids[i % SESSIONS], "TodoWrite", {"todos": lists[i]})
            assert answer.document["success"] is True, answer.document

        for i in range(warm):
            step(i)
        return _timed(count, lambda i: step(warm + i))
    finally:
        service.close()


WARM_WRITES = 1100
"""Untimed TodoWrites before the timed ones: ~10 WAL pages each, past the store's 10,000."""

WORKLOADS: dict[str, tuple[str, Callable[[argparse.Namespace], Callable[[Path, int], Sample]]]] = {
    "single": ("single-event durable append (eventlog bench)",
               lambda a: lambda d, s: single_append(d, a.appends, s, a.warm_appends)),
    "todo": (f"TodoWrite, {ITEMS} items (service path)",
             lambda a: lambda d, s: todo_write(d, a.writes, s, a.warm_writes)),
}


def measure(args: argparse.Namespace, tmp: Path) -> dict[str, list[Sample]]:
    samples: dict[str, list[Sample]] = {key: [] for key in WORKLOADS}
    keys = list(WORKLOADS)
    for run in range(args.runs):
        order = keys[run % 2:] + keys[:run % 2]  # rotate who goes first
        for key in order:
            workdir = tmp / f"{key}-{run}"
            workdir.mkdir()
            try:
                sample = WORKLOADS[key][1](args)(workdir, args.seed + run)
            finally:
                shutil.rmtree(workdir, ignore_errors=True)
            samples[key].append(sample)
            if args.verbose:
                print(f"  run {run + 1} {key:7} {sample.rate:10,.0f}/s "
                      f"p50 {sample.quantile(0.5) * 1e3:.3f} ms", file=sys.stderr, flush=True)
    return samples


def render(args: argparse.Namespace, samples: dict[str, list[Sample]], load: str) -> str:
    def med(key: str, value: Callable[[Sample], float]) -> float:
        return statistics.median(value(s) for s in samples[key])

    lines = [
        f"todos bench: median of {args.runs} interleaved run(s), synchronous=FULL",
        f"  {EL.sqlite_fs_note()}",
        f"  {load}",
        "",
        f"{'workload':<48}{'ops':>7}{'p50 ms':>10}{'p99 ms':>10}{'ops/s':>10}",
        "-" * 85,
    ]
    for key, (label, _run) in WORKLOADS.items():
        lines.append(
            f"{label:<48}{len(samples[key][0].latencies):>7}"
            f"{med(key, lambda s: s.quantile(0.5)) * 1e3:>10.3f}"
            f"{med(key, lambda s: s.quantile(0.99)) * 1e3:>10.3f}"
            f"{med(key, lambda s: s.rate):>10,.0f}"
        )
    lines += [
        "",
        f"{'inside the store transaction, per operation':<48}{'txns/op':>7}{'ms':>10}"
        f"{'share':>10}{'SQL ms':>10}",
        "-" * 85,
    ]
    for key, (label, _run) in WORKLOADS.items():
        per_op = med(key, lambda s: s.transactions / len(s.latencies))
        in_txn = med(key, lambda s: s.transaction_ms)
        share = med(key, lambda s: s.in_transaction / sum(s.latencies))
        sql = med(key, lambda s: s.statements_ms)
        lines.append(f"{label:<48}{per_op:>7.2f}{in_txn:>10.3f}{share:>10.0%}{sql:>10.3f}")
    single_rate = med("single", lambda s: s.rate)
    bounds = (
        ("best ratio with nothing outside the transaction", lambda s: s.transaction_ms),
        ("best ratio with nothing but the SQL statements", lambda s: s.statements_ms),
    )
    for label, part in bounds:
        ms = med("todo", part)
        lines.append(f"{label:<48}{1e3 / ms / single_rate:>17.3f}")
    ratio = med("todo", lambda s: s.rate) / med("single", lambda s: s.rate)
    paired = [t.rate / a.rate for t, a in zip(samples["todo"], samples["single"], strict=True)]
    verdict = "PASS" if ratio >= TARGET else "MISS"
    lines += [
        "",
        f"{'ratio (of the medians above)':<48}{'measured':>9}{'per-run range':>16}"
        f"{'target':>9}{'result':>8}",
        "-" * 90,
        f"{'TodoWrite writes/s / single appends/s':<48}{ratio:>9.3f}"
        f"{f'{min(paired):.2f}-{max(paired):.2f}':>16}{f'>= {TARGET:.2f}':>9}{verdict:>8}",
    ]
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=5, help="interleaved runs (median is shown)")
    p.add_argument("--appends", type=int, default=3000, help="single appends per run")
    p.add_argument("--writes", type=int, default=1500, help="TodoWrite calls per run")
    p.add_argument("--warm-appends", type=int, default=EL.WARM_APPENDS,
                   help="untimed single appends before the timed ones")
    p.add_argument("--warm-writes", type=int, default=WARM_WRITES,
                   help="untimed TodoWrite calls before the timed ones")
    p.add_argument("--seed", type=int, default=1, help="payload generator seed")
    p.add_argument("--tmp", type=Path, default=None,
                   help="directory for the database files (default: system temp dir)")
    p.add_argument("--quick", action="store_true",
                   help="tiny counts and one run: a smoke test, numbers meaningless")
    p.add_argument("-v", "--verbose", action="store_true", help="every sample to stderr")
    args = p.parse_args(argv)
    if args.quick:
        args.runs, args.appends, args.writes = 1, 60, 30
        args.warm_appends, args.warm_writes = 20, 10
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.perf_counter()
    load_before, cpu_before = EL._loadavg(), EL.cpu_check()
    with tempfile.TemporaryDirectory(prefix="sl-bench-todos-", dir=args.tmp) as tmp:
        samples = measure(args, Path(tmp))
    print(render(args, samples,
                 f"1-min load average {load_before} before, {EL._loadavg()} after; CPU check "
                 f"{cpu_before:.2f} us before, {EL.cpu_check():.2f} us after (lower is faster)"))
    print(f"\n(total wall time {time.perf_counter() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
