"""``sessionledger mcp`` over stdio, driven by the ``mcp`` SDK's own client (issue 12).

The installed command is spawned per connection with a temporary SQLite log and workspace.
The tests list the tools (valid JSON Schema, the contracts' descriptions, the descriptors'
annotations), write and read todos, answer a question and plan approvals through an
elicitation callback, leave them pending for a client without elicitation and answer them over
HTTP, resume a session after the server is killed, and compare the log an MCP session leaves
with the log of the same calls made over HTTP.
"""

from __future__ import annotations

import subprocess
from collections.abc import Awaitable, Callable
from contextlib import closing
from pathlib import Path
from typing import Any

import anyio
import pytest
from jsonschema import Draft202012Validator
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp_support import (
    PLAN,
    QUESTION,
    TODOS,
    Answers,
    NeverAnswers,
    kill_servers,
    masked,
    mcp_client,
    normalized,
    server_params,
    text_of,
)
from mcp_types import INVALID_PARAMS
from server_support import in_process_client, sessionledger_command
from tool_support import CATALOG_TOML

from eventlog import open_store
from sessionledger import SessionService
from sessionledger.claude_code.observations import ledger_session_id
from sessionledger.mcp import SESSION_META
from sessionledger.permission.descriptors import SERVICE_TOOLS
from sessionledger.tools.ask import ALL_ANSWERED_PREFIX
from sessionledger.tools.plan import APPROVED_PREFIX, NOT_APPROVED, REVIEW_QUESTION
from sessionledger.tools.service import default_registry


@pytest.fixture
def ledger(tmp_path: Path) -> tuple[str, Path]:
    workspace = tmp_path / "work"
    workspace.mkdir()
    return f"sqlite:///{tmp_path / 'ledger.db'}", workspace


def run(scenario: Callable[[], Awaitable[None]]) -> None:
    anyio.run(scenario)


def only_session(db_url: str, workspace: Path) -> str:
    service = SessionService.open(db_url, workspace_root=workspace)
    try:
        (summary,) = service.summaries()
        return summary.session_id
    finally:
        service.close()


def test_lists_the_tools_with_contract_schemas_and_descriptor_annotations(
    ledger: tuple[str, Path],
) -> None:
    registry = default_registry()

    async def scenario() -> None:
        async with mcp_client(*ledger) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
        assert set(tools) == {
            "TodoRead", "TodoWrite", "AskUserQuestion", "EnterPlanMode", "ExitPlanMode",
            "ReadSessionContext", "InteractionStatus",
        }  # ListModels only with the dynamic-workflow flag
        for name, tool in tools.items():
            Draft202012Validator.check_schema(tool.input_schema)
            assert tool.annotations is not None
            if name == "InteractionStatus":
                assert tool.annotations.read_only_hint is True
                assert tool.input_schema["required"] == ["interactionId"]
                continue
            descriptor = SERVICE_TOOLS[name]
            assert tool.annotations.read_only_hint is descriptor.read_only
            assert tool.annotations.destructive_hint is descriptor.destructive
            handler = registry.handler(name)
            if handler is not None:  # the store-free registry holds todos and questions
                assert tool.input_schema == handler.model_schema()
                assert tool.description == handler.description

    run(scenario)


def test_todo_write_then_todo_read(ledger: tuple[str, Path]) -> None:
    async def scenario() -> None:
        async with mcp_client(*ledger) as client:
            written = await client.call_tool("TodoWrite", TODOS)
            assert not written.is_error
            assert written.structured_content["status"] == "completed"
            read = await client.call_tool("TodoRead", {})
        assert not read.is_error
        assert "Write the tests" in text_of(read)
        assert read.structured_content["result"]["todos"] == TODOS["todos"]

    run(scenario)


def test_bad_input_is_an_error_result_and_appends_nothing(ledger: tuple[str, Path]) -> None:
    async def scenario() -> None:
        async with mcp_client(*ledger) as client:
            bad = await client.call_tool("TodoWrite", {"todos": "no"})
            # issue 21 finding 7: an unknown tool is the JSON-RPC error of the MCP spec
            with pytest.raises(MCPError) as unknown:
                await client.call_tool("CronList", {})
        assert bad.is_error and bad.structured_content["error"]["code"] == "invalid_input"
        assert (unknown.value.error.code, unknown.value.error.message) == (
            INVALID_PARAMS, "Unknown tool: CronList")

    run(scenario)
    service = SessionService.open(ledger[0], workspace_root=ledger[1])
    try:
        assert service.summaries() == []  # refused before a session was made (issue 41)
    finally:
        service.close()


