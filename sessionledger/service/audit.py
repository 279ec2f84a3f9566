"""Audits: each session's hash chain, and its read models against a fresh fold of its log.

An audit has two halves (docs/cli.md ``audit``): the chain check of the event log (EL-4, the
store's ``verify``) and the projection check (:func:`projections.compare_session`: the stored
execution state against the state folded again from the events). A session is sound when both
are. Audits never crash on a damaged log or table: what cannot be read is reported as a fault
of the session it belongs to. A stored event the reader cannot decode is such a fault, named
``undecodable`` at its ``seq`` (EG-1); it is not a chain break, since the chain is
checked over the stored text.

Beside the faults, an audit lists *findings* (CC-10): what a reviewer looks for in any
session, live, hooked or imported, read from the same pass over its log
(:func:`session_findings`). They are not faults: ``ok`` does not look at them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from eventlog import (
    CATALOG,
    ChainReport,
    EventLogError,
    EventStore,
    InteractionRequested,
    InteractionResolved,
    PermissionDecided,
    PlanFileWriteFailed,
    RecordedEvent,
    SessionCreated,
    SessionModeChanged,
    StoreBusy,
    StoreClosed,
    TodosWritten,
    ToolCallCompleted,
    ToolCallRequested,
    Undecodable,
    parse_instant,
)
from projections import Projections, SessionFold, compare_session
from statemachine.execution import ExecutionState

from ..permission.authority import (
    HOST_PLAN_FILE,
    PLAN_FILE_TOOLS,
    Call,
    PermissionRequest,
    host_plan_file,
    primary_argument,
)
from ..permission.descriptors import named_tool

__all__ = [
    "AuditProgress", "AuditReport", "Finding", "FindingKind", "FindingsReader",
    "UndecodableAt", "audit_log", "audit_session", "log_findings", "projection_differences",
    "session_findings",
]

AuditProgress = Callable[[int, int], None]
"""``progress(done, total)``: sessions audited so far out of all of them."""


@dataclass(frozen=True, slots=True)
class UndecodableAt:
    """A stored event this build cannot decode (EG-1): where, what it was, and why."""

    seq: int
    type: str
    reason: str

    def to_wire(self) -> dict[str, Any]:
        return {"seq": self.seq, "type": self.type, "reason": self.reason}

    def __str__(self) -> str:
        return f"undecodable at seq {self.seq}: {self.type} event ({self.reason})"


FindingKind = Literal["write_in_plan", "dropped_unfinished_todos", "unanswered_question",
                      "clock_stepped_back"]


@dataclass(frozen=True, slots=True)
class Finding:
    """What a reviewer looks for in a session (CC-10), at the ``seq`` of the event that
    shows it; ``details`` are its camelCase wire fields beside ``kind`` and ``seq``."""

    kind: FindingKind
    seq: int
    details: Mapping[str, Any] = field(default_factory=dict)

    def to_wire(self) -> dict[str, Any]:
        return {"kind": self.kind, "seq": self.seq, **self.details}

    def __str__(self) -> str:
        d = self.details
        if self.kind == "write_in_plan":
            subject = d.get("path") or d.get("command")
            what = f"{d['tool']} {subject}" if subject else str(d["tool"])
            text = f"{what} while Plan was on"
        elif self.kind == "dropped_unfinished_todos":
            dropped = list(d["dropped"])
            noun = "todo" if len(dropped) == 1 else "todos"
            text = f"{len(dropped)} unfinished {noun} dropped: " + ", ".join(
                _quoted(c) for c in dropped
            )
        elif self.kind == "clock_stepped_back":
            text = (f"recorded at {d['recordedAt']}, before the event it follows "
                    f"({d['previousRecordedAt']}): the server's clock was set back")
        else:
            questions = list(d["questions"])
            text = f"{d['decision']}: " + (
                ", ".join(_quoted(q) for q in questions) if questions else "(no question text)"
            )
        return f"seq {self.seq} {self.kind}: {text}"


def _quoted(text: str) -> str:
    return '"' + text.replace("\n", " ") + '"'


CLOCK_STEP_TOLERANCE_S = 1.0
"""How far back a ``recordedAt`` may lie behind the one before it without a finding: writers
stamp a batch when they commit it (SQLite inside its write lock, PostgreSQL just before its
transaction, on each replica's clock), so a later event may carry an earlier time by a few
milliseconds; a clock set back lies further."""

_UNANSWERED = frozenset({"autoContinued", "deny", "withdrawn"})
"""How an askUserQuestion interaction ends without the user's answer: the timer continued,
the user declined, or the caller withdrew it."""


class FindingsReader:
    """Reads a session's events in seq order, one at a time, and keeps its findings.

    ``write_in_plan`` — a tool call that ran (``ToolCallCompleted`` with status
    ``completed``; a call refused is ``denied``) whose tool is not read-only and not allowed
    in Plan, and is not the host's own plan being written (allowed by
    ``mode.plan.hostPlanFile``, or a ``.claude/plans/*.md`` file), when Plan was on at
    its ``ToolCallRequested`` *or* when its ``ToolCallCompleted`` was recorded (either is
    enough: the permission check saw the first, the run may have happened under the second).
    Plan is the ``SessionCreated`` execution state, then each ``SessionModeChanged``.
    Read-only-ness is the permission authority's own (:meth:`Call.of`): the tool's descriptor
    (:func:`named_tool`), and for a shell tool the classifier on the recorded ``command``. The
    finding is at the seq of the ``ToolCallCompleted``.

    ``dropped_unfinished_todos`` — each ``TodosWritten`` with ``droppedUnfinished`` items
    (the live TodoWrite and Claude Code's both record them).

    ``unanswered_question`` — an ``askUserQuestion`` interaction resolved ``autoContinued``,
    ``deny`` (declined) or ``withdrawn``, at the seq of its ``InteractionResolved``.

    ``clock_stepped_back`` — an event whose ``recordedAt`` is more than
    :data:`CLOCK_STEP_TOLERANCE_S` earlier than the one before it in the session: the writer's
    wall clock was set back (issue 41). The chain is intact (it
    does not hash time order); what the times say of the session's pace is not.
    """

    def __init__(self) -> None:
        self._plan = False
        self._workspace = Path(".")
        self._requested: dict[str, tuple[ToolCallRequested, bool]] = {}
        self._plan_files: set[str] = set()
        self._questions: dict[str, InteractionRequested] = {}
        self._found: list[Finding] = []
        self._last_recorded: tuple[datetime, str] | None = None

    @property
    def findings(self) -> tuple[Finding, ...]:
        return tuple(self._found)

    def see(self, event: RecordedEvent) -> None:
        self._clock(event)
        data = event.data
        if isinstance(data, SessionCreated):
            self._plan = data.execution_state.plan_enabled
            self._workspace = Path(data.workspace)
        elif isinstance(data, SessionModeChanged):
            self._plan = data.plan_enabled
        elif isinstance(data, ToolCallRequested):
            self._requested[data.call_id] = (data, self._plan)
        elif isinstance(data, PermissionDecided):
            if data.decision.rule_id == HOST_PLAN_FILE:
                self._plan_files.add(data.call_id)
        elif isinstance(data, ToolCallCompleted):
            self._completed(event.seq, data)
        elif isinstance(data, TodosWritten):
            if data.dropped_unfinished:
                self._found.append(Finding("dropped_unfinished_todos", event.seq, {
                    "dropped": [t.content for t in data.dropped_unfinished],
                }))
        elif isinstance(data, InteractionRequested):
            if data.kind == "askUserQuestion":
                self._questions[data.interaction_id] = data
        elif isinstance(data, InteractionResolved):
            asked = self._questions.pop(data.interaction_id, None)
            if asked is not None and data.decision in _UNANSWERED:
                self._found.append(Finding("unanswered_question", event.seq, {
                    "interactionId": data.interaction_id, "callId": data.call_id,
                    "decision": data.decision, "questions": _question_texts(asked.payload),
                }))

    def _clock(self, event: RecordedEvent) -> None:
        try:
            at = parse_instant(event.recorded_at)
        except (ValueError, OverflowError):
            return  # an unreadable time is the chain check's to report
        last = self._last_recorded
        if last is not None and (last[0] - at).total_seconds() > CLOCK_STEP_TOLERANCE_S:
            self._found.append(Finding("clock_stepped_back", event.seq, {
                "recordedAt": event.recorded_at, "previousRecordedAt": last[1],
            }))
        self._last_recorded = (at, event.recorded_at)  # one finding per step back

    def _completed(self, seq: int, data: ToolCallCompleted) -> None:
        requested, plan_at_request = self._requested.pop(data.call_id, (None, False))
        if data.status != "completed" or not (plan_at_request or self._plan):
            return
        tool = named_tool(data.tool)
        if tool.allowed_in_plan_mode:
            return
        raw: Mapping[str, Any] = requested.input if requested is not None else {}
        if data.call_id in self._plan_files or (
                data.tool in PLAN_FILE_TOOLS and host_plan_file(raw.get("file_path"), None)):
            return  # the host's own plan being written
        call = Call.of(PermissionRequest(
            tool=tool, input=raw, state=ExecutionState(plan_enabled=True),
            workspace=self._workspace,
        ))
        if call.read_only:
            return
        details: dict[str, Any] = {"tool": data.tool, "callId": data.call_id}
        kind, value = primary_argument(tool, raw)
        if value and kind in ("path", "command"):
            details[kind] = value
        self._found.append(Finding("write_in_plan", seq, details))


def _question_texts(payload: Mapping[str, Any]) -> list[str]:
    """The question texts of an askUserQuestion payload (``{"questions": [{"question"…}]}``),
    whatever else it holds; an entry without a text is left out."""
    questions = payload.get("questions")
    if not isinstance(questions, list):
        return []
    texts = []
    for q in questions:
        text = q.get("question") if isinstance(q, dict) else q
        if isinstance(text, str):
            texts.append(text)
    return texts


_SEEN = (
    SessionCreated, SessionModeChanged, ToolCallRequested, ToolCallCompleted, TodosWritten,
    InteractionRequested, InteractionResolved, PlanFileWriteFailed, Undecodable,
)
_PASSIVE_TYPES = frozenset(
    name for name, cls in CATALOG.items() if not issubclass(cls, _SEEN)
)
"""Event types whose payload neither :class:`FindingsReader` nor :func:`log_findings` looks
at (a payload's class is the catalog's class of its type): skipped by name, most of a log
being messages (issue 24). A type not in the catalog is looked at."""


def session_findings(events: Iterable[RecordedEvent]) -> tuple[Finding, ...]:
    """The findings of one session's events, in seq order (CC-10; the rules are
    :class:`FindingsReader`'s). Pure: no I/O."""
    reader = FindingsReader()
    for event in events:
        reader.see(event)
    return reader.findings


@dataclass(frozen=True, slots=True)
class AuditReport:
    """One session's audit: its hash chain and the differences of its projections."""

    session_id: str
    events: int
    first_bad_seq: int | None
    reason: str | None
    differences: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    """Not faults but worth knowing: plan files that could not be written (PM-7)."""
    undecodable: tuple[UndecodableAt, ...] = ()
    """Events the reader cannot decode (EG-1): faults, but not of the chain."""
    findings: tuple[Finding, ...] = ()
    """What a reviewer looks for (CC-10): never faults."""

    @classmethod
    def from_chain(cls, report: ChainReport, differences: tuple[str, ...] = ()) -> AuditReport:
        return cls(
            report.session_id, report.events, report.first_bad_seq, report.reason, differences
        )

    @property
    def chain_ok(self) -> bool:
        return self.first_bad_seq is None

    @property
    def projections_ok(self) -> bool:
        return not self.differences

    @property
    def ok(self) -> bool:
        return self.chain_ok and self.projections_ok and not self.undecodable

    def to_wire(self) -> dict[str, Any]:
        """The ``GET /v1/sessions/{id}/audit`` shape of docs/spec.md (plus ``undecodable`` and
        ``notes`` when any, and ``findings`` always: CC-10)."""
        wire: dict[str, Any] = {
            "ok": self.ok,
            "events": self.events,
            "chain": {"ok": self.chain_ok, "firstBadSeq": self.first_bad_seq},
            "projections": {"ok": self.projections_ok, "differences": list(self.differences)},
            "findings": [f.to_wire() for f in self.findings],
        }
        if self.undecodable:
            wire["undecodable"] = [u.to_wire() for u in self.undecodable]
        if self.notes:
            wire["notes"] = list(self.notes)
        return wire


def projection_differences(
    store: EventStore, projections: Projections, session_id: str,
    events: Sequence[RecordedEvent] | None = None,
) -> tuple[str, ...]:
    """What the stored read models get wrong about ``session_id`` (empty when they agree);
    ``events`` are the session's events when already read.

    A log or table that cannot be read is itself a difference, named, never a crash.
    """
    return _differences(
        session_id, lambda: compare_session(store, projections, session_id, events)
    )


def _differences(session_id: str, compare: Callable[[], list[str]]) -> tuple[str, ...]:
    """``compare()``'s differences; a log or table it cannot read is one, named."""
    try:
        return tuple(compare())
    except (StoreBusy, StoreClosed):
        raise
    except (EventLogError, ValueError, TypeError) as exc:
        return (f"execution_state: {session_id} cannot be compared ({exc.__class__.__name__})",)


def log_findings(
    store: EventStore, session_id: str, events: Iterable[RecordedEvent] | None = None
) -> tuple[tuple[str, ...], tuple[UndecodableAt, ...], tuple[Finding, ...]]:
    """What the log shows beside the chain and the read models: each recorded
    ``PlanFileWriteFailed`` as a note, each event the reader could not decode, and the
    session's findings (CC-10; as far as the log could be read). ``events`` are the session's
    events when already read; read here when ``None``."""
    reader = _LogReader()
    see = reader.see
    try:
        for e in store.read_session(session_id) if events is None else events:
            see(e)
    except (StoreBusy, StoreClosed):
        raise
    except (EventLogError, ValueError, TypeError):
        pass  # the projection half names what cannot be read
    return reader.result()


class _LogReader:
    """:func:`log_findings` one event at a time."""

    __slots__ = ("_findings", "_notes", "_undecodable")

    def __init__(self) -> None:
        self._notes: list[str] = []
        self._undecodable: list[UndecodableAt] = []
        self._findings = FindingsReader()

    def see(self, e: RecordedEvent) -> None:
        if e.type in _PASSIVE_TYPES:
            return
        self._findings.see(e)
        data = e.data
        if isinstance(data, PlanFileWriteFailed):
            self._notes.append(f"seq {e.seq}: plan file {data.path} not written ({data.error})")
        elif isinstance(data, Undecodable):
            self._undecodable.append(UndecodableAt(e.seq, data.stored_type, data.reason))

    def result(self) -> tuple[tuple[str, ...], tuple[UndecodableAt, ...], tuple[Finding, ...]]:
        return tuple(self._notes), tuple(self._undecodable), self._findings.findings


AUDIT_ATTEMPTS = 3
"""How often a session that moved on while audited (a live one) is audited again."""


def audit_session(store: EventStore, projections: Projections, session_id: str) -> AuditReport:
    """Both halves of one session's audit (the caller checks the session exists), with the
    events it cannot decode and the plan files it could not write.

    The chain and the fold are of the session as its head was first read; its read models are
    read after. A session appended to meanwhile (a live one) has read models ahead of the
    fold: when they differ and the session's version moved past the audited one, it is
    audited again (:data:`AUDIT_ATTEMPTS` in all), so appends are never reported as faults.
    """
    for _attempt in range(AUDIT_ATTEMPTS - 1):
        report = _audit_once(store, projections, session_id)
        if (not report.chain_ok or not report.differences
                or store.version(session_id) <= report.events):
            return report
    return _audit_once(store, projections, session_id)


def _audit_once(store: EventStore, projections: Projections, session_id: str) -> AuditReport:
    """One audit of the session as it is now.

    A session whose chain holds is read once (issue 24): the rows the chain check hashed are
    decoded for the read-model comparison and the findings (:meth:`verify_and_stream`), each
    event folded into every read model and the findings as it is decoded (no list of the
    session's events is held). A broken chain takes the reads it always took (the chain from
    the raw rows, then the typed reads), so a damaged log reports as before; so does a row
    that does not decode without an error, or a fold that fails: the session is then audited
    again the way it was before issue 24's single pass (:func:`_audit_listed`)."""
    chain, stream = store.verify_and_stream(session_id)
    if stream is None:
        return _audit_listed(store, projections, chain, None)
    fresh = SessionFold(projections)
    log = _LogReader()
    fold, read, passive = fresh.see, log.see, _PASSIVE_TYPES
    try:
        for event in stream:
            fold(event)
            if event.type not in passive:
                read(event)
    except Exception:  # whatever it is, the old way meets it as it always did
        return _audit_listed(store, projections, *store.verify_and_read(session_id))
    differences = _differences(session_id, lambda: fresh.differences(store, session_id))
    report = AuditReport.from_chain(chain, differences)
    notes, undecodable, findings = log.result()
    return replace(report, notes=notes, undecodable=undecodable, findings=findings)


def _audit_listed(
    store: EventStore, projections: Projections, chain: ChainReport,
    events: Sequence[RecordedEvent] | None,
) -> AuditReport:
    report = AuditReport.from_chain(
        chain, projection_differences(store, projections, chain.session_id, events)
    )
    return _with_findings(store, report, events)


def _with_findings(
    store: EventStore, report: AuditReport, events: Sequence[RecordedEvent] | None = None
) -> AuditReport:
    notes, undecodable, findings = log_findings(store, report.session_id, events)
    return replace(report, notes=notes, undecodable=undecodable, findings=findings)


def audit_log(
    store: EventStore, projections: Projections, *, progress: AuditProgress | None = None
) -> list[AuditReport]:
    """Audit every session, calling ``progress(done, total)`` after each.

    Sessions are taken from the store's head records and from the projection's rows (a row
    for a session the log does not hold is a difference too). Rows that belong to no head
    record would escape that listing; since global positions are never reused, they show as
    fewer verified events than the log's head position, and then every chain is checked at
    once from the rows themselves, which finds them. (After a ``purge`` the positions have a
    gap, so that whole-log check always runs: slower, never wrong.)
    """
    ids = [head.session_id for head in store.session_heads()]
    known = set(ids)
    ids += [s.session_id for s in projections.summaries(store) if s.session_id not in known]
    reports: dict[str, AuditReport] = {}
    for done, session_id in enumerate(ids, start=1):
        reports[session_id] = audit_session(store, projections, session_id)
        if progress is not None:
            progress(done, len(ids))
    counted = sum(r.events for r in reports.values())
    if all(r.chain_ok for r in reports.values()) and counted != store.head_position():
        for chain in store.verify():
            earlier = reports.get(chain.session_id)
            differences = (
                earlier.differences if earlier is not None
                else projection_differences(store, projections, chain.session_id)
            )
            fresh = AuditReport.from_chain(chain, differences)
            reports[chain.session_id] = (
                _with_findings(store, fresh) if earlier is None
                else replace(fresh, notes=earlier.notes, undecodable=earlier.undecodable,
                             findings=earlier.findings)
            )
    return list(reports.values())
