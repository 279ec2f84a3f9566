"""The real Claude Code binary against a scripted model, with the hooks of docs/claude-code.md
(issue 39).

Claude Code (the version ``tests/hosts/package-lock.json`` pins, installed by
``tests/host_support.py``) runs against ``tests/anthropic_model.py`` on 127.0.0.1 with the
hooks of the page on a real ``serve``: headless (``claude -p``), and as the interactive TUI in
a tmux pane whose dialogs the test answers with keys. Most are slow-marked for ``make verify``;
one headless and two interactive runs are in ``make test`` too. ``CI=true`` fails them where
the host cannot be installed.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import httpx
import pytest
from anthropic_model import ScriptedModel, Text, ToolUse
from claude_binary_support import (
    DIALOG_PLAN,
    DIALOG_QUESTION,
    PLAN_TEXT,
    QUESTION,
    answered,
    claude_session_in,
    claude_session_of,
    created,
    execution_state,
    hooked,
    installed_claude,
    interactive,
    ledger_events,
    ledger_session_of,
    plan_written,
    project_in,
    respond,
    this_path,
    waiting_interaction,
)
from host_support import (
    CLAUDE_MODEL,
    ClaudeCode,
    claude_headless,
    host_environment,
    settings_file,
)
from server_support import ServerProcess, running_server

from eventlog import open_store
from sessionledger.environment import WRITER_ENV
from sessionledger.permission.descriptors import HOST_TOOLS, SERVICE_TOOLS

ROOT = Path(__file__).resolve().parents[1]

RUN_TIMEOUT_S = 180
DIALOG_SETTLE_S = 1.5
"""Claude Code 2.1.337 may drop a key sent the moment a dialog appears (1 run in 6 lost the
first key of a dialog pressed 0.45 s after it came): each key a dialog answers waits this long
after the dialog is seen."""


@pytest.fixture(scope="module")
def claude() -> ClaudeCode:
    return installed_claude()


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with running_server(tmp_path_factory.mktemp("claude-binary")) as server:
        yield server


def run_claude(claude: ClaudeCode, server: ServerProcess, project: Path,
               script: list[list[Any]], *args: str, prompt: str = "Keep a task list.",
               settings: str = "http", claude_model: str | None = CLAUDE_MODEL,
               ) -> tuple[ScriptedModel, list[Any]]:
    """One headless session in ``project`` with the page's hooks (``settings``: ``http`` or
    ``command``) on ``server``: the model server (its requests) and the stream-json lines
    Claude Code printed. ``sessionledger`` (every command hook) is this environment's."""
    hooked(project, server, settings)
    with ScriptedModel(script) as model:
        env = host_environment(project / ".home", model.url, path=this_path(),
                               extra={"PYTHONPATH": str(ROOT)})
        done = subprocess.run(claude_headless(claude, prompt, *args, model=claude_model),
                              cwd=project,
                              env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT_S,
                              check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return model, [json.loads(line) for line in done.stdout.splitlines() if line.strip()]


@pytest.mark.slow
@pytest.mark.parametrize("model_name", [CLAUDE_MODEL, None], ids=[CLAUDE_MODEL, "default"])
def test_every_tool_the_pinned_version_offers_is_classified(
        claude: ClaudeCode, served: ServerProcess, model_name: str | None) -> None:
    # The first request's tool list is what the model may call: a tool the ledger has no
    # descriptor for would be treated as an unknown write (asked, refused headless).
    # A tool it defers (named in a message, loaded by ToolSearch) is callable as well. Which
    # tools there are depends on the model (the task list is not offered to every one).
    model, _lines = run_claude(claude, served, project_in(served), [],
                               claude_model=model_name)
    offered = model.tools_offered() + model.tools_deferred()
    assert {"Read", "Bash", "WebFetch"} <= set(offered), offered  # deferred or not, all read
    unknown = sorted(set(offered) - set(HOST_TOOLS) - set(SERVICE_TOOLS))
    assert unknown == [], (
        f"Claude Code {claude.version} offers tools the ledger does not classify: {unknown} "
        "(give each a descriptor in sessionledger/permission/descriptors.py)")


@pytest.mark.slow
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


@pytest.mark.slow
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
    state = execution_state(served, ledger_session)
    assert (state["mode"], state["planEnabled"]) == ("yolo", True)
    refused = [e["data"]["status"] for e in events if e["type"] == "ToolCallCompleted"]
    assert refused == ["denied", "denied"]  # closed as refused, never run


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
def test_command_hooks_with_no_server_start_their_writer_and_give_the_same_log(
        claude: ClaudeCode, served: ServerProcess, tmp_path: Path) -> None:  # issue 38
    # The page's command hooks on a database no serve runs on: the first event is recorded by
    # the hook, which starts the hook's writer; the rest are forwarded to it. The log is the
    # one the HTTP hooks give on a serve.
    def script(project: Path) -> list[list[Any]]:
        (project / "notes.txt").write_text("notes\n", encoding="utf-8")
        return [[created("Read the notes")],
                [ToolUse("Read", {"file_path": str(project / "notes.txt")})],
                [ToolUse("Write", {"file_path": str(project / "a.txt"), "content": "x"})],
                [ToolUse("Bash", {"command": "ls"})]]

    over_http = project_in(served)
    _model, lines = run_claude(claude, served, over_http, script(over_http),
                               "--permission-mode", "plan")
    expected = log_shape(ledger_events(served, claude_session_of(lines))[1])

    project = tmp_path / "project"
    project.mkdir()
    db = tmp_path / "ledger.db"
    (project / ".claude").mkdir()
    (project / ".claude" / "settings.json").write_text(
        settings_file("command", "http://127.0.0.1:9", f"sqlite:///{db}"), encoding="utf-8")
    try:
        with ScriptedModel(script(project)) as model:
            env = host_environment(project / ".home", model.url, path=this_path(),
                                   extra={"PYTHONPATH": str(ROOT), WRITER_ENV: "60"})
            done = subprocess.run(
                claude_headless(claude, "Keep a task list.", "--permission-mode", "plan"),
                cwd=project, env=env, capture_output=True, text=True,
                timeout=RUN_TIMEOUT_S, check=False)
        assert done.returncode == 0, done.stderr[-2000:]
        assert not (project / "a.txt").exists()
        writer = json.loads(Path(f"{db}.serve.json").read_text())
        assert writer["writer"] is True and writer["root"] == str(project.resolve())
        session = claude_session_of([json.loads(line) for line in done.stdout.splitlines()
                                     if line.strip()])
        with httpx.Client(base_url=writer["url"], timeout=30,
                          headers={"Authorization": f"Bearer {writer['secret']}"}) as http:
            (ledger_session,) = [s["sessionId"] for s in http.get("/v1/sessions").json()[
                "sessions"] if s.get("externalSessionId") == session]
            events = http.get(f"/v1/sessions/{ledger_session}/events",
                              params={"limit": 1000}).json()["events"]
        assert log_shape(events) == expected
    finally:
        try:
            os.kill(json.loads(Path(f"{db}.serve.json").read_text())["pid"], signal.SIGTERM)
        except (OSError, ValueError, KeyError):
            pass
    deadline = time.monotonic() + 60
    while Path(f"{db}.serve.json").exists() and time.monotonic() < deadline:
        time.sleep(0.1)  # it removes its discovery file as it stops
    assert not Path(f"{db}.serve.json").exists()


# -- the interactive TUI in tmux ------------------------------------------------------------------


def handed_back(body: Any) -> str:
    """The text of a model request that holds the hooks' hand-back (its todo list's heading);
    an AssertionError when none does."""
    def texts(value: Any) -> Iterator[str]:
        if isinstance(value, str):
            yield value
        elif isinstance(value, list):
            for item in value:
                yield from texts(item)
        elif isinstance(value, dict):
            for item in value.values():
                yield from texts(item)

    found = [text for text in texts(body) if "The todo list of this session" in text]
    assert found, "no hand-back in the request"
    return found[0]


def test_a_plan_approved_in_claude_codes_dialog_comes_back_after_compact_and_on_resume(
        claude: ClaudeCode, served: ServerProcess) -> None:  # issue 39, acceptance 6 and 4
    project = project_in(served)
    script: list[list[Any]] = [
        [ToolUse("EnterPlanMode", {})],
        [created("Port the parser")],
        [ToolUse("Write", plan_written)],
        [ToolUse("ExitPlanMode", {})],
    ]
    with interactive(claude, served, project, script) as (terminal, model):
        terminal.submit("Plan the parser port.")
        terminal.wait_for(DIALOG_PLAN, history=0)
        time.sleep(DIALOG_SETTLE_S)
        terminal.press("2")  # "Yes, manually approve edits"
        terminal.wait_for("Approved Claude's plan")
        terminal.wait_for("Done.")
        terminal.submit("/compact")
        terminal.wait_for("Compacted")
        terminal.submit("Go on.")
        terminal.wait_for(lambda _screen: answered(model, "Go on.") is not None)
    claude_session = claude_session_in(project)
    ledger_session, events = ledger_events(served, claude_session)
    [approved] = [e["data"] for e in events if e["type"] == "PlanApproved"]
    assert approved["plan"] == PLAN_TEXT and approved["path"].endswith(".md")
    switched = [(e["data"]["planEnabled"], e["data"]["via"]) for e in events
                if e["type"] == "SessionModeChanged"]
    assert switched == [(True, "enter_plan_tool"), (False, "plan_approval")], switched
    state = execution_state(served, ledger_session)
    assert (state["mode"], state["planEnabled"]) == ("build", False)
    # The hand-back is one text: the approved plan, then the todo list (Claude Code also
    # re-references its plan file itself, in its own words).
    after = handed_back(answered(model, "Go on."))
    assert "Read the grammar" in after and "Port the parser" in after, after
    resumed, _lines = run_claude(claude, served, project, [], "--resume", claude_session,
                                 prompt="Carry on.")
    first = handed_back(resumed.main_requests()[0].body)
    assert "Read the grammar" in first and "Port the parser" in first, first


ASK_PLAN_ASK: list[list[Any]] = [
    [ToolUse("AskUserQuestion", QUESTION)],
    [ToolUse("Write", plan_written)],
    [ToolUse("ExitPlanMode", {})],
    [Text("I will add one.")],  # feedback on the plan goes back to the model in the same turn
    [ToolUse("AskUserQuestion", QUESTION)],  # the next prompt's question
]
"""A question, a plan, the model's answer to feedback on it, and a question again."""


@pytest.mark.slow
def test_questions_and_plans_answered_in_claude_codes_dialogs_are_recorded(
        claude: ClaudeCode, served: ServerProcess) -> None:  # issue 39, acceptance 6
    project = project_in(served)
    script = ASK_PLAN_ASK
    with interactive(claude, served, project, script, "--permission-mode", "plan") as (
            terminal, _model):
        terminal.submit("Plan the parser port.")
        terminal.wait_for(DIALOG_QUESTION, history=0)
        time.sleep(DIALOG_SETTLE_S)
        terminal.press("2")  # LALR
        terminal.wait_for(DIALOG_PLAN, history=0)
        time.sleep(DIALOG_SETTLE_S)
        terminal.press("3")  # "Tell Claude what to change"
        terminal.type("Add a benchmark step")
        terminal.wait_for("Add a benchmark step")
        time.sleep(DIALOG_SETTLE_S)
        terminal.press("Enter")
        terminal.wait_for("Rejected Claude's plan")
        terminal.wait_for("I will add one.")
        terminal.submit("Ask me again.")
        terminal.wait_for(DIALOG_QUESTION, history=0)
        time.sleep(DIALOG_SETTLE_S)
        terminal.press("Escape")  # dismissed: Claude Code ends the turn, no hook hears of it
        terminal.wait_for("Declined to answer Claude's questions")
        terminal.submit("Never mind.")
        terminal.wait_for("Done.")
        claude_session = claude_session_in(project)
        ledger_session, events = ledger_events(served, claude_session)
    calls = [(e["data"]["callId"], e["data"]["tool"]) for e in events
             if e["type"] == "ToolCallRequested"]
    assert [tool for _call, tool in calls] == [
        "AskUserQuestion", "Write", "ExitPlanMode", "AskUserQuestion"]
    resolved = [(e["data"]["decision"], e["data"].get("input") or {}, e["data"].get("feedback"))
                for e in events if e["type"] == "InteractionResolved"]
    assert [decision for decision, _input, _words in resolved] == ["modify", "feedback", "deny"]
    assert resolved[0][1]["answers"] == {"Which parser?": "LALR"}
    assert resolved[1][2] == "Add a benchmark step"
    [feedback] = [e["data"] for e in events if e["type"] == "PlanFeedbackGiven"]
    assert (feedback["plan"], feedback["feedback"]) == (PLAN_TEXT, "Add a benchmark step")
    completed = {e["data"]["callId"] for e in events if e["type"] == "ToolCallCompleted"}
    assert completed == {call for call, _tool in calls}  # every call has its outcome
    state = execution_state(served, ledger_session)
    assert state["planEnabled"] is True


def sessionledger_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "sessionledger", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=RUN_TIMEOUT_S, check=False,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})


