"""Mixed load against a real ``sessionledger serve``, and what every 2xx answer acknowledged.

Used by ``tests/test_serve_crash.py``. A :class:`MixedClient` is one client thread with
sessions of its own; it sends random commands — sessions, messages, mode changes (``/mode X``
and Shift+Tab), goal start and end, TodoWrite, AskUserQuestion, answers, compactions — and
records each request the server answered 2xx as an :class:`Ack` in a shared :class:`Ledger`,
with what the answer acknowledged (the ``seq``, the version and execution state, the todo
list, the call and interaction ids). A request cut off by the server's death is not an
acknowledgement: its outcome is unknown, and either outcome is correct.

:func:`missing` checks acknowledgements against the log read straight from the database;
:func:`open_questions` lists the acknowledged questions the log holds still unresolved (their
timers must re-arm after a restart).
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import httpx

from eventlog import RecordedEvent
from projections.session import fold
from sessionledger.service.documents import execution_state_wire

__all__ = [
    "QUESTION",
    "QUESTION_TEXT",
    "Ack",
    "Ledger",
    "MixedClient",
    "Life",
    "Rearmed",
    "by_session",
    "check_timer_resolution",
    "missing",
    "open_questions",
    "resolution",
]

QUESTION_TEXT = "Which database?"
QUESTION = {"questions": [{
    "question": QUESTION_TEXT, "header": "DB", "multiSelect": False,
    "options": [{"label": "SQLite (Recommended)", "description": "embedded"},
                {"label": "PostgreSQL", "description": "a server"}],
}]}
ANSWERED = {**QUESTION, "answers": {QUESTION_TEXT: "PostgreSQL"}}
MODES = ("build", "edit", "yolo", "auto", "plan")
STATUSES = ("pending", "in_progress", "completed")
PRIORITIES = ("high", "medium", "low")
REFUSED = 409
"""The one non-2xx answer the load expects: a refused change (goal in Plan, no goal to end,
an answer after the question auto-continued). Anything else fails the test."""


@dataclass(frozen=True)
class _Asked:
    call_id: str
    interaction_id: str
    at: float
    answer: bool


@dataclass(frozen=True)
class Ack:
    """One request answered 2xx: its kind, the kill round, the session and what it promised."""

    kind: str
    round: int
    session_id: str
    expect: dict[str, Any] = field(default_factory=dict)


class Ledger:
    """Every acknowledgement so far, from all client threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.acks: list[Ack] = []

    def add(self, ack: Ack) -> None:
        with self._lock:
            self.acks.append(ack)

    def snapshot(self) -> list[Ack]:
        with self._lock:
            return list(self.acks)

    def count(self, round_: int) -> int:
        with self._lock:
            return sum(1 for a in self.acks if a.round == round_)

    def kinds(self) -> dict[str, int]:
        with self._lock:
            return dict(Counter(a.kind for a in self.acks))


