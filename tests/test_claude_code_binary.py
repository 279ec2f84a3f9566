"""The real Claude Code binary against a scripted model, with the hooks of docs/claude-code.md
(issue 39).

Claude Code (the version ``tests/hosts/package-lock.json`` pins, installed by
``tests/host_support.py``) runs headless against ``tests/anthropic_model.py`` on 127.0.0.1 and
the HTTP hooks of the page on a real ``serve``. Slow-marked: ``make verify`` runs them (and
``CI=true`` fails them where the host cannot be installed).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from anthropic_model import ScriptedModel, ToolUse
from host_support import (
    ClaudeCode,
    claude_headless,
    host_environment,
    install,
    settings_file,
    skip_or_fail,
    unavailable,
)
from server_support import ServerProcess, running_server

from sessionledger.permission.descriptors import HOST_TOOLS, SERVICE_TOOLS

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]

RUN_TIMEOUT_S = 180


@pytest.fixture(scope="module")
def claude() -> ClaudeCode:
    reason = unavailable()
    if reason is not None:
        skip_or_fail(reason)
    return install()


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with running_server(tmp_path_factory.mktemp("claude-binary")) as server:
        yield server


def created(subject: str) -> ToolUse:
    """The model creating a task in Claude Code's task list."""
    return ToolUse("TaskCreate", {"subject": subject, "description": subject,
                                  "activeForm": f"Working on: {subject}"})


def project_in(server: ServerProcess) -> Path:
    """A new project inside the server's workspace root (a ``cwd`` outside it is not
    recorded)."""
    project = server.workspace / f"project-{uuid.uuid4().hex[:8]}"
    project.mkdir()
    return project


