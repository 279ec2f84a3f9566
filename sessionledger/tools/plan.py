"""EnterPlanMode and ExitPlanMode, whole: their words, their contracts, their handlers
(PM-1 … PM-9).

What the model reads (:data:`ENTER_DESCRIPTION`, :data:`EXIT_DESCRIPTION`), what it may write
(:class:`EnterPlanInput`, :class:`ExitPlanInput`), the exact texts it gets back for each outcome
(:data:`ENTER_GUIDANCE`, :func:`approved_text`, :data:`NOT_APPROVED`), and
:class:`EnterPlanModeHandler` / :class:`ExitPlanModeHandler`, the executor's view of all this
(PM-1, PM-6 … PM-9, ES-3). The plan file itself is :mod:`sessionledger.tools.plan_files`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from eventlog import (
    Event,
    FollowUpData,
    HostKind,
    InteractionKind,
    MessageRecorded,
    PlanApproved,
    PlanFileWriteFailed,
    PlanSubmitted,
    RecordedEvent,
    TurnControlData,
)
from statemachine.execution import LeavePlan, Refusal, SetMode, decide_events
from statemachine.plan_approval import (
    INITIAL,
    Answer,
    PlanOutcome,
    PlanRefusal,
    abandon_plan,
    decide_plan,
    next_state,
)

from ..errors import ServiceUnavailable
from ..permission.descriptors import SERVICE_TOOLS, ToolDescriptor
from .handlers import AbandonCause, Asked, HandlerOutcome, Resolution, ToolContext, Withdrawal
from .plan_files import PlanFiles, PlanWriteCancelled, last_approved_plan, put_back

__all__ = [
    "APPROVED_PREFIX",
    "APPROVE_OPTION",
    "ENTER_DESCRIPTION",
    "ENTER_GUIDANCE",
    "EXIT_DESCRIPTION",
    "FEEDBACK_SOURCE",
    "NOT_APPROVED",
    "PLAN_MAX",
    "REVIEW_QUESTION",
    "TURN_STOP_REASON",
    "WITHDRAWN_PLAN",
    "AllowedPrompt",
    "EnterPlanInput",
    "EnterPlanModeHandler",
    "ExitPlanInput",
    "ExitPlanModeHandler",
    "SessionEvents",
    "SessionGone",
    "approved_text",
    "parse_enter_input",
    "parse_exit_input",
]


# -- the words and the contracts (PM-1, PM-6) -------------------------------------------------
#
# EnterPlanMode takes no input and never needs approval (PM-1); its description encourages
# Plan for non-trivial implementation work, names the seven situations where it fits and —
# unlike the agent runtime it follows — does not claim the user has to approve entering.
# ExitPlanMode's input (PM-6) is the plan (1 to 20000 code points, not only whitespace, stored
# verbatim) and optional ``allowedPrompts`` that are echoed in the result and grant nothing;
# other fields are allowed. The texts the model receives for each outcome are here, verbatim
# from docs/spec.md, so tests and the handlers share one copy.

PLAN_MAX = 20000
REVIEW_QUESTION = "Review this implementation plan."
APPROVE_OPTION = "Approve"
FEEDBACK_SOURCE = "plan_approval_feedback"
TURN_STOP_REASON = "plan_exit_denied"
NOT_APPROVED = "The plan was not approved by the user."
WITHDRAWN_PLAN = "The plan was not approved; plan mode stays on."
APPROVED_PREFIX = (
    "User has approved your plan. You can now start coding. Start with updating your todo "
    "list if applicable.\n\n## Approved Plan:\n"
)

ENTER_GUIDANCE = (
    "Entered plan mode. You should now focus on exploring the codebase and designing an "
    "implementation approach.\n\n"
    "In plan mode, you should:\n"
    "1. Thoroughly explore the codebase to understand existing patterns\n"
    "2. Identify similar features and architectural approaches\n"
    "3. Consider multiple approaches and their trade-offs\n"
    "4. Use AskUserQuestion if you need to clarify the approach\n"
    "5. Design a concrete implementation strategy\n"
    "6. When ready, use ExitPlanMode to present your plan for approval\n\n"
    "Remember: DO NOT write or edit any files yet"
)

ENTER_DESCRIPTION = (
    "Use this tool proactively when you are about to start a non-trivial implementation "
    "task. Planning first, and getting the user's sign-off on the approach before writing "
    "code, prevents wasted effort. Entering plan mode takes effect at once; no permission "
    "prompt is shown. In plan mode you explore and design; you cannot edit files or run "
    "tools that change anything until the plan is approved through ExitPlanMode.\n\n"
    "Use it when any of these apply:\n"
    "1. New feature implementation: adding meaningful new functionality\n"
    "2. Multiple valid approaches: the task can be solved in several different ways\n"
    "3. Code modifications that affect existing behavior or structure\n"
    "4. Architectural decisions: choosing between patterns or technologies\n"
    "5. Multi-file changes: the task will likely touch more than two or three files\n"
    "6. Unclear requirements: you need to explore before understanding the full scope\n"
    "7. User preferences matter: the implementation could reasonably go several ways\n\n"
    "Do not use it for single-line or obvious fixes, small tweaks with clear requirements, "
    "or pure research questions."
)

EXIT_DESCRIPTION = (
    "Use this tool when you are in plan mode and have finished designing your plan: it "
    "presents the plan to the user for approval. Pass the whole plan, in markdown, as the "
    "'plan' argument; the plan is not read from a file. Only use it for implementation "
    "tasks that need code to be written, not for research. If you have open questions, ask "
    "them with AskUserQuestion first; never ask 'is this plan okay?' any other way than by "
    "calling this tool. Optional 'allowedPrompts' describe the kinds of commands the plan "
    "will need (for example {\"tool\": \"Bash\", \"prompt\": \"run the tests\"}); they are "
    "shown to the user but grant nothing."
)


class EnterPlanInput(BaseModel):
    """EnterPlanMode takes nothing; extra fields are ignored."""

    model_config = ConfigDict(extra="ignore", frozen=True)


class AllowedPrompt(BaseModel):
    """A kind of command the plan will need (recorded and echoed, never a grant)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tool: Literal["Bash"]
    prompt: str = Field(min_length=1)


