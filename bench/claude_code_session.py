"""A real Claude Code session of tool calls: what the ledger's hooks cost it (HTTP and command).

Run ``.venv/bin/python bench/claude_code_session.py`` (``--quick`` for a smoke run). The real
Claude Code CLI (npm ``@anthropic-ai/claude-code``, the version ``tests/hosts/package-lock.json``
pins, installed by ``tests/host_support.py`` into a cache outside the repository) runs
headless — ``claude -p PROMPT --output-format stream-json --verbose`` — in an environment of
only ``PATH`` (this interpreter's ``bin`` first, so ``sessionledger`` is found), a throwaway
``HOME`` (one for the whole bench, as a user has one), a made-up key and
``ANTHROPIC_BASE_URL`` pointing at a scripted Anthropic Messages server on 127.0.0.1
(``tests/anthropic_model.py``), with telemetry, auto-update and other traffic switched off:
the binary talks to nothing else. The scripted model asks for ``--calls`` (20) ``Read`` tool
calls, one ``tool_use`` per assistant message, one file each of the session's fresh project
directory (20 small files), then ends with a text.

One ``sessionledger serve`` (the installed console script, a free loopback port,
``--db sqlite:///<tmp>/ledger.db`` at the default ``synchronous=FULL``, ``--workspace`` the
directory holding the projects) runs for the whole bench. Three kinds of session:

(a) *no hooks*: the project's ``.claude/settings.json`` is ``{}``;
(b) *HTTP hooks*: the settings file is the ``"type": "http"`` snippet of docs/claude-code.md,
    read out of the page, its ``http://127.0.0.1:8765`` made the serve's address;
(c) *command hooks*: the ``"type": "command"`` snippet of the page
    (``sessionledger hook claude-code --db … --workspace "$CLAUDE_PROJECT_DIR"``), its
    ``sqlite:///path/to/ledger.db`` made the serve's database: each event starts a process
    that finds the serve by the discovery file beside the database and forwards to it;
(d) and (e), the floors: the command snippet with every hook's command replaced by one that
    reads its input and prints ``{}`` — this interpreter (``python -c``) and ``sh`` — what
    any Python command hook, and any hook at all, costs the same session.

After one untimed warm-up session of each kind (bytecode caches written — the children's
environment has no ``PYTHONDONTWRITEBYTECODE`` — and the serve's connections made), every one
of ``--runs`` (5) rounds runs one session of each kind, the order rotated every round, each
timed from process start to exit. A session counts as an error — and its time is left out —
unless Claude Code exits 0, its stream-json ``result`` says ``success``, the model server got
a ``tool_result`` for every call, none of them an error, and, for (b) and (c), the serve's
events of that Claude session (``GET /v1/sessions`` by ``externalSessionId``, then its
``/events`` pages) hold one ``ToolCallRequested`` and one ``ToolCallCompleted`` per call.

The table shows per kind the sessions timed, the p50 and mean seconds, each p50 over the HTTP
hooks' p50, and the hooks' cost per tool call over no hooks ((p50 - p50 no hooks) / calls),
then the acceptance: command hooks / HTTP hooks p50 at most 1.3, and the Python floor's
ratio beside it (a command hook that starts the interpreter cannot do better). Speed is never
asserted in tests (``tests/test_bench_smoke.py`` only runs ``--quick``). See docs/performance.md.
"""

from __future__ import annotations

import sys
from pathlib import Path

# Run as a script, this file's directory comes first on sys.path and holds ``eventlog.py``
# (the throughput bench): drop it so ``import eventlog`` finds the package. The host's
# installer and the scripted model live with the tests.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
for _extra in (_HERE.parent, _HERE.parent / "tests"):
    if str(_extra) not in sys.path:
        sys.path.append(str(_extra))

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import platform  # noqa: E402
import signal  # noqa: E402
import socket  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections import Counter  # noqa: E402
from collections.abc import Iterator, Sequence  # noqa: E402
from contextlib import contextmanager  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402

import httpx  # noqa: E402
from anthropic_model import ScriptedModel, ToolUse  # noqa: E402
from host_support import (  # noqa: E402
    ClaudeCode,
    claude_headless,
    documented_settings,
    host_environment,
    install,
    node_version,
    settings_file,
    unavailable,
)

from bench.user_install import description, run_installed  # noqa: E402

FILES = 20
PROMPT = "Read the project's files one by one, then say done."
STARTUP_TIMEOUT_S = 30.0
SESSION_TIMEOUT_S = 600.0
TARGET = 1.3