def test_question_answered_through_elicitation(ledger: tuple[str, Path]) -> None:
    answers = Answers(("accept", {"q1": "Postgres"}))

    async def scenario() -> None:
        async with mcp_client(*ledger, elicitation=answers) as client:
            result = await client.call_tool("AskUserQuestion", QUESTION)
        assert not result.is_error
        assert text_of(result).startswith(f'{ALL_ANSWERED_PREFIX}"Which database?"="Postgres"')

    run(scenario)
    (asked,) = answers.asked
    assert asked.requested_schema["properties"]["q1"]["enum"] == [
        "SQLite (Recommended)", "Postgres"
    ]
    service = SessionService.open(ledger[0], workspace_root=ledger[1])
    try:
        (summary,) = service.summaries()
        resolved = [e for e in service.iter_events(summary.session_id)
                    if e.type == "InteractionResolved"]
        assert [e.to_wire()["data"]["decision"] for e in resolved] == ["modify"]
        assert [e.actor for e in resolved] == ["user"]
    finally:
        service.close()


def test_question_declined_through_elicitation_completes_as_declined(
    ledger: tuple[str, Path],
) -> None:
    async def scenario() -> None:
        async with mcp_client(*ledger, elicitation=Answers(("decline", None))) as client:
            result = await client.call_tool("AskUserQuestion", QUESTION)
        assert result.is_error
        assert result.structured_content["status"] == "completed"
        assert result.structured_content["success"] is False

    run(scenario)


def test_a_form_declined_faster_than_a_person_leaves_the_call_pending(  # issue 40 finding 3
    ledger: tuple[str, Path],
) -> None:
    # Codex's headless run declines every form in 1-2 ms: no person saw it. The call stays
    # pending for the web page (nothing is recorded as the user's answer), and a person's
    # decline a moment later is still the user's.
    answers = Answers(("decline", None), ("decline", None), decline_after_s=0.0)

    async def scenario() -> None:
        async with mcp_client(*ledger, elicitation=answers) as client:
            quick = await client.call_tool("AskUserQuestion", QUESTION)
            assert not quick.is_error and quick.structured_content["status"] == "pending"
            assert text_of(quick).startswith("Waiting for the user")
            await client.call_tool("EnterPlanMode", {})
            plan = await client.call_tool("ExitPlanMode", PLAN)
            assert plan.structured_content["status"] == "pending"
        async with mcp_client(*ledger, elicitation=Answers(("decline", None))) as client:
            person = await client.call_tool("AskUserQuestion", QUESTION)
            assert person.is_error and person.structured_content["success"] is False

    run(scenario)
    assert len(answers.asked) == 2
    with closing(open_store(ledger[0])) as store:
        resolved = [e.to_wire()["data"]["decision"] for e in store.read_all()
                    if e.type == "InteractionResolved"]
    assert resolved == ["deny"]  # the person's, in the second connection's session only


def test_no_elicitation_never_asks_the_clients_form(  # issue 40: --no-elicitation
    ledger: tuple[str, Path],
) -> None:
    answers = Answers(("accept", {"q1": "Postgres"}))

    async def scenario() -> None:
        async with mcp_client(*ledger, "--no-elicitation", elicitation=answers) as client:
            asked = await client.call_tool("AskUserQuestion", QUESTION)
            assert asked.structured_content["status"] == "pending"
            assert text_of(asked).startswith("Waiting for the user")

    run(scenario)
    assert answers.asked == []


