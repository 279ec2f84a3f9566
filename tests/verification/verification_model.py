"""The plain reference model of the whole-service machine: what each session should be.

Nothing here imports the service. Each rule is the SPEC's sentence written out over dicts
and small dataclasses: the execution state (§3: ES-3 … ES-7), the todo list (TD-3), the
interaction queue with its auto-continue timers (HO-4 … HO-7), the plan file (PM-7) and the
counters that decide a request's reminders (TD-5, PM-5, PM-10, with decisions D34 and D35 on
what the SPEC leaves open). The machine (:mod:`verification_machine`) asks this model what
each command must do and compares the service with it after every step.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Literal

__all__ = [
    "DEADLINE",
    "EXCLUSIVE",
    "GRACE",
    "PLAN_TOOLS",
    "SHIFT_TAB",
    "Refused",
    "SessionModel",
    "Waiting",
    "expected_surface",
]

GRACE = timedelta(seconds=60)
DEADLINE = timedelta(seconds=300)
EXCLUSIVE = "Plan and Goal cannot be active at the same time."
SHIFT_TAB = {"build": "edit", "edit": "yolo", "yolo": "plan", "auto": "plan", "plan": "build"}
"""ES-4's display-mode cycle; ``plan`` from ``auto`` keeps ``auto`` underneath."""
PLAN_TOOLS = frozenset({"EnterPlanMode", "ExitPlanMode"})
ALWAYS = frozenset({"TodoRead", "TodoWrite", "AskUserQuestion", "EnterPlanMode",
                    "ExitPlanMode", "ReadSessionContext"})
CRON = frozenset({"CronCreate", "CronList", "CronUpdate", "CronDelete"})

Kind = Literal["askUserQuestion", "planApproval"]
Item = dict[str, str]


def expected_surface(host: str, *, subagent: bool) -> list[str]:
    """TR-1 and ES-7 for a workspace without configuration (no flag, no off-peak port)."""
    tools = set(ALWAYS)
    if host == "protocol":
        tools |= CRON  # protocol sessions always have a cron port
    if subagent:
        tools -= PLAN_TOOLS
    return sorted(tools)


class Refused(Exception):
    """The model's answer for a command the SPEC refuses (409); ``exclusive`` for ES-5's."""

    def __init__(self, exclusive: bool) -> None:
        super().__init__(exclusive)
        self.exclusive = exclusive


@dataclass
class Waiting:
    """One pending interaction in a session's FIFO queue and its auto-continue timer."""

    interaction_id: str
    kind: Kind
    eligible: bool
    """May still start counting down: protocol host, a question, the setting on when it was
    registered, no user activity and no setting turned off before it started (HO-4 … HO-6)."""
    plan: str | None = None
    started_at: datetime | None = None
    paused: bool = False

    @property
    def running(self) -> bool:
        return self.started_at is not None and not self.paused

    def deadline(self) -> datetime:
        assert self.started_at is not None
        return self.started_at + DEADLINE


