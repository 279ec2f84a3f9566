"""The cron and off-peak tools' contract (SPEC TR-5): descriptors, input schemas, texts.

Pure code for :mod:`sessionledger.tools.schedule_handlers`. Inputs are strict (no coercion,
unknown fields refused):

* ``CronCreate {"cron": five-field expression, "prompt": str, "recurring": bool = true}``;
* ``CronList {}``; ``CronUpdate {"id", "cron"?, "prompt"?, "enabled"?}`` (at least one
  change); ``CronDelete {"id"}``;
* ``OffPeakCreate {"prompt": str}``; ``OffPeakList {}``.

A cron expression is checked by the cron port while the input is validated (the port comes
in the validation context), so a bad expression is a 422 naming ``cron`` and appends nothing.

The tools that record something are not read-only (scope ``session``): a scheduled prompt
acts later without the user at the keyboard, so ``build`` and ``edit`` ask first, Plan
denies, ``auto`` and ``yolo`` allow; the two list tools are read-only (docs/decisions.md D54).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

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

from ..permission.descriptors import ToolDescriptor
from .schedule_ports import CronPort, InvalidCronExpression

__all__ = [
    "DESCRIPTIONS",
    "MAX_PROMPT",
    "SCHEDULE_TOOLS",
    "CronCreateInput",
    "CronDeleteInput",
    "CronListInput",
    "CronUpdateInput",
    "OffPeakCreateInput",
    "OffPeakListInput",
    "parse",
    "schema_of",
]

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
