"""The audit's single pass (issue 24.4): each sound session's events are folded into every read
model and the findings as they are decoded (``verify_and_stream``, ``SessionFold``), and the
report is the one the listed pass gives (``verify_and_read``, ``compare_session``,
``log_findings``): on a sound log, on tampered read models, on a broken chain, and when a
fold fails midway (the session is then audited again the listed way).
"""

from __future__ import annotations

import sqlite3
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from gate_support import Gate
from timer_support import Ledger, question

from eventlog import (
    InteractionRequested,
    InteractionResolved,
    MessageRecorded,
    NewEvent,
    ToolCallCompleted,
    ToolCallRequested,
)
from projections import SessionFold, compare_session
from sessionledger.service import audit
from sessionledger.service.audit import AuditReport, audit_log, audit_session


@pytest.fixture(params=["sqlite", "memory"])
def ledger(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Ledger]:
    subject = Ledger(request.param, tmp_path)
    try:
        yield subject
    finally:
        subject.close()


def _sessions(ledger: Ledger) -> list[str]:
    """Sessions with calls, questions, todos, plan and mode changes: every read model."""
    service = ledger.service
    plan = ledger.session(mode="plan")
    service.ledger.append(plan, [
        NewEvent(ToolCallRequested(call_id="call_w", tool="Write",
                                   input={"file_path": "src/x.py"}, host="protocol"),
                 actor="host"),
        NewEvent(ToolCallCompleted(call_id="call_w", tool="Write", status="completed",
                                   success=True, model_content="written"), actor="host"),
        NewEvent(InteractionRequested(interaction_id="int_q", call_id="c_q",
                                      kind="askUserQuestion", payload=question()), actor="host"),
        NewEvent(InteractionResolved(interaction_id="int_q", call_id="c_q",
                                     decision="withdrawn"), actor="host"),
    ])
    asked = ledger.session()
    ledger.ask(asked)
    plain = ledger.session()
    service.tools.call(plain, "TodoWrite", {"todos": [
        {"content": "a", "status": "pending", "priority": "high"},
        {"content": "b", "status": "in_progress", "priority": "low"},
    ]})
    service.tools.call(plain, "TodoWrite", {"todos": [
        {"content": "c", "status": "pending", "priority": "high"},
    ]})
    return [plan, asked, plain]


def _listed(ledger: Ledger, session_id: str) -> AuditReport:
    """The report of the listed pass, the way the audit went before its single pass."""
    store, projections = ledger.service.store, ledger.service.projections
    return audit._audit_listed(store, projections, *store.verify_and_read(session_id))


def test_the_streamed_audit_reports_what_the_listed_audit_reports(ledger: Ledger) -> None:
    sessions = _sessions(ledger)
    store, projections = ledger.service.store, ledger.service.projections
    reports = [audit_session(store, projections, sid) for sid in sessions]
    assert reports == [_listed(ledger, sid) for sid in sessions]
    assert all(r.ok for r in reports) and any(r.findings for r in reports)
    for sid in sessions:
        fresh = SessionFold(projections)
        for event in store.read_session(sid):
            fresh.see(event)
        assert fresh.differences(store, sid) == compare_session(store, projections, sid) == []


def _tamper_views(path: Path, sessions: list[str]) -> None:
    with sqlite3.connect(path) as conn:
        plan, asked, plain = sessions
        conn.execute("UPDATE tool_calls SET body = replace(body, 'Write', 'Read') "
                     "WHERE session_id = ?", (plan,))
        conn.execute("DELETE FROM interactions WHERE session_id = ?", (asked,))
        conn.execute("UPDATE turn_counters SET body = replace(body, ':0', ':7') "
                     "WHERE session_id = ?", (plain,))
        conn.execute("UPDATE execution_state SET mode = 'yolo' WHERE session_id = ?", (plain,))
        conn.execute("UPDATE interaction_timers SET body = replace(body, 'registered', 'x') "
                     "WHERE key = ?", (asked,))
        conn.execute("INSERT INTO todo VALUES (?, 5, 'ghost', 'pending', 'high')", (plain,))
        conn.execute("UPDATE events SET data = replace(data, 'src', 'lib') "
                     "WHERE session_id = ? AND type = 'ToolCallRequested'", (plan,))


def test_tampered_read_models_and_chains_report_as_the_listed_audit(tmp_path: Path) -> None:
    ledger = Ledger("sqlite", tmp_path)
    try:
        sessions = _sessions(ledger)
    finally:
        ledger.close()
    _tamper_views(tmp_path / "ledger.db", sessions)
    ledger = Ledger("sqlite", tmp_path)
    try:
        store, projections = ledger.service.store, ledger.service.projections
        reports = {r.session_id: r for r in audit_log(store, projections)}
        for sid in sessions:
            assert reports[sid] == _listed(ledger, sid) == audit_session(store, projections, sid)
        plan, asked, plain = (reports[sid] for sid in sessions)
        assert not plan.chain_ok and plan.differences  # the listed reads, as before
        assert asked.chain_ok and any("interactions" in d for d in asked.differences)
        assert any("interaction_timers" in d for d in asked.differences)
        assert any(d.startswith("execution_state.mode") for d in plain.differences)
        assert any(d.startswith("turn_counters") for d in plain.differences)
        assert any(d.startswith("todo") for d in plain.differences)
    finally:
        ledger.close()


