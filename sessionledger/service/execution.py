"""The execution-state runtime: commands in, events appended, memory and subscribers after.

Every path that changes the mode, the Plan switch or the goal (Shift+Tab, ``/mode``, ``/plan``,
EnterPlanMode, plan approval, goal start/end) comes through :meth:`ExecutionRuntime.execute`,
which keeps ES-6's order: the state machine decides, the events are appended (guarded by
the session's expected version), and only after the append succeeded is the in-memory state
changed and the change published. A failed append leaves memory, projections and subscribers
untouched. A version conflict (another writer got there first) re-reads the state from the
log and decides again (:meth:`~sessionledger.ledger.Ledger.retry`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from eventlog import (
    Event,
    MessageRecorded,
    ModeChangeVia,
    NewEvent,
    RecordedEvent,
)
from eventlog.appending import Subscribers
from eventlog.envelope import Actor
from projections import SessionSummary
from statemachine.execution import Command, ExecutionState, Refusal, decide_events

from ..errors import CommandRefused
from ..ledger import Ledger

__all__ = ["CommandResult", "ExecutionRuntime", "StateListener"]

_STATE_EVENTS = frozenset({"SessionModeChanged", "GoalStarted", "GoalEnded"})


@dataclass(frozen=True, slots=True)
class CommandResult:
    """The state after a command and the events it appended (none if nothing changed)."""

    session_id: str
    state: ExecutionState
    version: int
    events: tuple[RecordedEvent, ...]

    @property
    def changed(self) -> bool:
        return any(e.type != "MessageRecorded" for e in self.events)


StateListener = Callable[[CommandResult], None]
"""Told after memory changed: the session's new state and the events that changed it."""


class ExecutionRuntime:
    """Applies execution-state commands to sessions of one store (ES-6)."""

    def __init__(self, ledger: Ledger) -> None:
        self._ledger = ledger
        self._memory: dict[str, tuple[ExecutionState, int]] = {}
        self._listeners: Subscribers[CommandResult] = Subscribers()
        self._lock = threading.Lock()
        ledger.after_append(self.observe, types=_STATE_EVENTS)  # the plan tools' (#7)

    def subscribe(self, listener: StateListener) -> Callable[[], None]:
        """Call ``listener`` after each change; returns the unsubscribe function."""
        return self._listeners.add(listener)

    def summary(self, session_id: str) -> SessionSummary:
        """The session's summary from the log's projection; 404 or 410 when unusable."""
        return self._ledger.live(session_id)

    def state(self, session_id: str) -> ExecutionState:
        """The in-memory state (loaded from the projection on first use)."""
        with self._lock:
            held = self._memory.get(session_id)
        if held is not None:
            return held[0]
        return self._load(session_id)[0]

    def _load(self, session_id: str) -> tuple[ExecutionState, int]:
        summary = self.summary(session_id)
        loaded = (summary.execution, summary.version)
        self._remember(session_id, *loaded)
        return loaded

    def _remember(self, session_id: str, state: ExecutionState, version: int) -> None:
        with self._lock:
            held = self._memory.get(session_id)
            if held is None or held[1] < version:
                self._memory[session_id] = (state, version)

    def observe(self, session_id: str, events: Sequence[RecordedEvent]) -> None:
        """A batch appended by another path (a plan tool's completion, #7) that may change
        the state: after the append, remember the projection's new state and publish it,
        as :meth:`execute` would (ES-6). Batches without a state event cost one scan. The
        ledger calls it after every append but those of :meth:`execute` itself."""
        changes = tuple(e for e in events if e.type in _STATE_EVENTS)
        if not changes:
            return
        summary = self.summary(session_id)
        self._remember(session_id, summary.execution, summary.version)
        self._listeners.publish(
            CommandResult(session_id, summary.execution, summary.version, changes)
        )

    def forget(self, session_id: str) -> None:
        """Drop the session from memory (deleted or purged)."""
        with self._lock:
            self._memory.pop(session_id, None)

    def execute(
        self,
        session_id: str,
        command: Command,
        *,
        via: ModeChangeVia,
        actor: Actor = "user",
        message: str | None = None,
        causation_id: str | None = None,
    ) -> CommandResult:
        """Decide, append, then remember and publish; raise CommandRefused on a refusal.

        ``message`` (the ``/plan`` task) is recorded as a real user message in the same batch.
        """
        def attempt() -> CommandResult:
            summary = self.summary(session_id)
            current, version = summary.execution, summary.version
            decision = decide_events(current, command, via=via)
            if isinstance(decision, Refusal):
                raise CommandRefused(decision.message, reason=decision.code)
            after, events = decision
            batch: list[Event] = list(events)
            if message is not None:
                batch.append(MessageRecorded(role="user", content=message, source="plan_command"))
            if not batch:
                return CommandResult(session_id, current, version, ())
            with self._ledger.telling_itself(session_id):
                appended = self._ledger.append(  # overtaken: decided again afresh
                    session_id,
                    [NewEvent(e, actor=actor, causation_id=causation_id) for e in batch],
                    expected_version=version,
                )
            result = CommandResult(session_id, after, appended.version, appended.events)
            self._remember(session_id, after, appended.version)
            self._listeners.publish(result)
            return result

        return self._ledger.retry(session_id, attempt)

