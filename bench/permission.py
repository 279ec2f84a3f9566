"""Permission checks of Bash commands: linear in the length (EG-5), and typical commands beside
the code before the tree-sitter classifier (issue 37).

Run ``.venv/bin/python bench/permission.py`` (``--quick`` for a smoke run of a few seconds;
``--table linear`` or ``--table typical`` for one of the two tables).

**Linearity.** Issue 19 found ``permission-check`` for ``Bash`` with ``echo aaaa…`` taking 1.5 s
at 260 k characters and 16 s at 1 MiB: the rule patterns' view of the command was split by
``shlex``, quadratic in the length of a word. EG-5 asks that deciding a permission costs
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
whether the decision is the same at both sizes.

**Typical commands.** Issue 37 replaced the hand-written scanner with bash's grammar
(tree-sitter-bash) and asks that the p50 decision for a typical ~80-character command stay
within 1.5 times the code before it (:data:`ANCHOR`, commit ``4b5aea7``). :data:`COMMANDS` are
21 commands of 67 to 91 characters an agent runs while planning (read-only looks: ``git log``,
``grep -rn``, ``find``, pipes into ``head``/``wc``) and building (``sed -i``, tests, linters,
``git commit``/``push``, ``rm``), each in a session of that mode (``plan`` or ``build``) over
the same workspace rules. The anchor's four packages are taken from git (``git archive``) into
a temporary directory; two worker processes, one per tree (its packages first on
``sys.path``), each with its own service over ``memory://``, answer "time this command N
times" over a pipe, after a warm-up of every command. The driver asks them in turn —
``for run: for group: for command: for tree``, the order of groups and commands rotated every
run and the order of the two trees swapped every other request — so both trees see the same
moments of the machine. Each call is timed alone (CPU time of the worker, ``process_time_ns``;
wall beside), after a ``gc.collect()`` per batch (the warm-up's objects frozen out of the
collector, ``gc.freeze``). Two row groups: the service's decision
(``permission_check``, as above) and the classifier alone (``shell.classify`` of each tree).
Each row: the p50 of one call on the old and the new tree, new / old (CPU and wall), and each
tree's answer (the rule id; the verdict's kind for the classifier). The last row of each group
pools the calls of every command: the p50 of a typical command, the decision's against the
target of 1.5. Without git or without the commit (a shallow clone, an archive) the table says
the anchor is missing and shows this checkout's figures alone; it never fails.

Speed is never asserted in tests (``tests/test_bench_smoke.py`` only runs ``--quick``). See
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

# ``sessionledger`` is imported inside the functions: a worker process puts its tree's
# packages first on sys.path before it imports them (see :func:`worker`).
import argparse  # noqa: E402
import gc  # noqa: E402
import io  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import platform  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import tarfile  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable, Sequence  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402
from typing import IO, Any  # noqa: E402

ROOT = _HERE.parent
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


def _write_rules(workspace: Path) -> Path:
    from sessionledger.config.workspace import config_path

    config = config_path(workspace)
    config.parent.mkdir(parents=True)
    config.write_text(RULES, encoding="utf-8")
    return workspace


# -- the linearity table --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Sample:
    """One timed permission check: CPU and wall seconds and the decision it gave."""

    seconds: float
    wall: float
    decision: str


def measure(args: argparse.Namespace, root: Path) -> dict[tuple[str, int], list[Sample]]:
    from sessionledger import SessionService

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
        f"  {_machine()}; {load}",
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


# -- typical commands beside the anchor -----------------------------------------------------------

ANCHOR = "4b5aea7"
"""The last commit with the hand-written scanner (``shell.py``, ``shell_parse.py``)."""
TYPICAL_TARGET = 1.5
PACKAGES = ("eventlog", "statemachine", "projections", "sessionledger")
COMMANDS: tuple[tuple[str, str], ...] = (
    # Planning: looking around (read-only on both trees but one).
    ("plan", "git log --oneline -20 -- sessionledger/permission/shell.py | head -5"),
    ("plan", "grep -rn \"def classify\" sessionledger tests --include='*.py' | wc -l"),
    ("plan", "ls -la docs bench && cat README.md | head -40 && wc -l CHANGELOG.md"),
    ("plan", "find . -maxdepth 3 -name '*.py' -newer pyproject.toml -not -path './.venv/*' | sort"),
    ("plan", "git diff --stat HEAD~3 -- sessionledger/ tests/ && git status --short | head -20"),
    ("plan", "rg -n \"permission_check\" sessionledger/service tests -g '*.py' | head -30"),
    ("plan", "head -260 sessionledger/permission/authority.py | tail -60 | nl -ba"),
    ("plan", "git show HEAD~1 --stat --format='%h %s' -- docs/performance.md CHANGELOG.md"),
    ("plan", "wc -l sessionledger/permission/*.py tests/test_shell_classifier.py | sort -n "
             "| tail -5"),
    ("plan", "diff <(git show 4b5aea7:bench/permission.py) bench/permission.py | head -50"),
    ("plan", "git blame -L 120,160 sessionledger/permission/shell.py | cut -c1-100"),
    ("plan", "cd sessionledger/permission && grep -c \"def \" *.py && ls -la && cd -"),
    # Building: edits, tests, linters, commits.
    ("build", "sed -i 's/MAX_PIPES = 1024/MAX_PIPES = 2048/' sessionledger/permission/shell.py"),
    ("build", ".venv/bin/python -m pytest -q -x tests/test_shell_classifier.py -k pipeline "
              "2>&1 | tail -20"),
    ("build", ".venv/bin/ruff check bench sessionledger && .venv/bin/mypy "
              "sessionledger/permission"),
    ("build", "mkdir -p /tmp/sl-work && cp docs/performance.md /tmp/sl-work/ && ls -la "
              "/tmp/sl-work"),
    ("build", "git add bench/permission.py docs/performance.md && git commit -m \"bench: typical "
              "commands\""),
    ("build", "make -C /work/main .venv/.bench > /tmp/venv.log 2>&1; echo rc=$?; tail -5 "
              "/tmp/venv.log"),
    ("build", "cd tests && for f in test_permission*.py; do echo \"== $f\"; grep -c \"def test_\" "
              "\"$f\"; done"),
    ("build", "rm -f /tmp/sl-work/*.tmp && echo \"cleaned $(date +%s)\" >> /tmp/sl-work/log.txt"),
    ("build", "git push origin feature/shell-classifier --set-upstream 2>&1 | tail -3"),
)
"""Typical commands of an agent, with the session mode each is asked in (67 to 91 characters)."""
GROUPS = {
    "decision": 'decision: SessionService.tools.permission_check(session, "Bash", {"command": …})',
    "classify": "classifier alone: sessionledger.permission.shell.classify(command)",
}


def worker(root: Path, workspace: Path) -> int:
    """One tree's side of the typical-commands table: reads requests (JSON lines) on stdin,
    answers each on stdout. The tree's packages come first on sys.path, before any import."""
    sys.path.insert(0, str(root))
    out = sys.stdout
    sys.stdout = sys.stderr  # nothing but answers on the pipe
    import sessionledger
    from sessionledger import SessionService
    from sessionledger.permission import shell

    where = Path(sessionledger.__file__).resolve()
    if not where.is_relative_to(root.resolve()):
        raise SystemExit(f"worker: sessionledger imported from {where}, not from {root}")
    commands = [tuple(c) for c in json.loads(sys.stdin.readline())["commands"]]
    service = SessionService.open("memory://", workspace_root=workspace)
    sessions = {mode: service.create_session(mode=mode)["sessionId"]
                for mode in sorted({mode for mode, _ in commands})}
    check = service.tools.permission_check
    classify = shell.classify

    def call(group: str, index: int) -> str:
        mode, command = commands[index]
        if group == "decision":
            return str(check(sessions[mode], "Bash", {"command": command})["ruleId"])
        return str(classify(command).kind)

    for _ in range(3):  # warm-up: caches, the parser, the first append of each session
        for group in GROUPS:
            for index in range(len(commands)):
                call(group, index)
    gc.collect()
    gc.freeze()  # the warm-up's objects leave the collector's view: collect() per batch is cheap
    out.write(json.dumps({"ready": str(where.parent)}) + "\n")
    out.flush()
    cpu_ns, wall_ns = time.process_time_ns, time.perf_counter_ns
    try:
        for line in sys.stdin:
            request = json.loads(line)
            group, index, calls = request["group"], request["index"], request["calls"]
            cpu: list[int] = []
            wall: list[int] = []
            answer = ""
            gc.collect()
            for _ in range(calls):
                started, used = wall_ns(), cpu_ns()
                answer = call(group, index)
                cpu.append(cpu_ns() - used)
                wall.append(wall_ns() - started)
            out.write(json.dumps({"cpu": cpu, "wall": wall, "answer": answer}) + "\n")
            out.flush()
    finally:
        service.close()
    return 0


