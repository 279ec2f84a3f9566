"""Checking a session's hash chain from its raw rows (EL-4).

The check never trusts a row: a wrong column type, an unknown event type, data that is not a
JSON object, an edited hash, a missing or reordered row, or a head record that disagrees with
the rows (truncation) is reported as a break at that ``seq``. The hash is checked over the
payload text as stored, so a chain holds whether or not this build can decode the payload: a
payload the reader cannot decode is not a break (EG-1; the reader reports it, and
``audit`` names it ``undecodable``). Stored text that is not canonical is checked by its
canonical JSON, as written.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from .catalog import CATALOG
from .encoding import GENESIS_HASH, canonical_json, envelope_hash
from .envelope import RawRow, RecordedEvent, decode_rows, paged_rows
from .errors import EventLogError
from .upcasting import UpcasterRegistry

__all__ = [
    "DECODE_FAILURES", "ChainReport", "listed", "verified_pages", "verified_stream",
    "verify_chain",
]


@dataclass(frozen=True, slots=True)
class ChainReport:
    """The outcome of checking one session's chain."""

    session_id: str
    events: int
    first_bad_seq: int | None = None
    reason: str | None = None

    @property
    def ok(self) -> bool:
        return self.first_bad_seq is None


def _row_fault(row: tuple[Any, ...], expected_seq: int, prev_hash: str) -> str | None:
    (position, _sid, seq, etype, version, data, recorded_at, actor, cause, corr, _key,
     prev, digest) = row
    if type(seq) is not int or seq != expected_seq:
        return f"expected seq {expected_seq}, found {seq!r}"
    if type(position) is not int:
        return "global_position is not an integer"
    strings = (etype, recorded_at, actor, prev, digest, data)
    if not all(type(v) is str for v in strings) or type(version) is not int:
        return "a column has the wrong type"
    if not all(v is None or type(v) is str for v in (cause, corr)):
        return "causation or correlation id has the wrong type"
    if prev != prev_hash:
        return "prev_hash does not match the previous event's hash"
    if etype not in CATALOG:
        return f"unknown event type {etype!r}"
    fields = (row[1], seq, etype, version)
    if _hash_of(prev, fields, data, recorded_at, actor, cause, corr) == digest:
        return None  # the stored text is what was hashed: intact, decodable or not (EG-1)
    try:
        payload = json.loads(data)
    except (ValueError, RecursionError):  # RecursionError: nesting deeper than the parser's
        return "data is not valid JSON"
    if type(payload) is not dict:
        return "data is not a JSON object"
    try:
        canonical = canonical_json(payload)
    except (ValueError, RecursionError):  # NaN in an unvalidated payload
        return "data cannot be hashed"
    if _hash_of(prev, fields, canonical, recorded_at, actor, cause, corr) != digest:
        return "hash does not match the event's content"
    return None


def _hash_of(
    prev: str, fields: tuple[str, int, str, int], data_json: str, recorded_at: str, actor: str,
    cause: str | None, corr: str | None,
) -> str | None:
    """The envelope's hash over ``data_json``; ``None`` when a column cannot be encoded
    (a lone surrogate in text the store did not decode)."""
    session_id, seq, etype, version = fields
    try:
        return envelope_hash(
            prev_hash=prev, session_id=session_id, seq=seq, event_type=etype,
            schema_version=version, data_json=data_json, recorded_at=recorded_at,
            actor=actor, causation_id=cause, correlation_id=corr,
        )
    except UnicodeEncodeError:
        return None


_text = json.encoder.encode_basestring
"""A JSON string literal as ``canonical_json`` writes it."""


def _sound_row(session_id: str) -> Callable[[tuple[Any, ...], int, str, int], bool]:
    """``sound(row, expected_seq, prev_hash, last_position)``: whether the row is intact by
    the fast test alone (every column of its type, the next seq, the previous hash, a known
    type, a higher position, and the hash of the stored text as stored). ``False`` sends the
    row to :func:`_row_fault`, which finds the reason, or passes a row whose stored text is
    not canonical. The hash is :func:`envelope_hash` with the session id escaped once and the
    type, actor and instant texts remembered; ``prev_hash`` needs no escaping: it is the
    genesis hash or a hex digest the row before matched."""
    template = (
        '%s{"actor":%s,"causation_id":%s,"correlation_id":%s,"data":%s,"prev_hash":"%s",'
        '"recorded_at":%s,"schema_version":%d,"seq":%d,"session_id":'
        + _text(session_id).replace("%", "%%") + ',"type":%s}'
    )
    catalog = CATALOG
    texts: dict[str, str] = {}
    sha256 = hashlib.sha256

    def sound(row: tuple[Any, ...], expected_seq: int, prev_hash: str, last: int) -> bool:
        (position, sid, seq, etype, version, data, recorded_at, actor, cause, corr, _key,
         prev, digest) = row
        if not (type(seq) is int and seq == expected_seq and type(position) is int
                and position > last and prev == prev_hash and type(digest) is str
                and type(etype) is str and etype in catalog and type(version) is int
                and type(data) is str and type(recorded_at) is str and type(actor) is str
                and sid == session_id and type(sid) is str):
            return False
        if cause is not None and type(cause) is not str:
            return False
        if corr is not None and type(corr) is not str:
            return False
        type_text = texts.get(etype)
        if type_text is None:
            type_text = texts[etype] = _text(etype)
        actor_text = texts.get(actor)
        if actor_text is None:
            actor_text = texts[actor] = _text(actor)
        instant = texts.get(recorded_at)
        if instant is None:
            if len(texts) > 4096:
                texts.clear()
            instant = texts[recorded_at] = _text(recorded_at)
        body = template % (
            prev, actor_text, "null" if cause is None else _text(cause),
            "null" if corr is None else _text(corr), data, prev, instant, version, seq,
            type_text,
        )
        try:
            return sha256(body.encode("utf-8")).hexdigest() == digest
        except UnicodeEncodeError:
            return False

    return sound


