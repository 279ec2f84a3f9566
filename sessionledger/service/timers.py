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
answers the next due instant (a request turning the setting off, the tests' clock ticks).
User activity (HO-5) is a command here too: recorded, and pausing a running timer for good.

The scheduler of ``serve`` is here too (:class:`TimerScheduler`): one thread with an index of
each waiting session's next due instant (:class:`DueIndex`), kept current from the commits it
hears, settling each session when its instant comes (issue 24: no scan per question or poll).
"""

from __future__ import annotations

import heapq
import logging
import threading
import time
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
    "DEFAULT_RESCAN_S",
    "DueIndex",
    "MAX_STEPS",
    "TimerScheduler",
    "TimerService",
    "WAKE_TYPES",
]


# -- the scheduler of serve: one thread that appends what falls due ----------------------------
#
# The timer scheduler of ``serve``: one thread that appends timer transitions when they fall due.
#
# docs/architecture.md, "Question timers": timers are not sleeping coroutines holding state. The
# state is in the log and its projection; this thread keeps only an index of it — each watched
# session's next due instant, in a heap (:class:`DueIndex`) — loaded from the projection on its
# first pass (so a restart re-arms every timer from the log, and deadlines missed while the service
# was down fire at once, in order: HO-7) and kept current from the commits it hears: a committed
# batch that can move a timer (a question registered or resolved, a timer change, a deleted session)
# marks its sessions, and the next pass re-reads only their rows, by key. A setting change can move
# every timer, so it reloads the index, as does a pass that failed. A pass then asks
# :meth:`TimerService.settle_quietly` for the sessions whose instant has come, and the thread sleeps
# until the next instant or the next commit. What a new question costs is one row read and a heap
# push, whatever the number of sessions waiting (issue 24).
#
# Appends by another process on the same database: on PostgreSQL the store publishes them like
# this process's own (D116). Everywhere, every ``poll_s`` the thread compares the store's head
# position with the positions it heard committed; only when some are missing does it read the
# events after its cursor (what it did not hear: another process's) and mark their sessions.
# Idle, that is one cheap query per ``poll_s``. Every ``rescan_s`` (5 minutes) the index is
# reloaded from the projection anyway: a bound on how late a transition could be if a commit
# was ever missed, at the cost of one read of the watched rows.
#
# Nothing here decides anything: a thread that dies or lags only delays transitions; the times
# they carry are the log's. An index entry that is early costs only a re-read; entries are
# never late, since a due instant changes only with a commit of its session or of the setting.

DEFAULT_POLL_S = 0.5
DEFAULT_RESCAN_S = 300.0
WAKE_TYPES = frozenset({
    "InteractionRequested", "InteractionResolved", "InteractionAutoResolutionChanged",
    "SettingChanged", "SessionDeleted",
})
"""Committed event types after which the next due instant of their stream may have changed."""
_LATE_S = 0.001
"""Sleep this much past a due instant, so the clock (milliseconds) has surely reached it."""

_scheduler_log = logger.getChild("scheduler")


class DueIndex:
    """Each session's next due instant, in a heap with lazy invalidation: setting a key pushes
    an entry, and entries that no longer match their key's instant are dropped when they reach
    the top (or all at once when they outnumber the live ones)."""

    def __init__(self) -> None:
        self._at: dict[str, datetime] = {}
        self._heap: list[tuple[datetime, str]] = []

    def __len__(self) -> int:
        return len(self._at)

    def __contains__(self, key: object) -> bool:
        return key in self._at

    def clear(self) -> None:
        self._at.clear()
        self._heap.clear()

    def set(self, key: str, at: datetime | None) -> None:
        """``key`` is next due at ``at`` (``None``: nothing waits for time)."""
        if at is None:
            if self._at.pop(key, None) is None:
                return
        elif self._at.get(key) == at:
            return
        else:
            self._at[key] = at
            heapq.heappush(self._heap, (at, key))
        if len(self._heap) > 2 * len(self._at) + 64:
            self._heap = [(at, key) for key, at in self._at.items()]
            heapq.heapify(self._heap)

    def next(self) -> datetime | None:
        """The earliest instant, or ``None`` when the index is empty."""
        heap = self._heap
        while heap and self._at.get(heap[0][1]) != heap[0][0]:
            heapq.heappop(heap)
        return heap[0][0] if heap else None

    def pop_due(self, now: datetime) -> list[str]:
        """Remove and answer the keys due at ``now``, earliest first."""
        keys: list[str] = []
        while (at := self.next()) is not None and at <= now:
            _, key = heapq.heappop(self._heap)
            del self._at[key]
            keys.append(key)
        return keys


class TimerScheduler:
    """A daemon thread appending timer transitions at the right instants, from a due-time
    index kept current by the commits it hears."""

    def __init__(
        self, timers: TimerService, store: EventStore, *, poll_s: float = DEFAULT_POLL_S,
        rescan_s: float = DEFAULT_RESCAN_S,
    ) -> None:
        if not (poll_s > 0 and rescan_s > 0):
            raise ValueError("poll_s and rescan_s must be positive")
        self._timers = timers
        self._store = store
        self._poll_s = poll_s
        self._rescan_s = rescan_s
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._unsubscribe: Callable[[], None] | None = None
        # what the committing threads hand over (under the lock)
        self._lock = threading.Lock()
        self._dirty: set[str] = set()
        self._heard: list[int] = []
        self._reload = True
        # the thread's own
        self._index = DueIndex()
        self._settings = SettingHistory()
        self._retry: set[str] = set()
        self._cursor: int | None = None
        self._ahead: set[int] = set()
        self._check_at = 0.0
        self._rescan_at = 0.0
        self.passes = 0
        """How many passes ran (tests wait on it)."""

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    @property
    def index(self) -> DueIndex:
        """The sessions waiting for time and when (read it only between passes)."""
        return self._index

    def start(self) -> None:
        """Listen to the store's commits and start the thread (once)."""
        if self._thread is not None:
            return
        self.listen()
        self._thread = threading.Thread(
            target=self._run, name="sessionledger-timers", daemon=True
        )
        self._thread.start()

    def listen(self) -> None:
        """Listen to the store's commits (done by :meth:`start`; alone, a test then runs the
        passes itself with :meth:`run_pass`)."""
        if self._unsubscribe is None:
            self._unsubscribe = self._store.subscribe(self._on_commit)

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
        """Run a pass now (time may have passed: what is due is appended)."""
        self._wake.set()

    def _on_commit(self, events: Sequence[RecordedEvent]) -> None:
        # Called on the committing thread while it holds the writer: note what it committed.
        touched = [e.session_id for e in events if e.type in WAKE_TYPES]
        with self._lock:
            self._heard.extend(e.global_position for e in events)
            self._dirty.update(touched)
        if touched:
            self._wake.set()

    def run_pass(self) -> float:
        """One pass: bring the index up to date, append what is due; the seconds until the
        next pass is needed (the next due instant, the next check for other processes'
        appends, or the next rescan, whichever comes first)."""
        try:
            return self._pass()
        except StoreClosed:
            self._stopping.set()
            return 0.0
        except Exception as exc:  # keep the thread alive; the next pass reloads and tries again
            log_event(_scheduler_log, "timer pass failed", level=logging.ERROR,
                      error=exc.__class__.__name__, message=str(exc))
            with self._lock:
                self._reload = True
            return self._poll_s
        finally:
            self.passes += 1

    def _pass(self) -> float:
        timers = self._timers
        tick = time.monotonic()
        with self._lock:
            reload, self._reload = self._reload or tick >= self._rescan_at, False
            dirty, self._dirty = self._dirty, set()
        if tick >= self._check_at:
            self._check_at = tick + self._poll_s
            dirty |= self._catch_up()
            dirty |= self._retry
            self._retry = set()
        if reload or SETTINGS_STREAM in dirty:  # a setting can move every timer
            self._rescan_at = tick + self._rescan_s
            self._settings = timers.settings()
            self._index.clear()
            for key, at in timers.due_at(None, self._settings).items():
                self._index.set(key, at)
        elif dirty:
            for key, at in timers.due_at(sorted(dirty), self._settings).items():
                self._index.set(key, at)
        now = timers.clock.now()
        for key in self._index.pop_due(now):
            timers.settle_quietly(key, now)
            with self._lock:  # what it appended is read just below; later commits mark it again
                self._dirty.discard(key)
            at = timers.due_at([key], self._settings)[key]
            if at is not None and at <= now:  # it failed, lost races or hit its bound
                self._retry.add(key)  # tried again at the next check, not at once
            else:
                self._index.set(key, at)
        wait = min(self._check_at, self._rescan_at) - time.monotonic()
        upcoming = self._index.next()
        if upcoming is not None:
            until = (upcoming - timers.clock.now()).total_seconds() + _LATE_S
            wait = min(wait, until)
        return max(0.0, wait)

    def _catch_up(self) -> set[str]:
        """The sessions of commits this thread did not hear (another process's), found by
        comparing the store's head position with the positions heard since the cursor."""
        head = self._store.head_position()
        with self._lock:
            heard, self._heard = self._heard, []
        cursor = self._cursor
        if cursor is None:  # the first pass: the reload after this reads everything
            self._cursor = head
            self._ahead = {p for p in heard if p > head}
            return set()
        ours = self._ahead.union(p for p in heard if p > cursor)
        if head <= cursor or sum(1 for p in ours if p <= head) == head - cursor:
            self._cursor = max(cursor, head)  # every position up to the head was heard
            self._ahead = {p for p in ours if p > self._cursor}
            return set()
        touched: set[str] = set()
        last = head
        for event in self._store.read_all(after=cursor):
            last = max(last, event.global_position)
            if event.global_position not in ours and event.type in WAKE_TYPES:
                touched.add(event.session_id)
        self._cursor = last
        self._ahead = {p for p in ours if p > last}
        return touched

    def _run(self) -> None:
        while not self._stopping.is_set():
            self._wake.clear()  # a wake during the pass below is kept for the wait after it
            delay = self.run_pass()
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
# answers the next due instant; the scheduler (:class:`TimerScheduler`, above) reads the rows
# itself (:meth:`TimerService.due_at`) and settles the sessions whose instant has come. User
# activity (HO-5) is a command here too: recorded, and pausing a running timer for good.

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
        """``autoResolution`` of each pending interaction of the session (docs/spec.md)."""
        with eventlog_errors():
            row = self._ledger.timer_row(session_id)
        if row is None:
            return {}
        return {e["interactionId"]: auto_resolution_wire(e) for e in row.body["queue"]}

    def next_due(self, session_id: str) -> Due | None:
        """The session's next timer transition (due or not)."""
        row = self._ledger.timer_row(session_id)
        return session_due(row, self.settings(), self.config)

    def due_at(
        self, keys: Sequence[str] | None, settings: SettingHistory
    ) -> dict[str, datetime | None]:
        """When each of ``keys`` has its next transition (``None``: nothing waits for time),
        from one read of their rows by key; with ``keys`` ``None``, of every session with a
        timer that may move (the scheduler's index)."""
        if keys is None:
            rows = {row.key: row for row in self._ledger.watched_timers()}
            keys = list(rows)
        else:
            rows = self._ledger.timer_rows(list(keys))
        found: dict[str, datetime | None] = {}
        for key in keys:
            row = rows.get(key)
            due = None if row is None or row.status != "watch" else (
                session_due(row, settings, self.config))
            found[key] = None if due is None else due.at
        return found

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