KINDS: tuple[tuple[str, str], ...] = (
    ("none", "no hooks"),
    ("http", "HTTP hooks (serve)"),
    ("command", "command hooks (forwarded to serve)"),
    ("python", "floor: python -c that reads, prints {}"),
    ("shell", "floor: sh that reads, prints {}"),
)
LEDGER_KINDS = ("http", "command")
"""The kinds whose hooks reach the ledger (the floors record nothing)."""
FLOORS = {
    "python": f"{sys.executable} -c "
              "'import sys; sys.stdin.buffer.read(); sys.stdout.write(\"{}\")'",
    "shell": "cat >/dev/null; echo {}",
}
"""The command of every hook of the page's command snippet in the floor kinds: what a hook
that starts this interpreter (or a shell) and does nothing costs the same session."""


# --------------------------------------------------------------------------------------------
# The settings: the page's snippets.


def settings_for(kind: str, base_url: str, db: Path) -> str:
    """The project's ``.claude/settings.json`` for ``kind``: the page's snippet with only the
    places that name a machine changed."""
    if kind == "none":
        return "{}\n"
    if kind in FLOORS:
        settings = json.loads(documented_settings()["command"])
        for entries in settings["hooks"].values():
            for entry in entries:
                for hook in entry["hooks"]:
                    hook["command"] = FLOORS[kind]
        return json.dumps(settings, indent=2) + "\n"
    return settings_file(kind, base_url, f"sqlite:///{db}")


# --------------------------------------------------------------------------------------------
# The serve.


def _sessionledger() -> Path:
    """The installed ``sessionledger`` console script of this interpreter's environment."""
    return Path(sys.executable).parent / "sessionledger"


def _child_env() -> dict[str, str]:
    """This environment for the serve, bytecode written; ``sessionledger`` as installed (no
    ``PYTHONPATH``: under a user's install the wheel's modules are the ones timed)."""
    return {k: v for k, v in os.environ.items() if k not in (
        "SESSIONLEDGER_DB", "SESSIONLEDGER_URL", "PYTHONDONTWRITEBYTECODE", "PYTHONPATH")}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def running_server(tmp: Path, workspace: Path, db: Path) -> Iterator[str]:
    """``sessionledger serve`` on a free loopback port over ``db``; SIGTERM on exit."""
    port = _free_port()
    command = [str(_sessionledger()), "serve", "--port", str(port), "--workspace",
               str(workspace), "--db", f"sqlite:///{db}"]
    log_path = tmp / "serve.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                                   env=_child_env())
    base_url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while True:
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("serve did not start:\n"
                                   + log_path.read_text("utf-8", "replace"))
            try:
                if httpx.get(f"{base_url}/healthz", timeout=1.0).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            time.sleep(0.05)
        yield base_url
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def served_hooks(log: Path) -> Counter[int]:
    """The statuses of the serve's answers to ``POST /v1/hooks/claude-code`` so far (its
    JSON request log)."""
    statuses: Counter[int] = Counter()
    with log.open("rb") as stream:
        for raw in stream:
            if b"/v1/hooks/claude-code" not in raw:
                continue
            try:
                line = json.loads(raw)
            except ValueError:
                continue
            if line.get("event") == "request" and line.get("path") == "/v1/hooks/claude-code":
                statuses[int(line.get("status", 0))] += 1
    return statuses


def ledger_counts(client: httpx.Client, claude_session: str) -> Counter[str]:
    """The event types the serve holds for the Claude Code session ``claude_session``."""
    sessions = client.get("/v1/sessions").raise_for_status().json()["sessions"]
    ours = [s["sessionId"] for s in sessions if s.get("externalSessionId") == claude_session]
    counts: Counter[str] = Counter()
    for session_id in ours:
        after = 0
        while True:
            page = client.get(f"/v1/sessions/{session_id}/events",
                              params={"after": after, "limit": 500}).raise_for_status().json()
            events = page["events"]
            counts.update(str(event["type"]) for event in events)
            if not events:
                break
            after = int(events[-1]["seq"])
            if after >= int(page["version"]):
                break
    return counts


# --------------------------------------------------------------------------------------------
# One session.


@dataclass(slots=True)
class Outcome:
    seconds: float
    problems: list[str]
    requests: Counter[str]
    """What the model server was asked: ``main``, ``side``, ``count_tokens``, ``other``."""
    unknown: list[str]
    ledger: Counter[str]
    served: Counter[int]
    """The statuses of the hook requests the serve answered during the session."""


@dataclass(slots=True)
class Samples:
    seconds: list[float] = field(default_factory=list)
    errors: int = 0

    def p50(self) -> float:
        return statistics.median(self.seconds) if self.seconds else float("nan")

    def mean(self) -> float:
        return statistics.fmean(self.seconds) if self.seconds else float("nan")


@dataclass(slots=True)
class Context:
    host: ClaudeCode
    workspace: Path
    db: Path
    home: Path
    base_url: str
    serve_log: Path
    client: httpx.Client
    path: str
    calls: int


