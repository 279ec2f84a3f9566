"""How an MCP call that waits for a person is asked, awaited and answered.

A call that waits for the user (AskUserQuestion, ExitPlanMode in Plan) is asked through MCP
elicitation when the client declared that capability — one form per questionnaire
(:mod:`.forms`). On a handshake-era (2025) connection the server sends the elicitation request
during the call (:meth:`Asking.elicit`); on a 2026-07-28 connection the call answers an
``input_required`` round and the client calls again with the response
(:meth:`Asking.answer_round`). Either way the answer is recorded through
:meth:`ToolService.respond <sessionledger.tools.service.ToolService.respond>`, the path of
``POST …/interactions/{iid}/respond``. The service is synchronous: its calls run in worker
threads (:func:`in_thread`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import anyio
import anyio.to_thread
from mcp.server import ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types import ElicitResult
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from ..errors import Conflict, InvalidInput
from ..service.sessions import SessionService
from .forms import Form, Round, ask_form, plan_form

__all__ = [
    "Asking",
    "Ctx",
    "FORMS",
    "WITHDRAW_POLL_S",
    "can_ask_in_rounds",
    "can_elicit",
    "in_thread",
]

FORMS: dict[str, Callable[[dict[str, Any]], Form]] = {
    "AskUserQuestion": ask_form, "ExitPlanMode": plan_form,
}
"""The tools whose waiting call is asked through a form, and how each builds it."""
WITHDRAW_POLL_S = 0.5
"""How often a call with a form open is checked for an answer given elsewhere."""
T = TypeVar("T")
Ctx = ServerRequestContext[Any, Any]


async def in_thread(function: Callable[[], T]) -> T:
    """Run a synchronous service call in a worker thread."""
    return await anyio.to_thread.run_sync(function)


def _form_capable(ctx: Ctx) -> bool:
    """The client declared form elicitation (an empty capability means form)."""
    capabilities = ctx.session.client_capabilities
    elicitation = capabilities.elicitation if capabilities is not None else None
    return elicitation is not None and (elicitation.form is not None or elicitation.url is None)


def can_elicit(ctx: Ctx) -> bool:
    """Whether the server may send the elicitation request mid-call: a handshake-era
    connection that can carry a server-to-client request."""
    return (_form_capable(ctx) and ctx.protocol_version in HANDSHAKE_PROTOCOL_VERSIONS
            and ctx.session.can_send_request)


def can_ask_in_rounds(ctx: Ctx) -> bool:
    """Whether the call may answer ``input_required`` (a 2026-07-28 connection)."""
    return _form_capable(ctx) and ctx.protocol_version in MODERN_PROTOCOL_VERSIONS


class Asking:
    """Asks the user about a waiting call and records the answer, for one service."""

    def __init__(self, service: SessionService) -> None:
        self._service = service

    async def elicit(
        self, ctx: Ctx, session_id: str, form: Form, pending: dict[str, Any]
    ) -> dict[str, Any]:
        """Ask through the client; record the answer as the respond endpoint does. A
        dismissed form, or a client that fails to ask, leaves the call pending.

        While the form is open the call is watched: answered elsewhere (the web page, the
        HTTP respond endpoint, another process) or continued by its timer, the form is
        withdrawn — the SDK sends the client ``notifications/cancelled`` for its request —
        and the call answers as it now stands.
        """
        asked: list[ElicitResult] = []
        settled: list[dict[str, Any]] = []
        call_id = str(pending["callId"])

        async def ask(done: anyio.CancelScope) -> None:
            try:
                asked.append(await ctx.session.elicit_form(
                    form.message, form.schema, related_request_id=ctx.request_id
                ))
            except (MCPError, ValidationError):
                pass
            done.cancel()

        async def watch(done: anyio.CancelScope) -> None:
            while True:
                await anyio.sleep(WITHDRAW_POLL_S)
                now = await in_thread(lambda: self._service.tools.get(session_id, call_id).document)
                if now["status"] != "pending":
                    settled.append(now)
                    done.cancel()
                    return

        async with anyio.create_task_group() as group:
            group.start_soon(ask, group.cancel_scope)
            group.start_soon(watch, group.cancel_scope)
        if settled:
            return settled[0]
        if not asked:
            return pending
        return await self.record(session_id, form, asked[0], pending)

    async def answer_round(self, session_id: str, form: Form, returned: Round) -> dict[str, Any]:
        """A modern client's retry: the waiting call, answered with the form's response."""
        current = await in_thread(lambda: self._service.tools.get(session_id, returned.call_id))
        document = current.document
        if document["status"] != "pending" or returned.response is None:
            return document
        if document.get("interactionId") != returned.interaction_id:
            raise InvalidInput("requestState does not name the interaction the call waits on")
        return await self.record(session_id, form, returned.response, document)

    async def record(
        self, session_id: str, form: Form, result: ElicitResult, pending: dict[str, Any]
    ) -> dict[str, Any]:
        """The user's response recorded as the respond endpoint records an answer."""
        answer = form.answer(result.action, result.content)
        if answer is None:
            return pending
        interaction_id = str(pending["interactionId"])

        def respond() -> dict[str, Any]:
            try:
                return self._service.tools.respond(
                    session_id, interaction_id, answer.decision, input=answer.input,
                    feedback=answer.feedback,
                )
            except (Conflict, InvalidInput):  # resolved meanwhile, or an answer it refuses
                return self._service.tools.get(session_id, str(pending["callId"])).document

        return await in_thread(respond)
