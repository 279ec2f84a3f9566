"""The cron and off-peak tools, whole: their ports, their contract, their handlers (TR-1, TR-5).

When a scheduled prompt is due (:class:`CronPort`, :class:`CroniterCron`, :class:`OffPeakPort`,
:class:`WindowOffPeak`, :class:`OffPeakPorts`), what the model may write (the six tools'
:data:`SCHEDULE_TOOLS`, :data:`DESCRIPTIONS` and strict inputs, :func:`parse`), and the
handlers (:func:`schedule_handlers` over :class:`ScheduleTools`) that record each change as one
event. The service records schedules and answers next-due times; it never runs a prompt.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import UTC, datetime, time, timedelta
from pathlib import Path
from typing import Annotated, Any, Protocol, cast
from zoneinfo import ZoneInfo

from croniter import CroniterBadDateError, croniter  # type: ignore[import-untyped]
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictStr,
    ValidationInfo,
    field_validator,
    model_validator,
)

from eventlog import (
    Clock,
    CronScheduleCreated,
    CronScheduleDeleted,
    CronScheduleUpdated,
    Event,
    InteractionKind,
    OffPeakPromptCreated,
    format_instant,
    new_id,
    parse_instant,
)
from projections.tables import Doc

from ..config.workspace import OffPeakConfig, WorkspaceConfig
from ..permission.descriptors import ToolDescriptor
from .handlers import HandlerOutcome, Resolution, ToolContext

__all__ = [
    "CRON_FIELDS",
    "DESCRIPTIONS",
    "MAX_PROMPT",
    "SCHEDULE_TOOLS",
    "CronCreateInput",
    "CronDeleteInput",
    "CronListInput",
    "CronPort",
    "CronUpdateInput",
    "CroniterCron",
    "InvalidCronExpression",
    "OffPeakCreateInput",
    "OffPeakListInput",
    "OffPeakPort",
    "OffPeakPorts",
    "RecordsReader",
    "ScheduleTools",
    "WindowOffPeak",
    "cron_wire",
    "parse",
    "schedule_handlers",
    "schema_of",
]


# -- the ports: when a scheduled prompt is due (TR-1, TR-5) ----------------------------------
#
# The service records schedules as events and answers "next due" times; it never runs a
# prompt — running them is the host's job (docs/tools.md). Two ports:
#
# * CronPort validates a five-field cron expression (minute, hour, day of month, month, day of
#   week; evaluated in UTC) and computes the next instant it matches after a given one.
#   CroniterCron is the local implementation over the maintained ``croniter`` parser
#   (docs/decisions.md D53). Six-field (seconds) forms, ``@daily``-style nicknames and
#   expressions that can never match (``0 0 31 2 *``) are refused.
# * OffPeakPort answers the next off-peak window at or after an instant. WindowOffPeak
#   computes it from the host's daily windows in its time zone; OffPeakPorts opens one per
#   workspace from its ``[offPeak]`` table, or none.

CRON_FIELDS = ("minute", "hour", "day of month", "month", "day of week")


class InvalidCronExpression(ValueError):
    """A cron expression the port refuses; the message says why."""


class CronPort(Protocol):
    """Validates cron expressions and says when they are next due."""

    def validate(self, expression: str) -> str:
        """The expression normalised (fields single-spaced); raises
        :class:`InvalidCronExpression`."""

    def next_due(self, expression: str, after: datetime) -> datetime:
        """The first instant after ``after`` the (valid) expression matches, in UTC."""


class CroniterCron:
    """Five-field cron expressions in UTC, parsed and iterated by ``croniter``."""

    def validate(self, expression: str) -> str:
        fields = expression.split()
        if len(fields) != len(CRON_FIELDS):
            raise InvalidCronExpression(
                f"{expression!r} has {len(fields)} field(s); a cron expression has five: "
                f"{', '.join(CRON_FIELDS)} (e.g. '*/15 9-17 * * 1-5')"
            )
        normal = " ".join(fields)
        if not croniter.is_valid(normal):
            raise InvalidCronExpression(
                f"{expression!r} is not a valid cron expression (fields: "
                f"{', '.join(CRON_FIELDS)}; values, ranges a-b, lists a,b, steps */n)"
            )
        try:
            self.next_due(normal, datetime(2000, 1, 1, tzinfo=UTC))
        except CroniterBadDateError:
            raise InvalidCronExpression(f"{expression!r} never matches a date") from None
        return normal

    def next_due(self, expression: str, after: datetime) -> datetime:
        found: Any = croniter(expression, after.astimezone(UTC)).get_next(datetime)
        return cast(datetime, found).astimezone(UTC)


class OffPeakPort(Protocol):
    """The host's off-peak windows."""

    def next_window(self, at: datetime) -> tuple[datetime, datetime]:
        """``(due, end)`` of the window ``at`` falls in (``due`` is ``at`` itself) or else of
        the next one to start; both in UTC."""