def make_project(directory: Path, kind: str, context: Context) -> list[Path]:
    """A fresh project: ``FILES`` small files and the kind's ``.claude/settings.json``."""
    (directory / ".claude").mkdir(parents=True)
    (directory / ".claude" / "settings.json").write_text(
        settings_for(kind, context.base_url, context.db), encoding="utf-8")
    files = []
    for n in range(max(FILES, context.calls)):
        path = directory / f"file_{n:02d}.txt"
        path.write_text(f"file {n}\n" + "".join(f"line {i} of file {n}\n" for i in range(8)),
                        encoding="utf-8")
        files.append(path)
    return files


def run_session(kind: str, name: str, context: Context) -> Outcome:
    """One headless Claude Code session of ``kind`` in a fresh project ``name``."""
    project = context.workspace / name
    files = make_project(project, kind, context)
    script = [[ToolUse("Read", {"file_path": str(path)})] for path in files[:context.calls]]
    problems: list[str] = []
    with ScriptedModel(script) as model:
        env = host_environment(context.home, model.url, path=context.path)
        command = claude_headless(context.host, PROMPT)
        served_before = served_hooks(context.serve_log)
        started = time.perf_counter()
        try:
            done = subprocess.run(command, cwd=project, env=env, capture_output=True, text=True,
                                  timeout=SESSION_TIMEOUT_S, check=False)
        except subprocess.TimeoutExpired:
            seconds = time.perf_counter() - started
            return Outcome(seconds, [f"no exit within {SESSION_TIMEOUT_S:.0f} s"], Counter(),
                           model.unknown, Counter(), Counter())
        seconds = time.perf_counter() - started
        requests = Counter(r.kind for r in model.requests)
        results = model.tool_results()
        unknown = model.unknown
    if done.returncode != 0:
        problems.append(f"exit {done.returncode}: {done.stderr[-500:]}")
    lines = []
    for line in done.stdout.splitlines():
        try:
            lines.append(json.loads(line))
        except ValueError:
            continue
    result = next((line for line in reversed(lines) if line.get("type") == "result"), None)
    if result is None or result.get("subtype") != "success" or result.get("is_error"):
        problems.append(f"result: {json.dumps(result)[:500]}")
    if len(results) != context.calls:
        problems.append(f"{len(results)} tool_results for {context.calls} calls")
    failed = [r for r in results.values() if r.get("is_error")]
    if failed:
        problems.append(f"{len(failed)} tool_results are errors: {json.dumps(failed[0])[:300]}")
    ledger: Counter[str] = Counter()
    if kind in LEDGER_KINDS:
        claude_session = str((result or {}).get("session_id", ""))
        ledger = ledger_counts(context.client, claude_session)
        for wanted in ("ToolCallRequested", "ToolCallCompleted"):
            if ledger[wanted] != context.calls:
                problems.append(f"the ledger holds {ledger[wanted]} {wanted} for "
                                f"{context.calls} calls")
    served = served_hooks(context.serve_log)
    served.subtract(served_before)
    served = +served
    if kind in LEDGER_KINDS and served[200] < 2 * context.calls:  # Pre- and PostToolUse
        problems.append(f"the serve answered {served[200]} hook requests for "
                        f"{context.calls} calls")
    if set(served) - {200}:
        problems.append(f"the serve answered hook requests with {dict(served)}")
    return Outcome(seconds, problems, requests, unknown, ledger, served)


# --------------------------------------------------------------------------------------------
# The loop and the report.


@dataclass(slots=True)
class Found:
    samples: dict[str, Samples]
    requests: dict[str, Counter[str]]
    unknown: set[str]
    ledger: dict[str, Counter[str]]
    served: dict[str, list[int]]


def measure(args: argparse.Namespace, context: Context) -> Found:
    found = Found({key: Samples() for key, _label in KINDS},
                  {key: Counter() for key, _label in KINDS}, set(),
                  {key: Counter() for key, _label in KINDS},
                  {key: [] for key, _label in KINDS})
    keys = [key for key, _label in KINDS]
    for key in keys:  # warm-up: bytecode written, the serve's connections made
        outcome = run_session(key, f"warm-{key}", context)
        if outcome.problems:
            print(f"  warm-up {key}: " + "; ".join(outcome.problems), file=sys.stderr)
    for run in range(args.runs):
        shift = run % len(keys)
        for key in keys[shift:] + keys[:shift]:
            outcome = run_session(key, f"{key}-{run}", context)
            row = found.samples[key]
            if outcome.problems:
                row.errors += 1
                print(f"  run {run + 1} {key}: " + "; ".join(outcome.problems),
                      file=sys.stderr, flush=True)
            else:
                row.seconds.append(outcome.seconds)
            found.requests[key] += outcome.requests
            found.unknown.update(outcome.unknown)
            found.ledger[key] += outcome.ledger
            found.served[key].append(outcome.served.total())
            if args.verbose:
                print(f"  run {run + 1} {key}: {outcome.seconds:.3f} s, model requests "
                      f"{dict(outcome.requests)}, hook requests at the serve "
                      f"{outcome.served.total()}, "
                      f"ledger {dict(outcome.ledger)}",
                      file=sys.stderr, flush=True)
    return found


