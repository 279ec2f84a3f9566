"""Every snippet of docs/claude-code.md runs as written (issue 22: "each snippet is exercised").

The snippets are read out of the page, not copied here. The fenced ``json`` blocks that are
settings files (they hold ``hooks``) are run hook by hook: a ``"type": "command"`` hook's
``command`` through a shell, as Claude Code runs it (``$CLAUDE_PROJECT_DIR`` set, the event on
stdin), and a ``"type": "http"`` hook's ``url`` with a POST to a real ``sessionledger serve``.
Each gets one Claude Code session's events, among them the page's own example event, whose
answer must be the page's example answer. Every ``sessionledger import`` line of the page's
``sh`` blocks runs through a shell against transcripts this file writes in Claude Code's layout
under a temporary ``HOME``; the page's sample output line is what it prints.

Only the places that name a machine are changed: ``sqlite:///path/to/ledger.db`` becomes a
temporary database, ``http://127.0.0.1:8765`` the test server's address, ``/home/me`` a
temporary home. A snippet removed, renamed or broken fails here: the snippets are counted.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from server_support import ServerProcess, sessionledger_command

from sessionledger import SessionService
from sessionledger.claude_code.observations import ledger_session_id
from sessionledger.claude_code.setup import HELD

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "claude-code.md"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.MULTILINE | re.DOTALL)
DOC_DB, DOC_BASE, DOC_HOME = "sqlite:///path/to/ledger.db", "http://127.0.0.1:8765", "/home/me"
DOC_CWD = f"{DOC_HOME}/src/app"
HOOK_URL = f"{DOC_BASE}/v1/hooks/claude-code"
HOOKED = ("SessionStart", "UserPromptSubmit", "PreToolUse", "PermissionRequest", "PostToolUse",
          "PostToolUseFailure", "PreCompact", "Stop")
NO_MATCHER = {"UserPromptSubmit", "Stop"}
RUN_TIMEOUT_S = 60.0


# -- the page's snippets ----------------------------------------------------------------------


def snippets() -> dict[str, list[str]]:
    """The fenced blocks of the page by kind: ``http`` and ``command`` settings files, the
    example ``event`` and its ``answer``, ``sh`` command blocks, ``text`` sample output."""
    found: dict[str, list[str]] = {
        "http": [], "command": [], "event": [], "answer": [], "sh": [], "text": [], "other": [],
    }
    for language, body in FENCE.findall(DOC.read_text(encoding="utf-8")):
        if language == "json":
            value = json.loads(body)
            if "hooks" in value:
                kinds = {hook["type"] for entries in value["hooks"].values()
                         for entry in entries for hook in entry["hooks"]}
                found["http" if "http" in kinds else "command"].append(body)
            elif "hook_event_name" in value:
                found["event"].append(body)
            elif "hookSpecificOutput" in value:
                found["answer"].append(body)
            else:
                found["other"].append(body)
        elif language in ("sh", "text"):
            found[language].append(body)
        else:
            found["other"].append(body)
    return found


def the_only(kind: str) -> str:
    (snippet,) = snippets()[kind]
    return snippet


def substituted(text: str, replacements: dict[str, str]) -> str:
    """``text`` with each placeholder replaced; every one must be in it."""
    for placeholder, value in replacements.items():
        assert placeholder in text, f"the snippet no longer names {placeholder!r}:\n{text}"
        text = text.replace(placeholder, value)
    return text


def import_lines() -> list[str]:
    """Every ``sessionledger import`` command line of the page's ``sh`` blocks."""
    return [line.strip() for block in snippets()["sh"] for line in block.splitlines()
            if line.strip().startswith("sessionledger import")]


def test_the_page_has_each_snippet_once() -> None:  # issue 22: docs/claude-code.md
    counted = {kind: len(blocks) for kind, blocks in snippets().items()}
    # a new fenced block is a snippet no test runs yet: run it here
    assert counted == {"http": 1, "command": 1, "event": 1, "answer": 1, "sh": 5, "text": 1,
                       "other": 0}, counted
    assert len(import_lines()) == 3


