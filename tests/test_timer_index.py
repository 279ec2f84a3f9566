"""The scheduler's due-time index: flat cost per question, asleep until the next instant (#24).

Issue 24 acceptance 3 is measured by ``bench/scale.py``; these tests prove the behaviour behind
it with a manual clock and passes run by hand (:meth:`TimerScheduler.run_pass`), counting the
timer rows the scheduler reads: a new question re-reads its own session's row only, an idle
pass reads nothing and appends nothing before the next due instant, and another process's
question (on the same SQLite file, never heard as a commit) is found by the position check.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from timer_support import T0, Ledger, timer

from sessionledger.service.timers import DueIndex, TimerScheduler

PENDING = 30


class Reads:
    """Counts the timer rows the scheduler reads through the service's ledger."""

    def __init__(self, ledger: Any, monkeypatch: pytest.MonkeyPatch) -> None:
        self.scans = 0
        self.keys: list[str] = []
        watched, by_key = ledger.watched_timers, ledger.timer_rows

        def counted_watched() -> Any:
            self.scans += 1
            return watched()

        def counted_rows(keys: list[str]) -> Any:
            self.keys.extend(keys)
            return by_key(keys)

        monkeypatch.setattr(ledger, "watched_timers", counted_watched)
        monkeypatch.setattr(ledger, "timer_rows", counted_rows)

    def reset(self) -> None:
        self.scans = 0
        self.keys.clear()


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[Ledger]:
    subject = Ledger("sqlite", tmp_path)
    try:
        yield subject
    finally:
        subject.close()


def _scheduler(ledger: Ledger, poll_s: float = 3600.0) -> TimerScheduler:
    scheduler = TimerScheduler(ledger.service.timers, ledger.service.store, poll_s=poll_s,
                               rescan_s=3600.0)
    scheduler.listen()
    return scheduler


def _pending(ledger: Ledger, count: int) -> list[str]:
    sessions = [ledger.session() for _ in range(count)]
    for sid in sessions:
        ledger.ask(sid)
    return sessions


def test_a_new_question_rereads_only_its_own_session(  # issue 24.3
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    _pending(ledger, PENDING)
    scheduler = _scheduler(ledger, poll_s=1e-9)  # every pass checks the head position too
    reads = Reads(ledger.service.ledger, monkeypatch)
    store = ledger.service.store
    logs: list[int] = []
    read_all = store.read_all
    monkeypatch.setattr(store, "read_all", lambda **kw: logs.append(1) or read_all(**kw))
    try:
        scheduler.run_pass()  # the first pass loads the index from the projection
        assert reads.scans == 1 and len(scheduler.index) == PENDING
        reads.reset()
        sid = ledger.session()
        ledger.ask(sid)
        scheduler.run_pass()
        assert reads.scans == 0 and set(reads.keys) == {sid}
        assert logs == []  # every position committed was heard: the log is not read either
        assert len(scheduler.index) == PENDING + 1 and sid in scheduler.index
    finally:
        scheduler.stop()


def test_an_idle_scheduler_sleeps_until_the_next_due_instant(  # issue 24.3, HO-4
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    sessions = _pending(ledger, PENDING)
    scheduler = _scheduler(ledger)
    try:
        assert scheduler.run_pass() == pytest.approx(60.001, abs=1e-6)  # the grace's end
        reads = Reads(ledger.service.ledger, monkeypatch)
        head = ledger.service.store.head_position()
        ledger.advance(59.999)
        assert scheduler.run_pass() == pytest.approx(0.002, abs=1e-6)
        assert (reads.scans, reads.keys) == (0, [])  # nothing read, nothing appended
        assert ledger.service.store.head_position() == head
        ledger.advance(0.001)
        assert scheduler.run_pass() == pytest.approx(240.001, abs=1e-6)  # now the deadline
        assert all(ledger.timers(sid) == [timer("countdown", 0)] for sid in sessions)
        scheduler.run_pass()
        assert reads.scans == 0 and len(reads.keys) == PENDING  # each row once, after its step
    finally:
        scheduler.stop()


def test_another_process_question_is_found_by_the_position_check(  # issue 24.3, HO-4
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    _pending(ledger, 3)
    scheduler = _scheduler(ledger, poll_s=1e-9)  # every pass checks the head position
    second = ledger._open()  # another process: its commits are never heard here
    try:
        scheduler.run_pass()
        reads = Reads(ledger.service.ledger, monkeypatch)
        sid = str(second.create_session()["sessionId"])
        second.tools.executor.call(sid, "AskUserQuestion", {"questions": [{
            "question": "Which one?", "header": "Choice", "multiSelect": False,
            "options": [{"label": "A", "description": "a"}, {"label": "B", "description": "b"}],
        }]})  # registered, its timer not started yet: this scheduler starts it
        scheduler.run_pass()
        assert reads.scans == 0 and sid in reads.keys
        assert ledger.timers(sid) == [timer("hiddenGrace", 0)]
        assert sid in scheduler.index
    finally:
        scheduler.stop()
        second.close()


def test_the_index_answers_the_earliest_live_instant() -> None:  # issue 24.3
    index = DueIndex()
    at = [T0 + timedelta(seconds=s) for s in range(4)]
    index.set("a", at[2])
    index.set("b", at[1])
    index.set("a", at[3])  # moved later: its old entry is stale
    index.set("c", at[0])
    index.set("c", None)  # nothing due any more
    assert index.next() == at[1]
    assert index.pop_due(at[2]) == ["b"]
    assert index.pop_due(at[3]) == ["a"] and len(index) == 0 and index.next() is None
    for n in range(500):  # churn: stale entries are compacted, never kept without bound
        index.set("d", T0 + timedelta(seconds=n))
    assert len(index._heap) <= 2 * len(index) + 64
