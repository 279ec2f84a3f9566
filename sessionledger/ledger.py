"""One policy for a decide-and-append that another writer overtook (SPEC ES-6, EG-6).

Every command that changes a session reads it, decides, and appends guarded by the version
it read; when another writer appended first the store raises ``ConcurrencyConflict`` and
nothing was appended. :func:`retry_overtaken` calls the attempt again on a fresh read after
a pause that doubles from :data:`FIRST_PAUSE_S` to :data:`LONGEST_PAUSE_S` with full jitter
(a random fraction of it, so writers that collided do not collide again in step). It is
bounded by time, not by a count: writers on one session take turns within milliseconds, so
a count small enough to be quick was also small enough to lose (0.6-0.8 % of messages with
two writers per session, issue 19).

* A conditional command (a mode change, an answer, a delete) gives up after
  :data:`PATIENCE_S` with 409 ``conflict`` "kept changing; try again".
* An unconditional one (``unconditional=True``: a whole-list ``TodoWrite`` and every other
  tool call, a message, a compaction, the reminders of a model request) does not depend on
  the state it read, so it never answers 409 (EG-6): it keeps trying for
  :data:`UNCONDITIONAL_PATIENCE_S`, and only a session that stayed overtaken all that time
  (no real workload does) is 503 ``unavailable``, which a client retries like a busy store.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import TypeVar

from eventlog import ConcurrencyConflict

from .errors import Conflict, ServiceUnavailable

__all__ = [
    "FIRST_PAUSE_S",
    "LONGEST_PAUSE_S",
    "PATIENCE_S",
    "UNCONDITIONAL_PATIENCE_S",
    "retry_overtaken",
]

T = TypeVar("T")

FIRST_PAUSE_S = 0.001
"""The longest pause after the first lost race (the pause is a random fraction of it)."""
LONGEST_PAUSE_S = 0.05
"""The bound the doubling pause stops at: a retry at least every 50 ms."""
PATIENCE_S = 2.0
"""How long a conditional command keeps deciding again before 409 ``conflict``."""
UNCONDITIONAL_PATIENCE_S = 30.0
"""How long an unconditional command keeps trying before 503 (read at each call)."""


def retry_overtaken(
    session_id: str, attempt: Callable[[], T], *, unconditional: bool = False
) -> T:
    """``attempt()``'s result, calling it again while it raises ``ConcurrencyConflict``.

    ``attempt`` reads the session afresh, decides and appends guarded by the version it read;
    anything else it raises (a refusal, bad input, 404, another error of the log) is raised
    at once, as it is.
    """
    patience = UNCONDITIONAL_PATIENCE_S if unconditional else PATIENCE_S
    deadline = time.monotonic() + patience
    pause = FIRST_PAUSE_S
    while True:
        try:
            return attempt()
        except ConcurrencyConflict:
            if time.monotonic() >= deadline:
                break
        time.sleep(random.uniform(0, pause))
        pause = min(pause * 2, LONGEST_PAUSE_S)
    if unconditional:
        raise ServiceUnavailable(
            f"session {session_id!r} is too busy: other writers overtook this write for "
            f"{patience:g} s; nothing was appended, try again",
            details={"sessionId": session_id},
        )
    raise Conflict(f"session {session_id!r} kept changing; try again",
                   details={"sessionId": session_id})
