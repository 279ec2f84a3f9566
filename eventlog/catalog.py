"""The closed catalog of session events: one pydantic discriminated union.

Each event is a frozen model with a past-tense name, a ``type`` literal (the discriminator)
and a class-level ``schema_version``. Payloads are stored as canonical JSON of the model's
fields without ``type`` (the envelope carries it), under camelCase names as on the wire.
Later issues add their types here and to :data:`SessionEvent`. Fields are declared in sorted
order of their wire names where the types allow it, so the Rust serializer's JSON is already
canonical and appends skip the slow path (:mod:`eventlog.encoding`).
"""

from __future__ import annotations

from functools import partial
from operator import is_, not_
from typing import Annotated, Any, ClassVar, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, model_validator
from pydantic.alias_generators import to_camel

__all__ = [
    "CATALOG",
    "Event",
    "ExecutionStateData",
    "FollowUpData",
    "GoalData",
    "GoalEnded",
    "GoalStarted",
    "HostKind",
    "AutoResolutionReason",
    "AutoResolutionState",
    "InteractionAutoResolutionChanged",
    "InteractionKind",
    "InteractionRequested",
    "InteractionResolved",
    "InteractionUserActivity",
    "SettingChanged",
    "SettingName",
    "UserActivityAction",
    "MessageRecorded",
    "ModeChangeVia",
    "PermissionDecided",
    "PermissionMode",
    "PermissionVerdict",
    "PlanApprovalCancelCause",
    "PlanApprovalCancelled",
    "PlanApproved",
    "PlanFeedbackGiven",
    "PlanFileWriteFailed",
    "PlanRejected",
    "PlanSubmitted",
    "SessionCreated",
    "SessionDeleted",
    "SessionEvent",
    "SessionModeChanged",
    "ToolCallCompleted",
    "ContextCompacted",
    "CronScheduleCreated",
    "CronScheduleDeleted",
    "CronScheduleUpdated",
    "OffPeakPromptCreated",
    "SessionModelSelected",
    "AnswerIn",
    "AnswerInChanged",
    "ReminderInjected",
    "ReminderKind",
    "TodoItemData",
    "TodoPriority",
    "TodoStatus",
    "TodosWritten",
    "ToolCallRequested",
    "TurnControlData",
    "event_adapter",
    "legacy_execution_state",
    "read_execution_state",
]

PermissionMode = Literal["build", "edit", "yolo", "auto"]
HostKind = Literal["protocol", "tui", "headless"]


Optional: Any = Field(default=None, exclude_if=partial(is_, None))
"""A field left out of the stored payload when unset, so events that never carry it are
stored exactly as before it existed."""
Occurred: Any = Field(default=None, exclude_if=partial(is_, None))
"""``occurredAt``: when the host says it happened (an imported transcript's own time, CC-9);
absent when it happened as it was recorded."""


class _Payload(BaseModel):
    model_config = ConfigDict(
        frozen=True, extra="forbid", alias_generator=to_camel, populate_by_name=True
    )


class Event(_Payload):
    """Base of every catalog event; subclasses set ``type`` and ``schema_version``."""

    schema_version: ClassVar[int] = 1
    type: str


class GoalData(_Payload):
    """An active goal: the objective the agent pursues on its own."""

    objective: str = Field(min_length=1)


class ExecutionStateData(_Payload):
    """Permission mode, the Plan switch and the goal, as recorded (ES-1).

    The model is strict so reading stays fast; the legacy form ``{"mode": "plan"}`` (``build``
    with Plan on, ES-2) is accepted by :func:`read_execution_state` and, for stored
    events, by the legacy reader registered in :mod:`eventlog.upcasting`. ``plan`` is never
    held, so never written, as a permission mode.
    """

    goal: GoalData | None = None
    mode: PermissionMode = "build"
    plan_enabled: bool = False

    @model_validator(mode="after")
    def _plan_and_goal_exclusive(self) -> ExecutionStateData:
        if self.plan_enabled and self.goal is not None:
            raise ValueError("Plan and Goal cannot be active at the same time.")
        return self