def test_question_without_elicitation_is_pending_until_answered_over_http(
    ledger: tuple[str, Path],
) -> None:
    db_url, workspace = ledger
    pending: dict[str, Any] = {}

    async def ask() -> None:
        async with mcp_client(db_url, workspace, "--web-url", "http://localhost:9999") as client:
            result = await client.call_tool("AskUserQuestion", QUESTION)
            pending.update(result.structured_content)
            assert not result.is_error and pending["status"] == "pending"
            iid = pending["interactionId"]
            assert iid in text_of(result)
            assert "http://localhost:9999/#/sessions/sess_" in text_of(result)
            waiting = await client.call_tool("InteractionStatus", {"interactionId": iid})
            assert waiting.structured_content["status"] == "pending"
            await anyio.to_thread.run_sync(answer_over_http)
            done = await client.call_tool("InteractionStatus", {"interactionId": iid})
        assert done.structured_content["status"] == "completed"
        assert text_of(done).startswith(f'{ALL_ANSWERED_PREFIX}"Which database?"="SQLite')

    def answer_over_http() -> None:
        session_id = only_session(db_url, workspace)
        with in_process_client(workspace, store_url=db_url) as (http, _service):
            response = http.post(
                f"/v1/sessions/{session_id}/interactions/{pending['interactionId']}/respond",
                json={"decision": "modify", "input": {
                    **QUESTION, "answers": {"Which database?": "SQLite (Recommended)"}}},
            )
            assert response.status_code == 200, response.text

    run(ask)


@pytest.mark.parametrize(
    ("reply", "decision", "text", "plan_after"),
    [
        (("accept", {"decision": "Approve"}), "approve", APPROVED_PREFIX, False),
        (("accept", {"feedback": "Split step 2"}), "feedback", NOT_APPROVED, True),
        (("decline", None), "deny", None, True),
    ],
    ids=["approved", "feedback", "declined"],
)
def test_plan_approval_through_elicitation(
    ledger: tuple[str, Path], reply: tuple[str, dict[str, Any] | None], decision: str,
    text: str | None, plan_after: bool,
) -> None:
    answers = Answers(reply)

    async def scenario() -> None:
        async with mcp_client(*ledger, elicitation=answers) as client:
            entered = await client.call_tool("EnterPlanMode", {})
            assert text_of(entered).endswith("DO NOT write or edit any files yet")
            result = await client.call_tool("ExitPlanMode", PLAN)
        if text is not None:
            assert text_of(result).startswith(text)
        assert result.is_error is (decision != "approve")

    run(scenario)
    (asked,) = answers.asked
    assert asked.message.startswith(REVIEW_QUESTION) and PLAN["plan"] in asked.message
    service = SessionService.open(ledger[0], workspace_root=ledger[1])
    try:
        (summary,) = service.summaries()
        assert summary.execution.plan_enabled is plan_after
        resolved = [e.to_wire()["data"]["decision"] for e in service.iter_events(
            summary.session_id) if e.type == "InteractionResolved"]
        assert resolved == [decision]
    finally:
        service.close()
    plan_file = ledger[1] / ".zcode" / "plans" / f"plan-{summary.session_id}.md"
    assert plan_file.exists() is (decision == "approve")


def test_a_resumed_session_keeps_todos_mode_and_pending_interactions(
    ledger: tuple[str, Path],
) -> None:
    db_url, workspace = ledger
    first: dict[str, Any] = {}

    async def before() -> None:
        async with mcp_client(db_url, workspace) as client:
            await client.call_tool("TodoWrite", TODOS)
            await client.call_tool("EnterPlanMode", {})
            asked = await client.call_tool("AskUserQuestion", QUESTION)
            first.update(asked.structured_content)
            assert await anyio.to_thread.run_sync(kill_servers, db_url) == 1

    async def after(session_id: str) -> None:
        async with mcp_client(db_url, workspace, "--session", session_id) as client:
            read = await client.call_tool("TodoRead", {})
            assert read.structured_content["result"]["todos"] == TODOS["todos"]
            status = await client.call_tool(
                "InteractionStatus", {"interactionId": first["interactionId"]}
            )
            assert status.structured_content["status"] == "pending"

    run(before)  # the server was killed with SIGKILL mid-connection
    session_id = only_session(db_url, workspace)
    service = SessionService.open(db_url, workspace_root=workspace)
    try:
        before_doc = service.document(session_id)
    finally:
        service.close()
    run(lambda: after(session_id))
    service = SessionService.open(db_url, workspace_root=workspace)
    try:
        after_doc = service.document(session_id)
        assert service.summaries()[0].session_id == session_id  # no new session
    finally:
        service.close()
    assert after_doc["executionState"] == before_doc["executionState"]
    assert after_doc["executionState"]["planEnabled"] is True
    assert after_doc["todos"] == before_doc["todos"]
    assert [i["interactionId"] for i in after_doc["interactions"]] == [first["interactionId"]]


