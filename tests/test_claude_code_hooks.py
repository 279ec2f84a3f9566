"""Claude Code's hooks against a real ``serve`` and through the command (SPEC CC-1 … CC-8).

Every test that names a requirement runs both ways Claude Code calls a hook, where the
behaviour is the same: an HTTP hook (``POST /v1/hooks/claude-code`` on the module's ``serve``)
and a command hook (``sessionledger hook claude-code --db`` on the server's own SQLite file).
The events carry the fields Claude Code's hooks reference documents (``session_id``,
``transcript_path``, ``cwd``, ``permission_mode``, ``hook_event_name``, then the event's own).
Each test works in its own project directory inside the server's root under its own Claude
session ids.

Then the real hook log (a logger's copy of one real session's hook inputs, read in place) is
answered event by event, and issue 22's acceptance 4: a real transcript turned into the hook
events Claude Code would have sent while writing it, hooked into the server, agrees with the
same transcript imported into another database — and importing it into the hooked database
appends only what hooks never see (the assistant's texts).
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import uuid
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from claude_data import claude_data, transcripts_dir
from claude_hooks_support import (
    REPO,
    WAY_PARAMS,
    Answer,
    Hooks,
    Way,
    hook_event,
    opened,
    post_hook,
    transcript_hooks,
    wire_events,
)
from server_support import ServerProcess, sessionledger_command

from sessionledger import SessionService
from sessionledger.claude_code.hooks import answer_hook
from sessionledger.claude_code.observations import AssistantText, ledger_session_id
from sessionledger.claude_code.recorder import Recorder, Tally
from sessionledger.claude_code.transcripts import read_transcript
from sessionledger.tools.todo import MAX_TODO_CHARS, MAX_TODOS

REJECTED = ("The user doesn't want to proceed with this tool use. The tool use was rejected "
            "(eg. if it was a file edit, the new_string was NOT written to the file). STOP what "
            "you are doing and wait for the user to tell you how to proceed.")
FEEDBACK = ("The user doesn't want to proceed with this tool use. The tool use was rejected "
            "(eg. if it was a file edit, the new_string was NOT written to the file). To tell "
            "you how to proceed, the user said:\nDo X first")
PLAN = "# Plan\n\n1. Read the parser.\n2. Add the missing case.\n3. Test it.\n"
APPROVED = ("User has approved your plan. You can now start coding. Start with updating your "
            "todo list if applicable")


@pytest.fixture(scope="module")
def hooks(server: ServerProcess) -> Iterator[Hooks]:
    with Hooks(server) as driven:
        yield driven


@pytest.fixture
def project(hooks: Hooks, request: pytest.FixtureRequest) -> Path:
    """This test's project directory inside the server's root (the sessions' ``cwd``)."""
    name = re.sub(r"[^A-Za-z0-9_-]+", "-", request.node.name).strip("-")
    directory = hooks.root / name
    directory.mkdir()
    return directory


def new_session() -> str:
    return str(uuid.uuid4())


def of_type(events: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [e["data"] for e in events if e["type"] == kind]


def no_opinion(way: Way, answer: Answer, what: str = "") -> None:
    """``{}`` with 200, or with exit 0 and one line on stderr saying why (CC-1)."""
    assert answer.output == {}, (what, answer)
    if way == "http":
        assert answer.code == 200, (what, answer)
    else:
        assert answer.code == 0, (what, answer)
        [line] = answer.stderr.splitlines()
        assert line.startswith("sessionledger hook: "), (what, line)


def decision(output: dict[str, Any]) -> tuple[str, str]:
    """A PreToolUse answer's decision and reason."""
    specific = output["hookSpecificOutput"]
    assert specific["hookEventName"] == "PreToolUse"
    assert set(specific) == {"hookEventName", "permissionDecision", "permissionDecisionReason"}
    return specific["permissionDecision"], specific["permissionDecisionReason"]


def pre_tool(session: str, cwd: Path, tool: str, tool_input: dict[str, Any], *,
             mode: str | None = "default", use: str | None = None) -> dict[str, Any]:
    return hook_event("PreToolUse", session, cwd, mode=mode, tool_name=tool,
                      tool_input=tool_input, tool_use_id=use or f"toolu_{uuid.uuid4().hex}")


def post_tool(session: str, cwd: Path, tool: str, tool_input: dict[str, Any], response: Any,
              *, mode: str | None = "default", use: str | None = None) -> dict[str, Any]:
    return hook_event("PostToolUse", session, cwd, mode=mode, tool_name=tool,
                      tool_input=tool_input, tool_response=response,
                      tool_use_id=use or f"toolu_{uuid.uuid4().hex}")


def failed_tool(session: str, cwd: Path, tool: str, tool_input: dict[str, Any], error: str,
                *, mode: str | None = "default", use: str | None = None) -> dict[str, Any]:
    return hook_event("PostToolUseFailure", session, cwd, mode=mode, tool_name=tool,
                      tool_input=tool_input, error=error, is_interrupt=False,
                      tool_use_id=use or f"toolu_{uuid.uuid4().hex}")


def prompt(session: str, cwd: Path, text: str, *, mode: str | None = "default") -> dict[str, Any]:
    return hook_event("UserPromptSubmit", session, cwd, mode=mode, prompt=text)


def todos_response(old: list[dict[str, str]], new: list[dict[str, str]]) -> dict[str, Any]:
    return {"oldTodos": old, "newTodos": new}


def todo(content: str, status: str) -> dict[str, str]:
    return {"content": content, "status": status, "activeForm": f"Doing: {content}"}


# -- CC-1: one event in, its JSON output out; never a failure ---------------------------------

@pytest.mark.parametrize("way", WAY_PARAMS)
def test_a_documented_event_is_answered_with_json(
        hooks: Hooks, project: Path, way: Way) -> None:  # CC-1
    session = new_session()
    assert hooks.send(way, prompt(session, project, "read the parser")) == {}
    output = hooks.send(way, pre_tool(session, project, "Read",
                                      {"file_path": str(project / "parser.py")}))
    assert decision(output)[0] == "allow"


@pytest.mark.parametrize("way", WAY_PARAMS)
def test_an_unknown_event_is_no_opinion_and_its_mode_still_mirrored(
        hooks: Hooks, project: Path, way: Way) -> None:  # CC-1
    session = new_session()
    notification = hook_event("Notification", session, project, mode="acceptEdits",
                              message="Claude needs your permission to use Bash",
                              notification_type="permission_prompt")
    assert hooks.send(way, notification) == {}
    assert hooks.document(session)["executionState"]["mode"] == "edit"
    unknown = hook_event("SomethingNew", session, project, mode="bypassPermissions",
                         brand_new_field={"nested": [1, 2]})
    assert hooks.send(way, unknown) == {}
    document = hooks.document(session)
    assert (document["executionState"]["mode"], document["displayMode"]) == ("yolo", "yolo")
    kinds = [e["type"] for e in hooks.events(session)]
    assert kinds == ["SessionCreated", "SessionModeChanged"]  # nothing else of theirs fits


def _malformed(session: str, cwd: Path) -> dict[str, bytes]:
    valid = json.dumps(prompt(session, cwd, "PLACEHOLDER"))
    no_session = prompt(session, cwd, "no session")
    del no_session["session_id"]
    no_tool = pre_tool(session, cwd, "Read", {"file_path": "x"})
    del no_tool["tool_name"]
    return {
        "not JSON": b"{\"session_id\": ",
        "a JSON array": json.dumps([prompt(session, cwd, "in an array")]).encode(),
        "no session_id": json.dumps(no_session).encode(),
        "a PreToolUse without tool_name": json.dumps(no_tool).encode(),
        "a megabyte of garbage": bytes(range(256)) * 3900,
        "invalid UTF-8 in a string": valid.encode().replace(b"PLACEHOLDER", b"caf\xe9"),
        "a lone surrogate escaped": valid.replace("PLACEHOLDER", "\\ud800").encode(),
        "a lone surrogate raw": valid.replace("PLACEHOLDER", "\ud800")
        .encode("utf-8", "surrogatepass"),
    }


BY_THE_COMMAND = ("not JSON", "a JSON array", "a megabyte of garbage", "a lone surrogate raw")
"""The malformed events also sent through the command (each run costs a process start): how
its bytes arrive differs from HTTP; what is read from them is the one answer_hook."""


@pytest.mark.parametrize("way", WAY_PARAMS)
def test_a_malformed_event_is_no_opinion_and_appends_nothing(
        hooks: Hooks, project: Path, way: Way) -> None:  # CC-1
    session = new_session()
    hooks.send("http", prompt(session, project, "the session exists"))
    before, logged = hooks.head(), hooks.server.log().count("claude-code hook answered {}")
    sent = 0
    for what, body in _malformed(session, project).items():
        if way != "http" and what not in BY_THE_COMMAND:
            continue
        no_opinion(way, hooks.answer(way, body), what)
        sent += 1
    assert hooks.head() == before
    if way == "http":  # the reason is in the server's log
        assert hooks.server.log().count("claude-code hook answered {}") == logged + sent


# -- CC-2: one ledger session per Claude Code session ---------------------------------------

@pytest.mark.parametrize("way", WAY_PARAMS)
def test_the_first_event_creates_the_session_the_next_ones_land_in(
        hooks: Hooks, project: Path, way: Way) -> None:  # CC-2
    session = new_session()
    hooks.send(way, prompt(session, project, "first"))
    document = hooks.document(session)
    assert document["sessionId"] == ledger_session_id(session)
    assert (document["client"], document["externalSessionId"]) == ("claude-code", session)
    assert document["workspace"] == str(project)
    entries = hooks.http.get("/v1/sessions").json()["sessions"]
    [entry] = [e for e in entries if e["sessionId"] == ledger_session_id(session)]
    assert (entry["client"], entry["externalSessionId"]) == ("claude-code", session)
    hooks.send(way, prompt(session, project, "second"))
    events = hooks.events(session)
    assert len(of_type(events, "SessionCreated")) == 1
    assert [m["content"] for m in of_type(events, "MessageRecorded")] == ["first", "second"]


def test_http_and_the_command_share_one_session(hooks: Hooks, project: Path) -> None:  # CC-2
    session = new_session()
    hooks.send("http", prompt(session, project, "by http"))
    hooks.send("command", prompt(session, project, "by the command", mode="acceptEdits"))
    output = hooks.send("http", pre_tool(session, project, "Write",
                                         {"file_path": str(project / "a.py"), "content": "x"},
                                         mode="acceptEdits"))
    assert decision(output)[0] == "allow"  # the server saw the command's mode change
    events = hooks.events(session)
    assert [m["content"] for m in of_type(events, "MessageRecorded")] == [
        "by http", "by the command"]
    assert [e["mode"] for e in of_type(events, "SessionModeChanged")] == ["edit"]
    assert hooks.document(session)["version"] == len(events)


@pytest.mark.parametrize("way", WAY_PARAMS)
def test_a_cwd_outside_the_root_records_nothing(
        hooks: Hooks, project: Path, way: Way) -> None:  # CC-2
    session = new_session()
    elsewhere = hooks.root.parent / "elsewhere"
    elsewhere.mkdir(exist_ok=True)
    before = hooks.head()
    no_opinion(way, hooks.answer(way, prompt(session, elsewhere, "outside")))
    no_cwd = prompt(session, project, "no cwd")
    del no_cwd["cwd"]
    no_opinion(way, hooks.answer(way, no_cwd))
    assert hooks.head() == before
    assert hooks.http.get(f"/v1/sessions/{ledger_session_id(session)}").status_code == 404


@pytest.mark.parametrize("way", WAY_PARAMS)
def test_a_subagents_events_go_to_a_child_session(
        hooks: Hooks, project: Path, way: Way) -> None:  # CC-2
    session = new_session()
    hooks.send("http", prompt(session, project, "explore the parser"))
    subagent = pre_tool(session, project, "Grep", {"pattern": "def parse"})
    subagent.update(agent_id="a7be2f0", agent_type="Explore")
    assert decision(hooks.send(way, subagent))[0] == "allow"
    child = ledger_session_id(session, "a7be2f0")
    document = hooks.http.get(f"/v1/sessions/{child}").json()
    assert document["parentSessionId"] == ledger_session_id(session)
    assert (document["client"], document["externalSessionId"]) == (
        "claude-code", f"{session}/a7be2f0")
    assert [e["tool"] for e in of_type(hooks.events(session, "a7be2f0"),
                                       "ToolCallRequested")] == ["Grep"]
    assert of_type(hooks.events(session), "ToolCallRequested") == []


# -- CC-3: permission_mode mirrored on every event ----------------------------------------------

@pytest.mark.parametrize("way", WAY_PARAMS)
def test_permission_mode_is_mirrored(hooks: Hooks, project: Path, way: Way) -> None:  # CC-3
    session = new_session()
    seen = []
    for mode in ("default", "acceptEdits", "acceptEdits", "bypassPermissions", "plan"):
        hooks.send(way, hook_event("Stop", session, project, mode=mode, stop_hook_active=False))
        document = hooks.document(session)
        state = document["executionState"]
        seen.append((state["mode"], state["planEnabled"], document["displayMode"]))
    assert seen == [("build", False, "build"), ("edit", False, "edit"), ("edit", False, "edit"),
                    ("yolo", False, "yolo"), ("yolo", True, "plan")]
    changes = of_type(hooks.events(session), "SessionModeChanged")
    assert [(c["mode"], c["planEnabled"], c["via"]) for c in changes] == [
        ("edit", False, "claude-code"), ("yolo", False, "claude-code"),
        ("yolo", True, "claude-code")]  # acceptEdits twice: one change
    # A mode this ledger has no name for: build underneath, Claude Code's name recorded.
    hooks.send(way, hook_event("Stop", session, project, mode="dontAsk"))
    state = hooks.document(session)["executionState"]
    assert (state["mode"], state["planEnabled"]) == ("build", False)
    last = of_type(hooks.events(session), "SessionModeChanged")[-1]
    assert (last["mode"], last["hostMode"], last["via"]) == ("build", "dontAsk", "claude-code")


# -- CC-4: PreToolUse answered by this service's permission authority ----------------------------

@pytest.mark.parametrize("way", WAY_PARAMS)
def test_plan_denies_writes_under_bypass_permissions(
        hooks: Hooks, project: Path, way: Way) -> None:  # CC-4
    session = new_session()
    hooks.send("http", prompt(session, project, "plan it", mode="bypassPermissions"))
    calls = {
        "Write": ({"file_path": str(project / "a.py"), "content": "x"}, "deny"),
        "Read": ({"file_path": str(project / "a.py")}, "allow"),
        "Bash": ({"command": "ls", "description": "List files"}, "allow"),
        "Bash rm": ({"command": "rm -rf build", "description": "Clean"}, "deny"),
    }
    for name, (tool_input, expected) in calls.items():
        output = hooks.send(way, pre_tool(session, project, name.split()[0], tool_input,
                                          mode="plan", use=f"toolu_{name.replace(' ', '_')}"))
        behaviour, reason = decision(output)
        assert behaviour == expected, (name, reason)
        if expected == "deny":
            assert "Plan mode is active" in reason
    events = hooks.events(session)
    recorded = {d["callId"]: d["decision"]["behavior"]
                for d in of_type(events, "PermissionDecided")}
    assert recorded == {f"toolu_{n.replace(' ', '_')}": e for n, (_, e) in calls.items()}
    assert hooks.document(session)["executionState"] == {
        "mode": "yolo", "planEnabled": True, "goal": None}


@pytest.mark.parametrize("way", WAY_PARAMS)
def test_plan_turned_on_here_holds_under_the_hosts_mode(
        hooks: Hooks, project: Path, way: Way) -> None:  # CC-3, CC-4, issue 39
    session = new_session()
    hooks.send(way, prompt(session, project, "start", mode="default"))
    ledger = ledger_session_id(session)
    turned = hooks.http.post(f"/v1/sessions/{ledger}/mode", json={"mode": "plan"})
    assert turned.status_code == 200, turned.text
    # Claude Code runs on under bypassPermissions: its mode is recorded underneath, Plan
    # stays, and every later event keeps it.
    for n in range(2):
        output = hooks.send(way, pre_tool(
            session, project, "Write", {"file_path": str(project / f"a{n}.py"), "content": "x"},
            mode="bypassPermissions"))
        assert decision(output)[0] == "deny"
    assert hooks.document(session)["executionState"] == {
        "mode": "yolo", "planEnabled": True, "goal": None}
    # Turned off here, Claude Code's mode is mirrored again.
    assert hooks.http.post(f"/v1/sessions/{ledger}/mode",
                           json={"mode": "build"}).status_code == 200
    hooks.send(way, hook_event("Stop", session, project, mode="bypassPermissions"))
    assert hooks.document(session)["executionState"]["planEnabled"] is False
    changes = [(c["mode"], c["planEnabled"], c["via"])
               for c in of_type(hooks.events(session), "SessionModeChanged")]
    assert changes == [("build", True, "mode_command"), ("yolo", True, "claude-code"),
                       ("build", False, "mode_command"), ("yolo", False, "claude-code")]
    # Plan Claude Code turned on follows Claude Code.
    hooks.send(way, hook_event("Stop", session, project, mode="plan"))
    hooks.send(way, hook_event("Stop", session, project, mode="acceptEdits"))
    assert hooks.document(session)["executionState"] == {
        "mode": "edit", "planEnabled": False, "goal": None}


@pytest.mark.parametrize("way", WAY_PARAMS)
def test_claude_codes_own_plan_file_is_written_in_plan(
        hooks: Hooks, project: Path, way: Way) -> None:  # CC-4, CC-5, issue 39
    # Claude Code 2.1 has the model write its plan to <config>/plans/<name>.md (the hook's
    # transcript_path names <config>/projects/…) and adds the file's text to ExitPlanMode.
    session = new_session()
    plans = "/home/dev/.claude/plans"
    writes = {
        f"{plans}/lazy-parser.md": "allow",
        f"{plans}/../settings.json": "deny",
        f"{plans}/../plans-elsewhere/x.md": "deny",
        f"{plans}/nested/x.md": "deny",
        str(project / ".claude" / "plans" / "x.md"): "deny",
    }
    for n, (path, expected) in enumerate(writes.items()):
        output = hooks.send(way, pre_tool(session, project, "Write",
                                          {"file_path": path, "content": PLAN}, mode="plan",
                                          use=f"toolu_w{n}"))
        assert decision(output)[0] == expected, path
    hooks.send(way, post_tool(session, project, "Write",
                              {"file_path": f"{plans}/lazy-parser.md", "content": PLAN},
                              {"type": "create", "filePath": f"{plans}/lazy-parser.md"},
                              mode="plan", use="toolu_w0"))
    exit_input = {"allowedPrompts": [], "plan": PLAN,
                  "planFilePath": f"{plans}/lazy-parser.md"}
    assert hooks.send(way, pre_tool(session, project, "ExitPlanMode", exit_input, mode="plan",
                                    use="toolu_exit")) == {}
    hooks.send(way, post_tool(session, project, "ExitPlanMode", exit_input,
                              {"plan": PLAN, "isAgent": False,
                               "filePath": f"{plans}/lazy-parser.md"},
                              mode="plan", use="toolu_exit"))
    events = hooks.events(session)
    [approved] = of_type(events, "PlanApproved")
    assert (approved["plan"], approved["path"]) == (PLAN, f"{plans}/lazy-parser.md")
    assert of_type(events, "PlanSubmitted")[0]["plan"] == PLAN
    audit = hooks.http.get(f"/v1/sessions/{ledger_session_id(session)}/audit").json()
    assert audit["findings"] == []


@pytest.mark.parametrize("way", WAY_PARAMS)
def test_permission_request_is_answered_by_the_same_authority(
        hooks: Hooks, project: Path, way: Way) -> None:  # CC-4, issue 39
    # Claude Code raises PermissionRequest before showing its own prompt; another hook's
    # "allow" there would let a write through Plan, so the ledger denies it there too.
    session = new_session()

    def permission(tool: str, tool_input: dict[str, Any], use: str, mode: str) -> Any:
        return hooks.send(way, hook_event(
            "PermissionRequest", session, project, mode=mode, tool_name=tool,
            tool_input=tool_input, tool_use_id=use, permission_suggestions=[]))

    write = {"file_path": str(project / "a.py"), "content": "x"}
    denied = permission("Write", write, "toolu_w", "plan")["hookSpecificOutput"]
    assert denied["hookEventName"] == "PermissionRequest"
    assert denied["decision"]["behavior"] == "deny"
    assert denied["decision"]["message"].startswith("sessionledger: Plan mode is active")
    assert permission("Write", write, "toolu_w", "plan") == {"hookSpecificOutput": denied}
    hooks.send(way, hook_event("Stop", session, project, mode="default"))
    assert permission("Bash", {"command": "rm -rf build"}, "toolu_rm", "default") == {}
    allowed = permission("Bash", {"command": "ls"}, "toolu_ls", "default")
    assert allowed["hookSpecificOutput"]["decision"] == {"behavior": "allow"}
    events = hooks.events(session)
    assert [(d["callId"], d["decision"]["behavior"])
            for d in of_type(events, "PermissionDecided")] == [
        ("toolu_w", "deny"), ("toolu_ls", "allow")]
    assert [(d["callId"], d["status"]) for d in of_type(events, "ToolCallCompleted")] == [
        ("toolu_w", "denied")]


TASK_TOOLS = {  # Claude Code 2.1's task list, with inputs as its tools declare them
    "TaskCreate": {"subject": "Add the parser", "description": "Parse the config",
                   "activeForm": "Adding the parser"},
    "TaskUpdate": {"taskId": "1", "status": "in_progress"},
    "TaskGet": {"taskId": "1"},
    "TaskList": {},
    "TaskOutput": {"task_id": "b1"},
    "TaskStop": {"task_id": "b1"},
}


@pytest.mark.parametrize("mode", ["plan", "default", "acceptEdits", "bypassPermissions"])
def test_claude_codes_task_tools_are_allowed_in_every_mode(
        hooks: Hooks, project: Path, mode: str) -> None:  # CC-4, issue 39
    # Claude Code 2.1 keeps its todo list with the Task* tools: refusing them (headless runs
    # turn "ask" into a refusal) leaves the agent without a list.
    session = new_session()
    answers = {tool: decision(hooks.send("http", pre_tool(
        session, project, tool, tool_input, mode=mode, use=f"toolu_{tool}")))[0]
        for tool, tool_input in TASK_TOOLS.items()}
    assert answers == dict.fromkeys(TASK_TOOLS, "allow")


@pytest.mark.parametrize("mode", ["plan", "default"])
def test_claude_codes_tool_search_and_agent_listing_are_read_only(
        hooks: Hooks, project: Path, mode: str) -> None:  # CC-4
    # Claude Code 2.1.337 defers WebFetch, NotebookEdit, … until ToolSearch loads them:
    # refusing ToolSearch leaves the agent without those tools
    session = new_session()
    calls = {"ToolSearch": {"query": "select:WebFetch,NotebookEdit", "max_results": 5},
             "ListAgents": {}, "DeferredToolPlaceholder": {},
             "Monitor": {"description": "errors", "timeout_ms": 300000,
                         "command": "tail -f app.log | grep --line-buffered ERROR"}}
    answers = {tool: decision(hooks.send("http", pre_tool(
        session, project, tool, tool_input, mode=mode, use=f"toolu_{tool}")))[0]
        for tool, tool_input in calls.items()}
    assert answers == dict.fromkeys(calls, "allow")


@pytest.mark.parametrize(("tool_input", "expected"), [
    ({"description": "d", "timeout_ms": 1000, "command": "inotifywait -m -q src"}, "ask"),
    ({"description": "d", "timeout_ms": 1000, "command": "rm -rf ~"}, "ask"),
    ({"description": "d", "timeout_ms": 1000, "ws": {"url": "wss://example.com/feed"}}, "ask"),
    ({"description": "d", "timeout_ms": 1000, "command": "cat README",
      "ws": {"url": "wss://example.com/?leak=x"}}, "ask"),
])
def test_claude_codes_monitor_is_a_command_as_bash_is(
        hooks: Hooks, project: Path, tool_input: dict[str, Any], expected: str) -> None:  # CC-4
    session = new_session()
    built = decision(hooks.send("http", pre_tool(session, project, "Monitor", tool_input,
                                                 use="toolu_m1")))
    planned = decision(hooks.send("http", pre_tool(session, project, "Monitor", tool_input,
                                                   mode="plan", use="toolu_m2")))
    assert (built[0], planned[0]) == (expected, "deny")


def test_plan_still_denies_claude_codes_worktree_and_workflow_tools(
        hooks: Hooks, project: Path) -> None:  # CC-4, issue 39
    session = new_session()
    calls = {"EnterWorktree": {"name": "feature"}, "ExitWorktree": {"action": "remove"},
             "Workflow": {"script": "run()", "name": "w"}}
    answers = {tool: decision(hooks.send("http", pre_tool(
        session, project, tool, tool_input, mode="plan", use=f"toolu_{tool}")))[0]
        for tool, tool_input in calls.items()}
    assert answers == dict.fromkeys(calls, "deny")


@pytest.mark.parametrize("way", WAY_PARAMS)
def test_default_asks_before_what_is_not_read_only(
        hooks: Hooks, project: Path, way: Way) -> None:  # CC-4
    session = new_session()
    answers = [decision(hooks.send(way, pre_tool(session, project, tool, tool_input)))[0]
               for tool, tool_input in (
                   ("Bash", {"command": "rm -rf build"}),
                   ("mcp__x__y", {"query": "anything"}))]
    assert answers == ["ask", "ask"]
    assert [d["decision"]["behavior"] for d in of_type(hooks.events(session),
                                                       "PermissionDecided")] == answers


@pytest.mark.parametrize("way", WAY_PARAMS)
def test_claude_code_asks_its_user_itself(hooks: Hooks, project: Path, way: Way) -> None:  # CC-4
    session = new_session()
    question = {"questions": [{"question": "Which parser?", "header": "Parser", "options": [
        {"label": "PEG", "description": "a grammar"}, {"label": "Hand", "description": "code"}],
        "multiSelect": False}]}
    assert hooks.send(way, pre_tool(session, project, "AskUserQuestion", question,
                                    use="toolu_q")) == {}
    assert hooks.send(way, pre_tool(session, project, "ExitPlanMode", {"plan": PLAN},
                                    mode="plan", use="toolu_p")) == {}
    events = hooks.events(session)
    assert [(d["callId"], d["tool"]) for d in of_type(events, "ToolCallRequested")] == [
        ("toolu_q", "AskUserQuestion"), ("toolu_p", "ExitPlanMode")]
    assert of_type(events, "ToolCallRequested")[0]["input"] == question
    assert of_type(events, "PermissionDecided") == []


@pytest.mark.parametrize("way", WAY_PARAMS)
def test_a_project_rule_decides(hooks: Hooks, project: Path, way: Way) -> None:  # CC-4
    (project / ".sessionledger").mkdir()
    (project / ".sessionledger" / "config.toml").write_text(
        '[permission]\ndeny = ["Bash(git push*)"]\nallow = ["Bash(make *)"]\n', encoding="utf-8")
    session = new_session()
    pushed, reason = decision(hooks.send(way, pre_tool(
        session, project, "Bash", {"command": "git push origin main"}, mode="bypassPermissions")))
    assert (pushed, "permission.deny[0]" in reason) == ("deny", True)
    made, reason = decision(hooks.send(way, pre_tool(
        session, project, "Bash", {"command": "make test"})))
    assert (made, "permission.allow[0]" in reason) == ("allow", True)
    assert [(d["decision"]["behavior"], d["decision"]["ruleId"])
            for d in of_type(hooks.events(session), "PermissionDecided")] == [
        ("deny", "config.deny[0]"), ("allow", "config.allow[0]")]


# -- CC-5: PostToolUse records the call and what it carries --------------------------------------

@pytest.mark.parametrize("way", WAY_PARAMS)
def test_todo_write_records_the_list_and_what_it_dropped(
        hooks: Hooks, project: Path, way: Way) -> None:  # CC-5
    session = new_session()
    first = [todo("Read the parser", "in_progress"), todo("Write the tests", "pending")]
    hooks.send(way, post_tool(session, project, "TodoWrite", {"todos": first},
                              todos_response([], first), use="toolu_t1"))
    second = [todo("Read the parser", "completed")]
    hooks.send(way, post_tool(session, project, "TodoWrite", {"todos": second},
                              todos_response(first, second), use="toolu_t2"))
    events = hooks.events(session)
    written = of_type(events, "TodosWritten")
    assert written[0]["todos"] == [
        {"content": "Read the parser", "status": "in_progress", "priority": "medium"},
        {"content": "Write the tests", "status": "pending", "priority": "medium"}]
    assert "droppedUnfinished" not in written[0]
    assert written[1]["droppedUnfinished"] == [
        {"content": "Write the tests", "status": "pending", "priority": "medium"}]
    requested = of_type(events, "ToolCallRequested")
    assert requested[0]["input"] == {"todos": first}  # activeForm kept with the call
    assert [c["status"] for c in of_type(events, "ToolCallCompleted")] == [
        "completed", "completed"]
    assert [t["content"] for t in hooks.document(session)["todos"]] == ["Read the parser"]


@pytest.mark.parametrize("way", WAY_PARAMS)
def test_a_todo_list_over_the_bounds_is_refused_naming_them_and_never_held(
        hooks: Hooks, project: Path, way: Way) -> None:  # issue 41, finding 5
    session = new_session()
    full = [todo(f"step {n}", "pending") for n in range(MAX_TODOS)]
    for tool_input, allowed in (({"todos": full}, True),
                                ({"todos": [*full, todo("one more", "pending")]}, False),
                                ({"todos": [todo("x" * (MAX_TODO_CHARS + 1), "pending")]}, False),
                                ({"subject": "x" * (MAX_TODO_CHARS + 1)}, False)):
        tool = "TaskCreate" if "subject" in tool_input else "TodoWrite"
        use = f"toolu_{uuid.uuid4().hex}"
        made, reason = decision(hooks.send(way, pre_tool(session, project, tool, tool_input,
                                                         use=use)))
        assert made == ("allow" if allowed else "deny"), reason
        assert allowed or "at most" in reason
        # a host that ran it anyway: the call is recorded, the list is not held
        response = todos_response([], tool_input["todos"]) if tool == "TodoWrite" else {
            "task": {"id": "99", "subject": tool_input["subject"]}}
        hooks.send(way, post_tool(session, project, tool, tool_input, response, use=use))
    assert len(of_type(hooks.events(session), "TodosWritten")) == 1
    assert len(hooks.document(session)["todos"]) == MAX_TODOS


def task_calls(hooks: Hooks, session: str, project: Path, way: Way,
               calls: list[tuple[str, dict[str, Any], Any]], *, mode: str = "default") -> None:
    """Each task tool call as Claude Code 2.1 hooks it: PreToolUse, then PostToolUse with the
    response it really gives (TaskCreate: ``{"task": {"id", "subject"}}``)."""
    for tool, tool_input, response in calls:
        use = f"toolu_{uuid.uuid4().hex}"
        assert decision(hooks.send(way, pre_tool(session, project, tool, tool_input,
                                                 mode=mode, use=use)))[0] == "allow"
        hooks.send(way, post_tool(session, project, tool, tool_input, response, mode=mode,
                                  use=use))


def created(task_id: str, subject: str) -> tuple[str, dict[str, Any], Any]:
    return ("TaskCreate", {"subject": subject, "description": subject,
                           "activeForm": f"Doing: {subject}"},
            {"task": {"id": task_id, "subject": subject}})


def updated(task_id: str, status: str) -> tuple[str, dict[str, Any], Any]:
    return ("TaskUpdate", {"taskId": task_id, "status": status},
            {"success": True, "taskId": task_id, "updatedFields": ["status"],
             "statusChange": {"from": "pending", "to": status}})


@pytest.mark.parametrize("way", WAY_PARAMS)
def test_claude_codes_task_list_is_the_sessions_todo_list(
        hooks: Hooks, project: Path, way: Way) -> None:  # CC-5, issue 39
    session = new_session()
    task_calls(hooks, session, project, way, [
        created("1", "Read the parser"), created("2", "Write the tests"),
        created("3", "Tidy up"), updated("1", "completed"), updated("2", "in_progress"),
        updated("3", "deleted"),
    ], mode="plan")
    events = hooks.events(session)
    written = of_type(events, "TodosWritten")
    assert len(written) == 6
    assert written[-1]["todos"] == [
        {"id": "1", "content": "Read the parser", "status": "completed", "priority": "medium"},
        {"id": "2", "content": "Write the tests", "status": "in_progress",
         "priority": "medium"}]
    assert written[-1]["droppedUnfinished"] == [
        {"id": "3", "content": "Tidy up", "status": "pending", "priority": "medium"}]
    assert [(t["content"], t["status"]) for t in hooks.document(session)["todos"]] == [
        ("Read the parser", "completed"), ("Write the tests", "in_progress")]
    # The deleted unfinished task is pointed out on the next prompt, once.
    warned = hooks.send(way, prompt(session, project, "go on", mode="plan"))
    assert '"Tidy up"' in warned["hookSpecificOutput"]["additionalContext"]
    # A listing adds what the ledger had not seen and takes the statuses it shows.
    task_calls(hooks, session, project, way, [("TaskList", {}, {"tasks": [
        {"id": "2", "subject": "Write the tests", "status": "completed", "blockedBy": []},
        {"id": "4", "subject": "Made elsewhere", "status": "pending", "blockedBy": []}]})])
    last = of_type(hooks.events(session), "TodosWritten")[-1]
    assert [(t["id"], t["status"]) for t in last["todos"]] == [
        ("1", "completed"), ("2", "completed"), ("4", "pending")]


@pytest.mark.parametrize("way", WAY_PARAMS)
def test_a_refused_call_is_closed_by_the_next_event(
        hooks: Hooks, project: Path, way: Way) -> None:  # CC-5, issue 39
    # Claude Code sends no PostToolUse for a call a hook denied, nor for one it asked about
    # and the user refused: the ledger closes a deny at the next event, an ask at the
    # turn's end (a Notification while Claude Code's own prompt is up does not close it).
    session = new_session()
    denied, reason = decision(hooks.send(way, pre_tool(
        session, project, "Write", {"file_path": str(project / "a.txt"), "content": "x"},
        mode="plan", use="toolu_denied")))
    assert denied == "deny"
    asked = decision(hooks.send(way, pre_tool(
        session, project, "Bash", {"command": "rm -rf build"}, use="toolu_asked")))[0]
    assert asked == "ask"
    granted = decision(hooks.send(way, pre_tool(
        session, project, "Bash", {"command": "rm -rf dist"}, use="toolu_granted")))[0]
    assert granted == "ask"
    hooks.send(way, hook_event("Notification", session, project,
                               message="Claude needs your permission to use Bash"))
    hooks.send(way, post_tool(session, project, "Bash", {"command": "rm -rf dist"},
                              {"stdout": "", "stderr": ""}, use="toolu_granted"))
    closed = {c["callId"]: c for c in of_type(hooks.events(session), "ToolCallCompleted")}
    assert set(closed) == {"toolu_denied", "toolu_granted"}
    assert (closed["toolu_denied"]["status"], closed["toolu_denied"]["success"],
            closed["toolu_denied"]["modelContent"]) == ("denied", False, reason)
    assert closed["toolu_granted"]["status"] == "completed"
    hooks.send(way, hook_event("Stop", session, project, stop_hook_active=False))
    hooks.send(way, hook_event("Stop", session, project, stop_hook_active=False))  # again
    closed = {c["callId"]: c for c in of_type(hooks.events(session), "ToolCallCompleted")}
    assert len(closed) == 3 and closed["toolu_asked"]["status"] == "denied"
    assert len(of_type(hooks.events(session), "ToolCallCompleted")) == 3
    # Refused calls never ran: the audit finds no write in Plan.
    audit = hooks.http.get(f"/v1/sessions/{ledger_session_id(session)}/audit")
    assert audit.status_code == 200, audit.text
    assert audit.json()["findings"] == []


@pytest.mark.parametrize("way", WAY_PARAMS)
def test_ask_user_question_records_the_answers(
        hooks: Hooks, project: Path, way: Way) -> None:  # CC-5
    session = new_session()
    question = {"questions": [{"question": "Which parser?", "header": "Parser", "options": [
        {"label": "PEG", "description": "a grammar"}, {"label": "Hand", "description": "code"}],
        "multiSelect": False}]}
    answers = {"Which parser?": "PEG"}
    hooks.send(way, post_tool(session, project, "AskUserQuestion", question,
                              {**question, "answers": answers}, use="toolu_q"))
    events = hooks.events(session)
    [requested] = of_type(events, "InteractionRequested")
    assert (requested["kind"], requested["callId"]) == ("askUserQuestion", "toolu_q")
    assert requested["payload"]["questions"] == question["questions"]
    [resolved] = of_type(events, "InteractionResolved")
    assert resolved["decision"] == "modify"
    assert resolved["input"]["answers"] == answers
    assert hooks.document(session)["interactions"] == []  # nothing waits here


@pytest.mark.parametrize("way", WAY_PARAMS)
def test_an_approved_plan_leaves_plan_and_writes_no_file(
        hooks: Hooks, project: Path, way: Way) -> None:  # CC-5
    session = new_session()
    hooks.send("http", prompt(session, project, "plan the parser", mode="plan"))
    assert hooks.document(session)["executionState"]["planEnabled"] is True
    claude_file = "/home/dev/.claude/plans/quiet-parsing-owl.md"
    hooks.send(way, post_tool(session, project, "ExitPlanMode", {"plan": PLAN},
                              {"plan": PLAN, "isAgent": False, "filePath": claude_file},
                              mode="plan", use="toolu_p"))
    events = hooks.events(session)
    [approved] = of_type(events, "PlanApproved")
    assert (approved["plan"], approved["path"], approved["fileWritten"]) == (
        PLAN, claude_file, False)
    assert hooks.document(session)["executionState"]["planEnabled"] is False
    assert list(project.rglob("*")) == []  # no plan file in the workspace


@pytest.mark.parametrize("way", WAY_PARAMS)
def test_a_rejected_plan_and_feedback_keep_plan(
        hooks: Hooks, project: Path, way: Way) -> None:  # CC-5
    session = new_session()
    hooks.send(way, failed_tool(session, project, "ExitPlanMode", {"plan": PLAN}, REJECTED,
                                mode="plan", use="toolu_p1"))
    hooks.send(way, failed_tool(session, project, "ExitPlanMode", {"plan": PLAN}, FEEDBACK,
                                mode="plan", use="toolu_p2"))
    events = hooks.events(session)
    [rejected] = of_type(events, "PlanRejected")
    assert (rejected["callId"], rejected["plan"], rejected["by"]) == ("toolu_p1", PLAN, "user")
    [feedback] = of_type(events, "PlanFeedbackGiven")
    assert (feedback["callId"], feedback["feedback"], feedback["plan"]) == (
        "toolu_p2", "Do X first", PLAN)
    assert of_type(events, "PlanApproved") == []
    assert hooks.document(session)["executionState"]["planEnabled"] is True


def transcript_line(session: str, cwd: Path, kind: str, content: list[Any],
                    **extra: Any) -> str:
    """One line of a transcript as Claude Code writes it (the fields the import reads)."""
    return json.dumps({"type": kind, "sessionId": session, "cwd": str(cwd),
                       "timestamp": "2026-12-06T10:00:00.000Z", "uuid": uuid.uuid4().hex,
                       "message": {"role": kind, "content": content}, **extra})


@pytest.mark.parametrize("way", WAY_PARAMS)
def test_what_the_user_answered_in_claude_codes_own_dialog_is_recorded_when_the_turn_ends(
        hooks: Hooks, project: Path, tmp_path: Path, way: Way) -> None:  # CC-5
    # Claude Code reports a plan turned down, or a question dismissed, to no hook; its
    # PermissionRequest for them names no tool_use_id. At the turn's end the outcome is read
    # from the transcript the hooks name; one it does not hold yet is closed by the next
    # prompt, as turned down.
    session = new_session()
    config = tmp_path / f"claude-{way}"
    transcript = config / "projects" / "-project" / f"{session}.jsonl"
    transcript.parent.mkdir(parents=True)
    exit_input = {"plan": PLAN, "planFilePath": str(config / "plans" / "a-plan.md")}
    question = {"questions": [{"question": "Which parser?", "header": "Parser", "options": [
        {"label": "PEG", "description": "a grammar"}, {"label": "Hand", "description": "code"}],
        "multiSelect": False}]}

    def sent(event: dict[str, Any]) -> Any:
        return hooks.send(way, {**event, "transcript_path": str(transcript)})

    sent(prompt(session, project, "plan the parser", mode="plan"))
    assert sent(pre_tool(session, project, "ExitPlanMode", exit_input, mode="plan",
                         use="toolu_p")) == {}
    asked = hook_event("PermissionRequest", session, project, mode="plan",
                       tool_name="ExitPlanMode", tool_input=exit_input)
    assert sent(asked) == {}
    transcript.write_text("\n".join([
        transcript_line(session, project, "assistant", [
            {"type": "tool_use", "id": "toolu_p", "name": "ExitPlanMode", "input": {}}]),
        transcript_line(session, project, "user", [
            {"type": "tool_result", "tool_use_id": "toolu_p", "content": FEEDBACK,
             "is_error": True}], toolUseResult=f"Error: {FEEDBACK}"),
    ]) + "\n", encoding="utf-8")
    sent(hook_event("Stop", session, project, mode="plan", stop_hook_active=False))
    assert sent(pre_tool(session, project, "AskUserQuestion", question, mode="plan",
                         use="toolu_q")) == {}
    sent(hook_event("PermissionRequest", session, project, mode="plan",
                    tool_name="AskUserQuestion", tool_input=question))
    sent(hook_event("Stop", session, project, mode="plan", stop_hook_active=False))
    assert [d["callId"] for d in of_type(hooks.events(session), "ToolCallCompleted")] == [
        "toolu_p"]  # the transcript has no outcome for it yet: Claude Code writes it behind
    sent(prompt(session, project, "never mind", mode="plan"))
    events = hooks.events(session)
    assert [d["callId"] for d in of_type(events, "ToolCallRequested")] == ["toolu_p", "toolu_q"]
    [feedback] = of_type(events, "PlanFeedbackGiven")
    assert (feedback["callId"], feedback["feedback"], feedback["plan"]) == (
        "toolu_p", "Do X first", PLAN)
    resolved = {d["callId"]: d["decision"] for d in of_type(events, "InteractionResolved")}
    assert resolved == {"toolu_p": "feedback", "toolu_q": "deny"}
    closed = [(d["callId"], d["success"]) for d in of_type(events, "ToolCallCompleted")]
    assert closed == [("toolu_p", False), ("toolu_q", False)]
    assert hooks.document(session)["executionState"]["planEnabled"] is True


# -- CC-6: UserPromptSubmit ---------------------------------------------------------------------

@pytest.mark.parametrize("way", WAY_PARAMS)
def test_a_prompt_is_warned_once_of_a_dropped_todo(
        hooks: Hooks, project: Path, way: Way) -> None:  # CC-6
    session = new_session()
    assert hooks.send("http", prompt(session, project, "port it")) == {}
    first = [todo("Port the lexer", "completed"), todo("Write comprehensive tests", "pending")]
    second = [todo("Port the lexer", "completed")]
    hooks.send("http", post_tool(session, project, "TodoWrite", {"todos": first},
                                 todos_response([], first)))
    hooks.send("http", post_tool(session, project, "TodoWrite", {"todos": second},
                                 todos_response(first, second)))
    warned = hooks.send(way, prompt(session, project, "what is left?"))
    assert warned["hookSpecificOutput"]["hookEventName"] == "UserPromptSubmit"
    assert '"Write comprehensive tests"' in warned["hookSpecificOutput"]["additionalContext"]
    assert hooks.send(way, prompt(session, project, "and now?")) == {}  # once per drop
    messages = of_type(hooks.events(session), "MessageRecorded")
    assert [(m["role"], m["kind"], m["source"], m["content"]) for m in messages] == [
        ("user", "real", "claude-code", text)
        for text in ("port it", "what is left?", "and now?")]


# -- CC-7: the compaction round trip (issue 22, acceptance 2) -------------------------------------

@pytest.mark.parametrize("way", WAY_PARAMS)
def test_the_plan_and_todos_come_back_after_a_compaction(
        hooks: Hooks, project: Path, way: Way) -> None:  # CC-7
    session = new_session()
    hooks.send("http", post_tool(session, project, "ExitPlanMode", {"plan": PLAN},
                                 {"plan": PLAN, "isAgent": False}, mode="plan"))
    items = [todo("Read the parser", "completed"), todo("Add the missing case", "in_progress"),
             todo("Test it", "pending")]
    hooks.send("http", post_tool(session, project, "TodoWrite", {"todos": items},
                                 todos_response([], items)))
    hooks.send(way, hook_event("PreCompact", session, project, trigger="auto",
                               custom_instructions=""))
    assert len(of_type(hooks.events(session), "ContextCompacted")) == 1
    output = hooks.send(way, hook_event("SessionStart", session, project, source="compact",
                                        model="claude-opus-4-6"))
    assert output["hookSpecificOutput"]["hookEventName"] == "SessionStart"
    context = output["hookSpecificOutput"]["additionalContext"]
    assert PLAN.strip() in context
    for item in items:
        assert item["content"] in context
    assert hooks.send(way, hook_event("SessionStart", session, project, source="startup")) == {}


# -- CC-8: at most once ------------------------------------------------------------------------

@pytest.mark.parametrize("way", WAY_PARAMS)
def test_an_event_sent_twice_appends_once(hooks: Hooks, project: Path, way: Way) -> None:  # CC-8
    session = new_session()
    items = [todo("Read the parser", "pending")]
    written = post_tool(session, project, "TodoWrite", {"todos": items},
                        todos_response([], items))
    hooks.send(way, written)
    head = hooks.head()
    hooks.send(way, written)
    assert hooks.head() == head
    asked = pre_tool(session, project, "Bash", {"command": "python build.py"})
    first = hooks.send(way, asked)
    head = hooks.head()
    assert hooks.send(way, asked) == first  # a retried PreToolUse: the same decision
    assert hooks.head() == head
    kinds = Counter(e["type"] for e in hooks.events(session))
    assert (kinds["TodosWritten"], kinds["ToolCallRequested"], kinds["PermissionDecided"]) == (
        1, 2, 1)


def test_an_event_sent_by_http_then_by_the_command_appends_once(
        hooks: Hooks, project: Path) -> None:  # CC-8
    session = new_session()
    event = prompt(session, project, "the same prompt twice")
    hooks.send("http", event)
    head = hooks.head()
    hooks.send("command", event)
    compacted = hook_event("PreCompact", session, project, trigger="manual")
    hooks.send("command", compacted)
    hooks.send("http", compacted)
    assert hooks.head() == head + 1
    kinds = Counter(e["type"] for e in hooks.events(session))
    assert (kinds["MessageRecorded"], kinds["ContextCompacted"]) == (1, 1)


# -- the real hook log ----------------------------------------------------------------------------

def _undone(line: dict[str, Any], workspace: Path) -> dict[str, Any]:
    """A logged hook input as Claude Code sent it: the logger's ``event`` is
    ``hook_event_name`` again, its ``ts`` gone, the tool input and response it wrote as Python
    text objects again, and ``/workspace`` the test's own directory."""
    event = {k: v for k, v in line.items() if k not in ("ts", "event")}
    event["hook_event_name"] = line["event"]
    for key in ("tool_input", "tool_response"):
        if isinstance(event.get(key), str):
            event[key] = ast.literal_eval(event[key])

    def moved(value: Any) -> Any:
        if isinstance(value, str):
            return value.replace("/workspace", str(workspace))
        if isinstance(value, dict):
            return {k: moved(v) for k, v in value.items()}
        if isinstance(value, list):
            return [moved(v) for v in value]
        return value

    moved_event: dict[str, Any] = moved(event)
    return moved_event


def test_the_real_hook_log_is_answered_event_by_event(
        hooks: Hooks, project: Path) -> None:  # CC-1
    log = claude_data() / "hooks" / "fasthooks-sample_hook_logs.jsonl"
    lines = [json.loads(raw) for raw in log.read_text(encoding="utf-8").splitlines()]
    assert len(lines) == 36 and all("tool_use_id" not in line for line in lines)
    session = lines[0]["session_id"]
    decisions: list[tuple[str, str, str]] = []
    answers: dict[str, list[Any]] = {}
    for line in lines:
        event = _undone(line, project)
        answer = post_hook(hooks.http, event)
        assert answer.code == 200 and isinstance(answer.output, dict), answer
        head = hooks.head()
        assert post_hook(hooks.http, event) == answer  # retried: the same answer
        assert hooks.head() == head  # and nothing appended
        answers.setdefault(line["event"], []).append(answer.output)
        if line["event"] == "PreToolUse":
            behaviour, _reason = decision(answer.output)
            given = event["tool_input"]
            subject = given["command"] if "command" in given else Path(given["file_path"]).name
            decisions.append((event["tool_name"], subject, behaviour))
    assert decisions == [
        ("Bash", "ls -la", "allow"),
        ("Write", "hello_world.py", "ask"),
        ("Read", "hello_world.py", "allow"),
        ("Bash", "cat nonexistent.txt", "allow"),
        ("Write", "number_generator.py", "ask"),
        ("Write", "data.txt", "ask"),
        ("Read", "data.txt", "allow"),
        ("Bash", f"python {project}/number_generator.py", "ask"),
        ("Bash", f"ls -lh {project}/*.txt {project}/number_generator.py", "allow"),
        ("Bash", f"python3 {project}/number_generator.py", "ask"),
    ]
    # Nothing was planned or listed: the SessionStart after the compaction has nothing to add.
    assert answers["SessionStart"] == [{}, {}]
    assert all(a == {} for name, got in answers.items() if name != "PreToolUse" for a in got)
    # The session holds what the log holds: 5 prompts, 10 calls (8 with a result, and the
    # `python` call asked about and never run, closed as refused at the turn's Stop; the
    # allowed `cat` that failed without a PostToolUseFailure stays open), one compaction;
    # each subagent that stopped is a child session.
    events = hooks.events(session)
    kinds = Counter(e["type"] for e in events)
    assert kinds["MessageRecorded"] == 5 and kinds["ContextCompacted"] == 1
    assert Counter(d["tool"] for d in of_type(events, "ToolCallRequested")) == {
        "Bash": 5, "Write": 3, "Read": 2}
    assert (kinds["PermissionDecided"], kinds["ToolCallCompleted"]) == (10, 9)
    [closed] = [e for e in of_type(events, "ToolCallCompleted") if e["status"] == "denied"]
    assert closed["callId"] == next(
        d["callId"] for d in of_type(events, "ToolCallRequested")
        if d["input"].get("command") == f"python {project}/number_generator.py")
    assert closed["modelContent"].startswith("sessionledger: ")
    agents = {line["agent_id"] for line in lines if "agent_id" in line}
    assert len(agents) == 4
    for agent in agents:
        [created] = of_type(hooks.events(session, agent), "SessionCreated")
        assert created["parentSessionId"] == ledger_session_id(session)


# -- issue 22, acceptance 4: hooked and imported agree ---------------------------------------------

TODOS = "c7d3d95c-57f0-4359-8f4b-926a9bef5a3f"
ASKING = "491e126e-1e71-469c-ade2-fcc8af567c74"
OWN = "0d1c7e55-4a3e-4b6e-9f1a-5e55a0e10022"


def real(session: str) -> Path:
    [found] = sorted(transcripts_dir().glob(f"*/{session}.jsonl"))
    return found


def own_transcript(directory: Path) -> Path:
    """A session Claude Code could have written but the real data lacks: Plan on from the
    first prompt (``permissionMode: "plan"``), its plan file written in Plan (no finding), a
    write this ledger refused (never run, no finding), a plan rejected, one
    answered with feedback, one approved, a todo dropped, a compaction."""
    lines: list[dict[str, Any]] = []

    def line(kind: str, **fields: Any) -> None:
        lines.append({"parentUuid": None, "isSidechain": False, "userType": "external",
                      "cwd": "/home/dev/parser", "sessionId": OWN, "version": "2.1.39",
                      "gitBranch": "main", "type": kind, "uuid": f"uuid-{len(lines) + 1}",
                      "timestamp": f"2026-02-11T21:41:{len(lines):02d}.500Z", **fields})

    def user(text: str, mode: str) -> None:
        line("user", message={"role": "user", "content": text}, permissionMode=mode)

    def say(text: str) -> None:
        line("assistant", message={"model": "claude-opus-4-6", "id": f"msg_{len(lines)}",
                                   "type": "message", "role": "assistant",
                                   "content": [{"type": "text", "text": text}]})

    def call(use: str, tool: str, tool_input: dict[str, Any], shown: str, response: Any,
             error: bool = False) -> None:
        line("assistant", message={"model": "claude-opus-4-6", "id": f"msg_{use}",
                                   "type": "message", "role": "assistant", "content": [
                                       {"type": "tool_use", "id": use, "name": tool,
                                        "input": tool_input}]})
        block: dict[str, Any] = {"type": "tool_result", "content": shown, "tool_use_id": use}
        if error:
            block["is_error"] = True
        line("user", message={"role": "user", "content": [block]}, toolUseResult=response)

    first = [todo("Read the parser", "in_progress"), todo("Write the tests", "pending")]
    second = [todo("Read the parser", "completed")]
    notes = "/home/dev/.claude/plans/notes.md"
    user("plan the missing case", "plan")
    say("I will read the parser first.")
    call("toolu_r", "Read", {"file_path": "/home/dev/parser/parser.py"}, "def parse(): ...",
         {"type": "text", "file": {"filePath": "/home/dev/parser/parser.py",
                                   "content": "def parse(): ..."}})
    call("toolu_w0", "Write", {"file_path": notes, "content": "notes"}, "File created",
         {"type": "create", "filePath": notes, "content": "notes"})
    refused = ("sessionledger: Plan mode is on: Write is not allowed until a plan is "
               "approved (plan_mode)")
    call("toolu_wd", "Write", {"file_path": "/home/dev/parser/parser.py", "content": "x"},
         refused, f"Error: {refused}", error=True)
    call("toolu_t1", "TodoWrite", {"todos": first}, "Todos have been modified",
         {"oldTodos": [], "newTodos": first})
    call("toolu_p1", "ExitPlanMode", {"plan": PLAN}, REJECTED, f"Error: {REJECTED}", error=True)
    call("toolu_p2", "ExitPlanMode", {"plan": PLAN + "4. Docs.\n"}, FEEDBACK,
         f"Error: {FEEDBACK}", error=True)
    call("toolu_p3", "ExitPlanMode", {"plan": PLAN + "0. Do X first.\n"}, APPROVED,
         {"plan": PLAN + "0. Do X first.\n", "isAgent": False})
    user("go on", "acceptEdits")
    call("toolu_w", "Write", {"file_path": "/home/dev/parser/case.py", "content": "x"},
         "File created", {"type": "create", "filePath": "/home/dev/parser/case.py"})
    call("toolu_t2", "TodoWrite", {"todos": second}, "Todos have been modified",
         {"oldTodos": first, "newTodos": second})
    line("system", subtype="compact_boundary", content="Conversation compacted",
         compactMetadata={"trigger": "manual", "preTokens": 12000})
    line("user", message={"role": "user", "content": "This session is being continued…"},
         isCompactSummary=True)
    user("continue", "acceptEdits")
    say("Done: the case is handled.")
    path = directory / f"{OWN}.jsonl"
    path.write_text("".join(json.dumps(v) + "\n" for v in lines), encoding="utf-8")
    return path


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if k != "SESSIONLEDGER_DB"}
    environment["PYTHONPATH"] = os.pathsep.join(
        [str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])])
    return subprocess.run([*sessionledger_command(), *args], cwd=cwd, env=environment,
                          capture_output=True, text=True, timeout=60, check=False)


