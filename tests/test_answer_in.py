"""Where a hosted session's questions are answered (issue 39, "answer from anywhere").

A real ``serve`` with short question timers answers Claude Code's hook events over HTTP. The
session's ``answerIn`` is chosen with ``PUT /v1/sessions/{id}/answer-in``; with ``here`` a
question's ``PreToolUse`` waits for the answer given through ``respond`` — or for the
auto-continue countdown, which any question of the service has (HO-4 … HO-6) — and hands it to
Claude Code. The real binary's runs are in ``tests/test_claude_code_binary.py``.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from claude_hooks_support import Hooks, hook_event, post_hook
from server_support import ServerProcess, create_session, running_server

from sessionledger.claude_code.hooks import ANSWERED_HERE
from sessionledger.claude_code.observations import ledger_session_id

QUESTION = {"questions": [{"question": "Which parser?", "header": "Parser", "multiSelect": False,
                           "options": [{"label": "PEG", "description": "a grammar"},
                                       {"label": "Hand", "description": "code"}]}]}
GRACE_S, DEADLINE_S = 0.5, 2.0


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    args = ("--question-grace-s", str(GRACE_S), "--question-deadline-s", str(DEADLINE_S))
    with running_server(tmp_path_factory.mktemp("answer-in"), args=args) as running:
        yield running


@pytest.fixture(scope="module")
def hooks(server: ServerProcess) -> Iterator[Hooks]:
    with Hooks(server) as driven:
        yield driven


def started(hooks: Hooks, tmp_path: Path) -> tuple[str, Path]:
    """A Claude Code session begun in a new project: its Claude id and the project."""
    project = hooks.root / f"p-{uuid.uuid4().hex[:8]}"
    project.mkdir()
    claude = str(uuid.uuid4())
    assert hooks.send("http", hook_event("UserPromptSubmit", claude, project, prompt="hi")) == {}
    return claude, project


def choose(http: httpx.Client, session_id: str, answer_in: Any) -> httpx.Response:
    return http.put(f"/v1/sessions/{session_id}/answer-in", json={"answerIn": answer_in})


@pytest.fixture
def pool() -> Iterator[ThreadPoolExecutor]:
    with ThreadPoolExecutor(1) as running:
        yield running


def asked(pool: ThreadPoolExecutor, hooks: Hooks, claude: str, project: Path,
          use: str) -> Future[Any]:
    """The question's PreToolUse posted on its own connection (it may wait for an answer)."""
    event = hook_event("PreToolUse", claude, project, tool_name="AskUserQuestion",
                       tool_input=QUESTION, tool_use_id=use)

    def post() -> Any:
        with hooks.server.client(timeout=60) as http:
            answer = post_hook(http, event)
        assert answer.code == 200, answer
        return answer.output

    return pool.submit(post)


def waiting(http: httpx.Client, session_id: str) -> dict[str, Any]:
    for _ in range(200):
        pending = http.get(f"/v1/sessions/{session_id}").json()["interactions"]
        if pending:
            return dict(pending[0])
        time.sleep(0.1)
    raise AssertionError("no interaction waits")


def test_the_choice_is_recorded_once_and_refused_where_it_cannot_be(
        hooks: Hooks, tmp_path: Path) -> None:
    claude, _project = started(hooks, tmp_path)
    session_id = ledger_session_id(claude)
    http = hooks.http
    assert http.get(f"/v1/sessions/{session_id}").json()["answerIn"] == "host"
    for value in ("here", "here", "host"):
        response = choose(http, session_id, value)
        assert response.status_code == 200 and response.json()["answerIn"] == value
    changes = [e["data"] for e in hooks.events(claude) if e["type"] == "AnswerInChanged"]
    assert changes == [{"answerIn": "here", "previous": "host"},
                       {"answerIn": "host", "previous": "here"}]  # the same choice: no event
    before = len(hooks.events(claude))
    for value in ("there", None, 1):
        bad = choose(http, session_id, value)
        assert bad.status_code == 422 and bad.json()["error"]["code"] == "invalid_input", bad.text
    own = create_session(http)  # a session this service runs: answered here already
    refused = choose(http, own, "here")
    assert refused.status_code == 409 and "answerIn" not in http.get(
        f"/v1/sessions/{own}").json()
    assert choose(http, "sess_missing", "here").status_code == 404
    assert len(hooks.events(claude)) == before


