"""Time for the log: one injectable clock and one wire format for instants.

Production uses :class:`SystemClock`; tests use :class:`ManualClock` and advance it. Every
instant the service records or shows is rendered by :func:`format_instant` so that the same
instant is always the same string (SPEC §11: ISO 8601 UTC with milliseconds and ``Z``).
"""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Protocol

__all__ = ["Clock", "ManualClock", "SystemClock", "format_instant", "now_text", "parse_instant"]


class Clock(Protocol):
    """Source of the current instant, UTC, millisecond precision."""

    def now(self) -> datetime: ...


def _truncate(moment: datetime) -> datetime:
    return moment.replace(microsecond=moment.microsecond // 1000 * 1000)


class SystemClock:
    """The machine's clock, truncated to milliseconds."""

    __slots__ = ("_second",)

    def __init__(self) -> None:
        self._second: tuple[int, str] = (-1, "")
        """The last whole second rendered, and its text (one tuple: replaced atomically)."""

    def now(self) -> datetime:
        return _truncate(datetime.now(UTC))

    def now_text(self) -> str:
        """``format_instant(self.now())`` without building a datetime: every append stamps
        its rows with this, and the datetime round trip was a tenth of a lone append's CPU."""
        second, millis = divmod(time.time_ns() // 1_000_000, 1000)
        cached, text = self._second
        if second != cached:
            text = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
            self._second = (second, text)
        return f"{text}.{millis:03d}Z"


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


def now_text(clock: Clock) -> str:
    """The current instant of ``clock`` in the wire format (fast for :class:`SystemClock`)."""
    if type(clock) is SystemClock:
        return clock.now_text()
    return format_instant(clock.now())


def parse_instant(text: str) -> datetime:
    """Read an instant written by :func:`format_instant` (or any ISO 8601 form)."""
    moment = datetime.fromisoformat(text)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)
