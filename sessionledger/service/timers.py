"""The interaction registry's clock: appends what the timer projection says is due (HO-4 … HO-7).

The projection (:mod:`projections.tools`) holds each session's queue with the
timer states and absolute times its events recorded; the pure decision
(:func:`projections.tools.session_due`, over :mod:`statemachine.interaction`)
says which transition is next and when. This module does the I/O: it reads the session's
version *first*, then the projection, and appends the due transition guarded by that
version and by an idempotency key per interaction and state — so two processes on one
database that decide the same transition record it once, and a decision made on a stale
read conflicts and is made again. The auto-continue at the deadline is the executor's
answer step (:meth:`~sessionledger.tools.executor.ToolExecutor.auto_continue`), so the call
document reads completed as soon as it is appended.

:meth:`TimerService.settle` appends everything due in one session up to now, in order (after
a restart that is every transition missed while the service was down);
:meth:`TimerService.run_due` does it for every session with a timer that may move and
answers the next due instant, which is all the scheduler (:mod:`sessionledger.service.timers`)
needs. User activity (HO-5) is a command here too: recorded, and pausing a running timer for
good.

The scheduler of ``serve`` is here too (:class:`TimerScheduler`): one thread that asks
:meth:`TimerService.run_due` for what is due, woken by the commits that can move a timer.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from eventlog import (
    Clock,
    ConcurrencyConflict,
    EventLogError,
    EventStore,
    NewEvent,
    RecordedEvent,
    StoreClosed,
    UserActivityAction,
)
from projections.tools import (
    SETTINGS_STREAM,
    auto_resolution_wire,
    interaction_wire,
    session_due,
    setting_history,
    timers_of,
)
from statemachine.interaction import (
    Due,
    InteractionTimer,
    Refusal,
    SettingHistory,
    TimerConfig,
    activity_events,
)

from ..errors import (
    Conflict,
    NotFound,
    SessionLedgerError,
)
from ..ledger import Ledger, eventlog_errors
from ..logs import log_event, logger
from ..tools.executor import ToolExecutor

__all__ = [
    "DEFAULT_POLL_S",
    "MAX_STEPS",
    "TimerScheduler",
    "TimerService",
    "WAKE_TYPES",
]


# -- the scheduler of serve: one thread that appends what falls due ----------------------------
#
# The timer scheduler of ``serve``: one thread that appends timer transitions when they fall due.
#
# DESIGN.md "Time": timers are not sleeping coroutines holding state. The state is in the log
# and its projection; this thread only asks :meth:`TimerService.run_due
# <sessionledger.service.timers.TimerService.run_due>` to append whatever is due now and to name the
# next due instant, then sleeps until that instant. It wakes early when this process commits
# an event that can move a timer (a question registered or resolved, a timer change, a setting
# change), and at least every ``poll_s`` seconds, which is how appends by another process on
# the same database reach it (on PostgreSQL the store also tells it of those at once, D116).
# Started with the app and stopped before the store closes, so a restart re-arms every timer
# from the log on its first pass, and deadlines missed while the service was down fire at once,
# in order (HO-7).
#
# Nothing here decides anything: a thread that dies or lags only delays transitions; the times
# they carry are the log's.

DEFAULT_POLL_S = 0.5
WAKE_TYPES = frozenset({
    "InteractionRequested", "InteractionResolved", "InteractionAutoResolutionChanged",
    "SettingChanged",
})
"""Committed event types after which the next due instant may have changed."""
_LATE_S = 0.001
"""Sleep this much past a due instant, so the clock (milliseconds) has surely reached it."""

_scheduler_log = logger.getChild("scheduler")


class TimerScheduler:
    """A daemon thread running :meth:`TimerService.run_due` at the right instants."""

    def __init__(
        self, timers: TimerService, store: EventStore, *, poll_s: float = DEFAULT_POLL_S
    ) -> None:
        if not poll_s > 0:
            raise ValueError("poll_s must be positive")
        self._timers = timers
        self._store = store
        self._poll_s = poll_s
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._unsubscribe: Callable[[], None] | None = None
        self.passes = 0
        """How many passes ran (tests wait on it)."""

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        """Listen to the store's commits and start the thread (once)."""
        if self._thread is not None:
            return
        self._unsubscribe = self._store.subscribe(self._on_commit)
        self._thread = threading.Thread(
            target=self._run, name="sessionledger-timers", daemon=True
        )
        self._thread.start()

    def stop(self, *, timeout: float = 10.0) -> None:
        """Stop listening, end the thread and wait for the pass in flight."""
        self._stopping.set()
        self._wake.set()
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    def wake(self) -> None:
        """Run a pass now (something may have changed)."""
        self._wake.set()

    def _on_commit(self, events: Sequence[RecordedEvent]) -> None:
        # Called on the committing thread while it holds the writer: only a type check.
        for event in events:
            if event.type in WAKE_TYPES:
                self._wake.set()
                return

    def _delay(self) -> float:
        try:
            upcoming = self._timers.run_due()
        except StoreClosed:
            self._stopping.set()
            return 0.0
        except Exception as exc:  # keep the thread alive; the next pass tries again
            log_event(_scheduler_log, "timer pass failed", level=logging.ERROR,
                      error=exc.__class__.__name__, message=str(exc))
            return self._poll_s
        finally:
            self.passes += 1
        if upcoming is None:
            return self._poll_s
        until = (upcoming - self._timers.clock.now()).total_seconds() + _LATE_S
        return min(self._poll_s, max(0.0, until))

    def _run(self) -> None:
        while not self._stopping.is_set():
            self._wake.clear()  # a wake during the pass below is kept for the wait after it
            delay = self._delay()
            if self._stopping.is_set():
                break
            self._wake.wait(delay)


