"""Codex CLI's and Gemini CLI's hook events, in the shapes their pinned binaries send
(``tests/test_codex_binary.py`` and ``tests/test_gemini_binary.py`` run the binaries), answered
over HTTP and by the command hook — forwarding and direct — with the same answers (issue 40).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from claude_hooks_support import WAY_PARAMS, WAYS, Hooks, Way
from server_support import ServerProcess, running_server

from sessionledger.claude_code.observations import ledger_session_id

PATCH = "*** Begin Patch\n*** Add File: notes.txt\n+x\n*** End Patch\n"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with running_server(tmp_path_factory.mktemp("dialects")) as running:
        yield running


@pytest.fixture(scope="module")
def hooks(server: ServerProcess) -> Iterator[Hooks]:
    with Hooks(server) as driven:
        yield driven


@pytest.fixture
def project(hooks: Hooks, request: pytest.FixtureRequest) -> Path:
    name = re.sub(r"[^A-Za-z0-9_-]+", "-", request.node.name).strip("-")
    directory = hooks.root / name
    directory.mkdir()
    return directory


def codex(name: str, session: str, cwd: Path, **fields: Any) -> dict[str, Any]:
    """A Codex CLI 0.171 hook event (``codex exec``: ``bypassPermissions``)."""
    return {"session_id": session, "turn_id": "turn-1",
            "transcript_path": f"/home/dev/.codex/sessions/2026/12/06/rollout-{session}.jsonl",
            "cwd": str(cwd), "hook_event_name": name, "model": "gpt-5.5",
            "permission_mode": "bypassPermissions", **fields}


def gemini(name: str, session: str, cwd: Path, **fields: Any) -> dict[str, Any]:
    """A Gemini CLI 0.61 hook event (no mode, no call id; a time of its own)."""
    return {"session_id": session,
            "transcript_path": f"/home/dev/.gemini/tmp/p/chats/session-{session[:8]}.jsonl",
            "cwd": str(cwd), "hook_event_name": name,
            "timestamp": f"2026-12-06T10:00:{uuid.uuid4().int % 60:02d}."
                         f"{uuid.uuid4().int % 1000:03d}Z", **fields}


def events(hooks: Hooks, host: str, session: str) -> list[dict[str, Any]]:
    return [e.to_wire() for e in hooks.store.read_session(ledger_session_id(session, None,
                                                                            host))]


def plan_on(hooks: Hooks, host: str, session: str) -> None:
    answer = hooks.http.post(f"/v1/sessions/{ledger_session_id(session, None, host)}/mode",
                             json={"mode": "plan"})
    assert answer.status_code == 200, answer.text


@pytest.mark.parametrize("way", WAY_PARAMS)
def test_codex_is_refused_in_its_own_words_and_allowed_without_a_word(
        hooks: Hooks, project: Path, way: Way) -> None:
    session = str(uuid.uuid4())
    started = hooks.send(way, codex("SessionStart", session, project, source="startup"),
                         "codex")
    assert started == {}
    read = hooks.send(way, codex("PreToolUse", session, project, tool_name="Bash",
                                 tool_input={"command": "ls"}, tool_use_id="call_1"), "codex")
    assert read == {}  # Codex's "allow" changes nothing: no opinion
    hooks.send(way, codex("UserPromptSubmit", session, project, prompt="write it",
                          permission_mode="default"), "codex")
    plan_on(hooks, "codex", session)
    refused = hooks.send(way, codex("PreToolUse", session, project, tool_name="apply_patch",
                                    tool_input={"command": PATCH}, tool_use_id="call_2"),
                         "codex")
    specific = refused["hookSpecificOutput"]
    assert (specific["hookEventName"], specific["permissionDecision"]) == ("PreToolUse", "deny")
    assert specific["permissionDecisionReason"].startswith("sessionledger: Plan mode")
    logged = events(hooks, "codex", session)
    created = logged[0]["data"]
    assert (created["client"], created["externalSessionId"]) == ("codex", session)
    assert created["executionState"]["mode"] == "yolo"  # bypassPermissions
    modes = [(e["data"]["mode"], e["data"]["via"]) for e in logged
             if e["type"] == "SessionModeChanged"]
    assert modes[0] == ("build", "codex")  # its mode mirrored, as Codex's own


def test_the_same_session_id_from_two_hosts_is_two_sessions(
        hooks: Hooks, project: Path) -> None:
    session = str(uuid.uuid4())
    for host, event in (("codex", codex("UserPromptSubmit", session, project, prompt="hi")),
                        ("gemini", gemini("BeforeAgent", session, project, prompt="hi"))):
        assert hooks.send("http", event, host) == {}
    ids = {host: ledger_session_id(session, None, host) for host in ("codex", "gemini")}
    assert len(set(ids.values())) == 2
    for host in ids:
        [message] = [e["data"] for e in events(hooks, host, session)
                     if e["type"] == "MessageRecorded"]
        assert (message["content"], message["source"]) == ("hi", host)


def test_gemini_is_refused_with_a_decision_and_never_told_to_ask(
        hooks: Hooks, project: Path) -> None:
    # Gemini CLI hangs on "ask": a call the ledger would ask about gets no opinion (Gemini's
    # own approval mode decides), a denied one {"decision": "deny", "reason": ...}.
    session = str(uuid.uuid4())
    write = {"file_path": str(project / "notes.txt"), "content": "x"}
    asked = hooks.send("http", gemini("BeforeTool", session, project, tool_name="write_file",
                                      tool_input=write), "gemini")
    assert asked == {}
    [decided] = [e["data"]["decision"] for e in events(hooks, "gemini", session)
                 if e["type"] == "PermissionDecided"]
    assert decided["behavior"] == "ask"
    plan_on(hooks, "gemini", session)
    refused = hooks.send("http", gemini("BeforeTool", session, project, tool_name="replace",
                                        tool_input={**write, "old_string": "", "new_string":
                                                    "y"}), "gemini")
    assert set(refused) == {"decision", "reason"} and refused["decision"] == "deny"
    assert refused["reason"].startswith("sessionledger: Plan mode")


def test_gemini_calls_pair_by_tool_and_input_and_repeat_as_new_calls(
        hooks: Hooks, project: Path) -> None:
    session = str(uuid.uuid4())
    read = {"file_path": str(project / "a.txt")}
    for _ in range(2):  # the same call twice: two calls, each with its result
        assert hooks.send("http", gemini("BeforeTool", session, project, tool_name="read_file",
                                         tool_input=read), "gemini") == {}
        assert hooks.send("http", gemini("AfterTool", session, project, tool_name="read_file",
                                         tool_input=read,
                                         tool_response={"llmContent": "a", "returnDisplay": ""}),
                          "gemini") == {}
    failing = {"command": "false"}
    hooks.send("http", gemini("BeforeTool", session, project, tool_name="run_shell_command",
                              tool_input=failing), "gemini")
    hooks.send("http", gemini("AfterTool", session, project, tool_name="run_shell_command",
                              tool_input=failing, tool_response={
                                  "llmContent": "Command exited 1", "returnDisplay": "",
                                  "error": {"message": "exit 1"}}), "gemini")
    logged = events(hooks, "gemini", session)
    requested = [e["data"]["callId"] for e in logged if e["type"] == "ToolCallRequested"]
    completed = [(e["data"]["callId"], e["data"]["success"], e["data"]["modelContent"])
                 for e in logged if e["type"] == "ToolCallCompleted"]
    assert len(set(requested)) == 3
    assert completed == [(requested[0], True, "a"), (requested[1], True, "a"),
                         (requested[2], False, "Command exited 1")]


def test_gemini_todos_leave_cancelled_items_out_without_calling_them_dropped(
        hooks: Hooks, project: Path) -> None:
    session = str(uuid.uuid4())
    lists = [
        [{"description": "Read", "status": "completed"},
         {"description": "Port", "status": "in_progress"},
         {"description": "Bench", "status": "pending"},
         {"description": "Docs", "status": "pending"}],
        [{"description": "Read", "status": "completed"},
         {"description": "Port", "status": "in_progress"},
         {"description": "Bench", "status": "cancelled"}],
    ]
    for todos in lists:
        given = {"todos": todos}
        hooks.send("http", gemini("BeforeTool", session, project, tool_name="write_todos",
                                  tool_input=given), "gemini")
        hooks.send("http", gemini("AfterTool", session, project, tool_name="write_todos",
                                  tool_input=given, tool_response={"llmContent": "ok"}),
                   "gemini")
    written = [e["data"] for e in events(hooks, "gemini", session)
               if e["type"] == "TodosWritten"]
    assert [[t["content"] for t in w["todos"]] for w in written] == [
        ["Read", "Port", "Bench", "Docs"], ["Read", "Port"]]
    assert [t["content"] for t in written[1].get("droppedUnfinished", [])] == ["Docs"]


def test_a_call_put_to_a_person_here_outlives_the_hosts_next_prompt(
        hooks: Hooks, project: Path) -> None:
    # A call made through the ledger's own routes in a hooked session, waiting for a person,
    # is not one the host refused: the host's next prompt does not close it.
    session = str(uuid.uuid4())
    hooks.send("http", codex("UserPromptSubmit", session, project, prompt="plan"), "codex")
    ledger = ledger_session_id(session, None, "codex")
    plan_on(hooks, "codex", session)
    asked = hooks.http.post(f"/v1/sessions/{ledger}/tool-calls",
                            json={"tool": "ExitPlanMode", "input": {"plan": "# Plan\n"}})
    assert asked.status_code == 202, asked.text
    hooks.send("http", codex("UserPromptSubmit", session, project, prompt="and?"), "codex")
    waiting = hooks.http.get(f"/v1/sessions/{ledger}/tool-calls/{asked.json()['callId']}")
    assert waiting.json()["status"] == "pending", waiting.text


def test_every_way_answers_gemini_alike(hooks: Hooks, project: Path) -> None:
    # One session through the route, the forwarding command and the direct command.
    session = str(uuid.uuid4())
    plan_on_first = gemini("BeforeAgent", session, project, prompt="go")
    hooks.send("http", plan_on_first, "gemini")
    plan_on(hooks, "gemini", session)
    answers = []
    for way in WAYS:
        command = {"command": f"echo {way} > {way}.txt"}
        answers.append(hooks.send(way, gemini("BeforeTool", session, project,
                                              tool_name="run_shell_command",
                                              tool_input=command), "gemini"))
    assert [a["decision"] for a in answers] == ["deny"] * 3
    assert len({a["reason"].replace("http", "W").replace("command", "W").replace(
        "direct", "W") for a in answers}) == 1


def test_the_ledgers_own_mcp_tools_keep_their_flags_under_plan(
        hooks: Hooks, project: Path) -> None:
    # Plan refuses writes, not the ledger's own todo list reached through its MCP server.
    session = str(uuid.uuid4())
    hooks.send("http", gemini("BeforeAgent", session, project, prompt="plan"), "gemini")
    hooks.send("http", codex("UserPromptSubmit", session, project, prompt="plan"), "codex")
    plan_on(hooks, "gemini", session)
    plan_on(hooks, "codex", session)
    todos = {"todos": [{"content": "a", "status": "pending", "priority": "high"}]}
    assert hooks.send("http", gemini("BeforeTool", session, project,
                                     tool_name="mcp_sessionledger_TodoWrite",
                                     tool_input=todos), "gemini") == {}
    assert hooks.send("http", codex("PreToolUse", session, project,
                                    tool_name="mcp__sessionledger__TodoWrite",
                                    tool_input=todos, tool_use_id="call_t"), "codex") == {}
    refused = hooks.send("http", codex("PreToolUse", session, project,
                                       tool_name="mcp__other__TodoWrite", tool_input=todos,
                                       tool_use_id="call_o"), "codex")
    assert refused["hookSpecificOutput"]["permissionDecision"] == "deny"


def test_codex_about_to_ask_its_user_is_left_to_its_prompt(
        hooks: Hooks, project: Path) -> None:
    # PermissionRequest: Codex asks its user itself; an "ask" of the ledger's is no decision
    # there (only its PreToolUse, which runs what it is told to ask about, refuses).
    (project / ".sessionledger").mkdir()
    (project / ".sessionledger" / "config.toml").write_text(
        '[permission]\nask = ["Bash(git push *)"]\n', encoding="utf-8")
    session = str(uuid.uuid4())
    push = {"command": "git push origin main"}
    asked = hooks.send("http", codex("PermissionRequest", session, project, tool_name="Bash",
                                     tool_input=push), "codex")
    assert asked == {}
    refused = hooks.send("http", codex("PreToolUse", session, project, tool_name="Bash",
                                       tool_input=push, tool_use_id="call_p"), "codex")
    assert refused["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert "cannot be asked to ask" in refused["hookSpecificOutput"]["permissionDecisionReason"]


def test_codexs_update_plan_is_the_sessions_todo_list(hooks: Hooks, project: Path) -> None:
    # Codex's plan tool, in the shape its hooks give any call (Codex 0.171 with gpt-5.5 offers
    # it neither in exec nor in its TUI, so no binary run shows it).
    session = str(uuid.uuid4())
    plan = {"explanation": "port", "plan": [
        {"step": "Read the grammar", "status": "completed"},
        {"step": "Port it", "status": "in_progress"}]}
    hooks.send("http", codex("PreToolUse", session, project, tool_name="update_plan",
                             tool_input=plan, tool_use_id="call_u"), "codex")
    hooks.send("http", codex("PostToolUse", session, project, tool_name="update_plan",
                             tool_input=plan, tool_response="Plan updated",
                             tool_use_id="call_u"), "codex")
    (written,) = [e["data"]["todos"] for e in events(hooks, "codex", session)
                  if e["type"] == "TodosWritten"]
    assert [(t["content"], t["status"]) for t in written] == [
        ("Read the grammar", "completed"), ("Port it", "in_progress")]
