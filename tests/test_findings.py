"""Audit findings (SPEC CC-10): what a reviewer looks for in any session, live, hooked or
imported, in the audit document, ``sessionledger audit`` and the CLI's ``--strict``.

Sessions are built through the real service over a real SQLite file. A host tool that ran
(``Write``, ``Bash``) is recorded the way a host records it after a permission check: a
``ToolCallRequested`` and a ``ToolCallCompleted`` appended with the ledger. TodoWrite and
AskUserQuestion run through the real tools; the question's auto-continue runs on the timer
service with a manual clock (``timer_support``).

The rule for ``write_in_plan``: a call that ran (status ``completed``) with a tool that is not
read-only (the permission authority's own reading: the descriptor, and the shell classifier
for Bash) counts when Plan was on at its ``ToolCallRequested`` or when its
``ToolCallCompleted`` was recorded; the finding is at the completion's seq.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from server_support import create_session, running_server, sessionledger_command
from timer_support import TEXTS, Ledger, question

from eventlog import (
    InteractionRequested,
    InteractionResolved,
    NewEvent,
    ToolCallCompleted,
    ToolCallRequested,
)
from sessionledger.http.schemas import AuditDocument
from sessionledger.service.audit import session_findings


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[Ledger]:
    subject = Ledger("sqlite", tmp_path)
    try:
        yield subject
    finally:
        subject.close()


def ran(
    ledger: Ledger, sid: str, call_id: str, tool: str, raw: dict[str, Any], *,
    status: str = "completed", requested: bool = True, completed: bool = True,
) -> None:
    """A host tool call as a host records it: requested, then completed (each optional)."""
    events = []
    if requested:
        events.append(NewEvent(ToolCallRequested(
            call_id=call_id, tool=tool, input=raw, host="protocol"), actor="host"))
    if completed:
        events.append(NewEvent(ToolCallCompleted(
            call_id=call_id, tool=tool, status=status, success=status == "completed",  # type: ignore[arg-type]
            model_content="done"), actor="host", causation_id=call_id))
    ledger.service.ledger.append(sid, events)


def seq_of(ledger: Ledger, sid: str, type_: str, call_id: str) -> int:
    (seq,) = [e.seq for e in ledger.events(sid, type_)
              if getattr(e.data, "call_id", None) == call_id]
    return seq


def findings(ledger: Ledger, sid: str) -> list[dict[str, Any]]:
    report = ledger.service.audit_report(sid)
    assert report.ok, report  # findings are never faults
    wire = report.to_wire()
    assert wire["ok"] is True
    AuditDocument.model_validate(wire)  # the HTTP schema describes the document exactly
    return list(wire["findings"])


def todo(content: str, status: str = "pending") -> dict[str, str]:
    return {"content": content, "status": status, "priority": "medium"}


# -- write_in_plan ---------------------------------------------------------------------------


def test_a_write_that_ran_while_plan_was_on_is_a_finding(ledger: Ledger) -> None:  # CC-10
    sid = ledger.session(mode="plan")
    ran(ledger, sid, "call_w", "Write", {"file_path": "src/x.py", "content": "x = 1\n"})
    assert findings(ledger, sid) == [{
        "kind": "write_in_plan", "seq": seq_of(ledger, sid, "ToolCallCompleted", "call_w"),
        "tool": "Write", "callId": "call_w", "path": "src/x.py",
    }]


def test_bash_in_plan_is_a_finding_only_when_the_classifier_says_it_writes(  # CC-10
    ledger: Ledger,
) -> None:
    sid = ledger.session(mode="plan")
    ran(ledger, sid, "call_ls", "Bash", {"command": "ls"})
    ran(ledger, sid, "call_read", "Read", {"file_path": "README.md"})
    ran(ledger, sid, "call_rm", "Bash", {"command": "rm -rf x"})
    assert findings(ledger, sid) == [{
        "kind": "write_in_plan", "seq": seq_of(ledger, sid, "ToolCallCompleted", "call_rm"),
        "tool": "Bash", "callId": "call_rm", "command": "rm -rf x",
    }]


def test_plan_at_the_request_or_at_the_completion_makes_a_write_count(  # CC-10
    ledger: Ledger,
) -> None:
    sid = ledger.session()
    ran(ledger, sid, "before", "Write", {"file_path": "a.py"})  # Plan off: nothing
    ran(ledger, sid, "late", "Edit", {"file_path": "b.py"}, completed=False)
    ledger.service.set_mode(sid, "plan")
    ran(ledger, sid, "late", "Edit", {"file_path": "b.py"}, requested=False)  # ran in Plan
    ran(ledger, sid, "denied", "Write", {"file_path": "c.py"}, status="denied")  # never ran
    ran(ledger, sid, "early", "Write", {"file_path": "d.py"}, completed=False)
    ledger.service.set_mode(sid, "build")
    ran(ledger, sid, "early", "Write", {"file_path": "d.py"}, requested=False)  # asked in Plan
    ran(ledger, sid, "after", "Write", {"file_path": "e.py"})  # Plan off again: nothing
    assert [(f["callId"], f["path"], f["seq"]) for f in findings(ledger, sid)] == [
        ("late", "b.py", seq_of(ledger, sid, "ToolCallCompleted", "late")),
        ("early", "d.py", seq_of(ledger, sid, "ToolCallCompleted", "early")),
    ]


def test_session_controls_and_unknown_tools_in_plan(ledger: Ledger) -> None:  # CC-10
    sid = ledger.session(mode="plan")
    ran(ledger, sid, "todo", "TodoWrite", {"todos": []})  # allowed in Plan
    ran(ledger, sid, "exit", "ExitPlanMode", {"plan": "# Plan"})  # allowed in Plan
    ran(ledger, sid, "mcp", "mcp__db__drop", {})  # an MCP tool nobody declared: not read-only
    assert findings(ledger, sid) == [{
        "kind": "write_in_plan", "seq": seq_of(ledger, sid, "ToolCallCompleted", "mcp"),
        "tool": "mcp__db__drop", "callId": "mcp",
    }]


def test_a_todo_write_through_the_tool_in_plan_is_no_finding(ledger: Ledger) -> None:  # CC-10
    sid = ledger.session(mode="plan")
    answer = ledger.service.tools.call(sid, "TodoWrite", {"todos": [todo("Read the code")]})
    assert answer.status_code == 200, answer.document
    assert findings(ledger, sid) == []


# -- dropped_unfinished_todos ----------------------------------------------------------------


def test_todo_write_records_and_reports_dropped_unfinished_items(ledger: Ledger) -> None:  # CC-10
    sid = ledger.session()
    first = ledger.service.tools.call(sid, "TodoWrite", {"todos": [
        todo("Write tests", "in_progress"), todo("Update docs"), todo("Ship", "completed"),
    ]})
    assert first.status_code == 200, first.document
    second = ledger.service.tools.call(sid, "TodoWrite", {"todos": [todo("Write tests")]})
    assert second.status_code == 200, second.document
    # The result keeps its shape (TD-3) ...
    assert second.document["result"]["droppedUnfinished"] == [todo("Update docs")]
    assert set(second.document["result"]) == {"oldTodos", "todos", "summary",
                                              "droppedUnfinished"}
    # ... and the TodosWritten the tool appended names the same items (the one rule, CC-5)
    written = ledger.events(sid, "TodosWritten")
    assert [e.to_wire()["data"].get("droppedUnfinished") for e in written] == [
        None, [todo("Update docs")],
    ]
    assert findings(ledger, sid) == [{
        "kind": "dropped_unfinished_todos", "seq": written[1].seq, "dropped": ["Update docs"],
    }]


# -- unanswered_question ---------------------------------------------------------------------


def test_auto_continued_and_declined_questions_are_findings(ledger: Ledger) -> None:  # CC-10
    sid = ledger.session()
    timed = ledger.ask(sid, TEXTS[0])
    ledger.tick(300)  # the deadline: the timer continues without an answer
    declined = ledger.ask(sid, TEXTS[1])
    ledger.service.tools.respond(sid, declined["interactionId"], "deny")
    answered = ledger.ask(sid, TEXTS[2])
    ledger.service.tools.respond(
        sid, answered["interactionId"], "modify",
        input={**question(TEXTS[2]), "answers": {TEXTS[2]: "SQLite"}},
    )
    resolved = {e.data.interaction_id: e.seq  # type: ignore[attr-defined]
                for e in ledger.events(sid, "InteractionResolved")}
    assert findings(ledger, sid) == [
        {"kind": "unanswered_question", "seq": resolved[timed["interactionId"]],
         "interactionId": timed["interactionId"], "callId": timed["callId"],
         "decision": "autoContinued", "questions": [TEXTS[0]]},
        {"kind": "unanswered_question", "seq": resolved[declined["interactionId"]],
         "interactionId": declined["interactionId"], "callId": declined["callId"],
         "decision": "deny", "questions": [TEXTS[1]]},
    ]


def test_the_pure_rule_over_recorded_events(ledger: Ledger) -> None:  # CC-10
    # A withdrawn question, a completion whose request is not in the log (a partial import)
    # and a plan approval that was declined (not a question): one rule over the events alone.
    sid = ledger.session(mode="plan")
    ledger.service.ledger.append(sid, [
        NewEvent(InteractionRequested(interaction_id="int_q", call_id="c_q",
                                      kind="askUserQuestion", payload=question()), actor="host"),
        NewEvent(InteractionResolved(interaction_id="int_q", call_id="c_q",
                                     decision="withdrawn"), actor="host"),
        NewEvent(InteractionRequested(interaction_id="int_p", call_id="c_p",
                                      kind="planApproval", payload={"plan": "# P"}),
                 actor="host"),
        NewEvent(InteractionResolved(interaction_id="int_p", call_id="c_p", decision="deny"),
                 actor="user"),
    ])
    ran(ledger, sid, "orphan", "Bash", {}, requested=False)
    events = ledger.events(sid)
    found = [f.to_wire() for f in session_findings(events)]
    assert [(f["kind"], f.get("decision"), f.get("callId")) for f in found] == [
        ("unanswered_question", "withdrawn", "c_q"), ("write_in_plan", None, "orphan"),
    ]
    assert found == findings(ledger, sid)
    assert [str(f) for f in session_findings(events)] == [
        f'seq {found[0]["seq"]} unanswered_question: withdrawn: "{TEXTS[0]}"',
        f'seq {found[1]["seq"]} write_in_plan: Bash while Plan was on',
    ]


def test_a_session_without_findings_has_an_empty_list(ledger: Ledger) -> None:  # CC-10
    sid = ledger.session()
    assert ledger.service.audit(sid)["findings"] == []
    assert all(r.findings == () for r in ledger.service.audit_all())


# -- the faces: HTTP over a real serve, the CLI as a subprocess --------------------------------


def _plan_write(store_url_events: Any, sid: str) -> None:
    store_url_events.append(sid, [
        NewEvent(ToolCallRequested(call_id="call_w", tool="Write",
                                   input={"file_path": "src/x.py"}, host="protocol"),
                 actor="host"),
        NewEvent(ToolCallCompleted(call_id="call_w", tool="Write", status="completed",
                                   success=True, model_content="written"), actor="host"),
    ])


def test_the_http_audit_document_carries_findings(tmp_path: Path) -> None:  # CC-10
    with running_server(tmp_path) as server, server.client() as http:
        planned = create_session(http, mode="plan")
        clean = create_session(http)
        store = server.open_store()
        try:
            _plan_write(store, planned)
        finally:
            store.close()
        audit = http.get(f"/v1/sessions/{planned}/audit")
        assert audit.status_code == 200, audit.text
        document = audit.json()
        AuditDocument.model_validate(document)
        assert document["ok"] is True
        assert document["findings"] == [{"kind": "write_in_plan", "seq": 3, "tool": "Write",
                                         "callId": "call_w", "path": "src/x.py"}]
        assert http.get(f"/v1/sessions/{clean}/audit").json()["findings"] == []


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if k != "SESSIONLEDGER_DB"}
    return subprocess.run(
        [*sessionledger_command(), *args], cwd=cwd, env=environment, capture_output=True,
        text=True, timeout=60, check=False,
    )


def test_cli_audit_lists_findings_exits_0_and_1_with_strict(tmp_path: Path) -> None:  # CC-10
    ledger = Ledger("sqlite", tmp_path)
    try:
        planned = ledger.session(mode="plan")
        _plan_write(ledger.service.ledger, planned)
        clean = ledger.session()
    finally:
        ledger.close()
    db = ["--db", f"sqlite:///{tmp_path / 'ledger.db'}"]
    line = f"FINDING {planned}: seq 3 write_in_plan: Write src/x.py while Plan was on"
    for args in ((), (planned,)):
        result = _cli("audit", *args, *db, cwd=tmp_path)
        assert result.returncode == 0, result.stdout + result.stderr
        assert line in result.stdout.splitlines(), result.stdout
        assert "1 finding in 1 session" in result.stdout
        strict = _cli("audit", *args, "--strict", *db, cwd=tmp_path)
        assert strict.returncode == 1, strict.stdout + strict.stderr
        assert line in strict.stdout.splitlines() and "Traceback" not in strict.stderr
    quiet = _cli("audit", clean, "--strict", *db, cwd=tmp_path)
    assert quiet.returncode == 0, quiet.stdout + quiet.stderr
    assert "FINDING" not in quiet.stdout
    as_json = _cli("audit", "--json", *db, cwd=tmp_path)
    assert as_json.returncode == 0, as_json.stderr
    document = json.loads(as_json.stdout)
    by_id = {s["sessionId"]: s for s in document["sessions"]}
    assert document["ok"] is True and set(by_id) == {planned, clean}
    assert by_id[planned]["findings"] == [{"kind": "write_in_plan", "seq": 3, "tool": "Write",
                                           "callId": "call_w", "path": "src/x.py"}]
    assert by_id[clean]["findings"] == []
    assert _cli("audit", "--json", "--strict", *db, cwd=tmp_path).returncode == 1


def test_a_clock_set_back_is_a_finding_not_a_broken_chain(ledger: Ledger) -> None:
    # issue 41, finding 2: recordedAt ran backwards inside a session and audit said ok.
    sid = ledger.service.create_session(workspace=str(ledger.root))["sessionId"]
    ran(ledger, sid, "c1", "Read", {"file_path": "a"})
    ledger.advance(-3600)  # the wall clock is set back an hour
    ran(ledger, sid, "c2", "Read", {"file_path": "b"})
    ran(ledger, sid, "c3", "Read", {"file_path": "c"})  # later than c2: no second finding
    ledger.advance(7200)
    ran(ledger, sid, "c4", "Read", {"file_path": "d"})
    found = findings(ledger, sid)  # the chain and projections are ok
    (stepped,) = [f for f in found if f["kind"] == "clock_stepped_back"]
    assert stepped["seq"] == seq_of(ledger, sid, "ToolCallRequested", "c2")
    assert stepped["recordedAt"] < stepped["previousRecordedAt"]
    report = ledger.service.audit_report(sid)
    assert "the server's clock was set back" in "\n".join(str(f) for f in report.findings)