def test_mcp_calls_are_logged_exactly_as_http_calls(ledger: tuple[str, Path]) -> None:
    db_url, workspace = ledger
    answered = {**QUESTION, "answers": {"Which database?": "Postgres"}}

    async def over_mcp() -> None:
        elicit = Answers(("accept", {"q1": "Postgres"}), ("accept", {"decision": "Approve"}))
        async with mcp_client(db_url, workspace, elicitation=elicit) as client:
            await client.call_tool("TodoWrite", TODOS)
            await client.call_tool("EnterPlanMode", {})
            await client.call_tool("AskUserQuestion", QUESTION)
            await client.call_tool("ExitPlanMode", PLAN)

    run(over_mcp)
    mcp_session = only_session(db_url, workspace)
    with in_process_client(workspace, store_url=db_url) as (http, service):
        created = http.post("/v1/sessions", json={})
        sid = created.json()["sessionId"]
        calls = f"/v1/sessions/{sid}/tool-calls"
        http.post(calls, json={"tool": "TodoWrite", "input": TODOS})
        http.post(calls, json={"tool": "EnterPlanMode", "input": {}})
        for tool, body, answer in (
            ("AskUserQuestion", QUESTION, {"decision": "modify", "input": answered}),
            ("ExitPlanMode", PLAN, {"decision": "approve"}),
        ):
            iid = http.post(calls, json={"tool": tool, "input": body}).json()["interactionId"]
            respond = http.post(f"/v1/sessions/{sid}/interactions/{iid}/respond", json=answer)
            assert respond.status_code == 200, respond.text
        assert service.audit(mcp_session)["ok"] is True
        assert normalized(service.iter_events(mcp_session)) == normalized(
            service.iter_events(sid)
        )


def test_list_models_is_offered_when_the_workspace_enables_it(ledger: tuple[str, Path]) -> None:
    db_url, workspace = ledger
    (workspace / ".sessionledger").mkdir()
    (workspace / ".sessionledger" / "config.toml").write_text(CATALOG_TOML, encoding="utf-8")

    async def scenario() -> None:
        async with mcp_client(db_url, workspace) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            listed = await client.call_tool("ListModels", {})
        annotations = tools["ListModels"].annotations
        assert annotations is not None and annotations.read_only_hint is True
        assert not listed.is_error and "/" in text_of(listed)

    run(scenario)


def test_a_dismissed_form_leaves_the_question_pending(ledger: tuple[str, Path]) -> None:
    async def scenario() -> None:
        async with mcp_client(*ledger, elicitation=Answers(("cancel", None))) as client:
            result = await client.call_tool("AskUserQuestion", QUESTION)
            assert result.structured_content["status"] == "pending"
            assert "InteractionStatus" in text_of(result)
            assert result.meta is not None
            session_id = result.meta[SESSION_META]
        assert session_id == only_session(*ledger)

    run(scenario)


def test_replay_and_audit_tell_an_mcp_session_as_an_http_one(ledger: tuple[str, Path]) -> None:
    db_url, workspace = ledger

    async def over_mcp() -> None:
        async with mcp_client(db_url, workspace, elicitation=Answers(
            ("accept", {"feedback": "Smaller steps"}),
        )) as client:
            await client.call_tool("TodoWrite", TODOS)
            await client.call_tool("EnterPlanMode", {})
            await client.call_tool("ExitPlanMode", PLAN)

    run(over_mcp)
    mcp_session = only_session(db_url, workspace)
    with in_process_client(workspace, store_url=db_url) as (http, _service):
        sid = http.post("/v1/sessions", json={}).json()["sessionId"]
        calls = f"/v1/sessions/{sid}/tool-calls"
        http.post(calls, json={"tool": "TodoWrite", "input": TODOS})
        http.post(calls, json={"tool": "EnterPlanMode", "input": {}})
        iid = http.post(calls, json={"tool": "ExitPlanMode", "input": PLAN}).json()[
            "interactionId"]
        http.post(f"/v1/sessions/{sid}/interactions/{iid}/respond",
                  json={"decision": "feedback", "feedback": "Smaller steps"})

    def cli(*args: str) -> list[str]:
        done = subprocess.run(
            [*sessionledger_command(), *args, "--db", db_url], capture_output=True, text=True,
            check=True, cwd=workspace,
        )
        return [line for line in done.stdout.splitlines() if line.strip()]

    assert masked(cli("replay", mcp_session)) == masked(cli("replay", sid))
    assert cli("audit")[-1].startswith("OK: 2 sessions")



