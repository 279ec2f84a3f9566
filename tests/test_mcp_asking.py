"""A call that waits for a person over MCP: withdrawn when its caller leaves (issue 21, D157).

First the service operation every face shares, :meth:`ToolService.withdraw`, with a manual
clock over both backends: the interaction is resolved ``withdrawn`` by the host, its call
completes ``cancelled``, its timer ends and the next question of the queue reaches the head; a
withdrawn plan approval leaves Plan on with nothing approved; a resolved one is 409 and
nothing changes. Then the MCP server over real SDK clients (stdio and HTTP ``serve``, the
2025-11-25 handshake era and the 2026-07-28 era).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from timer_support import Ledger, question, timer

from sessionledger.errors import Conflict, InvalidInput, NotFound
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