def test_a_question_answered_here_goes_back_in_updated_input(
        hooks: Hooks, tmp_path: Path, pool: ThreadPoolExecutor) -> None:
    claude, project = started(hooks, tmp_path)
    session_id = ledger_session_id(claude)
    assert choose(hooks.http, session_id, "here").status_code == 200
    answer = asked(pool, hooks, claude, project, "toolu_here")
    pending = waiting(hooks.http, session_id)
    assert pending["kind"] == "askUserQuestion" and not answer.done()
    answers = {"Which parser?": "PEG"}
    responded = hooks.http.post(
        f"/v1/sessions/{session_id}/interactions/{pending['interactionId']}/respond",
        json={"decision": "modify", "input": {**QUESTION, "answers": answers}})
    assert responded.status_code == 200, responded.text
    assert responded.json()["status"] == "pending"  # Claude Code runs it; its result completes it
    output = answer.result(timeout=30)["hookSpecificOutput"]
    assert output == {"hookEventName": "PreToolUse", "permissionDecision": "allow",
                      "permissionDecisionReason": ANSWERED_HERE,
                      "updatedInput": {**QUESTION, "answers": answers}}
    # Claude Code ran it with the answers: its result completes the call, nothing twice
    assert hooks.send("http", hook_event(
        "PostToolUse", claude, project, tool_name="AskUserQuestion",
        tool_input={**QUESTION, "answers": answers},
        tool_response={**QUESTION, "answers": answers}, tool_use_id="toolu_here")) == {}
    kinds = [e["type"] for e in hooks.events(claude)]
    assert kinds.count("InteractionRequested") == kinds.count("InteractionResolved") == 1
    assert kinds.count("ToolCallCompleted") == 1


def test_a_question_nobody_answers_here_auto_continues_and_the_model_is_told(
        hooks: Hooks, tmp_path: Path, pool: ThreadPoolExecutor) -> None:  # HO-4 … HO-6
    claude, project = started(hooks, tmp_path)
    session_id = ledger_session_id(claude)
    assert choose(hooks.http, session_id, "here").status_code == 200
    output = asked(pool, hooks, claude, project, "toolu_quiet").result(timeout=60)
    decided = output["hookSpecificOutput"]
    assert decided["permissionDecision"] == "deny"
    assert "did not answer any of your questions" in decided["permissionDecisionReason"]
    [resolved] = [e for e in hooks.events(claude) if e["type"] == "InteractionResolved"]
    assert (resolved["data"]["decision"], resolved["actor"]) == ("autoContinued", "timer")
    # Claude Code reports nothing for the refused call: the turn's end closes it
    hooks.send("http", hook_event("Stop", claude, project, stop_hook_active=False))
    completed = [e["data"] for e in hooks.events(claude) if e["type"] == "ToolCallCompleted"]
    assert [(c["callId"], c["success"]) for c in completed] == [("toolu_quiet", False)]


def test_a_plan_given_feedback_here_then_submitted_again_and_approved_with_a_mode(
        hooks: Hooks, tmp_path: Path, pool: ThreadPoolExecutor) -> None:
    claude, project = started(hooks, tmp_path)
    session_id = ledger_session_id(claude)
    assert choose(hooks.http, session_id, "here").status_code == 200
    plan = {"plan": "# Plan\n\n1. Port it\n", "planFilePath": "/home/dev/.claude/plans/p.md"}

    def submitted(use: str) -> Future[Any]:
        assert hooks.send("http", hook_event(
            "PreToolUse", claude, project, mode="plan", tool_name="ExitPlanMode",
            tool_input=plan, tool_use_id=use)) == {}  # Claude Code then asks: PermissionRequest
        event = hook_event("PermissionRequest", claude, project, mode="plan",
                           tool_name="ExitPlanMode", tool_input=plan)

        def post() -> Any:
            with hooks.server.client(timeout=60) as http:
                return post_hook(http, event).output

        return pool.submit(post)

    def answer(**body: Any) -> None:
        pending = waiting(hooks.http, session_id)
        assert pending["kind"] == "planApproval" and pending["payload"]["plan"] == plan["plan"]
        responded = hooks.http.post(
            f"/v1/sessions/{session_id}/interactions/{pending['interactionId']}/respond",
            json=body)
        assert responded.status_code == 200, responded.text

    first = submitted("toolu_p1")
    answer(decision="feedback", feedback="Add a benchmark step")
    assert first.result(timeout=30)["hookSpecificOutput"]["decision"] == {
        "behavior": "deny", "message": "Add a benchmark step"}
    second = submitted("toolu_p2")  # the same plan again: a new call, asked anew
    answer(decision="approve", input={"mode": "edit"})
    assert second.result(timeout=30)["hookSpecificOutput"]["decision"] == {
        "behavior": "allow", "updatedInput": plan, "updatedPermissions": [
            {"type": "setMode", "mode": "acceptEdits", "destination": "session"}]}
    hooks.send("http", hook_event(
        "PostToolUse", claude, project, mode="acceptEdits", tool_name="ExitPlanMode",
        tool_input=plan, tool_response={**plan, "filePath": plan["planFilePath"]},
        tool_use_id="toolu_p2"))
    hooks.send("http", hook_event("Stop", claude, project, mode="acceptEdits",
                                  stop_hook_active=False))
    events = hooks.events(claude)
    outcomes = [(e["type"], e["data"]["callId"]) for e in events
                if e["type"] in ("PlanSubmitted", "PlanFeedbackGiven", "PlanApproved")]
    assert outcomes == [("PlanSubmitted", "toolu_p1"), ("PlanSubmitted", "toolu_p2"),
                        ("PlanApproved", "toolu_p2"), ("PlanFeedbackGiven", "toolu_p1")]
    state = hooks.document(claude)["executionState"]
    assert (state["mode"], state["planEnabled"]) == ("edit", False)


