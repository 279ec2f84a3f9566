"""Permission checks for long Bash commands: the time grows with the length, not faster (EG-5).

Run ``.venv/bin/python bench/permission.py`` (``--quick`` for a smoke run of a few seconds).
Issue 19 found ``permission-check`` for ``Bash`` with ``echo aaaa…`` taking 1.5 s at 260 k
characters and 16 s at 1 MiB: the rule patterns' view of the command was split by
``shlex``, quadratic in the length of a word. SPEC EG-5 asks that deciding a permission costs
time linear in the command's length. This script times
``SessionService.tools.permission_check(session, "Bash", {"command": …})`` — the service path
``POST …/permission-check`` runs (the workspace's rules, the shell classifier, the rule
patterns, one appended ``PermissionDecided``), over a ``memory://`` store so the append's
constant cost does not dilute the ratio — for commands of 100 KB and 1 MiB in several shapes:

- one long word (``echo aaaa…``), one long token with no space, single and double quotes;
- many simple commands joined by ``&&``, ``|`` and newlines; git commands with many options;
- what the workspace's patterns match: a harmless 1 MiB prefix, then ``rm -rf /`` (denied
  by ``Bash(rm *)``), and the same inside one quoted word (not denied);
- a ``Read`` of a long path against ``Read(**/*a*b*c*d)``, a glob a regular expression
  matches by backtracking.

The workspace's ``config.toml`` holds deny, ask and allow rules (below), so every pattern
is matched against every simple command. Over HTTP the body is capped at 1 MiB, so the
longest command there is a little shorter; the work per character is the same.

Runs are interleaved (``for run: for shape: for size``, shape order rotated). One sample is
the mean of as many calls as make up the longer command's length (ten calls of 100 KB, one of
1 MiB), so a few milliseconds of noise weigh the same at both sizes. A sample is the
process's CPU time (``time.process_time``): other processes on a busy machine do not add to
it as they add to the wall time, which is shown too. The table shows each shape's median CPU
time per call at both sizes, the 1 MiB / 100 KB ratio against the target of at most 12 (the
sizes differ 10.24 times: linear, with room for noise), the same ratio of wall times, and
whether the decision is the same at both sizes. Speed is never asserted in tests
(``tests/test_bench_smoke.py`` only runs ``--quick``). See docs/performance.md.
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
import os  # noqa: E402
import statistics  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable, Sequence  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from typing import Any  # noqa: E402

from sessionledger import SessionService  # noqa: E402
from sessionledger.config.workspace import config_path  # noqa: E402

SMALL, LARGE = 100 * 1024, 1024 * 1024
TARGET = 12.0
RULES = """\
[permission]
deny = ["Bash(rm *)", "Read(**/*a*b*c*d)"]
ask = ["Bash(git push *)", "Bash(*curl*|*sh*)"]
allow = ["Bash(echo *)", "Bash(git log *)", "Read(src/**)"]
"""


def _repeat(unit: str, size: int, head: str = "", tail: str = "") -> str:
    """``head``, then ``unit`` as often as fits in ``size`` characters, then ``tail``."""
    return head + unit * max(1, (size - len(head) - len(tail)) // len(unit)) + tail


SHAPES: dict[str, tuple[str, Callable[[int], tuple[str, dict[str, Any]]]]] = {
    "echo": ("echo aaaa… (one long word)",
             lambda n: ("Bash", {"command": _repeat("a", n, "echo ")})),
    "token": ("aaaa… (one token, no space)", lambda n: ("Bash", {"command": "a" * n})),
    "squote": ("echo 'a a a …' (single quotes)",
               lambda n: ("Bash", {"command": _repeat("a ", n, "echo '", "'")})),
    "dquote": ('echo "a" "b c" … (double quotes)',
               lambda n: ("Bash", {"command": _repeat('"a" "b c" ', n, "echo ")})),
    "and": ("echo hi && echo hi && … (&&-joined)",
            lambda n: ("Bash", {"command": _repeat("echo hi && ", n, tail="echo hi")})),
    "pipe": ("cat f | grep x | … (pipes)",
             lambda n: ("Bash", {"command": _repeat("grep x | ", n, "cat f | ", "wc -l")})),
    "lines": ("ls\\nls\\n… (newlines)", lambda n: ("Bash", {"command": _repeat("ls\n", n)})),
    "git": ("git log --oneline … && git status",
            lambda n: ("Bash", {"command": _repeat(" --oneline", n, "git log", " && git status")})),
    "denied": ("echo aaaa… && rm -rf / (deny matches)",
               lambda n: ("Bash", {"command": _repeat("a", n, "echo ", " && rm -rf /")})),
    "quoted": ("echo 'aaaa…; rm -rf /' (no match)",
               lambda n: ("Bash", {"command": _repeat("a", n, "echo '", "; rm -rf /'")})),
    "path": ("Read /aaaa… vs Read(**/*a*b*c*d)",
             lambda n: ("Read", {"file_path": _repeat("a", n, "/")})),
}


@dataclass(frozen=True, slots=True)
class Sample:
    """One timed permission check: CPU and wall seconds and the decision it gave."""

    seconds: float
    wall: float
    decision: str


def measure(args: argparse.Namespace, root: Path) -> dict[tuple[str, int], list[Sample]]:
    sizes = (args.small, args.large)
    inputs = {(key, size): make(size) for key, (_label, make) in SHAPES.items() for size in sizes}
    samples: dict[tuple[str, int], list[Sample]] = {key: [] for key in inputs}
    service = SessionService.open("memory://", workspace_root=root)
    try:
        session = service.create_session(mode="auto")["sessionId"]
        check = service.tools.permission_check
        check(session, "Bash", {"command": "echo warm-up"})
        keys = list(SHAPES)
        for run in range(args.runs):
            shift = run % len(keys)
            for key in keys[shift:] + keys[:shift]:
                for size in sizes:
                    tool, data = inputs[key, size]
                    repeats = max(1, round(args.large / size))  # the same characters per sample
                    gc.collect()
                    started, cpu = time.perf_counter(), time.process_time()
                    for _ in range(repeats):
                        answer = check(session, tool, data)
                    elapsed = (time.process_time() - cpu) / repeats
                    wall = (time.perf_counter() - started) / repeats
                    samples[key, size].append(Sample(elapsed, wall, answer["ruleId"]))
                    if args.verbose:
                        print(f"  run {run + 1} {key:7} {size:>9,} {elapsed * 1e3:9.1f} ms CPU "
                              f"{wall * 1e3:9.1f} ms wall {answer['ruleId']}",
                              file=sys.stderr, flush=True)
    finally:
        service.close()
    return samples


def render(args: argparse.Namespace, samples: dict[tuple[str, int], list[Sample]],
           load: str) -> str:
    small, large = args.small, args.large

    def med(key: str, size: int, *, wall: bool = False) -> float:
        return statistics.median(s.wall if wall else s.seconds for s in samples[key, size])

    def kb(size: int) -> str:
        return f"{size / 1024:,.0f} KiB" if size < 1024 * 1024 else f"{size / 1024 ** 2:g} MiB"

    lines = [
        f"permission bench: median of {args.runs} interleaved run(s); "
        "SessionService.tools.permission_check over memory://; CPU time of the process",
        f"  {load}",
        f"  sizes {small:,} and {large:,} characters ({large / small:.2f}x); rules: "
        + "; ".join(line for line in RULES.splitlines()[1:]),
        "",
        f"{'shape':<40}{kb(small) + ' ms':>12}{kb(large) + ' ms':>12}{'ratio':>8}"
        f"{'target':>9}{'result':>8}{'wall':>7}  decision",
        "-" * 117,
    ]
    worst = 0.0
    for key, (label, _make) in SHAPES.items():
        ratio = med(key, large) / med(key, small)
        wall = med(key, large, wall=True) / med(key, small, wall=True)
        worst = max(worst, ratio)
        decisions = {s.decision for size in (small, large) for s in samples[key, size]}
        decision = decisions.pop() if len(decisions) == 1 else "DIFFERS: " + ", ".join(
            sorted(decisions))
        lines.append(
            f"{label:<40}{med(key, small) * 1e3:>12.1f}{med(key, large) * 1e3:>12.1f}"
            f"{ratio:>8.2f}{f'<= {TARGET:g}':>9}{'PASS' if ratio <= TARGET else 'MISS':>8}"
            f"{wall:>7.2f}  {decision}"
        )
    lines += ["", f"{'worst ratio':<40}{'':>24}{worst:>8.2f}{f'<= {TARGET:g}':>9}"
              f"{'PASS' if worst <= TARGET else 'MISS':>8}"]
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=5, help="interleaved runs (median is shown)")
    p.add_argument("--small", type=int, default=SMALL, help="the shorter command, characters")
    p.add_argument("--large", type=int, default=LARGE, help="the longer command, characters")
    p.add_argument("--tmp", type=Path, default=None,
                   help="directory for the workspace (default: system temp dir)")
    p.add_argument("--quick", action="store_true",
                   help="tiny sizes and one run: a smoke test, numbers meaningless (both "
                        "below the classifier's limit of 1,024 '|', as the two full sizes "
                        "are both above it, so each shape is decided alike at both)")
    p.add_argument("-v", "--verbose", action="store_true", help="every sample to stderr")
    args = p.parse_args(argv)
    if args.quick:
        args.runs, args.small, args.large = 1, 512, 5 * 1024
    return args


def _load() -> str:
    try:
        return f"1-min load average {os.getloadavg()[0]:.2f}"
    except OSError:
        return "load average unknown"


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.perf_counter()
    before = _load()
    with tempfile.TemporaryDirectory(prefix="sl-bench-permission-", dir=args.tmp) as tmp:
        root = Path(tmp)
        config = config_path(root)
        config.parent.mkdir(parents=True)
        config.write_text(RULES, encoding="utf-8")
        samples = measure(args, root)
    print(render(args, samples, f"{before} before, {_load()} after"))
    print(f"\n(total wall time {time.perf_counter() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
