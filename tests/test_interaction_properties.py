"""Random questions, answers, activity, setting toggles, clock moves, restarts and a second
process, against the timer rules (HO-4 … HO-7).

Issue 6's acceptance 4: a hypothesis ``RuleBasedStateMachine`` drives the service with a
manual clock. The scheduler's passes are a rule of their own, so time may pass with no pass
at all (the service was down, or busy); a second service over the same SQLite file plays a
second process — it runs passes too, and replays a decision it made on a stale read after
the first process already acted on it. A small reference model remembers, per question, what
the timer must respect: the host, the setting when it was registered, whether the user
engaged with it and whether the setting was turned off while it waited.

Invariants after every step: at most one running clock per session, only at the head of its
queue; no question both answered and auto-continued; no transition recorded twice; every
recorded time follows from ``startedAt`` and the durations, and never changes; a question the
model says may not count down never does; after a pass nothing is left overdue; the stored
registry equals a fresh fold of the log (and a rebuild changes nothing).
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, ClassVar

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

from eventlog import ConcurrencyConflict, ManualClock, RecordedEvent
from projections import compare_session, open_projected_store
from projections.tools import SETTINGS_STREAM
from sessionledger import SessionService
from sessionledger.errors import Conflict
from statemachine.interaction import TimerConfig

CONFIG = TimerConfig(grace_s=60, deadline_s=300)
GRACE, DEADLINE = timedelta(seconds=60), timedelta(seconds=300)
QUESTION = {"questions": [{
    "question": "Which database?", "header": "DB", "multiSelect": False,
    "options": [{"label": "SQLite (Recommended)", "description": "embedded"},
                {"label": "PostgreSQL", "description": "a server"}],
}]}
ANSWERED = {**QUESTION, "answers": {"Which database?": "PostgreSQL"}}
RUNNING = ("hiddenGrace", "countdown")


@dataclass
class Asked:
    """What the reference model knows about one question."""

    session: str
    eligible: bool
    engaged: bool = False
    setting_turned_off: bool = False


def _changes(events: list[RecordedEvent]) -> list[Any]:
    return [e.data for e in events if e.type == "InteractionAutoResolutionChanged"]


class TimerLedger(RuleBasedStateMachine):
    """The service with a manual clock, compared step by step with the timer rules."""

    backend: ClassVar[str] = "sqlite"
    sessions = Bundle("sessions")

    def __init__(self) -> None:
        super().__init__()
        self._tmp = tempfile.TemporaryDirectory(prefix="sessionledger-timers-")
        self.root = Path(self._tmp.name)
        self.url = ("memory://" if self.backend == "memory"
                    else f"sqlite:///{self.root / 'ledger.db'}")
        self.clock = ManualClock()
        self.service: SessionService | None = self._open()
        self.second: SessionService | None = None
        self.setting = True
        self.asked: dict[str, Asked] = {}
        self.hosts: dict[str, str] = {}
        self.passed_at: datetime | None = None

    def _open(self, store: Any = None, projections: Any = None) -> SessionService:
        if store is None:
            store, projections = open_projected_store(self.url, clock=self.clock)
        return SessionService(store, projections, workspace_root=self.root,
                              timer_config=CONFIG, clock=self.clock)

    def _service(self) -> SessionService:
        assert self.service is not None
        return self.service

    def teardown(self) -> None:
        try:
            for service in (self.service, self.second):
                if service is not None:
                    service.close()
        finally:
            self._tmp.cleanup()

    # -- rules -------------------------------------------------------------------------------

    @initialize(target=sessions)
    def first_session(self) -> str:
        return self.create_session("protocol")

    @precondition(lambda self: len(self.hosts) < 3)
    @rule(target=sessions, host=st.sampled_from(["protocol", "protocol", "tui"]))
    def create_session(self, host: Any) -> str:
        sid = str(self._service().create_session(host=host)["sessionId"])
        self.hosts[sid] = host
        return sid

    @rule(session=sessions)
    def ask(self, session: str) -> None:
        answer = self._service().tools.call(session, "AskUserQuestion", QUESTION)
        assert answer.status_code == 202
        eligible = self.hosts[session] == "protocol" and self.setting
        self.asked[answer.document["interactionId"]] = Asked(session, eligible)
        self.passed_at = None  # a registration is no scheduler pass

    def _pending(self, session: str, index: int) -> str | None:
        listed = self._service().document(session)["interactions"]
        return str(listed[index % len(listed)]["interactionId"]) if listed else None

    def _auto_continued(self, session: str, interaction_id: str) -> bool:
        return any(e.type == "InteractionResolved" and e.data.interaction_id == interaction_id
                   and e.data.decision == "autoContinued"  # type: ignore[attr-defined]
                   for e in self._service().store.read_session(session))

    @rule(session=sessions, index=st.integers(0, 3), deny=st.booleans())
    def answer(self, session: str, index: int, deny: bool) -> None:
        iid = self._pending(session, index)
        if iid is None:
            return
        try:
            if deny:
                self._service().tools.respond(session, iid, "deny")
            else:
                self._service().tools.respond(session, iid, "modify", input=ANSWERED)
        except Conflict:  # its deadline had passed: the auto-continue came first
            assert self._auto_continued(session, iid)
        self.passed_at = None

    @rule(session=sessions, index=st.integers(0, 3),
          action=st.sampled_from(["move", "select", "type", "other"]))
    def activity(self, session: str, index: int, action: Any) -> None:
        iid = self._pending(session, index)
        if iid is None:
            return
        try:
            wire = self._service().timers.activity(session, iid, action)
        except Conflict:
            assert self._auto_continued(session, iid)
            return
        self.asked[iid].engaged = True
        assert wire["autoResolution"] is None or wire["autoResolution"]["state"] == "paused"
        self.passed_at = None

    @rule(value=st.booleans())
    def toggle_setting(self, value: bool) -> None:
        assert self._service().settings.update({"autoContinueQuestions": value}) == {
            "autoContinueQuestions": value}
        if self.setting and not value:
            for asked in self.asked.values():
                asked.setting_turned_off = True
        self.setting = value
        self.passed_at = None

    @rule(seconds=st.sampled_from([0.5, 1, 30, 59, 60, 61, 120, 240, 299, 300, 1000]),
          then=st.sampled_from(["nothing", "pass", "pass", "second process"]))
    def advance_clock(self, seconds: float, then: str) -> None:
        """Time passes; then the scheduler runs, or another process's does, or nothing."""
        self.clock.advance(seconds)
        self.passed_at = None
        if then == "pass":
            self.scheduler_pass()
        elif then == "second process" and self.backend == "sqlite":
            self._second().timers.run_due()
            self.passed_at = self.clock.now()

    @rule()
    def scheduler_pass(self) -> None:
        self._service().timers.run_due()
        self.passed_at = self.clock.now()

    @rule()
    def restart(self) -> None:
        service = self._service()
        if self.backend == "memory":
            self.service = self._open(service.store, service.projections)
            return
        service.close()
        self.service = None
        self.service = self._open()

    def _second(self) -> SessionService:
        if self.second is None:
            self.second = self._open()
        return self.second

    @precondition(lambda self: self.backend == "sqlite")
    @rule(seconds=st.sampled_from([0, 60, 300]))
    def second_process_decides_on_a_stale_read(self, seconds: float) -> None:
        """The other process reads and decides, this one acts first, then the other appends
        what it decided: the version guard (or the key) must turn that into nothing."""
        self.clock.advance(seconds)
        second = self._second()
        for sid in self.hosts:
            version = second.store.version(sid)
            due = second.timers.next_due(sid)
            if due is None or due.at > self.clock.now():
                continue
            self._service().timers.settle(sid)
            try:
                second.timers._apply(sid, due, version)
            except ConcurrencyConflict:  # the guard working: nothing appended
                pass
        self.passed_at = None

    @rule()
    def rebuild_gives_identical_rows(self) -> None:
        service = self._service()
        before = self._rows()
        service.rebuild_projections()
        assert self._rows() == before

    def _rows(self) -> dict[str, Any]:
        service = self._service()
        return {key: service.projections.timer_row(service.store, key)
                for key in [*self.hosts, SETTINGS_STREAM]}

    # -- invariants --------------------------------------------------------------------------

    @invariant()
    def the_timer_rules_hold(self) -> None:
        service = self._service()
        for sid in self.hosts:
            events = list(service.store.read_session(sid))
            listed = service.document(sid)["interactions"]
            running = [i for i, entry in enumerate(listed)
                       if (entry["autoResolution"] or {}).get("state") in RUNNING]
            assert running in ([], [0])  # at most one clock, only at the head
            resolved = [e.data.interaction_id for e in events  # type: ignore[attr-defined]
                        if e.type == "InteractionResolved"]
            assert len(resolved) == len(set(resolved))  # answered xor auto-continued, once
            self._check_changes(sid, events)
            self._check_nothing_overdue(listed)
            assert compare_session(service.store, service.projections, sid) == []
        assert compare_session(service.store, service.projections, SETTINGS_STREAM) == []

    def _check_changes(self, sid: str, events: list[RecordedEvent]) -> None:
        changes = _changes(events)
        keys = [(c.interaction_id, c.state) for c in changes]
        assert len(keys) == len(set(keys)), "a transition was recorded twice"
        times: dict[str, tuple[str, str, str]] = {}
        for change in changes:
            if change.started_at is None:
                continue
            triple = (change.started_at, change.visible_at, change.deadline_at)
            assert times.setdefault(change.interaction_id, triple) == triple  # never changes
            start, visible, end = (datetime.fromisoformat(t) for t in triple)
            assert (visible - start, end - start) == (GRACE, DEADLINE)
        for change in changes:
            asked = self.asked[change.interaction_id]
            if change.state in RUNNING:
                assert asked.eligible, "a question that may not count down started"
        for event in events:
            data: Any = event.data
            if event.type == "InteractionResolved" and data.decision == "autoContinued":
                asked = self.asked[data.interaction_id]
                assert asked.eligible and not asked.engaged
                assert data.interaction_id in times
                assert event.recorded_at >= times[data.interaction_id][2]

    def _check_nothing_overdue(self, listed: list[dict[str, Any]]) -> None:
        if self.passed_at is None:
            return
        for entry in listed:
            timer = entry["autoResolution"] or {}
            if timer.get("state") == "hiddenGrace":
                assert datetime.fromisoformat(timer["visibleAt"]) > self.passed_at
            if timer.get("state") == "countdown":
                assert datetime.fromisoformat(timer["deadlineAt"]) > self.passed_at


class MemoryTimerLedger(TimerLedger):
    backend = "memory"


class SqliteTimerLedger(TimerLedger):
    backend = "sqlite"


MACHINES: dict[str, type[TimerLedger]] = {"memory": MemoryTimerLedger,
                                          "sqlite": SqliteTimerLedger}


@pytest.mark.parametrize("backend", sorted(MACHINES))
def test_acceptance4_ho4_ho7_timers_hold_their_rules_through_any_sequence(
    backend: str, depth: str
) -> None:
    """Fast: 60 examples x 30 steps; slow (``make verify``): the profile's examples x 60."""
    if depth == "fast":
        overrides: dict[str, Any] = {"stateful_step_count": 30, "max_examples": 60}
    else:
        overrides = {"stateful_step_count": 60,
                     "max_examples": min(settings.default.max_examples, 300)}
    run_state_machine_as_test(MACHINES[backend],
                              settings=settings(settings.default, **overrides))
