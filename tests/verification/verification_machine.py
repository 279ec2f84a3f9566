"""The whole service under random commands, restarts and reconnects (issue #10, STYLE 5).

:class:`ServiceLedger` drives the real :class:`~sessionledger.SessionService` — the object the
HTTP routes call, with its tool runtime, timer service and settings — over a real SQLite file
in a temporary directory and the injectable :class:`~eventlog.ManualClock`. Every command a
host can send is a rule: sessions of every host (protocol, TUI, headless) and subagents of
them, Shift+Tab, ``/mode``, ``/plan task``, goals, TodoWrite, EnterPlanMode, messages,
``prepare-request`` and a host's turn loop, compaction, AskUserQuestion with answers,
refusals, user activity and clock moves that auto-continue, ExitPlanMode with approve /
feedback / reject, the auto-continue setting, a re-sent ``callId``, deletion, a service
restart (the file closed and opened again, the scheduler's first pass re-arming timers from
the log), a projection rebuild, and readers that reconnect after a remembered cursor.
:mod:`verification_model` says what each must do; :mod:`verification_checks` compares.

Invariants after every step: the session documents equal the model (execution state, todos,
the interaction queue with each timer's absolute times, the parent); Plan and Goal are never
both on; at most one countdown runs per session, at the head of its queue; exactly the
questions the model says were auto-continued are, each interaction resolved once; the tool
surface matches the host and parent (TR-1, ES-7); the plan file holds the last approved
plan; the audit finds every chain intact and every projection equal to a fresh fold of the
log; ``seq`` is gapless per session and the global position across the store; a live reader
holds exactly a prefix of the log (all of it while connected).
"""

from __future__ import annotations

import asyncio
import tempfile
import threading
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    initialize,
    invariant,
    multiple,
    precondition,
    rule,
)
from verification_checks import (
    STOP,
    check_auto_continued,
    check_log,
    check_plan_answer,
    check_plan_file,
    check_question_answer,
    check_queue,
    check_reminder_text,
    fingerprint,
)
from verification_model import (
    EXCLUSIVE,
    Refused,
    SessionModel,
    Waiting,
    expected_surface,
)

from eventlog import ManualClock, RecordedEvent
from projections import open_projected_store
from sessionledger import SessionService
from sessionledger.errors import CommandRefused, Conflict, InvalidInput, SessionDeleted
from sessionledger.ledger import on_loop
from statemachine.interaction import TimerConfig

__all__ = ["OnTheLoop", "ServiceLedger"]

T0 = datetime(2026, 11, 29, 19, 10, 56, 123000, tzinfo=UTC)
MAX_SESSIONS = 3
ASK = "AskUserQuestion"
QUESTION = {"questions": [{
    "question": "Which database?", "header": "DB", "multiSelect": False,
    "options": [{"label": "SQLite (Recommended)", "description": "embedded"},
                {"label": "PostgreSQL", "description": "a server"}],
}]}
ANSWERED = {**QUESTION, "answers": {"Which database?": "PostgreSQL"}}

HOSTS = st.sampled_from(["protocol", "protocol", "tui", "headless"])
MODES = st.sampled_from(["plan", "build", "edit", "yolo", "auto"])
WORDS = st.sampled_from(["ship it", "fix the parser", "write tests", "日本語", "a"])
items = st.fixed_dictionaries({
    "content": WORDS,
    "status": st.sampled_from(["pending", "in_progress", "completed"]),
    "priority": st.sampled_from(["high", "medium", "low"]),
})
PLANS = st.sampled_from(["# Plan\n1. do it", "refactor", "é\n", "x" * 50])
REQUEST_TOOLS = st.sampled_from([["TodoWrite", "TodoRead", ASK], ["TodoWrite"], [ASK], []])
SECONDS = st.sampled_from([1, 59, 60, 61, 240, 299, 300, 301, 1000])


