"""How an MCP call that waits for a person is asked, awaited and answered (D157).

A call that waits for the user (AskUserQuestion, ExitPlanMode in Plan) is asked through MCP
elicitation when the client declared that capability — one form per questionnaire
(:mod:`.forms`). On a handshake-era (2025) connection the server sends the elicitation request
during the call (:meth:`Asking.elicit`); a client that declared only URL elicitation is sent
to the session's web page instead and the call waits for the answer there. On a 2026-07-28
connection the call answers an ``input_required`` round and the client calls again with the
response (:meth:`Asking.answer_round`). Either way the answer is recorded through
:meth:`ToolService.respond <sessionledger.tools.service.ToolService.respond>`, the path of
``POST …/interactions/{iid}/respond``. The service is synchronous: its calls run in worker
threads (:func:`in_thread`).

While a call waits it sends ``notifications/progress`` every ``progress_interval_s`` when the
request carried a progress token, so a client that resets its timeout on progress keeps
waiting for the person. It is woken by the ledger's commit notice for its call (an answer in
this process: the web page, the respond endpoint, the timer) and reads the log at most every
``answer_poll_s`` otherwise (an answer written by another process). A call whose request is
cancelled — ``notifications/cancelled``, which clients also send when their own timeout
fires, or the connection ending — withdraws its interaction through
:meth:`ToolService.withdraw <sessionledger.tools.service.ToolService.withdraw>`, so the
session's queue moves on and nothing waits for a caller that left.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import threading
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

import anyio
import anyio.to_thread
from mcp.server import ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types import ElicitResult, InputRequiredResult
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from eventlog import RecordedEvent

from ..errors import ConfigurationError, Conflict, InvalidInput, SessionLedgerError
from ..logs import log_event
from ..service.sessions import SessionService
from .forms import Form, Round, ask_form, asking_round, plan_form

__all__ = [
    "ANSWER_POLL_ENV",
    "Asking",
    "Ctx",
    "DEFAULT_ANSWER_POLL_S",
    "DEFAULT_PROGRESS_S",
    "DEFAULT_UNATTENDED_S",
    "FORMS",
    "MAX_PROGRESS_S",
    "PROGRESS_ENV",
    "UNATTENDED_ENV",
    "WITHDRAW_REASON",
    "Wakeups",
    "answered_elsewhere_text",
    "can_ask_in_rounds",
    "can_elicit",
    "env_seconds",
    "in_thread",
]

FORMS: dict[str, Callable[[dict[str, Any]], Form]] = {
    "AskUserQuestion": ask_form, "ExitPlanMode": plan_form,
}
"""The tools whose waiting call is asked through a form, and how each builds it."""
DEFAULT_PROGRESS_S = 10.0
MAX_PROGRESS_S = 15.0
"""D157: progress at a fixed interval of at most 15 s while a call waits for a person."""
DEFAULT_ANSWER_POLL_S = 5.0
"""How often a waiting call reads the log for an answer no commit notice told it of (one
written by another process)."""
DEFAULT_UNATTENDED_S = 1.0
"""A form declined sooner than this after it was sent was declined by no person: Codex's
headless run declines every form in 1-2 ms as it sees it, but the server measures from its
own send to its own read, which a busy machine stretches (0.1 s, the first threshold, left no
margin for that). A person reads the form before declining; one declining within a second
only sees the question wait on the web page instead (issue 40)."""
PROGRESS_ENV = "SESSIONLEDGER_MCP_PROGRESS_S"
ANSWER_POLL_ENV = "SESSIONLEDGER_MCP_ANSWER_POLL_S"
UNATTENDED_ENV = "SESSIONLEDGER_MCP_UNATTENDED_S"
WITHDRAW_REASON = "the MCP client cancelled the request, or its connection ended"
"""Why a waiting call is withdrawn when its request is cancelled (the model reads it)."""
_WAKE_TYPES = frozenset({"InteractionResolved", "ToolCallCompleted"})
_SURFACES = {
    "user": "on another surface (the web page, the respond endpoint or the terminal UI)",
    "timer": "by its auto-continue timer",
    "host": "by the host (withdrawn)",
}
T = TypeVar("T")
Ctx = ServerRequestContext[Any, Any]
_log = logging.getLogger("sessionledger.mcp")


def env_seconds(name: str, default: float, *, most: float | None = None) -> float:
    """A duration from the environment variable ``name`` (else ``default``): a number of
    seconds > 0 (and <= ``most``); anything else is a clear :class:`ConfigurationError`."""
    raw = os.environ.get(name)
    if raw is None or not raw.strip():
        return default
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0 and (most is None or value <= most)):
        bound = f" and at most {most:g}" if most is not None else ""
        raise ConfigurationError(f"{name} must be a number of seconds above 0{bound}, "
                                 f"not {raw!r}")
    return value


async def in_thread(function: Callable[[], T]) -> T:
    """Run a synchronous service call in a worker thread."""
    return await anyio.to_thread.run_sync(function)


def _elicitation(ctx: Ctx) -> Any:
    capabilities = ctx.session.client_capabilities
    return capabilities.elicitation if capabilities is not None else None


def _form_capable(ctx: Ctx) -> bool:
    """The client declared form elicitation (an empty capability means form)."""
    elicitation = _elicitation(ctx)
    return elicitation is not None and (elicitation.form is not None or elicitation.url is None)


def _url_only(ctx: Ctx) -> bool:
    """The client declared URL elicitation and not form elicitation."""
    elicitation = _elicitation(ctx)
    return elicitation is not None and elicitation.url is not None and elicitation.form is None


def can_elicit(ctx: Ctx) -> bool:
    """Whether the server may send the elicitation request mid-call: a handshake-era
    connection that can carry a server-to-client request, to a client that declared form or
    URL elicitation."""
    return ((_form_capable(ctx) or _url_only(ctx))
            and ctx.protocol_version in HANDSHAKE_PROTOCOL_VERSIONS
            and ctx.session.can_send_request)


def can_ask_in_rounds(ctx: Ctx) -> bool:
    """Whether the call may answer ``input_required`` (a 2026-07-28 connection)."""
    return _form_capable(ctx) and ctx.protocol_version in MODERN_PROTOCOL_VERSIONS


def _progress_token(ctx: Ctx) -> object | None:
    meta: Mapping[str, Any] | None = ctx.meta
    if not meta:
        return None
    token: object | None = meta.get("progress_token", meta.get("progressToken"))
    return token


def answered_elsewhere_text(noun: str, resolution: Mapping[str, Any] | None) -> str:
    """What the model is told when the form's answer came after another one (finding 4)."""
    if resolution is None:
        return f"This {noun} was already answered elsewhere; the answer in the form was not used."
    actor = str(resolution.get("actor"))
    surface = _SURFACES.get(actor, f"by {actor}")
    return (f"This {noun} was already answered {surface} at {resolution.get('recordedAt')}; "
            "the answer in the form was not used.")


