"""Canonical JSON and the per-session hash chain (SPEC EL-4, DESIGN "Events").

``hash = sha256(prev_hash_hex + canonical(envelope without hash and global_position))``. The
first event of a session chains from :data:`GENESIS_HASH`. The envelope's fields are hashed
under their column names (SPEC EL-9) so anyone can recheck a chain from the table alone.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any

__all__ = ["GENESIS_HASH", "canonical_json", "envelope_hash", "session_hasher"]

GENESIS_HASH = "0" * 64

_dumps = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
).encode


_text: Callable[[str], str] = json.encoder.encode_basestring
"""JSON string literal exactly as ``canonical_json`` writes it (``ensure_ascii=False``)."""


def _optional(value: str | None) -> str:
    return "null" if value is None else _text(value)


def canonical_json(value: Any) -> str:
    """Sorted keys, no spaces, UTF-8 text: equal values always give equal strings."""
    return _dumps(value)


_ENVELOPE = (
    '%s{"actor":%s,"causation_id":%s,"correlation_id":%s,"data":%s,"prev_hash":%s,'
    '"recorded_at":%s,"schema_version":%d,"seq":%d,"session_id":%s,"type":%s}'
)
"""``prev_hash`` followed by the envelope's canonical JSON, keys in sorted order."""

_sha256 = hashlib.sha256


def envelope_hash(
    prev_hash: str,
    session_id: str,
    seq: int,
    event_type: str,
    schema_version: int,
    data_json: str,
    recorded_at: str,
    actor: str,
    causation_id: str | None,
    correlation_id: str | None,
) -> str:
    """Hash of one envelope; ``data_json`` must already be canonical JSON of the payload.

    The string is assembled in sorted-key order, which equals ``canonical_json`` of the whole
    envelope dict (a property test checks this) without re-serialising the payload. The
    append loop calls it positionally, everything else by keyword.
    """
    body = _ENVELOPE % (
        prev_hash, _text(actor), _optional(causation_id), _optional(correlation_id), data_json,
        _text(prev_hash), _text(recorded_at), schema_version, seq, _text(session_id),
        _text(event_type),
    )
    return _sha256(body.encode("utf-8")).hexdigest()


_ESCAPED_TYPES: dict[str, str] = {}


def session_hasher(session_id: str, recorded_at: str) -> Callable[
    [str, int, str, int, str, str, str | None, str | None], str
]:
    """:func:`envelope_hash` for many events of one session recorded at one instant.

    ``hasher(prev_hash, seq, event_type, schema_version, data_json, actor, causation_id,
    correlation_id)`` gives the same digest as :func:`envelope_hash`, with the session id and
    the instant escaped once per batch instead of once per event (the append loop's hot spot).
    """
    template = (
        '%s{"actor":%s,"causation_id":%s,"correlation_id":%s,"data":%s,"prev_hash":"%s",'
        '"recorded_at":' + _text(recorded_at).replace("%", "%%")
        + ',"schema_version":%d,"seq":%d,"session_id":'
        + _text(session_id).replace("%", "%%") + ',"type":%s}'
    )
    types = _ESCAPED_TYPES
    actors: dict[str, str] = {}

    def hasher(
        prev_hash: str, seq: int, event_type: str, schema_version: int, data_json: str,
        actor: str, causation_id: str | None, correlation_id: str | None,
    ) -> str:
        type_text = types.get(event_type)
        if type_text is None:
            type_text = types[event_type] = _text(event_type)
        actor_text = actors.get(actor)
        if actor_text is None:
            actor_text = actors[actor] = _text(actor)
        body = template % (
            prev_hash, actor_text,
            "null" if causation_id is None else _text(causation_id),
            "null" if correlation_id is None else _text(correlation_id),
            data_json, prev_hash, schema_version, seq, type_text,
        )
        return _sha256(body.encode("utf-8")).hexdigest()

    return hasher