def import_report(transcript: Path, db_url: str, root: Path, into: Path) -> dict[str, Any]:
    """``sessionledger import claude-code --json``: the transcript's report."""
    done = run_cli("import", "claude-code", str(transcript), "--db", db_url, "--workspace",
                   str(root), "--into", str(into), "--json", cwd=root)
    assert done.returncode == 0, done.stderr
    [report] = json.loads(done.stdout)["transcripts"]
    return dict(report)


def imported(transcript: Path, db_url: str, root: Path, into: Path) -> int:
    """``sessionledger import claude-code``: the events it appended (no line skipped)."""
    report = import_report(transcript, db_url, root, into)
    assert report["skipped"] == [], report
    appended: int = report["appended"]
    return appended


def without_seq(audit: dict[str, Any]) -> list[dict[str, Any]]:
    """An audit document's findings without their seq (the hooked session holds permission
    decisions the imported one has not)."""
    assert audit["ok"] is True, audit
    return [{k: v for k, v in f.items() if k != "seq"} for f in audit["findings"]]


def outcomes(events: list[dict[str, Any]]) -> dict[str, Any]:
    """What the two sessions must agree on: the todo lists in order, the plans and their
    outcomes, and the questions' answers."""
    plan_kinds = ("PlanSubmitted", "PlanApproved", "PlanRejected", "PlanFeedbackGiven")
    return {
        "todos": [(d["todos"], d.get("droppedUnfinished")) for d in of_type(events,
                                                                          "TodosWritten")],
        "plans": [(e["type"], e["data"]["callId"], e["data"]["plan"],
                   e["data"].get("feedback")) for e in events if e["type"] in plan_kinds],
        "answers": [(d["callId"], d["decision"], (d.get("input") or {}).get("answers"))
                    for d in of_type(events, "InteractionResolved")],
        "calls": [(d["callId"], d["tool"]) for d in of_type(events, "ToolCallRequested")],
        "results": [(d["callId"], d["status"], d["success"])
                    for d in of_type(events, "ToolCallCompleted")],
        "prompts": [d["content"] for d in of_type(events, "MessageRecorded")
                    if d["role"] == "user"],
        "compactions": len(of_type(events, "ContextCompacted")),
        "modes": [(d["mode"], d["planEnabled"], d["via"])
                  for d in of_type(events, "SessionModeChanged")],
    }