# -- waking a waiting call: the ledger's commit notice for its call ----------------------------


class _Waiter:
    """One waiting call's bell, rung from any thread, heard on its event loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self._event = anyio.Event()

    def ring(self) -> None:
        self._event.set()

    async def wait(self, timeout_s: float) -> None:
        """Until rung (or ``timeout_s``); a ring while the caller was busy is kept."""
        with anyio.move_on_after(timeout_s):
            await self._event.wait()
        self._event = anyio.Event()


class Wakeups:
    """The waiting calls of this process, each told when a batch for its call commits.

    Subscribed to the store's commit publication (:meth:`Ledger.on_commit
    <sessionledger.ledger.Ledger.on_commit>`: every batch this process commits, and on
    PostgreSQL those of other processes too) while any call waits, and only then. The
    observer runs on the committing thread while it holds the writer, so it only looks at
    event types and hands the ring to the waiter's loop (``call_soon_threadsafe``): the
    waiter then reads the call itself.
    """

    def __init__(self, service: SessionService) -> None:
        self._ledger = service.ledger
        self._waiting: dict[str, list[_Waiter]] = {}
        self._lock = threading.Lock()
        self._unsubscribe: Callable[[], None] | None = None

    def _on_commit(self, events: Sequence[RecordedEvent]) -> None:
        if not self._waiting:
            return
        for event in events:
            if event.type not in _WAKE_TYPES:
                continue
            call_id = getattr(event.data, "call_id", None)
            with self._lock:
                waiters = list(self._waiting.get(str(call_id), ()))
            for waiter in waiters:
                try:
                    waiter.loop.call_soon_threadsafe(waiter.ring)
                except RuntimeError:  # its loop has closed: nobody waits any more
                    pass

    @contextmanager
    def watching(self, call_id: str) -> Iterator[_Waiter]:
        """A bell for ``call_id`` while the block runs (on the running event loop)."""
        waiter = _Waiter(asyncio.get_running_loop())
        with self._lock:
            if self._unsubscribe is None:
                self._unsubscribe = self._ledger.on_commit(self._on_commit)
            self._waiting.setdefault(call_id, []).append(waiter)
        try:
            yield waiter
        finally:
            with self._lock:
                held = self._waiting.get(call_id, [])
                if waiter in held:
                    held.remove(waiter)
                if not held:
                    self._waiting.pop(call_id, None)
                if not self._waiting and self._unsubscribe is not None:
                    self._unsubscribe()
                    self._unsubscribe = None


# -- asking ------------------------------------------------------------------------------------


class Asking:
    """Asks the user about a waiting call and records the answer, for one service."""

    def __init__(
        self, service: SessionService, *, progress_interval_s: float = DEFAULT_PROGRESS_S,
        answer_poll_s: float = DEFAULT_ANSWER_POLL_S,
        unattended_s: float = DEFAULT_UNATTENDED_S,
    ) -> None:
        for name, value in (("progress_interval_s", progress_interval_s),
                            ("answer_poll_s", answer_poll_s), ("unattended_s", unattended_s)):
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"{name} must be a number of seconds above 0, not {value}")
        if progress_interval_s > MAX_PROGRESS_S:
            raise ValueError(f"progress_interval_s must be at most {MAX_PROGRESS_S:g} (D157)")
        self._service = service
        self.progress_interval_s = progress_interval_s
        self.answer_poll_s = answer_poll_s
        self.unattended_s = unattended_s
        """A decline sooner than this is no person's: the call stays pending."""
        self.wakeups = Wakeups(service)

    # -- the handshake era: the request stays open while the person answers -----------------

    async def elicit(
        self, ctx: Ctx, session_id: str, form: Form, pending: dict[str, Any], *,
        page: str | None = None,
    ) -> dict[str, Any]:
        """Ask through the client and record the answer as the respond endpoint does; the
        call document. A dismissed form, or a client that fails to ask, leaves the call
        pending; an accepted empty form is asked once more, then left pending. A client that
        offers only URL elicitation is sent to ``page`` (the session's web page) and the call
        waits until the answer is in the log.

        While the form is open the call is watched: answered elsewhere (the web page, the
        respond endpoint, another process) or continued by its timer, the form is withdrawn
        — the SDK sends the client ``notifications/cancelled`` for its request — and the call
        answers as it now stands. A cancelled request withdraws the interaction (D157).
        """
        call_id, interaction_id = str(pending["callId"]), str(pending["interactionId"])
        try:
            with self.wakeups.watching(call_id) as waiter:
                if _url_only(ctx) and page is not None:
                    return await self._ticking(
                        ctx, lambda: self._by_url(ctx, session_id, pending, page, waiter)
                    )
                return await self._ticking(
                    ctx, lambda: self._by_form(ctx, session_id, form, pending, waiter)
                )
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True):
                await self._withdraw(session_id, interaction_id)
            raise

    async def _ticking(
        self, ctx: Ctx, work: Callable[[], Awaitable[dict[str, Any]]]
    ) -> dict[str, Any]:
        """``work()``, with progress notifications while it runs when the request asked for
        them. Its error is raised as it is (a cancellation passes through)."""
        if _progress_token(ctx) is None:
            return await work()
        done: list[dict[str, Any]] = []
        failed: list[Exception] = []
        async with anyio.create_task_group() as group:
            group.start_soon(self._progress, ctx)
            try:
                done.append(await work())
            except Exception as exc:  # raised below, not wrapped in the group's
                failed.append(exc)
            group.cancel_scope.cancel()
        if failed:
            raise failed[0]
        return done[0]

    async def _by_form(
        self, ctx: Ctx, session_id: str, form: Form, pending: dict[str, Any], waiter: _Waiter,
    ) -> dict[str, Any]:
        asking = form
        for _round in range(2):
            settled, result = await self._open(ctx, session_id, asking, pending, waiter)
            if settled is not None:
                return settled
            if result is None:
                return pending
            if form.said_nothing(result.action, result.content):
                asking = form.again()
                continue
            return await self.record(session_id, form, result, pending)
        return pending

    async def _open(
        self, ctx: Ctx, session_id: str, form: Form, pending: dict[str, Any], waiter: _Waiter,
    ) -> tuple[dict[str, Any] | None, ElicitResult | None]:
        """The form open until answered (the result) or settled elsewhere (the document)."""
        asked: list[ElicitResult] = []
        settled: list[dict[str, Any]] = []
        failed: list[SessionLedgerError] = []

        async def ask(done: anyio.CancelScope) -> None:
            sent = anyio.current_time()
            try:
                result = await ctx.session.elicit_form(
                    form.message, form.schema, related_request_id=ctx.request_id
                )
            except (MCPError, ValidationError):
                result = None
            took = anyio.current_time() - sent
            if result is not None and result.action == "decline" and took < self.unattended_s:
                # No person declined this: the client answers forms by itself (Codex's
                # headless run). The call stays pending for the web page or the respond route.
                log_event(_log, "form declined by no person", sessionId=session_id,
                          interactionId=pending.get("interactionId"),
                          seconds=round(took, 4))
            elif result is not None:
                asked.append(result)
            done.cancel()

        async def watch(done: anyio.CancelScope) -> None:
            try:
                settled.append(await self._settled(session_id, str(pending["callId"]), waiter))
            except SessionLedgerError as exc:  # the session was deleted meanwhile, say
                failed.append(exc)
            done.cancel()

        async with anyio.create_task_group() as group:
            group.start_soon(ask, group.cancel_scope)
            group.start_soon(watch, group.cancel_scope)
        if failed:
            raise failed[0]
        if settled:
            return settled[0], None
        return None, asked[0] if asked else None

    async def _by_url(
        self, ctx: Ctx, session_id: str, pending: dict[str, Any], page: str, waiter: _Waiter,
    ) -> dict[str, Any]:
        """URL-mode elicitation: the user is sent to the session's web page, and the call
        waits for the answer to reach the log (accepted), or stays pending (declined or
        dismissed: nothing is decided by not opening a page)."""
        interaction_id = str(pending["interactionId"])
        noun = "plan approval" if pending.get("kind") == "planApproval" else "question"
        try:
            result = await ctx.session.elicit_url(
                f"The agent is waiting for your answer to a {noun}: answer it on the "
                f"sessionledger web page ({interaction_id}).", page, interaction_id,
                related_request_id=ctx.request_id,
            )
        except (MCPError, ValidationError):
            return pending
        if result.action != "accept":
            return pending
        document = await self._settled(session_id, str(pending["callId"]), waiter)
        try:
            await ctx.session.send_elicit_complete(
                interaction_id, related_request_id=ctx.request_id
            )
        except (MCPError, OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass
        return document

    async def _settled(self, session_id: str, call_id: str, waiter: _Waiter) -> dict[str, Any]:
        """The call's document once it is no longer pending: read now, then again each time
        a commit for it rings (this process) or every ``answer_poll_s`` (another process)."""
        while True:
            now = await in_thread(lambda: self._service.tools.get(session_id, call_id).document)
            if now["status"] != "pending":
                return now
            await waiter.wait(self.answer_poll_s)

    async def _progress(self, ctx: Ctx) -> None:
        """``notifications/progress`` every interval while the person is asked (D157)."""
        count = 0
        while True:
            await anyio.sleep(self.progress_interval_s)
            count += 1
            try:
                await ctx.session.report_progress(
                    count, None, "waiting for the user to answer"
                )
            except (MCPError, OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
                return

    async def _withdraw(self, session_id: str, interaction_id: str) -> None:
        """The request was cancelled: withdraw the interaction (already resolved: nothing)."""
        def withdraw() -> None:
            try:
                self._service.tools.withdraw(session_id, interaction_id, reason=WITHDRAW_REASON)
            except Conflict:
                pass  # answered meanwhile: the answer stands
            except SessionLedgerError as exc:  # the store is closing, the session was deleted
                log_event(_log, "withdraw failed", sessionId=session_id,
                          interactionId=interaction_id, error=exc.__class__.__name__,
                          message=str(exc))

        await in_thread(withdraw)

    # -- the 2026-07-28 era: rounds --------------------------------------------------------

    async def answer_round(
        self, session_id: str, form: Form, returned: Round
    ) -> dict[str, Any] | InputRequiredResult:
        """A modern client's retry: the waiting call, answered with the form's response —
        or, for an accepted empty form, the same form once more (then the pending call)."""
        current = await in_thread(lambda: self._service.tools.get(session_id, returned.call_id))
        document = current.document
        response = returned.response
        if document["status"] == "pending" and document.get("interactionId") != \
                returned.interaction_id:
            raise InvalidInput("requestState does not name the interaction the call waits on")
        if response is None:
            return document
        if document["status"] != "pending":
            if response.action == "cancel":
                return document
            return await self._elsewhere(session_id, form, returned.interaction_id, document)
        if form.said_nothing(response.action, response.content):
            return document if returned.again else asking_round(form.again(), document,
                                                                again=True)
        return await self.record(session_id, form, response, document)

    # -- recording ---------------------------------------------------------------------------

    async def record(
        self, session_id: str, form: Form, result: ElicitResult, pending: dict[str, Any]
    ) -> dict[str, Any]:
        """The user's response recorded as the respond endpoint records an answer. An answer
        the form did not offer, or one the tool refuses, is :class:`InvalidInput` (nothing
        recorded, the call still waits); one that came after another answer is told so."""
        answer = form.answer(result.action, result.content)
        if answer is None:
            return pending
        interaction_id = str(pending["interactionId"])

        def respond() -> dict[str, Any] | None:
            try:
                return self._service.tools.respond(
                    session_id, interaction_id, answer.decision, input=answer.input,
                    feedback=answer.feedback,
                )
            except Conflict:  # resolved meanwhile
                return None

        done = await in_thread(respond)
        if done is not None:
            return done
        current = await in_thread(
            lambda: self._service.tools.get(session_id, str(pending["callId"])).document
        )
        return await self._elsewhere(session_id, form, interaction_id, current)

    async def _elsewhere(
        self, session_id: str, form: Form, interaction_id: str, document: dict[str, Any]
    ) -> dict[str, Any]:
        """The recorded answer, saying plainly that the form's answer was not used."""
        resolution = await in_thread(
            lambda: self._service.tools.resolution(session_id, interaction_id)
        )
        note = answered_elsewhere_text(form.noun, resolution)
        told = {**document, "answeredElsewhere": True,
                "answeredBy": resolution.get("actor") if resolution else None,
                "answeredAt": resolution.get("recordedAt") if resolution else None}
        if "modelContent" in document:
            told["modelContent"] = f"{note}\n\n{document['modelContent']}"
        return told
