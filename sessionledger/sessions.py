"""The application service for sessions: create, read, list, page events, audit.

HTTP routes and CLI commands call this and nothing below it, so every rule about sessions
(workspace inside the root, parent must exist, cursor bounds) lives here once. It talks to
the log only through the :class:`eventlog.EventStore` protocol and turns every log error into
a :mod:`sessionledger.errors` error. Methods are synchronous: the HTTP layer runs them in
worker threads.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from eventlog import (
    ChainReport,
    EventLogError,
    EventStore,
    ExecutionStateData,
    HostKind,
    NewEvent,
    RecordedEvent,
    SessionCreated,
    SessionHead,
    new_session_id,
)

from .errors import (
    CorruptLog,
    InvalidInput,
    SessionNotFound,
    WorkspaceOutsideRoot,
    from_eventlog,
)
from .state import SessionState, fold

__all__ = [
    "DEFAULT_EVENTS_LIMIT",
    "HOSTS",
    "MAX_CURSOR",
    "MAX_EVENTS_LIMIT",
    "MODES",
    "AuditReport",
    "RequestedMode",
    "SessionService",
    "check_cursor",
]

RequestedMode = Literal["plan", "build", "edit", "yolo", "auto"]
MODES: tuple[str, ...] = ("plan", "build", "edit", "yolo", "auto")
HOSTS: tuple[str, ...] = ("protocol", "tui", "headless")
DEFAULT_EVENTS_LIMIT = 1000
MAX_EVENTS_LIMIT = 10000
MAX_CURSOR = 2**63 - 1
"""The largest ``seq`` or global position SQLite can store; larger cursors are bad input."""


def check_cursor(value: int, *, name: str = "after") -> int:
    """A ``seq`` or global position cursor: an integer from 0 to :data:`MAX_CURSOR`."""
    if not 0 <= value <= MAX_CURSOR:
        raise InvalidInput(
            f"{name} must be an integer from 0 to {MAX_CURSOR}, not {value}",
            details=[{"loc": [name], "message": "out of range"}],
        )
    return value


@contextmanager
def _log_errors() -> Iterator[None]:
    """Translate what reading or appending can raise into application errors."""
    try:
        yield
    except EventLogError as exc:
        raise from_eventlog(exc) from exc
    except (ValueError, TypeError) as exc:  # a stored payload its model rejects
        raise CorruptLog(f"a stored event cannot be read: {exc.__class__.__name__}") from exc


@dataclass(frozen=True, slots=True)
class AuditReport:
    """One session's audit: its hash chain now; projections are compared by a later issue."""

    session_id: str
    events: int
    first_bad_seq: int | None
    reason: str | None

    @classmethod
    def from_chain(cls, report: ChainReport) -> AuditReport:
        return cls(report.session_id, report.events, report.first_bad_seq, report.reason)

    @property
    def ok(self) -> bool:
        return self.first_bad_seq is None

    def to_wire(self) -> dict[str, Any]:
        """The ``GET /v1/sessions/{id}/audit`` shape of SPEC §11."""
        return {
            "ok": self.ok,
            "events": self.events,
            "chain": {"ok": self.ok, "firstBadSeq": self.first_bad_seq},
            "projections": {"ok": True, "differences": []},
        }


