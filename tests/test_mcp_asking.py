"""A call that waits for a person over MCP: withdrawn when its caller leaves (issue 21, D157).

First the service operation every face shares, :meth:`ToolService.withdraw`, with a manual
clock over both backends: the interaction is resolved ``withdrawn`` by the host, its call
completes ``cancelled``, its timer ends and the next question of the queue reaches the head; a
withdrawn plan approval leaves Plan on with nothing approved; a resolved one is 409 and
nothing changes. Then the MCP server over real SDK clients (stdio and HTTP ``serve``, the
2025-11-25 handshake era and the 2026-07-28 era).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client, ClientSession
from mcp.client.session import ElicitationFnT
from mcp.client.streamable_http import streamable_http_client
from mcp_support import (
    PLAN,
    QUESTION,
    Answers,
    NeverAnswers,
    Scripted,
    UrlOnlySession,
    abandon_once_asked,
    call_resetting_on_progress,
    mcp_client,
    never,
    server_params,
    text_of,
)
from server_support import ServerProcess, in_process_client, running_server
from timer_support import Ledger, question, timer

from eventlog import RecordedEvent
from sessionledger import SessionService
from sessionledger.errors import Conflict, InvalidInput, NotFound
from sessionledger.mcp.asking import WITHDRAW_REASON
from sessionledger.mcp.forms import AGAIN_NOTE
from sessionledger.mcp.server import LedgerMcp, McpOptions, session_page
from sessionledger.tools.ask import ALL_ANSWERED_PREFIX
from sessionledger.tools.executor import withdrawn_text
from sessionledger.tools.plan import WITHDRAWN_PLAN

REASON = "the MCP client cancelled the request"


@pytest.fixture(params=["memory", "sqlite"])
def ledger(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Ledger]:
    subject = Ledger(str(request.param), tmp_path)
    try:
        yield subject
    finally:
        subject.close()


# -- the service operation -----------------------------------------------------------------


def test_a_withdrawn_question_is_cancelled_and_the_next_one_reaches_the_head(  # issue 21 finding 6
    ledger: Ledger,
) -> None:
    sid = ledger.session()
    first = ledger.ask(sid)
    second = ledger.ask(sid, "Which queue?")
    assert ledger.timers(sid) == [timer("hiddenGrace", 0), None]  # HO-4: one clock, the head
    ledger.tick(10)
    done = ledger.service.tools.withdraw(sid, first["interactionId"], reason=REASON)
    assert done == {
        "status": "cancelled", "callId": first["callId"], "success": False,
        "result": {"withdrawn": True, "reason": REASON},
        "modelContent": withdrawn_text(REASON), "turnControl": None, "followUpUserInput": None,
    }
    assert "do not assume" in done["modelContent"]
    resolved, completed = ledger.events(sid, "InteractionResolved", "ToolCallCompleted")[-2:]
    assert (resolved.type, resolved.actor, resolved.data.decision) == (  # type: ignore[union-attr]
        "InteractionResolved", "host", "withdrawn")
    assert (completed.type, completed.actor) == ("ToolCallCompleted", "host")
    assert ledger.service.tools.get(sid, first["callId"]).document == done
    # the queue moved on: the second question is the only one pending, its clock runs now
    pending = ledger.service.tools.pending_interactions(sid)
    assert [p["interactionId"] for p in pending] == [second["interactionId"]]
    assert ledger.timers(sid) == [timer("hiddenGrace", 10)]
    ledger.tick(300)
    assert ledger.service.tools.get(sid, first["callId"]).document == done  # never continued
    assert ledger.service.tools.get(sid, second["callId"]).document["status"] == "completed"


def test_a_resolved_interaction_cannot_be_withdrawn_and_nothing_changes(  # issue 21 finding 6
    ledger: Ledger,
) -> None:
    sid = ledger.session()
    asked = ledger.ask(sid)
    answered = ledger.service.tools.respond(
        sid, asked["interactionId"], "modify",
        input={**question(), "answers": {"Which database?": "SQLite"}},
    )
    version = ledger.service.document(sid)["version"]
    with pytest.raises(Conflict):
        ledger.service.tools.withdraw(sid, asked["interactionId"], reason=REASON)
    assert ledger.service.document(sid)["version"] == version
    with pytest.raises(Conflict):  # and a withdrawn one cannot be answered or withdrawn again
        other = ledger.ask(sid)
        ledger.service.tools.withdraw(sid, other["interactionId"], reason=REASON)
        ledger.service.tools.respond(sid, other["interactionId"], "deny")
    with pytest.raises(NotFound):
        ledger.service.tools.withdraw(sid, "int_unknown", reason=REASON)
    with pytest.raises(InvalidInput):
        ledger.service.tools.withdraw(sid, asked["interactionId"], reason="  ")
    assert ledger.service.tools.get(sid, asked["callId"]).document == answered
    decisions = [e.data.decision  # type: ignore[union-attr]
                 for e in ledger.events(sid, "InteractionResolved")]
    assert decisions == ["modify", "withdrawn"]


def test_a_withdrawn_plan_approval_leaves_plan_on_and_nothing_approved(  # issue 21 finding 6
    ledger: Ledger,
) -> None:
    sid = ledger.session()
    ledger.service.tools.call(sid, "EnterPlanMode", {})
    asked = ledger.service.tools.call(sid, "ExitPlanMode", {"plan": "1. Do it"}).document
    done = ledger.service.tools.withdraw(sid, asked["interactionId"], reason=REASON)
    assert done["status"] == "cancelled" and done["success"] is False
    assert done["result"] == {"withdrawn": True, "reason": REASON, "approved": False}
    assert done["modelContent"] == withdrawn_text(REASON, WITHDRAWN_PLAN)
    assert done["turnControl"] is None  # nothing answered: the turn is the caller's
    assert ledger.service.document(sid)["executionState"]["planEnabled"] is True
    types = [e.type for e in ledger.events(sid)]
    assert "PlanApproved" not in types and "PlanRejected" not in types
    assert not (ledger.root / ".sessionledger" / "plans").exists()
    # the plan can be submitted again and approved
    again = ledger.service.tools.call(sid, "ExitPlanMode", {"plan": "1. Do it"}).document
    approved = ledger.service.tools.respond(sid, again["interactionId"], "approve")
    assert approved["success"] is True
    assert ledger.service.document(sid)["executionState"]["planEnabled"] is False


# -- over MCP: the transports ----------------------------------------------------------------


class Surface:
    """One ledger session served over one transport, and a way to answer it elsewhere.

    ``stdio``: ``sessionledger mcp --session`` over a SQLite file (an answer through the HTTP
    app of the test process is another process's); ``http``: a real ``serve`` with the MCP
    endpoint, resumed by ``/mcp?session=`` (an answer through its respond endpoint is in the
    server's own process)."""

    def __init__(
        self, kind: str, db_url: str, workspace: Path, session_id: str,
        server: ServerProcess | None = None, env: dict[str, str] | None = None,
    ) -> None:
        self.kind, self.db_url, self.workspace = kind, db_url, workspace
        self.session_id, self.server, self.env = session_id, server, env or {}

    @asynccontextmanager
    async def connect(
        self, elicitation: ElicitationFnT | None = None,
        session_class: type[ClientSession] = ClientSession,
    ) -> AsyncIterator[ClientSession]:
        """A 2025-11-25 (handshake) client session on this surface."""
        if self.server is None:
            async with mcp_client(
                self.db_url, self.workspace, "--session", self.session_id,
                "--web-url", WEB_URL, elicitation=elicitation, env=self.env,
                session_class=session_class,
            ) as session:
                yield session
            return
        async with (
            streamable_http_client(self.url) as (read, write),
            session_class(read, write, elicitation_callback=elicitation) as session,
        ):
            await session.initialize()
            yield session

    def modern(self, elicitation: ElicitationFnT | None = None) -> Client:
        """A 2026-07-28 client on this surface (the SDK's ``Client`` with its defaults)."""
        if self.server is None:
            params = server_params(self.db_url, self.workspace, "--session", self.session_id,
                                   "--web-url", WEB_URL, env=self.env)
            return Client(params, elicitation_callback=elicitation)
        return Client(self.url, elicitation_callback=elicitation)

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"{self.server.base_url}/mcp?session={self.session_id}"

    @property
    def page(self) -> str:
        base = WEB_URL if self.server is None else f"{self.server.base_url}/"
        return session_page(base, self.session_id)

    def respond(self, interaction_id: str, body: dict[str, Any]) -> dict[str, Any]:
        """Answer through ``POST …/respond`` (blocking: call it in a thread)."""
        path = f"/v1/sessions/{self.session_id}/interactions/{interaction_id}/respond"
        if self.server is not None:
            with self.server.client() as http:
                response = http.post(path, json=body)
        else:
            with in_process_client(self.workspace, store_url=self.db_url) as (http, _service):
                response = http.post(path, json=body)
        assert response.status_code == 200, response.text
        return dict(response.json())

    def log(self) -> list[RecordedEvent]:
        service = SessionService.open(self.db_url, workspace_root=self.workspace)
        try:
            return list(service.iter_events(self.session_id))
        finally:
            service.close()

    def decisions(self) -> list[tuple[str, str]]:
        return [(e.actor, e.to_wire()["data"]["decision"]) for e in self.log()
                if e.type == "InteractionResolved"]

    def pending(self) -> list[str]:
        service = SessionService.open(self.db_url, workspace_root=self.workspace)
        try:
            return [i["interactionId"]
                    for i in service.tools.pending_interactions(self.session_id)]
        finally:
            service.close()

    def call(self, call_id: str) -> dict[str, Any]:
        service = SessionService.open(self.db_url, workspace_root=self.workspace)
        try:
            return service.tools.get(self.session_id, call_id).document
        finally:
            service.close()

    async def until(self, check: Callable[[], bool], what: str) -> None:
        """Wait (reading the log, at most 30 s) until ``check()`` holds."""
        with anyio.fail_after(30):
            while not await anyio.to_thread.run_sync(check):
                await anyio.sleep(0.05)
        assert await anyio.to_thread.run_sync(check), what


@contextmanager
def surface(kind: str, tmp_path: Path, env: dict[str, str] | None = None) -> Iterator[Surface]:
    """A fresh session on ``kind`` (``stdio`` or ``http``) whose servers see ``env``."""
    if kind == "http":
        with running_server(tmp_path, env=env) as server:
            with server.client() as http:
                session_id = http.post("/v1/sessions", json={}).json()["sessionId"]
            yield Surface(kind, server.db_url, server.workspace, session_id, server, env)
        return
    workspace = tmp_path / "work"
    workspace.mkdir()
    db_url = f"sqlite:///{tmp_path / 'ledger.db'}"
    service = SessionService.open(db_url, workspace_root=workspace)
    try:
        session_id = str(service.create_session(host="protocol")["sessionId"])
    finally:
        service.close()
    yield Surface(kind, db_url, workspace, session_id, env=env)


TRANSPORTS = ["stdio", "http"]
WEB_URL = "http://127.0.0.1:9999/"
SECOND = {"questions": [{**QUESTION["questions"][0], "question": "Which queue?"}]}
PROGRESS = {"SESSIONLEDGER_MCP_PROGRESS_S": "0.25"}
LATE_AFTER = 12
"""The progress notifications a late person waits for before answering: 3 s at least."""


# -- a cancelled call is withdrawn and the queue moves on (finding 6, acceptance 2) -----------


@pytest.mark.parametrize("kind", TRANSPORTS)
def test_a_host_that_times_out_withdraws_its_question_and_the_next_one_starts(  # issue 21 finding 6
    kind: str, tmp_path: Path,
) -> None:
    with surface(kind, tmp_path) as where:
        async def second_at_the_head(params: types.ElicitRequestParams) -> types.ElicitResult:
            # asked right after the timeout: the first question left the queue, this one is
            # the only one waiting (and so the one whose clock runs)
            await where.until(lambda: len(where.pending()) == 1, "the first was withdrawn")
            return types.ElicitResult(action="accept", content={"q1": "Postgres"})

        form = Scripted(never, second_at_the_head)

        async def scenario() -> None:
            async with where.connect(form) as client:
                # The host gives up on the open form (notifications/cancelled).
                await abandon_once_asked(client, form, "AskUserQuestion", QUESTION)
                with anyio.fail_after(30):
                    answered = await client.call_tool("AskUserQuestion", SECOND)
                assert text_of(answered).startswith(f'{ALL_ANSWERED_PREFIX}"Which queue?"=')

        anyio.run(scenario)
        assert form.withdrawn == 1 and len(form.asked) == 2
        assert where.decisions() == [("host", "withdrawn"), ("user", "modify")]
        log = where.log()
        (first, second) = [e.data for e in log if e.type == "InteractionRequested"]
        cancelled = next(e for e in log if e.type == "ToolCallCompleted")
        assert cancelled.actor == "host" and cancelled.data.status == "cancelled"  # type: ignore[union-attr]
        document = where.call(first.call_id)  # type: ignore[union-attr]
        assert document["status"] == "cancelled" and document["result"]["withdrawn"] is True
        assert document["modelContent"] == withdrawn_text(WITHDRAW_REASON)
        started = [e.data.interaction_id for e in log  # type: ignore[union-attr]
                   if e.type == "InteractionAutoResolutionChanged"
                   and e.data.state == "hiddenGrace"]  # type: ignore[union-attr]
        assert second.interaction_id in started  # type: ignore[union-attr]


def test_a_cancelled_plan_approval_leaves_plan_on_and_the_plan_unapproved(  # issue 21 finding 6
    tmp_path: Path,
) -> None:
    with surface("http", tmp_path) as where:
        form = Scripted(never)

        async def scenario() -> None:
            async with where.connect(form) as client:
                await client.call_tool("EnterPlanMode", {})
                await abandon_once_asked(client, form, "ExitPlanMode", PLAN)
            await where.until(lambda: not where.pending(), "the approval was withdrawn")

        anyio.run(scenario)
        assert where.decisions() == [("host", "withdrawn")]
        types_seen = [e.type for e in where.log()]
        assert "PlanApproved" not in types_seen and "PlanRejected" not in types_seen
        with where.server.client() as http:  # type: ignore[union-attr]
            state = http.get(f"/v1/sessions/{where.session_id}").json()["executionState"]
        assert state["planEnabled"] is True
        assert not (where.workspace / ".zcode" / "plans").exists()


def test_a_client_that_leaves_with_a_form_open_withdraws_it(  # issue 21 finding 6
    tmp_path: Path,
) -> None:
    with surface("stdio", tmp_path) as where:
        form = Scripted(never)

        async def scenario() -> None:
            async with where.connect(form) as client, anyio.create_task_group() as group:
                group.start_soon(client.call_tool, "AskUserQuestion", QUESTION)
                with anyio.fail_after(30):
                    while not form.asked:
                        await anyio.sleep(0.05)
                group.cancel_scope.cancel()  # the host goes away with its call waiting

        anyio.run(scenario)
        assert where.decisions() == [("host", "withdrawn")]
        assert where.pending() == []


# -- progress while a person answers (finding 3, acceptance 2, D157) ---------------------------


@pytest.mark.parametrize("kind", TRANSPORTS)
def test_a_host_resetting_its_timeout_on_progress_gets_a_late_answer(  # issue 21 finding 3
    kind: str, tmp_path: Path,
) -> None:
    # The host gives up 2.5 s after the last sign of life; the person answers once the 12th
    # progress notification came, at least 3 s after the call (progress every 0.25 s, never
    # sooner). Only progress can keep the request alive that long, and the answer comes back
    # as the result. (Counted, not slept: a busy machine may stretch the intervals up to ten
    # times before the host gives up: issue 36.)
    with surface(kind, tmp_path, env=PROGRESS) as where:
        progress: list[float] = []

        async def late(params: types.ElicitRequestParams) -> types.ElicitResult:
            with anyio.fail_after(60):
                while len(progress) < LATE_AFTER:
                    await anyio.sleep(0.01)
            return types.ElicitResult(action="accept", content={"q1": "Postgres"})

        async def scenario() -> None:
            async with where.connect(Scripted(late)) as client:
                started = anyio.current_time()
                result, _ = await call_resetting_on_progress(
                    client, "AskUserQuestion", QUESTION, timeout_s=2.5, progress=progress
                )
                waited = anyio.current_time() - started
            assert result is not None, "the host timed out: no progress arrived"
            assert text_of(result).startswith(f'{ALL_ANSWERED_PREFIX}"Which database?"="Postgres"')
            assert waited > 2.5  # longer than the host would have waited without progress
            assert len(progress) >= LATE_AFTER
            assert progress == [float(n) for n in range(1, len(progress) + 1)]

        anyio.run(scenario)
        assert where.decisions() == [("user", "modify")]


# -- waiting without reading the log (finding 6, D157) -----------------------------------------


def test_open_forms_read_the_log_only_when_an_answer_commits(  # issue 21 finding 6
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Five forms left open: woken by the commit notice, never polled (the slow poll is a
    # minute here). Each reads its call once when it opens, then once more when answered.
    service = SessionService.open(f"sqlite:///{tmp_path / 'ledger.db'}", workspace_root=tmp_path)
    reads: list[str] = []
    get = service.tools.get

    def counted(session_id: str, call_id: str) -> Any:
        reads.append(call_id)
        return get(session_id, call_id)

    monkeypatch.setattr(service.tools, "get", counted)
    session_id = str(service.create_session(host="protocol")["sessionId"])
    ledger = LedgerMcp(service, McpOptions(session_id=session_id, answer_poll_s=60))
    forms = NeverAnswers()
    results: list[types.CallToolResult] = []

    async def ask(client: Client, number: int) -> None:
        asked = {"questions": [{**QUESTION["questions"][0], "question": f"Which {number}?"}]}
        results.append(await client.call_tool("AskUserQuestion", asked))

    async def scenario() -> None:
        async with Client(ledger.server(), mode="legacy", elicitation_callback=forms) as client:
            async with anyio.create_task_group() as group:
                for number in range(5):
                    group.start_soon(ask, client, number)
                with anyio.fail_after(30):
                    while forms.opened < 5 or len(reads) < 5:
                        await anyio.sleep(0.05)
                opened = list(reads)
                await anyio.sleep(1.5)  # the old watch read each call every 0.5 s
                assert reads == opened, "an open form read the log with nothing committed"
                first = (await anyio.to_thread.run_sync(
                    service.tools.pending_interactions, session_id))[0]
                answer = {"questions": first["payload"]["questions"],
                          "answers": {first["payload"]["questions"][0]["question"]: "Postgres"}}
                await anyio.to_thread.run_sync(lambda: service.tools.respond(
                    session_id, first["interactionId"], "modify", input=answer))
                with anyio.fail_after(30):
                    while not results:
                        await anyio.sleep(0.05)
                assert reads == [*opened, first["callId"]]  # only the answered call looked
                group.cancel_scope.cancel()

    try:
        anyio.run(scenario)
        assert results[0].structured_content["status"] == "completed"
        assert forms.withdrawn == 5  # the answered form, and the four its host gave up on
        decisions = [e.to_wire()["data"]["decision"] for e in service.iter_events(session_id)
                     if e.type == "InteractionResolved"]
        assert sorted(decisions) == ["modify"] + ["withdrawn"] * 4
    finally:
        service.close()


# -- answered elsewhere while the form is open (finding 4) -------------------------------------


ELSEWHERE = {"decision": "modify",
             "input": {**QUESTION, "answers": {"Which database?": "Postgres"}}}


def test_a_form_answered_elsewhere_on_2025_is_withdrawn_at_the_commit(  # issue 21 finding 4
    tmp_path: Path,
) -> None:
    # The respond endpoint is in serve's process: its commit wakes the call at once (the
    # slow poll is ten minutes here), the form is withdrawn and the recorded answer returned.
    with surface("http", tmp_path, env={"SESSIONLEDGER_MCP_ANSWER_POLL_S": "600"}) as where:
        form = Scripted(never)

        async def scenario() -> None:
            async with where.connect(form) as client, anyio.create_task_group() as group:
                async def answer_elsewhere() -> None:
                    await where.until(lambda: bool(where.pending()), "the question is asked")
                    (iid,) = await anyio.to_thread.run_sync(where.pending)
                    await anyio.to_thread.run_sync(where.respond, iid, ELSEWHERE)

                group.start_soon(answer_elsewhere)
                with anyio.fail_after(30):
                    asked = await client.call_tool("AskUserQuestion", QUESTION)
            assert text_of(asked).startswith(f'{ALL_ANSWERED_PREFIX}"Which database?"="Postgres"')

        anyio.run(scenario)
        assert form.withdrawn == 1
        assert where.decisions() == [("user", "modify")]


def test_a_form_answered_elsewhere_on_2026_says_its_answer_was_not_used(  # issue 21 finding 4
    tmp_path: Path,
) -> None:
    # A 2026-07-28 form cannot be withdrawn (no request is open while the person fills it
    # in): its late answer is not recorded, and the result says so, with the recorded one.
    with surface("http", tmp_path) as where:
        async def answered_meanwhile(params: types.ElicitRequestParams) -> types.ElicitResult:
            (iid,) = await anyio.to_thread.run_sync(where.pending)
            await anyio.to_thread.run_sync(where.respond, iid, ELSEWHERE)
            return types.ElicitResult(action="accept", content={"q1": "SQLite (Recommended)"})

        async def scenario() -> None:
            async with where.modern(Scripted(answered_meanwhile)) as client:
                asked = await client.call_tool("AskUserQuestion", QUESTION)
            text = text_of(asked)
            assert text.startswith("This question was already answered on another surface")
            assert "the answer in the form was not used." in text
            assert f'{ALL_ANSWERED_PREFIX}"Which database?"="Postgres"' in text
            assert asked.structured_content["answeredElsewhere"] is True
            assert asked.structured_content["answeredBy"] == "user"
            assert asked.structured_content["answeredAt"] in text

        anyio.run(scenario)
        assert where.decisions() == [("user", "modify")]  # the form's answer was not recorded


# -- an accepted empty form (finding 5) ---------------------------------------------------------


ERAS = ["2025-11-25", "2026-07-28"]


@asynccontextmanager
async def on_era(
    where: Surface, era: str, elicitation: ElicitationFnT
) -> AsyncIterator[ClientSession | Client]:
    if era == "2026-07-28":
        async with where.modern(elicitation) as modern:
            yield modern
    else:
        async with where.connect(elicitation) as handshake:
            yield handshake


@pytest.mark.parametrize("era", ERAS)
def test_an_empty_form_is_asked_once_more_then_left_pending(  # issue 21 finding 5
    era: str, tmp_path: Path,
) -> None:
    with surface("stdio", tmp_path) as where:
        forms = Answers(("accept", {}), ("accept", {"q1": "", "q1_other": "  "}),
                        ("accept", {}), ("accept", {"q1": "Postgres"}))

        async def scenario() -> None:
            async with on_era(where, era, forms) as client:
                pending = await client.call_tool("AskUserQuestion", QUESTION)
                assert pending.structured_content["status"] == "pending"
                assert not pending.is_error and "Waiting for the user" in text_of(pending)
                assert await anyio.to_thread.run_sync(where.decisions) == []  # nothing recorded
                answered = await client.call_tool("AskUserQuestion", SECOND)
            assert text_of(answered).startswith(f'{ALL_ANSWERED_PREFIX}"Which queue?"="Postgres"')

        anyio.run(scenario)
        messages = [asked.message for asked in forms.asked]
        assert len(messages) == 4
        assert messages[1].startswith(AGAIN_NOTE) and messages[3].startswith(AGAIN_NOTE)
        assert not messages[0].startswith(AGAIN_NOTE)
        assert where.decisions() == [("user", "modify")]
        assert len(where.pending()) == 1  # the first question still waits for the user


# -- an answer the form did not offer (finding 7) -----------------------------------------------


@pytest.mark.parametrize("era", ERAS)
def test_an_answer_outside_the_options_is_refused_and_the_call_still_waits(  # issue 21 finding 7
    era: str, tmp_path: Path,
) -> None:
    with surface("stdio", tmp_path) as where:
        forms = Answers(("accept", {"q1": "MySQL"}))

        async def scenario() -> None:
            async with on_era(where, era, forms) as client:
                refused = await client.call_tool("AskUserQuestion", QUESTION)
            assert refused.is_error
            assert '"MySQL"' in text_of(refused) and "not one of the options" in text_of(refused)
            assert refused.structured_content["error"]["code"] == "invalid_input"

        anyio.run(scenario)
        assert where.decisions() == []
        assert len(where.pending()) == 1  # nothing recorded: it waits for another answer


# -- URL elicitation: a client that offers only that is sent to the web page (finding 7) ------


def test_a_client_offering_only_url_elicitation_is_sent_to_the_web_page(  # issue 21 finding 7
    tmp_path: Path,
) -> None:
    # The answer is given on the page's server (another process here): the call waits for it
    # to reach the log and returns it.
    with surface("stdio", tmp_path, env={"SESSIONLEDGER_MCP_ANSWER_POLL_S": "0.2"}) as where:
        async def open_the_page(params: types.ElicitRequestParams) -> types.ElicitResult:
            assert isinstance(params, types.ElicitRequestURLParams)
            (iid,) = await anyio.to_thread.run_sync(where.pending)
            assert params.url == where.page and params.elicitation_id == iid
            await anyio.to_thread.run_sync(where.respond, iid, ELSEWHERE)
            return types.ElicitResult(action="accept")

        form = Scripted(open_the_page)

        async def scenario() -> None:
            async with where.connect(form, session_class=UrlOnlySession) as client:
                with anyio.fail_after(30):
                    asked = await client.call_tool("AskUserQuestion", QUESTION)
            assert text_of(asked).startswith(f'{ALL_ANSWERED_PREFIX}"Which database?"="Postgres"')

        anyio.run(scenario)
        assert len(form.asked) == 1
        assert where.decisions() == [("user", "modify")]
