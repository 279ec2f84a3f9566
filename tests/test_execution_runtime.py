"""The execution runtime over a real SQLite log (SPEC ES-3 … ES-7).

ES-6's order is observed from the outside: a store listener (called inside the append) still
sees the old in-memory state, a runtime subscriber already sees the new one and the events in
the log. Failed appends are injected two ways: a wrapper whose ``append`` raises before the
store is reached, and an inline projection that raises inside the store's own transaction
(so the real rollback runs). Two runtimes on two store objects over one file race on one
session from threads; the log they leave must chain every decision on the state before it.
"""

from __future__ import annotations

import itertools
import random
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from eventlog import (
    EventStore,
    GoalEnded,
    GoalStarted,
    MessageRecorded,
    NewEvent,
    RecordedEvent,
    SessionCreated,
    SessionModeChanged,
    StoreBusy,
    new_session_id,
    open_store,
    read_execution_state,
)
from projections import (
    ExecutionStateProjection,
    Projections,
    compare_session,
    open_projected_store,
)
from projections.session import TurnCountersProjection
from projections.tables import SqliteDocTable, SqliteSummaryTable, SqliteTodoTable
from projections.tools import DocProjection, TodoProjection, fold_call, fold_interaction
from sessionledger.errors import CommandRefused, Conflict
from sessionledger.ledger import DEFAULT_PATIENCE, Patience
from sessionledger.ledger import Ledger as ServiceLedger
from sessionledger.service import CommandResult, ExecutionRuntime
from statemachine.execution import (
    Command,
    Cycle,
    EndGoal,
    EnterPlan,
    ExecutionState,
    LeavePlan,
    SetMode,
    StartGoal,
)

EXCLUSIVE = "Plan and Goal cannot be active at the same time."
Ledger = tuple[EventStore, Projections]


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'ledger.db'}"


@pytest.fixture
def ledger(url: str) -> Iterator[Ledger]:
    store, projections = open_projected_store(url)
    yield store, projections
    store.close()


def create(store: EventStore, **state: Any) -> str:
    """Append a SessionCreated with ``state`` (wire names, legacy ``mode="plan"`` allowed)."""
    session_id = new_session_id()
    created = SessionCreated(
        workspace="/projects/demo", execution_state=read_execution_state(state)
    )
    store.append(session_id, [NewEvent(created, actor="host")], expected_version=0)
    return session_id


class Recorder:
    """Collects what store listeners and runtime subscribers are handed."""

    def __init__(self) -> None:
        self.store_calls: list[Sequence[RecordedEvent]] = []
        self.runtime_calls: list[CommandResult] = []

    def attach(self, store: EventStore, runtime: ExecutionRuntime) -> Recorder:
        store.subscribe(self.store_calls.append)
        runtime.subscribe(self.runtime_calls.append)
        return self


def snapshot(store: EventStore, projections: Projections, session_id: str) -> tuple[Any, ...]:
    """Everything a failed command must leave as it was."""
    return (
        store.version(session_id), store.head_position(),
        projections.summary(store, session_id), list(store.raw_session(session_id)),
    )


# -- ES-6: a failed append changes nothing ------------------------------------------------------


class FailingAppendStore:
    """The real store, except that ``append`` raises ``error`` (a full disk, a locked file)."""

    def __init__(self, store: EventStore, error: BaseException) -> None:
        self._store = store
        self.error = error
        self.appends = 0

    def append(self, *args: Any, **kwargs: Any) -> Any:
        self.appends += 1
        raise self.error

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


