"""The cron and off-peak tools as service tools (SPEC TR-1, TR-5).

Each handler records what it changes as one event in the call's batch — a
``CronScheduleCreated`` / ``Updated`` / ``Deleted`` or an ``OffPeakPromptCreated`` — and the
tool-records projection keeps the session's schedules inline. Reads (the lists, and the
schedule an update or delete names) come from that projection, loaded after the session's
version, so a concurrent change makes the append conflict and the executor runs the call
again on fresh records.

Next-due times come from the ports: the cron port for a schedule (a recurring one's next
match after now; a one-off's first match after it was last changed; a paused one has none),
the off-peak port for a queued prompt (fixed when queued: the window it falls in or the next
one). Nothing here runs a prompt: the host does, when due.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

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

from .handlers import HandlerOutcome, Resolution, ToolContext
from .schedule_contract import DESCRIPTIONS, SCHEDULE_TOOLS, parse, schema_of
from .schedule_ports import CronPort, OffPeakPorts

__all__ = ["RecordsReader", "ScheduleTools", "cron_wire", "schedule_handlers"]

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
