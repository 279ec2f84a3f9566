"""What group commit can gain under the GIL: the group committer alone beside the store.

Run ``.venv/bin/python bench/group_floor.py`` (``--quick`` for a smoke run of a few seconds).
Issue 2 asks that 32 in-process writers reach three times the durable throughput of one.
Each writer's append must block until its commit is durable and be woken after it, and in
CPython only one of the 32 threads runs Python at a time, so the per-event Python work plus
the cost of one block and wake-up bound what 32 writers can do, however cheap the commit.
This script measures those parts on the machine at hand:

1. hand-off: two threads passing a lock back and forth, per hand-off (the least a wake-up
   costs here);
2. the group committer alone (``eventlog.appending.GroupCommitter``), whose commit writes
   one 4 KB page to a file and fsyncs it (the GIL released, as in SQLite's WAL commit), for
   callers that do ``W`` µs of Python per item before submitting it: per item wall and CPU
   time with 1 and with 32 callers, items per commit, and the 32/1 ratio;
3. the store: bench/eventlog.py's workloads 4a/4b (a ``SessionCreated`` built and appended
   per event, ``synchronous=FULL``) with CPU per event and events per commit;
4. the store's own work per event when 32 one-event batches go in one ``append_many`` from
   one thread: what a group costs per event with no thread hand-off at all.

The committer with no work (W = 0) shows its own cost per item under 32 callers. Row 4 plus
that cost is the least 32 threads can spend per event; the lone writer's time per event
divided by it is the best 32/1 ratio this store's work allows here, printed last.
Medians of ``--runs`` runs. Speed is never asserted in tests. See docs/performance.md.
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
import os  # noqa: E402
import statistics  # noqa: E402
import tempfile  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable, Sequence  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from types import ModuleType  # noqa: E402

from foundation import load_eventlog_bench  # noqa: E402

from eventlog import AppendBatch, open_store  # noqa: E402
from eventlog.appending import GroupCommitter  # noqa: E402


@dataclass(frozen=True, slots=True)
class Sample:
    """One measured run: per item wall and CPU microseconds, items per commit."""

    wall_us: float
    cpu_us: float
    per_commit: float


def hand_off(rounds: int) -> Sample:
    """Two threads alternate through two locks; per hand-off."""
    ping, pong = threading.Lock(), threading.Lock()
    ping.acquire()
    pong.acquire()

    def other() -> None:
        for _ in range(rounds):
            ping.acquire()
            pong.release()

    thread = threading.Thread(target=other)
    thread.start()
    cpu, wall = time.process_time(), time.perf_counter()
    for _ in range(rounds):
        ping.release()
        pong.acquire()
    thread.join()
    n = 2 * rounds
    return Sample(1e6 * (time.perf_counter() - wall) / n, 1e6 * (time.process_time() - cpu) / n,
                  1.0)


def _spin(micros: float) -> None:
    """Hold the GIL for ``micros`` like the Python of building and encoding an event."""
    until = time.perf_counter() + micros / 1e6
    while time.perf_counter() < until:
        pass


def committer_alone(writers: int, per_writer: int, *, work_us: float) -> Sample:
    """``writers`` threads submit ``per_writer`` items each to one GroupCommitter whose commit
    is a page write and an fsync."""
    commits = 0
    page = b"\0" * 4096
    with tempfile.TemporaryDirectory(prefix="sl-floor-", dir=ARGS_TMP) as tmp:
        fd = os.open(Path(tmp) / "wal", os.O_RDWR | os.O_CREAT, 0o600)

        def commit(items: Sequence[int]) -> list[int]:
            nonlocal commits
            commits += 1
            os.pwrite(fd, page, 4096 * (commits % 256))  # both release the GIL
            os.fsync(fd)
            return list(items)

        committer: GroupCommitter[int, int] = GroupCommitter(commit)
        try:
            return _threads(writers, per_writer, committer.submit, work_us, lambda: commits)
        finally:
            os.close(fd)


def _threads(
    writers: int, per_writer: int, call: Callable[[int], object], work_us: float,
    commits: Callable[[], int],
) -> Sample:
    barrier = threading.Barrier(writers + 1)

    def run() -> None:
        barrier.wait()
        for i in range(per_writer):
            if work_us:
                _spin(work_us)
            call(i)

    threads = [threading.Thread(target=run) for _ in range(writers)]
    for t in threads:
        t.start()
    cpu, wall = time.process_time(), time.perf_counter()
    barrier.wait()
    for t in threads:
        t.join()
    n = writers * per_writer
    return Sample(1e6 * (time.perf_counter() - wall) / n, 1e6 * (time.process_time() - cpu) / n,
                  n / max(commits(), 1))


def the_store(bench: ModuleType, writers: int, per_writer: int, seed: int) -> Sample:
    """bench/eventlog.py's group workload for sessionledger, with CPU and commits counted."""
    counted = {"commits": 0}
    original = GroupCommitter._commit_all

    def counting(self: GroupCommitter[object, object], items: Sequence[object],
                 count: int) -> Sequence[object]:
        counted["commits"] += 1
        return original(self, items, count)  # type: ignore[arg-type]

    GroupCommitter._commit_all = counting  # type: ignore[method-assign,assignment]
    try:
        with tempfile.TemporaryDirectory(prefix="sl-floor-", dir=ARGS_TMP) as tmp:
            cpu = time.process_time()
            rate = bench.group_commit(bench.SL, Path(tmp), writers, per_writer, seed)
            cpu_s = time.process_time() - cpu
    finally:
        GroupCommitter._commit_all = original  # type: ignore[method-assign]
    n = writers * per_writer
    # process_time also counts the untimed set-up (payload fields, opening the store): small
    # beside the appends, and the same for both rows.
    return Sample(1e6 / rate, 1e6 * cpu_s / n, n / max(counted["commits"], 1))


