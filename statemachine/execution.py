"""The execution-state machine: permission mode, the Plan switch and the Goal (ES-1 … ES-8).

States are the reachable combinations, declared as data: a permission mode alone
(``build``), with Plan on (``build_plan``) or with an active goal (``build_goal``). No state
holds Plan and Goal together, so no trigger can reach one: that is where the exclusivity rule
of ES-5 lives. :func:`decide` is pure: it runs the ``transitions`` machine on its model (set
to the given state first) and answers the next state, or a typed :class:`Refusal`;
:func:`decide_events` adds the events that record the move (none when the state would stay
identical, ES-3).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias, get_args

from transitions import Machine, MachineError

from eventlog import (
    Event,
    ExecutionStateData,
    GoalData,
    GoalEnded,
    GoalStarted,
    ModeChangeVia,
    PermissionMode,
    SessionModeChanged,
)

from . import quiet_machine

__all__ = [
    "MODES",
    "PLAN_GOAL_EXCLUSIVE",
    "STATES",
    "TRANSITIONS",
    "Command",
    "Cycle",
    "EndGoal",
    "EnterPlan",
    "ExecutionModel",
    "ExecutionState",
    "LeavePlan",
    "Outcome",
    "Refusal",
    "SetMode",
    "StartGoal",
    "UnderPlan",
    "build_machine",
    "decide",
    "decide_events",
    "events_for",
    "state_name",
]

PLAN_GOAL_EXCLUSIVE = "Plan and Goal cannot be active at the same time."
NO_GOAL = "There is no active goal to end."
GOAL_ALREADY_ACTIVE = "A goal is already active; end it before starting another."
NOT_IN_PLAN = "Plan mode is not active."

MODES: tuple[PermissionMode, ...] = get_args(PermissionMode)
CYCLE_NEXT: dict[PermissionMode, PermissionMode | Literal["plan"]] = {
    "build": "edit", "edit": "yolo", "yolo": "plan", "auto": "plan",
}


@dataclass(frozen=True, slots=True)
class ExecutionState:
    """Permission mode + Plan switch + goal objective (``None`` when no goal)."""

    mode: PermissionMode = "build"
    plan_enabled: bool = False
    goal: str | None = None

    @property
    def display_mode(self) -> str:
        return "plan" if self.plan_enabled else self.mode

    def to_data(self) -> ExecutionStateData:
        goal = GoalData(objective=self.goal) if self.goal is not None else None
        return ExecutionStateData(mode=self.mode, plan_enabled=self.plan_enabled, goal=goal)

    @classmethod
    def from_data(cls, data: ExecutionStateData) -> ExecutionState:
        return cls(data.mode, data.plan_enabled, data.goal.objective if data.goal else None)


def state_name(state: ExecutionState) -> str:
    """The machine state for ``state``: ``build``, ``build_plan`` or ``build_goal``."""
    if state.plan_enabled:
        return f"{state.mode}_plan"
    return f"{state.mode}_goal" if state.goal is not None else state.mode


STATES: list[str] = [f"{m}{suffix}" for m in MODES for suffix in ("", "_plan", "_goal")]


def _transitions() -> list[dict[str, Any]]:
    table: list[dict[str, Any]] = []
    for m in MODES:
        plain, plan, goal = m, f"{m}_plan", f"{m}_goal"
        for target in MODES:
            table.append({"trigger": f"set_{target}", "source": [plain, plan], "dest": target})
            table.append({"trigger": f"set_{target}", "source": goal, "dest": f"{target}_goal"})
        table.append({"trigger": f"host_{m}", "source": [f"{o}_plan" for o in MODES],
                      "dest": plan})
        table.append({"trigger": "enter_plan", "source": [plain, plan], "dest": plan})
        table.append({"trigger": "leave_plan", "source": plan, "dest": plain})
        table.append({"trigger": "start_goal", "source": plain, "dest": goal})
        table.append({"trigger": "end_goal", "source": goal, "dest": plain})
        nxt = CYCLE_NEXT[m]
        table.append({"trigger": "cycle", "source": plan, "dest": "build"})
        if nxt == "plan":
            table.append({"trigger": "cycle", "source": plain, "dest": plan})
        else:
            table.append({"trigger": "cycle", "source": plain, "dest": nxt})
            table.append({"trigger": "cycle", "source": goal, "dest": f"{nxt}_goal"})
    return table


TRANSITIONS: list[dict[str, Any]] = _transitions()
"""Every legal move, as data. A (state, trigger) pair missing here is refused."""


class ExecutionModel:
    """The machine's model; triggers are declared so type checkers see them."""

    state: str

    def set_build(self) -> bool: raise NotImplementedError
    def set_edit(self) -> bool: raise NotImplementedError
    def set_yolo(self) -> bool: raise NotImplementedError
    def set_auto(self) -> bool: raise NotImplementedError
    def enter_plan(self) -> bool: raise NotImplementedError
    def leave_plan(self) -> bool: raise NotImplementedError
    def start_goal(self) -> bool: raise NotImplementedError
    def end_goal(self) -> bool: raise NotImplementedError
    def cycle(self) -> bool: raise NotImplementedError
    def host_build(self) -> bool: raise NotImplementedError
    def host_edit(self) -> bool: raise NotImplementedError
    def host_yolo(self) -> bool: raise NotImplementedError
    def host_auto(self) -> bool: raise NotImplementedError