FAILURES = [
    pytest.param(OSError(28, "No space left on device"), id="oserror"),
    pytest.param(StoreBusy("database stayed locked"), id="store_busy"),
    pytest.param(sqlite3.OperationalError("disk I/O error"), id="sqlite_io"),
]
COMMANDS = [
    pytest.param(EnterPlan(), id="enter_plan"),
    pytest.param(Cycle(), id="cycle"),
    pytest.param(SetMode("auto"), id="mode_auto"),
    pytest.param(StartGoal("refactor"), id="start_goal"),
]


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("error", FAILURES)
@pytest.mark.parametrize("warm", [True, False], ids=["memory_loaded", "memory_cold"])
def test_es6_failed_append_leaves_memory_projection_and_subscribers_untouched(
    ledger: Ledger, error: BaseException, command: Command, warm: bool
) -> None:
    store, projections = ledger
    session = create(store, mode="yolo")
    failing = FailingAppendStore(store, error)
    runtime = ExecutionRuntime(ServiceLedger(failing, projections))  # type: ignore[arg-type]
    seen = Recorder().attach(store, runtime)
    if warm:
        assert runtime.state(session) == ExecutionState("yolo")
    before = snapshot(store, projections, session)
    with pytest.raises(type(error)) as raised:
        runtime.execute(session, command, via="mode_command", message="task")
    assert raised.value is error
    assert failing.appends == 1
    assert runtime.state(session) == ExecutionState("yolo")
    assert snapshot(store, projections, session) == before
    assert seen.store_calls == [] and seen.runtime_calls == []
    assert compare_session(store, projections, session) == []


class ExplodingProjection:
    """An inline projection that fails inside the append's transaction when armed."""

    name = "exploding"
    version = 1

    def __init__(self) -> None:
        self.armed = False

    def create(self, tx: Any) -> None: ...

    def is_present(self, tx: Any) -> bool:
        return True

    def drop(self, tx: Any) -> None: ...

    def forget(self, tx: Any, session_id: str) -> None: ...

    def apply(self, tx: Any, events: Sequence[RecordedEvent]) -> None:
        if self.armed:
            raise OSError(5, "Input/output error")


def test_es6_append_failing_inside_the_store_transaction_rolls_back_everything(
    url: str,
) -> None:
    execution = ExecutionStateProjection(SqliteSummaryTable())
    calls = DocProjection(name="tool_calls", version=1, table=SqliteDocTable("tool_calls"),
                          fold=fold_call)
    interactions = DocProjection(name="interactions", version=1,
                                 table=SqliteDocTable("interactions"), fold=fold_interaction)
    turns = TurnCountersProjection(SqliteDocTable("turn_counters"))
    todos = TodoProjection(SqliteTodoTable(), execution)
    exploding = ExplodingProjection()
    store = open_store(
        url, projections=(execution, calls, interactions, turns, todos, exploding)
    )
    try:
        projections = Projections(execution, calls, interactions, turns, todos)
        session = create(store, mode="auto")
        runtime = ExecutionRuntime(ServiceLedger(store, projections))
        seen = Recorder().attach(store, runtime)
        assert runtime.state(session) == ExecutionState("auto")
        before = snapshot(store, projections, session)
        exploding.armed = True
        with pytest.raises(OSError, match="Input/output error"):
            runtime.execute(session, Cycle(), via="cycle")
        assert runtime.state(session) == ExecutionState("auto")
        assert snapshot(store, projections, session) == before
        assert seen.store_calls == [] and seen.runtime_calls == []
        exploding.armed = False  # the store is still usable, and the next change lands
        result = runtime.execute(session, Cycle(), via="cycle")
        assert result.state == ExecutionState("auto", True)
        assert [r.state for r in seen.runtime_calls] == [result.state]
        assert compare_session(store, projections, session) == []
    finally:
        store.close()