def test_both_settings_hook_the_same_events_with_matchers_where_they_apply() -> None:  # CC-1
    for kind in ("http", "command"):
        settings = json.loads(the_only(kind))
        assert list(settings) == ["hooks"]
        assert tuple(settings["hooks"]) == HOOKED, kind
        for event, entries in settings["hooks"].items():
            held = HELD.get(event)
            matchers = [entry.get("matcher") for entry in entries]
            if held is None:
                assert matchers == [None if event in NO_MATCHER else "*"], (kind, event)
            else:  # the held tool waits longer; every other tool keeps the short timeout
                assert matchers == [f"^(?!{held}$)", held], (kind, event)
                assert [e["hooks"][0]["timeout"] for e in entries] == [10, 600]
            for entry in entries:
                (hook,) = entry["hooks"]
                # Claude Code 2.1 runs no HTTP hook for SessionStart: a command there
                assert hook["type"] == ("command" if event == "SessionStart" else kind)
    http_hooks = {h["url"] for h in handlers(json.loads(the_only("http"))) if "url" in h}
    assert http_hooks == {HOOK_URL}
    commands = {h["command"] for h in handlers(json.loads(the_only("command")))}
    assert commands == {f'sessionledger hook claude-code --db {DOC_DB} {waits}'
                        '--workspace "$CLAUDE_PROJECT_DIR"' for waits in ("", "--timeout 595 ")}


@pytest.mark.parametrize(("kind", "args"), [
    ("http", ["--url", DOC_BASE, "--db", DOC_DB]),
    ("command", ["--command", "--db", DOC_DB]),
])
def test_the_snippets_are_what_setup_writes(
        tmp_path: Path, kind: str, args: list[str]) -> None:  # issue 39
    done = subprocess.run([*sessionledger_command(), "setup", "claude-code", "--project",
                           str(tmp_path), *args], env=command_env(tmp_path),
                          capture_output=True, text=True, timeout=RUN_TIMEOUT_S, check=False)
    assert done.returncode == 0, done.stderr
    written = json.loads((tmp_path / ".claude" / "settings.json").read_text(encoding="utf-8"))
    assert written == json.loads(the_only(kind))


def handlers(settings: dict[str, Any]) -> list[dict[str, Any]]:
    return [hook for entries in settings["hooks"].values() for entry in entries
            for hook in entry["hooks"]]


# -- one Claude Code session's events, through a settings snippet -----------------------------

CLAUDE_SESSION = "3f2c9d4e-8a61-4b7e-9c15-2d8e6f0a7b93"
PLAN = "# Plan\n\n1. Read app.py.\n2. Rename the helper.\n"
Run = Callable[[dict[str, Any], str], dict[str, Any]]


def matches(matcher: str | None, subject: str) -> bool:
    """Claude Code's matcher: all for none or ``*``; names (letters, digits, ``_``, ``-``,
    ``|``) matched exactly; anything else a regular expression searched for, unanchored."""
    if matcher in (None, "", "*"):
        return True
    assert matcher is not None
    if re.fullmatch(r"[\w|-]+", matcher):
        return subject in matcher.split("|")
    return re.search(matcher, subject) is not None


def hook_of(settings: dict[str, Any], event: dict[str, Any]) -> dict[str, Any]:
    """The one hook Claude Code would run for ``event`` (its matcher checked)."""
    name = event["hook_event_name"]
    subject = event.get("tool_name") or event.get("source") or event.get("trigger") or ""
    found: list[dict[str, Any]] = [
        hook for entry in settings["hooks"].get(name, [])
        if matches(entry.get("matcher"), subject) for hook in entry["hooks"]
    ]
    assert len(found) == 1, (name, found)
    return found[0]


def documented_event(cwd: Path, home: Path) -> dict[str, Any]:
    """The page's example PreToolUse, with its paths in this test's directories."""
    text = substituted(the_only("event"), {DOC_CWD: str(cwd), DOC_HOME: str(home)})
    event: dict[str, Any] = json.loads(text)
    assert event["session_id"] == CLAUDE_SESSION
    return event