class WindowOffPeak:
    """Daily windows ``(start, end)`` in a time zone; an end before the start wraps midnight."""

    def __init__(self, spans: list[tuple[time, time]], timezone: str = "UTC") -> None:
        if not spans:
            raise ValueError("an off-peak port needs at least one window")
        self._spans = spans
        self._zone = ZoneInfo(timezone)

    @classmethod
    def from_config(cls, config: OffPeakConfig) -> WindowOffPeak:
        return cls(config.spans(), config.timezone)

    def next_window(self, at: datetime) -> tuple[datetime, datetime]:
        at = at.astimezone(UTC)
        today = at.astimezone(self._zone).date()
        best: tuple[datetime, datetime] | None = None
        for offset in (-1, 0, 1, 2):
            day = today + timedelta(days=offset)
            for start_time, end_time in self._spans:
                start = datetime.combine(day, start_time, tzinfo=self._zone)
                end_day = day if end_time > start_time else day + timedelta(days=1)
                end = datetime.combine(end_day, end_time, tzinfo=self._zone)
                if end <= at:
                    continue
                window = (max(start, at).astimezone(UTC), end.astimezone(UTC))
                if best is None or window < best:
                    best = window
        assert best is not None  # a daily window always starts within two days
        return best


class OffPeakPorts:
    """Opens the off-peak port of a workspace: its ``[offPeak]`` windows, or none."""

    def __init__(self, config: Callable[[Path], WorkspaceConfig]) -> None:
        self._config = config

    def port(self, workspace: Path) -> OffPeakPort | None:
        off_peak = self._config(workspace).off_peak
        return None if off_peak is None else WindowOffPeak.from_config(off_peak)


# -- the contract: descriptors, input schemas, texts (TR-5) -----------------------------------
#
# Inputs are strict (no coercion, unknown fields refused):
#
# * ``CronCreate {"cron": five-field expression, "prompt": str, "recurring": bool = true}``;
# * ``CronList {}``; ``CronUpdate {"id", "cron"?, "prompt"?, "enabled"?}`` (at least one
#   change); ``CronDelete {"id"}``;
# * ``OffPeakCreate {"prompt": str}``; ``OffPeakList {}``.
#
# A cron expression is checked by the cron port while the input is validated (the port comes
# in the validation context), so a bad expression is a 422 naming ``cron`` and appends nothing.
#
# The tools that record something are not read-only (scope ``session``): a scheduled prompt
# acts later without the user at the keyboard, so ``build`` and ``edit`` ask first, Plan
# denies, ``auto`` and ``yolo`` allow; the two list tools are read-only (docs/decisions.md D54).

MAX_PROMPT = 20000
"""The longest prompt a schedule keeps (characters)."""



def _records(name: str) -> ToolDescriptor:
    return ToolDescriptor(
        name=name, kind="service", read_only=False, side_effect_scope="session",
        needs_approval=True,
    )


SCHEDULE_TOOLS: dict[str, ToolDescriptor] = {
    d.name: d
    for d in (
        _records("CronCreate"),
        ToolDescriptor(name="CronList", kind="service", read_only=True),
        _records("CronUpdate"),
        _records("CronDelete"),
        _records("OffPeakCreate"),
        ToolDescriptor(name="OffPeakList", kind="service", read_only=True),
    )
}
"""The flags of the cron and off-peak tools (TR-5; not in the TR-2 table)."""

_HOST_RUNS = (
    " This service only records the schedule and answers when it is next due; the host runs "
    "the prompt as a new turn of this session when it is due."
)
DESCRIPTIONS: dict[str, str] = {
    "CronCreate": (
        "Schedule a prompt on a five-field cron expression (minute hour day-of-month month "
        "day-of-week, in UTC), e.g. '0 9 * * 1-5' for 09:00 UTC on weekdays. `recurring` "
        "(default true) repeats it; false runs it once, at the first match." + _HOST_RUNS
    ),
    "CronList": "List this session's cron schedules with their next due times (UTC).",
    "CronUpdate": (
        "Change a cron schedule by `id`: a new `cron` expression, a new `prompt`, or "
        "`enabled` false to pause it and true to resume it. Give at least one change."
    ),
    "CronDelete": "Delete a cron schedule by `id`; it is never due again.",
    "OffPeakCreate": (
        "Queue a prompt for the host's next off-peak window (cheaper, less busy hours), for "
        "work that need not run now." + _HOST_RUNS
    ),
    "OffPeakList": "List this session's off-peak prompts with the window each is due in.",
}

