"""Tool calls, answers and permission checks for the sessions of one store.

The face the HTTP routes and the CLI use: it builds the executor with the tools whose handlers
exist, the workspace permission rules and the brokers, translates log errors into application
errors, and records the permission decisions the host asks for about its own tools (TR-3).
The first time this process touches a session's calls or interactions, answers left on
record but never completed by an earlier process (a stop between PM-7's two batches) are
abandoned and asked again (:meth:`ToolExecutor.resume`).

The permission authority the executor asks is here too (:class:`WorkspacePermissions`): a
workspace's rules (``.sessionledger/config.toml``, TR-4) applied to one call, loaded on
first use and reloaded when the file changes; an invalid file is an
:class:`~sessionledger.errors.InvalidWorkspaceConfig` naming the key. A decision depends on
the call's input only through its primary argument
(:func:`~sessionledger.permission.authority.primary_argument`), so a call without one — every
TodoWrite — reuses the decision kept with the loaded rules until the file changes (D73).
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

from eventlog import (
    EventStore,
    HostKind,
    InteractionResolved,
    NewEvent,
    PermissionDecided,
    PermissionVerdict,
    new_id,
)
from projections import Projections
from projections.tools import interaction_wire
from statemachine.execution import ExecutionState

from ..config.workspace import WorkspaceConfig, config_path, load_workspace_config
from ..errors import (
    Conflict,
    InvalidInput,
    ServiceUnavailable,
    SessionLedgerError,
)
from ..ledger import Ledger, checked_input, eventlog_errors
from ..logs import log_event
from ..permission import PermissionRequest, PermissionService
from ..permission.authority import primary_argument
from ..permission.descriptors import MCP_NAME, ToolDescriptor, host_tool, mcp_tool
from .executor import CallAnswer, Decision, ToolExecutor
from .ports import ToolPorts
from .registry import ToolRegistry, WorkspaceSurface, basic_handlers, service_handlers

__all__ = [
    "QueueTimers",
    "ToolService",
    "WorkspacePermissions",
    "default_registry",
]


# -- the permission authority: a workspace's rules applied to one call (TR-4, D73) ---------

_NO_ARGUMENT = ("text", "")
_MEMO_LIMIT = 1024
"""Decisions kept per loaded configuration (tools x execution states: a few dozen in use)."""


class _Rules:
    """One workspace's loaded configuration, its permission service and the decisions of
    calls without a primary argument, by (tool, execution state)."""

    __slots__ = ("config", "decided", "service", "stamp")

    def __init__(self, stamp: float | None, config: WorkspaceConfig) -> None:
        self.stamp = stamp
        self.config = config
        self.service = PermissionService(config.permission)
        self.decided: dict[tuple[ToolDescriptor, ExecutionState], PermissionVerdict] = {}


class WorkspacePermissions:
    """Decides calls with the rules of the session's workspace (cached by file mtime)."""

    def __init__(self) -> None:
        self._cache: dict[str, _Rules] = {}
        self._files: dict[str, str] = {}
        """Each workspace's configuration file as a string, for a plain ``os.stat`` (every
        call stats it, some twice: building the path each time cost more than the stat)."""
        self._lock = threading.Lock()

    def config(self, workspace: Path) -> WorkspaceConfig:
        """The workspace's configuration (defaults when it has no file)."""
        return self._entry(workspace).config

    def _entry(self, workspace: Path) -> _Rules:
        key = str(workspace)
        file = self._files.get(key)
        if file is None:
            file = self._files[key] = str(config_path(workspace))
        try:
            stamp: float | None = os.stat(file).st_mtime
        except OSError:
            stamp = None
        with self._lock:
            cached = self._cache.get(key)
        if cached is not None and cached.stamp == stamp:
            return cached
        entry = _Rules(stamp, load_workspace_config(workspace))
        with self._lock:
            self._cache[key] = entry
        return entry

    def decide(
        self, *, tool: ToolDescriptor, input: Mapping[str, Any], state: ExecutionState,
        workspace: Path, plan_files: Path | None = None,
    ) -> PermissionVerdict:
        rules = self._entry(workspace)
        memo = not tool.shell and primary_argument(tool, input) == _NO_ARGUMENT
        if memo:
            known = rules.decided.get((tool, state))
            if known is not None:
                return known
        request = PermissionRequest(tool=tool, input=input, state=state, workspace=workspace,
                                    plan_files=plan_files)
        verdict = rules.service.check(request).to_verdict()
        if memo:
            if len(rules.decided) >= _MEMO_LIMIT:
                rules.decided.clear()
            rules.decided[(tool, state)] = verdict
        return verdict


