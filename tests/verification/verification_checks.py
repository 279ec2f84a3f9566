"""The checks the whole-service machine runs after its steps, as plain functions.

Each takes what the service answers and what the reference model (:mod:`verification_model`)
says, and asserts they agree: a session document's interaction queue and timers (HO-4 … HO-7),
the plan file (PM-7), a reminder's text (TD-5, PM-5, PM-10), and the log as a whole — the
audit (chains and projections against a fresh fold), gapless ``seq`` and global positions, and
what readers that remember a cursor hold (EL-5).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from verification_model import DEADLINE, GRACE, SessionModel

from eventlog import RecordedEvent, format_instant
from sessionledger import SessionService
from sessionledger.tools.plan_files import plan_path

__all__ = [
    "STOP",
    "check_auto_continued",
    "check_log",
    "check_plan_answer",
    "check_plan_file",
    "check_queue",
    "check_question_answer",
    "check_reminder_text",
    "fingerprint",
]

TODO_HEADER = "The TodoWrite tool hasn't been used recently."
PLAN_FULL = "Plan mode is active. The user indicated that they do not want you to execute yet"
PLAN_FILE = "A plan file exists from plan mode at: "
RUNNING = ("hiddenGrace", "countdown")
APPROVED = ("User has approved your plan. You can now start coding. Start with updating your "
            "todo list if applicable.\n\n## Approved Plan:\n")
STOP = {"reason": "plan_exit_denied", "stopTurnAfterResult": True}


def iso(moment: datetime) -> str:
    return format_instant(moment)


def fingerprint(events: Sequence[RecordedEvent]) -> list[tuple[int, str, int, str]]:
    """What identifies each event: its positions and its hash."""
    return [(e.global_position, e.session_id, e.seq, e.hash) for e in events]


def check_queue(listed: list[dict[str, Any]], model: SessionModel) -> None:
    """The pending interactions in queue order; at most one clock, at the head; each timer's
    absolute times follow from its start and never change (HO-4, HO-7)."""
    assert [(i["interactionId"], i["kind"]) for i in listed] == [
        (w.interaction_id, w.kind) for w in model.queue]
    running = [i for i, entry in enumerate(listed)
               if (entry["autoResolution"] or {}).get("state") in RUNNING]
    assert running in ([], [0])  # at most one clock per session, at the head
    for entry, waiting in zip(listed, model.queue, strict=True):
        timer = entry["autoResolution"]
        if waiting.started_at is None:
            assert timer is None
            continue
        assert timer is not None
        start = waiting.started_at
        assert (timer["startedAt"], timer["visibleAt"], timer["deadlineAt"]) == (
            iso(start), iso(start + GRACE), iso(start + DEADLINE))
        if waiting.paused:
            assert timer["state"] == "paused"
        else:
            assert timer["state"] in RUNNING


def check_auto_continued(events: Sequence[RecordedEvent], model: SessionModel) -> None:
    """Exactly the interactions the model says the timer resolved are recorded as
    ``autoContinued`` (HO-8), each resolved once, and no user answer is."""
    resolved = [e.data for e in events if e.type == "InteractionResolved"]
    ids = [d.interaction_id for d in resolved]  # type: ignore[attr-defined]
    assert len(ids) == len(set(ids)), "an interaction was resolved twice"
    timer = {d.interaction_id for d in resolved  # type: ignore[attr-defined]
             if d.decision == "autoContinued"}  # type: ignore[attr-defined]
    assert timer == model.auto_continued


def check_question_answer(done: dict[str, Any], decision: str) -> None:
    """An AskUserQuestion answered (AQ-4), approved without answers (HO-8: never taken as
    ``{}``) or declined: the call completes at once, successful only with answers."""
    assert done["status"] == "completed"
    assert done["success"] is (decision == "modify")
    if decision == "modify":
        assert done["modelContent"].startswith("User has answered your questions: ")
    if decision == "approve":
        assert "AskUserQuestion requires user answers before execution" in (
            done["modelContent"])


def check_plan_answer(done: dict[str, Any], decision: str, *, plan: str, plan_on: bool) -> None:
    """PM-7's approval text; feedback steered (PM-8) and a rejection stopping the turn
    (PM-9) only while Plan is on."""
    assert done["status"] == "completed"
    assert done["success"] is (decision == "approve")
    if decision == "approve":
        assert done["modelContent"] == APPROVED + plan
        return
    assert done["turnControl"] == (STOP if decision == "deny" and plan_on else None)
    steered = decision == "feedback" and plan_on
    assert (done["followUpUserInput"] is not None) is steered


def check_plan_file(workspace: Path, session_id: str, model: SessionModel) -> None:
    """The plan file holds the session's last approved plan byte for byte, or is absent."""
    target = plan_path(str(workspace), session_id)
    if model.approved_plan is None:
        assert not target.exists()
    else:
        assert target.read_bytes() == model.approved_plan.encode("utf-8")


def check_reminder_text(model: SessionModel, kind: str, variant: str | None, text: str) -> None:
    """The exact openings the SPEC fixes, and the todo reminder's list lines (TD-5)."""
    if kind == "todo_reminder":
        assert text.startswith(TODO_HEADER)
        lines = [f"{i}. [{t['status']}] {t['content']}"
                 for i, t in enumerate(model.todos, start=1)]
        if lines:
            assert text.endswith("\n\n" + "\n".join(lines))
    elif kind == "runtime_mode" and variant == "full":
        assert text.startswith(PLAN_FULL)
    elif kind == "plan_file_reference":
        assert text.startswith(PLAN_FILE)
        assert model.approved_plan is not None and model.approved_plan.strip() in text


def check_log(
    service: SessionService, *, sessions: Sequence[str], received: Sequence[RecordedEvent],
    connected: bool, held: Mapping[str, Sequence[RecordedEvent]],
) -> None:
    """The audit finds nothing; positions and ``seq`` are gapless; every reader holds a
    prefix of the log (all of it while the live reader is connected)."""
    reports = service.audit_all()
    assert all(r.ok for r in reports), [r.to_wire() for r in reports if not r.ok]
    log = list(service.store.read_all())
    assert [e.global_position for e in log] == list(range(1, len(log) + 1))
    by_session: dict[str, list[int]] = {}
    for event in log:
        by_session.setdefault(event.session_id, []).append(event.seq)
    for seqs in by_session.values():
        assert seqs == list(range(1, len(seqs) + 1))
    assert set(sessions) <= set(by_session)
    got = fingerprint(received)
    assert got == fingerprint(log[:len(got)])  # a prefix, in order, nothing twice
    if connected:
        assert len(got) == len(log)
    for sid, events in held.items():
        assert fingerprint(events) == fingerprint(
            list(service.store.read_session(sid))[:len(events)])
