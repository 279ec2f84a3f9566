"""Replay of a large log in a fresh process: events/s and resident memory, which must stay flat.

Run ``.venv/bin/python bench/replay_memory.py`` (default 1,000,000 events; ``--events 20000``
for a smoke run). The script

1. appends the events to a new SQLite file through the store itself (``append_many`` in big
   groups of batches, many sessions interleaved, ``synchronous=normal`` since durability of
   the scratch file does not matter), and spot-checks one session's hash chain;
2. starts a FRESH Python process that opens the store and iterates ``store.read_all()``,
   touching each typed payload, sampling its RSS every ``--sample-every`` events;
3. prints the number replayed, events/s, RSS before and after, the peak, and whether the peak
   stayed under ``--limit-mb`` (exit status 1 if not, or if the count is wrong).
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

import argparse  # noqa: E402
import gc  # noqa: E402
import json  # noqa: E402
import random  # noqa: E402
import resource  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections.abc import Sequence  # noqa: E402

import psutil  # noqa: E402

from eventlog import (  # noqa: E402
    AppendBatch,
    ExecutionStateData,
    GoalData,
    NewEvent,
    SessionCreated,
    open_store,
)

MB = 1024 * 1024
_WORDS = ("refactor", "the", "session", "store", "so", "that", "replay", "stays", "fast",
          "and", "add", "tests", "for", "timeouts", "migrate", "config", "parser", "fix")
_PROJECTS = ("sessionledger", "billing-service", "infra/terraform-modules", "mobile-app",
             "ml/pipelines", "docs-site", "payments-gateway", "monorepo/packages/web")


def _states(rng: random.Random) -> list[ExecutionStateData]:
    """Execution states to draw from (values, so sharing them between events is fine)."""
    goals = [" ".join(rng.choice(_WORDS) for _ in range(rng.randint(6, 28))).capitalize()
             for _ in range(128)]
    return [
        ExecutionStateData(
            mode=rng.choice(("build", "edit", "yolo", "auto")),
            plan_enabled=i % 2 == 0 and rng.random() < 0.8,  # never with a goal (ES-1)
            goal=GoalData(objective=goals[i % len(goals)]) if i % 2 else None,
        )
        for i in range(256)
    ]


_HOSTS = ("protocol", "tui", "headless")


def _event(session: int, seq: int, states: Sequence[ExecutionStateData]) -> NewEvent:
    """A SessionCreated of realistic size (~250 bytes of JSON), distinct per event."""
    payload = SessionCreated(
        workspace=f"/home/dev/src/{_PROJECTS[session % len(_PROJECTS)]}/checkouts/"
                  f"s{session:06d}-e{seq:07d}",
        host=_HOSTS[seq % 3],
        parent_session_id=f"sess_{session:026d}" if session % 3 == 0 else None,
        execution_state=states[(session * 7 + seq) % len(states)],
    )
    return NewEvent(payload, actor="user")


def build(path: Path, events: int, sessions: int, group: int, per_batch: int) -> float:
    """Append ``events`` to ``path`` in groups of ``group`` events; returns seconds taken."""
    rng = random.Random(7)
    states = _states(rng)
    ids = [f"sess_{i:026d}" for i in range(sessions)]
    versions = [0] * sessions
    store = open_store(f"sqlite:///{path}?synchronous=normal")
    started = time.perf_counter()
    try:
        written = 0
        while written < events:
            batches = []
            in_group = min(group, events - written)
            done = 0
            while done < in_group:
                s = rng.randrange(sessions)  # sessions interleave in the global order
                n = min(per_batch, in_group - done)
                new = tuple(_event(s, versions[s] + k + 1, states) for k in range(n))
                batches.append(AppendBatch(ids[s], new, expected_version=versions[s]))
                versions[s] += n
                done += n
            for outcome in store.append_many(batches):
                if isinstance(outcome, Exception):
                    raise outcome
            written += in_group
        elapsed = time.perf_counter() - started
        busiest = max(range(sessions), key=versions.__getitem__)
        (report,) = store.verify(ids[busiest])
        if not report.ok or report.events != versions[busiest]:
            raise SystemExit(f"chain check failed on {ids[busiest]}: {report}")
    finally:
        store.close()
    return elapsed


def _kernel_peak() -> int:
    """The kernel's peak RSS of this process image, in bytes.

    ``VmHWM`` is reset by exec, unlike ``getrusage().ru_maxrss``, which on Linux carries the
    parent's high-water mark into the child and so would report the builder's memory.
    """
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def replay_child(path: Path, sample_every: int) -> None:
    """In the fresh process: replay everything, print one JSON line of figures."""
    proc = psutil.Process()
    store = open_store(f"sqlite:///{path}")
    gc.collect()
    before = proc.memory_info().rss
    peak = before
    count = 0
    started = time.perf_counter()
    for recorded in store.read_all():
        if recorded.data.workspace:  # touch the typed payload
            count += 1
        if count % sample_every == 0:
            peak = max(peak, proc.memory_info().rss)
    elapsed = time.perf_counter() - started
    after = proc.memory_info().rss
    peak = max(peak, after)
    store.close()
    print(json.dumps({"count": count, "seconds": elapsed, "rss_before": before,
                      "rss_after": after, "rss_peak": peak, "kernel_peak": _kernel_peak()}))


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--events", type=int, default=1_000_000, help="events to append and replay")
    p.add_argument("--sessions", type=int, default=2000, help="sessions the events spread over")
    p.add_argument("--group", type=int, default=20_000,
                   help="events per append_many call while building")
    p.add_argument("--per-batch", type=int, default=25, help="events per AppendBatch")
    p.add_argument("--sample-every", type=int, default=10_000,
                   help="sample RSS every this many replayed events")
    p.add_argument("--limit-mb", type=float, default=200.0, help="peak RSS budget in MiB")
    p.add_argument("--db", type=Path, default=None,
                   help="reuse this file if it exists (else build it there and keep it)")
    p.add_argument("--tmp", type=Path, default=None, help="directory for the scratch file")
    p.add_argument("--replay-child", type=Path, default=None, help=argparse.SUPPRESS)
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.replay_child is not None:
        replay_child(args.replay_child, args.sample_every)
        return 0
    with tempfile.TemporaryDirectory(prefix="sl-replay-", dir=args.tmp) as tmp:
        path = args.db or Path(tmp) / "replay.db"
        if args.db is not None and path.exists():
            build_line = "build: reused existing file"
        else:
            seconds = build(path, args.events, args.sessions, args.group, args.per_batch)
            build_line = (f"build: {seconds:.1f} s ({args.events / seconds:,.0f} events/s; "
                          "append_many, synchronous=normal; one chain verified)")
        size = sum(f.stat().st_size for f in path.parent.glob(path.name + "*"))
        child = subprocess.run(
            [sys.executable, str(Path(__file__).resolve()), "--replay-child", str(path),
             "--sample-every", str(args.sample_every)],
            capture_output=True, text=True, check=False,
        )
    if child.returncode != 0:
        print(child.stderr, file=sys.stderr)
        return child.returncode
    r = json.loads(child.stdout.strip().splitlines()[-1])
    ok_count = r["count"] == args.events
    ok_memory = max(r["rss_peak"], r["kernel_peak"]) < args.limit_mb * MB
    lines = [
        f"replay memory bench: {args.events:,} events over {args.sessions:,} sessions "
        f"(file {size / MB:,.0f} MB)",
        build_line,
        "replay in a fresh process: store.read_all(), typed payloads",
        f"  {'events replayed':<22}{r['count']:>14,}{'' if ok_count else '  (WRONG COUNT)'}",
        f"  {'seconds':<22}{r['seconds']:>14.2f}",
        f"  {'events/s':<22}{r['count'] / r['seconds']:>14,.0f}",
        f"  {'RSS before replay':<22}{r['rss_before'] / MB:>11.1f} MB",
        f"  {'RSS after replay':<22}{r['rss_after'] / MB:>11.1f} MB",
        f"  {'RSS peak (sampled)':<22}{r['rss_peak'] / MB:>11.1f} MB"
        f"  (growth {(r['rss_peak'] - r['rss_before']) / MB:+.1f} MB)",
        f"  {'kernel peak (VmHWM)':<22}{r['kernel_peak'] / MB:>11.1f} MB",
        f"  {'budget':<22}{args.limit_mb:>11.0f} MB  {'PASS' if ok_memory else 'MISS'}",
    ]
    print("\n".join(lines))
    return 0 if ok_count and ok_memory else 1


if __name__ == "__main__":
    raise SystemExit(main())
