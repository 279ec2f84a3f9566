"""The application service for sessions: create, read, list, page events, change, delete, audit.

HTTP routes and CLI commands call this and nothing below it, so every rule about sessions
(workspace inside the root, parent must exist, cursor bounds, a deleted session answers 410)
lives here once. Reads come from the inline projections (:mod:`projections`), never from
folding events per request; execution-state changes go through one
:class:`~sessionledger.service.ExecutionRuntime`, which keeps ES-6's order. Every log
error becomes a :mod:`sessionledger.errors` error. Methods are synchronous: the HTTP layer
runs them in worker threads.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Literal

from eventlog import (
    Actor,
    AnswerIn,
    AnswerInChanged,
    Clock,
    EventStore,
    ExecutionStateData,
    HostKind,
    ModeChangeVia,
    NewEvent,
    RecordedEvent,
    SessionCreated,
    SystemClock,
    new_session_id,
)
from eventlog import (
    SessionDeleted as SessionDeletedEvent,
)
from projections import Projections, SessionSummary, SummaryPage
from projections.session import fold
from statemachine.execution import Command, Cycle, EndGoal, LeavePlan, SetMode, StartGoal
from statemachine.interaction import TimerConfig

from ..config import MAX_CURSOR
from ..errors import (
    Conflict,
    InvalidInput,
    SessionNotDeleted,
    WorkspaceOutsideRoot,
)
from ..ledger import Ledger, eventlog_errors
from ..tools.service import ToolService
from . import CommandResult, ExecutionRuntime, TurnService
from .audit import AuditProgress, AuditReport, audit_log, audit_session
from .documents import TodoService, list_entry, session_document, timeline_entry
from .models import ModelService
from .settings import SettingsService
from .timers import TimerService
from .turns import plan_file_source

ANSWER_PLACES: tuple[AnswerIn, ...] = ("host", "here")
"""Where a hosted session's questions are answered: the program's own dialog, or here."""

__all__ = [
    "AUDITS_AT_ONCE",
    "DEFAULT_EVENTS_LIMIT",
    "DEFAULT_SESSIONS_LIMIT",
    "DEFAULT_TIMELINE_LIMIT",
    "HOSTS",
    "MAX_CURSOR",
    "MAX_EVENTS_LIMIT",
    "MAX_SESSIONS_LIMIT",
    "MAX_TIMELINE_LIMIT",
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
DEFAULT_TIMELINE_LIMIT = 200
MAX_TIMELINE_LIMIT = 1000
DEFAULT_SESSIONS_LIMIT = 200
MAX_SESSIONS_LIMIT = 1000
AUDITS_AT_ONCE = 2
"""Audits one process runs at once (HTTP, MCP, CLI); the next waits for one to end."""
_audits = threading.BoundedSemaphore(AUDITS_AT_ONCE)


def check_cursor(value: int, *, name: str = "after") -> int:
    """A ``seq`` or global position cursor: an integer from 0 to :data:`MAX_CURSOR`."""
    if not 0 <= value <= MAX_CURSOR:
        raise InvalidInput(
            f"{name} must be an integer from 0 to {MAX_CURSOR}, not {value}",
            details=[{"loc": [name], "message": "out of range"}],
        )
    return value


def _check_limit(limit: int, maximum: int) -> int:
    """A page size: an integer from 1 to ``maximum``."""
    if not 1 <= limit <= maximum:
        raise InvalidInput(
            f"limit must be an integer from 1 to {maximum}, not {limit}",
            details=[{"loc": ["limit"], "message": "out of range"}],
        )
    return limit


def _session_cursor(cursor: str) -> int:
    """The session list's ``cursor`` as given in a ``next``: digits, a global position."""
    if not (cursor.isascii() and cursor.isdigit() and len(cursor) <= 19):
        raise InvalidInput(
            "cursor must be the `next` of a page of the session list",
            details=[{"loc": ["cursor"], "message": "not a cursor"}],
        )
    return check_cursor(int(cursor), name="cursor")