def test_es6_order_is_append_then_memory_then_publish(ledger: Ledger) -> None:
    store, projections = ledger
    session = create(store, mode="edit")
    runtime = ExecutionRuntime(ServiceLedger(store, projections))
    assert runtime.state(session) == ExecutionState("edit")
    order: list[str] = []

    def on_commit(events: Sequence[RecordedEvent]) -> None:
        order.append("append")
        # committed, but memory has not changed yet
        assert runtime.state(session) == ExecutionState("edit")
        assert store.version(session) == events[-1].seq

    def on_change(result: CommandResult) -> None:
        order.append("publish")
        assert runtime.state(session) == result.state == ExecutionState("edit", True)
        assert store.version(session) == result.version == 2
        (last,) = list(store.read_session(session, after=1))
        assert last == result.events[-1]
        summary = projections.summary(store, session)
        assert summary is not None and summary.execution == result.state

    store.subscribe(on_commit)
    runtime.subscribe(on_change)
    result = runtime.execute(session, EnterPlan(), via="enter_plan_tool")
    assert order == ["append", "publish"]
    assert result.changed and result.version == 2


def test_es6_a_failing_subscriber_does_not_undo_the_change(ledger: Ledger) -> None:
    store, projections = ledger
    session = create(store)
    runtime = ExecutionRuntime(ServiceLedger(store, projections))
    later: list[CommandResult] = []

    def broken(result: CommandResult) -> None:
        raise RuntimeError("subscriber bug")

    runtime.subscribe(broken)
    runtime.subscribe(later.append)
    result = runtime.execute(session, SetMode("yolo"), via="mode_command")
    assert runtime.state(session) == ExecutionState("yolo") == result.state
    assert later == [result]
    assert store.version(session) == 2


# -- ES-5 through the runtime -------------------------------------------------------------------


REFUSED = [
    pytest.param({"mode": "yolo", "goal": {"objective": "g"}}, Cycle(), None, id="cycle_yolo_goal"),
    pytest.param({"mode": "auto", "goal": {"objective": "g"}}, Cycle(), None, id="cycle_auto_goal"),
    pytest.param({"mode": "edit", "goal": {"objective": "g"}}, EnterPlan(), None, id="enter_plan"),
    pytest.param(
        {"mode": "build", "goal": {"objective": "g"}}, SetMode("plan"), None, id="mode_plan"
    ),
    pytest.param(
        {"mode": "build", "goal": {"objective": "g"}}, SetMode("plan"), "task", id="plan_task"
    ),
    pytest.param({"mode": "plan"}, StartGoal("g"), None, id="goal_in_legacy_plan"),
    pytest.param({"mode": "yolo", "planEnabled": True}, StartGoal("g"), None, id="goal_in_plan"),
]


@pytest.mark.parametrize(("initial", "command", "message"), REFUSED)
def test_es5_plan_and_goal_refused_with_the_exact_message_and_nothing_appended(
    ledger: Ledger, initial: dict[str, Any], command: Command, message: str | None
) -> None:
    store, projections = ledger
    session = create(store, **initial)
    runtime = ExecutionRuntime(ServiceLedger(store, projections))
    seen = Recorder().attach(store, runtime)
    before_state = runtime.state(session)
    before = snapshot(store, projections, session)
    with pytest.raises(CommandRefused) as raised:
        runtime.execute(session, command, via="plan_command", message=message)
    assert raised.value.message == str(raised.value) == EXCLUSIVE
    assert raised.value.reason == "plan_goal_exclusive"
    assert raised.value.to_wire()["error"]["message"] == EXCLUSIVE
    assert raised.value.status == 409
    assert snapshot(store, projections, session) == before
    assert runtime.state(session) == before_state
    assert seen.store_calls == [] and seen.runtime_calls == []


# -- ES-3 / ES-4 through the runtime ------------------------------------------------------------


@pytest.mark.parametrize("command", [EnterPlan(), SetMode("plan")], ids=["enter", "mode_plan"])
def test_es3_entering_plan_while_in_plan_succeeds_and_appends_nothing(
    ledger: Ledger, command: Command
) -> None:
    store, projections = ledger
    session = create(store, mode="auto", planEnabled=True)
    runtime = ExecutionRuntime(ServiceLedger(store, projections))
    seen = Recorder().attach(store, runtime)
    result = runtime.execute(session, command, via="enter_plan_tool")
    assert result.state == ExecutionState("auto", True)
    assert result.events == () and not result.changed and result.version == 1
    assert store.version(session) == 1
    assert seen.store_calls == [] and seen.runtime_calls == []


