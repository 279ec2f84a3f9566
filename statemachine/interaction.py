"""The auto-continue timer of one interaction (HO-4 … HO-8), declared as data.

A question a protocol host puts to the user waits in its session's FIFO queue. Eligible ones
(protocol host, kind ``askUserQuestion``, setting on when registered) get a clock when they
reach the head: silent grace (``hiddenGrace``), then a visible ``countdown``, then, at the
deadline, an auto-continue. User activity pauses a running timer for good; the setting
turned off pauses it too, or makes a queued question ineligible. Any state may be answered
or declined by the user, or withdrawn by the host (its caller cancelled the request).

Everything here is pure: :func:`next_due` answers "what is the next timer transition of this
interaction, and at which instant" from the interaction's recorded state, the setting's
history and the configured durations; :func:`activity_events` answers what a user action
appends. The ``transitions`` machine is the single place the legal moves live; both
functions run their trigger through it (:func:`decide`). Instants are absolute UTC times
with millisecond precision, always read from the log (a head reached at the instant the
event that made it the head was recorded), so every process computes the same times.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal, cast

from transitions import Machine, MachineError

from eventlog import (
    AutoResolutionReason,
    AutoResolutionState,
    Event,
    InteractionAutoResolutionChanged,
    InteractionUserActivity,
    UserActivityAction,
    format_instant,
)

from . import quiet_machine

__all__ = [
    "INITIAL",
    "OPEN_STATES",
    "RUNNING_STATES",
    "STATES",
    "TRANSITIONS",
    "Due",
    "InteractionModel",
    "InteractionTimer",
    "Mark",
    "Refusal",
    "SettingChange",
    "SettingHistory",
    "TimerConfig",
    "TimerState",
    "TimerTimes",
    "Trigger",
    "activity_events",
    "build_machine",
    "decide",
    "next_due",
]

TimerState = Literal[
    "registered", "ineligible", "hiddenGrace", "countdown", "paused",
    "answered", "declined", "autoContinued", "withdrawn",
]
Trigger = Literal[
    "exclude", "start", "show_countdown", "setting_off", "user_activity", "deadline",
    "answer", "decline", "withdraw",
]

INITIAL: TimerState = "registered"
STATES: list[str] = [
    "registered", "ineligible", "hiddenGrace", "countdown", "paused",
    "answered", "declined", "autoContinued", "withdrawn",
]
OPEN_STATES: tuple[TimerState, ...] = (
    "registered", "ineligible", "hiddenGrace", "countdown", "paused",
)
"""Not resolved yet: the user may still answer or decline."""
RUNNING_STATES: tuple[TimerState, ...] = ("hiddenGrace", "countdown")
"""A clock is running: at most one per session, only at the head of its queue."""

TRANSITIONS: list[dict[str, object]] = [
    # registered: eligible so far, waiting to reach the head of the queue
    {"trigger": "exclude", "source": "registered", "dest": "ineligible"},
    {"trigger": "start", "source": "registered", "dest": "hiddenGrace"},
    {"trigger": "setting_off", "source": "registered", "dest": "ineligible"},
    {"trigger": "user_activity", "source": "registered", "dest": "ineligible"},
    # the clock runs
    {"trigger": "show_countdown", "source": "hiddenGrace", "dest": "countdown"},
    {"trigger": "deadline", "source": "countdown", "dest": "autoContinued"},
    {"trigger": "setting_off", "source": ["hiddenGrace", "countdown"], "dest": "paused"},
    {"trigger": "user_activity", "source": ["hiddenGrace", "countdown", "paused"],
     "dest": "paused"},
    {"trigger": "user_activity", "source": "ineligible", "dest": "ineligible"},
    # the user answers whatever the timer says
    {"trigger": "answer", "source": list(OPEN_STATES), "dest": "answered"},
    {"trigger": "decline", "source": list(OPEN_STATES), "dest": "declined"},
    # the host withdraws it: its caller cancelled the request (nobody answered, D157)
    {"trigger": "withdraw", "source": list(OPEN_STATES), "dest": "withdrawn"},
]
"""Every legal move, as data. A (state, trigger) pair missing here is refused."""

ALREADY_RESOLVED = "the interaction was already resolved"


class InteractionModel:
    """The machine's model; triggers are declared so type checkers see them."""

    state: str

    def exclude(self) -> bool: raise NotImplementedError
    def start(self) -> bool: raise NotImplementedError
    def show_countdown(self) -> bool: raise NotImplementedError
    def setting_off(self) -> bool: raise NotImplementedError
    def user_activity(self) -> bool: raise NotImplementedError
    def deadline(self) -> bool: raise NotImplementedError
    def answer(self) -> bool: raise NotImplementedError
    def decline(self) -> bool: raise NotImplementedError
    def withdraw(self) -> bool: raise NotImplementedError