EXPECTED = {
    TODOS: {"todo lists": 10, "dropped": ["Write comprehensive tests for all modules"],
            "plans": [], "findings": {"dropped_unfinished_todos"}},
    ASKING: {"todo lists": 0, "dropped": [], "plans": ["PlanSubmitted", "PlanApproved"],
             "findings": set()},
    OWN: {"todo lists": 2, "dropped": ["Write the tests"],
          "plans": ["PlanSubmitted", "PlanRejected", "PlanSubmitted", "PlanFeedbackGiven",
                    "PlanSubmitted", "PlanApproved"],
          "findings": {"dropped_unfinished_todos"}},
}


@pytest.mark.parametrize("claude_session", [TODOS, ASKING, OWN])
def test_a_hooked_session_agrees_with_its_imported_transcript(
        hooks: Hooks, project: Path, tmp_path: Path, claude_session: str) -> None:  # CC-8
    # Issue 22, acceptance 4 (and CC-8: the import after the hooks doubles nothing).
    transcript = own_transcript(tmp_path) if claude_session == OWN else real(claude_session)
    session = ledger_session_id(claude_session)
    for event in transcript_hooks(transcript, project):
        answer = post_hook(hooks.http, event)
        assert answer.code == 200 and isinstance(answer.output, dict), (event, answer)
    hooked = hooks.events(claude_session)

    # The same transcript imported into another database.
    other_root = tmp_path / "other"
    (other_root / "project").mkdir(parents=True)
    other_db = tmp_path / "imported.db"
    imported(transcript, f"sqlite:///{other_db}", other_root, other_root / "project")
    alone = wire_events(other_db, session)
    assert outcomes(hooked) == outcomes(alone)
    expected = EXPECTED[claude_session]
    assert len(outcomes(hooked)["todos"]) == expected["todo lists"]
    assert [item["content"] for _, dropped in outcomes(hooked)["todos"] if dropped
            for item in dropped] == expected["dropped"]
    assert [kind for kind, *_ in outcomes(hooked)["plans"]] == expected["plans"]
    if claude_session == OWN:  # refused here, never run: closed as refused either way
        assert ("toolu_wd", "denied", False) in outcomes(alone)["results"]
    found = without_seq(hooks.http.get(f"/v1/sessions/{session}/audit").json())
    with opened(other_db) as service:
        assert found == without_seq(service.audit(session))
    assert {f["kind"] for f in found} == expected["findings"]

    # Importing the transcript into the hooked database appends nothing twice: every hooked
    # part is there already, and the assistant's texts (hooks never see them) are dated
    # before the hooks' events of today, so each is reported, not appended out of order.
    texts = [s for s in read_transcript(transcript).seen
             if isinstance(s.observation, AssistantText)]
    assert texts
    report = import_report(transcript, hooks.server.db_url, hooks.root, project)
    assert report["appended"] == 0 and hooks.events(claude_session) == hooked
    assert [line["line"] for line in report["skipped"]] == sorted(
        {int(s.where.rpartition(":")[2]) for s in texts})
    assert all("out of order" in line["reason"] for line in report["skipped"])


