"""An event as recorded: its envelope, its ids and its times (EL-1, EG-1, docs/spec.md).

:class:`NewEvent` is a payload with its who/why, :class:`AppendBatch` one atomic append to one
session, :class:`RecordedEvent` an envelope read back and :data:`RawRow` the stored row. A
payload this build cannot decode is read as an :data:`UNDECODABLE` envelope in its place (EG-1);
an unknown type or unreachable version stays a named error (EL-6). Ids are sortable ULIDs with
a kind prefix (:func:`new_id`); every instant comes from an injectable :class:`Clock` and is
written by :func:`format_instant` (ISO 8601 UTC, milliseconds, ``Z``).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, Protocol, get_args

from pydantic import BaseModel, ValidationError
from pydantic_core import PydanticSerializationError

from .catalog import CATALOG, Event
from .encoding import (
    EVENT_MAX_DEPTH,
    JsonShapeError,
    check_json,
    checked_canonical_json,
    envelope_hash,
    fast_encoder,
    tree_encoder,
)
from .errors import EmptyBatch, EventLogError, UnknownEventType, UnknownSchemaVersion
from .upcasting import UpcasterRegistry, decode_payload, default_upcasters

__all__ = [
    "UNDECODABLE",
    "Actor",
    "AppendBatch",
    "AppendResult",
    "Clock",
    "ManualClock",
    "NewEvent",
    "RawRow",
    "RecordedEvent",
    "SessionHead",
    "SystemClock",
    "Undecodable",
    "build_row",
    "decode_row",
    "decode_rows",
    "encode_event",
    "format_instant",
    "new_id",
    "new_session_id",
    "now_text",
    "paged_rows",
    "parse_instant",
    "service_time_ns",
]

Actor = Literal["model", "user", "host", "timer", "system"]

RawRow = tuple[
    int, str, int, str, int, str, str, str, "str | None", "str | None", "str | None", str, str
]
"""(global_position, session_id, seq, type, schema_version, data, recorded_at, actor,
causation_id, correlation_id, idempotency_key, prev_hash, hash) — the EL-9 column order."""


@dataclass(frozen=True, slots=True)
class NewEvent:
    """A payload to append, with who caused it and why."""

    event: Event
    actor: Actor
    causation_id: str | None = None
    correlation_id: str | None = None


@dataclass(frozen=True, slots=True)
class AppendBatch:
    """Events appended to one session atomically, guarded by the expected version.

    ``expected_version=None`` appends at whatever the end is; ``0`` requires a new session.
    """

    session_id: str
    events: tuple[NewEvent, ...]
    expected_version: int | None = None
    idempotency_key: str | None = None

    def __post_init__(self) -> None:
        if not self.events:
            raise EmptyBatch(f"append to {self.session_id} carries no events")


UNDECODABLE = "Undecodable"
"""The ``type`` an event is read with when its stored payload cannot be decoded (EG-1)."""

_REASON_CHARS = 300


class Undecodable(Event):
    """What is known of a stored event this build cannot decode (EG-1): its type and
    payload text exactly as stored (text that is not UTF-8 has its bad bytes escaped as
    ``\\xNN``) and why it could not be read. Never appended: not in the catalog."""

    type: Literal["Undecodable"] = "Undecodable"
    reason: str
    stored_data: str
    stored_type: str


def _printable(value: object) -> str:
    """``value`` as text that can always be written as UTF-8 JSON."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "backslashreplace")
    text = value if isinstance(value, str) else repr(value)
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _reason(exc: BaseException) -> str:
    """One short line saying why a payload could not be decoded."""
    if isinstance(exc, ValidationError) and exc.errors():
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        text = f"{first['type']}{' at ' + where if where else ''}: {first['msg']}"
    else:
        text = f"{exc.__class__.__name__}: {exc}"
    text = _printable(" ".join(text.split()))
    return text if len(text) <= _REASON_CHARS else text[: _REASON_CHARS - 1] + "…"