@dataclass(slots=True)
class Tree:
    """One worker: a tree's packages in their own process."""

    name: str
    root: Path
    process: subprocess.Popen[str] | None = None
    cpu: dict[tuple[str, int], list[int]] = field(default_factory=dict)
    wall: dict[tuple[str, int], list[int]] = field(default_factory=dict)
    answers: dict[tuple[str, int], set[str]] = field(default_factory=dict)

    def start(self, workspace: Path) -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "--worker", str(self.root),
             "--workspace", str(workspace)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=workspace,
        )
        self.send({"commands": COMMANDS})

    def send(self, message: dict[str, Any]) -> None:
        assert self.process is not None and self.process.stdin is not None
        self.process.stdin.write(json.dumps(message) + "\n")
        self.process.stdin.flush()

    def receive(self) -> dict[str, Any]:
        assert self.process is not None and self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"the {self.name} worker ended (exit {self.process.wait()})")
        answer: dict[str, Any] = json.loads(line)
        return answer

    def measure(self, group: str, index: int, calls: int) -> None:
        self.send({"group": group, "index": index, "calls": calls})
        answer = self.receive()
        key = group, index
        self.cpu.setdefault(key, []).extend(answer["cpu"])
        self.wall.setdefault(key, []).extend(answer["wall"])
        self.answers.setdefault(key, set()).add(answer["answer"])

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is None:
            return
        if process.stdin is not None:
            process.stdin.close()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if process.stdout is not None:
            process.stdout.close()