class ExitPlanInput(BaseModel):
    """The plan verbatim, the optional prompts; other fields allowed."""

    model_config = ConfigDict(extra="allow", frozen=True, populate_by_name=True)

    plan: str = Field(min_length=1, max_length=PLAN_MAX, strict=True)
    allowed_prompts: tuple[AllowedPrompt, ...] = Field(default=(), alias="allowedPrompts")

    @field_validator("plan")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("the plan must not be only whitespace")
        return value  # verbatim: never stripped or rewritten


def parse_enter_input(raw: Mapping[str, Any]) -> EnterPlanInput:
    return EnterPlanInput.model_validate(dict(raw))


def parse_exit_input(raw: Mapping[str, Any]) -> ExitPlanInput:
    return ExitPlanInput.model_validate(dict(raw))


def approved_text(plan: str) -> str:
    """PM-7: the exact approval text followed by the plan verbatim."""
    return APPROVED_PREFIX + plan


# -- the handlers (PM-1, PM-6 … PM-9, ES-3) ----------------------------------------------------
#
# EnterPlanMode is allowed without a prompt (PM-1): it returns the execution machine's events
# for switching Plan on (none when Plan is already on, ES-3 — the call still succeeds) with the
# six-step guidance; a goal refuses it (ES-5) as a completed call with ``success: false``.
#
# ExitPlanMode always waits for the user (PM-6). When it starts waiting, ``PlanSubmitted`` is
# recorded with the plan. The answer is decided by :mod:`statemachine.plan_approval`:
#
# * approve (a TUI ``modify`` may edit the plan), in PM-7's literal order: the handler is
#   :class:`~.handlers.DecidesFirst`, so the executor first appends the user's decision
#   (``InteractionResolved``) alone; then :meth:`ExitPlanModeHandler.run` writes the plan file
#   (:mod:`sessionledger.tools.plan_files`) and returns ``PlanApproved`` with the file outcome
#   (after ``PlanFileWriteFailed`` when the write failed) and the state change leaving Plan,
#   appended with the completion in a second batch. A cancelled write raises: no exit is
#   appended and Plan stays on; the approval is abandoned (``PlanApprovalCancelled``) and the
#   plan asked again, at once or — when the service stopped in between — on the session's
#   next access.
# * feedback: ``PlanFeedbackGiven`` plus the feedback as a real user message (source
#   ``plan_approval_feedback``, so it counts toward PM-5) and as ``followUpUserInput`` (PM-8).
# * deny, or a headless host with nobody to ask: ``PlanRejected`` and ``turnControl`` stopping
#   the turn (PM-9). The auto-continue timer never answers a plan approval.

SessionGone = Callable[[str], bool]
"""Whether the session was deleted (or vanished) — a cancellation of the plan file write."""
SessionEvents = Callable[[str], Iterable[RecordedEvent]]
"""The session's log (to put the plan file back as the log says after an abandonment)."""

_STOP = TurnControlData(reason=TURN_STOP_REASON, stop_turn_after_result=True)


