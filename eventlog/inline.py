"""Inline projections: read models the store updates in the append's own transaction.

The store knows nothing of what a projection means; it only promises that ``apply`` runs in
the same transaction as the rows it is given (so a read model never runs ahead of or behind
the log), that a projection whose ``version`` changed or whose tables are missing is dropped
and rebuilt from the log when the store opens (EL-9), and that ``rebuild_projections``
does the same on demand. ``tx`` is the backend's transaction handle: a ``sqlite3.Connection``
for SQLite, the store itself for the in-memory twin.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import islice
from typing import Any, Protocol

from .envelope import RecordedEvent

__all__ = ["REBUILD_CHUNK", "InlineProjection", "Progress", "chunked"]

REBUILD_CHUNK = 20000
"""Events handed to ``apply`` at a time while rebuilding."""

Progress = Callable[[int, int], None]
"""``progress(done, total)`` — events folded so far out of the log's length."""


class InlineProjection(Protocol):
    """A read model folded from the log inside the append transaction."""

    @property
    def name(self) -> str: ...

    @property
    def version(self) -> int: ...

    def create(self, tx: Any) -> None:
        """Create the projection's tables if missing."""

    def is_present(self, tx: Any) -> bool:
        """Whether the projection's tables exist (a missing one is rebuilt at open)."""

    def drop(self, tx: Any) -> None:
        """Remove the projection's tables and everything in them."""

    def apply(self, tx: Any, events: Sequence[RecordedEvent]) -> None:
        """Fold committed events (any sessions, global order) into the read model."""

    def forget(self, tx: Any, session_id: str) -> None:
        """Remove one session's rows (its events were purged)."""


def chunked(events: Iterable[RecordedEvent], size: int = REBUILD_CHUNK) -> Iterator[
    list[RecordedEvent]
]:
    """Consecutive lists of at most ``size`` events."""
    iterator = iter(events)
    while chunk := list(islice(iterator, size)):
        yield chunk