# -- two hook processes at once -----------------------------------------------------------------

def test_a_hook_overtaken_by_another_process_decides_again(tmp_path: Path) -> None:  # CC-8
    # Claude Code runs the hooks of parallel tool calls at once: two command hooks (two
    # processes, two handles on one SQLite file) read the session, and the other appends
    # first. The one overtaken reads again and records its call; it must not answer {}.
    workspace = tmp_path / "project"
    workspace.mkdir()
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    session = new_session()
    first, second = (SessionService.open(url, workspace_root=tmp_path) for _ in range(2))
    try:
        ours, theirs = Recorder(first), Recorder(second)
        assert answer_hook(ours, prompt(session, workspace, "go")).output == {}
        read = ours.tally
        overtaken = []

        def tally_then_overtaken(session_id: str) -> Tally:
            tally = read(session_id)
            if not overtaken:  # the other process appends between our read and our append
                overtaken.append(answer_hook(theirs, pre_tool(
                    session, workspace, "Grep", {"pattern": "x"}, use="toolu_theirs")))
            return tally

        ours.tally = tally_then_overtaken  # type: ignore[method-assign]
        answer = answer_hook(ours, pre_tool(session, workspace, "Read", {"file_path": "a"},
                                            use="toolu_ours"))
        assert answer.problem is None, answer.problem
        assert decision(answer.output)[0] == "allow"
        assert decision(overtaken[0].output)[0] == "allow"
        recorded = [e.to_wire() for e in first.iter_events(ledger_session_id(session))]
        assert [d["callId"] for d in of_type(recorded, "PermissionDecided")] == [
            "toolu_theirs", "toolu_ours"]
    finally:
        first.close()
        second.close()


def test_parallel_tool_calls_hooked_at_once_are_each_recorded(
        hooks: Hooks, project: Path) -> None:  # CC-8
    session = new_session()
    hooks.send("http", prompt(session, project, "search the web"))
    searches = [pre_tool(session, project, "WebSearch", {"query": f"parser {i}"},
                         use=f"toolu_s{i}") for i in range(8)]
    with ThreadPoolExecutor(len(searches)) as pool:
        answers = list(pool.map(lambda e: hooks.answer("http", e), searches))
    assert [(a.code, decision(a.output)[0]) for a in answers] == [(200, "allow")] * 8
    events = hooks.events(session)
    assert sorted(d["callId"] for d in of_type(events, "PermissionDecided")) == sorted(
        e["tool_use_id"] for e in searches)
