"""The audit's single pass (issue 24.4): each sound session's events are folded into every read
model and the findings as they are decoded (``verify_and_stream``, ``SessionFold``), and the
report is the one the listed pass gives (``verify_and_read``, ``compare_session``,
``log_findings``): on a sound log, on tampered read models, on a broken chain, and when a
fold fails midway (the session is then audited again the listed way).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from timer_support import Ledger, question

from eventlog import (
    InteractionRequested,
    InteractionResolved,
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
