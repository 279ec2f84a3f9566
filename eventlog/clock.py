"""Time for the log: one injectable clock and one wire format for instants.

Production uses :class:`SystemClock`; tests use :class:`ManualClock` and advance it. Every
instant the service records or shows is rendered by :func:`format_instant` so that the same
instant is always the same string (SPEC §11: ISO 8601 UTC with milliseconds and ``Z``).
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from typing import Protocol

__all__ = ["Clock", "ManualClock", "SystemClock", "format_instant", "parse_instant"]


class Clock(Protocol):
    """Source of the current instant, UTC, millisecond precision."""

    def now(self) -> datetime: ...


def _truncate(moment: datetime) -> datetime:
    return moment.replace(microsecond=moment.microsecond // 1000 * 1000)


class SystemClock:
    """The machine's clock, truncated to milliseconds."""

    def now(self) -> datetime:
        return _truncate(datetime.now(UTC))


class ManualClock:
    """A clock that only moves when a test tells it to."""

    def __init__(self, start: datetime | None = None) -> None:
        self._now = _truncate(start or datetime(2026, 1, 1, tzinfo=UTC))
        self._lock = threading.Lock()

    def now(self) -> datetime:
        with self._lock:
            return self._now

    def advance(self, seconds: float) -> datetime:
        with self._lock:
            self._now = _truncate(self._now + timedelta(seconds=seconds))
            return self._now


def format_instant(moment: datetime) -> str:
    """Render an instant as ``2026-11-29T19:10:56.123Z``."""
    return moment.astimezone(UTC).isoformat(timespec="milliseconds")[:-6] + "Z"


def parse_instant(text: str) -> datetime:
    """Read an instant written by :func:`format_instant` (or any ISO 8601 form)."""
    moment = datetime.fromisoformat(text)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)
