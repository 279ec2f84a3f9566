"""The real Gemini CLI against a scripted Gemini API model, with the configuration
``sessionledger setup gemini`` writes (issue 40).

Gemini CLI (the version ``tests/hosts/package-lock.json`` pins) runs headless (``gemini -p``)
against ``tests/gemini_model.py`` on 127.0.0.1, its hooks forwarding to a real ``serve``.
"""

from __future__ import annotations

import json
import queue
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from agent_cli_support import (
    approve_in_ledger,
    gemini_settings,
    imports_as_hooked,
    ledger_session,
    run_gemini,
    sessionledger,
)
from claude_binary_support import installed_claude, project_in
from gemini_model import GeminiModel, ToolUse, Usage
from host_support import GEMINI_PACKAGE, ClaudeCode
from server_support import ServerProcess, running_server

from sessionledger.permission.descriptors import HOST_TOOLS, SERVICE_TOOLS

TODOS = [{"description": "Read the grammar", "status": "completed"},
         {"description": "Port the parser", "status": "in_progress"},
         {"description": "Benchmark it", "status": "pending"}]


@pytest.fixture(scope="module")
def hosts() -> ClaudeCode:
    return installed_claude()


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with running_server(tmp_path_factory.mktemp("gemini-binary")) as server:
        yield server


def set_up(project: Path, server: ServerProcess, *args: str) -> None:
    """The user's Gemini settings, then what ``setup gemini`` writes into the project's."""
    gemini_settings(project / ".home")
    done = sessionledger("setup", "gemini", "--project", str(project), "--url",
                         server.base_url, *args)
    assert done.returncode == 0, done.stderr


def gemini_session(project: Path) -> str:
    """Gemini's session id, from the one chat file it recorded under the project's home."""
    (chat,) = (project / ".home" / ".gemini" / "tmp").rglob("session-*.jsonl")
    header = json.loads(chat.read_text(encoding="utf-8").splitlines()[0])
    return str(header["sessionId"])


@pytest.mark.slow
def test_every_tool_the_pinned_gemini_offers_is_classified(
        hosts: ClaudeCode, served: ServerProcess) -> None:
    project = project_in(served)
    set_up(project, served, "--no-mcp")
    with GeminiModel([]) as model:
        run = run_gemini(hosts.gemini, project, model.url, "--yolo")
        assert run.returncode == 0, run.stderr[-2000:]
        offered = model.tools_offered()
    assert "run_shell_command" in offered and "write_todos" in offered, offered
    unknown = sorted(set(offered) - set(HOST_TOOLS) - set(SERVICE_TOOLS))
    assert unknown == [], (
        f"Gemini CLI {hosts.version_of(GEMINI_PACKAGE)} offers tools the ledger does not "
        f"classify: {unknown} (give each a descriptor in sessionledger/permission/"
        "descriptors.py)")


