"""The interaction timers: each session's queue with its timer states, and the setting's history.

A fold of the log kept inline (SPEC HO-4 … HO-7): per session, its pending interactions in
FIFO order, each with the timer state its events recorded, the three absolute times once
started, when it was registered and when it reached the head of the queue (the instant the
event that put it there was recorded). One more row holds every change of the
``autoContinueQuestions`` setting, from the reserved settings stream.

The fold never runs the machine and knows no durations: what it stores is exactly what the
log says. The *decision* "what is due, and when" is :func:`session_due` — pure, over a row,
the setting's history and the configured durations — which the scheduler asks for the next
due instant (DESIGN.md "Time"). A row is ``watch`` while one of its questions may still
move (registered, or a clock running), so the scheduler reads only those.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from eventlog import (
    EventStore,
    InteractionAutoResolutionChanged,
    InteractionRequested,
    InteractionResolved,
    RecordedEvent,
    SessionCreated,
    SettingChanged,
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

from .tables import TableBacked, TimerRow, TimerTable

__all__ = [
    "SETTINGS_STREAM",
    "TIMER_EVENTS",
    "InteractionTimersProjection",
    "auto_resolution_wire",
    "fold_timers",
    "setting_history",
    "session_due",
    "timers_of",
]

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


# -- one small function per event type -------------------------------------------------------


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


# -- reading a row for a decision -----------------------------------------------------------


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
    """``autoResolution`` of SPEC §11: the state and its three times, or ``null`` when the
    question is not eligible or has not reached the head yet."""
    if entry["state"] not in ("hiddenGrace", "countdown", "paused"):
        return None
    return {"state": entry["state"], "startedAt": entry["startedAt"],
            "visibleAt": entry["visibleAt"], "deadlineAt": entry["deadlineAt"]}


# -- the inline projection ------------------------------------------------------------------


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

    def watched(self, tx: Any) -> list[TimerRow]:
        """Rows with a question whose timer may still move (for the scheduler)."""
        return self.table.with_status(tx, "watch")

    def differences(
        self, store: EventStore, events: Sequence[RecordedEvent], session_id: str
    ) -> list[str]:
        """The stored row against a fresh fold of the stream's ``events`` (for audits)."""
        fresh: dict[str, TimerRow | None] = {}
        for event in events:
            fold_timers(fresh, event)
        stored = store.read_view(lambda tx: self.get(tx, session_id))
        if fresh.get(session_id) == stored:
            return []
        return [f"{self.name}: {session_id} differs from the log"]
