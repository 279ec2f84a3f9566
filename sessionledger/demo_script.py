"""The steps of ``sessionledger demo``: one scripted agent session through every feature.

Each step drives the very service objects the HTTP routes call (:class:`SessionService` and
its ``tools``, ``turns``, ``timers`` and ``models``), prints what happened with ``rich``, and
checks what it saw against the contract's texts and rules (docs/spec.md); a check that fails raises
:class:`DemoFailure` and the runner (:mod:`sessionledger.demo`) names the step. Steps share
one :class:`DemoContext` and run in the order of :data:`STEPS`: later steps rely on what the
earlier ones left behind (the session, Plan, the approved plan file).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from .errors import SessionLedgerError
from .service.sessions import SessionService
from .tools.plan_files import plan_path

__all__ = ["STEPS", "DemoContext", "DemoFailure", "Step"]

PLAN_GOAL_REFUSAL = "Plan and Goal cannot be active at the same time."
ANSWERED_PREFIX = "User has answered your questions: "
TODO_REMINDER_PREFIX = "The TodoWrite tool hasn't been used recently."
NOT_APPROVED = "The plan was not approved by the user."
APPROVED_PREFIX = (
    "User has approved your plan. You can now start coding. Start with updating your todo "
    "list if applicable.\n\n## Approved Plan:\n"
)
PLAN_FILE_PREFIX = "A plan file exists from plan mode at: "
REVIEW_QUESTION = "Review this implementation plan."

TOOLS = ["TodoWrite", "TodoRead", "AskUserQuestion", "EnterPlanMode", "ExitPlanMode"]
"""The tool names the demo's model requests offer (``prepare-request``)."""
WAIT_MARGIN_S = 10.0
"""How long past a question's deadline the demo waits for the scheduler before failing."""

FIRST_QUESTION = {
    "question": "Where should the export write its files?",
    "header": "Output",
    "multiSelect": False,
    "options": [
        {"label": "A new exports/ directory (Recommended)", "description": "kept apart"},
        {"label": "Next to the input", "description": "no new directory"},
    ],
}
SECOND_QUESTION = {
    "question": "Should the export also write CSV?",
    "header": "CSV",
    "multiSelect": False,
    "options": [
        {"label": "JSON only (Recommended)", "description": "one format to maintain"},
        {"label": "JSON and CSV", "description": "for spreadsheets"},
    ],
}
TODOS = [
    {"content": "Read the session store API", "status": "completed", "priority": "high"},
    {"content": "Write the export command", "status": "in_progress", "priority": "high"},
    {"content": "Document the export format", "status": "pending", "priority": "low"},
]
FIRST_PLAN = "# Session export\n\n1. Add `sessionledger export SESSION`.\n2. Write JSON.\n"
SECOND_PLAN = (
    "# Session export\n\n1. Add `sessionledger export SESSION`.\n2. Write JSON.\n"
    "3. Test it on a deleted session too.\n"
)
FEEDBACK = "Please also test deleted sessions."


class DemoFailure(Exception):
    """A step saw something other than what the contract (docs/spec.md) says it should."""


@dataclass(kw_only=True)
class DemoContext:
    """What the steps share: the service, where to print, and what earlier steps left."""

    service: SessionService
    console: Console
    workspace: Path
    store_url: str
    grace_s: float
    deadline_s: float
    session_id: str = ""
    reader_id: str = ""
    verdict: str = ""
    notes: dict[str, Any] = field(default_factory=dict)

    def say(self, label: str, value: object = "") -> None:
        """One line: a dim label and its value (escaped: values are never markup)."""
        self.console.print(f"  [dim]{label:<12}[/dim] {escape(str(value))}")

    def quote(self, text: str, *, lines: int = 4, more: bool = True) -> None:
        """The first ``lines`` lines of a text the model or user would see, indented, and
        (with ``more``) how many lines were left out."""
        shown = text.splitlines() or [""]
        for line in shown[:lines]:  # cut at the console's width (piped output is never cut)
            self.console.print(f"  [italic]│ {escape(line)}[/italic]", no_wrap=True,
                               overflow="ignore" if self.console.soft_wrap else "ellipsis")
        if more and len(shown) > lines:
            self.console.print(f"  [italic dim]│ … {len(shown) - lines} more lines[/italic dim]")

    def document(self) -> dict[str, Any]:
        return self.service.document(self.session_id)

    def call(self, tool: str, raw: Mapping[str, Any], *, session: str = "") -> dict[str, Any]:
        """A service tool call, as ``POST …/tool-calls`` makes it; the call document."""
        answer = self.service.tools.call(session or self.session_id, tool, raw)
        return answer.document

    def check(self, tool: str, raw: Mapping[str, Any]) -> dict[str, Any]:
        """A host tool's permission check (``POST …/permission-check``), printed."""
        verdict = self.service.tools.permission_check(self.session_id, tool, raw)
        shown = raw.get("command") or raw.get("file_path") or ""
        self.say(f"{tool}", f"{shown} → {verdict['behavior']} ({verdict['ruleId']})")
        return verdict


