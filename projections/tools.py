"""The tool-call and interaction views: what each call is now, and each session's queue.

Folded from the call's events (``ToolCallRequested`` … ``ToolCallCompleted``) into one JSON
document per call, shaped for the wire of SPEC §11 by :func:`call_wire`; and one document per
interaction, ``pending`` until resolved, ordered by the position it was requested at, which
is the session's FIFO queue (SPEC HO-4).

A call's document keeps its ``input`` only while the call may still need it (pending: the
answer step runs with it); once the call is completed or denied the input is the log's alone
(``ToolCallRequested``, at the document's ``order`` seq; D71). A TodoWrite's document notes the
seq of the call's own ``TodosWritten`` as ``todosSeq``: its recorded result names the lists
rather than repeating them (D70), and the executor puts them back for the wire.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from eventlog import (
    InteractionRequested,
    InteractionResolved,
    PermissionDecided,
    RecordedEvent,
    ToolCallCompleted,
    ToolCallRequested,
)

from .tables import Doc, DocTable, TableBacked

__all__ = [
    "DocProjection",
    "call_document",
    "call_key",
    "call_wire",
    "fold_call",
    "fold_interaction",
    "interaction_wire",
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
    """The tool-call document of SPEC §11 for the call's current status."""
    body = doc.body
    if doc.status == "pending":
        return {"status": "pending", "callId": body["callId"],
                "interactionId": body["interactionId"]}
    if doc.status == "denied":
        return {"status": "denied", "callId": body["callId"],
                "modelContent": body["modelContent"], "permission": body["permission"],
                "turnControl": body["turnControl"],
                "followUpUserInput": body["followUpUserInput"]}
    return {"status": "completed", "callId": body["callId"], "success": body["success"],
            "result": body["result"], "modelContent": body["modelContent"],
            "turnControl": body["turnControl"], "followUpUserInput": body["followUpUserInput"]}


def interaction_wire(doc: Doc) -> dict[str, Any]:
    """An interaction as the session document lists it (SPEC §11)."""
    body = doc.body
    return {"interactionId": body["interactionId"], "callId": body["callId"],
            "kind": body["kind"], "payload": body["payload"],
            "autoResolution": body["autoResolution"]}