def _not_blank(value: str, name: str) -> str:
    if not value.strip():
        raise InvalidInput(
            f"{name} must not be empty", details=[{"loc": [name], "message": "empty"}]
        )
    return value


class SessionService:
    """Sessions over one event store and its projections, confined to one workspace root."""

    def __init__(
        self, store: EventStore, projections: Projections, *, workspace_root: Path | str,
        timer_config: TimerConfig | None = None, clock: Clock | None = None,
    ) -> None:
        self.ledger = Ledger(store, projections)
        self._store = store
        self._projections = projections
        self._runtime = ExecutionRuntime(self.ledger)
        self._root = Path(workspace_root).resolve()
        self.tools = ToolService(ledger=self.ledger, workspace_root=self._root)
        self.models = ModelService(
            self.ledger, catalog=self.tools.ports.model_catalog(), workspace_root=self._root,
        )
        self.todos = TodoService(self.ledger)
        self.turns = TurnService(self.ledger, sources=[plan_file_source()])
        self.timers = TimerService(
            ledger=self.ledger, executor=self.tools.executor,
            config=timer_config or TimerConfig(), clock=clock or SystemClock(),
        )
        self.tools.timers = self.timers
        self.settings = SettingsService(self.ledger, self.timers)

    @classmethod
    def open(
        cls, url: str, *, workspace_root: Path | str, timer_config: TimerConfig | None = None
    ) -> SessionService:
        """A service over the store ``url`` names, opened with its projections."""
        ledger = Ledger.open(url)
        return cls(ledger.store, ledger.projections, workspace_root=workspace_root,
                   timer_config=timer_config)

    def close(self) -> None:
        """Close the store (waits for a commit in flight)."""
        self._store.close()

    @property
    def store(self) -> EventStore:
        return self._store

    @property
    def projections(self) -> Projections:
        return self._projections

    @property
    def runtime(self) -> ExecutionRuntime:
        """The one execution runtime of this service (ES-6 order, subscribers)."""
        return self._runtime

    @property
    def workspace_root(self) -> Path:
        return self._root

    # -- creating --------------------------------------------------------------------------

    def create_session(
        self,
        *,
        mode: RequestedMode | None = None,
        workspace: str | None = None,
        parent_session_id: str | None = None,
        host: HostKind = "protocol",
        session_id: str | None = None,
        client: str | None = None,
        external_session_id: str | None = None,
        occurred_at: str | None = None,
        root: Path | None = None,
    ) -> dict[str, Any]:
        """Append one ``SessionCreated`` (expected version 0) and return the new document.

        ``mode="plan"`` means ``build`` with the Plan switch on (ES-2). A subagent
        (``parent_session_id``) starts from a snapshot of its parent's mode and Plan switch,
        never its goal; a requested mode replaces only the mode underneath (ES-7).
        A workspace whose ``config.toml`` cannot be used is refused with
        :class:`InvalidWorkspaceConfig` naming the key, and nothing is appended (EG-2).
        Another program's session (Claude Code's, CC-2) comes with its own ``session_id``
        (one it derived, so every process finds it), its ``client`` and its own id for it;
        a second creation of that id is a :class:`Conflict`. ``root``: the root the workspace
        must lie inside when it is not this service's — a command hook's own, whose events
        the hook's writer records as the hook would have recorded them itself.
        """
        if mode is not None and mode not in MODES:
            raise InvalidInput(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
        if host not in HOSTS:
            raise InvalidInput(f"host must be one of {', '.join(HOSTS)}, not {host!r}")
        execution = self._initial_execution(mode, parent_session_id)
        resolved = self._resolve_workspace(workspace, self._root if root is None else root)
        self.tools.permissions.config(Path(resolved))  # EG-2: a broken config.toml is a 422
        event = SessionCreated(
            workspace=resolved,
            host=host,
            parent_session_id=parent_session_id,
            execution_state=execution,
            client=client,
            external_session_id=external_session_id,
            occurred_at=occurred_at,
        )
        session_id = session_id or new_session_id()
        with eventlog_errors(payloads=True):
            result = self.ledger.append(
                session_id, [NewEvent(event, actor="host")], expected_version=0
            )
        summary = fold(result.events)  # the very fold the projection ran in the append
        assert summary is not None  # an append returns at least one event
        return session_document(summary)

    def _initial_execution(
        self, mode: RequestedMode | None, parent_session_id: str | None
    ) -> ExecutionStateData:
        base = ExecutionStateData()
        if parent_session_id is not None:
            parent = self.summary(parent_session_id, field="parentSessionId")
            base = ExecutionStateData(mode=parent.mode, plan_enabled=parent.plan_enabled)
        if mode == "plan":
            return base.model_copy(update={"plan_enabled": True})
        if mode is not None:
            return base.model_copy(update={"mode": mode})
        return base

    def _resolve_workspace(self, workspace: str | None, root: Path) -> str:
        if workspace is None:
            return str(root)
        if not workspace.strip():
            raise InvalidInput("workspace must not be empty")
        try:
            candidate = Path(workspace)
            if not candidate.is_absolute():
                candidate = root / candidate
            resolved = candidate.resolve()
        except (OSError, ValueError, RuntimeError) as exc:
            raise InvalidInput(f"workspace {workspace!r} cannot be resolved: {exc}") from exc
        if not resolved.is_relative_to(root):
            raise WorkspaceOutsideRoot(
                f"workspace {workspace!r} resolves outside the workspace root {str(root)!r}",
                details={"workspace": workspace, "root": str(root)},
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
        """Raise :class:`SessionNotFound` unless the log holds the session (deleted or not)."""
        self.ledger.known(session_id)

    def find_summary(self, session_id: str) -> SessionSummary | None:
        """The session's projected summary, deleted or not; ``None`` if it has none."""
        with eventlog_errors(payloads=True):
            return self.ledger.find(session_id)

    def summary(
        self, session_id: str, *, field: str | None = None, allow_deleted: bool = False
    ) -> SessionSummary:
        """The session's projected summary; 404 if unknown, 410 if deleted (unless allowed)."""
        with eventlog_errors(payloads=True):
            return self.ledger.live(session_id, field=field, allow_deleted=allow_deleted)

    def require_live(self, session_id: str) -> None:
        """Raise 404 for an unknown session and 410 for a deleted one."""
        self.summary(session_id)

    def document(self, session_id: str) -> dict[str, Any]:
        """The session document of docs/spec.md (``GET /v1/sessions/{id}``), from the projection."""
        summary = self.summary(session_id)
        return session_document(
            summary, interactions=self.tools.pending_interactions(session_id),
            todos=self.todos.wire(session_id),
            answer_in=None if summary.client is None else self.answer_in(session_id),
        )

    def answer_in(self, session_id: str) -> AnswerIn:
        """Where the questions and plan approvals of a session another program runs are
        answered: ``host`` (its own dialog, the default) or ``here``."""
        with eventlog_errors(payloads=True):
            return self.store.read_view(
                lambda tx: self.projections.records.answer_in(tx, session_id))

    def set_answer_in(self, session_id: str, answer_in: str) -> dict[str, Any]:
        """Choose where a hosted session's questions and plan approvals are answered
        (``AnswerInChanged``, actor user); the session document. The same choice again
        appends nothing; a session this service runs itself has no other place (409)."""
        if answer_in not in ANSWER_PLACES:
            raise InvalidInput(
                f"answerIn must be one of {', '.join(ANSWER_PLACES)}, not {answer_in!r}",
                details=[{"loc": ["answerIn"], "message": "host or here"}])

        def attempt() -> None:
            summary = self.summary(session_id)
            if summary.client is None:
                raise Conflict("this session is run here: its questions are answered here "
                               "already (answerIn is for a session another program runs)")
            previous = self.answer_in(session_id)
            if previous == answer_in:
                return
            self.ledger.append(session_id, [NewEvent(AnswerInChanged(
                answer_in=answer_in, previous=previous), actor="user")],
                expected_version=summary.version)

        with eventlog_errors():
            self.ledger.retry(session_id, attempt)
        return self.document(session_id)

    def summaries(self, *, include_deleted: bool = False) -> list[SessionSummary]:
        """Every session's summary, most recently written first (by global position), in
        one read (pages would each scan the summaries again)."""
        with eventlog_errors(payloads=True):
            rows = self.ledger.summaries()
        return rows if include_deleted else [s for s in rows if not s.deleted]

    def summary_page(
        self, *, limit: int, before: int | None = None, waiting: bool = False,
        include_deleted: bool = False,
    ) -> tuple[list[SessionSummary], int | None]:
        """At most ``limit`` summaries, newest first, of the sessions whose last event is
        before global position ``before`` (all when ``None``); and the ``before`` of the next
        page, ``None`` when this is the last."""
        with eventlog_errors(payloads=True):
            rows = self.ledger.summary_page(SummaryPage(
                limit + 1, before=before, waiting=waiting, deleted=include_deleted))
        if len(rows) <= limit:
            return rows, None
        return rows[:limit], rows[limit - 1].last_position

    def list_sessions(
        self, *, limit: int = DEFAULT_SESSIONS_LIMIT, cursor: str | None = None,
        waiting: bool = False,
    ) -> dict[str, Any]:
        """``{"sessions": [...], "next": cursor | null}``: a page of the session list, most
        recently updated first; deleted sessions are left out; only those something waits in
        with ``waiting``. ``next`` is the ``cursor`` of the page after (null on the last).

        Order is by the global position of each session's last event, which is exact where
        ``updatedAt`` (milliseconds) ties; a session written while a client pages moves to the
        front (the client finds it by reading the first page again). Each entry names the
        session and says what waits in it (:func:`~.documents.list_entry`); the question
        timers are read in one go for the page's sessions with something waiting.
        """
        _check_limit(limit, MAX_SESSIONS_LIMIT)
        before = None if cursor is None else _session_cursor(cursor)
        summaries, after = self.summary_page(limit=limit, before=before, waiting=waiting)
        return {"sessions": self.list_entries(summaries),
                "next": None if after is None else str(after)}

    def list_entries(self, summaries: Sequence[SessionSummary]) -> list[dict[str, Any]]:
        """Each summary as an entry of the session list: named, with what waits in it; the
        question timers are read in one go, of the sessions something waits in only."""
        with eventlog_errors(payloads=True):
            rows = self.ledger.timer_rows([s.session_id for s in summaries if s.waiting])
        return [list_entry(s, rows[s.session_id].body["queue"] if s.session_id in rows else ())
                for s in summaries]

    def events(
        self, session_id: str, *, after: int = 0, limit: int | None = None
    ) -> dict[str, Any]:
        """One page of envelopes after ``seq`` ``after`` and the session's version.

        A deleted session's events stay readable until purged (an auditor reads them).
        """
        check_cursor(after)
        if limit is None:
            limit = DEFAULT_EVENTS_LIMIT
        _check_limit(limit, MAX_EVENTS_LIMIT)
        self.require_session(session_id)
        page = self.session_page(session_id, after=after, limit=limit)
        with eventlog_errors(payloads=True):
            version = self._store.version(session_id)
        return {"events": [event.to_wire() for event in page], "version": version}

    def timeline(
        self, session_id: str, *, before: int | None = None, after: int | None = None,
        limit: int = DEFAULT_TIMELINE_LIMIT,
    ) -> dict[str, Any]:
        """A window of the session's timeline entries (issue 23.2): the ``limit`` newest, the
        ``limit`` just before seq ``before``, or the first ``limit`` after seq ``after`` — in
        seq order, with the session's version. Each entry is the one-line summary ``replay``
        prints (:func:`~sessionledger.service.documents.timeline_entry`). A deleted session's
        timeline stays readable until purged, like its events page."""
        if before is not None and after is not None:
            raise InvalidInput(
                "give before or after, not both",
                details=[{"loc": ["before"], "message": "not with after"}],
            )
        _check_limit(limit, MAX_TIMELINE_LIMIT)
        if before is not None:
            check_cursor(before, name="before")
        if after is not None:
            check_cursor(after)
        self.require_session(session_id)
        with eventlog_errors(payloads=True):
            version = self._store.version(session_id)
        if after is not None:
            start, count = after, limit
        else:
            end = version if before is None else min(version, max(0, before - 1))
            start = max(0, end - limit)
            count = end - start
        page = self.session_page(session_id, after=start, limit=count) if count > 0 else []
        return {
            "entries": [timeline_entry(event) for event in page], "version": version,
            "hasEarlier": bool(page) and page[0].seq > 1,
        }

    def iter_events(
        self, session_id: str, *, after: int = 0, until: int | None = None
    ) -> Iterator[RecordedEvent]:
        """Every event after ``after`` (up to ``seq`` ``until``), page by page (flat memory).

        The cursor and the session are checked now; read errors surface while iterating.
        """
        check_cursor(after)
        self.require_session(session_id)
        limit = None if until is None else max(0, until - after)
        return self._stream(session_id, after, limit)

    def _stream(self, session_id: str, after: int, limit: int | None) -> Iterator[RecordedEvent]:
        with eventlog_errors(payloads=True):
            yield from self._store.read_session(session_id, after=after, limit=limit)

    def session_page(self, session_id: str, *, after: int, limit: int) -> list[RecordedEvent]:
        """Up to ``limit`` events of one session after ``seq`` ``after`` (for streams)."""
        with eventlog_errors(payloads=True):
            return list(self._store.read_session(session_id, after=after, limit=limit))

    def global_page(self, *, after: int, limit: int) -> list[RecordedEvent]:
        """Up to ``limit`` events of every session after global position ``after``."""
        with eventlog_errors(payloads=True):
            return list(self._store.read_all(after=after, limit=limit))

    # -- execution state (ES-1 … ES-8) ---------------------------------------------------------

    def execute(
        self,
        session_id: str,
        command: Command,
        *,
        via: ModeChangeVia,
        actor: Actor = "user",
        message: str | None = None,
        causation_id: str | None = None,
    ) -> CommandResult:
        """Run one command through the runtime; 409 ``refused`` when the machine says no."""
        with eventlog_errors(payloads=True):
            return self._runtime.execute(
                session_id, command, via=via, actor=actor, message=message,
                causation_id=causation_id,
            )

    def set_mode(
        self, session_id: str, mode: RequestedMode, *, task: str | None = None
    ) -> dict[str, Any]:
        """``/mode X`` — or ``/plan [task]`` when ``mode`` is plan with a task (ES-4).

        The task is recorded as a real user message in the same batch. Entering Plan in Plan
        appends no state event (ES-3); during a goal it is refused (ES-5).
        """
        if mode not in MODES:
            raise InvalidInput(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
        if task is not None and mode != "plan":
            raise InvalidInput(
                "task goes with mode 'plan' only (the /plan [task] path)",
                details=[{"loc": ["task"], "message": "only with mode plan"}],
            )
        via: ModeChangeVia = "mode_command"
        if task is not None:
            via = "plan_command"
            _not_blank(task, "task")
        self.execute(session_id, SetMode(mode), via=via, message=task)
        return self.document(session_id)

    def cycle_mode(self, session_id: str) -> dict[str, Any]:
        """Shift+Tab: ``plan → build → edit → yolo → plan``; from auto to plan (ES-4)."""
        self.execute(session_id, Cycle(), via="cycle")
        return self.document(session_id)

    def start_goal(self, session_id: str, objective: str) -> dict[str, Any]:
        """Start pursuing ``objective``; refused in Plan (ES-5) or with a goal active."""
        _not_blank(objective, "objective")
        self.execute(session_id, StartGoal(objective), via="mode_command")
        return self.document(session_id)

    def end_goal(self, session_id: str) -> dict[str, Any]:
        """End the active goal; refused (409) when there is none."""
        self.execute(session_id, EndGoal(), via="mode_command")
        return self.document(session_id)

    def enter_plan_tool(
        self, session_id: str, *, causation_id: str | None = None
    ) -> CommandResult:
        """The EnterPlanMode tool path (actor model); succeeds unchanged when in Plan (ES-3)."""
        return self.execute(
            session_id, SetMode("plan"), via="enter_plan_tool", actor="model",
            causation_id=causation_id,
        )

    def approve_plan_exit(
        self, session_id: str, *, actor: Actor = "user", causation_id: str | None = None
    ) -> CommandResult:
        """ExitPlanMode approved: clear the Plan switch only, keeping the mode (ES-3)."""
        return self.execute(
            session_id, LeavePlan(), via="plan_approval", actor=actor, causation_id=causation_id
        )

    # -- lifecycle -------------------------------------------------------------------------

    def delete_session(self, session_id: str) -> dict[str, Any]:
        """Append one ``SessionDeleted`` (actor user); afterwards the session answers 410.

        Its events stay (readable, auditable) until ``purge``. A concurrent write is retried
        from the fresh state, so two deletes append one event and the second gets 410.
        """
        def attempt() -> dict[str, Any]:
            current = self.summary(session_id)  # overtaken: look again (deleted now?)
            result = self.ledger.append(
                session_id, [NewEvent(SessionDeletedEvent(), actor="user")],
                expected_version=current.version,
            )
            self._runtime.forget(session_id)
            return {"sessionId": session_id, "deleted": True, "version": result.version}

        with eventlog_errors(payloads=True):
            return self.ledger.retry(session_id, attempt)

    def purge_session(self, session_id: str) -> int:
        """Remove a deleted session's events (other chains untouched); the events removed.

        Whether it is deleted is read from the log itself, not the projection: purging is
        the one destructive operation, so it trusts nothing derived.
        """
        self.require_session(session_id)
        with eventlog_errors(payloads=True):
            folded = fold(self._store.read_session(session_id))
        if folded is None or not folded.deleted:
            raise SessionNotDeleted(session_id)
        with eventlog_errors(payloads=True):
            removed = self._store.purge(session_id)
        self._runtime.forget(session_id)
        return removed

    def rebuild_projections(self, *, progress: AuditProgress | None = None) -> int:
        """Drop every projection and fold the whole log again; the events folded."""
        with eventlog_errors(payloads=True):
            return self._store.rebuild_projections(progress=progress)

    # -- auditing --------------------------------------------------------------------------

    def audit_report(self, session_id: str) -> AuditReport:
        """Check one session: its hash chain (EL-4) and its projections against the log.

        At most :data:`AUDITS_AT_ONCE` run at once in a process; the others wait their turn
        (an audit reads and folds a whole session: three of a long one at once took twice the
        time of three in turn, issue 41)."""
        with _audits, eventlog_errors(payloads=True):
            report = audit_session(self._store, self._projections, session_id)
        if report.ok and report.events == 0:
            self.ledger.known(session_id)
        return report

    def audit(self, session_id: str) -> dict[str, Any]:
        """The audit document of docs/spec.md (``GET /v1/sessions/{id}/audit``)."""
        return self.audit_report(session_id).to_wire()

    def audit_all(self, *, progress: AuditProgress | None = None) -> list[AuditReport]:
        """Audit every session, calling ``progress(done, total)`` after each."""
        with eventlog_errors(payloads=True):
            return audit_log(self._store, self._projections, progress=progress)