# -- the question timers: what the timer projection says is due, appended (HO-4 … HO-7) --------
#
# The interaction registry's clock: appends what the timer projection says is due (HO-4 … HO-7).
#
# The projection (:mod:`projections.tools`) holds each session's queue with the
# timer states and absolute times its events recorded; the pure decision
# (:func:`projections.tools.session_due`, over :mod:`statemachine.interaction`)
# says which transition is next and when. This module does the I/O: it reads the session's
# version *first*, then the projection, and appends the due transition guarded by that
# version and by an idempotency key per interaction and state — so two processes on one
# database that decide the same transition record it once, and a decision made on a stale
# read conflicts and is made again. The auto-continue at the deadline is the executor's
# answer step (:meth:`~sessionledger.tools.executor.ToolExecutor.auto_continue`), so the call
# document reads completed as soon as it is appended.
#
# :meth:`TimerService.settle` appends everything due in one session up to now, in order (after
# a restart that is every transition missed while the service was down);
# :meth:`TimerService.run_due` does it for every session with a timer that may move and
# answers the next due instant, which is all the scheduler (:class:`TimerScheduler`, above)
# needs. User activity (HO-5) is a command here too: recorded, and pausing a running timer for
# good.

MAX_STEPS = 64
"""Transitions one ``settle`` appends at most (a pass later goes on); a bound, not a limit
any real queue reaches: each interaction moves through at most four timer states."""
_ATTEMPTS = 5

_log = logger.getChild("timers")