class ServiceLedger(RuleBasedStateMachine):
    """The session service over one SQLite file, compared step by step with the model."""

    sessions = Bundle("sessions")
    runs: ClassVar[int] = 0
    """Machines built so far in this process (examples, shrinking included)."""
    steps: ClassVar[int] = 0
    """Steps checked so far in this process (the invariants run after each)."""

    def __init__(self) -> None:
        super().__init__()
        ServiceLedger.runs += 1  # subclasses count here too
        self._tmp = tempfile.TemporaryDirectory(prefix="sessionledger-verify-")
        self.root = Path(self._tmp.name).resolve()
        self.url = self.store_url()
        self.clock = ManualClock(T0)
        self.model: dict[str, SessionModel] = {}
        self.auto_continue = True
        self.received: list[RecordedEvent] = []
        """What the live reader of every session got, by subscription or catch-up."""
        self._received_lock = threading.Lock()
        self.connected = False
        self.cursors: dict[str, list[RecordedEvent]] = {}
        """Per session, what a client paging ``GET …/events?after=`` holds so far."""
        self.calls: list[tuple[str, dict[str, Any], dict[str, Any]]] = []
        """Completed TodoWrite calls: session, input and the document answered."""
        self._unsubscribe: Callable[[], None] | None = None
        self.service: SessionService | None = None
        self.service = self._open()
        self._connect()

    def store_url(self) -> str:
        """The store the machine runs on (a subclass picks another backend)."""
        return f"sqlite:///{self.root / 'ledger.db'}?synchronous=normal"

    def _open(self) -> SessionService:
        store, projections = open_projected_store(self.url, clock=self.clock)
        return SessionService(store, projections, workspace_root=self.root,
                              timer_config=TimerConfig(grace_s=60, deadline_s=300),
                              clock=self.clock)

    def _service(self) -> SessionService:
        assert self.service is not None
        return self.service

    def _connect(self) -> None:
        self._unsubscribe = self._service().store.subscribe(self._on_commit)
        self.connected = True

    def _on_commit(self, events: Sequence[RecordedEvent]) -> None:
        with self._received_lock:
            self.received.extend(events)

    def teardown(self) -> None:
        try:
            if self._unsubscribe is not None:
                self._unsubscribe()
            if self.service is not None:
                self.service.close()
        finally:
            self._tmp.cleanup()

    # -- helpers -----------------------------------------------------------------------------

    def _now(self) -> datetime:
        return self.clock.now()

    def _gone(self, session: str, call: Callable[[], object]) -> None:
        """A deleted session answers 410 and appends nothing."""
        store = self._service().store
        head = store.head_position()
        with pytest.raises(SessionDeleted):
            call()
        assert store.head_position() == head

    def _change(
        self, session: str, decide: Callable[[SessionModel], tuple[str, bool, str | None]],
        call: Callable[[], dict[str, Any]], *, user_message: bool = False,
    ) -> None:
        """An execution-state command: refused with nothing appended, or applied."""
        model = self.model[session]
        if model.deleted:
            self._gone(session, call)
            return
        store = self._service().store
        head = store.head_position()
        try:
            target = decide(model)
        except Refused as refusal:
            with pytest.raises(CommandRefused) as raised:
                call()
            if refusal.exclusive:  # ES-5's exact sentence
                assert raised.value.message == EXCLUSIVE
            assert store.head_position() == head
            return
        version = store.version(session)
        document = call()
        before = model.state()
        model.apply(target)
        if user_message:
            model.message("user", continuation=False)
        assert document["executionState"] == self._wire_state(model)
        # ES-3: a command that leaves the state as it was appends no state event
        expected = (int(before[:2] != target[:2])  # SessionModeChanged
                    + int(before[2] != target[2])  # GoalStarted or GoalEnded
                    + int(user_message))  # the /plan task as a MessageRecorded
        assert store.version(session) == version + expected

    @staticmethod
    def _wire_state(model: SessionModel) -> dict[str, Any]:
        goal = None if model.goal is None else {"objective": model.goal}
        return {"mode": model.mode, "planEnabled": model.plan, "goal": goal}

    # -- sessions ----------------------------------------------------------------------------

    @initialize(target=sessions, host=HOSTS, mode=st.none() | MODES)
    def first_session(self, host: Any, mode: Any) -> str:
        return self.create_session(host, mode)

    @precondition(lambda self: len(self.model) < MAX_SESSIONS)
    @rule(target=sessions, host=HOSTS, mode=st.none() | MODES)
    def create_session(self, host: Any, mode: Any) -> str:
        document = self._service().create_session(host=host, mode=mode)
        model = SessionModel(host=host, parent=None)
        if mode == "plan":
            model.plan = True
        elif mode is not None:
            model.mode = mode
        self.model[document["sessionId"]] = model
        assert document["executionState"] == self._wire_state(model)
        assert document["version"] == 1  # exactly one SessionCreated
        return str(document["sessionId"])

    @precondition(lambda self: len(self.model) < MAX_SESSIONS)
    @rule(target=sessions, parent=sessions, host=HOSTS, mode=st.none() | MODES)
    def create_subagent(self, parent: str, host: Any, mode: Any) -> Any:
        """ES-7: the parent's mode and Plan switch at spawn, never its goal; a requested
        mode replaces only the mode underneath."""
        spawn = self.model[parent]
        if spawn.deleted:
            self._gone(parent, lambda: self._service().create_session(
                host=host, mode=mode, parent_session_id=parent))
            return multiple()
        document = self._service().create_session(host=host, mode=mode,
                                                  parent_session_id=parent)
        model = SessionModel(host=host, parent=parent, mode=spawn.mode, plan=spawn.plan)
        if mode == "plan":
            model.plan = True
        elif mode is not None:
            model.mode = mode
        self.model[document["sessionId"]] = model
        assert document["executionState"] == self._wire_state(model)
        assert document["version"] == 1  # exactly one SessionCreated
        assert document["parentSessionId"] == parent
        return str(document["sessionId"])

    @rule(session=sessions)
    def delete(self, session: str) -> None:
        model = self.model[session]
        if model.deleted:
            self._gone(session, lambda: self._service().delete_session(session))
            return
        self._service().delete_session(session)
        model.deleted = True
        model.queue.clear()

    # -- execution state (§3) ----------------------------------------------------------------

    @rule(session=sessions)
    def shift_tab(self, session: str) -> None:
        self._change(session, SessionModel.after_cycle,
                     lambda: self._service().cycle_mode(session))

    @rule(session=sessions, mode=MODES)
    def mode_command(self, session: str, mode: Any) -> None:
        self._change(session, lambda m: m.after_mode(mode),
                     lambda: self._service().set_mode(session, mode))

    @rule(session=sessions, task=WORDS)
    def plan_command(self, session: str, task: str) -> None:
        """``/plan task``: the task is a real user message in the same batch (ES-4)."""
        self._change(session, lambda m: m.after_mode("plan"),
                     lambda: self._service().set_mode(session, "plan", task=task),
                     user_message=True)

    @rule(session=sessions, objective=WORDS)
    def start_goal(self, session: str, objective: str) -> None:
        self._change(session, lambda m: m.after_goal(objective),
                     lambda: self._service().start_goal(session, objective))

    @rule(session=sessions)
    def end_goal(self, session: str) -> None:
        self._change(session, lambda m: m.after_goal(None),
                     lambda: self._service().end_goal(session))

    @rule(session=sessions)
    def enter_plan_tool(self, session: str) -> None:
        model = self.model[session]
        call = lambda: self._service().tools.call(session, "EnterPlanMode", {})  # noqa: E731
        if model.deleted:
            self._gone(session, call)
        elif model.parent is not None:  # ES-7: not on a subagent's surface
            self._refused_input(call)
        else:
            done = call().document
            assert done["success"] is (model.goal is None)
            if model.goal is None:
                model.apply((model.mode, True, None))

    def _refused_input(self, call: Callable[[], object]) -> None:
        store = self._service().store
        head = store.head_position()
        with pytest.raises(InvalidInput):
            call()
        assert store.head_position() == head

    # -- todos, messages, requests, compaction ------------------------------------------------

    @rule(session=sessions, todos=st.lists(items, max_size=4))
    def todo_write(self, session: str, todos: list[dict[str, str]]) -> None:
        model = self.model[session]
        call = lambda: self._service().tools.call(session, "TodoWrite", {"todos": todos})  # noqa: E731
        if model.deleted:
            self._gone(session, call)
            return
        done = call().document
        assert done["status"] == "completed" and done["success"] is True
        assert done["result"]["oldTodos"] == model.todos
        assert done["result"]["todos"] == todos
        model.todos_written(todos)
        self.calls.append((session, {"todos": todos}, done))

    @precondition(lambda self: bool(self.calls))
    @rule(which=st.integers(0, 7))
    def resend_call(self, which: int) -> None:
        """A host re-sends a ``callId``: the original call answers, nothing runs twice."""
        session, raw, done = self.calls[which % len(self.calls)]
        tools = self._service().tools
        call = lambda: tools.call(session, "TodoWrite", raw, call_id=done["callId"])  # noqa: E731
        if self.model[session].deleted:
            self._gone(session, call)
            return
        head = self._service().store.head_position()
        assert call().document == done
        assert self._service().store.head_position() == head

    @rule(session=sessions, role=st.sampled_from(["assistant", "assistant", "user"]),
          continuation=st.sampled_from([False, False, True]),
          count=st.sampled_from([1, 10, 10]))
    def messages(self, session: str, role: Any, continuation: bool, count: int) -> None:
        model = self.model[session]
        turns = self._service().turns
        if model.deleted:
            self._gone(session, lambda: turns.record_message(session, role, "hello"))
            return
        for _ in range(count):
            turns.record_message(session, role, "hello", continuation=continuation)
            model.message(role, continuation=continuation)

    @rule(session=sessions, tools=REQUEST_TOOLS,
          continuation=st.sampled_from([False, False, True]))
    def prepare_request(self, session: str, tools: list[str], continuation: bool) -> None:
        model = self.model[session]
        turns = self._service().turns
        if model.deleted:
            self._gone(session, lambda: turns.prepare_request(session, tools))
            return
        reminders = turns.prepare_request(session, tools, continuation=continuation)
        expected = model.reminders(frozenset(tools), continuation=continuation)
        assert [(r.kind, r.variant) for r in reminders] == expected
        for reminder in reminders:
            check_reminder_text(model, reminder.kind, reminder.variant, reminder.text)
        model.injected(expected)

    @rule(session=sessions, turns=st.integers(1, 12), tools=REQUEST_TOOLS)
    def turn_loop(self, session: str, turns: int, tools: list[str]) -> None:
        """A host's turns: each model request prepared, then the assistant's answer."""
        for _ in range(turns):
            self.prepare_request(session, tools, continuation=False)
            self.messages(session, "assistant", continuation=False, count=1)

    @rule(session=sessions)
    def compact(self, session: str) -> None:
        model = self.model[session]
        if model.deleted:
            self._gone(session, lambda: self._service().turns.compact(session))
            return
        self._service().turns.compact(session)
        model.compacted = True

    @rule(session=sessions, tools=REQUEST_TOOLS)
    def compact_then_request(self, session: str, tools: list[str]) -> None:
        """A host compacts its context and prepares the next request (PM-10)."""
        self.compact(session)
        self.prepare_request(session, tools, continuation=False)

    # -- questions, plan approvals, timers (§5, §6, §7) -----------------------------------

    @rule(session=sessions)
    def ask(self, session: str) -> None:
        model = self.model[session]
        call = lambda: self._service().tools.call(session, ASK, QUESTION)  # noqa: E731
        if model.deleted:
            self._gone(session, call)
            return
        answer = call()
        if model.host == "headless":  # HO-3: a deny broker answers at once
            assert answer.status_code == 200 and answer.document["status"] == "denied"
            assert answer.document["modelContent"] == (
                "No permission client configured for AskUserQuestion")
            return
        assert answer.status_code == 202, answer.document
        eligible = model.host == "protocol" and self.auto_continue
        model.register(Waiting(answer.document["interactionId"], "askUserQuestion", eligible),
                       self._now())
        model.settle(self._now())

    @rule(session=sessions, plan=PLANS)
    def submit_plan(self, session: str, plan: str) -> None:
        model = self.model[session]
        call = lambda: self._service().tools.call(  # noqa: E731
            session, "ExitPlanMode", {"plan": plan})
        if model.deleted:
            self._gone(session, call)
            return
        if model.parent is not None:  # ES-7
            self._refused_input(call)
            return
        answer = call()
        done = answer.document
        if not model.plan:  # PM-2
            assert done["status"] == "denied"
            assert done["permission"]["reason"] == (
                "ExitPlanMode can only be used while plan mode is active")
            return
        if model.host == "headless":  # HO-3 and PM-9
            assert done["status"] == "denied" and done["turnControl"] == STOP
            return
        assert answer.status_code == 202, done
        model.register(Waiting(done["interactionId"], "planApproval", False, plan=plan),
                       self._now())
        model.settle(self._now())

    def _planning(self) -> list[str]:
        """Sessions where ExitPlanMode asks the user: in Plan, not subagents, not headless."""
        return [sid for sid, m in self.model.items()
                if m.plan and not m.deleted and m.parent is None and m.host != "headless"]

    @precondition(lambda self: bool(self._planning()))
    @rule(which=st.integers(0, 3), plan=PLANS)
    def submit_plan_while_planning(self, which: int, plan: str) -> None:
        """The same command, aimed at a session in Plan so that approvals happen often."""
        planning = self._planning()
        self.submit_plan(planning[which % len(planning)], plan)

    def _waiting(self) -> list[tuple[str, Waiting]]:
        return [(sid, w) for sid, model in self.model.items() for w in model.queue]

    def _pick(self, which: int) -> tuple[str, Waiting]:
        waiting = self._waiting()
        return waiting[which % len(waiting)]

    @precondition(lambda self: bool(self._waiting()))
    @rule(which=st.integers(0, 7), choice=st.integers(0, 2))
    def answer(self, which: int, choice: int) -> None:
        """The user answers a pending question or plan approval, in any order."""
        session, waiting = self._pick(which)
        model = self.model[session]
        now = self._now()
        iid = waiting.interaction_id
        if iid in model.settle(now):  # its deadline came first (HO-4)
            with pytest.raises(Conflict):
                self._service().tools.respond(session, iid, "deny")
            return
        if waiting.kind == "askUserQuestion":
            self._answer_question(session, iid, ("modify", "approve", "deny")[choice])
        else:
            self._answer_plan(session, waiting, ("approve", "feedback", "deny")[choice])
        model.resolve(iid, now)
        model.settle(now)

    def _answer_question(self, session: str, iid: str, decision: Any) -> None:
        extra = {"input": ANSWERED} if decision == "modify" else {}
        check_question_answer(self._service().tools.respond(session, iid, decision, **extra),
                              decision)

    def _answer_plan(self, session: str, waiting: Waiting, decision: Any) -> None:
        model = self.model[session]
        assert waiting.plan is not None
        extra = {"feedback": "more detail"} if decision == "feedback" else {}
        done = self._service().tools.respond(session, waiting.interaction_id, decision,
                                             **extra)
        check_plan_answer(done, decision, plan=waiting.plan, plan_on=model.plan)
        if decision == "approve":  # PM-7: the file, then Plan left with the mode kept
            model.approved_plan = waiting.plan
            model.apply((model.mode, False, model.goal))
        elif decision == "feedback" and model.plan:  # PM-8: a real user message
            model.message("user", continuation=False)

    @precondition(lambda self: bool(self._waiting()))
    @rule(which=st.integers(0, 7), action=st.sampled_from(["move", "select", "type", "other"]))
    def activity(self, which: int, action: Any) -> None:
        session, waiting = self._pick(which)
        model = self.model[session]
        iid = waiting.interaction_id
        if iid in model.settle(self._now()):  # HO-5: activity on a resolved one is 409
            with pytest.raises(Conflict):
                self._service().timers.activity(session, iid, action)
            return
        wire = self._service().timers.activity(session, iid, action)
        model.activity(iid)
        assert wire["interactionId"] == iid
        timer = wire["autoResolution"]
        assert timer is None or timer["state"] == "paused"

    @rule(seconds=SECONDS, scheduler_pass=st.booleans())
    def advance_clock(self, seconds: float, scheduler_pass: bool) -> None:
        """Time passes; the scheduler's pass runs, or not yet (the process was busy)."""
        self.clock.advance(seconds)
        if scheduler_pass:
            self._scheduler_pass()

    def _running(self) -> list[Waiting]:
        return [w for m in self.model.values() for w in m.queue if w.running]

    @precondition(lambda self: bool(self._running()))
    @rule(offset_ms=st.sampled_from([-1, 0, 0, 1]), scheduler_pass=st.booleans())
    def reach_a_deadline(self, offset_ms: int, scheduler_pass: bool) -> None:
        """The clock moves to just before, exactly at or just after the next deadline."""
        deadline = min(w.deadline() for w in self._running())
        seconds = (deadline - self._now()).total_seconds() + offset_ms / 1000
        if seconds > 0:
            self.clock.advance(seconds)
        if scheduler_pass:
            self._scheduler_pass()

    def _scheduler_pass(self) -> None:
        self._service().timers.run_due()
        for model in self.model.values():
            model.settle(self._now())

    @rule(value=st.booleans())
    def auto_continue_setting(self, value: bool) -> None:
        assert self._service().settings.update({"autoContinueQuestions": value}) == {
            "autoContinueQuestions": value}
        if self.auto_continue and not value:
            for model in self.model.values():
                model.setting_turned_off(self._now())
        self.auto_continue = value

    # -- restarts, rebuilds and reconnects -------------------------------------------------

    @rule()
    def restart(self) -> None:
        """Close the service and open it again on the same file; the live reader drops."""
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        self.connected = False
        self._service().close()
        self.service = None
        self.service = self._open()
        self._scheduler_pass()  # serve's scheduler starts with a pass (HO-7)

    @rule()
    def rebuild(self) -> None:
        service = self._service()
        live = [sid for sid, model in self.model.items() if not model.deleted]
        before = {sid: service.document(sid) for sid in live}
        service.rebuild_projections()
        assert {sid: service.document(sid) for sid in live} == before

    @precondition(lambda self: not self.connected)
    @rule(limit=st.sampled_from([1, 3, 1000]))
    def reconnect(self, limit: int) -> None:
        """The live reader comes back: the global stream after its remembered position."""
        service = self._service()
        cursor = self.received[-1].global_position if self.received else 0
        while True:
            page = service.global_page(after=cursor, limit=limit)
            self.received.extend(page)
            if len(page) < limit:
                break
            cursor = page[-1].global_position
        self._connect()
        assert fingerprint(self.received) == fingerprint(list(service.store.read_all()))

    @rule(session=sessions, limit=st.sampled_from([1, 2, 1000]), pages=st.integers(1, 3))
    def page_events(self, session: str, limit: int, pages: int) -> None:
        """A client reads ``GET …/events?after=SEQ`` from the cursor it remembered."""
        held = self.cursors.setdefault(session, [])
        for _ in range(pages):
            after = held[-1].seq if held else 0
            page = self._service().events(session, after=after, limit=limit)
            wires = page["events"]
            log = list(self._service().store.read_session(session))
            assert page["version"] == len(log)
            assert wires == [e.to_wire() for e in log[after:after + limit]]
            held.extend(log[after:after + len(wires)])

    # -- invariants --------------------------------------------------------------------------

    @invariant()
    def sessions_agree_with_the_model(self) -> None:
        service = self._service()
        assert service.settings.current() == {"autoContinueQuestions": self.auto_continue}
        for sid, model in self.model.items():
            check_plan_file(self.root, sid, model)
            if model.deleted:
                with pytest.raises(SessionDeleted):
                    service.document(sid)
                continue
            document = service.document(sid)
            state = document["executionState"]
            assert not (state["planEnabled"] and state["goal"] is not None)  # ES-5
            assert state == self._wire_state(model)
            assert document["displayMode"] == ("plan" if model.plan else model.mode)
            assert document["parentSessionId"] == model.parent
            assert document["todos"] == model.todos
            check_queue(document["interactions"], model)
            check_auto_continued(list(service.store.read_session(sid)), model)
            assert service.tools.surface(sid) == expected_surface(
                model.host, subagent=model.parent is not None)
        self._check_listing()

    def _check_listing(self) -> None:
        """``GET /v1/sessions``: the live sessions, most recently written first."""
        service = self._service()
        last = {sid: list(service.store.read_session(sid))[-1].global_position
                for sid, model in self.model.items() if not model.deleted}
        listed = service.list_sessions()["sessions"]
        assert [e["sessionId"] for e in listed] == sorted(last, key=lambda sid: -last[sid])
        for entry in listed:
            model = self.model[entry["sessionId"]]
            assert entry["displayMode"] == ("plan" if model.plan else model.mode)
            assert entry["parentSessionId"] == model.parent
            assert entry["version"] == service.store.version(entry["sessionId"])

    @invariant()
    def the_log_is_whole(self) -> None:
        ServiceLedger.steps += 1
        check_log(self._service(), sessions=list(self.model), received=self.received,
                  connected=self.connected, held=self.cursors)


class _LoopFace:
    """A service object whose every method runs through :func:`on_loop` on ``loop`` — the
    path an async route takes (issue 24): appends awaited on the group committer, pauses
    and writer turns awaited. Sub-services (``tools``, ``timers``, ``store`` …) are wrapped
    the same way; what a call returns is the real thing."""

    def __init__(self, target: object, loop: asyncio.AbstractEventLoop) -> None:
        self._target = target
        self._loop = loop

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._target, name)
        if callable(value):
            def on_the_loop(*args: Any, **kwargs: Any) -> Any:
                return self._loop.run_until_complete(on_loop(value, *args, **kwargs))

            return on_the_loop
        if type(value).__module__.split(".")[0] in ("sessionledger", "eventlog", "projections"):
            return _LoopFace(value, self._loop)
        return value


class OnTheLoop(ServiceLedger):
    """The same machine with every command run as an async route runs it (issue 24.6)."""

    def __init__(self) -> None:
        self._loop = asyncio.new_event_loop()
        super().__init__()

    def _service(self) -> SessionService:
        return _LoopFace(super()._service(), self._loop)  # type: ignore[return-value]

    def teardown(self) -> None:
        try:
            super().teardown()
        finally:
            self._loop.close()
