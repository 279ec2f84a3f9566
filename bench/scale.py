"""Costs that must stay flat as the log grows: audit and bulk append at 1,000,000 events.

Run ``.venv/bin/python bench/scale.py --case audit`` or ``--case bulk`` (``--events 50000``
for a smoke run). Each case is a function; ``main()`` dispatches on ``--case``.

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
ratio.
"""

from __future__ import annotations

import sys
from pathlib import Path

_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
if str(_HERE.parent) not in sys.path:
    sys.path.append(str(_HERE.parent))
if str(_HERE) not in sys.path:
    sys.path.append(str(_HERE))  # bench/rebuild.py's builder

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import random  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable, Sequence  # noqa: E402

from rebuild import build  # noqa: E402

from eventlog import AppendBatch, MessageRecorded, NewEvent, open_store  # noqa: E402

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
        rates: dict[int, list[float]] = {s: [] for s in sizes}
        work = Path(tmp) / "work.db"
        for run in range(args.runs):
            for size in sizes:
                _fresh_copy(built[size], work)
                rates[size].append(_child([
                    "--child", "window", "--path", str(work), "--window", str(args.window),
                    "--sessions", str(args.sessions), "--group", str(args.group),
                    "--seed", str(run),
                ])["rate"])
    print(f"{'log size before the window':<30}{'events/s':>12}{'per run':>24}")
    for size in sizes:
        spread = f"{min(rates[size]):,.0f}-{max(rates[size]):,.0f}"
        print(f"{size:<30,}{_median(rates[size]):>12,.0f}{spread:>24}")
    ratio = _median(rates[args.events]) / _median(rates[SMALL])
    per_run = [b / s for b, s in zip(rates[args.events], rates[SMALL], strict=True)]
    print(f"bulk append at {args.events:,} / at {SMALL:,}: {ratio:.2f} (per run "
          f"{min(per_run):.2f}-{max(per_run):.2f}; target >= 0.80) "
          f"{'PASS' if ratio >= 0.8 else 'MISS'}; load average {_loadavg()} after")
    return 0


# -- the command line --------------------------------------------------------------------------

CASES: dict[str, Callable[[argparse.Namespace], int]] = {
    "audit": case_audit,
    "bulk": case_bulk,
}


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--case", choices=sorted(CASES), default="audit")
    parser.add_argument("--events", type=int, default=1_000_000, help="log size")
    parser.add_argument("--sessions", type=int, default=2_000)
    parser.add_argument("--group", type=int, default=5_000, help="batches per append_many")
    parser.add_argument("--window", type=int, default=30_000,
                        help="events appended per bulk measurement")
    parser.add_argument("--runs", type=int, default=3, help="interleaved runs (median shown)")
    parser.add_argument("--tmp", type=Path, default=None, help="scratch directory")
    parser.add_argument("--child", choices=(*AUDIT_PARTS, "window"), help=argparse.SUPPRESS)
    parser.add_argument("--path", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.child == "window":
        rate = append_window(args.path, args.window, args.sessions, args.group, args.seed)
        print(json.dumps({"rate": rate}))
        return 0
    if args.child:
        print(json.dumps(measure_audit_part(args.path, args.child)))
        return 0
    return CASES[args.case](args)


if __name__ == "__main__":
    raise SystemExit(main())
