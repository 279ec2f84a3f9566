"""Structured logs: one JSON object per line, so a log shipper needs no parser.

The server writes one line per HTTP request (request id, method, path, status, duration) and
one per appended batch (session, seq range, types), docs/spec.md. Callers log a short event name
and pass the fields as keyword arguments to :func:`log_event`; :class:`JsonLineFormatter`
renders them with the time, level and logger name.

The request and batch lines are on the hot path (issue 24): through :mod:`logging` a line
cost ~60 µs (a ``LogRecord``, the caller's frame looked up, a ``datetime``, the formatter).
So when the line would reach only the JSON handler :func:`configure_logging` installs (the
server's case), :func:`log_event` builds the same JSON object itself and writes it with one
call under the handler's lock; anything else (a test's ``caplog``, a handler added by an
embedding program) gets the ``LogRecord`` as before. A level that is off costs one check.

Running out of file descriptors is one condition, logged as one line when it starts
(``descriptors_exhausted``) and one when descriptors are available again
(``descriptors_available``, with how often it was met): :data:`descriptor_shortage`. The JSON
handler turns every record that carries such an error into a report to it instead of a
traceback — asyncio's accept loop logs one per connection it cannot accept (up to the listen
backlog per loop turn), which wrote hundreds of megabytes in minutes (issue 19).
"""

from __future__ import annotations

import json
import logging
import sys
import threading
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any, TextIO

from eventlog import Listener, RecordedEvent, SystemClock, descriptors_exhausted, format_instant