class TimerService:
    """Auto-continue timers for the sessions of one store."""

    def __init__(
        self,
        *,
        ledger: Ledger,
        executor: ToolExecutor,
        config: TimerConfig,
        clock: Clock,
    ) -> None:
        self._ledger = ledger
        self._store = ledger.store
        self._executor = executor
        self.config = config
        self.clock = clock

    # -- what the log says ---------------------------------------------------------------

    def settings(self) -> SettingHistory:
        """Every change of ``autoContinueQuestions``, in log order."""
        return setting_history(self._ledger.timer_row(SETTINGS_STREAM))

    def auto_resolutions(self, session_id: str) -> dict[str, dict[str, Any] | None]:
        """``autoResolution`` of each pending interaction of the session (SPEC §11)."""
        with eventlog_errors():
            row = self._ledger.timer_row(session_id)
        if row is None:
            return {}
        return {e["interactionId"]: auto_resolution_wire(e) for e in row.body["queue"]}

    def next_due(self, session_id: str) -> Due | None:
        """The session's next timer transition (due or not)."""
        row = self._ledger.timer_row(session_id)
        return session_due(row, self.settings(), self.config)

    # -- appending what is due -----------------------------------------------------------

    def settle(self, session_id: str, now: datetime | None = None) -> int:
        """Append every transition of the session due at ``now`` (default: the clock), in
        order; the number appended (a lost race appends nothing and decides again)."""
        appended = 0
        conflicts = 0
        while appended < MAX_STEPS and conflicts < _ATTEMPTS:
            moment = now or self.clock.now()
            version = self._store.version(session_id)  # first: the row is at least as new
            due = self.next_due(session_id)
            if due is None or due.at > moment:
                break
            try:
                self._apply(session_id, due, version)
            except ConcurrencyConflict:
                conflicts += 1
                continue
            appended += 1
        return appended

    def _apply(self, session_id: str, due: Due, version: int) -> None:
        if due.event is None:  # the deadline: the executor answers with {} (HO-4, HO-8)
            self._executor.auto_continue(
                session_id, due.interaction_id, expected_version=version,
                idempotency_key=due.idempotency_key,
            )
            return
        self._ledger.append(
            session_id,
            [NewEvent(due.event, actor="timer", causation_id=due.call_id)],
            expected_version=version, idempotency_key=due.idempotency_key,
        )

    def run_due(self, now: datetime | None = None) -> datetime | None:
        """Settle every session with a timer that may move; the next instant something is
        due (``None`` when nothing is waiting for time). A session that fails is logged and
        skipped; the others go on."""
        moment = now or self.clock.now()
        settings = self.settings()
        upcoming: list[datetime] = []
        for row in self._ledger.watched_timers():
            due = session_due(row, settings, self.config)
            if due is not None and due.at <= moment:
                self._settle_logged(row.key, moment)
                due = self.next_due(row.key)
            if due is not None:
                upcoming.append(due.at)
        return min(upcoming) if upcoming else None

    def settle_quietly(self, session_id: str, now: datetime | None = None) -> None:
        """:meth:`settle` after a change that already succeeded (a call now waits, an answer
        moved the queue): a failure is logged, and the scheduler's next pass retries it."""
        self._settle_logged(session_id, now or self.clock.now())

    def _settle_logged(self, session_id: str, now: datetime) -> None:
        try:
            self.settle(session_id, now)
        except (StoreClosed, KeyboardInterrupt):
            raise
        except (SessionLedgerError, EventLogError) as exc:
            log_event(_log, "timer step failed", sessionId=session_id,
                      error=exc.__class__.__name__, message=str(exc))

    # -- user activity (HO-5) ------------------------------------------------------------

    def activity(
        self, session_id: str, interaction_id: str, action: UserActivityAction = "other"
    ) -> dict[str, Any]:
        """Record a user action on a pending interaction; the interaction afterwards.

        Whatever fell due before now is appended first (a question past its deadline has
        auto-continued, so activity on it is 409 like on any resolved one). Then a running
        timer pauses for good, with its times kept; a question not started yet becomes
        ineligible; a paused or ineligible one only records the action.
        """
        with eventlog_errors():
            self._ledger.live(session_id)
            self.settle(session_id)

            def attempt() -> dict[str, Any]:
                version = self._store.version(session_id)
                timer = self._pending_timer(session_id, interaction_id)
                events = activity_events(timer, action, self.clock.now())
                if isinstance(events, Refusal):
                    raise Conflict(events.message, details={"interactionId": interaction_id})
                self._ledger.append(
                    session_id,
                    [NewEvent(e, actor="user", causation_id=timer.call_id) for e in events],
                    expected_version=version,
                )
                return self.interaction(session_id, interaction_id)

            return self._ledger.retry(session_id, attempt)

    def _pending_timer(self, session_id: str, interaction_id: str) -> InteractionTimer:
        found = self._ledger.interaction(interaction_id)
        if found is None or found.session_id != session_id:
            raise NotFound(f"no interaction {interaction_id!r} in session {session_id!r}")
        if found.status != "pending":
            raise Conflict(f"interaction {interaction_id!r} was already resolved",
                           details={"interactionId": interaction_id})
        row = self._ledger.timer_row(session_id)
        for timer in timers_of(row):
            if timer.interaction_id == interaction_id:
                return timer
        raise Conflict(f"interaction {interaction_id!r} was already resolved",
                       details={"interactionId": interaction_id})

    def interaction(self, session_id: str, interaction_id: str) -> dict[str, Any]:
        """One pending interaction as the session document lists it, with its timer."""
        found = self._ledger.interaction(interaction_id)
        if found is None or found.session_id != session_id:
            raise NotFound(f"no interaction {interaction_id!r} in session {session_id!r}")
        wire = interaction_wire(found)
        wire["autoResolution"] = self.auto_resolutions(session_id).get(interaction_id)
        return wire