class EnterPlanModeHandler:
    """Switches Plan on without a prompt (PM-1)."""

    descriptor: ToolDescriptor = SERVICE_TOOLS["EnterPlanMode"]
    description: str = ENTER_DESCRIPTION

    def model_schema(self) -> dict[str, Any]:
        return EnterPlanInput.model_json_schema()

    def validate_input(self, raw: Mapping[str, Any]) -> None:
        parse_enter_input(raw)

    def validate_answer(self, raw: Mapping[str, Any], *, original: Mapping[str, Any]) -> None:
        parse_enter_input(raw)

    def interaction(self, raw: Mapping[str, Any]) -> tuple[InteractionKind, dict[str, Any]]:
        """Only reached when a workspace rule makes it ask."""
        return "toolApproval", {"tool": "EnterPlanMode", "input": dict(raw)}

    def run(
        self, context: ToolContext, raw: Mapping[str, Any], resolution: Resolution | None
    ) -> HandlerOutcome:
        if resolution is not None and resolution.decision == "deny":
            return HandlerOutcome(
                success=False, model_content="The user declined entering plan mode.",
                result={"declined": True},
            )
        decided = decide_events(
            context.session.execution, SetMode("plan"), via="enter_plan_tool"
        )
        if isinstance(decided, Refusal):
            return HandlerOutcome(success=False, model_content=decided.message)
        _after, events = decided
        return HandlerOutcome(
            success=True, model_content=ENTER_GUIDANCE, result={"planEnabled": True},
            events=tuple(events),
        )


class ExitPlanModeHandler:
    """Submits the plan for the user's approval and carries out their answer."""

    descriptor: ToolDescriptor = SERVICE_TOOLS["ExitPlanMode"]
    description: str = EXIT_DESCRIPTION

    def __init__(
        self, files: PlanFiles | None = None, *, session_gone: SessionGone | None = None,
        session_events: SessionEvents | None = None,
    ) -> None:
        self.files = files if files is not None else PlanFiles()
        self._gone: SessionGone = session_gone if session_gone is not None else _never
        self._events: SessionEvents = session_events if session_events is not None else _none

    def model_schema(self) -> dict[str, Any]:
        return ExitPlanInput.model_json_schema(by_alias=True)

    def validate_input(self, raw: Mapping[str, Any]) -> None:
        parse_exit_input(raw)

    def validate_answer(self, raw: Mapping[str, Any], *, original: Mapping[str, Any]) -> None:
        parse_exit_input(raw)

    def interaction(self, raw: Mapping[str, Any]) -> tuple[InteractionKind, dict[str, Any]]:
        """The protocol host's view (see :meth:`asked` for the host-specific one)."""
        asked = self._view(parse_exit_input(raw), "protocol")
        return asked.kind, asked.payload

    # -- the executor's hooks for an ask (see ToolExecutor._first_step) ---------------------

    def asked(self, context: ToolContext, raw: Mapping[str, Any], host: HostKind) -> Asked:
        """The call waits for the user: the plan is submitted (PM-6). A protocol host shows
        the one-option questionnaire with free-text feedback; the TUI an ordinary approval
        request of the call. Both are plan approvals: never auto-continued."""
        parsed = parse_exit_input(raw)
        view = self._view(parsed, host)
        submitted = PlanSubmitted(
            allowed_prompts=tuple(_prompts(parsed)), call_id=context.call_id, plan=parsed.plan
        )
        return Asked(kind=view.kind, payload=view.payload, events=(submitted,))

    @staticmethod
    def _view(parsed: ExitPlanInput, host: HostKind) -> Asked:
        base: dict[str, Any] = {"plan": parsed.plan, "allowedPrompts": _prompts(parsed)}
        if host == "tui":
            return Asked(kind="planApproval", payload={
                **base, "tool": "ExitPlanMode",
                "input": parsed.model_dump(mode="json", by_alias=True),
            })
        return Asked(kind="planApproval", payload={**base, "questions": [{
            "question": REVIEW_QUESTION, "header": "Plan",
            "options": [{"label": APPROVE_OPTION}], "multiSelect": False, "feedback": True,
        }]})

    def broker_denied(self, context: ToolContext, raw: Mapping[str, Any]) -> HandlerOutcome:
        """A headless host has nobody to ask (PM-9, HO-3): the turn ends, Plan stays."""
        if not context.session.execution.plan_enabled:
            return HandlerOutcome(success=False, model_content="")
        return self._outcome(context, parse_exit_input(raw), "headless", None)

    # -- the executor's hooks for an approval (DecidesFirst, PM-7) ----------------------------

    def decides_first(self, resolution: Resolution) -> bool:
        """An approval is on record before the plan file is written (PM-7)."""
        return next_state(INITIAL, resolution.decision) == "approving"

    def abandoned(
        self, context: ToolContext, raw: Mapping[str, Any], cause: AbandonCause
    ) -> tuple[Event, ...]:
        """The approval will not finish: ``PlanApprovalCancelled``; Plan stays on."""
        outcome = abandon_plan(
            cause, call_id=context.call_id, plan=parse_exit_input(raw).plan,
            mode=context.session.execution.mode,
        )
        assert isinstance(outcome, PlanOutcome) and outcome.event is not None
        return (outcome.event,)

    def undo(self, context: ToolContext, raw: Mapping[str, Any]) -> None:
        """A write renamed in place before the stop: the file says what the log says."""
        session = context.session
        put_back(
            self.files, session.workspace, session.session_id,
            approved=last_approved_plan(self._events(session.session_id)),
            abandoned=parse_exit_input(raw).plan,
        )

    # -- the host's withdrawal (D157) ---------------------------------------------------------

    def withdrawn(self, context: ToolContext, raw: Mapping[str, Any]) -> Withdrawal:
        """The caller cancelled before anyone answered: the plan is not approved and Plan
        stays on (the machine's ``withdraw``; no plan file, no exit, no turn stop)."""
        decided = decide_plan(
            "withdrawn", call_id=context.call_id, plan=parse_exit_input(raw).plan,
            mode=context.session.execution.mode,
        )
        assert isinstance(decided, PlanOutcome) and decided.state == "withdrawn"
        return Withdrawal(result={"approved": False}, note=WITHDRAWN_PLAN)

    # -- the answer -------------------------------------------------------------------------

    def run(
        self, context: ToolContext, raw: Mapping[str, Any], resolution: Resolution | None
    ) -> HandlerOutcome:
        parsed = parse_exit_input(raw)
        if resolution is None:  # only a workspace rule could allow it without the user
            return HandlerOutcome(
                success=False, model_content="ExitPlanMode needs the user's approval."
            )
        return self._outcome(context, parsed, resolution.decision, resolution.feedback)

    def _outcome(
        self, context: ToolContext, parsed: ExitPlanInput, answer: Answer, feedback: str | None
    ) -> HandlerOutcome:
        execution = context.session.execution
        decided = decide_plan(
            answer, call_id=context.call_id, plan=parsed.plan, mode=execution.mode,
            feedback=feedback,
        )
        if isinstance(decided, PlanRefusal):
            return HandlerOutcome(success=False, model_content=NOT_APPROVED,
                                  result={"approved": False})
        if decided.state == "approving":  # the decision is on record (decides_first)
            return self._approve(context, parsed)
        return _not_approved(decided, feedback, plan_on=execution.plan_enabled)

    def _approve(self, context: ToolContext, parsed: ExitPlanInput) -> HandlerOutcome:
        session = context.session
        try:
            written = self.files.write(
                session.workspace, session.session_id, parsed.plan,
                cancelled=lambda: self._gone(session.session_id),
            )
        except PlanWriteCancelled as exc:
            raise ServiceUnavailable(
                "the plan file write was cancelled; Plan stays on and the plan waits for an "
                "answer again"
            ) from exc
        events: list[Event] = []
        if written.error is not None:
            events.append(PlanFileWriteFailed(
                call_id=context.call_id, error=written.error, path=written.path
            ))
        events.append(PlanApproved(
            call_id=context.call_id, file_written=written.written,
            mode=session.execution.mode, path=written.path, plan=parsed.plan,
        ))
        left = decide_events(session.execution, LeavePlan(), via="plan_approval")
        if not isinstance(left, Refusal):
            events.extend(left[1])
        return HandlerOutcome(
            success=True, model_content=approved_text(parsed.plan), events=tuple(events),
            result={"approved": True, "plan": parsed.plan, "filePath": written.path,
                    "fileWritten": written.written, "allowedPrompts": _prompts(parsed)},
        )