def legacy_execution_state(raw: Any) -> Any:
    """Rewrite a legacy ``{"mode": "plan"}`` state as ``build`` with Plan on (ES-2)."""
    if isinstance(raw, dict) and raw.get("mode") == "plan":
        rest = {k: v for k, v in raw.items() if k not in ("plan_enabled", "planEnabled")}
        return {**rest, "mode": "build", "planEnabled": True}
    return raw


def read_execution_state(raw: Any) -> ExecutionStateData:
    """An execution state from input that may use the legacy ``plan`` mode (ES-2)."""
    return ExecutionStateData.model_validate(legacy_execution_state(raw))


class SessionCreated(Event):
    """A session began, with its workspace, host and initial execution state."""

    schema_version: ClassVar[int] = 1
    type: Literal["SessionCreated"] = "SessionCreated"
    client: str | None = Optional
    """The host program that created the session, when it says (``claude-code``: CC-2)."""
    execution_state: ExecutionStateData = ExecutionStateData()
    external_session_id: str | None = Optional
    """The session id of that program (Claude Code's ``session_id``: CC-2)."""
    host: HostKind = "protocol"
    occurred_at: str | None = Occurred
    parent_session_id: str | None = None
    workspace: str


ModeChangeVia = Literal[
    "cycle", "mode_command", "plan_command", "enter_plan_tool", "plan_approval", "claude-code",
    "codex",
]
"""Which path changed the mode: Shift+Tab, ``/mode X``, ``/plan``, EnterPlanMode, approval,
or the host's own ``permission_mode`` mirrored by its hooks or an import (Claude Code: CC-3;
Codex CLI)."""


class SessionModeChanged(Event):
    """The permission mode or the Plan switch changed (never both unchanged)."""

    schema_version: ClassVar[int] = 1
    type: Literal["SessionModeChanged"] = "SessionModeChanged"
    host_mode: str | None = Optional
    """The host's own name for the mode when it has none here (CC-3), as given."""
    mode: PermissionMode
    occurred_at: str | None = Occurred
    plan_enabled: bool
    previous_mode: PermissionMode
    previous_plan_enabled: bool
    via: ModeChangeVia


class GoalStarted(Event):
    """The agent began pursuing an objective on its own."""

    schema_version: ClassVar[int] = 1
    type: Literal["GoalStarted"] = "GoalStarted"
    objective: str = Field(min_length=1)


class GoalEnded(Event):
    """The active goal ended."""

    schema_version: ClassVar[int] = 1
    type: Literal["GoalEnded"] = "GoalEnded"
    objective: str


class MessageRecorded(Event):
    """A message of the conversation, as the runtime saw it (e.g. the ``/plan`` task)."""

    schema_version: ClassVar[int] = 1
    type: Literal["MessageRecorded"] = "MessageRecorded"
    content: str
    continuation: bool = False
    kind: Literal["real", "synthetic"] = "real"
    occurred_at: str | None = Occurred
    role: Literal["assistant", "user"]
    source: str | None = None


TodoStatus = Literal["pending", "in_progress", "completed"]
TodoPriority = Literal["high", "medium", "low"]


class TodoItemData(_Payload):
    """One todo: what, how far along, how important (TD-1). ``id`` only where the host
    names its items (Claude Code's task ids); TodoWrite's items have none."""

    content: str = Field(min_length=1)
    id: str | None = Optional
    """The host's own id of the item (Claude Code's ``taskId``), as given."""
    priority: TodoPriority
    status: TodoStatus


class TodosWritten(Event):
    """The session's whole todo list was replaced by ``todos`` (TD-3)."""

    schema_version: ClassVar[int] = 1
    type: Literal["TodosWritten"] = "TodosWritten"
    dropped_unfinished: tuple[TodoItemData, ...] = Field(default=(), exclude_if=not_)
    """Unfinished items of the list before that this write left out (TD-3, CC-5)."""
    occurred_at: str | None = Occurred
    todos: tuple[TodoItemData, ...]


