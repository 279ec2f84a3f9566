"""The interaction auto-resolution machine and its pure decisions, without I/O (HO-4 … HO-8).

The machine is searched exhaustively (every state reachable, none stuck, resolved states
final), then :func:`next_due` and :func:`activity_events` are checked with exact absolute
times on a fixed start instant: start at the head, countdown at ``visibleAt``, the deadline,
the setting's history (off when registered, turned off while queued, turned off while
counting down, the tie), and user activity in every state.
"""

from __future__ import annotations

from collections import deque
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from eventlog import InteractionAutoResolutionChanged, InteractionUserActivity
from statemachine.interaction import (
    INITIAL,
    OPEN_STATES,
    STATES,
    TRANSITIONS,
    InteractionTimer,
    Mark,
    Refusal,
    SettingChange,
    SettingHistory,
    TimerConfig,
    TimerState,
    TimerTimes,
    Trigger,
    activity_events,
    decide,
    next_due,
)

T0 = datetime(2026, 11, 29, 19, 10, 56, 123000, tzinfo=UTC)
CONFIG = TimerConfig(grace_s=60, deadline_s=300)
TRIGGERS: tuple[Trigger, ...] = (
    "exclude", "start", "show_countdown", "setting_off", "user_activity", "deadline",
    "answer", "decline", "withdraw",
)
FINAL = ("answered", "declined", "autoContinued", "withdrawn")


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def iso(seconds: float) -> str:
    return at(seconds).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def timer(
    state: TimerState = "registered", *, registered: int = 10, head: int | None = 10,
    started: float | None = None, reg_at: float = 0.0, head_at: float = 0.0,
) -> InteractionTimer:
    times = None if started is None else TimerTimes.starting(at(started), CONFIG)
    return InteractionTimer(
        interaction_id="int_1", call_id="call_1", state=state,
        registered=Mark(registered, at(reg_at)),
        head=None if head is None else Mark(head, at(head_at)), times=times,
    )


def history(*changes: tuple[int, float, bool]) -> SettingHistory:
    return SettingHistory(tuple(SettingChange(Mark(p, at(s)), v) for p, s, v in changes))


# -- the machine ---------------------------------------------------------------------------


def test_every_state_is_reachable_and_only_resolutions_are_final() -> None:
    seen, queue = {INITIAL}, deque([INITIAL])
    while queue:
        state = queue.popleft()
        for trigger in TRIGGERS:
            dest = decide(state, trigger)  # type: ignore[arg-type]
            if not isinstance(dest, Refusal) and dest not in seen:
                seen.add(dest)
                queue.append(dest)
    assert seen == set(STATES)
    for state in STATES:
        moves = [t for t in TRIGGERS if not isinstance(decide(state, t), Refusal)]  # type: ignore[arg-type]
        assert bool(moves) == (state in OPEN_STATES), state


def test_ho5_a_resolved_interaction_refuses_everything_as_already_resolved() -> None:
    for state in FINAL:
        for trigger in TRIGGERS:
            refusal = decide(state, trigger)  # type: ignore[arg-type]
            assert isinstance(refusal, Refusal) and refusal.code == "interaction_resolved"


def test_ho4_a_timer_starts_at_most_once_and_never_restarts() -> None:
    starts = [t for t in TRANSITIONS if t["trigger"] == "start"]
    assert starts == [{"trigger": "start", "source": "registered", "dest": "hiddenGrace"}]
    dests = {t["dest"] for t in TRANSITIONS}
    assert "registered" not in dests  # nothing ever leads back to a startable state
    assert decide("paused", "start") == Refusal(
        "illegal_transition", "start is not allowed from paused")


def test_ho4_only_a_countdown_reaches_the_deadline() -> None:
    assert [t["source"] for t in TRANSITIONS if t["trigger"] == "deadline"] == ["countdown"]


# -- next_due: the clock (HO-4) ------------------------------------------------------------


def test_ho4_an_eligible_question_at_the_head_starts_at_the_instant_it_got_there() -> None:
    due = next_due(timer(head_at=5), SettingHistory(), CONFIG)
    assert due is not None and due.trigger == "start" and due.at == at(5)
    assert due.event == InteractionAutoResolutionChanged(
        interaction_id="int_1", state="hiddenGrace", effective_at=iso(5),
        started_at=iso(5), visible_at=iso(65), deadline_at=iso(305),
    )
    assert due.idempotency_key == "timer:int_1:hiddenGrace"