__all__ = [
    "DescriptorShortage",
    "LOG_FORMATS",
    "LOG_LEVELS",
    "HumanLineFormatter",
    "JsonLineFormatter",
    "batch_logger",
    "configure_logging",
    "descriptor_shortage",
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
        return _ENCODER.encode(payload)


_ENCODER = json.JSONEncoder(ensure_ascii=False, default=str)
"""``json.dumps(…, ensure_ascii=False, default=str)``, built once (not per line)."""


class _JsonLineHandler(logging.StreamHandler[TextIO]):
    """The handler :func:`configure_logging` installs: a stream of JSON lines, which
    :func:`log_event` may write a whole line to directly (:meth:`write_line`)."""

    def write_line(self, line: str) -> None:
        """What ``emit`` writes for a record rendered as ``line``: the line and a newline,
        flushed, under the handler's lock (as ``handle`` holds it around ``emit``)."""
        with self.lock:  # type: ignore[union-attr]  # created by Handler.__init__
            self.stream.write(line + self.terminator)
            self.flush()


def _json_handler_alone(target: logging.Logger, level: int) -> _JsonLineHandler | None:
    """The one handler a record of ``target`` at ``level`` would reach when it is the JSON
    handler, with no filter on the way that could drop or change it; else ``None``."""
    if target.filters:
        return None
    found: _JsonLineHandler | None = None
    current: logging.Logger | None = target
    while current is not None:  # as Logger.callHandlers walks
        for handler in current.handlers:
            if found is not None or type(handler) is not _JsonLineHandler:
                return None
            found = handler
        if not current.propagate:
            break
        current = current.parent
    if found is None or level < found.level:
        return None
    return found


_CLOCK = SystemClock()
_LEVEL_NAMES: dict[int, str] = {}


class DescriptorShortage:
    """The condition "no file descriptor left", logged once when it starts and once when it
    ends, however often it is met in between.

    :meth:`report` is called wherever it is met (any thread); while it lasts, a timer checks
    every ``probe_s`` whether a descriptor can be opened (``exhausted``); it has ended when
    two checks in a row could (a descriptor freed for a moment does not end it).
    """

    def __init__(self, target: logging.Logger, *, probe_s: float = 1.0,
                 exhausted: Callable[[], bool] = descriptors_exhausted) -> None:
        self._log = target
        self._probe_s = probe_s
        self._exhausted = exhausted
        self._lock = threading.Lock()
        self._since: float | None = None
        self._count = 0
        self._sources: set[str] = set()
        self._free_checks = 0

    @property
    def active(self) -> bool:
        return self._since is not None

    def report(self, source: str) -> None:
        """The condition was met by ``source`` (``accept``, ``request``, ...)."""
        with self._lock:
            self._count += 1
            self._sources.add(source)
            if self._since is not None:
                return
            self._since = time.monotonic()
        log_event(self._log, "descriptors_exhausted", level=logging.ERROR, source=source,
                  limit=_descriptor_limit())
        self._schedule()

    def _schedule(self) -> None:
        timer = threading.Timer(self._probe_s, self._probe)
        timer.daemon = True
        timer.start()

    def _probe(self) -> None:
        if self._exhausted():
            self._free_checks = 0
        else:
            self._free_checks += 1
        if self._free_checks < 2:
            self._schedule()
            return
        self._free_checks = 0
        with self._lock:
            since, self._since = self._since, None
            count, self._count = self._count, 0
            sources, self._sources = sorted(self._sources), set()
        duration = round(time.monotonic() - (since or time.monotonic()), 1)
        log_event(self._log, "descriptors_available", occurrences=count, sources=sources,
                  durationS=duration)


def _descriptor_limit() -> int | None:
    try:
        import resource
    except ImportError:  # not on Windows
        return None
    return int(resource.getrlimit(resource.RLIMIT_NOFILE)[0])


descriptor_shortage = DescriptorShortage(logger)
"""The process's one record of the condition (serve's log)."""


class _ShortageFilter(logging.Filter):
    """Drop a record whose exception is "no descriptor left", reporting the condition."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, OSError) and descriptors_exhausted(exc):
            descriptor_shortage.report("accept" if record.name == "asyncio" else record.name)
            return False
        return True


class HumanLineFormatter(logging.Formatter):
    """Render a record for a person at a terminal: ``06:01:02 warning  what  key=value``
    (local time; the level only when it is not info; fields in the order given)."""

    def format(self, record: logging.LogRecord) -> str:
        when = time.strftime("%H:%M:%S", time.localtime(record.created))
        level = "" if record.levelno == logging.INFO else f"{record.levelname.lower()} "
        message = record.getMessage()
        line = f"{when} {level}{message if message.isprintable() else json.dumps(message)}"
        fields = getattr(record, _FIELDS, None)
        if isinstance(fields, dict) and fields:
            line += "  " + " ".join(f"{key}={_human_value(value)}" for key, value in fields.items())
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


def _human_value(value: Any) -> str:
    """``value`` as one word a terminal shows as it is: JSON-quoted when it has a space or a
    character that is not printable (an escape sequence a client put in a path would steer
    the operator's terminal)."""
    text = value if isinstance(value, str) else _ENCODER.encode(value)
    shown = text.isprintable() and not any(c.isspace() for c in text)
    return text if text and shown else json.dumps(text)


_ROUTINE = frozenset({"request", "appended", "starting", "listening", "stopped"})
"""Lines a person at a terminal sees only at ``--log-level debug``: one per request and per
appended batch (a busy session writes thousands), and the start and stop the URL line and
the prompt already say."""


class _QuietFilter(logging.Filter):
    """In the human format below debug: drop :data:`_ROUTINE` lines and uvicorn's chatter
    (``Started server process``, ``Waiting for application startup``); warnings pass."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.WARNING:
            return True
        return not record.name.startswith("uvicorn") and record.getMessage() not in _ROUTINE


LOG_FORMATS = ("json", "human")
LOG_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING,
              "error": logging.ERROR}


def configure_logging(
    *, level: int = logging.INFO, stream: TextIO | None = None,
    names: Sequence[str] = ("sessionledger",), human: bool = False,
) -> None:
    """Send the named loggers' records to ``stream`` (stderr) as JSON lines, or ``human``
    lines for a terminal; idempotent.

    ``serve`` also passes ``uvicorn`` and ``asyncio`` so the server's own start and stop lines
    and the event loop's errors are JSON too. A record carrying an error that means "no file
    descriptor left" is reported to :data:`descriptor_shortage` instead of written. The human
    lines leave out the routine ones (:data:`_ROUTINE`) unless ``level`` is debug.
    """
    handler: logging.StreamHandler[TextIO]
    if human:
        handler = logging.StreamHandler(sys.stderr if stream is None else stream)
        handler.setFormatter(HumanLineFormatter())
        if level > logging.DEBUG:
            handler.addFilter(_QuietFilter())
    else:
        handler = _JsonLineHandler(sys.stderr if stream is None else stream)
        handler.setFormatter(JsonLineFormatter())
    handler.addFilter(_ShortageFilter())
    for name in names:
        target = logging.getLogger(name)
        for old in list(target.handlers):
            if isinstance(old.formatter, JsonLineFormatter | HumanLineFormatter):
                target.removeHandler(old)
        target.addHandler(handler)
        target.setLevel(level)
        target.propagate = False


def log_event(
    target: logging.Logger, event: str, *, level: int = logging.INFO, **fields: Any
) -> None:
    """Log ``event`` with structured ``fields`` (rendered as top-level JSON keys).

    The line is the one :class:`JsonLineFormatter` renders, written straight to the JSON
    handler when it is the only one the record would reach (the module's docstring)."""
    if not target.isEnabledFor(level):
        return
    handler = _json_handler_alone(target, level)
    if handler is None:
        target.log(level, event, extra={_FIELDS: fields})
        return
    name = _LEVEL_NAMES.get(level)
    if name is None:
        name = _LEVEL_NAMES[level] = logging.getLevelName(level).lower()
    payload: dict[str, Any] = {
        "ts": _CLOCK.now_text(), "level": name, "logger": target.name, "event": event,
    }
    payload.update(fields)
    try:
        handler.write_line(_ENCODER.encode(payload))
    except Exception:  # as a handler's emit does: reported, never raised to the caller
        handler.handleError(target.makeRecord(
            target.name, level, __file__, 0, event, (), None, extra={_FIELDS: fields}))


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