def test_plan_refuses_geminis_writes_its_todos_are_the_sessions_and_its_chat_imports_alike(
        hosts: ClaudeCode, served: ServerProcess,
        tmp_path: Path) -> None:  # issue 40, acceptances 1 and 2
    project = project_in(served)
    set_up(project, served, "--no-mcp")
    script: list[list[Any]] = [
        [ToolUse("write_todos", {"todos": TODOS})],
        [ToolUse("write_file", {"file_path": str(project / "notes.txt"), "content": "x\n"})],
        [ToolUse("run_shell_command", {"command": "echo hi > shell.txt"})],
        [ToolUse("read_file", {"file_path": str(project / "notes.txt")})],
    ]
    with GeminiModel([script[0]]) as model:  # a first run creates the session
        first = run_gemini(hosts.gemini, project, model.url, "--yolo", prompt="Plan the port.")
        assert first.returncode == 0, first.stderr[-2000:]
    external = gemini_session(project)
    session_id, _events = ledger_session(served, external)
    with httpx.Client(base_url=served.base_url, timeout=30) as http:
        assert http.post(f"/v1/sessions/{session_id}/mode",
                         json={"mode": "plan"}).status_code == 200
    with GeminiModel(script[1:]) as model:
        second = run_gemini(hosts.gemini, project, model.url, "--yolo", "--resume", "latest",
                            prompt="Write the notes.")
        assert second.returncode == 0, second.stderr[-2000:]
        responses = model.function_responses()
    assert not (project / "notes.txt").exists() and not (project / "shell.txt").exists()
    refused = [r["response"] for r in responses
               if "sessionledger: " in json.dumps(r["response"])]
    assert [r["name"] for r in responses if r["response"] in refused] == [
        "write_file", "run_shell_command"], responses
    assert all("Plan mode" in json.dumps(r) for r in refused), refused
    _id, events = ledger_session(served, external)
    requested = {e["data"]["callId"]: e["data"]["tool"] for e in events
                 if e["type"] == "ToolCallRequested"}
    decided = [(requested[e["data"]["callId"]], e["data"]["decision"]["behavior"])
               for e in events if e["type"] == "PermissionDecided"]
    assert decided == [("write_todos", "allow"), ("write_file", "deny"),
                       ("run_shell_command", "deny"), ("read_file", "allow")]
    completed = [(requested[e["data"]["callId"]], e["data"]["status"]) for e in events
                 if e["type"] == "ToolCallCompleted"]
    assert sorted(completed) == sorted([
        ("write_todos", "completed"), ("write_file", "denied"), ("run_shell_command", "denied"),
        ("read_file", "completed")]), completed
    (written,) = [e["data"]["todos"] for e in events if e["type"] == "TodosWritten"]
    assert [(t["content"], t["status"]) for t in written] == [
        (t["description"], t["status"]) for t in TODOS]
    created = next(e["data"] for e in events if e["type"] == "SessionCreated")
    assert (created["client"], created["externalSessionId"]) == ("gemini", external)

    # acceptance 2: its chat recording imports as its hooks recorded it
    (chat,) = (project / ".home" / ".gemini" / "tmp").rglob("session-*.jsonl")
    imports_as_hooked("gemini", chat, served, external, events, tmp_path)


def test_in_build_a_write_is_left_to_geminis_own_approval_mode_and_recorded_as_ask(
        hosts: ClaudeCode, served: ServerProcess) -> None:  # issue 40, acceptance 1
    # Gemini hangs on an "ask" answer, so a write the ledger would ask about gets no opinion
    # and Gemini's approval mode decides: under --yolo it runs, recorded as asked.
    project = project_in(served)
    set_up(project, served, "--no-mcp")
    script: list[list[Any]] = [
        [ToolUse("write_file", {"file_path": str(project / "notes.txt"), "content": "x\n"})]]
    with GeminiModel(script) as model:
        run = run_gemini(hosts.gemini, project, model.url, "--yolo", prompt="Write notes.")
        assert run.returncode == 0, run.stderr[-2000:]
    assert (project / "notes.txt").read_text(encoding="utf-8") == "x\n"
    _id, events = ledger_session(served, gemini_session(project))
    (decision,) = [e["data"]["decision"] for e in events if e["type"] == "PermissionDecided"]
    assert decision["behavior"] == "ask", decision
    (completed,) = [e["data"] for e in events if e["type"] == "ToolCallCompleted"]
    assert (completed["tool"], completed["status"]) == ("write_file", "completed")


def test_setup_gemini_merges_and_removes_only_its_own(
        served: ServerProcess, tmp_path: Path) -> None:
    settings = tmp_path / ".gemini" / "settings.json"
    settings.parent.mkdir()
    mine = {"theme": "Dracula", "hooks": {"BeforeTool": [{"matcher": "write_file", "hooks": [
        {"name": "mine", "type": "command", "command": "echo mine", "timeout": 500}]}]},
        "mcpServers": {"other": {"command": "other-mcp"}}}
    settings.write_text(json.dumps(mine), encoding="utf-8")
    first = sessionledger("setup", "gemini", "--project", str(tmp_path))
    again = sessionledger("setup", "gemini", "--project", str(tmp_path))
    assert first.returncode == again.returncode == 0, first.stderr + again.stderr
    assert "unchanged" in again.stdout, again.stdout
    written = json.loads(settings.read_text(encoding="utf-8"))
    assert written["theme"] == "Dracula" and written["mcpServers"]["other"] == {
        "command": "other-mcp"}
    assert written["mcpServers"]["sessionledger"]["args"] == ["mcp"]
    assert written["hooks"]["BeforeTool"][0] == mine["hooks"]["BeforeTool"][0]
    assert len(written["hooks"]["BeforeTool"]) == 2
    removed = sessionledger("setup", "gemini", "--project", str(tmp_path), "--remove")
    assert removed.returncode == 0, removed.stderr
    assert json.loads(settings.read_text(encoding="utf-8")) == mine


