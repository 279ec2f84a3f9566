"""Claude Code as a host: import throughput and the hook round trip (issue 22, acceptance 5).

Run ``.venv/bin/python bench/claude_code.py`` (``--quick`` for a smoke run of a few seconds).
Two parts, each beside an anchor run in the same interleaved loop, on fresh SQLite files in a
temporary directory at the default ``synchronous=FULL``:

(a) **Import.** A generated transcript of ``--lines`` lines (100,000) in Claude Code's shape —
    the envelope of every line (``parentUuid``, ``uuid``, ``sessionId``, ``cwd``, ``version``,
    ``gitBranch``, ``timestamp``), user prompts, assistant text and ``tool_use`` lines with
    ``usage`` and ``requestId``, one API message split over a text line and a tool line as
    Claude Code writes it, ``tool_result`` lines with ``toolUseResult``, over ``Read``,
    ``Bash``, ``Edit`` and ``TodoWrite`` (lists of 3 to 6 items whose statuses move on), a
    ``compact_boundary`` every ``--compact-every`` lines. Real transcripts also hold many lines
    that record nothing (``progress``: 70 % of the largest real one); this one holds none, so
    every line is work. The workloads:

    - *anchor*: ``json.loads`` of every line and a plain ``sqlite3`` insert of one row per line
      (its type and text) into a table of the same kind of file (WAL, ``synchronous=FULL``),
      committed every 500 lines as the import commits every 500 batches: what the import
      cannot beat;
    - *read only*: :func:`read_transcript` — the import's parsing, without the ledger;
    - *import in process*: ``read_transcript`` and ``Recorder.record_all`` on a
      ``SessionService`` over a fresh file — the code path of ``sessionledger import
      claude-code`` without the process;
    - *re-import in process*: the same again on the imported file, in a new service: appends
      nothing (every batch is found under its idempotency key);
    - *import via the CLI*: ``sessionledger import claude-code FILE --json`` as a subprocess on
      a fresh file, process start and imports included.

    Each run does all of them (the order of anchor, in-process and CLI rotated every run); the
    table shows the median over ``--runs`` runs of lines/s and events/s and the ratio to the
    anchor's lines/s (median, and the per-run range of the ratio within each run).

(b) **Hooks.** The round trip of one hook event as Claude Code makes it, PreToolUse and
    PostToolUse pairs for ``Read``, ``Bash`` (``ls``) and ``Edit`` in one session:

    - over HTTP: a real ``sessionledger serve`` subprocess on loopback, one ``httpx`` client
      (a kept-alive connection, as Claude Code's) POSTing to ``/v1/hooks/claude-code``;
      anchor: ``GET /healthz`` on the same connection;
    - as a command: ``sessionledger hook claude-code --db … --workspace …`` started for every
      event with the event on stdin, until it exits (process start included, as Claude Code
      pays it), recording the event itself (no server on its database), and the same command
      on the database of a running ``serve``, which it finds and forwards to; anchors:
      ``python -c pass`` (a bare process start of the same interpreter) and ``python -c
      "import sessionledger.cli"`` (start and imports, no work).

    Every ``--hook-events`` events (half PreToolUse, half PostToolUse) per kind, interleaved
    event by event with their anchors; p50, p99 and mean, and each p50 over its anchor's. An
    answer that is not the expected one (a PreToolUse without a ``permissionDecision``, a
    PostToolUse other than ``{}``) is counted as an error.

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
from collections import Counter  # noqa: E402
from collections.abc import Callable, Iterator, Sequence  # noqa: E402
from contextlib import contextmanager  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402
from typing import Any  # noqa: E402

import httpx  # noqa: E402

from sessionledger import SessionService  # noqa: E402
from sessionledger.claude_code.recorder import IMPORT_CHUNK, Recorder  # noqa: E402
from sessionledger.claude_code.transcripts import read_transcript  # noqa: E402

SESSION = "b3c4d5e6-f7a8-4b9c-8d0e-1f2a3b4c5d6e"
STARTUP_TIMEOUT_S = 30.0
COMMAND_TIMEOUT_S = 120.0


# --------------------------------------------------------------------------------------------
# The generated transcript.


_WORDS = ("the", "session", "ledger", "todo", "plan", "read", "file", "test", "helper", "rename",
          "module", "import", "error", "fix", "check", "config", "path", "value", "list",
          "call", "result", "event", "store", "query", "index", "cache", "retry", "log")
_FILES = ("src/app.py", "src/store.py", "src/config.py", "tests/test_app.py", "README.md",
          "src/cli.py", "src/http/routes.py", "docs/setup.md")
_COMMANDS = ("ls -la src", "git status", "pytest -q tests/test_app.py", "git diff --stat",
             "grep -rn helper src", "python -m mypy src")


class TranscriptWriter:
    """Writes Claude Code-shaped transcript lines (see the module docstring) to a file."""

    def __init__(self, path: Path, cwd: str, seed: int) -> None:
        self.stream = path.open("w", encoding="utf-8")
        self.cwd = cwd
        self.random = random.Random(seed)
        self.lines = 0
        self.kinds: Counter[str] = Counter()
        self.parent: str | None = None
        self.todos: list[dict[str, str]] = []
        self.clock = 1_770_000_000.0  # 2026-02-02

    def _text(self, low: int, high: int) -> str:
        return " ".join(self.random.choice(_WORDS) for _ in range(self.random.randint(low, high)))

    def _line(self, kind: str, counted: str, **fields: Any) -> None:
        self.lines += 1
        self.kinds[counted] += 1
        self.clock += self.random.uniform(0.2, 4.0)
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(self.clock))
        uuid = f"{self.lines:08x}-0000-4000-8000-{self.random.getrandbits(48):012x}"
        value = {"parentUuid": self.parent, "isSidechain": False, "userType": "external",
                 "cwd": self.cwd, "sessionId": SESSION, "version": "2.1.39",
                 "gitBranch": "main", "type": kind, **fields, "uuid": uuid,
                 "timestamp": f"{stamp}.{int(self.clock * 1000) % 1000:03d}Z"}
        self.parent = uuid
        self.stream.write(json.dumps(value, ensure_ascii=False, separators=(",", ":")) + "\n")

    def _assistant(self, message_id: str, block: dict[str, Any], counted: str) -> None:
        self._line("assistant", counted, message={
            "model": "claude-opus-4-6", "id": message_id, "type": "message", "role": "assistant",
            "content": [block], "stop_reason": None, "stop_sequence": None,
            "usage": {"input_tokens": self.random.randint(1, 9),
                      "cache_creation_input_tokens": self.random.randint(0, 9000),
                      "cache_read_input_tokens": self.random.randint(10000, 90000),
                      "output_tokens": self.random.randint(5, 900), "service_tier": "standard"},
        }, requestId=f"req_{self.random.getrandbits(64):016x}")

    def prompt(self) -> None:
        self._line("user", "user prompt", message={"role": "user", "content": self._text(6, 40)},
                   permissionMode="default")

    def says(self, message_id: str) -> None:
        self._assistant(message_id, {"type": "text", "text": self._text(8, 80)},
                        "assistant text")

    def call(self, message_id: str) -> None:
        """A tool_use line (same API message as the text before it) and its tool_result."""
        tool = self.random.choice(("Read", "Read", "Bash", "Bash", "Edit", "TodoWrite"))
        use_id = f"toolu_{self.random.getrandbits(96):024x}"
        path = f"{self.cwd}/{self.random.choice(_FILES)}"
        response: Any
        if tool == "Read":
            tool_input: dict[str, Any] = {"file_path": path}
            body = "\n".join(f"{n:>6}\u2192{self._text(2, 12)}" for n in range(1, 25))
            shown: Any = body
            response = {"type": "text", "file": {"filePath": path, "content": body,
                                                 "numLines": 24, "startLine": 1,
                                                 "totalLines": 24}}
        elif tool == "Bash":
            tool_input = {"command": self.random.choice(_COMMANDS),
                          "description": self._text(3, 8)}
            shown = "\n".join(self._text(3, 10) for _ in range(self.random.randint(1, 8)))
            response = {"stdout": shown, "stderr": "", "interrupted": False, "isImage": False}
        elif tool == "Edit":
            old, new = self._text(4, 20), self._text(4, 20)
            tool_input = {"file_path": path, "old_string": old, "new_string": new,
                          "replace_all": False}
            shown = f"The file {path} has been updated."
            response = {"filePath": path, "oldString": old, "newString": new,
                        "replaceAll": False, "userModified": False}
        else:
            old_todos = self.todos
            self.todos = self._next_todos()
            tool_input = {"todos": self.todos}
            shown = ("Todos have been modified successfully. Ensure that you continue to use "
                     "the todo list to track your progress.")
            response = {"oldTodos": old_todos, "newTodos": self.todos}
        self._assistant(message_id, {"type": "tool_use", "id": use_id, "name": tool,
                                     "input": tool_input}, f"tool_use {tool}")
        self._line("user", f"tool_result {tool}", message={"role": "user", "content": [
            {"tool_use_id": use_id, "type": "tool_result", "content": shown}]},
            toolUseResult=response)

    def _next_todos(self) -> list[dict[str, str]]:
        """The list moved on: the first unfinished item done, now and then a new list."""
        items = [dict(item) for item in self.todos]
        if not items or all(i["status"] == "completed" for i in items):
            count = self.random.randint(3, 6)
            items = [{"content": self._text(3, 9).capitalize(), "status": "pending",
                      "activeForm": self._text(2, 6).capitalize()} for _ in range(count)]
        for item in items:
            if item["status"] == "in_progress":
                item["status"] = "completed"
                break
        for item in items:
            if item["status"] == "pending":
                item["status"] = "in_progress"
                break
        return items

    def compacted(self) -> None:
        self._line("system", "compact_boundary", subtype="compact_boundary",
                   content="Conversation compacted", isMeta=False, level="info",
                   compactMetadata={"trigger": "auto", "preTokens": 150_000})

    def close(self) -> None:
        self.stream.close()


@dataclass(frozen=True, slots=True)
class Generated:
    path: Path
    lines: int
    size: int
    kinds: Counter[str]


def generate(path: Path, lines: int, cwd: str, *, compact_every: int, seed: int) -> Generated:
    """A transcript of exactly ``lines`` lines: turns of a prompt, assistant text and 1 to 6 tool
    calls (a text and a tool_use line sharing one message id) and a closing text."""
    writer = TranscriptWriter(path, cwd, seed)
    try:
        next_compaction = compact_every
        turn = 0
        while writer.lines < lines:
            if writer.lines >= next_compaction:
                writer.compacted()
                next_compaction += compact_every
                continue
            turn += 1
            writer.prompt()
            for call in range(writer.random.randint(1, 6)):
                if lines - writer.lines < 3:
                    break
                message_id = f"msg_{turn:06d}{call:02d}{writer.random.getrandbits(40):010x}"
                writer.says(message_id)
                writer.call(message_id)
            if writer.lines < lines:
                writer.says(f"msg_{turn:06d}zz{writer.random.getrandbits(40):010x}")
    finally:
        writer.close()
    return Generated(path, writer.lines, path.stat().st_size, writer.kinds)


# --------------------------------------------------------------------------------------------
# (a) import workloads.


@dataclass(frozen=True, slots=True)
class ImportSample:
    lines: int
    events: int
    seconds: float

    @property
    def lines_per_s(self) -> float:
        return self.lines / self.seconds

    @property
    def events_per_s(self) -> float:
        return self.events / self.seconds


def anchor(transcript: Generated, workdir: Path) -> ImportSample:
    """``json.loads`` of every line and one row per line into a plain table, committed every
    :data:`IMPORT_CHUNK` lines, in a WAL file at ``synchronous=FULL``."""
    started = time.perf_counter()
    conn = sqlite3.connect(workdir / "anchor.db", isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=FULL")
        conn.execute("CREATE TABLE lines (n INTEGER PRIMARY KEY, type TEXT NOT NULL, "
                     "body TEXT NOT NULL)")
        rows: list[tuple[int, str, str]] = []
        count = 0

        def flush() -> None:
            conn.execute("BEGIN IMMEDIATE")
            conn.executemany("INSERT INTO lines VALUES (?, ?, ?)", rows)
            conn.execute("COMMIT")
            rows.clear()

        with transcript.path.open("rb") as stream:
            for raw in stream:
                count += 1
                text = raw.decode("utf-8")
                rows.append((count, json.loads(text)["type"], text))
                if len(rows) >= IMPORT_CHUNK:
                    flush()
        if rows:
            flush()
    finally:
        conn.close()
    return ImportSample(count, count, time.perf_counter() - started)


def read_only(transcript: Generated, workdir: Path) -> ImportSample:
    started = time.perf_counter()
    read = read_transcript(transcript.path)
    assert not read.skipped, read.skipped[:3]
    return ImportSample(read.lines, 0, time.perf_counter() - started)


def in_process(transcript: Generated, db: Path, root: Path) -> ImportSample:
    """The import's code path in this process: read the transcript, record it."""
    started = time.perf_counter()
    service = SessionService.open(f"sqlite:///{db}", workspace_root=root)
    try:
        read = read_transcript(transcript.path)
        outcome = Recorder(service).record_all(read.seen)
    finally:
        service.close()
    assert not read.skipped and not outcome.failed and not outcome.refused, outcome
    return ImportSample(read.lines, sum(outcome.appended.values()),
                        time.perf_counter() - started)