@dataclass
class SessionModel:
    """What one session should be, changed only as the SPEC says."""

    host: str
    parent: str | None
    mode: str = "build"
    plan: bool = False
    goal: str | None = None
    deleted: bool = False
    todos: list[Item] = field(default_factory=list)
    queue: list[Waiting] = field(default_factory=list)
    approved_plan: str | None = None
    """The last approved plan: the plan file holds exactly it (PM-7)."""
    auto_continued: set[str] = field(default_factory=set)
    """Interactions resolved by the timer at their deadline (HO-4, HO-8), never by a user."""
    # the turn counters (TD-5, PM-5, PM-10; D34, D35)
    assistant_since_todo: int = 0
    plan_reminders: int = 0
    users_since_plan_reminder: int = 0
    plan_exit_armed: bool = False
    compacted: bool = False

    # -- execution state (§3) ----------------------------------------------------------------

    def state(self) -> tuple[str, bool, str | None]:
        return self.mode, self.plan, self.goal

    def after_mode(self, target: str) -> tuple[str, bool, str | None]:
        """``/mode target`` (ES-3, ES-4, ES-5); raises :class:`Refused`."""
        if target == "plan":
            if self.goal is not None:
                raise Refused(exclusive=True)
            return self.mode, True, self.goal
        return target, False, self.goal

    def after_cycle(self) -> tuple[str, bool, str | None]:
        """Shift+Tab (ES-4); it does not skip Plan during a goal (ES-5)."""
        shown = SHIFT_TAB["plan" if self.plan else self.mode]
        if shown != "plan":
            return shown, False, self.goal
        if self.goal is not None:
            raise Refused(exclusive=True)
        return self.mode, True, self.goal

    def after_goal(self, objective: str | None) -> tuple[str, bool, str | None]:
        """Start (``objective``) or end (``None``) a goal; raises :class:`Refused`."""
        if objective is None:
            if self.goal is None:
                raise Refused(exclusive=False)
            return self.mode, self.plan, None
        if self.plan:
            raise Refused(exclusive=True)
        if self.goal is not None:
            raise Refused(exclusive=False)
        return self.mode, self.plan, objective

    def apply(self, state: tuple[str, bool, str | None]) -> None:
        """Take the new state; a Plan switch that moves starts or ends a Plan period."""
        was_on = self.plan
        self.mode, self.plan, self.goal = state
        if self.plan and not was_on:  # a new period: a full reminder first; no exit notice
            self.plan_reminders, self.users_since_plan_reminder = 0, 0
            self.plan_exit_armed = False
        elif was_on and not self.plan:  # left: the period's counts go; plan_exit is owed
            self.plan_reminders, self.users_since_plan_reminder = 0, 0
            self.plan_exit_armed = True

    # -- messages and reminders (TD-5, PM-5, PM-10) -----------------------------------------

    def message(self, role: str, *, continuation: bool) -> None:
        if role == "assistant" and not continuation:
            self.assistant_since_todo += 1
        if role == "user":
            self.users_since_plan_reminder += 1

    def todos_written(self, todos: list[Item]) -> None:
        self.todos = todos
        self.assistant_since_todo = 0

    def reminders(
        self, tools: frozenset[str], *, continuation: bool
    ) -> list[tuple[str, str | None]]:
        """``(kind, variant)`` of the reminders a request gets, in PM-5's order."""
        due: list[tuple[str, str | None]] = []
        if self.plan:
            if self.plan_reminders == 0 or self.users_since_plan_reminder >= 5:
                due.append(("runtime_mode", "full" if self.plan_reminders % 5 == 0 else "sparse"))
        elif self.plan_exit_armed:
            due.append(("plan_exit", None))
        if self.compacted and self.approved_plan is not None:
            due.append(("plan_file_reference", None))
        if "TodoWrite" in tools and not continuation and self.assistant_since_todo >= 10:
            due.append(("todo_reminder", None))
        return due

    def injected(self, kinds: list[tuple[str, str | None]]) -> None:
        """The counters after the reminders were recorded (D35: any one clears the flag)."""
        if kinds:
            self.compacted = False
        for kind, _variant in kinds:
            if kind == "runtime_mode":
                self.plan_reminders += 1
                self.users_since_plan_reminder = 0
            elif kind == "plan_exit":
                self.plan_exit_armed = False
            elif kind == "todo_reminder":
                self.assistant_since_todo = 0

    # -- the interaction queue and its timers (HO-4 … HO-7) ---------------------------------

    def register(self, waiting: Waiting, now: datetime) -> None:
        """A question or plan approval joins the queue (it may reach the head at once)."""
        self.queue.append(waiting)
        if len(self.queue) == 1:
            self._reach_head(now)

    def _reach_head(self, now: datetime) -> None:
        if self.queue and self.queue[0].eligible and self.queue[0].started_at is None:
            self.queue[0].started_at = now

    def settle(self, now: datetime, *, strictly_before: bool = False) -> list[str]:
        """Auto-continue every head whose deadline has come; the interactions resolved.

        The next question reaches the head when the auto-continue is recorded, i.e. now.
        ``strictly_before``: when a setting turned off now, a deadline exactly now loses
        the tie (the pause wins, HO-6).
        """
        resolved: list[str] = []
        while self.queue and self.queue[0].running:
            deadline = self.queue[0].deadline()
            if deadline > now or (strictly_before and deadline == now):
                break
            resolved.append(self.queue.pop(0).interaction_id)
            self._reach_head(now)
        self.auto_continued.update(resolved)
        return resolved

    def resolve(self, interaction_id: str, now: datetime) -> Waiting:
        """A user answered: it leaves the queue; if it was the head, the next one is now."""
        index = [w.interaction_id for w in self.queue].index(interaction_id)
        waiting = self.queue.pop(index)
        if index == 0:
            self._reach_head(now)
        return waiting

    def activity(self, interaction_id: str) -> None:
        """HO-5: a running clock pauses for good; one not started never starts."""
        (waiting,) = [w for w in self.queue if w.interaction_id == interaction_id]
        if waiting.running:
            waiting.paused = True
        waiting.eligible = False

    def setting_turned_off(self, now: datetime) -> None:
        """HO-6: queued questions never start; a deadline that came before the change still
        auto-continues (the setting wins only a tie); the clocks left running pause, their
        times kept."""
        for waiting in self.queue:
            if not waiting.running:
                waiting.eligible = False
        self.settle(now, strictly_before=True)
        for waiting in self.queue:
            if waiting.running:
                waiting.paused = True
            waiting.eligible = False