def audited(db_url: str, session_id: str, cwd: Path) -> list[Any]:
    done = sessionledger_cli("audit", session_id, "--db", db_url, "--json", cwd=cwd)
    assert done.returncode == 0, done.stdout + done.stderr
    (document,) = json.loads(done.stdout)["sessions"]
    return sorted((f["kind"], f.get("callId") or "") for f in document["findings"])


def outcomes_of(events: list[Any]) -> list[tuple[str, ...]]:
    """What an import and the hooks both know of a session: its calls, their outcomes, its
    todo lists and plan outcomes (the hooks alone see permission decisions; the transcript
    alone the assistant's text)."""
    return [step for step in log_shape(events)
            if step[0] in ("requested", "completed", "todos")
            or step[0].startswith("Plan")]


def event_time(event: Any) -> str:
    return str(event["data"].get("occurredAt") or event["recordedAt"])


@pytest.mark.slow
def test_the_binarys_transcript_imports_as_its_hooks_recorded_it(
        claude: ClaudeCode, served: ServerProcess,
        tmp_path: Path) -> None:  # issue 39, acceptance 5
    project = project_in(served)
    (project / "notes.txt").write_text("notes\n", encoding="utf-8")
    script: list[list[Any]] = [
        [created("Read the notes")],
        [created("Tidy the imports")],
        [ToolUse("Read", {"file_path": str(project / "notes.txt")})],
        [Text("Writing it down."), ToolUse("Write", {"file_path": str(project / "a.txt"),
                                                    "content": "x"})],
        [ToolUse("Bash", {"command": "ls"})],
        [ToolUse("TaskUpdate", {"taskId": "1", "status": "completed"})],
        [ToolUse("TaskUpdate", {"taskId": "2", "status": "deleted"})],
    ]
    _model, lines = run_claude(claude, served, project, script, "--permission-mode", "plan")
    claude_session = claude_session_of(lines)
    ledger_session, hooked = ledger_events(served, claude_session)
    (transcript,) = (project / ".home" / ".claude" / "projects").rglob(f"{claude_session}.jsonl")
    findings = audited(served.db_url, ledger_session, tmp_path)
    assert findings == [("dropped_unfinished_todos", "")]  # the Write was denied: it never ran

    # Into the hooked session: nothing twice, and nothing dated before its last event.
    again = sessionledger_cli("import", "claude-code", str(transcript), "--db", served.db_url,
                              "--workspace", str(served.workspace), "--json", cwd=tmp_path)
    assert again.returncode == 0, again.stdout + again.stderr
    (report,) = json.loads(again.stdout)["transcripts"]
    late = [line for line in report["skipped"] if "out of order" in line["reason"]]
    assert late, report  # "Writing it down." came before the calls the hooks recorded after it
    _ledger, after = ledger_events(served, claude_session)
    added = after[len(hooked):]
    assert report["appended"] == len(added)
    assert all(e["type"] == "MessageRecorded" and e["data"]["role"] == "assistant"
               for e in added), added
    times = [event_time(e) for e in after]
    assert times == sorted(times), "the log's times are out of order"
    assert audited(served.db_url, ledger_session, tmp_path) == findings

    # Into a fresh ledger: the same calls, outcomes, todo lists and findings.
    fresh = f"sqlite:///{tmp_path / 'fresh.db'}"
    imported = sessionledger_cli("import", "claude-code", str(transcript), "--db", fresh,
                                 "--workspace", str(served.workspace), "--json", cwd=tmp_path)
    assert imported.returncode == 0, imported.stdout + imported.stderr
    (report,) = json.loads(imported.stdout)["transcripts"]
    with closing(open_store(fresh)) as store:
        fresh_events = [e.to_wire() for e in store.read_session(report["sessionId"])]
    assert outcomes_of(fresh_events) == outcomes_of(hooked)
    assert audited(fresh, report["sessionId"], tmp_path) == findings


