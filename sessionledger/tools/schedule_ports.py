"""The cron and off-peak ports (SPEC TR-1, TR-5): when a scheduled prompt is due.

The service records schedules as events and answers "next due" times; it never runs a
prompt — running them is the host's job (docs/tools.md). Two ports:

* :class:`CronPort` validates a five-field cron expression (minute, hour, day of month,
  month, day of week; evaluated in UTC) and computes the next instant it matches after a
  given one. :class:`CroniterCron` is the local implementation over the maintained
  ``croniter`` parser (docs/decisions.md D53). Six-field (seconds) forms, ``@daily``-style
  nicknames and expressions that can never match (``0 0 31 2 *``) are refused.
* :class:`OffPeakPort` answers the next off-peak window at or after an instant.
  :class:`WindowOffPeak` computes it from the host's daily windows in its time zone;
  :class:`OffPeakPorts` opens one per workspace from its ``[offPeak]`` table, or none.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, time, timedelta
from pathlib import Path
from typing import Any, Protocol, cast
from zoneinfo import ZoneInfo

from croniter import CroniterBadDateError, croniter  # type: ignore[import-untyped]

from ..config.workspace import OffPeakConfig, WorkspaceConfig

__all__ = [
    "CRON_FIELDS",
    "CronPort",
    "CroniterCron",
    "InvalidCronExpression",
    "OffPeakPort",
    "OffPeakPorts",
    "WindowOffPeak",
]

CRON_FIELDS = ("minute", "hour", "day of month", "month", "day of week")


class InvalidCronExpression(ValueError):
    """A cron expression the port refuses; the message says why."""


class CronPort(Protocol):
    """Validates cron expressions and says when they are next due."""

    def validate(self, expression: str) -> str:
        """The expression normalised (fields single-spaced); raises
        :class:`InvalidCronExpression`."""

    def next_due(self, expression: str, after: datetime) -> datetime:
        """The first instant after ``after`` the (valid) expression matches, in UTC."""


class CroniterCron:
    """Five-field cron expressions in UTC, parsed and iterated by ``croniter``."""

    def validate(self, expression: str) -> str:
        fields = expression.split()
        if len(fields) != len(CRON_FIELDS):
            raise InvalidCronExpression(
                f"{expression!r} has {len(fields)} field(s); a cron expression has five: "
                f"{', '.join(CRON_FIELDS)} (e.g. '*/15 9-17 * * 1-5')"
            )
        normal = " ".join(fields)
        if not croniter.is_valid(normal):
            raise InvalidCronExpression(
                f"{expression!r} is not a valid cron expression (fields: "
                f"{', '.join(CRON_FIELDS)}; values, ranges a-b, lists a,b, steps */n)"
            )
        try:
            self.next_due(normal, datetime(2000, 1, 1, tzinfo=UTC))
        except CroniterBadDateError:
            raise InvalidCronExpression(f"{expression!r} never matches a date") from None
        return normal

    def next_due(self, expression: str, after: datetime) -> datetime:
        found: Any = croniter(expression, after.astimezone(UTC)).get_next(datetime)
        return cast(datetime, found).astimezone(UTC)


class OffPeakPort(Protocol):
    """The host's off-peak windows."""

    def next_window(self, at: datetime) -> tuple[datetime, datetime]:
        """``(due, end)`` of the window ``at`` falls in (``due`` is ``at`` itself) or else of
        the next one to start; both in UTC."""


class WindowOffPeak:
    """Daily windows ``(start, end)`` in a time zone; an end before the start wraps midnight."""

    def __init__(self, spans: list[tuple[time, time]], timezone: str = "UTC") -> None:
        if not spans:
            raise ValueError("an off-peak port needs at least one window")
        self._spans = spans
        self._zone = ZoneInfo(timezone)

    @classmethod
    def from_config(cls, config: OffPeakConfig) -> WindowOffPeak:
        return cls(config.spans(), config.timezone)

    def next_window(self, at: datetime) -> tuple[datetime, datetime]:
        at = at.astimezone(UTC)
        today = at.astimezone(self._zone).date()
        best: tuple[datetime, datetime] | None = None
        for offset in (-1, 0, 1, 2):
            day = today + timedelta(days=offset)
            for start_time, end_time in self._spans:
                start = datetime.combine(day, start_time, tzinfo=self._zone)
                end_day = day if end_time > start_time else day + timedelta(days=1)
                end = datetime.combine(end_day, end_time, tzinfo=self._zone)
                if end <= at:
                    continue
                window = (max(start, at).astimezone(UTC), end.astimezone(UTC))
                if best is None or window < best:
                    best = window
        assert best is not None  # a daily window always starts within two days
        return best


class OffPeakPorts:
    """Opens the off-peak port of a workspace: its ``[offPeak]`` windows, or none."""

    def __init__(self, config: Callable[[Path], WorkspaceConfig]) -> None:
        self._config = config

    def port(self, workspace: Path) -> OffPeakPort | None:
        off_peak = self._config(workspace).off_peak
        return None if off_peak is None else WindowOffPeak.from_config(off_peak)