def test_a_plan_edited_here_is_approved_as_edited(
        hooks: Hooks, tmp_path: Path, pool: ThreadPoolExecutor) -> None:
    # An answer that edits the plan ("modify") approves it: Claude Code is handed the edited
    # plan to run, not told the plan was rejected
    claude, project = started(hooks, tmp_path)
    session_id = ledger_session_id(claude)
    assert choose(hooks.http, session_id, "here").status_code == 200
    plan = {"plan": "# Plan\n\n1. Port it\n", "planFilePath": "/home/dev/.claude/plans/p.md"}
    edited = "# Plan\n\n1. Port it\n2. Test it\n"
    hooks.send("http", hook_event("PreToolUse", claude, project, mode="plan",
                                  tool_name="ExitPlanMode", tool_input=plan, tool_use_id="toolu_e"))
    event = hook_event("PermissionRequest", claude, project, mode="plan",
                       tool_name="ExitPlanMode", tool_input=plan)

    def post() -> Any:
        with hooks.server.client(timeout=60) as http:
            return post_hook(http, event).output

    answered = pool.submit(post)
    pending = waiting(hooks.http, session_id)
    responded = hooks.http.post(
        f"/v1/sessions/{session_id}/interactions/{pending['interactionId']}/respond",
        json={"decision": "modify", "input": {"plan": edited}})
    assert responded.status_code == 200, responded.text
    assert answered.result(timeout=30)["hookSpecificOutput"]["decision"] == {
        "behavior": "allow", "updatedInput": {**plan, "plan": edited}}


def test_a_plan_approved_here_stays_the_hosts_to_finish_when_another_process_starts(
        tmp_path: Path) -> None:
    # Claude Code runs the plan it asked about once the answer is handed back; a second process
    # opening the store before its result comes must not take the answered call for one of
    # its own that a crash left unfinished (re-asked, then approved and completed here).
    import json

    from sessionledger.claude_code.hooks import answer_hook
    from sessionledger.claude_code.recorder import Recorder
    from sessionledger.service.sessions import SessionService

    url, project = f"sqlite:///{tmp_path / 'ledger.db'}", tmp_path / "p"
    project.mkdir()
    claude = str(uuid.uuid4())
    session_id = ledger_session_id(claude)

    def event(name: str, **fields: Any) -> bytes:
        return json.dumps(hook_event(name, claude, project, permission_mode="plan",
                                     **fields)).encode()

    plan = {"plan": "# Plan\n1. Port it\n"}
    first = SessionService.open(url, workspace_root=tmp_path)
    try:
        recorder = Recorder(first)
        answer_hook(recorder, event("UserPromptSubmit", prompt="plan it"))
        first.set_answer_in(session_id, "here")
        answer_hook(recorder, event("PreToolUse", tool_name="ExitPlanMode", tool_input=plan,
                                    tool_use_id="toolu_1"))
        answer_hook(recorder, event("PermissionRequest", tool_name="ExitPlanMode",
                                    tool_input=plan), hold_s=0)
        (waiting,) = first.tools.pending_interactions(session_id)
        first.tools.respond(session_id, waiting["interactionId"], "approve")
    finally:
        first.close()
    second = SessionService.open(url, workspace_root=tmp_path)
    try:
        assert second.tools.pending_interactions(session_id) == []
        kinds = [e.type for e in second.store.read_session(session_id)]
    finally:
        second.close()
    assert kinds[-2:] == ["InteractionRequested", "InteractionResolved"], kinds
    assert "PlanApprovalCancelled" not in kinds and "PlanApproved" not in kinds, kinds