def test_ho4_a_queued_question_has_nothing_due() -> None:
    assert next_due(timer(head=None), SettingHistory(), CONFIG) is None


def test_ho4_countdown_at_visible_at_then_the_deadline_with_no_event_of_its_own() -> None:
    grace = next_due(timer("hiddenGrace", started=0), SettingHistory(), CONFIG)
    assert grace is not None and (grace.trigger, grace.at) == ("show_countdown", at(60))
    assert grace.event is not None and grace.event.state == "countdown"
    assert (grace.event.started_at, grace.event.visible_at, grace.event.deadline_at) == (
        iso(0), iso(60), iso(300))
    assert grace.event.effective_at == iso(60)
    final = next_due(timer("countdown", started=0), SettingHistory(), CONFIG)
    assert final is not None and (final.trigger, final.at, final.state) == (
        "deadline", at(300), "autoContinued")
    assert final.event is None  # the executor's answer step records it (HO-8)
    assert final.idempotency_key == "timer:int_1:autoContinued"


@pytest.mark.parametrize("state", ["paused", "ineligible"])
def test_ho5_paused_and_ineligible_questions_never_fall_due(state: TimerState) -> None:
    started = 0.0 if state == "paused" else None
    assert next_due(timer(state, started=started), history((20, 1, False)), CONFIG) is None


def test_durations_are_applied_to_the_millisecond() -> None:
    config = TimerConfig(grace_s=1.25, deadline_s=3.0004)
    times = TimerTimes.starting(T0, config)
    assert (times.visible_at - T0, times.deadline_at - T0) == (
        timedelta(milliseconds=1250), timedelta(seconds=3))
    with pytest.raises(ValueError, match="must not exceed"):
        TimerConfig(grace_s=5, deadline_s=4)
    with pytest.raises(ValueError, match="finite"):
        TimerConfig(grace_s=float("nan"))


# -- next_due: the setting (HO-6) ------------------------------------------------------------


def test_ho4_off_when_registered_makes_it_ineligible_for_good() -> None:
    due = next_due(timer(registered=10), history((5, -1, False), (7, -0.5, True)), CONFIG)
    assert due is not None and due.trigger == "start"  # on again before it was registered
    due = next_due(timer(registered=10), history((5, -1, False)), CONFIG)
    assert due is not None and (due.trigger, due.state, due.at) == ("exclude", "ineligible",
                                                                    at(0))
    assert due.event is not None and due.event.reason == "settingOff"
    assert due.event.started_at is None


def test_ho6_turned_off_while_queued_makes_it_ineligible_and_on_again_does_not_undo() -> None:
    settings = history((12, 3, False), (14, 4, True))
    queued = next_due(timer(registered=10, head=None), settings, CONFIG)
    assert queued is not None and (queued.trigger, queued.at) == ("setting_off", at(3))
    assert queued.event is not None and queued.event.reason == "settingTurnedOff"
    # it reached the head after the off (and after the on): still ineligible, never started
    later = next_due(timer(registered=10, head=20, head_at=9), settings, CONFIG)
    assert later is not None and later.trigger == "setting_off"


def test_ho6_at_the_head_before_the_off_it_starts_then_pauses_at_the_off() -> None:
    settings = history((30, 20, False))
    first = next_due(timer(registered=10, head=10, head_at=0), settings, CONFIG)
    assert first is not None and (first.trigger, first.at) == ("start", at(0))
    paused = next_due(timer("hiddenGrace", started=0), settings, CONFIG)
    assert paused is not None and (paused.trigger, paused.state, paused.at) == (
        "setting_off", "paused", at(20))
    assert paused.event is not None
    assert (paused.event.started_at, paused.event.visible_at, paused.event.deadline_at) == (
        iso(0), iso(60), iso(300))