def expect(condition: bool, message: str) -> None:
    """Fail the step with ``message`` unless ``condition`` holds."""
    if not condition:
        raise DemoFailure(message)


def _equal(seen: object, wanted: object, what: str) -> None:
    expect(seen == wanted, f"{what}: expected {wanted!r}, got {seen!r}")


def _starts(text: object, prefix: str, what: str) -> None:
    expect(isinstance(text, str) and text.startswith(prefix),
           f"{what} should start with {prefix!r}, got {str(text)[:120]!r}")


def _section(text: str, heading: str) -> str:
    """The part of a handoff from ``heading`` up to the next heading."""
    start = text.find(heading)
    if start < 0:
        return ""
    end = text.find("\n## ", start + len(heading))
    return text[start:end if end >= 0 else None].split("</session-context>")[0].rstrip()


def _wait_until(predicate: Callable[[], bool], timeout_s: float) -> bool:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.02)
    return predicate()


# -- the steps -------------------------------------------------------------------------------


def session_step(ctx: DemoContext) -> None:
    """A protocol host opens a session in the demo's workspace."""
    doc = ctx.service.create_session(host="protocol")
    ctx.session_id = doc["sessionId"]
    ctx.say("store", ctx.store_url)
    ctx.say("workspace", ctx.workspace)
    ctx.say("session", f"{ctx.session_id} (protocol host, version {doc['version']})")
    ctx.say("display", doc["displayMode"])
    _equal(doc["displayMode"], "build", "a new session's display mode")


def modes_step(ctx: DemoContext) -> None:
    """Shift+Tab cycles the display mode; each mode's defaults decide host tool calls."""
    cycled = [ctx.service.cycle_mode(ctx.session_id)["displayMode"] for _ in range(4)]
    ctx.say("Shift+Tab", " → ".join(["build", *cycled]))
    _equal(cycled, ["edit", "yolo", "plan", "build"], "the Shift+Tab cycle")
    write = {"file_path": "src/export.py", "content": "print('export')\n"}
    _equal(ctx.check("Write", write)["behavior"], "ask", "build asks before a write")
    ctx.say("/mode edit", f"display {ctx.service.set_mode(ctx.session_id, 'edit')['displayMode']}")
    _equal(ctx.check("Write", write)["behavior"], "allow", "edit allows workspace edits")
    ctx.say("/mode auto", f"display {ctx.service.set_mode(ctx.session_id, 'auto')['displayMode']}")
    _equal(ctx.check("Bash", {"command": "rm -rf build"})["behavior"], "ask",
           "auto asks before a destructive command")
    _equal(ctx.check("Bash", {"command": "git status"})["behavior"], "allow",
           "auto allows a read-only command")
    doc = ctx.service.set_mode(ctx.session_id, "yolo")
    ctx.say("/mode yolo", f"display {doc['displayMode']}")


def goal_step(ctx: DemoContext) -> None:
    """A goal and Plan are never on together (ES-5)."""
    doc = ctx.service.start_goal(ctx.session_id, "Ship the session export")
    ctx.say("goal", f"started: {doc['executionState']['goal']['objective']}")
    try:
        ctx.service.set_mode(ctx.session_id, "plan")
    except SessionLedgerError as exc:
        ctx.say("/mode plan", f"refused: {exc.message}")
        _equal(exc.message, PLAN_GOAL_REFUSAL, "the refusal of Plan during a goal")
    else:
        raise DemoFailure("entering Plan during a goal was not refused")
    doc = ctx.service.end_goal(ctx.session_id)
    ended = doc["executionState"]["goal"] is None
    ctx.say("goal", "ended: no goal is active now" if ended else "still active")


