"""Structured logs: one JSON object per line, so a log shipper needs no parser.

The server writes one line per HTTP request (request id, method, path, status, duration) and
one per appended batch (session, seq range, types), SPEC §11. Callers log a short event name
and pass the fields as keyword arguments to :func:`log_event`; :class:`JsonLineFormatter`
renders them with the time, level and logger name.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, TextIO

from eventlog import Listener, RecordedEvent, format_instant

__all__ = [
    "JsonLineFormatter",
    "batch_logger",
    "configure_logging",
    "log_event",
    "logger",
]

logger = logging.getLogger("sessionledger")
"""The application's logger; children are ``sessionledger.http`` and ``sessionledger.log``."""

_FIELDS = "sessionledger_fields"


class JsonLineFormatter(logging.Formatter):
    """Render a record as one JSON line: ``ts``, ``level``, ``logger``, ``event`` + fields."""

    def format(self, record: logging.LogRecord) -> str:
        payload: dict[str, Any] = {
            "ts": format_instant(datetime.fromtimestamp(record.created, UTC)),
            "level": record.levelname.lower(),
            "logger": record.name,
            "event": record.getMessage(),
        }
        fields = getattr(record, _FIELDS, None)
        if isinstance(fields, dict):
            payload.update(fields)
        if record.exc_info:
            payload["exception"] = self.formatException(record.exc_info)
        return json.dumps(payload, ensure_ascii=False, default=str)


def configure_logging(
    *, level: int = logging.INFO, stream: TextIO | None = None,
    names: Sequence[str] = ("sessionledger",),
) -> None:
    """Send the named loggers' records to ``stream`` (stderr) as JSON lines; idempotent.

    ``serve`` also passes ``uvicorn`` so the server's own start and stop lines are JSON too.
    """
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonLineFormatter())
    for name in names:
        target = logging.getLogger(name)
        for old in list(target.handlers):
            if isinstance(old.formatter, JsonLineFormatter):
                target.removeHandler(old)
        target.addHandler(handler)
        target.setLevel(level)
        target.propagate = False


def log_event(
    target: logging.Logger, event: str, *, level: int = logging.INFO, **fields: Any
) -> None:
    """Log ``event`` with structured ``fields`` (rendered as top-level JSON keys)."""
    if target.isEnabledFor(level):
        target.log(level, event, extra={_FIELDS: fields})


def _runs(events: Sequence[RecordedEvent]) -> list[list[RecordedEvent]]:
    """Split committed events into runs of one session with consecutive ``seq``."""
    runs: list[list[RecordedEvent]] = []
    for event in events:
        last = runs[-1][-1] if runs else None
        if last is not None and last.session_id == event.session_id:
            runs[-1].append(event)
        else:
            runs.append([event])
    return runs


def batch_logger(target: logging.Logger | None = None) -> Listener:
    """A store listener that logs one line per appended batch.

    On PostgreSQL the store also tells its listeners of other processes' appends (D116), so
    each ``serve`` instance sharing a database logs every batch appended to it, once, not
    only its own."""
    log = target or logger.getChild("log")

    def on_commit(events: Sequence[RecordedEvent]) -> None:
        for run in _runs(events):
            log_event(
                log,
                "appended",
                sessionId=run[0].session_id,
                fromSeq=run[0].seq,
                toSeq=run[-1].seq,
                count=len(run),
                fromPosition=run[0].global_position,
                toPosition=run[-1].global_position,
                types=sorted({e.type for e in run}),
            )

    return on_commit
