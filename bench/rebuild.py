"""Rebuilding the execution-state projection from a large log: events/s and memory.

Run ``.venv/bin/python bench/rebuild.py`` (default 1,000,000 events; ``--events 20000`` for a
smoke run). It writes a log of mixed sessions and event types — each session starts with
``SessionCreated`` and then changes its mode, Plan switch and goal as the state machine allows,
with user and assistant messages between — then, in FRESH processes so neither warms the
other, measures

1. the typed replay of the same log (``store.read_all()``, every payload decoded), and
2. ``store.rebuild_projections()`` (drop every inline projection and fold the whole log),

printing events/s and the kernel's peak RSS of each, and the ratio rebuild / replay (issue 3's
target: at least 0.5, with flat memory).
"""

from __future__ import annotations

import sys
from pathlib import Path

_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
if str(_HERE.parent) not in sys.path:
    sys.path.append(str(_HERE.parent))

import argparse  # noqa: E402
import json  # noqa: E402
import random  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections.abc import Sequence  # noqa: E402

from eventlog import (  # noqa: E402
    AppendBatch,
    Event,
    MessageRecorded,
    NewEvent,
    SessionCreated,
    open_store,
)
from statemachine.execution import (  # noqa: E402
    Command,
    Cycle,
    EndGoal,
    EnterPlan,
    ExecutionState,
    LeavePlan,
    Refusal,
    SetMode,
    StartGoal,
    decide_events,
)

_COMMANDS: tuple[Command, ...] = (
    Cycle(), EnterPlan(), LeavePlan(), SetMode("edit"), SetMode("auto"), SetMode("yolo"),
    StartGoal("ship the parser rewrite"), EndGoal(),
)


def _session_events(
    rng: random.Random, state: ExecutionState
) -> tuple[list[Event], ExecutionState]:
    """A few events a session might append next: a message, or a legal state change."""
    if rng.random() < 0.6:
        role = rng.choice(("user", "assistant"))
        return [MessageRecorded(role=role, content="x" * rng.randint(20, 200))], state
    decision = decide_events(state, rng.choice(_COMMANDS), via="mode_command")
    if isinstance(decision, Refusal) or not decision[1]:
        return [MessageRecorded(role="assistant", content="noted")], state
    return decision[1], decision[0]


def build(path: Path, events: int, sessions: int, group: int) -> float:
    """Write ``events`` events over ``sessions`` interleaved sessions; seconds taken."""
    rng = random.Random(7)
    store = open_store(f"sqlite:///{path}?synchronous=normal")
    states: dict[int, ExecutionState] = {}
    written = 0
    started = time.perf_counter()
    while written < events:
        batches = []
        for _ in range(group):
            s = rng.randrange(sessions)
            if s not in states:
                states[s] = ExecutionState()
                new: list[Event] = [SessionCreated(workspace=f"/w/{s}")]
            else:
                new, states[s] = _session_events(rng, states[s])
            new = new[: events - written]
            if not new:
                break
            written += len(new)
            stamped = tuple(NewEvent(e, actor="user") for e in new)
            batches.append(AppendBatch(f"sess_{s:06d}", stamped))
        store.append_many(batches)
    store.close()
    return time.perf_counter() - started


def _kernel_peak_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def child(path: Path, what: str) -> None:
    """Run one measurement in this (fresh) process and print it as JSON."""
    from projections import open_projected_store

    url = f"sqlite:///{path}"
    if what == "replay":
        store = open_store(url)
        started = time.perf_counter()
        count = sum(1 for event in store.read_all() if event.data is not None)
    else:
        store, _ = open_projected_store(url)  # folds the log once at open (tables missing)
        started = time.perf_counter()
        count = store.rebuild_projections()
    seconds = time.perf_counter() - started
    store.close()
    print(json.dumps({"events": count, "seconds": seconds, "peak_mb": _kernel_peak_mb()}))


def measure(path: Path, what: str) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, __file__, "--child", what, "--path", str(path)],
        check=True, capture_output=True, text=True,
    ).stdout
    result: dict[str, float] = json.loads(out.strip().splitlines()[-1])
    return result


def _median(rows: list[dict[str, float]]) -> dict[str, float]:
    """The run with the median rate (its peak RSS comes with it)."""
    ordered = sorted(rows, key=lambda r: r["events"] / r["seconds"])
    return ordered[len(ordered) // 2]


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--sessions", type=int, default=2_000)
    parser.add_argument("--group", type=int, default=5_000, help="batches per append_many")
    parser.add_argument("--tmp", type=Path, default=None, help="scratch directory")
    parser.add_argument("--runs", type=int, default=3, help="interleaved runs (median shown)")
    parser.add_argument("--child", choices=("replay", "rebuild"), help=argparse.SUPPRESS)
    parser.add_argument("--path", type=Path, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.child:
        child(args.path, args.child)
        return 0
    with tempfile.TemporaryDirectory(dir=args.tmp) as tmp:
        path = Path(tmp) / "ledger.db"
        took = build(path, args.events, args.sessions, args.group)
        print(f"rebuild bench: {args.events:,} events over {args.sessions:,} sessions, "
              f"built in {took:.1f} s; median of {args.runs} interleaved run(s), fresh "
              "processes")
        runs: dict[str, list[dict[str, float]]] = {"replay": [], "rebuild": []}
        for _ in range(args.runs):  # interleaved, so a slow patch of the machine hits both
            for what in runs:
                runs[what].append(measure(path, what))
        replay, rebuild = (_median(runs[w]) for w in ("replay", "rebuild"))
    print(f"{'measurement':<38}{'events':>12}{'events/s':>12}{'peak RSS MB':>13}")
    for name, row in (("typed replay (read_all)", replay),
                      ("rebuild execution-state projection", rebuild)):
        rate = row["events"] / row["seconds"]
        print(f"{name:<38}{int(row['events']):>12,}{rate:>12,.0f}{row['peak_mb']:>13.1f}")
    ratio = (rebuild["events"] / rebuild["seconds"]) / (replay["events"] / replay["seconds"])
    verdict = "PASS" if ratio >= 0.5 else "MISS"
    print(f"rebuild / replay: {ratio:.2f} (target >= 0.50) {verdict}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
