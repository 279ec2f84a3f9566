"""The execution-state machine, exhaustively and without I/O (SPEC §3, ES-1 … ES-5, ES-8).

Every state a session can be created in is a start; a breadth-first search over every command
(several goal objectives included) finds everything reachable. The search proves the
exclusivity rule (ES-5) for all reachable states rather than for a sample, and that the
machine's declared ``STATES`` are exactly the reachable ones. The named paths of ES-3 and ES-4
are checked one by one, with the exact refusal message. ES-2's legacy ``{"mode": "plan"}`` is
checked on the model and through a raw row written into a SQLite log as an old version would
have written it.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections import deque
from collections.abc import Iterable, Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from eventlog import (
    GENESIS_HASH,
    ManualClock,
    NewEvent,
    SessionCreated,
    SessionModeChanged,
    canonical_json,
    format_instant,
    open_store,
    read_execution_state,
)
from eventlog.envelope import build_row
from projections import SessionSummary, compare_session, open_projected_store
from sessionledger.ledger import Ledger
from sessionledger.service import ExecutionRuntime
from statemachine.execution import (
    MODES,
    PLAN_GOAL_EXCLUSIVE,
    STATES,
    TRANSITIONS,
    Command,
    Cycle,
    EndGoal,
    EnterPlan,
    ExecutionState,
    LeavePlan,
    Refusal,
    SetMode,
    StartGoal,
    decide,
    decide_events,
    state_name,
)

COLUMNS = (
    "global_position", "session_id", "seq", "type", "schema_version", "data", "recorded_at",
    "actor", "causation_id", "correlation_id", "idempotency_key", "prev_hash", "hash",
)
"""The ``events`` columns in SPEC EL-9 order (the order of a raw row tuple)."""
ROOT = Path(__file__).resolve().parent.parent
EXCLUSIVE = "Plan and Goal cannot be active at the same time."
OBJECTIVES = ("ship the release", "x", "écrire les tests")
COMMANDS: tuple[Command, ...] = (
    *(SetMode(m) for m in ("plan", "build", "edit", "yolo", "auto")),
    Cycle(), EnterPlan(), LeavePlan(), EndGoal(),
    *(StartGoal(o) for o in OBJECTIVES),
)
BUILD = ExecutionState("build", False, None)


def initial_states() -> list[ExecutionState]:
    """Every state a session can be created with: each mode, Plan off or on, or with a goal."""
    starts = [ExecutionState(m, plan, None) for m in MODES for plan in (False, True)]
    starts += [ExecutionState(m, False, "the initial goal") for m in MODES]
    return starts


def successors(state: ExecutionState) -> Iterator[tuple[Command, ExecutionState]]:
    for command in COMMANDS:
        outcome = decide(state, command)
        if isinstance(outcome, ExecutionState):
            yield command, outcome


def explore(starts: Iterable[ExecutionState]) -> dict[ExecutionState, set[ExecutionState]]:
    """Breadth-first from ``starts``: every reachable state and the states it moves to."""
    graph: dict[ExecutionState, set[ExecutionState]] = {}
    queue = deque(starts)
    while queue:
        state = queue.popleft()
        if state in graph:
            continue
        graph[state] = {nxt for _command, nxt in successors(state)}
        queue.extend(graph[state] - graph.keys())
    return graph


def reachable_from(
    graph: dict[ExecutionState, set[ExecutionState]], start: ExecutionState
) -> set[ExecutionState]:
    seen, queue = {start}, deque([start])
    while queue:
        for nxt in graph[queue.popleft()] - seen:
            seen.add(nxt)
            queue.append(nxt)
    return seen


GRAPH = explore(initial_states())
REACHABLE = set(GRAPH)


def assert_exclusive_refusal(outcome: object) -> None:
    assert isinstance(outcome, Refusal), outcome
    assert outcome.code == "plan_goal_exclusive"
    assert outcome.message == EXCLUSIVE


# -- the whole reachable space (ES-1, ES-5) ----------------------------------------------------


def test_es5_message_constant_is_the_spec_sentence() -> None:
    assert PLAN_GOAL_EXCLUSIVE == EXCLUSIVE


def test_es5_no_reachable_state_holds_plan_and_goal() -> None:
    offenders = [s for s in REACHABLE if s.plan_enabled and s.goal is not None]
    assert offenders == []


def test_es1_es5_reachable_states_are_exactly_the_declared_states() -> None:
    assert {state_name(s) for s in REACHABLE} == set(STATES)
    assert len(STATES) == len(set(STATES)) == 12


def test_es1_every_reachable_state_returns_to_plain_build() -> None:
    stuck = [s for s in REACHABLE if BUILD not in reachable_from(GRAPH, s)]
    assert stuck == []


def test_es1_goal_objectives_are_kept_exactly() -> None:
    objectives = {s.goal for s in REACHABLE if s.goal is not None}
    assert objectives == {*OBJECTIVES, "the initial goal"}


@pytest.mark.parametrize("plan", [False, True])
@pytest.mark.parametrize("goal", [None, "g"])
@pytest.mark.parametrize("mode", MODES)
def test_es1_display_mode_is_plan_iff_plan_enabled(mode: str, plan: bool, goal: str | None) -> None:
    state = ExecutionState(mode, plan, goal)  # type: ignore[arg-type]
    assert state.display_mode == ("plan" if plan else mode)
    summary = SessionSummary(
        session_id="s", version=1, last_position=1, workspace="/", host="protocol",
        parent_session_id=None, mode=mode, plan_enabled=plan, goal=goal,  # type: ignore[arg-type]
        created_at="t", updated_at="t",
    )
    assert summary.display_mode == state.display_mode


def test_es5_every_refusal_in_the_reachable_space_appends_nothing() -> None:
    for state in REACHABLE:
        for command in COMMANDS:
            decision = decide_events(state, command, via="mode_command")
            outcome = decide(state, command)
            if isinstance(outcome, Refusal):
                assert decision == outcome
            else:
                assert isinstance(decision, tuple) and decision[0] == outcome


# -- ES-4: ways in, Shift+Tab -------------------------------------------------------------------


def display_cycle(start: ExecutionState, steps: int) -> list[str]:
    shown, state = [start.display_mode], start
    for _ in range(steps):
        outcome = decide(state, Cycle())
        assert isinstance(outcome, ExecutionState), (state, outcome)
        state = outcome
        shown.append(state.display_mode)
    return shown


@pytest.mark.parametrize(
    ("start", "expected"),
    [
        (ExecutionState("build", True), ["plan", "build", "edit", "yolo", "plan"]),
        (ExecutionState("build"), ["build", "edit", "yolo", "plan", "build"]),
        (ExecutionState("edit"), ["edit", "yolo", "plan", "build", "edit"]),
        (ExecutionState("yolo"), ["yolo", "plan", "build", "edit", "yolo"]),
    ],
)
def test_es4_shift_tab_cycles_plan_build_edit_yolo(
    start: ExecutionState, expected: list[str]
) -> None:
    assert display_cycle(start, 4) == expected


def test_es4_shift_tab_from_yolo_keeps_yolo_under_plan() -> None:
    assert decide(ExecutionState("yolo"), Cycle()) == ExecutionState("yolo", True)


def test_es4_shift_tab_from_auto_goes_to_plan_keeping_auto() -> None:
    plan = decide(ExecutionState("auto"), Cycle())
    assert plan == ExecutionState("auto", True, None)
    assert decide(plan, Cycle()) == BUILD


@pytest.mark.parametrize("mode", MODES)
def test_es3_es4_shift_tab_from_plan_sets_build(mode: str) -> None:
    assert decide(ExecutionState(mode, True), Cycle()) == BUILD  # type: ignore[arg-type]


@pytest.mark.parametrize("target", MODES)
@pytest.mark.parametrize("mode", MODES)
def test_es4_mode_command_leaves_plan_and_sets_the_mode(mode: str, target: str) -> None:
    state = ExecutionState(mode, True)  # type: ignore[arg-type]
    after = decide_events(state, SetMode(target), via="mode_command")  # type: ignore[arg-type]
    assert isinstance(after, tuple)
    assert after[0] == ExecutionState(target, False)  # type: ignore[arg-type]
    (event,) = after[1]
    assert isinstance(event, SessionModeChanged)
    assert (event.mode, event.plan_enabled) == (target, False)
    assert (event.previous_mode, event.previous_plan_enabled, event.via) == (
        mode, True, "mode_command"
    )


@pytest.mark.parametrize("command", [SetMode("plan"), EnterPlan()], ids=["mode_plan", "enter"])
@pytest.mark.parametrize("mode", MODES)
def test_es3_es4_entering_plan_keeps_the_mode_underneath(mode: str, command: Command) -> None:
    assert decide(ExecutionState(mode), command) == ExecutionState(mode, True)  # type: ignore[arg-type]


# -- ES-5: exclusivity on every path ---------------------------------------------------------


@pytest.mark.parametrize("mode", ["yolo", "auto"])
def test_es5_shift_tab_into_plan_during_a_goal_is_refused(mode: str) -> None:
    assert_exclusive_refusal(decide(ExecutionState(mode, False, "g"), Cycle()))  # type: ignore[arg-type]


def test_es5_shift_tab_during_a_goal_does_not_skip_plan() -> None:
    for mode, nxt in (("build", "edit"), ("edit", "yolo")):
        outcome = decide(ExecutionState(mode, False, "g"), Cycle())  # type: ignore[arg-type]
        assert outcome == ExecutionState(nxt, False, "g")  # type: ignore[arg-type]
    for mode in ("yolo", "auto"):
        outcome = decide(ExecutionState(mode, False, "g"), Cycle())  # type: ignore[arg-type]
        assert not isinstance(outcome, ExecutionState)  # not ahead to build either


@pytest.mark.parametrize("command", [EnterPlan(), SetMode("plan")], ids=["enter", "mode_plan"])
@pytest.mark.parametrize("mode", MODES)
def test_es5_entering_plan_during_a_goal_is_refused(mode: str, command: Command) -> None:
    state = ExecutionState(mode, False, "g")  # type: ignore[arg-type]
    assert_exclusive_refusal(decide(state, command))
    assert_exclusive_refusal(decide_events(state, command, via="plan_command"))


@pytest.mark.parametrize("mode", MODES)
def test_es5_starting_a_goal_during_plan_is_refused(mode: str) -> None:
    state = ExecutionState(mode, True)  # type: ignore[arg-type]
    for objective in OBJECTIVES:
        assert_exclusive_refusal(decide(state, StartGoal(objective)))


def test_es5_every_refusal_from_a_goal_or_plan_to_both_is_the_exact_message() -> None:
    for state in REACHABLE:
        for command in COMMANDS:
            would_enter_plan = isinstance(command, EnterPlan) or command == SetMode("plan")
            if state.goal is not None and would_enter_plan:
                assert_exclusive_refusal(decide(state, command))
            if state.plan_enabled and isinstance(command, StartGoal):
                assert_exclusive_refusal(decide(state, command))


# -- ES-3: leaving Plan, no-op commands -------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_es3_approval_returns_to_the_mode_held_before_plan(mode: str) -> None:
    before = ExecutionState(mode)  # type: ignore[arg-type]
    for way_in in (EnterPlan(), SetMode("plan"), Cycle()):
        in_plan = decide(before, way_in)
        if mode in ("build", "edit") and isinstance(way_in, Cycle):
            continue  # Shift+Tab reaches Plan only from yolo and auto
        assert isinstance(in_plan, ExecutionState) and in_plan.plan_enabled
        decision = decide_events(in_plan, LeavePlan(), via="plan_approval")
        assert isinstance(decision, tuple)
        assert decision[0] == before
        (event,) = decision[1]
        assert isinstance(event, SessionModeChanged)
        assert (event.mode, event.plan_enabled, event.via) == (mode, False, "plan_approval")


@pytest.mark.parametrize("command", [SetMode("plan"), EnterPlan()], ids=["mode_plan", "enter"])
@pytest.mark.parametrize("mode", MODES)
def test_es3_entering_plan_while_in_plan_is_a_no_op_without_events(
    mode: str, command: Command
) -> None:
    state = ExecutionState(mode, True)  # type: ignore[arg-type]
    assert decide(state, command) == state
    assert decide_events(state, command, via="enter_plan_tool") == (state, [])


@pytest.mark.parametrize("mode", MODES)
def test_es3_identical_state_means_no_events(mode: str) -> None:
    state = ExecutionState(mode)  # type: ignore[arg-type]
    assert decide_events(state, SetMode(mode), via="mode_command") == (state, [])  # type: ignore[arg-type]


# -- ES-2: legacy {"mode": "plan"} ------------------------------------------------------------


def test_es2_legacy_plan_mode_reads_as_build_with_plan() -> None:
    data = read_execution_state({"mode": "plan"})
    assert (data.mode, data.plan_enabled, data.goal) == ("build", True, None)
    assert data.model_dump(by_alias=True) == {"mode": "build", "planEnabled": True, "goal": None}


state_dicts = st.fixed_dictionaries(
    {"mode": st.sampled_from(["plan", *MODES])},
    optional={
        "planEnabled": st.booleans(),
        "goal": st.none() | st.builds(lambda o: {"objective": o}, st.text(min_size=1)),
    },
)


@given(state_dicts)
def test_es2_plan_is_never_written_as_a_mode(raw: dict[str, Any]) -> None:
    plan_on = raw["mode"] == "plan" or raw.get("planEnabled", False)
    if plan_on and raw.get("goal") is not None:  # ES-5: never recordable together
        with pytest.raises(ValidationError, match="Plan and Goal"):
            read_execution_state(raw)
        return
    data = read_execution_state(raw)
    dumped = data.model_dump(mode="json", by_alias=True)
    assert dumped["mode"] in MODES
    if raw["mode"] == "plan":
        assert (data.mode, data.plan_enabled) == ("build", True)
    else:
        assert (data.mode, data.plan_enabled) == (raw["mode"], raw.get("planEnabled", False))
    assert read_execution_state(dumped) == data
    assert '"plan"' not in json.dumps(dumped)


@given(st.text().filter(lambda m: m not in ("plan", *MODES)))
def test_es2_other_modes_are_rejected(mode: str) -> None:
    with pytest.raises(ValidationError):
        read_execution_state({"mode": mode})


def insert_raw_session_created(path: Path, session_id: str, payload: dict[str, Any]) -> None:
    """Write a SessionCreated row as an old version would have (its own JSON, valid hash)."""
    recorded_at = format_instant(ManualClock().now())
    row = build_row(
        global_position=1, session_id=session_id, seq=1,
        new=NewEvent(SessionCreated(workspace="/"), actor="host"),
        data_json=canonical_json(payload), recorded_at=recorded_at,
        idempotency_key=None, prev_hash=GENESIS_HASH,
    )
    with closing(sqlite3.connect(path)) as conn, conn:
        marks = ",".join("?" * len(row))
        conn.execute(f"INSERT INTO events ({', '.join(COLUMNS)}) VALUES ({marks})", row)
        conn.execute(
            "INSERT INTO streams (session_id, version, head_hash, created_at, updated_at) "
            "VALUES (?, 1, ?, ?, ?)", (session_id, row[12], recorded_at, recorded_at),
        )


def test_es2_legacy_row_in_a_sqlite_log_decodes_and_projects_as_plan(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    url = f"sqlite:///{path}"
    open_store(url).close()  # an old log: the schema, no projection recorded yet
    legacy = {"workspace": "/", "executionState": {"mode": "plan"}}
    insert_raw_session_created(path, "ses_legacy", legacy)
    store, projections = open_projected_store(url)
    try:
        assert all(report.ok for report in store.verify())
        (event,) = store.read_session("ses_legacy")
        assert isinstance(event.data, SessionCreated)
        state = event.data.execution_state
        assert (state.mode, state.plan_enabled, state.goal) == ("build", True, None)
        summary = projections.summary(store, "ses_legacy")
        assert summary is not None
        assert (summary.mode, summary.plan_enabled, summary.display_mode) == (
            "build", True, "plan"
        )
        assert compare_session(store, projections, "ses_legacy") == []
        # ES-2 + ES-3: approval leaves Plan for build; nothing written names "plan" as a mode.
        runtime = ExecutionRuntime(Ledger(store, projections))
        result = runtime.execute("ses_legacy", LeavePlan(), via="plan_approval")
        assert result.state == BUILD
        written = [json.loads(row[5]) for row in store.raw_session("ses_legacy")][1:]
        assert written and all(data.get("mode") != "plan" for data in written)
        assert written[0]["previousMode"] == "build" and written[0]["previousPlanEnabled"]
    finally:
        store.close()


# -- ES-8: the committed diagram is drawn from the machine --------------------------------------


def mermaid_block() -> str:
    page = (ROOT / "docs" / "state-machines.md").read_text(encoding="utf-8")
    match = re.search(r"```mermaid\n(.*?)```", page, re.S)
    assert match, "docs/state-machines.md has no mermaid diagram"
    return match.group(1)


def test_es8_diagram_holds_every_state_and_every_transition() -> None:
    block = mermaid_block()
    drawn_states = set(re.findall(r'^\s*state "(\w+)" as \w+$', block, re.M))
    assert drawn_states == set(STATES)
    drawn = {
        (source, trigger.strip(), dest)
        for source, dest, triggers in re.findall(r"^\s*(\w+) --> (\w+): (.+)$", block, re.M)
        for trigger in triggers.split("|")
    }
    declared = {
        (source, t["trigger"], t["dest"])
        for t in TRANSITIONS
        for source in ([t["source"]] if isinstance(t["source"], str) else t["source"])
    }
    assert drawn == declared
    assert {t for _s, t, _d in drawn} == {t["trigger"] for t in TRANSITIONS}
    assert re.search(r"^\s*\[\*\] --> build$", block, re.M)


def test_es5_a_recorded_state_can_never_hold_plan_and_goal() -> None:
    # ES-5: the payload model refuses the combination, so no event can carry it either.
    from pydantic import ValidationError

    from eventlog import SessionCreated

    for state in ({"planEnabled": True, "goal": {"objective": "x"}},
                  {"mode": "plan", "goal": {"objective": "x"}}):
        with pytest.raises(ValidationError, match="Plan and Goal cannot be active"):
            read_execution_state(state)
        with pytest.raises(ValidationError):
            SessionCreated.model_validate({"workspace": "/", "executionState": state})


def test_es2_legacy_plan_mode_wins_over_a_python_named_switch() -> None:
    # ES-2: {"mode": "plan"} means build + Plan whatever plan_enabled said beside it.

    for extra in ({"plan_enabled": False}, {"planEnabled": False}, {}):
        state = read_execution_state({"mode": "plan", **extra})
        assert (state.mode, state.plan_enabled) == ("build", True)