def via_cli(transcript: Generated, db: Path, root: Path) -> ImportSample:
    """``sessionledger import claude-code FILE --json`` as a subprocess."""
    command = [*_sessionledger(), "import", "claude-code", str(transcript.path), "--db",
               f"sqlite:///{db}", "--workspace", str(root), "--json"]
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env=_child_env(),
                          cwd=root, timeout=3600, check=False)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"import failed ({done.returncode}): {done.stderr[-2000:]}")
    (entry,) = json.loads(done.stdout)["transcripts"]
    assert not entry["skipped"], entry["skipped"][:3]
    return ImportSample(transcript.lines, int(entry["appended"]), seconds)


IMPORT_ROWS = (
    ("anchor", "anchor: json.loads + sqlite3 row per line"),
    ("read", "read_transcript only (no ledger)"),
    ("import", "import in process (read + Recorder)"),
    ("reimport", "re-import in process (appends 0)"),
    ("cli", "import via CLI subprocess"),
)


def measure_imports(args: argparse.Namespace, tmp: Path, transcript: Generated,
                    root: Path) -> dict[str, list[ImportSample]]:
    samples: dict[str, list[ImportSample]] = {key: [] for key, _label in IMPORT_ROWS}

    def the_import(workdir: Path) -> None:
        db = workdir / "import.db"
        samples["read"].append(read_only(transcript, workdir))
        samples["import"].append(in_process(transcript, db, root))
        samples["reimport"].append(in_process(transcript, db, root))

    units: list[tuple[str, Callable[[Path], None]]] = [
        ("anchor", lambda d: samples["anchor"].append(anchor(transcript, d))),
        ("import", the_import),
        ("cli", lambda d: samples["cli"].append(via_cli(transcript, d / "cli.db", root))),
    ]
    for run in range(args.runs):
        shift = run % len(units)
        for key, unit in units[shift:] + units[:shift]:
            workdir = tmp / f"import-{key}-{run}"
            workdir.mkdir()
            try:
                unit(workdir)
            finally:
                shutil.rmtree(workdir, ignore_errors=True)
            if args.verbose:
                done = {k: v[-1] for k, v in samples.items() if len(v) == run + 1}
                print(f"  run {run + 1} {key}: " + ", ".join(
                    f"{k} {s.lines_per_s:,.0f} lines/s" for k, s in done.items()),
                    file=sys.stderr, flush=True)
    return samples