def test_a_2026_client_is_asked_in_input_required_rounds(ledger: tuple[str, Path]) -> None:
    answers = Answers(("accept", {"q1": "Postgres"}), ("accept", {"decision": "Approve"}))

    async def scenario() -> None:
        async with Client(server_params(*ledger), elicitation_callback=answers) as client:
            asked = await client.call_tool("AskUserQuestion", QUESTION)
            await client.call_tool("EnterPlanMode", {})
            approved = await client.call_tool("ExitPlanMode", PLAN)
        assert text_of(asked).startswith(f'{ALL_ANSWERED_PREFIX}"Which database?"="Postgres"')
        assert text_of(approved).startswith(APPROVED_PREFIX)

    run(scenario)
    assert len(answers.asked) == 2
    service = SessionService.open(ledger[0], workspace_root=ledger[1])
    try:
        (summary,) = service.summaries()
        decisions = [e.to_wire()["data"]["decision"] for e in service.iter_events(
            summary.session_id) if e.type == "InteractionResolved"]
        assert decisions == ["modify", "approve"]
        assert summary.execution.plan_enabled is False
    finally:
        service.close()


def test_as_the_headless_host_a_question_is_denied_at_once(ledger: tuple[str, Path]) -> None:
    async def scenario() -> None:
        async with mcp_client(*ledger, "--host-kind", "headless") as client:
            result = await client.call_tool("AskUserQuestion", QUESTION)
        assert result.is_error and result.structured_content["status"] == "denied"
        assert text_of(result) == "No permission client configured for AskUserQuestion"

    run(scenario)


def test_resuming_an_unknown_session_fails_before_serving(ledger: tuple[str, Path]) -> None:
    db_url, workspace = ledger
    done = subprocess.run(
        [*sessionledger_command(), "mcp", "--db", db_url, "--session", "sess_nope"],
        capture_output=True, text=True, cwd=workspace, stdin=subprocess.DEVNULL, timeout=60,
    )
    assert done.returncode == 2
    assert "sess_nope" in done.stderr and done.stdout == ""


def test_the_protocol_hosts_timer_auto_continues_a_pending_question(
    ledger: tuple[str, Path],
) -> None:
    async def scenario() -> None:
        async with mcp_client(
            *ledger, "--question-grace-s", "0.2", "--question-deadline-s", "0.5"
        ) as client:
            asked = await client.call_tool("AskUserQuestion", QUESTION)
            iid = asked.structured_content["interactionId"]
            status = asked
            with anyio.fail_after(15):
                while status.structured_content["status"] == "pending":
                    await anyio.sleep(0.1)
                    status = await client.call_tool("InteractionStatus", {"interactionId": iid})
        assert status.structured_content["success"] is True
        assert "rejection" in text_of(status)  # AQ-4's "none answered" text

    run(scenario)
    service = SessionService.open(ledger[0], workspace_root=ledger[1])
    try:
        (summary,) = service.summaries()
        resolved = [e for e in service.iter_events(summary.session_id)
                    if e.type == "InteractionResolved"]
        assert [(e.actor, e.to_wire()["data"]["decision"]) for e in resolved] == [
            ("timer", "autoContinued")
        ]
    finally:
        service.close()