def build_machine(model: InteractionModel | None = None, *, initial: str = INITIAL) -> Machine:
    """The interaction machine, optionally bound to ``model``."""
    return quiet_machine(model, states=STATES, transitions=TRANSITIONS, initial=initial)


_MODEL = InteractionModel()
_MACHINE = build_machine(_MODEL)
_MACHINE_LOCK = threading.Lock()


@dataclass(frozen=True, slots=True)
class Refusal:
    """A move the machine does not allow from the current state; nothing is appended."""

    code: str
    message: str


def decide(state: TimerState, trigger: Trigger) -> TimerState | Refusal:
    """Run ``trigger`` on the machine from ``state``: the next state or a refusal."""
    with _MACHINE_LOCK:
        _MACHINE.set_state(state, model=_MODEL)
        try:
            getattr(_MODEL, trigger)()
        except MachineError:
            if state not in OPEN_STATES:
                return Refusal("interaction_resolved", ALREADY_RESOLVED)
            return Refusal("illegal_transition", f"{trigger} is not allowed from {state}")
        return _MODEL.state  # type: ignore[return-value]


# -- the facts a decision reads ------------------------------------------------------------


def _millis(seconds: float) -> timedelta:
    return timedelta(milliseconds=round(seconds * 1000))


@dataclass(frozen=True, slots=True)
class TimerConfig:
    """The durations of HO-4, in seconds (decimals allowed; applied to the millisecond)."""

    grace_s: float = 60.0
    deadline_s: float = 300.0

    def __post_init__(self) -> None:
        for name in ("grace_s", "deadline_s"):
            value = getattr(self, name)
            if not math.isfinite(value) or value < 0:
                raise ValueError(f"{name} must be a finite number of seconds >= 0, not {value}")
        if self.grace_s > self.deadline_s:
            raise ValueError(f"grace ({self.grace_s}) must not exceed deadline "
                             f"({self.deadline_s})")

    @property
    def grace(self) -> timedelta:
        return _millis(self.grace_s)

    @property
    def deadline(self) -> timedelta:
        return _millis(self.deadline_s)


@dataclass(frozen=True, slots=True)
class TimerTimes:
    """The three absolute instants of a started timer; kept once set (HO-5, HO-7)."""

    started_at: datetime
    visible_at: datetime
    deadline_at: datetime

    @classmethod
    def starting(cls, at: datetime, config: TimerConfig) -> TimerTimes:
        return cls(at, at + config.grace, at + config.deadline)


@dataclass(frozen=True, slots=True)
class Mark:
    """A point of the log: an event's global position and the instant it was recorded."""

    position: int
    at: datetime


@dataclass(frozen=True, slots=True)
class InteractionTimer:
    """One pending interaction as the timer sees it (folded from its session's log)."""

    interaction_id: str
    call_id: str
    state: TimerState
    registered: Mark
    head: Mark | None = None
    """When it reached the head of its session's queue (``None`` while queued)."""
    times: TimerTimes | None = None
    reason: AutoResolutionReason | None = None


@dataclass(frozen=True, slots=True)
class SettingChange:
    """``autoContinueQuestions`` set to ``value`` at ``mark``."""

    mark: Mark
    value: bool


@dataclass(frozen=True, slots=True)
class SettingHistory:
    """Every change of the setting, in log order (HO-6: default on)."""

    changes: tuple[SettingChange, ...] = ()
    default: bool = True

    @property
    def current(self) -> bool:
        return self.changes[-1].value if self.changes else self.default

    def value_before(self, position: int) -> bool:
        """The setting as of the log position ``position`` (changes before it count)."""
        value = self.default
        for change in self.changes:
            if change.mark.position >= position:
                break
            value = change.value
        return value

    def first_off_after(self, position: int) -> SettingChange | None:
        """The first change to off recorded after ``position``, if any."""
        for change in self.changes:
            if change.mark.position > position and not change.value:
                return change
        return None