def extract_anchor(repo: Path, rev: str, into: Path) -> tuple[Path | None, str]:
    """The anchor's packages from git into ``into``, or ``None`` and why not."""
    try:
        done = subprocess.run(
            ["git", "-C", str(repo), "archive", "--format=tar", rev, *PACKAGES],
            capture_output=True, timeout=120, check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"git archive failed: {exc}"
    if done.returncode != 0:
        why = done.stderr.decode("utf-8", "replace").strip().splitlines()
        return None, f"git archive {rev}: {why[-1] if why else f'exit {done.returncode}'}"
    with tarfile.open(fileobj=io.BytesIO(done.stdout)) as archive:
        if hasattr(tarfile, "data_filter"):
            archive.extractall(into, filter="data")
        else:  # pragma: no cover - Python before 3.11.4
            archive.extractall(into)
    return into, f"commit {rev} (git archive of {', '.join(PACKAGES)})"


@dataclass(slots=True)
class Typical:
    """The typical-commands table's measurements."""

    new: Tree
    old: Tree | None
    rev: str
    anchor: str
    runs: int
    calls: int


def measure_typical(args: argparse.Namespace, scratch: Path) -> Typical:
    new = Tree("new", ROOT)
    old_root, anchor = extract_anchor(args.repo, args.anchor, scratch / "anchor")
    old = Tree("old", old_root) if old_root is not None else None
    trees = [t for t in (old, new) if t is not None]
    try:
        for tree in trees:  # both start at once: their imports overlap
            workspace = scratch / f"workspace-{tree.name}"
            workspace.mkdir()
            tree.start(_write_rules(workspace))
        for tree in list(trees):
            try:
                tree.receive()
            except (RuntimeError, ValueError) as exc:
                if tree is new:
                    raise
                anchor = f"{args.anchor}'s worker did not start ({exc})"
                tree.stop()
                trees.remove(tree)
                old = None
        groups, indexes = list(GROUPS), list(range(len(COMMANDS)))
        request = 0
        for run in range(args.typical_runs):
            for group in _rotated(groups, run):
                for index in _rotated(indexes, run):
                    order = trees if request % 2 == 0 else trees[::-1]
                    request += 1
                    for tree in order:
                        tree.measure(group, index, args.calls)
                    if args.verbose:
                        print(f"  run {run + 1} {group:8} #{index + 1:<2} "
                              + " ".join(f"{t.name} {t.cpu[group, index][-1] / 1e3:8.1f} µs"
                                         for t in order), file=sys.stderr, flush=True)
    finally:
        for tree in trees:
            tree.stop()
    return Typical(new, old, args.anchor, anchor, args.typical_runs, args.calls)


def _rotated(items: list[Any], run: int) -> list[Any]:
    shift = run % len(items)
    return items[shift:] + items[:shift]


def render_typical(typical: Typical, load: str) -> str:
    new, old = typical.new, typical.old

    def p50(values: Sequence[int]) -> float:
        return statistics.median(values) / 1e3  # µs

    def pooled(tree: Tree, clock: str, group: str) -> list[int]:
        series = tree.cpu if clock == "cpu" else tree.wall
        return [v for i in range(len(COMMANDS)) for v in series[group, i]]

    anchor_line = (f"  old: {typical.anchor}; new: this checkout" if old is not None else
                   f"  old: anchor missing — {typical.anchor}; this checkout's figures alone")
    lines = [
        f"typical commands: p50 of one call, this checkout (new) beside {typical.rev} (old"
        + (", the hand-written scanner" if typical.rev == ANCHOR else "") + "), interleaved",
        anchor_line,
        f"  {typical.runs} run(s) x {typical.calls} call(s) per command, group and tree; µs of "
        "the worker's CPU per call (new/old also on wall time); sessions over memory:// with "
        "the rules above",
        f"  {_machine()}; {load}",
        "",
        f"{'#':>3} {'mode':<6}{'command':<46}{'chars':>6}{'old µs':>9}{'new µs':>9}"
        f"{'new/old':>9}{'wall':>7}{'target':>8}{'result':>8}  answer (old → new)",
        "-" * 137,
    ]
    for group, title in GROUPS.items():
        lines.append(title)
        target = group == "decision"
        ratios: list[float] = []
        for index, (mode, command) in enumerate(COMMANDS):
            key = group, index
            shown = command if len(command) <= 44 else command[:43] + "…"
            new_p50 = p50(new.cpu[key])
            answer_new = ", ".join(sorted(new.answers[key]))
            if old is None:
                cells = f"{'—':>9}{new_p50:>9.1f}{'—':>9}{'—':>7}{'':>8}{'':>8}  {answer_new}"
            else:
                old_p50 = p50(old.cpu[key])
                ratio = new_p50 / old_p50
                ratios.append(ratio)
                wall = p50(new.wall[key]) / p50(old.wall[key])
                answer_old = ", ".join(sorted(old.answers[key]))
                answers = answer_new if answer_old == answer_new else (
                    f"{answer_old} → {answer_new}")
                verdict = _verdict(ratio) if target else ""
                cells = (f"{old_p50:>9.1f}{new_p50:>9.1f}{ratio:>9.2f}{wall:>7.2f}"
                         f"{f'<= {TYPICAL_TARGET:g}' if target else '':>8}{verdict:>8}  "
                         f"{answers}")
            lines.append(f"{index + 1:>3} {mode:<6}{shown:<46}{len(command):>6}{cells}")
        new_all = p50(pooled(new, "cpu", group))
        label = f"all {len(COMMANDS)} commands: p50 of every call"
        if old is None:
            lines.append(f"{'':>3} {label:<58}{'—':>9}{new_all:>9.1f}")
        else:
            old_all = p50(pooled(old, "cpu", group))
            ratio = new_all / old_all
            wall = p50(pooled(new, "wall", group)) / p50(pooled(old, "wall", group))
            lines.append(
                f"{'':>3} {label:<58}{old_all:>9.1f}{new_all:>9.1f}{ratio:>9.2f}{wall:>7.2f}"
                f"{f'<= {TYPICAL_TARGET:g}' if target else '':>8}"
                f"{_verdict(ratio) if target else '':>8}  "
                f"(per command: median {statistics.median(ratios):.2f}, "
                f"{min(ratios):.2f} to {max(ratios):.2f})")
        lines.append("")
    return "\n".join(lines).rstrip()


def _verdict(ratio: float) -> str:
    # Not the linearity table's words: its smoke test counts those.
    return "met" if ratio <= TYPICAL_TARGET else "over"


# -- the script ----------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--table", choices=("both", "linear", "typical"), default="both",
                   help="which table to measure (default: both)")
    p.add_argument("--runs", type=int, default=5, help="interleaved runs (median is shown)")
    p.add_argument("--small", type=int, default=SMALL, help="the shorter command, characters")
    p.add_argument("--large", type=int, default=LARGE, help="the longer command, characters")
    p.add_argument("--typical-runs", type=int, default=40,
                   help="interleaved runs of the typical-commands table")
    p.add_argument("--calls", type=int, default=10,
                   help="calls per command, group and tree in each typical run")
    p.add_argument("--anchor", default=ANCHOR,
                   help=f"the commit typical commands are compared with (default {ANCHOR})")
    p.add_argument("--repo", type=Path, default=ROOT,
                   help="the git repository the anchor is read from (default: this checkout)")
    p.add_argument("--tmp", type=Path, default=None,
                   help="directory for the workspace (default: system temp dir)")
    p.add_argument("--quick", action="store_true",
                   help="tiny sizes and one run: a smoke test, numbers meaningless (both "
                        "below the classifier's limit of 1,024 '|', as the two full sizes "
                        "are both above it, so each shape is decided alike at both)")
    p.add_argument("-v", "--verbose", action="store_true", help="every sample to stderr")
    p.add_argument("--worker", type=Path, default=None, help=argparse.SUPPRESS)
    p.add_argument("--workspace", type=Path, default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.quick:
        args.runs, args.small, args.large = 1, 512, 5 * 1024
        args.typical_runs, args.calls = 1, 2
    return args


def _load() -> str:
    try:
        return f"1-min load average {os.getloadavg()[0]:.2f}"
    except OSError:
        return "load average unknown"


def _machine() -> str:
    return (f"python {platform.python_version()}, {os.cpu_count()} CPUs, "
            f"{platform.system()} {platform.machine()}")


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.worker is not None:
        return worker(args.worker, args.workspace)
    started = time.perf_counter()
    out: IO[str] = sys.stdout
    with tempfile.TemporaryDirectory(prefix="sl-bench-permission-", dir=args.tmp) as tmp:
        scratch = Path(tmp)
        if args.table in ("both", "linear"):
            before = _load()
            workspace = scratch / "workspace"
            workspace.mkdir()
            samples = measure(args, _write_rules(workspace))
            print(render(args, samples, f"{before} before, {_load()} after"), file=out)
        if args.table in ("both", "typical"):
            if args.table == "both":
                print(file=out)
            before = _load()
            typical = measure_typical(args, scratch)
            print(render_typical(typical, f"{before} before, {_load()} after"), file=out)
    print(f"\n(total wall time {time.perf_counter() - started:.0f} s)", file=out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