@pytest.mark.parametrize("mode", ["build", "edit", "yolo", "auto"])
def test_es3_approval_returns_to_the_mode_under_plan(ledger: Ledger, mode: str) -> None:
    store, projections = ledger
    session = create(store, mode=mode)
    runtime = ExecutionRuntime(ServiceLedger(store, projections))
    runtime.execute(session, EnterPlan(), via="enter_plan_tool")
    result = runtime.execute(session, LeavePlan(), via="plan_approval")
    assert result.state == ExecutionState(mode)  # type: ignore[arg-type]
    (event,) = result.events
    assert isinstance(event.data, SessionModeChanged)
    assert (event.data.previous_mode, event.data.previous_plan_enabled) == (mode, True)
    assert compare_session(store, projections, session) == []


def test_es4_plan_task_records_the_task_in_the_same_batch(ledger: Ledger) -> None:
    store, projections = ledger
    session = create(store, mode="edit")
    runtime = ExecutionRuntime(ServiceLedger(store, projections))
    seen = Recorder().attach(store, runtime)
    result = runtime.execute(
        session, SetMode("plan"), via="plan_command", message="write the migration"
    )
    assert result.state == ExecutionState("edit", True)
    changed, message = result.events
    assert isinstance(changed.data, SessionModeChanged) and changed.data.via == "plan_command"
    assert isinstance(message.data, MessageRecorded)
    assert (message.data.role, message.data.kind, message.data.content) == (
        "user", "real", "write the migration"
    )
    # one batch: one commit handed to listeners, consecutive seq, one timestamp
    assert [list(call) for call in seen.store_calls] == [[changed, message]]
    assert (changed.seq, message.seq) == (2, 3)
    assert message.global_position == changed.global_position + 1
    assert message.recorded_at == changed.recorded_at
    assert list(store.read_session(session, after=1)) == [changed, message]
    summary = projections.summary(store, session)
    assert summary is not None and summary.display_mode == "plan"


def test_es3_es4_plan_task_while_in_plan_records_only_the_message(ledger: Ledger) -> None:
    store, projections = ledger
    session = create(store, mode="plan")
    runtime = ExecutionRuntime(ServiceLedger(store, projections))
    result = runtime.execute(session, SetMode("plan"), via="plan_command", message="again")
    assert [e.type for e in result.events] == ["MessageRecorded"]
    assert not result.changed and result.state == ExecutionState("build", True)


# -- concurrency: two processes' runtimes on one session ----------------------------------------


def random_command(rng: random.Random) -> Command:
    choices: list[Callable[[], Command]] = [
        lambda: SetMode(rng.choice(["plan", "build", "edit", "yolo", "auto"])),
        Cycle, EnterPlan, LeavePlan, EndGoal,
        lambda: StartGoal(rng.choice(["a", "b", "c"])),
    ]
    return rng.choice(choices)()


def replay_checked(events: list[RecordedEvent]) -> tuple[str, bool, str | None]:
    """Fold the log, checking each change was decided on the state just before it."""
    first = events[0].data
    assert isinstance(first, SessionCreated)
    state = first.execution_state
    mode, plan, goal = state.mode, state.plan_enabled, state.goal and state.goal.objective
    for event in events[1:]:
        data = event.data
        if isinstance(data, SessionModeChanged):
            assert (data.previous_mode, data.previous_plan_enabled) == (mode, plan), event.seq
            mode, plan = data.mode, data.plan_enabled
        elif isinstance(data, GoalStarted):
            assert goal is None, event.seq
            goal = data.objective
        elif isinstance(data, GoalEnded):
            assert goal == data.objective, event.seq
            goal = None
        assert not (plan and goal is not None), event.seq  # ES-5 at every point of the log
    return mode, plan, goal