ReminderKind = Literal["todo_reminder", "runtime_mode", "plan_exit", "plan_file_reference"]


class ReminderInjected(Event):
    """The runtime put a reminder into a model request (TD-5, PM-5, PM-10)."""

    schema_version: ClassVar[int] = 1
    type: Literal["ReminderInjected"] = "ReminderInjected"
    kind: ReminderKind
    text: str
    variant: Literal["full", "sparse"] | None = None


class ContextCompacted(Event):
    """The conversation's context was compacted; the plan file is read back next (PM-10)."""

    schema_version: ClassVar[int] = 1
    type: Literal["ContextCompacted"] = "ContextCompacted"
    occurred_at: str | None = Occurred


class SessionDeleted(Event):
    """The session was deleted: its routes answer 410; its events stay until purged."""

    schema_version: ClassVar[int] = 1
    type: Literal["SessionDeleted"] = "SessionDeleted"


class PermissionVerdict(_Payload):
    """A permission decision: allow, ask or deny, why, and the rule that decided."""

    behavior: Literal["allow", "ask", "deny"]
    reason: str
    rule_id: str


class ToolCallRequested(Event):
    """The model (or a host) asked to run a tool with this input."""

    schema_version: ClassVar[int] = 1
    type: Literal["ToolCallRequested"] = "ToolCallRequested"
    call_id: str
    tool: str
    input: dict[str, Any]
    host: HostKind
    occurred_at: str | None = Occurred


class PermissionDecided(Event):
    """The permission service (or a broker) decided on a call; ``callId`` ties it to it."""

    schema_version: ClassVar[int] = 1
    type: Literal["PermissionDecided"] = "PermissionDecided"
    call_id: str
    decided_by: Literal["service", "broker"] = "service"
    decision: PermissionVerdict
    occurred_at: str | None = Occurred
    tool: str


InteractionKind = Literal["askUserQuestion", "planApproval", "toolApproval"]


class InteractionRequested(Event):
    """A call waits for the user; the interaction joins the session's FIFO queue."""

    schema_version: ClassVar[int] = 1
    type: Literal["InteractionRequested"] = "InteractionRequested"
    interaction_id: str
    call_id: str
    kind: InteractionKind
    payload: dict[str, Any]
    occurred_at: str | None = Occurred


class InteractionResolved(Event):
    """The user (or the auto-continue timer) answered an interaction, or the host withdrew
    it (``withdrawn``: its caller cancelled the request; nobody answered)."""

    schema_version: ClassVar[int] = 1
    type: Literal["InteractionResolved"] = "InteractionResolved"
    interaction_id: str
    call_id: str
    decision: Literal["modify", "approve", "deny", "feedback", "autoContinued", "withdrawn"]
    input: dict[str, Any] | None = None
    feedback: str | None = None
    occurred_at: str | None = Occurred


AutoResolutionState = Literal["hiddenGrace", "countdown", "paused", "ineligible"]
"""A question's auto-continue timer as recorded (HO-4 … HO-7); the resolution itself is
``InteractionResolved`` (``autoContinued`` when the timer answered)."""
AutoResolutionReason = Literal["settingOff", "settingTurnedOff", "userActivity"]
"""Why a timer was paused or a question made ineligible: the setting was off when it was
registered, was turned off later (HO-6), or the user engaged with it (HO-5)."""


class InteractionAutoResolutionChanged(Event):
    """A question's auto-continue timer changed state, with its absolute times (HO-7).

    ``startedAt``/``visibleAt``/``deadlineAt`` are set from the start on and kept through
    ``countdown`` and ``paused``; ``effectiveAt`` is the instant the change took effect
    (``visibleAt`` for the countdown, the setting change for a pause it caused), which may be
    earlier than the envelope's ``recorded_at`` when the service was down.
    """

    schema_version: ClassVar[int] = 1
    type: Literal["InteractionAutoResolutionChanged"] = "InteractionAutoResolutionChanged"
    deadline_at: str | None = None
    effective_at: str
    interaction_id: str
    reason: AutoResolutionReason | None = None
    started_at: str | None = None
    state: AutoResolutionState
    visible_at: str | None = None


