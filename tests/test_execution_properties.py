"""Random command sequences through the runtime, against a plain reference model (SPEC §3).

A hypothesis ``RuleBasedStateMachine`` creates one to three sessions in a real SQLite file
(initial modes include the legacy ``plan``), sends every execution-state command through
:class:`ExecutionRuntime` and restarts (closes the store, opens the file again with a new
runtime). The reference model is a few dicts and the SPEC's sentences written out in plain
Python; it shares no code with ``statemachine``. After every step: never Plan and Goal
together (ES-5), the projection equals a fresh fold of the log and the model, runtime memory
equals the model, a refused command appended nothing, every chain verifies, ``seq`` and
global positions are gapless, and ``plan`` is never written as a mode (ES-2).
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from eventlog import (
    EventStore,
    ModeChangeVia,
    NewEvent,
    SessionCreated,
    new_session_id,
    read_execution_state,
)
from projections import compare_session, open_projected_store
from sessionledger.errors import CommandRefused
from sessionledger.ledger import Ledger
from sessionledger.service import CommandResult, ExecutionRuntime
from statemachine.execution import (
    Command,
    Cycle,
    EndGoal,
    EnterPlan,
    LeavePlan,
    SetMode,
    StartGoal,
)

EXCLUSIVE = "Plan and Goal cannot be active at the same time."
PERMISSION_MODES = ("build", "edit", "yolo", "auto")
SHIFT_TAB = {"build": "edit", "edit": "yolo", "yolo": "plan", "auto": "plan", "plan": "build"}
"""ES-4's display-mode cycle; ``plan`` from ``auto`` keeps ``auto`` underneath."""

objectives = st.text(min_size=1, max_size=12)
initial_payloads = st.one_of(
    st.builds(lambda m: {"mode": m}, st.sampled_from(["plan", *PERMISSION_MODES])),
    st.builds(
        lambda m, p: {"mode": m, "planEnabled": p},
        st.sampled_from(PERMISSION_MODES), st.booleans(),
    ),
    st.builds(
        lambda m, o: {"mode": m, "goal": {"objective": o}},
        st.sampled_from(PERMISSION_MODES), objectives,
    ),
)


class Refused(Exception):
    """The model's answer for a command the SPEC refuses; ``exclusive`` for ES-5's."""

    def __init__(self, exclusive: bool) -> None:
        super().__init__(exclusive)
        self.exclusive = exclusive


class Model:
    """Each session's mode, Plan switch, goal and version, changed as SPEC §3 says."""

    def __init__(self) -> None:
        self.mode: dict[str, str] = {}
        self.plan: dict[str, bool] = {}
        self.goal: dict[str, str | None] = {}
        self.version: dict[str, int] = {}

    def create(self, session_id: str, payload: dict[str, Any]) -> None:
        legacy = payload["mode"] == "plan"  # ES-2: {"mode": "plan"} is build with Plan on
        self.mode[session_id] = "build" if legacy else payload["mode"]
        self.plan[session_id] = legacy or payload.get("planEnabled", False)
        self.goal[session_id] = (payload.get("goal") or {}).get("objective")
        self.version[session_id] = 1

    def state(self, session_id: str) -> tuple[str, bool, str | None]:
        return self.mode[session_id], self.plan[session_id], self.goal[session_id]

    def after(self, session_id: str, command: Command) -> tuple[str, bool, str | None]:
        """The state ``command`` leads to; raises :class:`Refused`."""
        mode, plan, goal = self.state(session_id)
        match command:
            case SetMode(mode="plan") | EnterPlan():
                if goal is not None:
                    raise Refused(exclusive=True)
                return mode, True, goal
            case SetMode(mode=target):
                return target, False, goal
            case Cycle():
                shown = SHIFT_TAB["plan" if plan else mode]
                if shown != "plan":
                    return shown, False, goal
                if goal is not None:
                    raise Refused(exclusive=True)  # Shift+Tab does not skip Plan
                return mode, True, goal
            case LeavePlan():
                if not plan:
                    raise Refused(exclusive=False)
                return mode, False, goal
            case StartGoal(objective=objective):
                if plan:
                    raise Refused(exclusive=True)
                if goal is not None:
                    raise Refused(exclusive=False)
                return mode, plan, objective
            case EndGoal():
                if goal is None:
                    raise Refused(exclusive=False)
                return mode, plan, None
        raise AssertionError(command)

    @staticmethod
    def event_types(
        before: tuple[str, bool, str | None], after: tuple[str, bool, str | None]
    ) -> list[str]:
        types = []
        if before[2] is not None and after[2] != before[2]:
            types.append("GoalEnded")
        if before[:2] != after[:2]:
            types.append("SessionModeChanged")
        if after[2] is not None and after[2] != before[2]:
            types.append("GoalStarted")
        return types


