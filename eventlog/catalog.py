"""The closed catalog of session events: one pydantic discriminated union.

Each event is a frozen model with a past-tense name, a ``type`` literal (the discriminator)
and a class-level ``schema_version``. Payloads are stored as canonical JSON of the model's
fields without ``type`` (the envelope carries it), under camelCase names as on the wire.
Later issues add their types here and to :data:`SessionEvent`.
"""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter
from pydantic.alias_generators import to_camel

__all__ = [
    "CATALOG",
    "Event",
    "ExecutionStateData",
    "GoalData",
    "HostKind",
    "PermissionMode",
    "SessionCreated",
    "SessionEvent",
    "event_adapter",
]

PermissionMode = Literal["build", "edit", "yolo", "auto"]
HostKind = Literal["protocol", "tui", "headless"]


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
    """Permission mode, the Plan switch and the goal, as recorded (SPEC ES-1)."""

    mode: PermissionMode = "build"
    plan_enabled: bool = False
    goal: GoalData | None = None


class SessionCreated(Event):
    """A session began, with its workspace, host and initial execution state."""

    schema_version: ClassVar[int] = 1
    type: Literal["SessionCreated"] = "SessionCreated"
    workspace: str
    host: HostKind = "protocol"
    parent_session_id: str | None = None
    execution_state: ExecutionStateData = ExecutionStateData()


SessionEvent = Annotated[Union[SessionCreated], Field(discriminator="type")]  # noqa: UP007

event_adapter: TypeAdapter[SessionEvent] = TypeAdapter(SessionEvent)

CATALOG: dict[str, type[Event]] = {
    cls.model_fields["type"].default: cls for cls in (SessionCreated,)
}
