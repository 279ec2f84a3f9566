"""Group commit by flat combining: one writer at a time, many batches per transaction.

Callers queue their batch and take the writer lock. Whoever holds it commits *everything*
queued in one transaction (one fsync) and answers each caller; a caller whose batch was already
committed by another just returns. A lone caller therefore commits on its own thread with no
hand-off, and 32 concurrent callers share a handful of fsyncs (DESIGN "Writing").
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

__all__ = ["GroupCommitter"]

I = TypeVar("I")  # noqa: E741
R = TypeVar("R")


class _Pending(Generic[I, R]):
    __slots__ = ("done", "item", "outcome")

    def __init__(self, item: I) -> None:
        self.item = item
        self.done = False
        self.outcome: R | BaseException | None = None


class GroupCommitter(Generic[I, R]):
    """Serialises commits and combines the queued work of concurrent callers.

    ``commit`` receives the items in arrival order and returns, per item, its result or the
    exception that item alone failed with; if it raises, every item of that group fails.
    """

    def __init__(
        self,
        commit: Callable[[Sequence[I]], Sequence[R | BaseException]],
        *,
        max_group: int = 512,
    ) -> None:
        self._commit = commit
        self._max_group = max_group
        self._queue: list[_Pending[I, R]] = []
        self._queue_lock = threading.Lock()
        self._writer = threading.Lock()

    @property
    def writer_lock(self) -> threading.Lock:
        """Held while a group commits; take it to wait for in-flight work (shutdown)."""
        return self._writer

    def submit(self, item: I) -> R:
        """Commit ``item`` (possibly together with others) and return its result."""
        (outcome,) = self.submit_many([item])
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    def submit_many(self, items: Sequence[I]) -> list[R | BaseException]:
        """Commit several items (in one group when nothing else is queued); outcome each."""
        pending: list[_Pending[I, R]] = [_Pending(item) for item in items]
        with self._queue_lock:
            self._queue.extend(pending)
        with self._writer:
            while not all(p.done for p in pending):
                self._run_group()
        return [p.outcome for p in pending]  # type: ignore[misc]

    def _run_group(self) -> None:
        with self._queue_lock:
            group = self._queue[: self._max_group]
            del self._queue[: self._max_group]
        try:
            outcomes: Sequence[R | BaseException] = self._commit([p.item for p in group])
        except BaseException as exc:  # noqa: BLE001 - every caller of the group gets it
            outcomes = [exc] * len(group)
        for waiting, outcome in zip(group, outcomes, strict=True):
            waiting.outcome = outcome
            waiting.done = True
