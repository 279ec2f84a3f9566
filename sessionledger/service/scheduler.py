"""The timer scheduler of ``serve``: one thread that appends timer transitions when they fall due.

DESIGN.md "Time": timers are not sleeping coroutines holding state. The state is in the log
and its projection; this thread only asks :meth:`TimerService.run_due
<sessionledger.service.timers.TimerService.run_due>` to append whatever is due now and to name the
next due instant, then sleeps until that instant. It wakes early when this process commits
an event that can move a timer (a question registered or resolved, a timer change, a setting
change), and at least every ``poll_s`` seconds, which is how appends by another process on
the same database reach it (on PostgreSQL the store also tells it of those at once, D116).
Started with the app and stopped before the store closes, so a restart re-arms every timer
from the log on its first pass, and deadlines missed while the service was down fire at once,
in order (HO-7).

Nothing here decides anything: a thread that dies or lags only delays transitions; the times
they carry are the log's.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence

from eventlog import EventStore, RecordedEvent, StoreClosed

from ..logs import log_event, logger
from .timers import TimerService

__all__ = ["DEFAULT_POLL_S", "WAKE_TYPES", "TimerScheduler"]

DEFAULT_POLL_S = 0.5
WAKE_TYPES = frozenset({
    "InteractionRequested", "InteractionResolved", "InteractionAutoResolutionChanged",
    "SettingChanged",
})
"""Committed event types after which the next due instant may have changed."""
_LATE_S = 0.001
"""Sleep this much past a due instant, so the clock (milliseconds) has surely reached it."""

_log = logger.getChild("scheduler")


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
            log_event(_log, "timer pass failed", level=logging.ERROR,
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