@dataclass(slots=True)
class RecordedEvent:
    """One stored event with its envelope (EL-1).

    Read-only by convention, not frozen: replay builds millions of these and a frozen
    dataclass's ``__init__`` costs three times as much (the payload ``data`` is frozen).
    """

    global_position: int
    session_id: str
    seq: int
    type: str
    schema_version: int
    data: Event
    recorded_at: str
    actor: str
    causation_id: str | None
    correlation_id: str | None
    prev_hash: str
    hash: str

    def to_wire(self) -> dict[str, Any]:
        """The camelCase shape of docs/spec.md (events API, SSE, CLI ``--json``)."""
        return {
            "seq": self.seq,
            "globalPosition": self.global_position,
            "sessionId": self.session_id,
            "type": self.type,
            "schemaVersion": self.schema_version,
            "data": self.data.model_dump(mode="json", by_alias=True, exclude={"type"}),
            "recordedAt": self.recorded_at,
            "actor": self.actor,
            "causationId": self.causation_id,
            "correlationId": self.correlation_id,
            "prevHash": self.prev_hash,
            "hash": self.hash,
        }


@dataclass(frozen=True, slots=True)
class AppendResult:
    """Where a batch landed; ``replayed`` is true when an idempotency key matched."""

    session_id: str
    events: tuple[RecordedEvent, ...] = field(default=())
    replayed: bool = False

    @property
    def version(self) -> int:
        return self.events[-1].seq

    @property
    def positions(self) -> tuple[int, ...]:
        return tuple(e.global_position for e in self.events)


@dataclass(frozen=True, slots=True)
class SessionHead:
    """A session's position in the log: version, head hash and when it was written."""

    session_id: str
    version: int
    head_hash: str
    created_at: str
    updated_at: str


_NO_TYPE = frozenset({"type"})
_encoders: dict[type[Event], tuple[Callable[[Any], str], tuple[tuple[str, str], ...]]] = {}


def _general_encode(event: Any) -> str:
    data = event.model_dump(mode="json", by_alias=True, exclude=_NO_TYPE)
    return checked_canonical_json(data, max_depth=EVENT_MAX_DEPTH)  # any text, any field


def _holds_any(annotation: Any) -> bool:
    return annotation is Any or any(_holds_any(arg) for arg in get_args(annotation))


def _free_form(model: type[BaseModel]) -> tuple[tuple[str, str], ...]:
    """``(attribute, wire name)`` of each field of ``model`` holding free-form JSON (a tool
    input, a result, a payload): the only parts of an event a caller can nest at will."""
    return tuple((name, field.alias or name) for name, field in model.model_fields.items()
                 if _holds_any(field.annotation))


def encode_event(event: Event) -> str:
    """The canonical JSON stored in the ``data`` column (pydantic's own writer when that is
    exactly canonical for the event's type, or for its plain free-form values; see
    :mod:`eventlog.encoding`).

    Raises :class:`~eventlog.encoding.JsonShapeError` (nothing is written) for a payload the
    readers could not read back as it is (EG-1): free-form values nested deeper than
    :data:`~eventlog.encoding.EVENT_MAX_DEPTH` in all, ``NaN`` or ``±Infinity`` (which would
    be written as ``null``), huge integers, or a lone surrogate in any text."""
    plan = _encoders.get(type(event))
    if plan is None:
        tree = tree_encoder(type(event), exclude=_NO_TYPE, fallback=_general_encode,
                            check_depth=EVENT_MAX_DEPTH - 1)
        encoder = fast_encoder(type(event), exclude=_NO_TYPE) or tree or _general_encode
        # A tree encoder checks the free-form values in the walk it makes anyway.
        plan = _encoders[type(event)] = (
            encoder, () if encoder is tree else _free_form(type(event)))
    encoder, free_form = plan
    for name, wire in free_form:
        value = getattr(event, name)
        if value is not None:
            check_json(value, max_depth=EVENT_MAX_DEPTH - 1, path=(wire,))
    try:
        return encoder(event)
    except PydanticSerializationError as exc:  # a lone surrogate in a text field
        raise JsonShapeError((), f"{event.type} cannot be written as UTF-8 JSON: {exc}") from None


