"""Per-session projection state kept in memory, valid exactly at a chain head (D74).

An inline projection folds each appended batch into its table, which usually means reading
the session's current row first. The hash chain says for free whether what this process
folded last is still current: a batch of a session chains from that session's head hash, so
the state folded up to event ``h`` is the session's state for the next batch exactly when
that batch's first event has ``prev_hash == h``. Anything else — another process appended,
the transaction that folded it rolled back, the cache was cleared — simply misses, and the
projection reads its table as before. Nothing needs invalidating but a purge (the session's
events go) and a rebuild (the table goes), whose hooks call :meth:`ChainCache.forget` and
:meth:`ChainCache.clear`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Generic, TypeVar

from eventlog import RecordedEvent

__all__ = ["ChainCache", "session_spans"]

T = TypeVar("T")
_LIMIT = 4096
"""Sessions remembered before the cache starts afresh (a server's working set is far smaller;
starting afresh only costs reads). A todo list of 20 items is a few kilobytes."""


def session_spans(events: Iterable[RecordedEvent]) -> dict[str, tuple[str, str]]:
    """Per session of ``events``: the head its first event chains from, and its last hash."""
    spans: dict[str, tuple[str, str]] = {}
    for event in events:
        span = spans.get(event.session_id)
        spans[event.session_id] = (event.prev_hash if span is None else span[0], event.hash)
    return spans


class ChainCache(Generic[T]):
    """A value per session, each remembered with the head hash it is the state at."""

    __slots__ = ("_values",)

    def __init__(self) -> None:
        self._values: dict[str, tuple[str, T]] = {}

    def get(self, session_id: str, head: str) -> tuple[bool, T | None]:
        """``(True, value)`` when the session's value at ``head`` is known, else
        ``(False, None)``."""
        held = self._values.get(session_id)
        if held is None or held[0] != head:
            return False, None
        return True, held[1]

    def put(self, session_id: str, head: str, value: T) -> None:
        if len(self._values) >= _LIMIT and session_id not in self._values:
            self._values.clear()
        self._values[session_id] = (head, value)

    def advance(self, spans: dict[str, tuple[str, str]], skip: Sequence[str] = ()) -> None:
        """Carry each known value over a batch that did not change it: the value at the
        batch's first head is the value at its last (sessions in ``skip`` were put anew)."""
        values = self._values
        for session_id, (first, last) in spans.items():
            held = values.get(session_id)
            if held is not None and held[0] == first and session_id not in skip:
                values[session_id] = (last, held[1])

    def forget(self, session_id: str) -> None:
        self._values.pop(session_id, None)

    def clear(self) -> None:
        self._values.clear()