class Race:
    """Threads sending random commands to one session through two runtimes (two stores)."""

    def __init__(
        self, url: str, *, threads_per_runtime: int, commands: int,
        patience: Patience = DEFAULT_PATIENCE,
    ) -> None:
        self.ledgers = [open_projected_store(url) for _ in range(2)]  # two "processes"
        self.runtimes = [
            ExecutionRuntime(ServiceLedger(store, proj, patience=patience))
            for store, proj in self.ledgers
        ]
        self.session = create(self.ledgers[0][0], mode="yolo")
        self.threads_per_runtime, self.commands = threads_per_runtime, commands
        self.results: list[CommandResult] = []
        self.failures: list[BaseException] = []
        self._lock = threading.Lock()

    def close(self) -> None:
        for store, _projections in self.ledgers:
            store.close()

    def _work(self, runtime: ExecutionRuntime, seed: int, barrier: threading.Barrier) -> None:
        rng = random.Random(seed)
        barrier.wait()
        for _ in range(self.commands):
            try:
                result = runtime.execute(self.session, random_command(rng), via="mode_command")
            except BaseException as exc:
                with self._lock:
                    self.failures.append(exc)
            else:
                with self._lock:
                    self.results.append(result)

    def run(self) -> None:
        barrier = threading.Barrier(len(self.runtimes) * self.threads_per_runtime)
        threads = [
            threading.Thread(target=self._work, args=(runtime, 10 * n + k, barrier))
            for n, runtime in enumerate(self.runtimes) for k in range(self.threads_per_runtime)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
        assert not any(thread.is_alive() for thread in threads)
        assert len(self.results) + len(self.failures) == len(threads) * self.commands

    def check_log(self) -> None:
        """No lost update: the log is exactly the successful results, each decided on the
        state just before it; both stores' projections equal the fold; memory never both."""
        store = self.ledgers[0][0]
        events = list(store.read_session(self.session))
        final = replay_checked(events)
        appended = sorted(e.seq for r in self.results for e in r.events)
        assert appended == list(range(2, len(events) + 1))
        for other_store, other_projections in self.ledgers:
            assert compare_session(other_store, other_projections, self.session) == []
            summary = other_projections.summary(other_store, self.session)
            assert summary is not None
            assert (summary.mode, summary.plan_enabled, summary.goal) == final
            assert all(report.ok for report in other_store.verify())
        for runtime in self.runtimes:
            memory = runtime.state(self.session)
            assert not (memory.plan_enabled and memory.goal is not None)


@pytest.fixture
def race(url: str) -> Iterator[Callable[..., Race]]:
    opened: list[Race] = []

    def start(**options: Any) -> Race:
        opened.append(Race(url, **options))
        opened[-1].run()
        return opened[-1]

    yield start
    for each in opened:
        each.close()


def test_es5_es6_two_runtimes_race_on_one_session_without_lost_updates(
    race: Callable[..., Race],
) -> None:
    # Two writers take turns; with patience longer than any fsync of a busy machine, none of
    # them gives up (what this test is about is that no update is lost: issue 36).
    done = race(threads_per_runtime=1, commands=60, patience=Patience(conditional_s=120.0))
    assert [f for f in done.failures if not isinstance(f, CommandRefused)] == []
    assert done.results and done.failures  # both outcomes were exercised
    done.check_log()


def test_es5_es6_heavier_contention_gives_up_only_with_conflict_and_loses_nothing(
    race: Callable[..., Race],
) -> None:
    """Four writers on one session: a command that lost every retry answers ``Conflict``
    (409, "try again") and appended nothing; nothing else goes wrong."""
    done = race(threads_per_runtime=2, commands=40)
    assert [f for f in done.failures if not isinstance(f, Conflict)] == []
    done.check_log()


def test_es6_runtime_answers_conflict_only_after_every_retry_lost(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A writer that always gets there first makes the runtime give up with Conflict once its
    patience is spent, having decided again after every lost race. (The patience is measured
    on a clock of the test's that moves 1 s each time it is read, so the count of attempts is
    the policy's, not this machine's: issue 36.)"""
    reads = itertools.count()
    pauses: list[float] = []
    patience = Patience(conditional_s=5.0, clock=lambda: float(next(reads)),
                        pause=pauses.append)
    store, projections = ledger
    session = create(store)

    class AlwaysBehind:
        def __init__(self) -> None:
            self.appends = 0

        def append(self, session_id: str, events: Any, **options: Any) -> Any:
            self.appends += 1
            filler = NewEvent(MessageRecorded(role="assistant", content="x"), actor="model")
            store.append(session_id, [filler])  # someone else wrote first
            return store.append(session_id, events, **options)

        def __getattr__(self, name: str) -> Any:
            return getattr(store, name)

    behind = AlwaysBehind()
    runtime = ExecutionRuntime(ServiceLedger(behind, projections, patience=patience))  # type: ignore[arg-type]
    with pytest.raises(Conflict) as raised:
        runtime.execute(session, EnterPlan(), via="enter_plan_tool")
    assert not isinstance(raised.value, CommandRefused)
    # Deadline 5 at the first read (0); the clock reads 1, 2, … after each lost race: the
    # 5th reaches it. 5 attempts, each on a fresh read, a pause between each two.
    assert behind.appends == 5 and len(pauses) == 4
    assert runtime.state(session) == ExecutionState()
    assert [e.type for e in store.read_session(session)][1:] == ["MessageRecorded"] * behind.appends


# -- ES-7: subagents snapshot the parent's Plan switch ------------------------------------------


@pytest.fixture
def service(ledger: Ledger, tmp_path: Path) -> Any:
    from sessionledger.service.sessions import SessionService

    store, projections = ledger
    return SessionService(store, projections, workspace_root=tmp_path)


def execution_of(document: dict[str, Any]) -> tuple[str, bool, Any]:
    state = document["executionState"]
    return state["mode"], state["planEnabled"], state["goal"]


def test_es7_subagent_of_a_parent_that_entered_plan_starts_in_plan(service: Any) -> None:
    parent = service.create_session(mode="yolo")["sessionId"]
    runtime = ExecutionRuntime(ServiceLedger(service.store, service.projections))
    runtime.execute(parent, EnterPlan(), via="enter_plan_tool")  # by event, not at creation
    child = service.create_session(parent_session_id=parent)
    assert execution_of(child) == ("yolo", True, None)
    assert child["displayMode"] == "plan" and child["parentSessionId"] == parent


def test_es7_a_requested_mode_sets_only_the_mode_underneath(service: Any) -> None:
    parent = service.create_session(mode="plan")["sessionId"]
    child = service.create_session(parent_session_id=parent, mode="edit")
    assert execution_of(child) == ("edit", True, None)


def test_es7_the_plan_switch_is_a_snapshot_at_spawn(service: Any) -> None:
    parent = service.create_session(mode="plan")["sessionId"]
    runtime = ExecutionRuntime(ServiceLedger(service.store, service.projections))
    child = service.create_session(parent_session_id=parent)["sessionId"]
    runtime.execute(parent, LeavePlan(), via="plan_approval")
    assert runtime.state(child) == ExecutionState("build", True)
    second = service.create_session(parent_session_id=parent)
    assert execution_of(second) == ("build", False, None)  # the parent left Plan since


def test_es7_a_subagent_does_not_inherit_the_goal(service: Any) -> None:
    parent = service.create_session(mode="auto")["sessionId"]
    runtime = ExecutionRuntime(ServiceLedger(service.store, service.projections))
    runtime.execute(parent, StartGoal("ship it"), via="mode_command")
    child = service.create_session(parent_session_id=parent)
    assert execution_of(child) == ("auto", False, None)