def grouped_by_one_thread(bench: ModuleType, writers: int, per_writer: int, seed: int) -> Sample:
    """``writers`` one-event batches per ``append_many``, all from this thread."""
    fields = bench.make_fields(writers * per_writer, seed)
    ids = bench.session_ids("G", writers)
    with tempfile.TemporaryDirectory(prefix="sl-floor-", dir=ARGS_TMP) as tmp:
        store = open_store(bench.sl_url(bench.SL, Path(tmp) / "one.db"))
        try:
            cpu, wall = time.process_time(), time.perf_counter()
            for version in range(per_writer):
                store.append_many([
                    AppendBatch(ids[w], (bench.sl_event(fields[version * writers + w]),),
                                version)
                    for w in range(writers)
                ])
            wall_s, cpu_s = time.perf_counter() - wall, time.process_time() - cpu
        finally:
            store.close()
    n = writers * per_writer
    return Sample(1e6 * wall_s / n, 1e6 * cpu_s / n, float(writers))


ARGS_TMP: str | None = None


def median(samples: list[Sample]) -> Sample:
    return Sample(statistics.median(s.wall_us for s in samples),
                  statistics.median(s.cpu_us for s in samples),
                  statistics.median(s.per_commit for s in samples))


def render(rows: list[tuple[str, Sample, Sample]], handoff: Sample, by_one: Sample,
           args: argparse.Namespace, load: str) -> str:
    lines = [
        f"group commit floor: median of {args.runs} run(s); {args.writers} writers vs 1; "
        "the committer's commit writes a page and fsyncs it",
        f"  {os.cpu_count()} CPUs; {load}",
        "",
        f"lock hand-off between two threads: {handoff.wall_us:.1f} us wall, "
        f"{handoff.cpu_us:.1f} us CPU",
        "",
        f"{'per item (us)':<44}{'1: wall':>9}{'cpu':>7}{'N: wall':>9}{'cpu':>7}"
        f"{'items/commit':>14}{'N/1':>7}",
        "-" * 97,
    ]
    for label, one, many in rows:
        lines.append(f"{label:<44}{one.wall_us:>9.1f}{one.cpu_us:>7.1f}{many.wall_us:>9.1f}"
                     f"{many.cpu_us:>7.1f}{many.per_commit:>14.1f}"
                     f"{one.wall_us / many.wall_us:>7.2f}")
    overhead = rows[0][2].wall_us  # the committer alone, no work, N callers
    lone = rows[-1][1].wall_us  # the store's lone writer
    lines += [
        "",
        f"the store, {args.writers} one-event batches per append_many from one thread: "
        f"{by_one.wall_us:.1f} us wall, {by_one.cpu_us:.1f} us CPU per event",
        f"best {args.writers}/1 ratio this store's work allows here: lone writer "
        f"{lone:.1f} us / ({by_one.wall_us:.1f} + {overhead:.1f} us committer) = "
        f"{lone / (by_one.wall_us + overhead):.2f}",
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    global ARGS_TMP
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=5, help="runs per row (the median is shown)")
    p.add_argument("--writers", type=int, default=32, help="concurrent writers")
    p.add_argument("--items", type=int, default=4800, help="items per row (split over writers)")
    p.add_argument("--work", default="0,20,40,60", help="caller Python per item, us (list)")
    p.add_argument("--tmp", default=None, help="directory for the store's database files")
    p.add_argument("--quick", action="store_true", help="tiny counts, one run: a smoke test")
    args = p.parse_args(argv)
    if args.quick:
        args.runs, args.items, args.work = 1, 128, "0,20"
    ARGS_TMP = args.tmp
    works = [float(w) for w in args.work.split(",")]
    n, per = args.writers, max(args.items // args.writers, 1)
    bench = load_eventlog_bench()
    load = f"1-min load average {os.getloadavg()[0]:.2f} before"
    handoffs: list[Sample] = []
    by_one: list[Sample] = []
    samples: dict[str, tuple[list[Sample], list[Sample]]] = {}
    for run in range(args.runs):
        handoffs.append(hand_off(2000 if args.quick else 20000))
        for w in works:
            one, many = samples.setdefault(f"committer alone, {w:.0f} us Python per item",
                                           ([], []))
            one.append(committer_alone(1, n * per, work_us=w))
            many.append(committer_alone(n, per, work_us=w))
        one, many = samples.setdefault("the store (bench/eventlog.py 4a/4b)", ([], []))
        one.append(the_store(bench, 1, n * per, seed=run))
        many.append(the_store(bench, n, per, seed=run))
        by_one.append(grouped_by_one_thread(bench, n, per, seed=run))
    rows = [(label, median(one), median(many)) for label, (one, many) in samples.items()]
    print(render(rows, median(handoffs), median(by_one), args,
                 f"{load}, {os.getloadavg()[0]:.2f} after"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