def play_a_session(run: Run, cwd: Path, home: Path) -> None:
    """A session in plan mode: the page's Write denied, a plan approved, todos written with one
    dropped, a warning at the next prompt, a compaction and the plan and todos handed back."""
    base = {"session_id": CLAUDE_SESSION, "cwd": str(cwd),
            "transcript_path": str(home / ".claude" / "projects" / "app" / "t.jsonl")}

    def event(name: str, mode: str | None = "plan", **fields: Any) -> dict[str, Any]:
        return {**base, "hook_event_name": name,
                **({} if mode is None else {"permission_mode": mode}), **fields}

    assert run(event("SessionStart", source="startup"), "") == {}
    assert run(event("UserPromptSubmit", prompt="Plan the rename"), "") == {}
    answer = run(documented_event(cwd, home), "")
    assert answer == json.loads(the_only("answer"))  # the page's example, as answered
    read: dict[str, Any] = {"tool_name": "Read", "tool_input": {"file_path": str(cwd / "app.py")},
            "tool_use_id": "toolu_01Read"}
    allowed = run(event("PreToolUse", **read), "")
    assert allowed["hookSpecificOutput"]["permissionDecision"] == "allow", allowed
    assert run(event("PostToolUse", **read, tool_response={"type": "text"}), "") == {}
    exit_plan: dict[str, Any] = {"tool_name": "ExitPlanMode", "tool_input": {"plan": PLAN},
                 "tool_use_id": "toolu_01Exit"}
    assert run(event("PreToolUse", **exit_plan), "") == {}  # Claude Code asks its user
    assert run(event("PostToolUse", **exit_plan, tool_response={"plan": PLAN}), "") == {}
    todos = [{"content": "Rename the helper", "status": "in_progress", "activeForm": "Renaming"},
             {"content": "Update the callers", "status": "pending", "activeForm": "Updating"}]
    for number, items in enumerate((todos, [{**todos[0], "status": "completed"}]), start=1):
        written = run(event("PostToolUse", "default", tool_name="TodoWrite",
                            tool_input={"todos": items}, tool_response={},
                            tool_use_id=f"toolu_01Todo{number}"), "")
        assert written == {}
    failed = run(event("PostToolUseFailure", "default", tool_name="Bash",
                       tool_input={"command": "pytest -q"}, error="exit code 1",
                       tool_use_id="toolu_01Bash"), "")
    assert failed == {}
    warned = run(event("UserPromptSubmit", "default", prompt="Go on"), "")
    assert "Update the callers" in warned["hookSpecificOutput"]["additionalContext"], warned
    assert run(event("PreCompact", None, trigger="manual", custom_instructions=""), "") == {}
    carried = run(event("SessionStart", None, source="compact"), "")
    context = carried["hookSpecificOutput"]["additionalContext"]
    assert PLAN.strip() in context and "[completed] Rename the helper" in context, carried
    assert run(event("Stop", "default", stop_hook_active=False), "") == {}
    # a broken event: no opinion, and the agent goes on
    assert run(event("Stop"), "not json") == {}


def recorded(db_url: str, root: Path) -> dict[str, Any]:
    """The hooked session's document: what the snippet's hooks recorded."""
    service = SessionService.open(db_url, workspace_root=root)
    try:
        summary = service.find_summary(ledger_session_id(CLAUDE_SESSION))
        assert summary is not None, "the hooks recorded no session"
        events = [e.to_wire()["type"] for e in service.iter_events(summary.session_id)]
        return {"client": summary.client, "external": summary.external_session_id,
                "events": events}
    finally:
        service.close()


def assert_the_session_was_recorded(db_url: str, root: Path) -> None:
    found = recorded(db_url, root)
    assert (found["client"], found["external"]) == ("claude-code", CLAUDE_SESSION)
    for kind in ("PermissionDecided", "PlanApproved", "TodosWritten", "ContextCompacted",
                 "MessageRecorded", "ToolCallCompleted"):
        assert kind in found["events"], (kind, found["events"])


def command_env(project: Path) -> dict[str, str]:
    """Claude Code's environment for a command hook: ``$CLAUDE_PROJECT_DIR``, and a ``PATH``
    on which ``sessionledger`` is this environment's command, running this repository."""
    env = {k: v for k, v in os.environ.items() if k != "SESSIONLEDGER_DB"}
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
    env["CLAUDE_PROJECT_DIR"] = str(project)
    return env


@pytest.mark.slow  # a hook command per event: make verify (D182)
def test_the_command_hooks_run_as_written(tmp_path: Path) -> None:  # CC-1, CC-4, CC-6, CC-7
    project, home = tmp_path / "app", tmp_path / "home"
    project.mkdir()
    db_url = f"sqlite:///{tmp_path / 'ledger.db'}"
    settings = json.loads(substituted(the_only("command"), {DOC_DB: db_url}))
    env = command_env(project)

    def run(event: dict[str, Any], body: str) -> dict[str, Any]:
        command = hook_of(settings, event)["command"]
        done = subprocess.run(
            command, shell=True, input=body or json.dumps(event), env=env, cwd=project,
            capture_output=True, text=True, timeout=RUN_TIMEOUT_S, check=False,
        )
        assert done.returncode == 0, (command, done.stderr)
        if body:  # the broken event: a line on stderr says why
            assert done.stderr.startswith("sessionledger hook:"), done.stderr
        output: dict[str, Any] = json.loads(done.stdout)
        return output

    play_a_session(run, project, home)
    assert_the_session_was_recorded(db_url, project)