PLAN = "# Port the parser\n\n1. Read the grammar\n2. Port it\n"
QUESTION = {"questions": [{"question": "Which parser?", "header": "Parser", "multiSelect": False,
                           "options": [{"label": "PEG", "description": "a PEG parser"},
                                       {"label": "LALR", "description": "an LALR parser"}]}]}


@pytest.mark.slow
def test_gemini_calls_the_ledgers_tools_on_its_first_turn_and_a_person_answers(
        hosts: ClaudeCode, served: ServerProcess) -> None:  # issue 40, acceptance 3
    # setup's MCP entry (sessionledger mcp over stdio): Gemini, which offers no elicitation,
    # gets a question and then a plan pending; each is answered on the respond route and the
    # model's next InteractionStatus gets the answer.
    project = project_in(served)
    set_up(project, served, "--db", served.db_url)
    waiting: queue.Queue[dict[str, Any]] = queue.Queue()
    answered = [threading.Event(), threading.Event()]
    statuses: list[dict[str, Any]] = []

    def asked(which: int) -> Any:
        def status(body: Any) -> dict[str, Any]:
            pending = _last_document(body)
            waiting.put(pending)
            answered[which].wait(90)
            return {"interactionId": pending.get("interactionId")}
        return status

    def seen(body: Any) -> dict[str, Any]:
        statuses.append(_last_document(body))
        return {}

    script: list[list[Any]] = [
        [ToolUse("mcp_sessionledger_AskUserQuestion", QUESTION)],
        [ToolUse("mcp_sessionledger_InteractionStatus", asked(0))],
        [ToolUse("mcp_sessionledger_EnterPlanMode", seen)],
        [ToolUse("mcp_sessionledger_ExitPlanMode", {"plan": PLAN})],
        [ToolUse("mcp_sessionledger_InteractionStatus", asked(1))],
        [ToolUse("mcp_sessionledger_TodoRead", seen)],
    ]
    answers = [{"decision": "modify", "input": {**QUESTION, "answers": {"Which parser?": "PEG"}}},
               {"decision": "approve"}]
    runs: list[Any] = []
    with GeminiModel(script) as model:
        run = threading.Thread(target=lambda: runs.append(
            run_gemini(hosts.gemini, project, model.url, "--yolo")))
        run.start()
        try:
            with httpx.Client(base_url=served.base_url, timeout=30) as http:
                for which, answer in enumerate(answers):
                    pending = waiting.get(timeout=90)
                    assert pending["status"] == "pending", pending
                    given = http.post(f"/v1/sessions/{pending['sessionId']}/interactions/"
                                      f"{pending['interactionId']}/respond", json=answer)
                    assert given.status_code == 200, given.text
                    answered[which].set()
        finally:
            for event in answered:
                event.set()
            run.join(120)
        (done,) = runs
        assert done.returncode == 0, done.stderr[-2000:]
        first_tools = model.main_requests()[0]
    offered = [d["name"] for t in first_tools.body["tools"] for d in t.get(
        "functionDeclarations", [])]
    assert "mcp_sessionledger_AskUserQuestion" in offered, offered
    question, plan = statuses  # what InteractionStatus answered, read by the next turn
    assert question["status"] == "answered" and "PEG" in question["text"], question
    assert plan["status"] == "answered" and "approved" in plan["text"], plan
    with httpx.Client(base_url=served.base_url, timeout=30) as http:
        events = http.get(f"/v1/sessions/{pending['sessionId']}/events",
                          params={"limit": 1000}).json()["events"]
    resolved = [e["data"]["decision"] for e in events if e["type"] == "InteractionResolved"]
    assert resolved == ["modify", "approve"], resolved
    assert [e["data"]["plan"] for e in events if e["type"] == "PlanApproved"] == [PLAN]


def _last_document(body: Any) -> dict[str, Any]:
    """What the model was shown of the last function response: Gemini passes the tool's text
    on (the interaction and session it names, whether it still waits)."""
    responses = [part["functionResponse"] for content in body["contents"]
                 for part in content.get("parts", []) if "functionResponse" in part]
    text = json.dumps(responses[-1]["response"])
    interaction = re.search(r"int_[0-9A-Z]{26}", text)
    session = re.search(r"sess_[0-9A-Z]{26}", text)
    return {"status": "pending" if "Waiting for the user" in text else "answered",
            "interactionId": interaction.group(0) if interaction else None,
            "sessionId": session.group(0) if session else None, "text": text}


