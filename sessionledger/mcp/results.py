"""A tool-call document (SPEC §11 wire shape) as an MCP tool result.

The text the model gets is the call's ``modelContent``; the structured result is the whole
call document, as ``POST …/tool-calls`` answers it. A completed call that did not succeed, or
a denied one, is an error result (``isError``). A pending call says so at once, naming the
interaction and the web page where a person can answer it, and how to ask for the outcome
(``InteractionStatus``).
"""

from __future__ import annotations

from typing import Any

from mcp_types import CallToolResult, TextContent

from ..errors import SessionLedgerError

__all__ = ["call_result", "error_result", "pending_text", "session_page"]


def session_page(web_url: str, session_id: str) -> str:
    """The web client's page of the session."""
    return f"{web_url.rstrip('/')}/#/sessions/{session_id}"


def pending_text(interaction_id: str, page: str) -> str:
    """What the model is told about a call waiting for the user."""
    return (
        f"Waiting for the user: this call is pending as interaction {interaction_id}. "
        f"A person can answer it on the sessionledger web page {page} (served by "
        "`sessionledger serve`). Call InteractionStatus with "
        f'{{"interactionId": "{interaction_id}"}} to get the outcome once it is resolved; '
        "until then, do not assume an answer."
    )


def call_result(document: dict[str, Any], *, page: str) -> CallToolResult:
    """The MCP result of a call document (completed, denied or pending)."""
    if document["status"] == "pending":
        structured = {**document, "webUrl": page}
        text = pending_text(str(document["interactionId"]), page)
        return CallToolResult(
            content=[TextContent(type="text", text=text)], structured_content=structured,
        )
    ok = document["status"] == "completed" and document.get("success") is True
    return CallToolResult(
        content=[TextContent(type="text", text=str(document.get("modelContent", "")))],
        structured_content=document, is_error=not ok,
    )


def error_result(error: SessionLedgerError) -> CallToolResult:
    """A refused call (bad input, unknown tool, …): the message and the SPEC §11 error body."""
    return CallToolResult(
        content=[TextContent(type="text", text=error.message)],
        structured_content=error.to_wire(), is_error=True,
    )