class MixedClient:
    """One client thread: random commands on its own sessions until stopped or cut off."""

    def __init__(
        self, base_url: str, *, round_: int, name: str, ledger: Ledger, seed: int,
        stop: threading.Event, question_wait_s: float,
    ) -> None:
        self._url = base_url
        self._round = round_
        self._name = name
        self._ledger = ledger
        self._rng = random.Random(seed)
        self._stop = stop
        self._question_wait_s = question_wait_s
        self._sessions: list[str] = []
        self._asked: dict[str, _Asked] = {}  # our question waiting in each session
        self._serial = 0
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)

    def _run(self) -> None:
        try:
            with httpx.Client(base_url=self._url, timeout=10.0) as http:
                self._create(http)
                while not self._stop.is_set():
                    self._step(http)
        except httpx.TransportError:
            return  # the server died under this request: its outcome is unknown
        except BaseException as exc:  # reported by the test's main thread
            self.error = exc

    def _step(self, http: httpx.Client) -> None:
        sid = self._rng.choice(self._sessions)
        steps: list[tuple[Callable[[httpx.Client, str], None], int]] = [
            (self._message, 5), (self._mode, 4), (self._goal, 2), (self._end_goal, 1),
            (self._todos, 4), (self._question, 2), (self._answer, 3), (self._compact, 1),
            (lambda h, _s: self._create(h), 1 if len(self._sessions) < 3 else 0),
        ]
        actions, weights = zip(*steps, strict=True)
        self._rng.choices(actions, weights)[0](http, sid)

    def _unique(self) -> str:
        self._serial += 1
        return f"r{self._round}-{self._name}-{self._serial}"

    def _ack(self, kind: str, sid: str, **expect: Any) -> None:
        self._ledger.add(Ack(kind, self._round, sid, expect))

    @staticmethod
    def _answered(response: httpx.Response, *expected: int) -> bool:
        """True for an expected 2xx, False for a refusal; anything else fails the test."""
        if response.status_code in expected:
            return True
        assert response.status_code == REFUSED, (response.request.url, response.text)
        return False

    def _create(self, http: httpx.Client) -> None:
        response = http.post("/v1/sessions", json={"mode": self._rng.choice(MODES[:4])})
        if self._answered(response, 201):
            sid = response.json()["sessionId"]
            self._sessions.append(sid)
            self._ack("session", sid)

    def _message(self, http: httpx.Client, sid: str) -> None:
        content = self._unique()
        role = self._rng.choice(("user", "assistant"))
        response = http.post(f"/v1/sessions/{sid}/messages",
                             json={"role": role, "content": content})
        if self._answered(response, 201):
            self._ack("message", sid, seq=response.json()["seq"], content=content)

    def _state_change(self, sid: str, kind: str, response: httpx.Response) -> None:
        if self._answered(response, 200):
            document = response.json()
            self._ack(kind, sid, version=document["version"],
                      executionState=document["executionState"])

    def _mode(self, http: httpx.Client, sid: str) -> None:
        body: dict[str, Any] = (
            {"cycle": True} if self._rng.random() < 0.4 else {"mode": self._rng.choice(MODES)}
        )
        self._state_change(sid, "mode", http.post(f"/v1/sessions/{sid}/mode", json=body))

    def _goal(self, http: httpx.Client, sid: str) -> None:
        response = http.post(f"/v1/sessions/{sid}/goal", json={"objective": self._unique()})
        self._state_change(sid, "goal", response)

    def _end_goal(self, http: httpx.Client, sid: str) -> None:
        self._state_change(sid, "goal", http.delete(f"/v1/sessions/{sid}/goal"))

    def _todos(self, http: httpx.Client, sid: str) -> None:
        todos = [
            {"content": self._unique(), "status": self._rng.choice(STATUSES),
             "priority": self._rng.choice(PRIORITIES)}
            for _ in range(self._rng.randint(1, 4))
        ]
        response = http.post(f"/v1/sessions/{sid}/tool-calls",
                             json={"tool": "TodoWrite", "input": {"todos": todos}})
        if self._answered(response, 200):
            call = response.json()
            assert call["status"] == "completed" and call["success"] is True, call
            self._ack("todos", sid, callId=call["callId"], todos=todos)

    def _question(self, http: httpx.Client, sid: str) -> None:
        waiting = self._asked.get(sid)
        if waiting is not None and time.monotonic() - waiting.at < self._question_wait_s:
            return  # one question of ours at a time per session, so queues stay short
        response = http.post(f"/v1/sessions/{sid}/tool-calls",
                             json={"tool": "AskUserQuestion", "input": QUESTION})
        if self._answered(response, 202):
            pending = response.json()
            answer = self._rng.random() < 0.5  # else it is left to its timer
            self._asked[sid] = _Asked(
                pending["callId"], pending["interactionId"], time.monotonic(), answer
            )
            self._ack("question", sid, callId=pending["callId"],
                      interactionId=pending["interactionId"])

    def _answer(self, http: httpx.Client, sid: str) -> None:
        waiting = self._asked.get(sid)
        if waiting is None or not waiting.answer:
            return
        del self._asked[sid]
        response = http.post(
            f"/v1/sessions/{sid}/interactions/{waiting.interaction_id}/respond",
            json={"decision": "modify", "input": ANSWERED},
        )
        if self._answered(response, 200):  # 409: it auto-continued first
            assert response.json()["success"] is True, response.text
            self._ack("answer", sid, callId=waiting.call_id,
                      interactionId=waiting.interaction_id)

    def _compact(self, http: httpx.Client, sid: str) -> None:
        response = http.post(f"/v1/sessions/{sid}/compact", json={})
        if self._answered(response, 200):
            self._ack("compaction", sid, seq=response.json()["seq"])


# -- checking acknowledgements against the log ---------------------------------------------


def by_session(events: Iterable[RecordedEvent]) -> dict[str, list[RecordedEvent]]:
    """Each session's events in ``seq`` order (the store reads them in global order)."""
    sessions: dict[str, list[RecordedEvent]] = defaultdict(list)
    for event in events:
        sessions[event.session_id].append(event)
    return sessions


def _at(events: Sequence[RecordedEvent], seq: int, type_: str) -> RecordedEvent | None:
    event = events[seq - 1] if 0 < seq <= len(events) else None
    return event if event is not None and event.type == type_ else None


def _of_call(events: Sequence[RecordedEvent], type_: str, call_id: str) -> list[RecordedEvent]:
    return [e for e in events if e.type == type_ and e.causation_id == call_id]


