"""A gate for tests of "at most N at once": calls wait at it, counted, until it opens."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

__all__ = ["Gate"]


class Gate:
    """Wrap a function so each call waits at the gate (up to ``hold_s``) before running it;
    :attr:`running` is how many wait now, :attr:`most` the most that ever waited at once."""

    def __init__(self, hold_s: float = 20.0) -> None:
        self.running = 0
        self.most = 0
        self.hold_s = hold_s
        self._lock = threading.Lock()
        self._open = threading.Event()

    def wrap(self, real: Callable[..., Any]) -> Callable[..., Any]:
        def held(*args: Any) -> Any:
            with self._lock:
                self.running += 1
                self.most = max(self.most, self.running)
            self._open.wait(self.hold_s)
            with self._lock:
                self.running -= 1
            return real(*args)

        return held

    def wait_for(self, count: int, timeout: float = 10.0) -> None:
        """Until ``count`` calls wait at the gate (or the timeout), then a little longer: time
        for one more to arrive, were it let through."""
        deadline = time.monotonic() + timeout
        while self.running < count and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.2)

    def open(self) -> None:
        self._open.set()