def test_a_question_and_a_plan_answered_here_reach_claude_code_without_its_dialogs(
        claude: ClaudeCode, served: ServerProcess) -> None:  # issue 39, acceptance 7
    project = project_in(served)
    script: list[list[Any]] = [
        [ToolUse("AskUserQuestion", QUESTION)],
        [ToolUse("Write", plan_written)],
        [ToolUse("ExitPlanMode", {})],
    ]
    seen: list[str] = []
    with interactive(claude, served, project, script, "--permission-mode", "plan") as (
            terminal, model):
        session_id = ledger_session_of(served, project)
        with httpx.Client(base_url=served.base_url, timeout=30) as http:
            chosen = http.put(f"/v1/sessions/{session_id}/answer-in", json={"answerIn": "here"})
        assert chosen.status_code == 200 and chosen.json()["answerIn"] == "here", chosen.text
        terminal.submit("Plan the parser port.")
        question = waiting_interaction(served, session_id, "askUserQuestion")
        seen.append(terminal.screen())
        respond(served, session_id, question, decision="modify",
                input={**QUESTION, "answers": {"Which parser?": "LALR"}})
        plan = waiting_interaction(served, session_id, "planApproval")
        seen.append(terminal.screen())
        assert plan["payload"]["plan"] == PLAN_TEXT
        respond(served, session_id, plan, decision="approve", input={"mode": "edit"})
        terminal.wait_for("Done.")
        seen.append(terminal.screen(history=500))
    # The question never showed Claude Code's dialog (the hook answered it first). The plan's
    # dialog shows while its PermissionRequest hook runs: either place may answer.
    assert not any(DIALOG_QUESTION in screen for screen in seen), seen
    assert "Approved Claude's plan" in seen[-1], seen[-1]
    answered_request = answered(model, '\\"Which parser?\\"=\\"LALR\\"')
    assert answered_request is not None, "the model never got the answer"
    events = ledger_events(served, claude_session_in(project))[1]
    kinds = [e["type"] for e in events]
    assert kinds.count("InteractionRequested") == 2 and kinds.count("InteractionResolved") == 2
    assert kinds.count("PlanSubmitted") == 1 and kinds.count("PlanApproved") == 1, kinds
    completed = {e["data"]["tool"]: e["data"]["success"] for e in events
                 if e["type"] == "ToolCallCompleted"}
    assert completed == {"AskUserQuestion": True, "Write": True, "ExitPlanMode": True}
    state = execution_state(served, session_id)
    assert (state["mode"], state["planEnabled"]) == ("edit", False)