class SessionService:
    """Sessions over one event store, confined to one workspace root."""

    def __init__(self, store: EventStore, *, workspace_root: Path | str) -> None:
        self._store = store
        self._root = Path(workspace_root).resolve()

    @property
    def store(self) -> EventStore:
        return self._store

    @property
    def workspace_root(self) -> Path:
        return self._root

    # -- writing ---------------------------------------------------------------------------

    def create_session(
        self,
        *,
        mode: RequestedMode | None = None,
        workspace: str | None = None,
        parent_session_id: str | None = None,
        host: HostKind = "protocol",
    ) -> dict[str, Any]:
        """Append one ``SessionCreated`` (expected version 0) and return the new document.

        ``mode="plan"`` means ``build`` with the Plan switch on (SPEC ES-2). A subagent
        (``parent_session_id``) starts from a snapshot of its parent's mode and Plan switch,
        never its goal; a requested mode replaces only the mode underneath (SPEC ES-7).
        """
        if mode is not None and mode not in MODES:
            raise InvalidInput(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
        if host not in HOSTS:
            raise InvalidInput(f"host must be one of {', '.join(HOSTS)}, not {host!r}")
        execution = self._initial_execution(mode, parent_session_id)
        event = SessionCreated(
            workspace=self._resolve_workspace(workspace),
            host=host,
            parent_session_id=parent_session_id,
            execution_state=execution,
        )
        session_id = new_session_id()
        with _log_errors():
            result = self._store.append(
                session_id, [NewEvent(event, actor="host")], expected_version=0
            )
        state = fold(result.events)
        assert state is not None  # an append returns at least one event
        return state.to_document()

    def _initial_execution(
        self, mode: RequestedMode | None, parent_session_id: str | None
    ) -> ExecutionStateData:
        base = ExecutionStateData()
        if parent_session_id is not None:
            parent = self.state(parent_session_id, field="parentSessionId").execution
            base = ExecutionStateData(mode=parent.mode, plan_enabled=parent.plan_enabled)
        if mode == "plan":
            return base.model_copy(update={"plan_enabled": True})
        if mode is not None:
            return base.model_copy(update={"mode": mode})
        return base

    def _resolve_workspace(self, workspace: str | None) -> str:
        if workspace is None:
            return str(self._root)
        if not workspace.strip():
            raise InvalidInput("workspace must not be empty")
        try:
            candidate = Path(workspace)
            if not candidate.is_absolute():
                candidate = self._root / candidate
            resolved = candidate.resolve()
        except (OSError, ValueError, RuntimeError) as exc:
            raise InvalidInput(f"workspace {workspace!r} cannot be resolved: {exc}") from exc
        if not resolved.is_relative_to(self._root):
            raise WorkspaceOutsideRoot(
                f"workspace {workspace!r} resolves outside the workspace root {str(self._root)!r}",
                details={"workspace": workspace, "root": str(self._root)},
            )
        try:
            not_a_directory = resolved.exists() and not resolved.is_dir()
        except OSError:  # unreadable: the host will find out when it works there
            not_a_directory = False
        if not_a_directory:
            raise InvalidInput(f"workspace {workspace!r} is not a directory")
        return str(resolved)

    # -- reading ---------------------------------------------------------------------------

    def require_session(self, session_id: str) -> None:
        """Raise :class:`SessionNotFound` unless the session has been created."""
        with _log_errors():
            head = self._store.session_head(session_id)
        if head is None:
            raise SessionNotFound(session_id)

    def state(self, session_id: str, *, field: str | None = None) -> SessionState:
        """The session's current state, folded from its events."""
        with _log_errors():
            state = fold(self._store.read_session(session_id))
        if state is None:
            raise SessionNotFound(session_id, field=field)
        return state

    def document(self, session_id: str) -> dict[str, Any]:
        """The session document of SPEC §11 (``GET /v1/sessions/{id}``)."""
        return self.state(session_id).to_document()

    def list_sessions(self) -> dict[str, Any]:
        """``{"sessions": [...]}``, most recently updated first.

        Order is by the global position of each session's last event, which is exact where
        ``updatedAt`` (milliseconds) ties. Mode and parent come from the first event until a
        projection holds the current state (a later issue).
        """
        rows: list[tuple[int, dict[str, Any]]] = []
        with _log_errors():
            for head in self._store.session_heads():
                rows.append(self._summary(head))
        rows.sort(key=lambda row: row[0], reverse=True)
        return {"sessions": [summary for _position, summary in rows]}

    def _summary(self, head: SessionHead) -> tuple[int, dict[str, Any]]:
        first = list(self._store.read_session(head.session_id, limit=1))
        last = list(self._store.read_session(head.session_id, after=head.version - 1, limit=1))
        state = fold(first)
        if state is None or not last:
            raise CorruptLog(f"session {head.session_id} has a head record but missing events")
        return last[0].global_position, {
            "sessionId": head.session_id,
            "displayMode": state.display_mode,
            "version": head.version,
            "updatedAt": head.updated_at,
            "parentSessionId": state.parent_session_id,
        }

    def events(
        self, session_id: str, *, after: int = 0, limit: int | None = None
    ) -> dict[str, Any]:
        """One page of envelopes after ``seq`` ``after`` and the session's version."""
        check_cursor(after)
        if limit is None:
            limit = DEFAULT_EVENTS_LIMIT
        if not 1 <= limit <= MAX_EVENTS_LIMIT:
            raise InvalidInput(
                f"limit must be an integer from 1 to {MAX_EVENTS_LIMIT}, not {limit}",
                details=[{"loc": ["limit"], "message": "out of range"}],
            )
        self.require_session(session_id)
        page = self.session_page(session_id, after=after, limit=limit)
        with _log_errors():
            version = self._store.version(session_id)
        return {"events": [event.to_wire() for event in page], "version": version}

    def iter_events(self, session_id: str, *, after: int = 0) -> Iterator[RecordedEvent]:
        """Every event after ``after``, streamed page by page (memory stays flat).

        The cursor and the session are checked now; read errors surface while iterating.
        """
        check_cursor(after)
        self.require_session(session_id)
        return self._stream(session_id, after)

    def _stream(self, session_id: str, after: int) -> Iterator[RecordedEvent]:
        with _log_errors():
            yield from self._store.read_session(session_id, after=after)

    def session_page(self, session_id: str, *, after: int, limit: int) -> list[RecordedEvent]:
        """Up to ``limit`` events of one session after ``seq`` ``after`` (for streams)."""
        with _log_errors():
            return list(self._store.read_session(session_id, after=after, limit=limit))

    def global_page(self, *, after: int, limit: int) -> list[RecordedEvent]:
        """Up to ``limit`` events of every session after global position ``after``."""
        with _log_errors():
            return list(self._store.read_all(after=after, limit=limit))

    # -- auditing --------------------------------------------------------------------------

    def audit_report(self, session_id: str) -> AuditReport:
        """Check one session's hash chain (SPEC EL-4)."""
        with _log_errors():
            (report,) = self._store.verify(session_id)
            head = self._store.session_head(session_id)
        if head is None and report.ok and report.events == 0:
            raise SessionNotFound(session_id)
        return AuditReport.from_chain(report)

    def audit(self, session_id: str) -> dict[str, Any]:
        """The audit document of SPEC §11 (``GET /v1/sessions/{id}/audit``)."""
        return self.audit_report(session_id).to_wire()

    def audit_all(
        self, *, progress: Callable[[int, int], None] | None = None
    ) -> list[AuditReport]:
        """Check every session's chain, calling ``progress(done, total)`` after each.

        Sessions are taken from the store's head records. Rows that belong to no such session
        (a head record deleted) would escape that listing; since global positions are
        gapless, they show as fewer verified events than the log's head position, and then
        the whole log is checked at once, which finds them.
        """
        with _log_errors():
            ids = [head.session_id for head in self._store.session_heads()]
            reports = []
            for done, session_id in enumerate(ids, start=1):
                (report,) = self._store.verify(session_id)
                reports.append(AuditReport.from_chain(report))
                if progress is not None:
                    progress(done, len(ids))
            counted = sum(r.events for r in reports)
            if all(r.ok for r in reports) and counted != self._store.head_position():
                reports = [AuditReport.from_chain(r) for r in self._store.verify()]
        return reports