def build_row(
    *,
    global_position: int,
    session_id: str,
    seq: int,
    new: NewEvent,
    data_json: str,
    recorded_at: str,
    idempotency_key: str | None,
    prev_hash: str,
) -> RawRow:
    """Assemble the stored row for ``new`` and compute its chain hash."""
    event = new.event
    digest = envelope_hash(
        prev_hash, session_id, seq, event.type, event.schema_version, data_json, recorded_at,
        new.actor, new.causation_id, new.correlation_id,
    )
    return (
        global_position, session_id, seq, event.type, event.schema_version, data_json,
        recorded_at, new.actor, new.causation_id, new.correlation_id, idempotency_key,
        prev_hash, digest,
    )


_DECODE_FAILURES = (ValueError, TypeError, LookupError, RecursionError)
"""What parsing, validating or upcasting a stored payload raises when it cannot be read
(pydantic's ``ValidationError`` and ``json``'s errors are ``ValueError``s)."""


def decode_row(
    row: RawRow, *, upcasters: UpcasterRegistry = default_upcasters
) -> RecordedEvent:
    """Turn a stored row into a typed envelope (the store is trusted: no chain check); a
    payload that cannot be decoded gives an :data:`UNDECODABLE` envelope, never an error."""
    try:
        data = decode_payload(row[3], row[4], row[5], upcasters=upcasters)
    except UnknownEventType as exc:
        raise UnknownEventType(row[3], session_id=row[1], seq=row[2]) from exc
    except UnknownSchemaVersion as exc:
        raise UnknownSchemaVersion(
            exc.event_type, exc.version, session_id=row[1], seq=row[2]
        ) from exc
    except EventLogError:
        raise
    except _DECODE_FAILURES as exc:
        undecodable = Undecodable(
            reason=_reason(exc), stored_data=_printable(row[5]), stored_type=_printable(row[3])
        )
        return RecordedEvent(
            row[0], row[1], row[2], UNDECODABLE, row[4], undecodable, row[6], row[7], row[8],
            row[9], row[11], row[12],
        )
    return RecordedEvent(
        row[0], row[1], row[2], row[3], row[4], data, row[6], row[7], row[8], row[9],
        row[11], row[12],
    )


def decode_rows(
    rows: Iterable[RawRow], *, upcasters: UpcasterRegistry = default_upcasters
) -> Iterator[RecordedEvent]:
    """:func:`decode_row` for many rows, with the common case (a current-version payload in
    its strict form) inlined: replay decodes millions of rows through here."""
    catalog = CATALOG
    for row in rows:
        cls = catalog.get(row[3])
        if cls is None or cls.schema_version != row[4]:
            yield decode_row(row, upcasters=upcasters)
            continue
        try:
            data = cls.__pydantic_validator__.validate_json(row[5])
        except ValidationError:
            yield decode_row(row, upcasters=upcasters)  # legacy forms, or undecodable
            continue
        yield RecordedEvent(
            row[0], row[1], row[2], row[3], row[4], data, row[6], row[7], row[8], row[9],
            row[11], row[12],
        )


def paged_rows(
    fetch: Callable[[tuple[Any, ...]], list[RawRow]],
    key: tuple[Any, ...],
    after: int,
    limit: int | None,
    *,
    page: int,
) -> Iterator[RawRow]:
    """Rows read ``page`` at a time by keyset: ``fetch((*key, after, size))`` runs the
    backend's query; the cursor is a session's ``seq`` when ``key`` names one, else the
    global position. At most ``limit`` rows (all when ``None``)."""
    remaining = limit
    while remaining is None or remaining > 0:
        size = page if remaining is None else min(page, remaining)
        rows = fetch((*key, after, size))
        yield from rows
        if len(rows) < size:
            return
        after = rows[-1][2] if key else rows[-1][0]
        if remaining is not None:
            remaining -= len(rows)