def test_a_fold_that_fails_midway_audits_the_session_the_listed_way(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The listed path folds with the same SessionFold (compare_session), so it meets the same
    # failure: the single pass must give back the listed path's report, failure named.
    sessions = _sessions(ledger)
    seen: list[Any] = []

    def failing(self: SessionFold, event: Any) -> None:
        seen.append(event)
        if event.seq == 3:
            raise TypeError("a fold that fails")

    monkeypatch.setattr(SessionFold, "see", failing)
    expected = [_listed(ledger, sid) for sid in sessions]
    store, projections = ledger.service.store, ledger.service.projections
    assert [audit_session(store, projections, sid) for sid in sessions] == expected
    assert seen
    assert any("cannot be compared (TypeError)" in d for r in expected for d in r.differences)


def _long_session(ledger: Ledger, calls: int) -> str:
    """A session of ``calls`` Read calls, each requested and completed, with two messages."""
    session_id = ledger.session()
    group: list[NewEvent] = []
    for index in range(calls):
        call = f"call_{index:06d}"
        group += [
            NewEvent(MessageRecorded(role="user", content=f"look at module {index}"),
                     actor="user"),
            NewEvent(ToolCallRequested(call_id=call, tool="Read",
                                       input={"file_path": f"src/module_{index}.py"},
                                       host="protocol"), actor="host"),
            NewEvent(ToolCallCompleted(call_id=call, tool="Read", status="completed",
                                       success=True, result={"lines": index},
                                       model_content="def main(): ...\n" * 8), actor="host"),
            NewEvent(MessageRecorded(role="assistant", content="It runs the main loop. " * 4),
                     actor="assistant"),
        ]
        if len(group) >= 2000:
            ledger.service.ledger.append(session_id, group)
            group = []
    if group:
        ledger.service.ledger.append(session_id, group)
    return session_id


def _audit_peak(ledger: Ledger, session_id: str) -> tuple[AuditReport, float]:
    """The audit's report and the most memory it held at once (MB, tracemalloc)."""
    store, projections = ledger.service.store, ledger.service.projections
    tracemalloc.start()
    try:
        report = audit_session(store, projections, session_id)
        peak = tracemalloc.get_traced_memory()[1] / 2**20
    finally:
        tracemalloc.stop()
    return report, peak


def test_the_audit_of_a_long_session_holds_memory_that_does_not_grow_with_it(  # issue 41
    tmp_path: Path,
) -> None:
    """Chain checked and events decoded a page at a time, the folded documents kept packed
    and read back a few hundred at a time: ten times the session, not ten times the memory
    (the audit before held every row, every document folded and every document stored)."""
    ledger = Ledger("sqlite", tmp_path)
    try:
        short = _long_session(ledger, 1_000)
        long = _long_session(ledger, 10_000)
        report, peak_short = _audit_peak(ledger, short)
        assert report.ok and report.events == 4_001 and report.findings == ()
        report, peak_long = _audit_peak(ledger, long)
        assert report.ok and report.events == 40_001 and report.findings == ()
        assert report == _listed(ledger, long)
        assert peak_long < 12, f"{peak_long:.1f} MB for 40,001 events"
        assert peak_long < 2.5 * peak_short + 4, (peak_short, peak_long)
    finally:
        ledger.close()


def test_events_appended_while_an_audit_reads_are_never_faults(  # issue 41
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A live session: an append just after the audit read the session's head (its read
    models then ahead of the fold) is audited again, not reported as a difference."""
    session_id = _long_session(ledger, 600)  # 2,401 events: more than a page
    store = ledger.service.store
    version = store.version(session_id)
    appended = 0
    read = store.verify_and_stream

    def appending(sid: str) -> Any:
        nonlocal appended
        answer = read(sid)
        if not appended:  # as if another client appended just after the head was read
            appended += 1
            ledger.service.ledger.append(sid, [NewEvent(
                MessageRecorded(role="user", content="one more"), actor="user")])
        return answer

    monkeypatch.setattr(store, "verify_and_stream", appending)
    report = audit_session(store, ledger.service.projections, session_id)
    assert appended == 1
    assert report.ok and report.differences == () and report.events == version + 1


def test_at_most_two_audits_run_at_once(  # issue 41
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch,
) -> None:
    import threading

    from sessionledger.service import sessions as service_module

    session_id = ledger.session()
    gate = Gate()
    monkeypatch.setattr(service_module, "audit_session", gate.wrap(service_module.audit_session))
    reports: list[dict[str, Any]] = []
    threads = [threading.Thread(target=lambda: reports.append(
        ledger.service.audit(session_id))) for _ in range(5)]
    for thread in threads:
        thread.start()
    gate.wait_for(2)
    assert gate.running == 2
    gate.open()
    for thread in threads:
        thread.join()
    assert gate.most == service_module.AUDITS_AT_ONCE == 2
    assert len(reports) == 5 and all(r["ok"] for r in reports)