Prompt = Annotated[StrictStr, Field(min_length=1, max_length=MAX_PROMPT)]
ScheduleId = Annotated[StrictStr, Field(min_length=1, max_length=200)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    @field_validator("prompt", check_fields=False)
    @classmethod
    def _not_blank(cls, prompt: str | None) -> str | None:
        if prompt is not None and not prompt.strip():
            raise ValueError("prompt must not be blank")
        return prompt


def _cron(expression: str | None, info: ValidationInfo) -> str | None:
    """The expression as the cron port normalises it (the port is the validation context)."""
    port: CronPort | None = (info.context or {}).get("cron")
    if expression is None or port is None:
        return expression
    try:
        return port.validate(expression)
    except InvalidCronExpression as exc:
        raise ValueError(str(exc)) from None


class CronCreateInput(_Strict):
    """CronCreate's input."""

    cron: StrictStr = Field(
        min_length=1, max_length=200, description="Five-field cron expression, in UTC."
    )
    prompt: Prompt = Field(description="The prompt the host runs when the schedule is due.")
    recurring: StrictBool = Field(
        default=True, description="false: run once, at the first match."
    )

    @field_validator("cron")
    @classmethod
    def _check_cron(cls, expression: str, info: ValidationInfo) -> str | None:
        return _cron(expression, info)


class CronListInput(_Strict):
    """CronList's input: nothing."""


class CronUpdateInput(_Strict):
    """CronUpdate's input: the schedule and at least one change."""

    id: ScheduleId = Field(description="The schedule's id, as CronCreate or CronList gave it.")
    cron: StrictStr | None = Field(default=None, min_length=1, max_length=200)
    prompt: Prompt | None = None
    enabled: StrictBool | None = None

    @field_validator("cron")
    @classmethod
    def _check_cron(cls, expression: str | None, info: ValidationInfo) -> str | None:
        return _cron(expression, info)

    @model_validator(mode="after")
    def _some_change(self) -> CronUpdateInput:
        if self.cron is None and self.prompt is None and self.enabled is None:
            raise ValueError("give at least one of cron, prompt, enabled")
        return self


class CronDeleteInput(_Strict):
    """CronDelete's input."""

    id: ScheduleId = Field(description="The schedule's id.")


class OffPeakCreateInput(_Strict):
    """OffPeakCreate's input."""

    prompt: Prompt = Field(description="The prompt the host runs in its next off-peak window.")


class OffPeakListInput(_Strict):
    """OffPeakList's input: nothing."""


INPUTS: dict[str, type[_Strict]] = {
    "CronCreate": CronCreateInput, "CronList": CronListInput, "CronUpdate": CronUpdateInput,
    "CronDelete": CronDeleteInput, "OffPeakCreate": OffPeakCreateInput,
    "OffPeakList": OffPeakListInput,
}


def parse(tool: str, raw: Mapping[str, Any], cron: CronPort | None = None) -> Any:
    """Validate ``tool``'s input; raises ``pydantic.ValidationError``."""
    return INPUTS[tool].model_validate(dict(raw), context={"cron": cron})


def schema_of(tool: str) -> dict[str, Any]:
    """The JSON schema ``tool`` gives the model: pydantic's, without titles and docstrings."""
    schema = INPUTS[tool].model_json_schema()
    properties = {
        name: {k: v for k, v in prop.items() if k != "title"}
        for name, prop in schema.get("properties", {}).items()
    }
    return {**{k: v for k, v in schema.items() if k not in ("title", "description")},
            "properties": properties}


# -- the handlers (TR-1, TR-5) -----------------------------------------------------------------
#
# Each handler records what it changes as one event in the call's batch — a
# ``CronScheduleCreated`` / ``Updated`` / ``Deleted`` or an ``OffPeakPromptCreated`` — and the
# tool-records projection keeps the session's schedules inline. Reads (the lists, and the
# schedule an update or delete names) come from that projection, loaded after the session's
# version, so a concurrent change makes the append conflict and the executor runs the call
# again on fresh records.
#
# Next-due times come from the ports: the cron port for a schedule (a recurring one's next
# match after now; a one-off's first match after it was last changed; a paused one has none),
# the off-peak port for a queued prompt (fixed when queued: the window it falls in or the next
# one). Nothing here runs a prompt: the host does, when due.

RecordsReader = Callable[[str, str], list[Doc]]
"""``records(session_id, status)`` — the session's record documents of a status, in order."""


class ScheduleTools:
    """What the schedule handlers share: the ports, the clock and the records."""

    def __init__(
        self, *, cron: CronPort, off_peak: OffPeakPorts, clock: Clock, records: RecordsReader
    ) -> None:
        self.cron = cron
        self.off_peak = off_peak
        self.clock = clock
        self.records = records

    def next_due(self, body: Mapping[str, Any]) -> str | None:
        """When a schedule document is next due, rendered; ``None`` while paused."""
        if not body["enabled"]:
            return None
        after = self.clock.now() if body["recurring"] else parse_instant(body["updatedAt"])
        return format_instant(self.cron.next_due(body["cron"], after))

    def live(self, session_id: str, schedule_id: str) -> Doc | None:
        return next((d for d in self.records(session_id, "cron")
                     if d.body["id"] == schedule_id), None)


def cron_wire(body: Mapping[str, Any], next_due: str | None) -> dict[str, Any]:
    """A schedule as the cron tools answer it."""
    return {"id": body["id"], "cron": body["cron"], "prompt": body["prompt"],
            "recurring": body["recurring"], "enabled": body["enabled"],
            "createdAt": body["createdAt"], "nextDueAt": next_due}


def _line(item: Mapping[str, Any]) -> str:
    prompt = " ".join(item["prompt"].split())
    if len(prompt) > 80:
        prompt = prompt[:79] + "…"
    kind = "recurring" if item["recurring"] else "once"
    due = f"next due {item['nextDueAt']}" if item["nextDueAt"] else "paused"
    return f"- {item['id']} '{item['cron']}' ({kind}, {due}): {prompt}"


def _failed(code: str, message: str) -> HandlerOutcome:
    return HandlerOutcome(success=False, model_content=message,
                          result={"error": {"code": code, "message": message}})


class _ScheduleHandler:
    """The contract half every schedule tool shares; subclasses implement :meth:`_run`."""

    name = ""

    def __init__(self, tools: ScheduleTools) -> None:
        self._tools = tools
        self.descriptor = SCHEDULE_TOOLS[self.name]
        self.description = DESCRIPTIONS[self.name]

    def model_schema(self) -> dict[str, Any]:
        return schema_of(self.name)

    def validate_input(self, raw: Mapping[str, Any]) -> None:
        parse(self.name, raw, self._tools.cron)

    def validate_answer(self, raw: Mapping[str, Any], *, original: Mapping[str, Any]) -> None:
        parse(self.name, raw, self._tools.cron)

    def interaction(self, raw: Mapping[str, Any]) -> tuple[InteractionKind, dict[str, Any]]:
        """Shown when the mode asks before recording a schedule: the tool and its input."""
        return "toolApproval", {"tool": self.name, "input": dict(raw)}

    def run(
        self, context: ToolContext, raw: Mapping[str, Any], resolution: Resolution | None
    ) -> HandlerOutcome:
        if resolution is not None and resolution.decision == "deny":
            return HandlerOutcome(success=False, model_content=f"The user declined {self.name}.",
                                  result={"declined": True})
        return self._run(context, parse(self.name, raw, self._tools.cron))

    def _run(self, context: ToolContext, request: Any) -> HandlerOutcome:
        raise NotImplementedError


class CronCreateHandler(_ScheduleHandler):
    name = "CronCreate"

    def _run(self, context: ToolContext, request: Any) -> HandlerOutcome:
        schedule_id = new_id("cron")
        event = CronScheduleCreated(cron=request.cron, prompt=request.prompt,
                                    recurring=request.recurring, schedule_id=schedule_id)
        now = format_instant(self._tools.clock.now())
        body = {"id": schedule_id, "cron": request.cron, "prompt": request.prompt,
                "recurring": request.recurring, "enabled": True, "createdAt": now,
                "updatedAt": now}
        item = cron_wire(body, self._tools.next_due(body))
        kind = "recurring" if request.recurring else "once"
        text = (f"Scheduled {schedule_id} on '{request.cron}' (UTC, {kind}); next due "
                f"{item['nextDueAt']}. The host runs the prompt when it is due.")
        return HandlerOutcome(success=True, model_content=text, result=item, events=(event,))


class CronListHandler(_ScheduleHandler):
    name = "CronList"

    def _run(self, context: ToolContext, request: Any) -> HandlerOutcome:
        docs = self._tools.records(context.session.session_id, "cron")
        items = [cron_wire(d.body, self._tools.next_due(d.body)) for d in docs]
        text = ("Cron schedules of this session (times in UTC):\n"
                + "\n".join(_line(i) for i in items)) if items else "No cron schedules."
        return HandlerOutcome(success=True, model_content=text, result={"schedules": items})


class CronUpdateHandler(_ScheduleHandler):
    name = "CronUpdate"

    def _run(self, context: ToolContext, request: Any) -> HandlerOutcome:
        doc = self._tools.live(context.session.session_id, request.id)
        if doc is None:
            return _failed("cron_not_found", f"No cron schedule {request.id!r} in this session; "
                           "CronList shows the ids.")
        event = CronScheduleUpdated(cron=request.cron, enabled=request.enabled,
                                    prompt=request.prompt, schedule_id=request.id)
        changes = {"cron": request.cron, "prompt": request.prompt, "enabled": request.enabled}
        body = {**doc.body, **{k: v for k, v in changes.items() if v is not None},
                "updatedAt": format_instant(self._tools.clock.now())}
        item = cron_wire(body, self._tools.next_due(body))
        due = f"next due {item['nextDueAt']}" if item["nextDueAt"] else "paused"
        return HandlerOutcome(success=True, model_content=f"Updated {request.id} ({due}).",
                              result=item, events=(event,))


class CronDeleteHandler(_ScheduleHandler):
    name = "CronDelete"

    def _run(self, context: ToolContext, request: Any) -> HandlerOutcome:
        if self._tools.live(context.session.session_id, request.id) is None:
            return _failed("cron_not_found", f"No cron schedule {request.id!r} in this session; "
                           "CronList shows the ids.")
        event: Event = CronScheduleDeleted(schedule_id=request.id)
        return HandlerOutcome(success=True, model_content=f"Deleted {request.id}.",
                              result={"id": request.id, "deleted": True}, events=(event,))


class OffPeakCreateHandler(_ScheduleHandler):
    name = "OffPeakCreate"

    def _run(self, context: ToolContext, request: Any) -> HandlerOutcome:
        port = self._tools.off_peak.port(Path(context.session.workspace))
        if port is None:
            return _failed("off_peak_unavailable",
                           "The host has closed its off-peak port; nothing was queued.")
        due, end = port.next_window(self._tools.clock.now())
        off_peak_id = new_id("offpeak")
        event = OffPeakPromptCreated(due_at=format_instant(due), off_peak_id=off_peak_id,
                                     prompt=request.prompt, window_end_at=format_instant(end))
        result = {"id": off_peak_id, "dueAt": event.due_at, "windowEndAt": event.window_end_at}
        text = (f"Queued {off_peak_id} for the off-peak window from {event.due_at} to "
                f"{event.window_end_at} (UTC). The host runs the prompt in that window.")
        return HandlerOutcome(success=True, model_content=text, result=result, events=(event,))


class OffPeakListHandler(_ScheduleHandler):
    name = "OffPeakList"

    def _run(self, context: ToolContext, request: Any) -> HandlerOutcome:
        docs = self._tools.records(context.session.session_id, "offPeak")
        items = [{k: d.body[k] for k in ("id", "prompt", "dueAt", "windowEndAt", "createdAt")}
                 for d in docs]
        lines = [f"- {i['id']} due {i['dueAt']} until {i['windowEndAt']}: "
                 f"{' '.join(i['prompt'].split())[:80]}" for i in items]
        text = ("Off-peak prompts of this session (UTC):\n" + "\n".join(lines)) if items \
            else "No off-peak prompts."
        return HandlerOutcome(success=True, model_content=text, result={"prompts": items})


def schedule_handlers(tools: ScheduleTools) -> list[_ScheduleHandler]:
    """Every cron and off-peak handler over ``tools``."""
    return [cls(tools) for cls in (CronCreateHandler, CronListHandler, CronUpdateHandler,
                                   CronDeleteHandler, OffPeakCreateHandler, OffPeakListHandler)]