def plan_step(ctx: DemoContext) -> None:
    """EnterPlanMode turns Plan on over yolo; a Write is then denied, a Read allowed."""
    done = ctx.call("EnterPlanMode", {})
    expect(done.get("success") is True, f"EnterPlanMode did not succeed: {done}")
    ctx.quote(done["modelContent"].splitlines()[-1])
    doc = ctx.document()
    ctx.say("display", f"{doc['displayMode']} (mode underneath: {doc['executionState']['mode']})")
    _equal(doc["displayMode"], "plan", "the display mode after EnterPlanMode")
    denied = ctx.check("Write", {"file_path": "src/export.py", "content": "x = 1\n"})
    _equal(denied["behavior"], "deny", "a Write permission check in Plan (over yolo)")
    ctx.say("reason", denied["reason"])
    _equal(ctx.check("Read", {"file_path": "src/export.py"})["behavior"], "allow",
           "a Read permission check in Plan")


def answered_question_step(ctx: DemoContext) -> None:
    """A question waits for the user; any activity pauses its countdown; the answer comes."""
    asked = ctx.call("AskUserQuestion", {"questions": [FIRST_QUESTION]})
    _equal(asked["status"], "pending", "AskUserQuestion's first answer")
    interaction = ctx.document()["interactions"][0]
    timer = interaction["autoResolution"] or {}
    ctx.say("asked", FIRST_QUESTION["question"])
    ctx.say("timer", f"{timer.get('state')}: visible at {timer.get('visibleAt')}, "
                     f"deadline {timer.get('deadlineAt')}")
    touched = ctx.service.timers.activity(ctx.session_id, interaction["interactionId"], "select")
    paused = (touched["autoResolution"] or {}).get("state")
    ctx.say("activity", f"the user selects an option: timer {paused} (times kept)")
    _equal(paused, "paused", "the timer after user activity")
    label = FIRST_QUESTION["options"][0]["label"]  # type: ignore[index]
    done = ctx.service.tools.respond(
        ctx.session_id, interaction["interactionId"], "modify",
        input={"questions": [FIRST_QUESTION], "answers": {FIRST_QUESTION["question"]: label}},
    )
    ctx.say("answered", label)
    ctx.quote(done["modelContent"], lines=2)
    _starts(done.get("modelContent"), ANSWERED_PREFIX, "the text for an answered question")


def auto_continued_step(ctx: DemoContext) -> None:
    """An unanswered question shows its countdown after the grace and auto-continues."""
    asked = ctx.call("AskUserQuestion", {"questions": [SECOND_QUESTION]})
    call_id = asked["callId"]
    ctx.say("asked", f"{SECOND_QUESTION['question']} (grace {ctx.grace_s:g} s, "
                     f"deadline {ctx.deadline_s:g} s)")
    seen: list[str] = []

    def settled() -> bool:
        interactions = ctx.document()["interactions"]
        timer = interactions[0]["autoResolution"] if interactions else None
        if timer is not None and (not seen or seen[-1] != timer["state"]):
            seen.append(timer["state"])
            ctx.say("timer", f"{timer['state']} (deadline {timer['deadlineAt']})")
        status: str = ctx.service.tools.get(ctx.session_id, call_id).document["status"]
        return status != "pending"

    finished = _wait_until(settled, ctx.deadline_s + WAIT_MARGIN_S)
    expect(finished, f"the question did not auto-continue within {ctx.deadline_s:g} s "
                     f"+ {WAIT_MARGIN_S:g} s (timer states seen: {seen})")
    expect("countdown" in seen, f"no visible countdown before the deadline (seen: {seen})")
    resolved = [e.data for e in ctx.service.store.read_session(ctx.session_id)
                if e.type == "InteractionResolved"]
    decision = getattr(resolved[-1], "decision", None)
    ctx.say("resolved", f"{decision}: Unanswered — auto-continued")
    _equal(decision, "autoContinued", "the decision recorded at the deadline")
    ctx.quote(ctx.service.tools.get(ctx.session_id, call_id).document["modelContent"], lines=1)


