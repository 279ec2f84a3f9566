"""The records the later tools keep per session: its chosen model, cron schedules, off-peak prompts.

A :class:`~projections.tool_calls.DocProjection` over the same keyed document table as the
call and interaction views, with its own keys: one document per session for the model the
user chose (``SessionModelSelected``, SPEC LM-1 ``[current]`` and LM-2's session provider), one
per cron schedule (``CronSchedule*``, TR-5) and one per off-peak prompt
(``OffPeakPromptCreated``). Reading a record is one indexed lookup, whatever the length of
the session's log; the fold is what an audit compares against.

Statuses: ``model``; ``cron`` while a schedule exists, ``cronDeleted`` after (its document
stays, so an audit can still see it); ``offPeak``. Orders are the ``seq`` of the creating
event, so a session's schedules list in the order they were made.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from eventlog import (
    CronScheduleCreated,
    CronScheduleDeleted,
    CronScheduleUpdated,
    OffPeakPromptCreated,
    RecordedEvent,
    SessionModelSelected,
)

from .tables import Doc, DocTable
from .tool_calls import DocProjection

__all__ = [
    "RECORD_EVENTS",
    "ToolRecordsProjection",
    "fold_record",
    "model_key",
    "record_key",
]

RECORD_EVENTS = frozenset({
    "SessionModelSelected", "CronScheduleCreated", "CronScheduleUpdated",
    "CronScheduleDeleted", "OffPeakPromptCreated",
})
"""The event types this view folds."""


def model_key(session_id: str) -> str:
    """The key of the session's chosen-model document."""
    return f"{session_id}#model"


def record_key(session_id: str, record_id: str) -> str:
    """The key of a cron schedule or off-peak prompt of the session."""
    return f"{session_id}/{record_id}"


def _key_of(event: RecordedEvent) -> str | None:
    data = event.data
    if isinstance(data, SessionModelSelected):
        return model_key(event.session_id)
    if isinstance(data, CronScheduleCreated | CronScheduleUpdated | CronScheduleDeleted):
        return record_key(event.session_id, data.schedule_id)
    if isinstance(data, OffPeakPromptCreated):
        return record_key(event.session_id, data.off_peak_id)
    return None


def _cron_changed(doc: Doc, data: CronScheduleUpdated, at: str) -> Doc:
    changes = {"cron": data.cron, "prompt": data.prompt, "enabled": data.enabled}
    body = {**doc.body, **{k: v for k, v in changes.items() if v is not None}, "updatedAt": at}
    return Doc(doc.key, doc.session_id, doc.status, doc.order, body)


def fold_record(docs: dict[str, Doc | None], event: RecordedEvent) -> str | None:
    """Apply one event to the record documents; the key it touched, if any."""
    if event.type not in RECORD_EVENTS:
        return None
    key = _key_of(event)
    if key is None:
        return None
    data, sid, at = event.data, event.session_id, event.recorded_at
    if isinstance(data, SessionModelSelected):
        docs[key] = Doc(key, sid, "model", event.seq,
                        {"model": data.model, "level": data.level, "selectedAt": at})
    elif isinstance(data, CronScheduleCreated):
        docs[key] = Doc(key, sid, "cron", event.seq, {
            "id": data.schedule_id, "cron": data.cron, "prompt": data.prompt,
            "recurring": data.recurring, "enabled": True, "createdAt": at, "updatedAt": at,
        })
    elif isinstance(data, OffPeakPromptCreated):
        docs[key] = Doc(key, sid, "offPeak", event.seq, {
            "id": data.off_peak_id, "prompt": data.prompt, "dueAt": data.due_at,
            "windowEndAt": data.window_end_at, "createdAt": at,
        })
    else:
        doc = docs.get(key)
        if doc is None or doc.status != "cron":
            return None  # an update or delete of nothing live changes nothing
        if isinstance(data, CronScheduleUpdated):
            docs[key] = _cron_changed(doc, data, at)
        else:
            body = {**doc.body, "deletedAt": at}
            docs[key] = Doc(key, doc.session_id, "cronDeleted", doc.order, body)
    return key


class ToolRecordsProjection(DocProjection):
    """The chosen model, cron schedules and off-peak prompts of every session, inline."""

    def __init__(self, table: DocTable, *, version: int = 1) -> None:
        super().__init__(
            name="tool_records", version=version, table=table, fold=fold_record,
            types=RECORD_EVENTS,
        )

    def apply(self, tx: Any, events: Sequence[RecordedEvent]) -> None:
        events = [e for e in events if e.type in RECORD_EVENTS]
        wanted = list(dict.fromkeys(k for e in events if (k := _key_of(e)) is not None))
        if not wanted:
            return
        docs: dict[str, Doc | None] = dict(self.table.load(tx, wanted))
        touched: dict[str, None] = {}
        for event in events:
            key = fold_record(docs, event)
            if key is not None:
                touched[key] = None
        self.table.save(tx, [d for k in touched if (d := docs.get(k)) is not None])

    def chosen_model(self, tx: Any, session_id: str) -> Doc | None:
        """The session's chosen-model document, or ``None`` when the user chose none."""
        return self.get(tx, model_key(session_id))

    def records(self, tx: Any, session_id: str, status: str) -> list[Doc]:
        """The session's documents of ``status`` (``cron``, ``offPeak`` …) in creation order."""
        return self.of_session(tx, session_id, status)