def test_the_http_hooks_run_as_written(server: ServerProcess, tmp_path: Path) -> None:  # CC-1
    project = server.workspace / "app"
    project.mkdir()
    settings = json.loads(substituted(the_only("http"), {DOC_BASE: server.base_url}))
    with httpx.Client(timeout=RUN_TIMEOUT_S) as client:

        def run(event: dict[str, Any], body: str) -> dict[str, Any]:
            hook = hook_of(settings, event)
            if hook["type"] == "command":  # SessionStart: forwarded to the server
                done = subprocess.run(
                    hook["command"].replace(DOC_DB, server.db_url), shell=True,
                    input=body or json.dumps(event), env=command_env(project), cwd=project,
                    capture_output=True, text=True, timeout=RUN_TIMEOUT_S, check=False)
                assert done.returncode == 0, done.stderr
                answer: dict[str, Any] = json.loads(done.stdout)
                return answer
            url = hook["url"]
            content = body if body else json.dumps(event)
            response = client.post(url, content=content,
                                   headers={"content-type": "application/json"})
            assert response.status_code == 200, response.text
            output: dict[str, Any] = response.json()
            return output

        play_a_session(run, project, tmp_path / "home")
    assert_the_session_was_recorded(server.db_url, server.workspace)


# -- the import lines ---------------------------------------------------------------------------

SUBAGENT = "a1b2c3d"


class Transcript:
    """A transcript written line by line the way Claude Code writes one."""

    def __init__(self, cwd: str, session: str = CLAUDE_SESSION, agent: str | None = None) -> None:
        self.cwd, self.session, self.agent = cwd, session, agent
        self.lines: list[str] = []

    def _line(self, kind: str, **extra: Any) -> None:
        number = len(self.lines) + 1
        value = {"parentUuid": None, "isSidechain": self.agent is not None,
                 "userType": "external", "cwd": self.cwd, "sessionId": self.session,
                 "version": "2.1.39", "gitBranch": "main", "type": kind,
                 "uuid": f"{self.session[:8]}-{self.agent or 'main'}-{number}",
                 "timestamp": f"2026-03-02T09:15:{number:02d}.250Z", **extra}
        if self.agent is not None:
            value["agentId"] = self.agent
        self.lines.append(json.dumps(value))

    def prompt(self, text: str) -> None:
        self._line("user", message={"role": "user", "content": text},
                   permissionMode="default")

    def says(self, text: str) -> None:
        self._line("assistant", message={
            "model": "claude-opus-4-6", "id": f"msg_{len(self.lines)}", "type": "message",
            "role": "assistant", "content": [{"type": "text", "text": text}]})

    def call(self, use_id: str, tool: str, tool_input: dict[str, Any], shown: str,
             response: Any = None) -> None:
        self._line("assistant", message={
            "model": "claude-opus-4-6", "id": f"msg_{use_id}", "type": "message",
            "role": "assistant",
            "content": [{"type": "tool_use", "id": use_id, "name": tool, "input": tool_input}]})
        self._line("user", message={"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": use_id, "content": shown}]},
            **({} if response is None else {"toolUseResult": response}))

    def compacted(self) -> None:
        self._line("system", subtype="compact_boundary", content="Conversation compacted",
                   compactMetadata={"trigger": "auto", "preTokens": 155000})

    def write(self, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(line + "\n" for line in self.lines), encoding="utf-8")
        return path