def resolution(events: Sequence[RecordedEvent], iid: str) -> RecordedEvent | None:
    """The ``InteractionResolved`` of interaction ``iid``, if the log holds it."""
    for event in events:
        if event.type == "InteractionResolved" and _data(event)["interactionId"] == iid:
            return event
    return None


def _data(event: RecordedEvent) -> dict[str, Any]:
    return dict(event.data.model_dump(mode="json", by_alias=True))


def _state_at(events: Sequence[RecordedEvent], version: int) -> dict[str, Any] | None:
    if len(events) < version:
        return None
    summary = fold(events[:version])
    return None if summary is None else execution_state_wire(summary.execution)


def _present(ack: Ack, events: Sequence[RecordedEvent]) -> bool:
    """Whether the session's log holds what ``ack`` acknowledged."""
    expect = ack.expect
    if ack.kind == "session":
        return _at(events, 1, "SessionCreated") is not None
    if ack.kind == "message":
        event = _at(events, expect["seq"], "MessageRecorded")
        return event is not None and _data(event)["content"] == expect["content"]
    if ack.kind == "compaction":
        return _at(events, expect["seq"], "ContextCompacted") is not None
    if ack.kind in ("mode", "goal"):
        return _state_at(events, expect["version"]) == expect["executionState"]
    if ack.kind == "todos":
        written = _of_call(events, "TodosWritten", expect["callId"])
        completed = _of_call(events, "ToolCallCompleted", expect["callId"])
        return [_data(e)["todos"] for e in written] == [expect["todos"]] and len(completed) == 1
    if ack.kind == "question":
        return any(e.type == "InteractionRequested"
                   and _data(e)["interactionId"] == expect["interactionId"] for e in events)
    assert ack.kind == "answer", ack
    resolved = resolution(events, expect["interactionId"])
    return resolved is not None and _data(resolved)["decision"] == "modify"


def missing(acks: Iterable[Ack], sessions: dict[str, list[RecordedEvent]]) -> list[Ack]:
    """The acknowledgements the log does not hold (lost changes)."""
    return [a for a in acks if not _present(a, sessions.get(a.session_id, []))]


def open_questions(
    acks: Iterable[Ack], sessions: dict[str, list[RecordedEvent]]
) -> list[Ack]:
    """Acknowledged questions the log holds unresolved: their timers must survive a restart."""
    return [
        a for a in acks
        if a.kind == "question"
        and resolution(sessions.get(a.session_id, []), a.expect["interactionId"]) is None
    ]


# -- timers re-armed after a restart (HO-7) -------------------------------------------------

TIMES = ("startedAt", "visibleAt", "deadlineAt")


@dataclass(frozen=True)
class Life:
    """One start of the server: spawned (before the process existed) and answering."""

    spawned: datetime
    up: datetime


@dataclass
class Rearmed:
    """How the questions open at a kill were resolved after a restart."""

    at_once: int = 0
    """Their deadline passed while the server was down (or starting): fired as it started."""
    at_deadline: int = 0
    """Fired at the deadline recorded before the kill, by a later life of the server."""
    started_after_restart: int = 0
    """Queued behind another question at the kill: their clock started after it."""
    answered_in_flight: int = 0
    """An answer sent before the kill was committed, its response lost."""


def _instant(text: str) -> datetime:
    return datetime.fromisoformat(text)


def check_timer_resolution(
    events: Sequence[RecordedEvent], resolved: RecordedEvent, *, lives: Sequence[Life],
    head_at_kill: int, slack_s: float, tally: Rearmed,
) -> None:
    """A question open at a kill auto-continued never before the deadline the log recorded,
    and not late for the life of the server that fired it; its times never changed."""
    data = _data(resolved)
    if data["decision"] != "autoContinued":
        tally.answered_in_flight += 1
        return
    timers = [e for e in events if e.type == "InteractionAutoResolutionChanged"
              and _data(e)["interactionId"] == data["interactionId"]]
    assert timers, f"{data['interactionId']} auto-continued without a timer"
    assert len({tuple(_data(t)[k] for k in TIMES) for t in timers}) == 1, timers
    assert resolved.actor == "timer", resolved
    due = _instant(_data(timers[0])["deadlineAt"])
    recorded = _instant(resolved.recorded_at)
    life = [each for each in lives if each.spawned <= recorded][-1]  # the one that fired
    assert recorded >= due, (recorded, due)  # never before the recorded deadline
    assert recorded <= max(due, life.up) + timedelta(seconds=slack_s), (recorded, due, life)
    if timers[0].global_position > head_at_kill:
        tally.started_after_restart += 1
    elif due < life.up:  # passed while the server was down or starting
        tally.at_once += 1
    else:
        tally.at_deadline += 1