def todos_step(ctx: DemoContext) -> None:
    """TodoWrite in Plan; after ten assistant messages the next request gets a reminder."""
    done = ctx.call("TodoWrite", {"todos": TODOS})
    counts = done["result"]["summary"]
    ctx.say("TodoWrite", f"{counts['total']} items: " + ", ".join(
        f"{counts[status]} {status.replace('_', ' ')}"
        for status in ("pending", "in_progress", "completed")))
    ctx.say("progress", ctx.service.todos.current(ctx.session_id).progress)
    for number in range(1, 11):
        ctx.service.turns.record_message(
            ctx.session_id, "assistant", f"Working on the export, step {number}."
        )
    ctx.say("messages", "10 assistant messages recorded")
    reminders = ctx.service.turns.prepare_request(ctx.session_id, TOOLS)
    ctx.say("reminders", ", ".join(r.kind for r in reminders))
    todo = [r for r in reminders if r.kind == "todo_reminder"]
    expect(len(todo) == 1, "no todo reminder after ten assistant messages")
    ctx.console.print("  [bold]todo reminder[/bold]")
    ctx.quote(todo[0].text, lines=5)
    _starts(todo[0].text, TODO_REMINDER_PREFIX, "the todo reminder")


def dropped_todo_step(ctx: DemoContext) -> None:
    """A TodoWrite that leaves out an unfinished item reports it (droppedUnfinished)."""
    kept = [dict(TODOS[0]), dict(TODOS[1])]
    done = ctx.call("TodoWrite", {"todos": kept})
    dropped = done["result"]["droppedUnfinished"]
    ctx.say("TodoWrite", f"{len(kept)} items; unfinished items dropped: " + "; ".join(
        f"{item['content']} ({item['status'].replace('_', ' ')})" for item in dropped))
    _equal(dropped, [TODOS[2]], "droppedUnfinished")
    warning = done["modelContent"].split("\n\n", 1)[-1]
    ctx.console.print("  [bold yellow]dropped-todo warning[/bold yellow]")
    ctx.quote(warning, lines=3)


def _submit(ctx: DemoContext, plan: str) -> dict[str, Any]:
    asked = ctx.call("ExitPlanMode", {"plan": plan})
    _equal(asked["status"], "pending", "ExitPlanMode in Plan")
    interaction: dict[str, Any] = ctx.document()["interactions"][0]
    _equal(interaction["kind"], "planApproval", "the interaction ExitPlanMode opens")
    return interaction


def plan_approval_step(ctx: DemoContext) -> None:
    """The user sends feedback on a first plan (Plan stays on), then approves a second one."""
    first = _submit(ctx, FIRST_PLAN)
    question = first["payload"].get("questions", [{}])[0].get("question")
    ctx.say("submitted", f"plan 1 ({len(FIRST_PLAN)} characters): {question}")
    _equal(question, REVIEW_QUESTION, "the plan approval question")
    done = ctx.service.tools.respond(
        ctx.session_id, first["interactionId"], "feedback", feedback=FEEDBACK
    )
    ctx.say("feedback", FEEDBACK)
    ctx.quote(done["modelContent"], lines=1)
    _equal(done["modelContent"], NOT_APPROVED, "the text after feedback")
    _equal((done.get("followUpUserInput") or {}).get("input"), FEEDBACK,
           "the feedback steered into the turn")
    _equal(ctx.document()["displayMode"], "plan", "the display mode after feedback")
    second = _submit(ctx, SECOND_PLAN)
    ctx.say("submitted", f"plan 2 ({len(SECOND_PLAN)} characters)")
    done = ctx.service.tools.respond(ctx.session_id, second["interactionId"], "approve")
    _starts(done.get("modelContent"), APPROVED_PREFIX, "the text after approval")
    ctx.say("approved", done["modelContent"].splitlines()[0])
    doc = ctx.document()
    ctx.say("display", f"{doc['displayMode']} (Plan left, the mode underneath kept)")
    _equal(doc["displayMode"], "yolo", "the display mode after approval")
    path = plan_path(doc["workspace"], ctx.session_id)
    written = path.read_text(encoding="utf-8") if path.exists() else None
    ctx.say("plan file", path)
    _equal(written, SECOND_PLAN, "the plan file's content")
    ctx.notes["plan_path"] = path