def test_ho6_an_off_after_the_countdown_showed_pauses_the_countdown() -> None:
    settings = history((30, 100, False))
    grace = next_due(timer("hiddenGrace", started=0), settings, CONFIG)
    assert grace is not None and grace.trigger == "show_countdown"  # 60 comes before 100
    counting = next_due(timer("countdown", started=0), settings, CONFIG)
    assert counting is not None and (counting.trigger, counting.at) == ("setting_off", at(100))


def test_ho6_the_setting_wins_a_tie_with_the_clock() -> None:
    tie = next_due(timer("hiddenGrace", started=0), history((30, 60, False)), CONFIG)
    assert tie is not None and tie.trigger == "setting_off"
    tie = next_due(timer("countdown", started=0), history((30, 300, False)), CONFIG)
    assert tie is not None and tie.trigger == "setting_off"


def test_ho6_an_off_recorded_before_a_late_start_pauses_at_the_start() -> None:
    # a start decided on a stale read of the setting: paused at once, never counted down
    due = next_due(timer("hiddenGrace", started=5), history((11, 2, False)), CONFIG)
    assert due is not None and (due.trigger, due.at) == ("setting_off", at(5))


def test_setting_history_reads_values_by_log_position() -> None:
    settings = history((5, 0, False), (9, 1, True), (12, 2, False))
    assert [settings.value_before(p) for p in (1, 5, 6, 9, 10, 12, 13)] == [
        True, True, False, False, True, True, False]
    assert settings.first_off_after(5) == SettingChange(Mark(12, at(2)), False)
    assert settings.first_off_after(12) is None
    assert settings.current is False and SettingHistory().current is True


# -- activity (HO-5) -----------------------------------------------------------------------


@pytest.mark.parametrize("state", ["hiddenGrace", "countdown"])
def test_ho5_activity_pauses_a_running_timer_for_good_keeping_its_times(
    state: TimerState,
) -> None:
    events = activity_events(timer(state, started=0), "select", at(70))
    assert events == [
        InteractionUserActivity(interaction_id="int_1", action="select"),
        InteractionAutoResolutionChanged(
            interaction_id="int_1", state="paused", reason="userActivity",
            effective_at=iso(70), started_at=iso(0), visible_at=iso(60), deadline_at=iso(300),
        ),
    ]


def test_ho5_activity_on_a_question_not_started_makes_it_ineligible() -> None:
    events = activity_events(timer(head=None), "move", at(3))
    assert events == [
        InteractionUserActivity(interaction_id="int_1", action="move"),
        InteractionAutoResolutionChanged(
            interaction_id="int_1", state="ineligible", reason="userActivity",
            effective_at=iso(3),
        ),
    ]


@pytest.mark.parametrize("state", ["paused", "ineligible"])
def test_ho5_further_activity_is_only_recorded(state: TimerState) -> None:
    started = 0.0 if state == "paused" else None
    events = activity_events(timer(state, started=started), "type", at(90))
    assert events == [InteractionUserActivity(interaction_id="int_1", action="type")]


@pytest.mark.parametrize("state", FINAL)
def test_ho5_activity_on_a_resolved_question_is_refused(state: TimerState) -> None:
    refused = activity_events(timer(state), "other", at(1))
    assert isinstance(refused, Refusal) and refused.code == "interaction_resolved"


@given(
    registered=st.integers(1, 50), head=st.none() | st.integers(1, 60),
    changes=st.lists(st.tuples(st.integers(1, 80), st.integers(-5, 400), st.booleans()),
                     max_size=4),
    state=st.sampled_from(["registered", "hiddenGrace", "countdown", "paused", "ineligible"]),
)
def test_ho4_a_due_transition_is_always_legal_and_never_before_its_cause(
    registered: int, head: int | None, changes: list[tuple[int, int, bool]], state: TimerState,
) -> None:
    ordered = sorted({p: (p, s, v) for p, s, v in changes}.values())
    settings = history(*ordered)
    started = 0.0 if state in ("hiddenGrace", "countdown", "paused") else None
    subject = timer(state, registered=registered, head=head, started=started)
    due = next_due(subject, settings, CONFIG)
    if due is None:
        return
    assert decide(state, due.trigger) == due.state
    if due.trigger in ("show_countdown", "deadline"):
        assert subject.times is not None and due.at >= subject.times.started_at
