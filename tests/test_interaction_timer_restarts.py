"""Question timers across restarts, the scheduler thread and a second process (HO-4, HO-7).

Issue 6's acceptance 2 (a deadline reached while the service was stopped fires on start, with
the exact times) and the guard of HO-4: two service processes on one SQLite file — here two
services, each with its own store, connections and writer — never record a transition twice,
whether they race or one acts on a decision made from a stale read.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from pg_support import PG_BACKEND, schema_url
from timer_support import ASK, TEXTS, Ledger, iso, question, timer

from eventlog import ConcurrencyConflict, NewEvent
from sessionledger import SessionService
from sessionledger.service.timers import TimerScheduler


def _url(backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> str | None:
    """A PostgreSQL schema of the module's database for ``postgresql``; else the default."""
    if backend != "postgresql":
        return None
    return schema_url(str(request.getfixturevalue("pg_database")), tmp_path,
                      tmp_path / "ledger.db")


@pytest.fixture(params=["memory", "sqlite", PG_BACKEND])
def ledger(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Ledger]:
    backend = str(request.param)
    subject = Ledger(backend, tmp_path, _url(backend, request, tmp_path))
    try:
        yield subject
    finally:
        subject.close()


# -- HO-7: restarts --------------------------------------------------------------------------


def test_ho7_a_deadline_reached_while_stopped_fires_on_start_in_order(ledger: Ledger) -> None:
    sid = ledger.session()
    pending = ledger.ask(sid)
    ledger.advance(1000)  # the service is down meanwhile
    ledger.restart()
    assert ledger.timers(sid) == [timer("hiddenGrace", 0)]  # the log's times, nothing moved
    ledger.tick()  # the scheduler's first pass after the start
    timed = ledger.events(sid, "InteractionAutoResolutionChanged", "InteractionResolved")
    assert [(e.type, e.recorded_at) for e in timed] == [
        ("InteractionAutoResolutionChanged", iso(0)),
        ("InteractionAutoResolutionChanged", iso(1000)),
        ("InteractionResolved", iso(1000)),
    ]
    assert ledger.changes(sid)[-1]["effectiveAt"] == iso(60)
    assert ledger.service.tools.get(sid, pending["callId"]).document["status"] == "completed"


def test_ho7_a_question_registered_just_before_a_crash_starts_from_the_log(
    ledger: Ledger,
) -> None:
    sid = ledger.session()
    # the executor alone: the call is committed, the process dies before the timer step
    ledger.service.tools.executor.call(sid, ASK, question())
    ledger.advance(70)
    ledger.restart()
    ledger.tick()
    assert [(c["state"], c["effectiveAt"]) for c in ledger.changes(sid)] == [
        ("hiddenGrace", iso(0)), ("countdown", iso(60))]
    assert ledger.timers(sid) == [timer("countdown", 0)]


def test_ho7_a_rebuild_and_the_audit_agree_with_the_live_timers(ledger: Ledger) -> None:
    sid = ledger.session()
    ledger.ask(sid, TEXTS[0])
    ledger.ask(sid, TEXTS[1])
    ledger.tick(100)
    ledger.service.settings.update({"autoContinueQuestions": False})
    before = ledger.service.document(sid)
    ledger.service.rebuild_projections()
    assert ledger.service.document(sid) == before
    for stream in (sid, "sys_settings"):
        assert ledger.service.audit(stream)["ok"] is True


def test_ho7_the_scheduler_thread_appends_when_due_and_stops_cleanly(ledger: Ledger) -> None:
    sid = ledger.session()
    ledger.ask(sid)
    scheduler = TimerScheduler(ledger.service.timers, ledger.service.store, poll_s=0.05)
    scheduler.start()
    try:
        ledger.advance(60)
        scheduler.wake()
        deadline = time.monotonic() + 30  # bounds a hang only
        while ledger.timers(sid) != [timer("countdown", 0)] and time.monotonic() < deadline:
            time.sleep(0.01)
        assert ledger.timers(sid) == [timer("countdown", 0)]
    finally:
        scheduler.stop()
    assert not scheduler.running and scheduler.passes > 0


# -- HO-4: two processes on one database -----------------------------------------------------


def _transitions(ledger: Ledger, sid: str) -> list[tuple[str, str]]:
    return [(e.data.interaction_id, getattr(e.data, "state", None) or e.data.decision)  # type: ignore[attr-defined]
            for e in ledger.events(sid, "InteractionAutoResolutionChanged",
                                   "InteractionResolved")]


@pytest.mark.parametrize("backend", ["sqlite", PG_BACKEND])
def test_ho4_two_processes_never_record_a_transition_twice(
    tmp_path: Path, backend: str, request: pytest.FixtureRequest
) -> None:
    ledger = Ledger(backend, tmp_path, _url(backend, request, tmp_path))
    second = ledger._open()  # another process: its own store, connections and writer
    try:
        sessions = [ledger.session() for _ in range(3)]
        for sid in sessions:
            for text in TEXTS:
                second.tools.executor.call(sid, ASK, question(text))  # no timer step yet
        errors: list[BaseException] = []

        def race(service: SessionService) -> None:
            try:
                for _ in range(40):
                    service.timers.run_due()
            except BaseException as exc:  # reported below, not lost in the thread
                errors.append(exc)

        for step in (0, 60, 240, 1, 60, 240, 1, 60, 240):
            ledger.advance(step)
            threads = [threading.Thread(target=race, args=(s,)) for s in (ledger.service, second)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
        assert errors == []
        for sid in sessions:
            seen = _transitions(ledger, sid)
            assert len(seen) == len(set(seen)) == 3 * 3  # each question: grace, countdown, auto
            assert ledger.service.audit(sid)["ok"] is True
    finally:
        second.close()
        ledger.close()


@pytest.mark.parametrize("backend", ["sqlite", PG_BACKEND])
def test_ho4_a_decision_made_on_a_stale_read_is_made_again(
    tmp_path: Path, backend: str, request: pytest.FixtureRequest
) -> None:
    ledger = Ledger(backend, tmp_path, _url(backend, request, tmp_path))
    second = ledger._open()
    try:
        sid = ledger.session()
        ledger.ask(sid)
        ledger.advance(60)
        stale_version = second.store.version(sid)
        stale = second.timers.next_due(sid)
        assert stale is not None and stale.state == "countdown"
        assert ledger.service.timers.settle(sid) == 1  # the first process gets there first
        second.timers._apply(sid, stale, stale_version)  # replayed by its key: no duplicate
        with pytest.raises(ConcurrencyConflict):
            second.store.append(sid, [NewEvent(stale.event, actor="timer")],  # type: ignore[arg-type]
                                expected_version=stale_version)
        assert second.timers.settle(sid) == 0  # decided again: nothing is due
        assert [c["state"] for c in ledger.changes(sid)] == ["hiddenGrace", "countdown"]
    finally:
        second.close()
        ledger.close()