def a_conversation(cwd: str, session: str) -> Transcript:
    """A short session: prompts and answers, a Read, a Bash, two TodoWrites, a compaction."""
    t = Transcript(cwd, session)
    t.prompt("Rename the helper in app.py")
    t.says("I'll read app.py first.")
    t.call("toolu_01R", "Read", {"file_path": f"{cwd}/app.py"}, "def helper(): ...")
    todos = [{"content": "Rename helper", "status": "in_progress", "activeForm": "Renaming"},
             {"content": "Run the tests", "status": "pending", "activeForm": "Testing"}]
    t.call("toolu_01T1", "TodoWrite", {"todos": todos}, "Todos have been modified",
           {"oldTodos": [], "newTodos": todos})
    t.call("toolu_01B", "Bash", {"command": "pytest -q"}, "3 passed")
    t.compacted()
    done = [{**item, "status": "completed"} for item in todos]
    t.call("toolu_01T2", "TodoWrite", {"todos": done}, "Todos have been modified",
           {"oldTodos": todos, "newTodos": done})
    t.prompt("Thanks")
    t.says("Done: the helper is renamed and the tests pass.")
    return t


def write_fixtures(home: Path, elsewhere: Path) -> tuple[Path, Path]:
    """This machine's ``~/.claude/projects`` (a session with a malformed line and a subagent)
    and another machine's copy in ``elsewhere``; the session's transcript and the workspace."""
    app = home / "src" / "app"
    app.mkdir(parents=True)
    project = home / ".claude" / "projects" / "-home-me-src-app"
    main = a_conversation(str(app), CLAUDE_SESSION)
    main.lines.insert(3, '{"type": "user", "message": ')  # cut short: skipped, reported
    path = main.write(project / f"{CLAUDE_SESSION}.jsonl")
    agent = Transcript(str(app), agent=SUBAGENT)
    agent.prompt("Find the callers of helper")
    agent.call("toolu_01G", "Grep", {"pattern": "helper("}, "app.py:3")
    agent.write(project / CLAUDE_SESSION / "subagents" / f"agent-{SUBAGENT}.jsonl")
    theirs = "0d9e8f7a-6b5c-4d3e-8f2a-1b0c9d8e7f6a"
    a_conversation("/home/them/app", theirs).write(
        elsewhere / "-home-them-app" / f"{theirs}.jsonl")
    return path, app


def test_the_import_lines_run_as_written(tmp_path: Path) -> None:  # CC-9
    home, cwd = tmp_path / "home", tmp_path / "run"
    cwd.mkdir()
    transcript, app = write_fixtures(home, cwd / "their-projects")
    db_url = f"sqlite:///{tmp_path / 'ledger.db'}"
    env = {**command_env(cwd), "HOME": str(home)}

    def run(line: str) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            substituted(line, {DOC_DB: db_url}), shell=True, env=env, cwd=cwd,
            capture_output=True, text=True, timeout=RUN_TIMEOUT_S, check=False,
        )
        assert done.returncode == 0, (line, done.stderr)
        return done

    everything, elsewhere, one = import_lines()
    first = run(everything)
    lines = first.stdout.splitlines()
    # the page's sample output is what the command prints (the numbers of events aside: what
    # an event is may grow), the session first, then its subagent's
    (sample,) = snippets()["text"]
    shown = substituted(sample, {DOC_HOME: str(home)}).splitlines()
    assert len(lines) == len(shown) == 2, lines
    for line, documented in zip(lines, shown, strict=True):
        parts = re.split(r"\d+(?= events appended)", documented)
        pattern = r"[1-9]\d*".join(re.escape(part) for part in parts)
        assert re.fullmatch(pattern, line), (line, documented)
    assert f"{transcript}:4: not JSON" in first.stderr, first.stderr
    assert f"child of {ledger_session_id(CLAUDE_SESSION)}" in lines[1]
    again = run(everything)  # "Run it again": nothing new
    assert all(", 0 events appended," in line for line in again.stdout.splitlines()), again.stdout

    run(elsewhere)  # --into: another machine's cwd, recorded in ~/src/app
    service = SessionService.open(db_url, workspace_root=home)
    try:
        workspaces = {s.external_session_id: s.workspace for s in service.summaries()}
    finally:
        service.close()
    assert workspaces["0d9e8f7a-6b5c-4d3e-8f2a-1b0c9d8e7f6a"] == str(app)
    assert workspaces[CLAUDE_SESSION] == str(app)

    document = json.loads(run(one).stdout)  # one transcript, --json
    (entry,) = document["transcripts"]
    assert entry["path"] == str(transcript)
    assert (entry["sessionId"], entry["externalSessionId"], entry["appended"]) == (
        ledger_session_id(CLAUDE_SESSION), CLAUDE_SESSION, 0)
    assert [s["line"] for s in entry["skipped"]] == [4]