# --------------------------------------------------------------------------------------------
# (b) hook round trips.


@dataclass(slots=True)
class Latencies:
    seconds: list[float] = field(default_factory=list)
    errors: int = 0

    def quantile(self, q: float) -> float:
        ordered = sorted(self.seconds)
        return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]

    @property
    def mean(self) -> float:
        return statistics.fmean(self.seconds)


def hook_events(cwd: Path, count: int, seed: int) -> Iterator[dict[str, Any]]:
    """PreToolUse then PostToolUse of the same call, ``count`` events in all, for Read, Bash
    (``ls``) and Edit in turn, in one Claude Code session (``default`` mode)."""
    rng = random.Random(seed)
    base = {"session_id": f"{seed:08x}-hook-4000-8000-000000000000",
            "transcript_path": str(cwd / "transcript.jsonl"), "cwd": str(cwd),
            "permission_mode": "default"}
    for n in range(count // 2):
        tool = ("Read", "Bash", "Edit")[n % 3]
        path = str(cwd / rng.choice(_FILES))
        tool_input: dict[str, Any] = (
            {"file_path": path} if tool == "Read" else
            {"command": "ls -la", "description": "List files"} if tool == "Bash" else
            {"file_path": path, "old_string": "a = 1", "new_string": "a = 2"})
        call = {"tool_name": tool, "tool_input": tool_input,
                "tool_use_id": f"toolu_{seed:04x}{n:08d}{rng.getrandbits(48):012x}"}
        yield {**base, "hook_event_name": "PreToolUse", **call}
        yield {**base, "hook_event_name": "PostToolUse", **call,
               "tool_response": {"stdout": "ok", "stderr": "", "interrupted": False}}


def answered_as_expected(event: dict[str, Any], output: Any) -> bool:
    if event["hook_event_name"] != "PreToolUse":
        return bool(output == {})
    specific = output.get("hookSpecificOutput") if isinstance(output, dict) else None
    return isinstance(specific, dict) and specific.get("permissionDecision") in (
        "allow", "ask", "deny")


HTTP_ROWS = (
    ("healthz", "GET /healthz (anchor)"),
    ("http PreToolUse", "POST /v1/hooks/claude-code PreToolUse"),
    ("http PostToolUse", "POST /v1/hooks/claude-code PostToolUse"),
)
COMMAND_ROWS = (
    ("pass", "python -c pass (anchor: process start)"),
    ("imports", "python -c 'import sessionledger.cli'"),
    ("command PreToolUse", "sessionledger hook claude-code PreToolUse"),
    ("command PostToolUse", "sessionledger hook claude-code PostToolUse"),
    ("forwarded PreToolUse", "the same, forwarded to a serve, PreToolUse"),
    ("forwarded PostToolUse", "the same, forwarded to a serve, PostToolUse"),
)


def measure_http(args: argparse.Namespace, tmp: Path) -> dict[str, Latencies]:
    found = {key: Latencies() for key, _label in HTTP_ROWS}
    directory = tmp / "http"
    directory.mkdir()
    clock = time.perf_counter
    with running_server(directory) as (base_url, workspace), \
            httpx.Client(base_url=base_url, timeout=30.0) as client:
        cwd = workspace / "app"
        cwd.mkdir()
        for warm in hook_events(cwd, 6, args.seed + 1000):  # a session, a connection
            client.post("/v1/hooks/claude-code", content=json.dumps(warm))
            client.get("/healthz")
        for event in hook_events(cwd, args.hook_events, args.seed):
            t0 = clock()
            health = client.get("/healthz")
            t1 = clock()
            found["healthz"].seconds.append(t1 - t0)
            found["healthz"].errors += health.status_code != 200
            body = json.dumps(event)
            t0 = clock()
            response = client.post("/v1/hooks/claude-code", content=body,
                                   headers={"content-type": "application/json"})
            t1 = clock()
            row = found[f"http {event['hook_event_name']}"]
            row.seconds.append(t1 - t0)
            row.errors += response.status_code != 200 or not answered_as_expected(
                event, response.json())
    return found


def measure_command(args: argparse.Namespace, tmp: Path) -> dict[str, Latencies]:
    found = {key: Latencies() for key, _label in COMMAND_ROWS}
    workspace = tmp / "command"
    cwd = workspace / "app"
    cwd.mkdir(parents=True)
    env = _child_env()
    hook = [*_sessionledger(), "hook", "claude-code", "--db",
            f"sqlite:///{workspace / 'ledger.db'}", "--workspace", str(workspace)]
    anchors = {"pass": [sys.executable, "-c", "pass"],
               "imports": [sys.executable, "-c", "import sessionledger.cli"]}
    clock = time.perf_counter

    def run(command: list[str], stdin: str = "") -> tuple[float, subprocess.CompletedProcess[str]]:
        t0 = clock()
        done = subprocess.run(command, input=stdin, capture_output=True, text=True, env=env,
                              cwd=cwd, timeout=COMMAND_TIMEOUT_S, check=False)
        return clock() - t0, done

    def timed(kind: str, command: list[str], event: dict[str, Any]) -> None:
        seconds, done = run(command, json.dumps(event))
        row = found[f"{kind} {event['hook_event_name']}"]
        row.seconds.append(seconds)
        try:
            output = json.loads(done.stdout)
        except ValueError:
            output = None
        row.errors += done.returncode != 0 or not answered_as_expected(event, output)

    served = tmp / "forwarded"
    served.mkdir()
    with running_server(served) as (_url, served_root):
        # the server's discovery file beside its database: the command forwards (issue 38)
        forwarded = [*_sessionledger(), "hook", "claude-code", "--db",
                     f"sqlite:///{served / 'ledger.db'}", "--workspace", str(served_root)]
        served_cwd = served_root / "app"
        served_cwd.mkdir()
        for warm in hook_events(cwd, 2, args.seed + 1000):  # the database created, caches warm
            run(hook, json.dumps(warm))
        for warm in hook_events(served_cwd, 2, args.seed + 1000):
            run(forwarded, json.dumps(warm))
        events = zip(hook_events(cwd, args.hook_commands, args.seed),
                     hook_events(served_cwd, args.hook_commands, args.seed), strict=True)
        for event, served_event in events:
            if event["hook_event_name"] == "PreToolUse":  # one anchor pair per call
                for key, command in anchors.items():
                    seconds, done = run(command)
                    found[key].seconds.append(seconds)
                    found[key].errors += done.returncode != 0
            timed("command", hook, event)
            timed("forwarded", forwarded, served_event)
    return found


@contextmanager
def running_server(directory: Path) -> Iterator[tuple[str, Path]]:
    """The installed ``sessionledger serve`` on a free loopback port; SIGTERM on exit."""
    workspace = directory / "workspace"
    workspace.mkdir()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    command = [*_sessionledger(), "serve", "--port", str(port), "--workspace", str(workspace),
               "--db", f"sqlite:///{directory / 'ledger.db'}"]
    log_path = directory / "server.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                                   env=_child_env())
    base_url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while True:
            if process.poll() is not None or time.monotonic() > deadline:
                written = log_path.read_text("utf-8", "replace")
                raise RuntimeError(f"server did not start:\n{written}")
            try:
                if httpx.get(f"{base_url}/healthz", timeout=1.0).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            time.sleep(0.05)
        yield base_url, workspace
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _sessionledger() -> list[str]:
    """The installed ``sessionledger`` console script of this interpreter's environment."""
    return [str(Path(sys.executable).parent / "sessionledger")]


def _child_env() -> dict[str, str]:
    """This process's environment for the children, with this checkout first on the path."""
    env = {k: v for k, v in os.environ.items() if k != "SESSIONLEDGER_DB"}
    env["PYTHONPATH"] = os.pathsep.join([str(_HERE.parent),
                                         *filter(None, [env.get("PYTHONPATH")])])
    return env


# --------------------------------------------------------------------------------------------
# The report.


def render(args: argparse.Namespace, transcript: Generated, imports: dict[str, list[ImportSample]],
           hooks: dict[str, Latencies], load: str) -> str:
    kinds = ", ".join(f"{kind} {count:,}" for kind, count in sorted(transcript.kinds.items()))
    lines = [
        "claude code bench: import throughput and the hook round trip, SQLite synchronous=FULL",
        f"  python {platform.python_version()}, SQLite {sqlite3.sqlite_version}, "
        f"{os.cpu_count()} CPUs, {platform.system()} {platform.machine()}",
        f"  {load}",
        f"  transcript: {transcript.lines:,} lines, {transcript.size / 1e6:,.1f} MB "
        f"({transcript.size / transcript.lines:,.0f} bytes a line): {kinds}",
        "",
        f"(a) import: median of {args.runs} interleaved run(s)",
        "",
        f"{'workload':<46}{'lines':>9}{'events':>9}{'seconds':>9}{'lines/s':>10}"
        f"{'events/s':>10}{'ratio':>8}{'per-run range':>15}",
        "-" * 116,
    ]
    base = imports["anchor"]
    for key, label in IMPORT_ROWS:
        rows = imports[key]
        med = statistics.median
        ratio = med(s.lines_per_s for s in rows) / med(s.lines_per_s for s in base)
        paired = [s.lines_per_s / a.lines_per_s for s, a in zip(rows, base, strict=True)]
        events = med(s.events for s in rows)
        lines.append(
            f"{label:<46}{med(s.lines for s in rows):>9,.0f}{events:>9,.0f}"
            f"{med(s.seconds for s in rows):>9.2f}{med(s.lines_per_s for s in rows):>10,.0f}"
            + (f"{med(s.events_per_s for s in rows):>10,.0f}" if events else f"{'-':>10}")
            + f"{ratio:>8.3f}{f'{min(paired):.3f}-{max(paired):.3f}':>15}"
        )
    lines += [
        "ratio: lines/s over the anchor's lines/s (higher is better)",
        "",
        f"(b) hook round trip: {args.hook_events} events over HTTP, {args.hook_commands} as a "
        "command (PreToolUse/PostToolUse pairs), interleaved with their anchors",
        "",
        f"{'workload':<46}{'n':>6}{'p50 ms':>10}{'p99 ms':>10}{'mean ms':>10}"
        f"{'p50 / anchor':>14}{'errors':>8}",
        "-" * 104,
    ]
    for labels, anchor_key in ((HTTP_ROWS, "healthz"), (COMMAND_ROWS, "pass")):
        anchor_p50 = hooks[anchor_key].quantile(0.5)
        for key, label in labels:
            found = hooks[key]
            lines.append(
                f"{label:<46}{len(found.seconds):>6}{found.quantile(0.5) * 1e3:>10.2f}"
                f"{found.quantile(0.99) * 1e3:>10.2f}{found.mean * 1e3:>10.2f}"
                f"{found.quantile(0.5) / anchor_p50:>14.2f}{found.errors:>8}"
            )
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--lines", type=int, default=100_000, help="transcript lines generated")
    p.add_argument("--compact-every", type=int, default=5_000,
                   help="a compact_boundary every this many lines")
    p.add_argument("--runs", type=int, default=3, help="interleaved import runs (median shown)")
    p.add_argument("--hook-events", type=int, default=1_000,
                   help="hook events POSTed over HTTP (half PreToolUse, half PostToolUse)")
    p.add_argument("--hook-commands", type=int, default=200,
                   help="hook events run as a command, one process each")
    p.add_argument("--seed", type=int, default=1, help="generator seed")
    p.add_argument("--tmp", type=Path, default=None,
                   help="directory for the files (default: system temp dir)")
    p.add_argument("--quick", action="store_true",
                   help="tiny sizes and one run: a smoke test, numbers meaningless")
    p.add_argument("-v", "--verbose", action="store_true", help="every sample to stderr")
    args = p.parse_args(argv)
    if args.quick:
        args.lines, args.compact_every, args.runs = 2_000, 500, 1
        args.hook_events, args.hook_commands = 30, 10
    return args


def _load() -> str:
    try:
        return f"{os.getloadavg()[0]:.2f}"
    except OSError:
        return "n/a"


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.perf_counter()
    before = _load()
    with tempfile.TemporaryDirectory(prefix="sl-bench-claude-", dir=args.tmp) as tmp_name:
        tmp = Path(tmp_name)
        root = tmp / "root"
        cwd = root / "project"
        cwd.mkdir(parents=True)
        transcript = generate(tmp / f"{SESSION}.jsonl", args.lines, str(cwd),
                              compact_every=args.compact_every, seed=args.seed)
        imports = measure_imports(args, tmp, transcript, root)
        hooks = {**measure_http(args, tmp), **measure_command(args, tmp)}
        print(render(args, transcript, imports, hooks,
                     f"1-min load average {before} before, {_load()} after"))
    print(f"\n(total wall time {time.perf_counter() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