# Ids: sortable random identifiers (ULID layout) with a kind prefix: ``sess_``, ``call_``,
# ``int_``. 48 bits of milliseconds then 80 random bits in Crockford base32, so ids sort by
# creation time.

_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


_PAIRS = [first + second for first in _ALPHABET for second in _ALPHABET]
"""Every 10-bit value as its two base32 characters: an id is 13 lookups, not 26 shifts."""


def _ulid() -> str:
    value = (service_time_ns() // 1_000_000 << 80) | int.from_bytes(os.urandom(10), "big")
    pairs = _PAIRS
    return "".join([pairs[(value >> shift) & 1023] for shift in _SHIFTS])


_SHIFTS = tuple(range(120, -1, -10))


def new_id(prefix: str) -> str:
    """A new id such as ``call_01J…``."""
    return f"{prefix}_{_ulid()}"


def new_session_id() -> str:
    """A new session id, ``sess_`` + ULID."""
    return new_id("sess")


# Times: one injectable clock and one wire format for instants. Production uses
# SystemClock; tests use ManualClock and advance it. Every instant the service records or
# shows is rendered by format_instant so that the same instant is always the same string
# (docs/spec.md: ISO 8601 UTC with milliseconds and ``Z``).
#
# The service's time does not step (issue 41): it is the wall clock read once, when the process
# first asks, carried forward by the time elapsed since (CLOCK_BOOTTIME on Linux: monotonic,
# counting a suspend; elsewhere the monotonic clock). A step of the wall clock (an operator's
# ``date -s``, NTP correcting a clock that was far off) therefore moves neither a question's
# countdown nor the order of ``recordedAt`` in a running process; the rate follows the wall
# clock's (NTP slews the monotonic clock too). A process started after a step starts from the
# new wall time: that is where a step shows (``audit``'s ``clock_stepped_back``).

try:
    _ELAPSED_CLOCK = time.CLOCK_BOOTTIME
except AttributeError:  # not Linux
    _ELAPSED_CLOCK = time.CLOCK_MONOTONIC

_anchor: tuple[int, int] | None = None
"""The wall time when the process first read the time, and the elapsed clock then (ns)."""
_anchor_lock = threading.Lock()


def _anchored() -> tuple[int, int]:
    global _anchor
    with _anchor_lock:
        if _anchor is None:
            _anchor = (time.time_ns(), time.clock_gettime_ns(_ELAPSED_CLOCK))
        return _anchor


def service_time_ns() -> int:
    """The service's current time, nanoseconds since the epoch: the wall clock at the process's
    first reading moved on by the elapsed time since, so it never steps."""
    wall, elapsed = _anchor or _anchored()
    return wall + time.clock_gettime_ns(_ELAPSED_CLOCK) - elapsed


class Clock(Protocol):
    """Source of the current instant, UTC, millisecond precision."""

    def now(self) -> datetime: ...


def _truncate(moment: datetime) -> datetime:
    return moment.replace(microsecond=moment.microsecond // 1000 * 1000)


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class SystemClock:
    """The service's time (:func:`service_time_ns`: the wall clock that does not step),
    truncated to milliseconds."""

    __slots__ = ("_second",)

    def __init__(self) -> None:
        self._second: tuple[int, str] = (-1, "")
        """The last whole second rendered, and its text (one tuple: replaced atomically)."""

    def now(self) -> datetime:
        return _EPOCH + timedelta(milliseconds=service_time_ns() // 1_000_000)

    def now_text(self) -> str:
        """``format_instant(self.now())`` without building a datetime: every append stamps
        its rows with this, and the datetime round trip was a tenth of a lone append's CPU."""
        second, millis = divmod(service_time_ns() // 1_000_000, 1000)
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
