"""Sortable random identifiers (ULID layout) with a kind prefix: ``sess_``, ``call_``, ``int_``.

48 bits of milliseconds then 80 random bits in Crockford base32, so ids sort by creation time.
"""

from __future__ import annotations

import os
import time

__all__ = ["new_id", "new_session_id"]

_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def _ulid() -> str:
    value = (int(time.time() * 1000) << 80) | int.from_bytes(os.urandom(10), "big")
    chars = []
    for _ in range(26):
        chars.append(_ALPHABET[value & 31])
        value >>= 5
    return "".join(reversed(chars))


def new_id(prefix: str) -> str:
    """A new id such as ``call_01J…``."""
    return f"{prefix}_{_ulid()}"


def new_session_id() -> str:
    """A new session id, ``sess_`` + ULID."""
    return new_id("sess")