def test_a_form_left_open_past_the_deadline_is_withdrawn_and_the_call_continues(
    ledger: tuple[str, Path],
) -> None:
    # HO-4 on the protocol host: the countdown runs while the form is open; when the timer
    # continues the call the form is withdrawn and the call answers as the log says.
    form = NeverAnswers()

    async def scenario() -> None:
        async with mcp_client(
            *ledger, "--question-grace-s", "0.2", "--question-deadline-s", "0.5",
            elicitation=form,
        ) as client:
            with anyio.fail_after(30):
                asked = await client.call_tool("AskUserQuestion", QUESTION)
        assert asked.structured_content["status"] == "completed"
        assert "rejection" in text_of(asked)  # AQ-4's "none answered" text

    run(scenario)
    assert (form.opened, form.withdrawn) == (1, 1)



def _codex_meta(thread: Any) -> dict[str, Any]:
    """What Codex CLI 0.171 sends with each tools/call (its request's ``_meta``, abridged)."""
    return {"callId": "call_1", "x-codex-turn-metadata": {
        "session_id": thread, "thread_id": thread, "turn_id": "t1", "sandbox": "none"}}


def test_a_codex_call_runs_in_the_session_its_hooks_record_into(
    ledger: tuple[str, Path],
) -> None:  # issue 40: one Codex run, one ledger session
    db_url, workspace = ledger
    hooked = ledger_session_id("thread-a", None, "codex")
    other = ledger_session_id("thread-b", None, "codex")
    with closing(SessionService.open(db_url, workspace_root=workspace)) as service:
        service.create_session(session_id=hooked, client="codex",
                               external_session_id="thread-a")

    gone = ledger_session_id("thread-gone", None, "codex")
    with closing(SessionService.open(db_url, workspace_root=workspace)) as service:
        service.create_session(session_id=gone, client="codex", external_session_id="thread-gone")
        service.delete_session(gone)

    async def scenario() -> None:
        async with mcp_client(*ledger) as client:
            first = await client.call_tool("TodoRead", {})  # no _meta: the process's session
            assert first.structured_content["sessionId"] not in (hooked, other)
            refused = await client.call_tool("TodoRead", {}, meta=_codex_meta("thread-gone"))
            assert refused.is_error and "deleted" in text_of(refused), text_of(refused)
            written = await client.call_tool("TodoWrite", TODOS, meta=_codex_meta("thread-a"))
            assert not written.is_error, text_of(written)
            assert written.structured_content["sessionId"] == hooked
            # a thread the hooks have not told of yet: its session, made here with their id
            fresh = await client.call_tool("TodoRead", {}, meta=_codex_meta("thread-b"))
            assert fresh.structured_content["sessionId"] == other
            assert fresh.structured_content["result"]["todos"] == []
            again = await client.call_tool("TodoRead", {}, meta=_codex_meta("thread-a"))
            assert again.structured_content["result"]["todos"] == TODOS["todos"]
            # bad input is refused naming the session the call named, not the last one used
            bad = await client.call_tool("TodoWrite", {"todos": "x"}, meta=_codex_meta("thread-b"))
            assert bad.is_error and (bad.meta or {}).get(SESSION_META) == other, bad.meta
            bad = await client.call_tool("TodoWrite", {"todos": "x"}, meta=_codex_meta("thread-c"))
            assert bad.is_error and SESSION_META not in (bad.meta or {}), bad.meta  # none yet
            bad = await client.call_tool("TodoWrite", {"todos": "x"},
                                         meta=_codex_meta("thread-gone"))
            assert bad.is_error and SESSION_META not in (bad.meta or {}), bad.meta  # deleted
            bad = await client.call_tool("TodoWrite", {"todos": "x"})  # the process's own
            assert (bad.meta or {}).get(SESSION_META) == first.structured_content["sessionId"]
            # no usable session in _meta (another client, a value that is no id): the process's
            for meta in ({}, {"x-codex-turn-metadata": "thread-a"}, _codex_meta(7),
                         _codex_meta(" "), _codex_meta("a\nb"), _codex_meta("x" * 513)):
                own = await client.call_tool("TodoRead", {}, meta=meta or None)
                assert own.structured_content["sessionId"] not in (hooked, other), meta
                assert own.structured_content["result"]["todos"] == []

    run(scenario)
    with closing(SessionService.open(db_url, workspace_root=workspace)) as service:
        made = service.find_summary(other)
        assert made is not None
        assert (made.client, made.external_session_id) == ("codex", "thread-b")
        assert len(service.store.session_heads()) == 4  # the three threads', the process's