# -- service -------------------------------------------------------------------------------------

_log = logging.getLogger("sessionledger.tools")


def default_registry(
    store: EventStore | None = None, projections: Projections | None = None,
    ports: ToolPorts | None = None,
) -> ToolRegistry:
    """Every service tool whose handler exists; without a store only those that need
    nothing but the session (todos, questions)."""
    if store is None or projections is None:
        return ToolRegistry(basic_handlers())
    return ToolRegistry(service_handlers(store, projections, ports or ToolPorts()))


class QueueTimers(Protocol):
    """The auto-continue timers of the interaction queues (:mod:`sessionledger.service.timers`)."""

    def settle(self, session_id: str) -> int: ...
    def settle_quietly(self, session_id: str) -> None: ...
    def auto_resolutions(self, session_id: str) -> dict[str, dict[str, Any] | None]: ...


class ToolService:
    """Runs service tools and answers permission checks for host tools.

    With :attr:`timers` attached (the session service does), a queue that changed — a call
    now waiting, an answer that lets the next question reach the head — gets its due timer
    transitions at once, and an answer first lets a deadline that already passed fire (the
    deadline is the log's, not the scheduler's, HO-4).
    """

    timers: QueueTimers | None = None

    def __init__(
        self,
        *,
        ledger: Ledger,
        registry: ToolRegistry | None = None,
        ports: ToolPorts | None = None,
        workspace_root: Path | None = None,
    ) -> None:
        self._ledger = ledger
        self._store = ledger.store
        self.permissions = WorkspacePermissions()
        self.ports = ports or ToolPorts(
            config=self.permissions.config, workspace_root=workspace_root
        )
        self.executor = ToolExecutor(
            ledger=ledger,
            registry=registry or default_registry(ledger.store, ledger.projections, self.ports),
            permissions=self.permissions,
            surface=WorkspaceSurface(self.ports.config).options,
        )
        self._resumed: set[str] = set()
        self._resume_lock = threading.Lock()

    def _resume(self, session_id: str) -> None:
        """Once per session and process, before its calls are used: abandon answers an
        earlier process left on record and never completed. A failure is logged and tried
        again on the next access; it never fails the access itself."""
        with self._resume_lock:
            if session_id in self._resumed:
                return
            self._resumed.add(session_id)
        try:
            with eventlog_errors():
                self.executor.resume(session_id)
        except SessionLedgerError as exc:
            self._forget_resumed(session_id)
            log_event(_log, "resume failed", sessionId=session_id,
                      error=exc.__class__.__name__, message=str(exc))

    def _forget_resumed(self, session_id: str) -> None:
        with self._resume_lock:
            self._resumed.discard(session_id)

    def surface(self, session_id: str) -> list[str]:
        """The tools the session is offered (TR-1)."""
        return self.executor.surface(self._ledger.live(session_id))

    def call(
        self, session_id: str, tool: str, raw_input: Mapping[str, Any], *,
        call_id: str | None = None, host: HostKind | None = None,
    ) -> CallAnswer:
        """Run a service tool call. Every tool input passes here, from HTTP, MCP and the CLI:
        EG-1's shape check refuses one that would not read back as sent (422, nothing
        appended) before any tool sees it."""
        checked_input(raw_input)
        self._resume(session_id)
        with eventlog_errors():
            answer = self.executor.call(
                session_id, tool, raw_input, call_id=call_id, host=host
            )
        if answer.status_code == 202 and self.timers is not None:
            self.timers.settle_quietly(session_id)
        return answer

    def get(self, session_id: str, call_id: str) -> CallAnswer:
        self._resume(session_id)
        with eventlog_errors():
            return self.executor.get(session_id, call_id)

    def respond(
        self, session_id: str, interaction_id: str, decision: Decision, *,
        input: Mapping[str, Any] | None = None, feedback: str | None = None,
    ) -> dict[str, Any]:
        if input is not None:
            checked_input(input)  # a modify's new input, shape-checked like a call's
        self._resume(session_id)
        try:
            with eventlog_errors():
                if self.timers is not None:
                    self.timers.settle(session_id)
                done = self.executor.respond(
                    session_id, interaction_id, decision, input=input, feedback=feedback
                )
        except ServiceUnavailable:  # a cancelled run may be left to the next access
            self._forget_resumed(session_id)
            raise
        if self.timers is not None:
            self.timers.settle_quietly(session_id)
        return done

    def withdraw(self, session_id: str, interaction_id: str, *, reason: str) -> dict[str, Any]:
        """Withdraw a waiting call whose caller cancelled its request (D157): its interaction
        resolved ``withdrawn`` (by the ``host``), its call ``cancelled``, its timer ended and
        the queue's next question at the head; the call document. 409 ``conflict`` when the
        interaction was already resolved (nothing changes), 404 when it is not the session's.
        """
        if not reason.strip():
            raise InvalidInput("a withdrawal needs a reason", details=[{"loc": ["reason"]}])
        self._resume(session_id)
        with eventlog_errors():
            done = self.executor.withdraw(session_id, interaction_id, reason=reason)
        if self.timers is not None:
            self.timers.settle_quietly(session_id)
        return done

    def resolution(self, session_id: str, interaction_id: str) -> dict[str, Any] | None:
        """How a resolved interaction of the session was resolved: ``decision``, ``actor``
        (the envelope's: ``user``, ``timer``, ``host``) and ``recordedAt``; ``None`` while it is
        pending or when it is not the session's."""
        with eventlog_errors():
            found = self._ledger.interaction(interaction_id)
            if found is None or found.session_id != session_id or found.status != "resolved":
                return None
            call = self._ledger.call(session_id, str(found.body["callId"]))
            after = call.order - 1 if call is not None else 0  # the call's first seq
            for event in self._store.read_session(session_id, after=after):
                data = event.data
                if isinstance(data, InteractionResolved) and data.interaction_id == interaction_id:
                    return {"decision": data.decision, "actor": event.actor,
                            "recordedAt": event.recorded_at}
        return None

    def pending_interactions(self, session_id: str) -> list[dict[str, Any]]:
        """The session's pending interactions in queue order, as the document lists them."""
        self._resume(session_id)
        with eventlog_errors():
            docs = self._ledger.pending_interactions(session_id)
        wires = [interaction_wire(d) for d in docs]
        if self.timers is not None and wires:
            timers = self.timers.auto_resolutions(session_id)
            for wire in wires:
                wire["autoResolution"] = timers.get(wire["interactionId"])
        return wires

    def permission_check(
        self, session_id: str, tool: str, raw_input: Mapping[str, Any], *,
        read_only: bool | None = None, destructive: bool | None = None,
        call_id: str | None = None,
    ) -> dict[str, Any]:
        """Decide a host tool call (TR-3) and record the decision with its call id."""
        checked_input(raw_input)
        session = self._ledger.live(session_id)
        descriptor = _host_descriptor(tool, read_only=read_only, destructive=destructive)
        verdict = self.permissions.decide(
            tool=descriptor, input=raw_input, state=session.execution,
            workspace=Path(session.workspace),
        )
        cid = call_id or new_id("chk")
        with eventlog_errors():
            taken = self._ledger.call(session_id, cid) is not None
        if taken:  # its decision would be folded into that call's document
            raise Conflict(
                f"call id {cid!r} is a service tool call of this session; "
                "use another id for the host tool",
                details={"callId": cid},
            )
        event = PermissionDecided(call_id=cid, tool=tool, decision=verdict)
        with eventlog_errors():
            self._ledger.append(session_id, [NewEvent(event, actor="host", causation_id=cid)])
        return {"behavior": verdict.behavior, "reason": verdict.reason,
                "ruleId": verdict.rule_id, "callId": cid}


def _host_descriptor(
    tool: str, *, read_only: bool | None, destructive: bool | None
) -> ToolDescriptor:
    """The host tool's descriptor: built in, an MCP tool with declared flags, or declared."""
    known = host_tool(tool)
    if known is not None:
        return known
    if MCP_NAME.match(tool):
        return mcp_tool(tool, read_only=bool(read_only), destructive=bool(destructive))
    if read_only is None:
        raise InvalidInput(
            f"unknown host tool {tool!r}: declare readOnly (and destructive) for it",
            details=[{"loc": ["readOnly"], "message": "required for tools without a descriptor"}],
        )
    return ToolDescriptor(
        name=tool, kind="host", read_only=read_only, destructive=bool(destructive),
        side_effect_scope="none" if read_only else "system", needs_approval=not read_only,
    )