def compaction_step(ctx: DemoContext) -> None:
    """After a compaction the next request carries the plan file back (PM-10)."""
    receipt = ctx.service.turns.compact(ctx.session_id)
    ctx.say("compacted", f"ContextCompacted at seq {receipt['seq']}")
    reminders = ctx.service.turns.prepare_request(ctx.session_id, TOOLS)
    ctx.say("reminders", ", ".join(r.kind for r in reminders))
    found = [r for r in reminders if r.kind == "plan_file_reference"]
    expect(len(found) == 1, "no plan_file_reference reminder after the compaction")
    ctx.quote(found[0].text, lines=3)
    _starts(found[0].text, f"{PLAN_FILE_PREFIX}{ctx.notes['plan_path']}",
            "the plan-file reference")


def list_models_step(ctx: DemoContext) -> None:
    """ListModels reads the workspace's model catalog: current and disabled models."""
    done = ctx.call("ListModels", {})
    expect(done.get("success") is True, f"ListModels failed: {done.get('modelContent')}")
    ctx.quote(done["modelContent"], lines=6)
    text = done["modelContent"]
    expect("[current]" in text and "[disabled: " in text,
           "ListModels did not mark the current and the disabled model")


def read_context_step(ctx: DemoContext) -> None:
    """A second session of the workspace reads a handoff of the first (ReadSessionContext)."""
    ctx.reader_id = ctx.service.create_session(host="protocol")["sessionId"]
    ctx.say("reader", ctx.reader_id)
    done = ctx.call("ReadSessionContext", {
        "sessionId": ctx.session_id, "query": "What was approved and what is left to do?",
        "strategy": "handoff",
    }, session=ctx.reader_id)
    expect(done.get("success") is True,
           f"ReadSessionContext failed: {done.get('modelContent')}")
    text = done["modelContent"]
    ctx.quote(text, lines=1, more=False)
    for heading in ("## Todos", "## Approved plan"):
        ctx.quote(_section(text, heading), lines=6)
    expect("Test it on a deleted session too." in text,
           "the handoff does not carry the approved plan")
    expect("Write the export command" in text, "the handoff does not carry the todos")


def deletion_step(ctx: DemoContext) -> None:
    """Both sessions are deleted; the reader's events are purged, the first one's stay."""
    ctx.service.delete_session(ctx.reader_id)
    removed = ctx.service.purge_session(ctx.reader_id)
    ctx.say("purged", f"{ctx.reader_id}: {removed} events removed")
    ctx.service.delete_session(ctx.session_id)
    try:
        ctx.document()
    except SessionLedgerError as exc:
        ctx.say("deleted", f"{ctx.session_id}: now answers {exc.status} ({exc.code}); "
                           "its events stay until purge")
        _equal(exc.status, 410, "a deleted session's status")
    else:
        raise DemoFailure("the deleted session still answers")


def audit_step(ctx: DemoContext) -> None:
    """The first session's hash chain and projections against a fresh fold of its log."""
    report = ctx.service.audit_report(ctx.session_id)
    ctx.say("chain", "verifies" if report.chain_ok else f"broken at seq {report.first_bad_seq}")
    ctx.say("projections", "equal a fresh fold" if report.projections_ok
            else "; ".join(report.differences))
    for note in report.notes:
        ctx.say("note", note)
    if report.ok:
        ctx.verdict = (f"Audit verdict: OK — {ctx.session_id}, {report.events} events, "
                       "hash chain verifies, projections equal a fresh fold of the log")
        ctx.console.print(f"\n[bold green]{escape(ctx.verdict)}[/bold green]")
        return
    ctx.verdict = f"Audit verdict: FAIL — {ctx.session_id}"
    ctx.console.print(f"\n[bold red]{escape(ctx.verdict)}[/bold red]")
    raise DemoFailure("the audit found a fault")


Step = tuple[str, Callable[[DemoContext], None]]

STEPS: tuple[Step, ...] = (
    ("Session", session_step),
    ("Permission modes", modes_step),
    ("Plan and Goal", goal_step),
    ("Plan mode: a Write is denied", plan_step),
    ("Question answered", answered_question_step),
    ("Question auto-continued", auto_continued_step),
    ("Todos and the todo reminder", todos_step),
    ("Dropped-todo warning", dropped_todo_step),
    ("Plan feedback, then approval", plan_approval_step),
    ("Compaction and the plan-file reference", compaction_step),
    ("ListModels", list_models_step),
    ("ReadSessionContext", read_context_step),
    ("Deletion and purge", deletion_step),
    ("Audit", audit_step),
)
"""Every step in order, with the feature it shows."""
