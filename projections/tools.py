"""What the session's tool calls did: each call and interaction, the questions' timers, the
tools' records, the todo list.

Four views folded inline from the log, each small folds per event type over a document or row
table of :mod:`projections.tables`: the tool-call and interaction documents (the call's state
on the wire of docs/spec.md, each session's FIFO queue of questions, HO-4), the interaction
timers (each queue with its timer states, and when a question is due, HO-4 … HO-7), the
records the later tools keep per session (chosen model, cron schedules, off-peak prompts), and
the todo list of the last TodoWrite (TD-4).

**Calls and interactions.** Folded from the call's events (``ToolCallRequested`` …
``ToolCallCompleted``) into one JSON document per call, shaped for the wire of docs/spec.md by
:func:`call_wire`; and one document per interaction, ``pending`` until resolved, ordered by
the position it was requested at, which is the session's FIFO queue (HO-4).

A call's document keeps its ``input`` only while the call may still need it (pending: the
answer step runs with it); once the call is completed or denied the input is the log's alone
(``ToolCallRequested``, at the document's ``order`` seq; D71). A TodoWrite's document notes the
seq of the call's own ``TodosWritten`` as ``todosSeq``: its recorded result names the lists
rather than repeating them (D70), and the executor puts them back for the wire.

**Question timers.** A fold of the log kept inline (HO-4 … HO-7): per session, its pending
interactions in FIFO order, each with the timer state its events recorded, the three absolute
times once started, when it was registered and when it reached the head of the queue (the
instant the event that put it there was recorded). One more row holds every change of the
``autoContinueQuestions`` setting, from the reserved settings stream.

The timer fold never runs the machine and knows no durations: what it stores is exactly what the
log says. The *decision* "what is due, and when" is :func:`session_due` — pure, over a row,
the setting's history and the configured durations — which the scheduler asks for the next
due instant (docs/architecture.md, "Question timers"). A row is ``watch`` while one of its
questions may still move (registered, or a clock running), so the scheduler reads only those.

**Tool records.** A :class:`DocProjection` over the same keyed document table as the
call and interaction views, with its own keys: one document per session for where its host's
questions are answered (``AnswerInChanged``), one per session for the model the
user chose (``SessionModelSelected``, LM-1 ``[current]`` and LM-2's session provider), one
per cron schedule (``CronSchedule*``, TR-5) and one per off-peak prompt
(``OffPeakPromptCreated``). Reading a record is one indexed lookup, whatever the length of
the session's log; the fold is what an audit compares against.

Statuses: ``model``, ``answerIn``; ``cron`` while a schedule exists, ``cronDeleted`` after
(its document stays, so an audit can still see it); ``offPeak``. Orders are the ``seq`` of
the creating event, so a session's schedules list in the order they were made.

**Todos.** Each live session's current todo list, one row per item (TD-4). A fold over
the log: ``TodosWritten`` replaces the session's whole list (delete its rows,
insert the new ones in order), ``SessionDeleted`` empties it — a deleted session has no
todos — and a write to a session that was never created or is already deleted changes
nothing. The store runs :meth:`TodoProjection.apply` inside the append transaction, after
the execution-state projection, so one TodoWrite call is one atomic unit that appends its
events, replaces the rows and touches the session's ``updated_at`` (the summary stamps
every event, and notes which write the list is: ``todos_seq``). The rows live in
:mod:`projections.tables`; only the rows whose item changed are written, the session's
stored rows being known from the last batch this process folded when the new batch chains
from it (D74), and compared in SQL otherwise.

The projection is tied to the execution-state projection it follows: its rows reference the
summary rows (``ON DELETE CASCADE``), so whenever the summary table is rebuilt — its version
changed, or it is missing — the cascade empties the todo table and the todos must be refolded
too. :attr:`TodoProjection.version` therefore includes the summary projection's version and
:meth:`TodoProjection.is_present` asks for the summary table as well: the store then rebuilds
both in one transaction (docs/decisions.md D31).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from eventlog import (
    AnswerIn,
    AnswerInChanged,
    CronScheduleCreated,
    CronScheduleDeleted,
    CronScheduleUpdated,
    EventStore,
    InteractionAutoResolutionChanged,
    InteractionRequested,
    InteractionResolved,
    OffPeakPromptCreated,
    PermissionDecided,
    RecordedEvent,
    SessionCreated,
    SessionModelSelected,
    SettingChanged,
    TodoItemData,
    TodosWritten,
    ToolCallCompleted,
    ToolCallRequested,
    parse_instant,
)
from statemachine.interaction import (
    RUNNING_STATES,
    Due,
    InteractionTimer,
    Mark,
    SettingChange,
    SettingHistory,
    TimerConfig,
    TimerTimes,
    next_due,
)

from .session import ChainCache, ExecutionStateProjection, session_spans
from .tables import Doc, DocTable, TableBacked, TimerRow, TimerTable, TodoRow, TodoTable

__all__ = [
    "RECORD_EVENTS",
    "SETTINGS_STREAM",
    "TIMER_EVENTS",
    "TODO_EVENTS",
    "DocProjection",
    "InteractionTimersProjection",
    "TodoFold",
    "TodoProjection",
    "ToolRecordsProjection",
    "as_item",
    "auto_resolution_wire",
    "call_document",
    "call_key",
    "call_wire",
    "current_todos",
    "fold_call",
    "fold_interaction",
    "fold_record",
    "fold_timers",
    "fold_todos",
    "interaction_wire",
    "model_key",
    "record_key",
    "rows_for",
    "session_due",
    "setting_history",
    "timers_of",
    "todo_differences_of",
]


CALL_EVENTS = frozenset({
    "ToolCallRequested", "PermissionDecided", "InteractionRequested", "InteractionResolved",
    "ToolCallCompleted", "TodosWritten",
})
"""The event types the call view folds; every other event is skipped without a look inside.
(``TodosWritten`` only for the seq a TodoWrite's document notes, by its causation id.)"""
INTERACTION_EVENTS = frozenset({"InteractionRequested", "InteractionResolved"})
_BY_CAUSATION = "TodosWritten"
"""The one folded event without a call id of its own: it belongs to the call that caused it."""


def call_key(session_id: str, call_id: str) -> str:
    """Calls are keyed per session: a client's call id need only be unique in its session."""
    return f"{session_id}/{call_id}"


def _dump(model: Any) -> Any:
    return None if model is None else model.model_dump(mode="json", by_alias=True)


def fold_call(docs: dict[str, Doc | None], event: RecordedEvent) -> str | None:
    """Apply one event to the call documents; the key it touched, if any."""
    if event.type not in CALL_EVENTS:
        return None
    data = event.data
    if isinstance(data, ToolCallRequested):
        key = call_key(event.session_id, data.call_id)
        docs[key] = Doc(key, event.session_id, "pending", event.seq, {
            "callId": data.call_id, "tool": data.tool, "input": data.input, "host": data.host,
            "interactionId": None, "requestedAt": event.recorded_at, "permission": None,
        })
        return key
    if event.type == _BY_CAUSATION:
        return _todos_written(docs, event)
    call_id = getattr(data, "call_id", None)
    if call_id is None:
        return None
    key = call_key(event.session_id, call_id)
    doc = docs.get(key)
    if doc is None:
        return None
    body = dict(doc.body)
    status = doc.status
    if isinstance(data, PermissionDecided):
        body["permission"] = _dump(data.decision)
    elif isinstance(data, InteractionRequested):
        body["interactionId"] = data.interaction_id
    elif isinstance(data, InteractionResolved):
        body["resolution"] = {"decision": data.decision, "input": data.input,
                              "feedback": data.feedback}
    elif isinstance(data, ToolCallCompleted):
        status = data.status
        body.pop("input", None)  # the log's alone from now on (D71)
        body.update({
            "success": data.success, "result": data.result, "modelContent": data.model_content,
            "turnControl": _dump(data.turn_control),
            "followUpUserInput": _dump(data.follow_up_user_input),
            "completedAt": event.recorded_at,
        })
        if data.permission is not None:
            body["permission"] = _dump(data.permission)
    docs[key] = Doc(key, doc.session_id, status, doc.order, body)
    return key


def _todos_written(docs: dict[str, Doc | None], event: RecordedEvent) -> str | None:
    """Note on the causing TodoWrite's document the seq of the list it wrote (D70)."""
    if event.causation_id is None:
        return None
    key = call_key(event.session_id, event.causation_id)
    doc = docs.get(key)
    if doc is None or doc.body.get("tool") != "TodoWrite":
        return None
    docs[key] = Doc(key, doc.session_id, doc.status, doc.order,
                    {**doc.body, "todosSeq": event.seq})
    return key


def call_document(
    events: Iterable[RecordedEvent], session_id: str, call_id: str, *, before: Doc | None = None
) -> Doc | None:
    """The call's document after ``events`` were appended, ``before`` being its stored
    document until then: what the view now holds, without reading it back."""
    key = call_key(session_id, call_id)
    docs: dict[str, Doc | None] = {key: before}
    for event in events:
        fold_call(docs, event)
    return docs[key]


def fold_interaction(docs: dict[str, Doc | None], event: RecordedEvent) -> str | None:
    """Apply one event to the interaction documents; the key it touched, if any."""
    if event.type not in INTERACTION_EVENTS:
        return None
    data = event.data
    if isinstance(data, InteractionRequested):
        docs[data.interaction_id] = Doc(
            data.interaction_id, event.session_id, "pending", event.global_position,
            {"interactionId": data.interaction_id, "callId": data.call_id, "kind": data.kind,
             "payload": data.payload, "autoResolution": None,
             "requestedAt": event.recorded_at},
        )
        return data.interaction_id
    if isinstance(data, InteractionResolved):
        doc = docs.get(data.interaction_id)
        if doc is None:
            return None
        body = {**doc.body, "decision": data.decision, "resolvedAt": event.recorded_at}
        docs[data.interaction_id] = Doc(doc.key, doc.session_id, "resolved", doc.order, body)
        return data.interaction_id
    return None


_STARTS = {"ToolCallRequested": (True, False), "InteractionRequested": (False, True)}
"""Per event type: whether it starts its call's / its interaction's document afresh (the
folds above replace any stored document on these events, so it is not read first)."""


def _keys_of(event: RecordedEvent) -> list[tuple[str, bool]]:
    """The document keys ``event`` touches, each with whether the event starts it afresh
    (its stored document, if any, is then not needed). Every call event has a call id; only
    the interaction events have an interaction id (asking a pydantic model for a field it
    lacks raises inside, which is slow)."""
    kind = event.type
    if kind not in CALL_EVENTS:
        return []
    if kind == _BY_CAUSATION:
        cause = event.causation_id
        return [] if cause is None else [(call_key(event.session_id, cause), False)]
    data = event.data
    starts_call, starts_interaction = _STARTS.get(kind, (False, False))
    keys = [(call_key(event.session_id, getattr(data, "call_id")), starts_call)]  # noqa: B009
    if kind in INTERACTION_EVENTS:
        keys.append((getattr(data, "interaction_id"), starts_interaction))  # noqa: B009
    return keys


Fold = Callable[[dict[str, Doc | None], RecordedEvent], str | None]


class DocProjection(TableBacked[DocTable]):
    """An inline projection folding events into keyed documents (calls or interactions)."""

    def __init__(
        self, *, name: str, version: int, table: DocTable, fold: Fold,
        types: frozenset[str] = CALL_EVENTS,
    ) -> None:
        self.name = name
        self.version = version
        self.table = table
        self.fold = fold
        self.types = types
        self._folded: dict[str, tuple[Doc, RecordedEvent]] = {}
        """The documents the last :meth:`apply` saved, each with the last event it folded."""

    def forget(self, tx: Any, session_id: str) -> None:
        self.table.delete_session(tx, session_id)

    def apply(self, tx: Any, events: Sequence[RecordedEvent]) -> None:
        types = self.types
        events = [e for e in events if e.type in types]
        if not events:
            return
        # Load only the documents the batch does not start afresh (a new call is not read).
        first: dict[str, bool] = {}
        for event in events:
            for touched_key, starts in _keys_of(event):
                first.setdefault(touched_key, starts)
        wanted = [k for k, starts in first.items() if not starts]
        docs: dict[str, Doc | None] = dict(self.table.load(tx, wanted)) if wanted else {}
        touched: dict[str, RecordedEvent] = {}
        for event in events:
            key = self.fold(docs, event)
            if key is not None:
                touched[key] = event
        saved = {k: (d, e) for k, e in touched.items() if (d := docs.get(k)) is not None}
        self.table.save(tx, [d for d, _e in saved.values()])
        self._folded = saved

    def folded(self, key: str, last: RecordedEvent) -> Doc | None:
        """The document under ``key`` as the last :meth:`apply` saved it, if ``last`` (the
        final event of a caller's appended batch) is the last event it folded into it: then
        that is the document the view holds after the caller's batch, without a fold or a
        read. ``None`` otherwise."""
        held = self._folded.get(key)
        return held[0] if held is not None and held[1] is last else None

    def get(self, tx: Any, key: str) -> Doc | None:
        return self.table.load(tx, [key]).get(key)

    def of_session(self, tx: Any, session_id: str, status: str | None = None) -> list[Doc]:
        return self.table.of_session(tx, session_id, status)


def call_wire(doc: Doc) -> dict[str, Any]:
    """The tool-call document of docs/spec.md for the call's current status (``cancelled``, a
    withdrawn call, D157, has the shape of a completed one)."""
    body = doc.body
    if doc.status == "pending":
        return {"status": "pending", "callId": body["callId"],
                "interactionId": body["interactionId"]}
    if doc.status == "denied":
        return {"status": "denied", "callId": body["callId"],
                "modelContent": body["modelContent"], "permission": body["permission"],
                "turnControl": body["turnControl"],
                "followUpUserInput": body["followUpUserInput"]}
    return {"status": doc.status, "callId": body["callId"], "success": body["success"],
            "result": body["result"], "modelContent": body["modelContent"],
            "turnControl": body["turnControl"], "followUpUserInput": body["followUpUserInput"]}


def interaction_wire(doc: Doc) -> dict[str, Any]:
    """An interaction as the session document lists it (docs/spec.md)."""
    body = doc.body
    return {"interactionId": body["interactionId"], "callId": body["callId"],
            "kind": body["kind"], "payload": body["payload"],
            "autoResolution": body["autoResolution"]}


# -- question timers (HO-4 … HO-7) ---------------------------------------------------------


SETTINGS_STREAM = "sys_settings"
"""The reserved stream that records service-wide settings (not a session: no
``SessionCreated``, never listed; its chain is audited like any other)."""

TIMER_EVENTS = frozenset({
    "SessionCreated", "InteractionRequested", "InteractionAutoResolutionChanged",
    "InteractionResolved", "SessionDeleted", "SettingChanged",
})
"""The event types this view folds; every other event is skipped without a look inside."""

_WATCHED = frozenset({"registered", *RUNNING_STATES})
SETTING = "autoContinueQuestions"


def _mark(event: RecordedEvent) -> list[Any]:
    return [event.global_position, event.recorded_at]


def _status(queue: list[dict[str, Any]]) -> str:
    return "watch" if any(e["state"] in _WATCHED for e in queue) else "idle"


def _session_row(row: TimerRow, queue: list[dict[str, Any]]) -> TimerRow:
    return TimerRow(row.key, _status(queue), {**row.body, "queue": queue})


# one small function per event type


def _created(row: TimerRow | None, event: RecordedEvent) -> TimerRow | None:
    assert isinstance(event.data, SessionCreated)
    return TimerRow(event.session_id, "idle", {"host": event.data.host, "queue": []})


def _requested(row: TimerRow | None, event: RecordedEvent) -> TimerRow | None:
    data = event.data
    assert isinstance(data, InteractionRequested)
    if row is None or row.status == "deleted":
        return row
    queue = list(row.body["queue"])
    eligible = row.body["host"] == "protocol" and data.kind == "askUserQuestion"
    queue.append({
        "interactionId": data.interaction_id, "callId": data.call_id, "kind": data.kind,
        "state": "registered" if eligible else "ineligible", "reason": None,
        "registered": _mark(event), "head": None if queue else _mark(event),
        "startedAt": None, "visibleAt": None, "deadlineAt": None,
    })
    return _session_row(row, queue)


def _changed(row: TimerRow | None, event: RecordedEvent) -> TimerRow | None:
    data = event.data
    assert isinstance(data, InteractionAutoResolutionChanged)
    if row is None or row.status == "deleted":
        return row
    queue = [
        {**entry, "state": data.state, "reason": data.reason, "startedAt": data.started_at,
         "visibleAt": data.visible_at, "deadlineAt": data.deadline_at}
        if entry["interactionId"] == data.interaction_id else entry
        for entry in row.body["queue"]
    ]
    return _session_row(row, queue)


def _resolved(row: TimerRow | None, event: RecordedEvent) -> TimerRow | None:
    data = event.data
    assert isinstance(data, InteractionResolved)
    if row is None or row.status == "deleted":
        return row
    before = row.body["queue"]
    queue = [e for e in before if e["interactionId"] != data.interaction_id]
    if queue and before and before[0]["interactionId"] == data.interaction_id:
        queue[0] = {**queue[0], "head": _mark(event)}  # the next one reaches the head now
    return _session_row(row, queue)


def _deleted(row: TimerRow | None, event: RecordedEvent) -> TimerRow | None:
    if row is None:
        return None
    return TimerRow(row.key, "deleted", {**row.body, "queue": []})


def _setting(row: TimerRow | None, event: RecordedEvent) -> TimerRow | None:
    data = event.data
    assert isinstance(data, SettingChanged)
    body = dict(row.body) if row is not None else {}
    body[data.name] = [*body.get(data.name, []), [*_mark(event), data.value]]
    return TimerRow(event.session_id, "settings", body)


FOLDS: dict[str, Callable[[TimerRow | None, RecordedEvent], TimerRow | None]] = {
    "SessionCreated": _created,
    "InteractionRequested": _requested,
    "InteractionAutoResolutionChanged": _changed,
    "InteractionResolved": _resolved,
    "SessionDeleted": _deleted,
    "SettingChanged": _setting,
}


def fold_timers(rows: dict[str, TimerRow | None], event: RecordedEvent) -> str | None:
    """Apply one event to the rows (keyed by stream); the key it touched, if any."""
    fold = FOLDS.get(event.type)
    if fold is None:
        return None
    rows[event.session_id] = fold(rows.get(event.session_id), event)
    return event.session_id


# reading a row for a decision


def _as_mark(raw: list[Any] | None) -> Mark | None:
    return None if raw is None else Mark(int(raw[0]), parse_instant(raw[1]))


def _timer(entry: dict[str, Any]) -> InteractionTimer:
    times = None
    if entry["startedAt"] is not None:
        times = TimerTimes(parse_instant(entry["startedAt"]), parse_instant(entry["visibleAt"]),
                           parse_instant(entry["deadlineAt"]))
    registered = _as_mark(entry["registered"])
    assert registered is not None
    return InteractionTimer(
        interaction_id=entry["interactionId"], call_id=entry["callId"], state=entry["state"],
        registered=registered, head=_as_mark(entry["head"]), times=times,
        reason=entry["reason"],
    )


def timers_of(row: TimerRow | None) -> list[InteractionTimer]:
    """The session's pending interactions in queue order, as the timer sees them."""
    if row is None or row.status == "deleted":
        return []
    return [_timer(entry) for entry in row.body["queue"]]


def setting_history(row: TimerRow | None) -> SettingHistory:
    """The ``autoContinueQuestions`` history from the settings row (default on)."""
    if row is None:
        return SettingHistory()
    changes = tuple(
        SettingChange(Mark(int(p), parse_instant(at)), bool(value))
        for p, at, value in row.body.get(SETTING, [])
    )
    return SettingHistory(changes)


def session_due(
    row: TimerRow | None, settings: SettingHistory, config: TimerConfig
) -> Due | None:
    """The session's next timer transition: the earliest one, queue order breaking ties."""
    candidates = [
        (due.at, index, due)
        for index, timer in enumerate(timers_of(row))
        if (due := next_due(timer, settings, config)) is not None
    ]
    return min(candidates, key=lambda c: (c[0], c[1]))[2] if candidates else None


def auto_resolution_wire(entry: dict[str, Any]) -> dict[str, Any] | None:
    """``autoResolution`` of docs/spec.md: the state and its three times, or ``null`` when the
    question is not eligible or has not reached the head yet."""
    if entry["state"] not in ("hiddenGrace", "countdown", "paused"):
        return None
    return {"state": entry["state"], "startedAt": entry["startedAt"],
            "visibleAt": entry["visibleAt"], "deadlineAt": entry["deadlineAt"]}


# the inline projection


class InteractionTimersProjection(TableBacked[TimerTable]):
    """The inline projection the store runs: fold events, save the touched rows."""

    name = "interaction_timers"
    version = 1

    def __init__(self, table: TimerTable) -> None:
        self.table = table

    def forget(self, tx: Any, session_id: str) -> None:
        self.table.delete(tx, session_id)

    def apply(self, tx: Any, events: Sequence[RecordedEvent]) -> None:
        events = [e for e in events if e.type in TIMER_EVENTS]
        if not events:
            return
        rows: dict[str, TimerRow | None] = dict(
            self.table.load(tx, list(dict.fromkeys(e.session_id for e in events)))
        )
        touched = {key: None for e in events if (key := fold_timers(rows, e)) is not None}
        self.table.save(tx, [r for k in touched if (r := rows.get(k)) is not None])

    def get(self, tx: Any, key: str) -> TimerRow | None:
        return self.table.load(tx, [key]).get(key)

    def rows(self, tx: Any, keys: Sequence[str]) -> dict[str, TimerRow]:
        """The rows of ``keys`` that exist (one read for a whole session list)."""
        return self.table.load(tx, keys) if keys else {}

    def watched(self, tx: Any) -> list[TimerRow]:
        """Rows with a question whose timer may still move (for the scheduler)."""
        return self.table.with_status(tx, "watch")

    def differences_of(
        self, store: EventStore, fresh: dict[str, TimerRow | None], session_id: str
    ) -> list[str]:
        """The stored row against ``fresh``, the rows :func:`fold_timers` folded afresh."""
        stored = store.read_view(lambda tx: self.get(tx, session_id))
        if fresh.get(session_id) == stored:
            return []
        return [f"{self.name}: {session_id} differs from the log"]


# -- tool records: the chosen model, cron schedules, off-peak prompts ----------------------


RECORD_EVENTS = frozenset({
    "SessionModelSelected", "CronScheduleCreated", "CronScheduleUpdated",
    "CronScheduleDeleted", "OffPeakPromptCreated", "AnswerInChanged",
})
"""The event types this view folds."""


def model_key(session_id: str) -> str:
    """The key of the session's chosen-model document."""
    return f"{session_id}#model"


def answer_in_key(session_id: str) -> str:
    """The key of the session's answer-place document (``AnswerInChanged``)."""
    return f"{session_id}#answerIn"


def record_key(session_id: str, record_id: str) -> str:
    """The key of a cron schedule or off-peak prompt of the session."""
    return f"{session_id}/{record_id}"


def _record_key(event: RecordedEvent) -> str | None:
    data = event.data
    if isinstance(data, SessionModelSelected):
        return model_key(event.session_id)
    if isinstance(data, AnswerInChanged):
        return answer_in_key(event.session_id)
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
    key = _record_key(event)
    if key is None:
        return None
    data, sid, at = event.data, event.session_id, event.recorded_at
    if isinstance(data, SessionModelSelected):
        docs[key] = Doc(key, sid, "model", event.seq,
                        {"model": data.model, "level": data.level, "selectedAt": at})
    elif isinstance(data, AnswerInChanged):
        docs[key] = Doc(key, sid, "answerIn", event.seq,
                        {"answerIn": data.answer_in, "changedAt": at})
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
        wanted = list(dict.fromkeys(k for e in events if (k := _record_key(e)) is not None))
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

    def answer_in(self, tx: Any, session_id: str) -> AnswerIn:
        """Where the session's questions and plan approvals are answered: ``host`` (the
        program's own dialog) until the user chose otherwise."""
        doc = self.get(tx, answer_in_key(session_id))
        return "here" if doc is not None and doc.body.get("answerIn") == "here" else "host"

    def records(self, tx: Any, session_id: str, status: str) -> list[Doc]:
        """The session's documents of ``status`` (``cron``, ``offPeak`` …) in creation order."""
        return self.of_session(tx, session_id, status)


# -- todos (TD-4) --------------------------------------------------------------------------


TODO_EVENTS = frozenset({"SessionCreated", "TodosWritten", "SessionDeleted"})
"""The event types the fold looks at; every other event passes without a look inside."""

_TODO_OWN_VERSION = 2
"""The todo table's own schema version; :attr:`TodoProjection.version` adds the parent's.
(2: rows hold the item only; the write's seq and time are the summary's, D70.)"""


def rows_for(session_id: str, todos: Sequence[TodoItemData]) -> list[TodoRow]:
    """The rows of a written list: positions 0, 1, 2 … in list order."""
    return [
        TodoRow(session_id, position, t.content, t.status, t.priority)
        for position, t in enumerate(todos)
    ]


def fold_todos(events: Iterable[RecordedEvent]) -> dict[str, list[TodoRow]]:
    """A fresh fold: the rows of every live, created session (audits compare with this)."""
    folding = TodoFold()
    see = folding.see
    for event in events:
        see(event)
    return folding.lists


class TodoFold:
    """:func:`fold_todos` one event at a time; ``lists`` holds the rows so far."""

    __slots__ = ("_deleted", "lists")

    def __init__(self) -> None:
        self.lists: dict[str, list[TodoRow]] = {}
        self._deleted: set[str] = set()

    def see(self, event: RecordedEvent) -> None:
        kind = event.type
        if kind not in TODO_EVENTS:
            return
        lists = self.lists
        sid = event.session_id
        if kind == "SessionCreated":
            lists.setdefault(sid, [])
        elif kind == "SessionDeleted":
            if sid in lists:
                lists[sid] = []
                self._deleted.add(sid)
        elif sid in lists and sid not in self._deleted:
            data = event.data
            assert isinstance(data, TodosWritten)
            lists[sid] = rows_for(sid, data.todos)


def as_item(row: TodoRow) -> TodoItemData:
    """A stored row as the catalog's item."""
    return TodoItemData.model_validate(
        {"content": row.content, "status": row.status, "priority": row.priority}
    )


class TodoProjection:
    """The inline projection the store runs: replace a session's rows on each write."""

    name = "todo"

    def __init__(self, table: TodoTable, parent: ExecutionStateProjection) -> None:
        self.table = table
        self.parent = parent
        self._known: ChainCache[tuple[TodoRow, ...]] = ChainCache()
        """Each session's stored rows as of the last batch this process folded (D74)."""

    @property
    def version(self) -> int:
        """Changes whenever the summary projection's does: its rebuild empties ours."""
        return _TODO_OWN_VERSION * 1000 + self.parent.version

    def create(self, tx: Any) -> None:
        self.table.create(tx)

    def is_present(self, tx: Any) -> bool:
        return self.table.is_present(tx) and self.parent.is_present(tx)

    def drop(self, tx: Any) -> None:
        self._known.clear()
        self.table.drop(tx)

    def forget(self, tx: Any, session_id: str) -> None:
        # On SQLite the summary row's delete has already cascaded; the twin needs this.
        self._known.forget(session_id)
        self.table.delete_session(tx, session_id)

    def apply(self, tx: Any, events: Sequence[RecordedEvent]) -> None:
        # Only a session's last write in the batch matters; its summary (already folded
        # in this transaction) says whether the session exists and is still live.
        final: dict[str, list[TodoRow]] = {}
        for event in events:
            if event.type == "TodosWritten":
                data = event.data
                assert isinstance(data, TodosWritten)
                final[event.session_id] = rows_for(event.session_id, data.todos)
            elif event.type == "SessionDeleted":
                final[event.session_id] = []
        spans = session_spans(events)
        known = self._known
        for session_id, rows in final.items():
            summary = self.parent.applied(tx, events, session_id)
            head, last = spans[session_id]
            if summary is None:
                known.forget(session_id)
                continue
            if summary.deleted:
                self.table.delete_session(tx, session_id)
                known.put(session_id, last, ())
                continue
            found, old = known.get(session_id, head)
            self.table.replace(tx, session_id, rows, old if found else None)
            known.put(session_id, last, tuple(rows))
        known.advance(spans, skip=tuple(final))

    def of_session(self, tx: Any, session_id: str) -> list[TodoRow]:
        return self.table.of_session(tx, session_id)

    def items(self, tx: Any, session_id: str) -> tuple[TodoItemData, ...]:
        """The session's list as catalog items, in order."""
        return tuple(as_item(row) for row in self.table.of_session(tx, session_id))


def current_todos(
    store: EventStore, projection: TodoProjection, session_id: str
) -> tuple[TodoItemData, ...]:
    """The session's current todo list from the projection (empty when it has none)."""
    return store.read_view(lambda tx: projection.items(tx, session_id))


def todo_differences_of(
    store: EventStore, projection: TodoProjection, lists: dict[str, list[TodoRow]],
    session_id: str,
) -> list[str]:
    """Where the stored rows of ``session_id`` differ from ``lists``, a fresh fold."""
    fresh = lists.get(session_id, [])
    stored = store.read_view(lambda tx: projection.of_session(tx, session_id))
    if fresh == stored:
        return []
    if len(fresh) != len(stored):
        return [f"todo: {session_id} has {len(stored)} stored rows, log says {len(fresh)}"]
    return [
        f"todo: {session_id} position {f.position} stored {s!r}, log says {f!r}"
        for f, s in zip(fresh, stored, strict=True) if f != s
    ]