def build_machine(model: ExecutionModel | None = None, *, initial: str = "build") -> Machine:
    """The execution-state machine, optionally bound to ``model``."""
    return quiet_machine(model, states=STATES, transitions=TRANSITIONS, initial=initial)


_MODEL = ExecutionModel()
_MACHINE = build_machine(_MODEL)
_MACHINE_LOCK = threading.Lock()
"""One model bound once (binding per call is slow and noisy); decisions take turns on it."""


# -- commands --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SetMode:
    """``/mode X`` (and ``POST …/mode``): ``plan`` enters Plan, anything else leaves it."""

    mode: PermissionMode | Literal["plan"]


@dataclass(frozen=True, slots=True)
class UnderPlan:
    """A host reports ``mode`` while Plan, turned on here, stays on: the mode underneath
    changes, Plan does not (issue 39). Refused when Plan is off."""

    mode: PermissionMode


@dataclass(frozen=True, slots=True)
class Cycle:
    """Shift+Tab: the next display mode (ES-4)."""


@dataclass(frozen=True, slots=True)
class EnterPlan:
    """``EnterPlanMode``, ``/plan``: switch Plan on, keeping the mode underneath."""


@dataclass(frozen=True, slots=True)
class LeavePlan:
    """ExitPlanMode approval: switch Plan off, back to the mode held before (ES-3)."""


@dataclass(frozen=True, slots=True)
class StartGoal:
    """Start pursuing ``objective``."""

    objective: str


@dataclass(frozen=True, slots=True)
class EndGoal:
    """End the active goal."""


Command: TypeAlias = SetMode | UnderPlan | Cycle | EnterPlan | LeavePlan | StartGoal | EndGoal


@dataclass(frozen=True, slots=True)
class Refusal:
    """A command the machine does not allow from the current state; nothing is appended."""

    code: str
    message: str


Outcome: TypeAlias = ExecutionState | Refusal
"""The state after the command (equal to the input when nothing changes), or a refusal."""


def _trigger(command: Command) -> str:
    match command:
        case SetMode(mode="plan") | EnterPlan():
            return "enter_plan"
        case SetMode(mode=mode):
            return f"set_{mode}"
        case UnderPlan(mode=mode):
            return f"host_{mode}"
        case Cycle():
            return "cycle"
        case LeavePlan():
            return "leave_plan"
        case StartGoal():
            return "start_goal"
        case EndGoal():
            return "end_goal"


def _refusal(state: ExecutionState, trigger: str) -> Refusal:
    if trigger in ("enter_plan", "cycle") and state.goal is not None:
        return Refusal("plan_goal_exclusive", PLAN_GOAL_EXCLUSIVE)
    if trigger == "start_goal" and state.plan_enabled:
        return Refusal("plan_goal_exclusive", PLAN_GOAL_EXCLUSIVE)
    if trigger == "start_goal":
        return Refusal("goal_already_active", GOAL_ALREADY_ACTIVE)
    if trigger == "end_goal":
        return Refusal("no_goal", NO_GOAL)
    return Refusal("not_in_plan", NOT_IN_PLAN)


def events_for(
    before: ExecutionState, after: ExecutionState, *, via: ModeChangeVia
) -> list[Event]:
    """The events that record the move from ``before`` to ``after`` (none if identical)."""
    events: list[Event] = []
    if before.goal is not None and after.goal != before.goal:
        events.append(GoalEnded(objective=before.goal))
    if (before.mode, before.plan_enabled) != (after.mode, after.plan_enabled):
        events.append(SessionModeChanged(
            mode=after.mode, plan_enabled=after.plan_enabled, previous_mode=before.mode,
            previous_plan_enabled=before.plan_enabled, via=via,
        ))
    if after.goal is not None and after.goal != before.goal:
        events.append(GoalStarted(objective=after.goal))
    return events


def decide_events(
    state: ExecutionState, command: Command, *, via: ModeChangeVia
) -> tuple[ExecutionState, list[Event]] | Refusal:
    """The machine's answer as events: the next state and what to append, or a refusal."""
    outcome = decide(state, command)
    if isinstance(outcome, Refusal):
        return outcome
    return outcome, events_for(state, outcome, via=via)


def decide(state: ExecutionState, command: Command) -> Outcome:
    """Run ``command`` on the machine from ``state``: the next state or a refusal."""
    trigger = _trigger(command)
    with _MACHINE_LOCK:
        _MACHINE.set_state(state_name(state), model=_MODEL)
        try:
            getattr(_MODEL, trigger)()
        except MachineError:
            return _refusal(state, trigger)
        dest = _MODEL.state
    mode, _, suffix = dest.partition("_")
    goal = state.goal if suffix == "goal" else None
    if isinstance(command, StartGoal):
        goal = command.objective
    return ExecutionState(mode, suffix == "plan", goal)  # type: ignore[arg-type]