def run_claude(claude: ClaudeCode, server: ServerProcess, project: Path,
               script: list[list[Any]], *args: str, prompt: str = "Keep a task list.",
               settings: str = "http") -> tuple[ScriptedModel, list[Any]]:
    """One headless session in ``project`` with the page's hooks (``settings``: ``http`` or
    ``command``) on ``server``: the model server (its requests) and the stream-json lines
    Claude Code printed. ``sessionledger`` (every command hook) is this environment's."""
    (project / ".claude").mkdir(parents=True, exist_ok=True)
    (project / ".claude" / "settings.json").write_text(
        settings_file(settings, server.base_url, server.db_url), encoding="utf-8")
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    with ScriptedModel(script) as model:
        env = host_environment(project / ".home", model.url, path=path,
                               extra={"PYTHONPATH": str(ROOT)})
        done = subprocess.run(claude_headless(claude, prompt, *args), cwd=project,
                              env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT_S,
                              check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return model, [json.loads(line) for line in done.stdout.splitlines() if line.strip()]


def claude_session_of(lines: list[Any]) -> str:
    session: str = next(line["session_id"] for line in lines if line.get("type") == "result")
    return session


def ledger_events(server: ServerProcess, claude_session: str) -> tuple[str, list[Any]]:
    with httpx.Client(base_url=server.base_url, timeout=30) as http:
        (ledger_session,) = [s["sessionId"] for s in http.get("/v1/sessions").json()["sessions"]
                             if s.get("externalSessionId") == claude_session]
        events = http.get(f"/v1/sessions/{ledger_session}/events",
                          params={"limit": 1000}).json()["events"]
    return ledger_session, events


def test_every_tool_the_pinned_version_offers_is_classified(
        claude: ClaudeCode, served: ServerProcess) -> None:
    # The first request's tool list is what the model may call: a tool the ledger has no
    # descriptor for would be treated as an unknown write (asked, refused headless).
    model, _lines = run_claude(claude, served, project_in(served), [])
    offered = model.tools_offered()
    assert "Read" in offered and "Bash" in offered, offered
    unknown = sorted(set(offered) - set(HOST_TOOLS) - set(SERVICE_TOOLS))
    assert unknown == [], (
        f"Claude Code {claude.version} offers tools the ledger does not classify: {unknown} "
        "(give each a descriptor in sessionledger/permission/descriptors.py)")


def test_the_task_tools_run_in_plan(
        claude: ClaudeCode, served: ServerProcess) -> None:
    # Claude Code 2.1 keeps its todo list with TaskCreate/TaskUpdate; in Plan the ledger
    # allows them, and Claude Code runs them.
    script: list[list[Any]] = [
        [created("Read the config")],
        [ToolUse("TaskList", {})],
        [ToolUse("TaskUpdate", {"taskId": "1", "status": "in_progress"})],
    ]
    model, lines = run_claude(claude, served, project_in(served), script,
                              "--permission-mode", "plan")
    results = model.tool_results()
    assert len(results) == 3, results
    refused = [r for r in results.values() if r.get("is_error")]
    assert refused == [], refused
    claude_session = next(line["session_id"] for line in lines if line.get("type") == "result")
    with httpx.Client(base_url=served.base_url, timeout=30) as http:
        (ledger_session,) = [s["sessionId"] for s in http.get("/v1/sessions").json()["sessions"]
                             if s.get("externalSessionId") == claude_session]
        events = http.get(f"/v1/sessions/{ledger_session}/events",
                          params={"limit": 1000}).json()["events"]
    requested = {e["data"]["callId"]: e["data"]["tool"] for e in events
                 if e["type"] == "ToolCallRequested"}
    decided = [(requested[e["data"]["callId"]], e["data"]["decision"]["behavior"])
               for e in events if e["type"] == "PermissionDecided"]
    assert decided == [("TaskCreate", "allow"), ("TaskList", "allow"), ("TaskUpdate", "allow")]


def test_plan_set_from_the_ledger_holds_under_bypass_permissions_over_a_resume(
        claude: ClaudeCode, served: ServerProcess) -> None:  # issue 39, acceptance 2
    project = project_in(served)
    _model, lines = run_claude(claude, served, project, [], prompt="Start.")
    claude_session = claude_session_of(lines)
    ledger_session, _events = ledger_events(served, claude_session)
    with httpx.Client(base_url=served.base_url, timeout=30) as http:
        assert http.post(f"/v1/sessions/{ledger_session}/mode",
                         json={"mode": "plan"}).status_code == 200
    script: list[list[Any]] = [
        [ToolUse("Write", {"file_path": str(project / "a.txt"), "content": "x"})],
        [ToolUse("Bash", {"command": f"echo x > {project / 'b.txt'}"})],
    ]
    model, _lines = run_claude(claude, served, project, script, "--resume", claude_session,
                               "--permission-mode", "bypassPermissions", prompt="Write them.")
    results = list(model.tool_results().values())
    assert len(results) == 2 and all(r.get("is_error") for r in results), results
    assert all("Plan mode is active" in str(r["content"]) for r in results), results
    assert not (project / "a.txt").exists() and not (project / "b.txt").exists()
    _ledger, events = ledger_events(served, claude_session)
    with httpx.Client(base_url=served.base_url, timeout=30) as http:
        state = http.get(f"/v1/sessions/{ledger_session}").json()["executionState"]
    assert (state["mode"], state["planEnabled"]) == ("yolo", True)
    refused = [e["data"]["status"] for e in events if e["type"] == "ToolCallCompleted"]
    assert refused == ["denied", "denied"]  # closed as refused, never run


def test_a_deleted_unfinished_task_is_pointed_out_on_the_next_prompt(
        claude: ClaudeCode, served: ServerProcess) -> None:  # issue 39, acceptance 3
    project = project_in(served)
    script: list[list[Any]] = [
        [created("Read the config")],
        [created("Tidy the imports")],
        [ToolUse("TaskUpdate", {"taskId": "1", "status": "completed"})],
        [ToolUse("TaskUpdate", {"taskId": "2", "status": "deleted"})],
    ]
    _model, lines = run_claude(claude, served, project, script)
    claude_session = claude_session_of(lines)
    ledger_session, events = ledger_events(served, claude_session)
    lists = [e["data"]["todos"] for e in events if e["type"] == "TodosWritten"]
    assert [(t["id"], t["content"], t["status"]) for t in lists[-1]] == [
        ("1", "Read the config", "completed")]
    with httpx.Client(base_url=served.base_url, timeout=30) as http:
        todos = http.get(f"/v1/sessions/{ledger_session}").json()["todos"]
    assert [(t["content"], t["status"]) for t in todos] == [("Read the config", "completed")]
    model, _lines = run_claude(claude, served, project, [], "--resume", claude_session,
                               prompt="Go on.")
    first = json.dumps(model.main_requests()[0].body)
    assert "dropped unfinished todos" in first and "Tidy the imports" in first


def test_the_todo_list_comes_back_on_resume_through_the_sessionstart_command_hook(
        claude: ClaudeCode, served: ServerProcess) -> None:  # issue 39, acceptance 4
    # Claude Code runs no HTTP hook for SessionStart: the settings `setup claude-code` writes
    # make it a command hook forwarding to the server, whose answer is the list.
    project = project_in(served)
    script: list[list[Any]] = [
        [created("Port the parser")],
    ]
    _model, lines = run_claude(claude, served, project, script)
    claude_session = claude_session_of(lines)
    model, _lines = run_claude(claude, served, project, [], "--resume", claude_session,
                               prompt="Go on.")
    first = json.dumps(model.main_requests()[0].body)
    assert "The todo list of this session" in first and "Port the parser" in first


def log_shape(events: list[Any]) -> list[tuple[str, ...]]:
    """A session's log without its ids and times: each event's type and what it decided."""
    shape: list[tuple[str, ...]] = []
    for event in events:
        data = event["data"]
        if event["type"] == "ToolCallRequested":
            shape.append(("requested", data["tool"]))
        elif event["type"] == "PermissionDecided":
            shape.append(("decided", data["tool"], data["decision"]["behavior"]))
        elif event["type"] == "ToolCallCompleted":
            shape.append(("completed", data["tool"], data["status"]))
        elif event["type"] == "TodosWritten":
            shape.append(("todos", *(t["content"] for t in data["todos"])))
        else:
            shape.append((event["type"],))
    return shape


def test_http_hooks_and_command_hooks_give_the_same_log(
        claude: ClaudeCode, served: ServerProcess) -> None:  # issue 39, acceptance 1
    def session(kind: str) -> list[tuple[str, ...]]:
        project = project_in(served)
        script: list[list[Any]] = [
            [created("Read the notes")],
            [ToolUse("Read", {"file_path": str(project / "notes.txt")})],
            [ToolUse("Write", {"file_path": str(project / "a.txt"), "content": "x"})],
            [ToolUse("Bash", {"command": "ls"})],
        ]
        (project / "notes.txt").write_text("notes\n", encoding="utf-8")
        _model, lines = run_claude(claude, served, project, script, "--permission-mode",
                                   "plan", settings=kind)
        assert not (project / "a.txt").exists()
        return log_shape(ledger_events(served, claude_session_of(lines))[1])

    over_http = session("http")
    assert over_http == session("command")
    assert ("decided", "Write", "deny") in over_http
    assert ("completed", "Write", "denied") in over_http
    assert ("completed", "Read", "completed") in over_http