@pytest.mark.slow
def test_a_todo_gemini_dropped_unfinished_is_pointed_out_at_the_next_prompt(
        hosts: ClaudeCode, served: ServerProcess) -> None:
    project = project_in(served)
    set_up(project, served, "--no-mcp")
    dropped = [t for t in TODOS if t["description"] != "Benchmark it"]
    script: list[list[Any]] = [
        [ToolUse("write_todos", {"todos": TODOS})],
        [ToolUse("write_todos", {"todos": dropped})],
    ]
    with GeminiModel(script) as model:
        first = run_gemini(hosts.gemini, project, model.url, "--yolo", prompt="Plan the port.")
        assert first.returncode == 0, first.stderr[-2000:]
        seen = len(model.main_requests())
        second = run_gemini(hosts.gemini, project, model.url, "--yolo", "--resume", "latest",
                            prompt="Go on.")
        assert second.returncode == 0, second.stderr[-2000:]
        after = json.dumps(model.main_requests()[seen].body)
    assert "dropped unfinished todos" in after and "Benchmark it" in after, after[-3000:]


SNAPSHOT = "<state_snapshot>\nThe user is porting a parser.\n</state_snapshot>"
FILLED = Usage(prompt_tokens=800_000)
"""Over half of gemini-2.5-pro's 1,048,576-token context: Gemini compresses its history before
the next model call."""


def _summary_text(body: dict[str, Any]) -> str | None:
    """The text of the user turn Gemini sent its compression's summary in (after its
    environment's, in one turn), from the summary on; ``None`` before any compression."""
    for content in body.get("contents", []):
        text = "".join(str(part.get("text", "")) for part in content.get("parts", []))
        if content.get("role") == "user" and SNAPSHOT in text:
            return text[text.index(SNAPSHOT):]
    return None


@pytest.mark.slow
def test_after_gemini_compresses_each_request_carries_the_todo_list_and_the_approved_plan(
        hosts: ClaudeCode, served: ServerProcess) -> None:  # issue 40, acceptance 1
    # Gemini sends no hook after it compresses; the BeforeModel hook adds the ledger's state
    # to the summary's turn of every model request that follows the compression.
    project = project_in(served)
    set_up(project, served, "--no-mcp")
    (project / "grammar.txt").write_text("expr := term ('+' term)*\n", encoding="utf-8")
    with GeminiModel([[ToolUse("write_todos", {"todos": TODOS})]]) as model:
        first = run_gemini(hosts.gemini, project, model.url, "--yolo", prompt="Plan the port.")
        assert first.returncode == 0, first.stderr[-2000:]
    external = gemini_session(project)
    session_id, _events = ledger_session(served, external)
    with httpx.Client(base_url=served.base_url, timeout=30) as http:
        approve_in_ledger(http, session_id, PLAN)
    script: list[list[Any]] = [
        [ToolUse("read_file", {"file_path": str(project / "grammar.txt")}), FILLED],
        [ToolUse("read_file", {"file_path": str(project / "grammar.txt")})],
    ]
    with GeminiModel(script, side_text=SNAPSHOT) as model:
        second = run_gemini(hosts.gemini, project, model.url, "--yolo", "--resume", "latest",
                            prompt="Go on with the port.")
        assert second.returncode == 0, second.stderr[-2000:]
        requests = [r.body for r in model.main_requests()]
    summaries = [_summary_text(body) for body in requests]
    assert summaries[0] is None and any(summaries), "Gemini did not compress its history"
    after = [text for text in summaries if text is not None]
    assert len(after) >= 2, "the test wants two model requests after the compression"
    for text in after:  # the summary, then the ledger's state as Gemini wraps a hook's
        assert text.startswith(SNAPSHOT) and "\n\n<hook_context>" in text, text
        assert "2. [in_progress] Port the parser" in text and PLAN in text, text
    _id, events = ledger_session(served, external)
    assert len([e for e in events if e["type"] == "ContextCompacted"]) == 1, \
        [e["type"] for e in events]