def _not_approved(
    decided: PlanOutcome, feedback: str | None, *, plan_on: bool
) -> HandlerOutcome:
    """PM-8 and PM-9; they apply only while Plan is on (left meanwhile by another path, the
    answer is recorded and the call fails, nothing steered or stopped)."""
    assert decided.event is not None
    if not plan_on:
        return HandlerOutcome(success=False, model_content=NOT_APPROVED,
                              result={"approved": False}, events=(decided.event,))
    if decided.state == "feedback":
        assert feedback is not None
        message = MessageRecorded(
            role="user", kind="real", content=feedback, source=FEEDBACK_SOURCE
        )
        return HandlerOutcome(
            success=False, model_content=NOT_APPROVED, result={"approved": False},
            events=(decided.event, message),
            follow_up=FollowUpData(input=feedback, reason_source=FEEDBACK_SOURCE),
        )
    return HandlerOutcome(
        success=False, model_content=NOT_APPROVED, result={"approved": False},
        events=(decided.event,), turn_control=_STOP,
    )


def _prompts(parsed: ExitPlanInput) -> list[dict[str, Any]]:
    return [p.model_dump() for p in parsed.allowed_prompts]


def _never(_session_id: str) -> bool:
    return False


def _none(_session_id: str) -> Iterable[RecordedEvent]:
    return ()
