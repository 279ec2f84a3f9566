"""A thread-safe list of callbacks told about something that already happened.

Stores tell listeners about committed events and the runtime tells its subscribers about
state changes; in both cases the fact is durable before anyone hears of it, so a failing
callback is logged and never raised into the code that made the change.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Generic, TypeVar

__all__ = ["Subscribers"]

T = TypeVar("T")
_log = logging.getLogger("eventlog")


class Subscribers(Generic[T]):
    """Callbacks taking one value; ``add`` returns the function that removes it again."""

    def __init__(self) -> None:
        self._callbacks: list[Callable[[T], None]] = []
        self._lock = threading.Lock()

    def add(self, callback: Callable[[T], None]) -> Callable[[], None]:
        with self._lock:
            self._callbacks.append(callback)

        def remove() -> None:
            with self._lock:
                if callback in self._callbacks:
                    self._callbacks.remove(callback)

        return remove

    def __bool__(self) -> bool:
        """Whether anyone listens (publishers skip building values nobody reads)."""
        return bool(self._callbacks)

    def publish(self, value: T) -> None:
        """Call every callback with ``value``, in the order they were added."""
        with self._lock:
            callbacks = list(self._callbacks)
        for callback in callbacks:
            try:
                callback(value)
            except Exception:
                _log.exception("subscriber %r failed", callback)