UserActivityAction = Literal["move", "select", "type", "other"]


class InteractionUserActivity(Event):
    """The user engaged with a pending question (moved, selected, typed; HO-5)."""

    schema_version: ClassVar[int] = 1
    type: Literal["InteractionUserActivity"] = "InteractionUserActivity"
    action: UserActivityAction = "other"
    interaction_id: str


SettingName = Literal["autoContinueQuestions"]


class SettingChanged(Event):
    """A service-wide setting changed (HO-6); recorded in the reserved settings stream."""

    schema_version: ClassVar[int] = 1
    type: Literal["SettingChanged"] = "SettingChanged"
    name: SettingName
    previous: bool
    value: bool


class TurnControlData(_Payload):
    """Tells the host to end the turn after this result."""

    reason: str
    stop_turn_after_result: bool = True


class FollowUpData(_Payload):
    """User input to steer into the turn after this result."""

    input: str
    reason_source: str


class ToolCallCompleted(Event):
    """A call finished: completed (ran, or answered by the user), denied, or cancelled (its
    interaction was withdrawn because the caller cancelled the request; ``success`` false)."""

    schema_version: ClassVar[int] = 1
    type: Literal["ToolCallCompleted"] = "ToolCallCompleted"
    call_id: str
    tool: str
    status: Literal["completed", "denied", "cancelled"]
    success: bool
    result: dict[str, Any] = Field(default_factory=dict)
    model_content: str
    permission: PermissionVerdict | None = None
    turn_control: TurnControlData | None = None
    follow_up_user_input: FollowUpData | None = None
    occurred_at: str | None = Occurred


class SessionModelSelected(Event):
    """The user chose the session's model: a catalog id ``providerId/modelId`` and the
    reasoning level it runs at (LM-1 ``[current]``, LM-2's session provider)."""

    schema_version: ClassVar[int] = 1
    type: Literal["SessionModelSelected"] = "SessionModelSelected"
    level: str | None = None
    model: str = Field(min_length=1)


AnswerIn = Literal["host", "here"]


class AnswerInChanged(Event):
    """Where the person answers the questions and plan approvals of a session another program
    runs (issue 39): ``host`` in that program's own dialog, ``here`` on this service's pages,
    while the program's hook waits for the answer."""

    schema_version: ClassVar[int] = 1
    type: Literal["AnswerInChanged"] = "AnswerInChanged"
    answer_in: AnswerIn
    previous: AnswerIn


class CronScheduleCreated(Event):
    """A cron schedule was recorded for the session (TR-5); the host runs its prompt."""

    schema_version: ClassVar[int] = 1
    type: Literal["CronScheduleCreated"] = "CronScheduleCreated"
    cron: str = Field(min_length=1)
    prompt: str = Field(min_length=1)
    recurring: bool = True
    schedule_id: str


class CronScheduleUpdated(Event):
    """A cron schedule's expression, prompt or enabled flag changed (unset: unchanged)."""

    schema_version: ClassVar[int] = 1
    type: Literal["CronScheduleUpdated"] = "CronScheduleUpdated"
    cron: str | None = None
    enabled: bool | None = None
    prompt: str | None = None
    schedule_id: str


class CronScheduleDeleted(Event):
    """A cron schedule was removed; it is never due again."""

    schema_version: ClassVar[int] = 1
    type: Literal["CronScheduleDeleted"] = "CronScheduleDeleted"
    schedule_id: str