def render(args: argparse.Namespace, host: ClaudeCode, found: Found, load: str) -> str:
    node = node_version()
    lines = [
        f"claude code session bench: a real Claude Code {host.version} headless, "
        f"{args.calls} Read calls a session, scripted model on 127.0.0.1, "
        f"{args.runs} interleaved round(s)",
        f"  python {platform.python_version()}, node "
        f"{'.'.join(map(str, node)) if node else '?'}, {os.cpu_count()} CPUs, "
        f"{platform.system()} {platform.machine()}, SQLite synchronous=FULL",
        f"  sessionledger installed {description()}",
        f"  {load}",
        "",
        f"{'kind':<38}{'n':>4}{'p50 s':>9}{'mean s':>9}{'p50 / HTTP':>12}"
        f"{'per call vs none ms':>21}{'errors':>8}",
        "-" * 101,
    ]
    none, http = found.samples["none"].p50(), found.samples["http"].p50()
    for key, label in KINDS:
        row = found.samples[key]
        extra = "-" if key == "none" else f"{(row.p50() - none) / args.calls * 1e3:.1f}"
        lines.append(f"{label:<38}{len(row.seconds):>4}{row.p50():>9.3f}{row.mean():>9.3f}"
                     f"{row.p50() / http:>12.2f}{extra:>21}{row.errors:>8}")
    ratio = found.samples["command"].p50() / http
    verdict = "PASS" if ratio <= TARGET else "MISS"
    floor = found.samples["python"].p50() / http
    lines += [
        "",
        f"command hooks / HTTP hooks: {ratio:.2f} (target <= {TARGET}): {verdict}; "
        f"a Python hook doing nothing: {floor:.2f}",
        "",
        "model requests per kind (all rounds): " + "; ".join(
            f"{key} " + ", ".join(f"{k} {v}" for k, v in sorted(found.requests[key].items()))
            for key, _label in KINDS),
        "ledger events per kind (all rounds): " + "; ".join(
            f"{key} " + (", ".join(f"{k} {v}" for k, v in sorted(found.ledger[key].items()))
                         or "-")
            for key, _label in KINDS),
        "hook requests the serve answered per session: " + "; ".join(
            f"{key} " + (", ".join(map(str, found.served[key])) or "-")
            for key, _label in KINDS),
    ]
    if found.unknown:
        lines.append("unknown model-server paths: " + ", ".join(sorted(found.unknown)))
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=5, help="interleaved rounds (one session of "
                   "each kind per round)")
    p.add_argument("--calls", type=int, default=20, help="Read tool calls a session")
    p.add_argument("--tmp", type=Path, default=None,
                   help="directory for the files (default: system temp dir)")
    p.add_argument("--quick", action="store_true",
                   help="1 round of 5 tool calls: a smoke test, numbers meaningless")
    p.add_argument("--install", choices=("wheel", "this"), default="wheel",
                   help="time a user's install (a wheel of this checkout in a new virtual "
                   "environment, the default) or this interpreter's environment as it is")
    p.add_argument("-v", "--verbose", action="store_true", help="every session to stderr")
    args = p.parse_args(argv)
    if args.quick:
        args.runs, args.calls = 1, 5
    return args


def _load() -> str:
    try:
        return "load " + " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "load n/a"


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.install == "wheel":  # run again under a user's install (bench/user_install.py)
        rest = list(sys.argv[1:] if argv is None else argv)
        return run_installed(__file__, [*rest, "--install", "this"])
    reason = unavailable()
    if reason is not None:
        print(f"cannot run Claude Code here: {reason}", file=sys.stderr)
        return 2
    started = time.perf_counter()
    host = install()
    before = _load()
    with tempfile.TemporaryDirectory(prefix="sl-bench-cc-session-", dir=args.tmp) as tmp_name:
        tmp = Path(tmp_name)
        workspace, db = tmp / "workspace", tmp / "ledger.db"
        workspace.mkdir()
        path = os.pathsep.join([str(Path(sys.executable).parent),
                                os.environ.get("PATH", os.defpath)])
        with running_server(tmp, workspace, db) as base_url, \
                httpx.Client(base_url=base_url, timeout=30.0) as client:
            context = Context(host, workspace, db, tmp / "home", base_url, tmp / "serve.log",
                              client, path, args.calls)
            found = measure(args, context)
        print(render(args, host, found, f"{before} before, {_load()} after"))
    print(f"\n(total wall time {time.perf_counter() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