@dataclass(frozen=True, slots=True)
class Due:
    """The next timer transition of one interaction and the instant it takes effect.

    ``event`` is what to append; ``None`` for the deadline, whose auto-continue is the
    executor's answer step (``InteractionResolved`` with ``autoContinued``).
    """

    interaction_id: str
    call_id: str
    trigger: Trigger
    state: TimerState
    at: datetime
    event: InteractionAutoResolutionChanged | None

    @property
    def idempotency_key(self) -> str:
        """One key per interaction and state: a transition is never recorded twice."""
        return f"timer:{self.interaction_id}:{self.state}"


def _change(
    timer: InteractionTimer, trigger: Trigger, at: datetime, *,
    times: TimerTimes | None = None, reason: AutoResolutionReason | None = None,
) -> Due:
    dest = decide(timer.state, trigger)
    assert not isinstance(dest, Refusal), dest
    event: InteractionAutoResolutionChanged | None = None
    if trigger != "deadline":
        event = _event(timer.interaction_id, dest, at, times, reason)
    return Due(timer.interaction_id, timer.call_id, trigger, dest, at, event)


def _event(
    interaction_id: str, state: TimerState, at: datetime, times: TimerTimes | None,
    reason: AutoResolutionReason | None,
) -> InteractionAutoResolutionChanged:
    return InteractionAutoResolutionChanged(
        interaction_id=interaction_id,
        state=cast(AutoResolutionState, state),
        effective_at=format_instant(at),
        reason=reason,
        started_at=format_instant(times.started_at) if times else None,
        visible_at=format_instant(times.visible_at) if times else None,
        deadline_at=format_instant(times.deadline_at) if times else None,
    )


def next_due(
    timer: InteractionTimer, settings: SettingHistory, config: TimerConfig
) -> Due | None:
    """The next timer transition of ``timer`` and when it takes effect, or ``None``.

    ``registered``: ineligible if the setting was off when it was registered; else it starts
    at the instant it reached the head — unless the setting was turned off before that, which
    makes it ineligible. ``hiddenGrace``/``countdown``: the countdown at ``visibleAt``, the
    auto-continue at ``deadlineAt``, or a pause at the instant the setting was turned off,
    whichever comes first (the setting wins a tie). Other states have nothing due.
    """
    registered = timer.registered.position
    off = settings.first_off_after(registered)
    if timer.state == "registered":
        if not settings.value_before(registered):
            return _change(timer, "exclude", timer.registered.at, reason="settingOff")
        head = timer.head
        if head is not None and (off is None or off.mark.position > head.position):
            return _change(timer, "start", head.at, times=TimerTimes.starting(head.at, config))
        if off is not None:
            return _change(timer, "setting_off", off.mark.at, reason="settingTurnedOff")
        return None
    if timer.state not in RUNNING_STATES:
        return None
    times = timer.times
    assert times is not None, f"{timer.interaction_id} runs without times"
    if timer.state == "hiddenGrace":
        step = _change(timer, "show_countdown", times.visible_at, times=times)
    else:
        step = _change(timer, "deadline", times.deadline_at, times=times)
    if off is not None:
        paused_at = max(off.mark.at, times.started_at)
        if paused_at <= step.at:
            return _change(timer, "setting_off", paused_at, times=times,
                           reason="settingTurnedOff")
    return step


def activity_events(
    timer: InteractionTimer, action: UserActivityAction, now: datetime
) -> list[Event] | Refusal:
    """What a user action on the question appends (HO-5): the activity, and the timer change
    it causes — a running timer pauses for good with its times kept; a question not yet
    started becomes ineligible; a paused or ineligible one only records the activity."""
    dest = decide(timer.state, "user_activity")
    if isinstance(dest, Refusal):
        return dest
    events: list[Event] = [
        InteractionUserActivity(interaction_id=timer.interaction_id, action=action)
    ]
    if dest != timer.state:
        events.append(_event(timer.interaction_id, dest, now, timer.times, "userActivity"))
    return events

