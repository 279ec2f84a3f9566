"""The reminder engine and the turn-counter fold, without a store (SPEC TD-5, PM-5, PM-10).

:func:`decide_reminders` is pure: counters, request and todo list in, ordered reminders out,
so its edges are checked exhaustively here. The fold is checked on hand-made envelopes, and a
property compares it with the precise definitions of TD-5 and PM-5 (counting by ``seq``) and
with the inline projection fed the same log in arbitrary chunks.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from eventlog import (
    ContextCompacted,
    Event,
    ExecutionStateData,
    MessageRecorded,
    RecordedEvent,
    ReminderInjected,
    SessionCreated,
    SessionModeChanged,
    TodoItemData,
    TodosWritten,
)
from projections.session import TurnCounters, TurnCountersProjection, fold_turns
from projections.tables import MemoryDocTable
from sessionledger.service.turns import (
    PLAN_EXIT,
    PLAN_MODE_FULL,
    PLAN_MODE_SPARSE,
    TODO_REMINDER_HEADER,
    Reminder,
    ReminderContext,
    TurnRequest,
    decide_reminders,
)

SID = "sess_test"
TODO_OPENING = "The TodoWrite tool hasn't been used recently."
PLAN_OPENING = (
    "Plan mode is active. The user indicated that they do not want you to execute yet -- you "
    "MUST NOT make any edits, run any non-readonly tools (including changing configs or making "
    "commits), or otherwise make any changes to the system."
)
ITEMS = (
    TodoItemData(content="read the spec", status="completed", priority="high"),
    TodoItemData(content="write the fold", status="in_progress", priority="high"),
    TodoItemData(content="write the tests", status="pending", priority="medium"),
)


def counters(**values: Any) -> TurnCounters:
    return TurnCounters(SID, **values)


def decide(
    state: TurnCounters, *, tools: Sequence[str] = ("TodoWrite",), continuation: bool = False,
    todos: Sequence[TodoItemData] = ITEMS, sources: Sequence[Any] = (),
) -> list[Reminder]:
    return decide_reminders(
        state, TurnRequest.of(tools, continuation=continuation), lambda: todos,
        sources=sources, workspace="/work",
    )


def kinds(reminders: list[Reminder]) -> list[str]:
    return [r.kind for r in reminders]


def never_read() -> Sequence[TodoItemData]:
    raise AssertionError("the todo list was read although no todo reminder was due")


def plan_file(context: ReminderContext) -> Reminder | None:
    text = f"A plan file exists from plan mode at: {context.workspace}"
    return Reminder("plan_file_reference", text)


# -- TD-5: the todo reminder ---------------------------------------------------------------


def test_td5_nine_assistant_messages_are_not_enough_ten_are() -> None:
    assert decide(counters(assistant_since_todo=9)) == []
    assert kinds(decide(counters(assistant_since_todo=10))) == ["todo_reminder"]
    assert kinds(decide(counters(assistant_since_todo=250))) == ["todo_reminder"]


@pytest.mark.parametrize("tools", [(), ("TodoRead",), ("todowrite",), ("Read", "Bash")])
def test_td5_only_when_todowrite_is_in_this_requests_tools(tools: tuple[str, ...]) -> None:
    assert decide(counters(assistant_since_todo=10), tools=tools) == []


def test_td5_never_during_an_output_token_continuation() -> None:
    assert decide(counters(assistant_since_todo=10), continuation=True) == []


def test_td5_text_is_exact_opening_header_blank_line_then_one_line_per_item() -> None:
    (reminder,) = decide(counters(assistant_since_todo=10))
    assert reminder.text.startswith(TODO_OPENING)
    assert reminder.variant is None
    header, body = reminder.text.split("\n\n")
    assert header == TODO_REMINDER_HEADER
    assert body.split("\n") == [
        "1. [completed] read the spec",
        "2. [in_progress] write the fold",
        "3. [pending] write the tests",
    ]


def test_td5_an_empty_list_still_gets_the_reminder_saying_it_is_empty() -> None:
    (reminder,) = decide(counters(assistant_since_todo=10), todos=())
    assert reminder.text.startswith(TODO_OPENING)
    header, body = reminder.text.split("\n\n")
    assert header == TODO_REMINDER_HEADER
    assert "empty" in body and "1." not in body


def test_td5_an_item_spanning_lines_still_takes_one_line() -> None:
    item = TodoItemData(content="first\nsecond", status="pending", priority="low")
    (reminder,) = decide(counters(assistant_since_todo=10), todos=(item,))
    assert reminder.text.endswith("\n\n1. [pending] first second")


def test_td5_the_list_is_read_only_when_a_todo_reminder_is_due() -> None:
    request = TurnRequest.of(["TodoWrite"])
    assert decide_reminders(counters(assistant_since_todo=9), request, never_read) == []
    assert decide_reminders(
        counters(assistant_since_todo=10), TurnRequest.of([]), never_read
    ) == []


# -- PM-5: the Plan reminders --------------------------------------------------------------


def test_pm5_the_first_reminder_of_a_plan_period_is_the_full_text() -> None:
    (reminder,) = decide(counters(plan_enabled=True), tools=())
    assert reminder == Reminder("runtime_mode", PLAN_MODE_FULL, "full")
    assert reminder.text.startswith(PLAN_OPENING)


@pytest.mark.parametrize("users", [0, 1, 2, 3, 4])
def test_pm5_fewer_than_five_real_user_messages_give_no_new_reminder(users: int) -> None:
    state = counters(plan_enabled=True, plan_reminders=1, users_since_plan_reminder=users)
    assert decide(state, tools=()) == []


@pytest.mark.parametrize("injection", range(1, 17))
def test_pm5_the_1st_6th_11th_16th_are_full_the_rest_sparse(injection: int) -> None:
    state = counters(
        plan_enabled=True, plan_reminders=injection - 1,
        users_since_plan_reminder=0 if injection == 1 else 5,
    )
    (reminder,) = decide(state, tools=())
    full = injection in (1, 6, 11, 16)
    assert reminder.kind == "runtime_mode"
    assert reminder.variant == ("full" if full else "sparse")
    assert reminder.text == (PLAN_MODE_FULL if full else PLAN_MODE_SPARSE)


def test_pm5_more_than_five_user_messages_still_give_one_reminder() -> None:
    state = counters(plan_enabled=True, plan_reminders=2, users_since_plan_reminder=12)
    assert kinds(decide(state, tools=())) == ["runtime_mode"]


def test_pm5_the_full_text_gives_the_four_phase_workflow() -> None:
    text = PLAN_MODE_FULL
    for phase in ("Phase 1", "Phase 2", "Phase 3", "Phase 4"):
        assert phase in text
    assert "explore subagents only" in text and "at most 3" in text
    assert "AskUserQuestion" in text and "ExitPlanMode" in text
    assert "may only end with a call to AskUserQuestion" in text
    assert '"is this plan OK?" must go through ExitPlanMode' in text


def test_pm5_the_sparse_text_is_a_short_reminder_of_the_same_rules() -> None:
    assert len(PLAN_MODE_SPARSE) < len(PLAN_MODE_FULL) / 2
    assert not PLAN_MODE_SPARSE.startswith(PLAN_OPENING)
    for rule in ("no edits", "at most 3", "AskUserQuestion", "ExitPlanMode"):
        assert rule in PLAN_MODE_SPARSE


def test_pm5_no_plan_reminder_while_plan_is_off() -> None:
    assert decide(counters(users_since_plan_reminder=40), tools=()) == []


def test_pm5_an_armed_plan_exit_gives_one_exit_reminder() -> None:
    (reminder,) = decide(counters(plan_exit_armed=True), tools=())
    assert reminder == Reminder("plan_exit", PLAN_EXIT, None)
    assert "may now make edits, run tools" in reminder.text


def test_pm5_a_continuation_suppresses_only_the_todo_reminder() -> None:
    plan = counters(plan_enabled=True, assistant_since_todo=30)
    assert kinds(decide(plan, continuation=True)) == ["runtime_mode"]
    left = counters(plan_exit_armed=True, assistant_since_todo=30)
    assert kinds(decide(left, continuation=True)) == ["plan_exit"]
    assert kinds(decide(left, continuation=True, sources=[plan_file])) == [
        "plan_exit", "plan_file_reference",
    ]


@pytest.mark.parametrize(
    ("state", "expected"),
    [
        (counters(plan_enabled=True, assistant_since_todo=10),
         ["runtime_mode", "plan_file_reference", "todo_reminder"]),
        (counters(plan_exit_armed=True, assistant_since_todo=10),
         ["plan_exit", "plan_file_reference", "todo_reminder"]),
        (counters(assistant_since_todo=10), ["plan_file_reference", "todo_reminder"]),
        (counters(plan_enabled=True), ["runtime_mode", "plan_file_reference"]),
    ],
)
def test_pm5_order_is_plan_then_plan_file_then_todo(
    state: TurnCounters, expected: list[str]
) -> None:
    assert kinds(decide(state, sources=[plan_file])) == expected


# -- PM-10: the open slot for sources ------------------------------------------------------


def test_pm10_sources_run_in_order_and_see_the_session_and_the_request() -> None:
    seen: list[ReminderContext] = []

    def silent(context: ReminderContext) -> Reminder | None:
        seen.append(context)
        return None

    def second(context: ReminderContext) -> Reminder | None:
        return Reminder("plan_file_reference", "second")

    state = counters(compacted=True)
    result = decide(state, tools=("Read",), continuation=True, sources=[silent, plan_file, second])
    assert [r.text for r in result] == ["A plan file exists from plan mode at: /work", "second"]
    (context,) = seen
    assert context.session_id == SID and context.workspace == "/work"
    assert context.counters is state and context.counters.compacted
    assert context.request == TurnRequest(frozenset({"Read"}), True)


def test_reminder_wire_shape() -> None:
    assert Reminder("runtime_mode", "t", "sparse").to_wire() == {
        "kind": "runtime_mode", "variant": "sparse", "text": "t",
    }


# -- the fold ------------------------------------------------------------------------------


def envelopes(*events: Event, session_id: str = SID) -> list[RecordedEvent]:
    return [
        RecordedEvent(seq, session_id, seq, e.type, 1, e, "2026-01-01T00:00:00.000Z", "host",
                      None, None, "0" * 64, "0" * 64)
        for seq, e in enumerate(events, start=1)
    ]


def created(plan: bool = False) -> SessionCreated:
    return SessionCreated(workspace="/w", execution_state=ExecutionStateData(plan_enabled=plan))


def mode(plan: bool, previous: bool) -> SessionModeChanged:
    return SessionModeChanged(mode="build", plan_enabled=plan, previous_mode="build",
                              previous_plan_enabled=previous, via="mode_command")


def message(role: str = "assistant", kind: str = "real", continuation: bool = False) -> Event:
    return MessageRecorded.model_validate(
        {"role": role, "kind": kind, "continuation": continuation, "content": "x"}
    )


def reminder(kind: str) -> ReminderInjected:
    return ReminderInjected.model_validate({"kind": kind, "text": "t"})


def test_fold_counts_assistant_messages_of_any_kind_but_no_continuation_or_user() -> None:
    folded = fold_turns(envelopes(
        created(), message(), message(kind="synthetic"), message(continuation=True),
        message("user"), message("user", "synthetic"),
    ))
    assert folded == counters(assistant_since_todo=2, users_since_plan_reminder=1)


def test_td5_fold_a_todo_write_and_a_todo_reminder_both_reset_the_count() -> None:
    base = [created(), *(message() for _ in range(4))]
    written = TodosWritten(todos=ITEMS)
    assert fold_turns(envelopes(*base, written, message())) == counters(assistant_since_todo=1)
    after_reminder = fold_turns(envelopes(*base, reminder("todo_reminder"), message(), message()))
    assert after_reminder == counters(assistant_since_todo=2)
    other = fold_turns(envelopes(*base, reminder("plan_exit")))
    assert other is not None and other.assistant_since_todo == 4


def test_pm5_fold_plan_periods_and_the_exit_notice() -> None:
    events = [created(plan=True), reminder("runtime_mode"), message("user"), message("user")]
    assert fold_turns(envelopes(*events)) == counters(
        plan_enabled=True, plan_reminders=1, users_since_plan_reminder=2,
    )
    left = [*events, mode(False, True)]
    assert fold_turns(envelopes(*left)) == counters(plan_exit_armed=True)
    assert fold_turns(envelopes(*left, reminder("plan_exit"))) == counters()
    reentered = fold_turns(envelopes(*left, mode(True, False)))
    assert reentered == counters(plan_enabled=True)  # a new period; the exit notice is void
    same = fold_turns(envelopes(*events, mode(True, True)))
    assert same == fold_turns(envelopes(*events))


def test_pm10_fold_a_compaction_holds_until_a_request_records_a_reminder() -> None:
    assert fold_turns(envelopes(created(), ContextCompacted())) == counters(compacted=True)
    for kind in ("runtime_mode", "plan_exit", "plan_file_reference", "todo_reminder"):
        folded = fold_turns(envelopes(created(), ContextCompacted(), reminder(kind)))
        assert folded is not None and not folded.compacted


def test_fold_without_session_created_is_nothing() -> None:
    assert fold_turns(envelopes(message(), reminder("todo_reminder"))) is None


# -- property: the fold is the precise rule, and the projection is the fold -----------------


EVENTS = st.one_of(
    st.builds(message, st.sampled_from(["assistant", "user"]),
              st.sampled_from(["real", "synthetic"]), st.booleans()),
    st.builds(lambda: TodosWritten(todos=ITEMS[:1])),
    st.builds(reminder, st.sampled_from(
        ["todo_reminder", "runtime_mode", "plan_exit", "plan_file_reference"])),
    st.builds(lambda plan: mode(plan, not plan), st.booleans()),
    st.builds(ContextCompacted),
)


def _last_seq(log: list[RecordedEvent], match: Any) -> int:
    return max((e.seq for e in log if match(e.data)), default=0)


def _toggles(log: list[RecordedEvent]) -> list[int]:
    """The ``seq`` of every event that switched Plan on or off."""
    plan, seqs = False, []
    for e in log:
        data = e.data
        if isinstance(data, SessionCreated):
            plan = data.execution_state.plan_enabled
        elif isinstance(data, SessionModeChanged) and data.plan_enabled != plan:
            plan = data.plan_enabled
            seqs.append(e.seq)
    return seqs


def by_definition(log: list[RecordedEvent]) -> tuple[int, int, int]:
    """TD-5 and PM-5 counted as the spec words them, by ``seq``."""
    todo_floor = max(
        _last_seq(log, lambda d: isinstance(d, TodosWritten)),
        _last_seq(log, lambda d: isinstance(d, ReminderInjected) and d.kind == "todo_reminder"),
    )
    assistants = sum(
        1 for e in log if e.seq > todo_floor and isinstance(e.data, MessageRecorded)
        and e.data.role == "assistant" and not e.data.continuation
    )
    period_start = max(_toggles(log), default=0)
    plan_floor = max(
        period_start,
        _last_seq(log, lambda d: isinstance(d, ReminderInjected) and d.kind == "runtime_mode"),
    )
    users = sum(
        1 for e in log if e.seq > plan_floor and isinstance(e.data, MessageRecorded)
        and e.data.role == "user" and e.data.kind == "real"
    )
    injections = sum(
        1 for e in log if e.seq > period_start and isinstance(e.data, ReminderInjected)
        and e.data.kind == "runtime_mode"
    )
    return assistants, users, injections


@given(st.lists(EVENTS, max_size=60), st.lists(st.integers(1, 7), min_size=1, max_size=20))
def test_fold_counts_as_td5_and_pm5_define_and_the_projection_agrees(
    events: list[Event], chunks: list[int]
) -> None:
    log = envelopes(created(), *events)
    folded = fold_turns(log)
    assert folded is not None
    assistants, users, injections = by_definition(log)
    assert folded.assistant_since_todo == assistants
    if folded.plan_enabled:
        assert folded.users_since_plan_reminder == users
        assert folded.plan_reminders == injections
    left = max(_toggles(log), default=0)
    armed = not folded.plan_enabled and left > 0 and left > _last_seq(
        log, lambda d: isinstance(d, ReminderInjected) and d.kind == "plan_exit"
    )
    assert folded.plan_exit_armed == armed
    assert folded.compacted == (
        _last_seq(log, lambda d: isinstance(d, ContextCompacted))
        > _last_seq(log, lambda d: isinstance(d, ReminderInjected))
    )
    projection = TurnCountersProjection(MemoryDocTable("turn_counters"))
    position, sizes = 0, iter(chunks * 60)
    while position < len(log):
        step = next(sizes)
        projection.apply(None, log[position:position + step])
        position += step
    assert projection.get(None, SID) == folded
    assert projection.differences_of(folded, fold_turns(log), SID) == []