class OffPeakPromptCreated(Event):
    """A prompt was queued for the host's next off-peak window (TR-5): due from
    ``dueAt`` (the window's start, or the creation time inside a window) to ``windowEndAt``."""

    schema_version: ClassVar[int] = 1
    type: Literal["OffPeakPromptCreated"] = "OffPeakPromptCreated"
    due_at: str
    off_peak_id: str
    prompt: str = Field(min_length=1)
    window_end_at: str



PlanApprovalCancelCause = Literal["cancelled", "interrupted"]


class PlanSubmitted(Event):
    """ExitPlanMode waits for the user with this plan (PM-6); ``allowedPrompts`` are echoed
    only and grant nothing."""

    schema_version: ClassVar[int] = 1
    type: Literal["PlanSubmitted"] = "PlanSubmitted"
    allowed_prompts: tuple[dict[str, Any], ...] = ()
    call_id: str
    occurred_at: str | None = Occurred
    plan: str


class PlanApproved(Event):
    """The user approved the plan (PM-7); ``fileWritten`` says whether the plan file at
    ``path`` (relative to the workspace) was written; the exit from Plan is in this batch."""

    schema_version: ClassVar[int] = 1
    type: Literal["PlanApproved"] = "PlanApproved"
    call_id: str
    file_written: bool
    mode: PermissionMode
    occurred_at: str | None = Occurred
    path: str
    plan: str


class PlanApprovalCancelled(Event):
    """An approval on record was not carried out (PM-7): its plan file write was cancelled
    (``cancelled``), or a later access found it decided and never finished because the
    service stopped in between (``interrupted``). No exit from Plan was appended; the plan
    is asked again in this batch, so the user may answer it anew."""

    schema_version: ClassVar[int] = 1
    type: Literal["PlanApprovalCancelled"] = "PlanApprovalCancelled"
    call_id: str
    cause: PlanApprovalCancelCause
    mode: PermissionMode
    plan: str


class PlanFileWriteFailed(Event):
    """Writing the approved plan's file failed (not a cancellation); Plan was left anyway."""

    schema_version: ClassVar[int] = 1
    type: Literal["PlanFileWriteFailed"] = "PlanFileWriteFailed"
    call_id: str
    error: str
    path: str


class PlanFeedbackGiven(Event):
    """The user answered the plan with feedback (PM-8): Plan stays on."""

    schema_version: ClassVar[int] = 1
    type: Literal["PlanFeedbackGiven"] = "PlanFeedbackGiven"
    call_id: str
    feedback: str
    mode: PermissionMode
    occurred_at: str | None = Occurred
    plan: str


class PlanRejected(Event):
    """The plan was rejected by the user or by a headless host (PM-9): the turn ends."""

    schema_version: ClassVar[int] = 1
    type: Literal["PlanRejected"] = "PlanRejected"
    by: Literal["user", "headless"]
    call_id: str
    mode: PermissionMode
    occurred_at: str | None = Occurred
    plan: str


SessionEvent = Annotated[
    SessionCreated | SessionModeChanged | GoalStarted | GoalEnded | MessageRecorded
    | SessionDeleted | ToolCallRequested | PermissionDecided | InteractionRequested
    | InteractionResolved | ToolCallCompleted | TodosWritten | ReminderInjected
    | ContextCompacted | InteractionAutoResolutionChanged | InteractionUserActivity
    | SettingChanged | SessionModelSelected | CronScheduleCreated | CronScheduleUpdated
    | CronScheduleDeleted | OffPeakPromptCreated | PlanSubmitted | PlanApproved
    | PlanApprovalCancelled | PlanFileWriteFailed | PlanFeedbackGiven | PlanRejected
    | AnswerInChanged,
    Field(discriminator="type"),
]

event_adapter: TypeAdapter[SessionEvent] = TypeAdapter(SessionEvent)

CATALOG: dict[str, type[Event]] = {
    cls.model_fields["type"].default: cls for cls in get_args(get_args(SessionEvent)[0])
}
"""Each event class of the union by its ``type``, in the union's order."""