def verify_chain(
    session_id: str,
    rows: Iterable[tuple[Any, ...]],
    *,
    head: tuple[int, str] | None,
) -> ChainReport:
    """Check rows ordered by ``seq`` against each other and the store's head record.

    ``head`` is ``(version, head_hash)`` as the store recorded them at the last append.
    """
    prev_hash = GENESIS_HASH
    last_position = 0
    count = 0
    sound = _sound_row(session_id)
    for row in rows:
        expected_seq = count + 1
        if not sound(row, expected_seq, prev_hash, last_position):
            fault = _row_fault(row, expected_seq, prev_hash)
            if fault is None and row[0] <= last_position:
                fault = "global_position does not increase with seq"
            if fault is not None:
                return ChainReport(session_id, count, expected_seq, fault)
        prev_hash, last_position, count = row[12], row[0], expected_seq
    if head is None:
        if count:
            return ChainReport(session_id, count, 1, "session has events but no head record")
        return ChainReport(session_id, 0)
    version, head_hash = head
    if version > count:
        return ChainReport(session_id, count, count + 1, f"event seq {count + 1} is missing")
    if version < count:
        return ChainReport(
            session_id, count, version + 1, "events beyond the recorded head"
        )
    if head_hash != prev_hash:
        return ChainReport(session_id, count, count, "head hash does not match the last event")
    return ChainReport(session_id, count)


def verified_stream(
    session_id: str,
    rows: list[tuple[Any, ...]],
    *,
    head: tuple[int, str] | None,
    upcasters: UpcasterRegistry,
) -> tuple[ChainReport, Iterator[RecordedEvent] | None]:
    """The chain check of a session's raw rows (as ``raw_session`` gives them) and, when the
    chain holds, the typed events decoded from the same rows one at a time, as the caller
    takes them: a row that cannot be decoded the way ``read_session`` would decode it (an
    unknown schema version) raises there (:data:`DECODE_FAILURES`). ``None`` instead of
    events when the chain is broken. An audit folds the events as they come, so it holds no
    list of them (issue 24)."""
    report = verify_chain(session_id, rows, head=head)
    if not report.ok:
        return report, None
    sound: list[RawRow] = rows  # checked column by column above
    return report, decode_rows(sound, upcasters=upcasters)


def verified_pages(
    session_id: str,
    *,
    head: Callable[[], tuple[int, str] | None],
    fetch: Callable[[tuple[Any, ...]], list[RawRow]],
    stray: Callable[[tuple[Any, ...]], list[Any]],
    whole: Callable[[], list[RawRow]],
    upcasters: UpcasterRegistry,
    page: int,
) -> tuple[ChainReport, Iterator[RecordedEvent] | None]:
    """:func:`verified_stream` in the memory of one page, whatever the session's length
    (issue 41), for a store that reads the session's rows by page.

    ``head()`` reads the store's head record, ``fetch((session_id, after_seq, size))`` a page
    of rows with ``seq`` above ``after_seq`` in ``seq`` order, ``stray((session_id,))`` a row
    of the session whose ``seq`` is below 1 or none (only a tampered log has one), ``whole()``
    every row of the session as ``raw_session`` orders them. The chain is checked over one
    paged read of the rows up to the head as first read (what is appended after it is a later
    audit's), and the events are decoded from a second paged read of the same rows as the
    caller takes them. A chain that does not hold, a stray row, or a row past the head that
    the head read again does not cover (a truncated head) sends the check to the whole rows,
    which name the fault as :func:`verified_stream` always did."""
    recorded = head()
    version = recorded[0] if recorded else 0

    def rows() -> Iterator[RawRow]:
        return paged_rows(fetch, (session_id,), 0, version, page=page)

    report = verify_chain(session_id, rows(), head=recorded)
    sound = report.ok and not stray((session_id,))
    if sound and fetch((session_id, version, 1)):  # appended since, or a bad head record
        now = head()
        sound = now is not None and now[0] > version
    if not sound:
        return verified_stream(session_id, whole(), head=recorded, upcasters=upcasters)
    return report, decode_rows(rows(), upcasters=upcasters)


DECODE_FAILURES = (EventLogError, ValueError, TypeError, LookupError, RecursionError)
"""What decoding a soundly chained row may raise (:func:`verified_stream`)."""


def listed(
    checked: tuple[ChainReport, Iterator[RecordedEvent] | None],
) -> tuple[ChainReport, list[RecordedEvent] | None]:
    """:func:`verified_stream`'s answer with the events in a list. A sound chain means the
    rows are exactly the session's events ``1..version`` in ``seq`` order with every column of
    the right type, so the list is what ``read_session`` gives. ``None`` instead when the
    chain is broken or a row cannot be decoded the way ``read_session`` would decode it
    without an error (an unknown schema version): the caller then reads the session as
    before, so a damaged log is reported exactly as ever (issue 24: ``audit`` reads each
    sound session once)."""
    report, stream = checked
    if stream is None:
        return report, None
    try:
        return report, list(stream)
    except DECODE_FAILURES:
        return report, None
