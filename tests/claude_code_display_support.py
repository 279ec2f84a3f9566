"""A session as Claude Code leaves one in the ledger, for the display tests (CC-9).

It is appended through the real service's ledger, as the importer and the hooks append: a
``SessionCreated`` naming the client and Claude's own session id, then messages that carry
the transcript's own times (``occurredAt``), then one event recorded live (no ``occurredAt``).
"""

from __future__ import annotations

from pathlib import Path

from eventlog import MessageRecorded, NewEvent, SessionCreated
from sessionledger import SessionService
from sessionledger.claude_code.observations import ledger_session_id

__all__ = ["CREATED_AT", "EXTERNAL", "LIVE_REPLY", "PROMPT", "PROMPT_AT", "REPLY_AT",
           "imported_session"]

EXTERNAL = "8463c716-a2ea-4c14-9efa-87158ebd9f20"
"""Claude Code's id of the session (its transcript's ``sessionId``)."""
CREATED_AT = "2025-11-03T08:15:40.001Z"
PROMPT_AT = "2025-11-03T08:15:42.123Z"
REPLY_AT = "2025-11-03T08:15:47.456Z"
PROMPT = "Add a --verbose flag to the parser"
LIVE_REPLY = "Recorded as it happened"


def imported_session(service: SessionService, workspace: Path) -> str:
    """Append the session (seq 1 … 4) and return its id: seq 1 to 3 carry ``occurredAt``,
    seq 4 does not."""
    session_id = ledger_session_id(EXTERNAL)
    service.ledger.append(session_id, [NewEvent(SessionCreated(
        workspace=str(workspace), host="headless", client="claude-code",
        external_session_id=EXTERNAL, occurred_at=CREATED_AT,
    ), actor="host")], expected_version=0)
    service.ledger.append(session_id, [
        NewEvent(MessageRecorded(role="user", content=PROMPT, occurred_at=PROMPT_AT),
                 actor="user"),
        NewEvent(MessageRecorded(role="assistant", content="Done: the flag is added.",
                                 occurred_at=REPLY_AT), actor="model"),
    ], expected_version=1)
    service.ledger.append(session_id, [
        NewEvent(MessageRecorded(role="assistant", content=LIVE_REPLY), actor="model"),
    ], expected_version=3)
    return session_id
