"""Plan mode driven by random commands and restarts, compared with a plain model (STYLE 5).

The service over a SQLite file takes random EnterPlanMode calls, ExitPlanMode submissions,
answers (approve, feedback, deny), approvals interrupted between the decision and the exit
(PM-7: the decision alone appended, then a restart; the plan is asked again, D65), ``/mode``
commands, goals and restarts. A reference model
knows the mode, the Plan switch, the goal, the waiting approvals and the last approved plan.
Invariants: Plan and Goal are never both on; the live state equals the model and a fresh fold
of the log; every chain verifies; the plan file exists exactly when a plan was approved and
holds the last approved plan byte for byte (PM-7).
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from eventlog import InteractionResolved, NewEvent
from projections import compare_session
from sessionledger import SessionService
from sessionledger.errors import CommandRefused, InvalidInput
from sessionledger.tools.plan_files import plan_path

PLANS = st.text(alphabet=st.characters(exclude_categories=("Cs",)), min_size=1, max_size=30)
MODES = st.sampled_from(["plan", "build", "edit", "yolo", "auto"])


class PlanLedger(RuleBasedStateMachine):
    """One protocol session, its plan approvals and its plan file."""

    def __init__(self) -> None:
        super().__init__()
        self._tmp = tempfile.TemporaryDirectory(prefix="sessionledger-plan-")
        self.root = Path(self._tmp.name)
        self.url = f"sqlite:///{self.root / 'ledger.db'}"
        self.service = SessionService.open(self.url, workspace_root=self.root)
        self.mode, self.plan_on, self.goal = "build", False, False
        self.waiting: list[str] = []
        self.ids: list[str] = []
        """The waiting approvals' plans and interaction ids, in queue order."""
        self.approved: str | None = None

    def teardown(self) -> None:
        try:
            self.service.close()
        finally:
            self._tmp.cleanup()

    @initialize()
    def create(self) -> None:
        self.sid: str = self.service.create_session()["sessionId"]

    @rule()
    def enter_plan_tool(self) -> None:
        done = self.service.tools.call(self.sid, "EnterPlanMode", {}).document
        assert done["success"] is (not self.goal)
        if not self.goal:
            self.plan_on = True

    @rule(plan=PLANS)
    def submit(self, plan: str) -> None:
        if not plan.strip():
            try:
                self.service.tools.call(self.sid, "ExitPlanMode", {"plan": plan})
            except InvalidInput:
                return
            raise AssertionError("a blank plan was accepted")
        answer = self.service.tools.call(self.sid, "ExitPlanMode", {"plan": plan})
        if not self.plan_on:
            assert answer.document["status"] == "denied"  # PM-2
            return
        assert answer.status_code == 202
        self.waiting.append(plan)
        self.ids.append(answer.document["interactionId"])

    @precondition(lambda self: bool(self.waiting))
    @rule(decision=st.sampled_from(["approve", "feedback", "deny"]), which=st.integers(0, 5))
    def answer(self, decision: str, which: int) -> None:
        index = which % len(self.waiting)
        plan, iid = self.waiting.pop(index), self.ids.pop(index)
        extra: dict[str, Any] = {"feedback": "more detail"} if decision == "feedback" else {}
        done = self.service.tools.respond(self.sid, iid, decision, **extra)  # type: ignore[arg-type]
        assert done["success"] is (decision == "approve")
        if decision == "approve":
            self.approved, self.plan_on = plan, False
        elif self.plan_on:
            stop = done["turnControl"] is not None
            assert stop is (decision == "deny")
            assert (done["followUpUserInput"] is not None) is (decision == "feedback")

    @precondition(lambda self: bool(self.waiting))
    @rule(which=st.integers(0, 5))
    def approve_then_stop(self, which: int) -> None:
        """The approval is on record and the service stops before the file and the exit."""
        index = which % len(self.waiting)
        plan, iid = self.waiting.pop(index), self.ids.pop(index)
        interaction = self.service.projections.interaction(self.service.store, iid)
        assert interaction is not None
        call_id = interaction.body["callId"]
        decision = InteractionResolved(interaction_id=iid, call_id=call_id, decision="approve")
        self.service.store.append(
            self.sid, [NewEvent(decision, actor="user", causation_id=call_id)],
            expected_version=self.service.store.version(self.sid),
        )
        self.restart()
        again = self.service.document(self.sid)["interactions"][-1]  # asked again, last
        assert again["callId"] == call_id and again["payload"]["plan"] == plan
        self.waiting.append(plan)
        self.ids.append(again["interactionId"])

    @rule(mode=MODES)
    def mode_command(self, mode: str) -> None:
        try:
            self.service.set_mode(self.sid, mode)  # type: ignore[arg-type]
        except CommandRefused:
            assert mode == "plan" and self.goal
            return
        if mode == "plan":
            self.plan_on = True
        else:
            self.mode, self.plan_on = mode, False

    @rule()
    def toggle_goal(self) -> None:
        try:
            if self.goal:
                self.service.end_goal(self.sid)
            else:
                self.service.start_goal(self.sid, "ship it")
        except CommandRefused:
            assert self.plan_on and not self.goal
            return
        self.goal = not self.goal

    @rule()
    def restart(self) -> None:
        self.service.close()
        self.service = SessionService.open(self.url, workspace_root=self.root)

    @invariant()
    def state_agrees(self) -> None:
        if not hasattr(self, "sid"):
            return
        state = self.service.document(self.sid)["executionState"]
        assert not (state["planEnabled"] and state["goal"] is not None)
        assert (state["mode"], state["planEnabled"], state["goal"] is not None) == (
            self.mode, self.plan_on, self.goal
        )
        pending = [i["interactionId"] for i in self.service.document(self.sid)["interactions"]]
        assert pending == self.ids
        assert compare_session(self.service.store, self.service.projections, self.sid) == []
        assert all(report.ok for report in self.service.store.verify(self.sid))

    @invariant()
    def plan_file_holds_the_last_approved_plan(self) -> None:
        if not hasattr(self, "sid"):
            return
        target = plan_path(self.service.document(self.sid)["workspace"], self.sid)
        if self.approved is None:
            assert not target.exists()
        else:
            assert target.read_bytes() == self.approved.encode("utf-8")


def test_pm_es_plan_mode_agrees_with_the_model(depth: str) -> None:
    """Fast: 20 examples of 25 steps; slow (``make verify``): longer and more."""
    steps, examples = (25, 20) if depth == "fast" else (80, 200)
    run_state_machine_as_test(PlanLedger, settings=settings(
        settings.default, stateful_step_count=steps, max_examples=examples, deadline=None,
    ))