def plan_in_data(value: Any) -> bool:
    """Whether a stored payload anywhere holds ``"mode": "plan"``."""
    if isinstance(value, dict):
        return value.get("mode") == "plan" or any(plan_in_data(v) for v in value.values())
    return False


class ExecutionLedger(RuleBasedStateMachine):
    """The runtime over a SQLite file, compared step by step with :class:`Model`."""

    sessions = Bundle("sessions")

    def __init__(self) -> None:
        super().__init__()
        self._tmp = tempfile.TemporaryDirectory(prefix="sessionledger-")
        self.url = f"sqlite:///{Path(self._tmp.name) / 'ledger.db'}"
        self.model = Model()
        self.published: list[CommandResult] = []
        self.store: EventStore | None = None
        self._open()

    def _open(self) -> None:
        self.store, self.projections = open_projected_store(self.url)
        self.runtime = ExecutionRuntime(Ledger(self.store, self.projections))
        self.runtime.subscribe(self.published.append)

    def _store(self) -> EventStore:
        assert self.store is not None
        return self.store

    def teardown(self) -> None:
        try:
            if self.store is not None:
                self.store.close()
        finally:
            self._tmp.cleanup()

    # -- rules -------------------------------------------------------------------------------

    def _create(self, payload: dict[str, Any]) -> str:
        session_id = new_session_id()
        created = SessionCreated(
            workspace="/projects/demo", execution_state=read_execution_state(payload)
        )
        self._store().append(session_id, [NewEvent(created, actor="host")], expected_version=0)
        self.model.create(session_id, payload)
        return session_id

    @initialize(target=sessions, payload=initial_payloads)
    def first_session(self, payload: dict[str, Any]) -> str:
        return self._create(payload)

    @precondition(lambda self: len(self.model.version) < 3)
    @rule(target=sessions, payload=initial_payloads)
    def create_session(self, payload: dict[str, Any]) -> str:
        return self._create(payload)

    @rule(session=sessions, mode=st.sampled_from(["plan", *PERMISSION_MODES]))
    def mode_command(self, session: str, mode: Any) -> None:
        self._execute(session, SetMode(mode), via="mode_command")

    @rule(session=sessions, task=st.text(min_size=1, max_size=20))
    def plan_command(self, session: str, task: str) -> None:
        self._execute(session, SetMode("plan"), via="plan_command", message=task)

    @rule(session=sessions)
    def shift_tab(self, session: str) -> None:
        self._execute(session, Cycle(), via="cycle")

    @rule(session=sessions)
    def enter_plan_tool(self, session: str) -> None:
        self._execute(session, EnterPlan(), via="enter_plan_tool")

    @rule(session=sessions)
    def approve_plan(self, session: str) -> None:
        self._execute(session, LeavePlan(), via="plan_approval")

    @rule(session=sessions, objective=objectives)
    def start_goal(self, session: str, objective: str) -> None:
        self._execute(session, StartGoal(objective), via="mode_command")

    @rule(session=sessions)
    def end_goal(self, session: str) -> None:
        self._execute(session, EndGoal(), via="mode_command")

    @rule()
    def restart(self) -> None:
        self._store().close()
        self.store = None
        self._open()

    def _execute(
        self, session: str, command: Command, *, via: ModeChangeVia, message: str | None = None
    ) -> None:
        store = self._store()
        before = self.model.state(session)
        version, head, published = store.version(session), store.head_position(), len(
            self.published
        )
        try:
            expected = self.model.after(session, command)
        except Refused as refusal:
            with pytest.raises(CommandRefused) as raised:
                self.runtime.execute(session, command, via=via, message=message)
            if refusal.exclusive:  # ES-5: the exact sentence
                assert raised.value.message == EXCLUSIVE
                assert raised.value.reason == "plan_goal_exclusive"
            else:
                assert raised.value.message != EXCLUSIVE
            assert (store.version(session), store.head_position()) == (version, head)
            assert len(self.published) == published
            return
        result = self.runtime.execute(session, command, via=via, message=message)
        types = self.model.event_types(before, expected)
        if message is not None:
            types.append("MessageRecorded")
        assert [e.type for e in result.events] == types
        assert (result.state.mode, result.state.plan_enabled, result.state.goal) == expected
        for event in result.events:
            if event.type == "SessionModeChanged":
                data = event.data.model_dump()
                assert (data["previous_mode"], data["previous_plan_enabled"]) == before[:2]
                assert (data["mode"], data["plan_enabled"], data["via"]) == (*expected[:2], via)
            if event.type == "MessageRecorded":
                data = event.data.model_dump()
                assert (data["role"], data["kind"], data["content"]) == ("user", "real", message)
        self.model.mode[session], self.model.plan[session], self.model.goal[session] = expected
        self.model.version[session] += len(types)
        assert result.version == self.model.version[session] == store.version(session)
        assert len(self.published) == published + (1 if types else 0)
        if types:
            assert self.published[-1] == result

    # -- invariants --------------------------------------------------------------------------

    @invariant()
    def state_agrees_everywhere(self) -> None:
        store, projections = self._store(), self.projections
        for session, version in self.model.version.items():
            expected = self.model.state(session)
            summary = projections.summary(store, session)
            assert summary is not None
            assert not (summary.plan_enabled and summary.goal is not None)  # ES-5
            assert (summary.mode, summary.plan_enabled, summary.goal) == expected
            assert summary.display_mode == ("plan" if expected[1] else expected[0])  # ES-1
            assert summary.version == version
            assert compare_session(store, projections, session) == []
            memory = self.runtime.state(session)
            assert not (memory.plan_enabled and memory.goal is not None)  # ES-5
            assert (memory.mode, memory.plan_enabled, memory.goal) == expected

    @invariant()
    def log_is_whole(self) -> None:
        store = self._store()
        assert all(report.ok for report in store.verify())
        positions = [e.global_position for e in store.read_all()]
        assert positions == list(range(1, store.head_position() + 1))
        for session, version in self.model.version.items():
            assert [e.seq for e in store.read_session(session)] == list(range(1, version + 1))
            rows = list(store.raw_session(session))
            assert not any(plan_in_data(json.loads(row[5])) for row in rows)  # ES-2


def run_ledger(steps: int, examples: int | None = None) -> None:
    overrides: dict[str, Any] = {"stateful_step_count": steps}
    if examples is not None:
        overrides["max_examples"] = examples
    run_state_machine_as_test(ExecutionLedger, settings=settings(settings.default, **overrides))


def test_es1_es2_es3_es4_es5_es6_runtime_agrees_with_the_model(depth: str) -> None:
    """Fast: the profile's examples x 30 steps; slow (``make verify``): longer sequences."""
    if depth == "fast":
        run_ledger(steps=30)
    else:
        run_ledger(steps=100, examples=min(settings.default.max_examples, 300))