@pytest.mark.slow
def test_feedback_and_a_refusal_given_here_reach_the_model_and_answer_in_claude_code_asks_there(
        claude: ClaudeCode, served: ServerProcess) -> None:  # issue 39, acceptance 7
    project = project_in(served)
    script = ASK_PLAN_ASK
    with interactive(claude, served, project, script, "--permission-mode", "plan") as (
            terminal, model):
        session_id = ledger_session_of(served, project)
        with httpx.Client(base_url=served.base_url, timeout=30) as http:
            assert http.put(f"/v1/sessions/{session_id}/answer-in",
                            json={"answerIn": "here"}).status_code == 200
        terminal.submit("Plan the parser port.")
        respond(served, session_id, waiting_interaction(served, session_id, "askUserQuestion"),
                decision="deny", feedback="Pick one yourself")
        respond(served, session_id, waiting_interaction(served, session_id, "planApproval"),
                decision="feedback", feedback="Add a benchmark step")
        terminal.wait_for("I will add one.")
        with httpx.Client(base_url=served.base_url, timeout=30) as http:
            document = http.put(f"/v1/sessions/{session_id}/answer-in",
                                json={"answerIn": "host"}).json()
        assert document["answerIn"] == "host"
        terminal.submit("Ask me again.")
        terminal.wait_for(DIALOG_QUESTION, history=0)  # in Claude Code: its dialog, at once
        time.sleep(DIALOG_SETTLE_S)
        terminal.press("1")
        terminal.wait_for("Answered Claude's questions")
        terminal.wait_for("Done.")
    results = list(model.tool_results().values())
    # Claude Code 2.1.337 appends a <system-reminder> (tokens left) to each tool result
    shown = [str(r["content"]).split("\n\n<system-reminder>")[0] for r in results]
    assert any("Pick one yourself" in text for text in shown), shown  # the refusal's words
    assert "Add a benchmark step" in shown, shown  # the feedback, as the plan's result
    events = ledger_events(served, claude_session_in(project))[1]
    [feedback] = [e["data"] for e in events if e["type"] == "PlanFeedbackGiven"]
    assert (feedback["feedback"], feedback["plan"]) == ("Add a benchmark step", PLAN_TEXT)
    resolved = [(e["data"]["decision"], e["actor"]) for e in events
                if e["type"] == "InteractionResolved"]
    assert resolved == [("deny", "user"), ("feedback", "user"), ("modify", "host")], resolved
    state = execution_state(served, session_id)
    assert state["planEnabled"] is True
    assert [e["data"]["answerIn"] for e in events if e["type"] == "AnswerInChanged"] == [
        "here", "host"]
