"""Audits: each session's hash chain, and its read models against a fresh fold of its log.

An audit has two halves (SPEC §11 ``audit``): the chain check of the event log (EL-4, the
store's ``verify``) and the projection check (:func:`projections.compare_session`: the stored
execution state against the state folded again from the events). A session is sound when both
are. Audits never crash on a damaged log or table: what cannot be read is reported as a fault
of the session it belongs to. A stored event the reader cannot decode is such a fault, named
``undecodable`` at its ``seq`` (SPEC EG-1); it is not a chain break, since the chain is
checked over the stored text.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from eventlog import (
    ChainReport,
    EventLogError,
    EventStore,
    PlanFileWriteFailed,
    StoreBusy,
    StoreClosed,
    Undecodable,
)
from projections import Projections, compare_session

__all__ = [
    "AuditProgress", "AuditReport", "UndecodableAt", "audit_log", "audit_session",
    "log_findings", "projection_differences",
]

AuditProgress = Callable[[int, int], None]
"""``progress(done, total)``: sessions audited so far out of all of them."""


@dataclass(frozen=True, slots=True)
class UndecodableAt:
    """A stored event this build cannot decode (SPEC EG-1): where, what it was, and why."""

    seq: int
    type: str
    reason: str

    def to_wire(self) -> dict[str, Any]:
        return {"seq": self.seq, "type": self.type, "reason": self.reason}

    def __str__(self) -> str:
        return f"undecodable at seq {self.seq}: {self.type} event ({self.reason})"


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
        """The ``GET /v1/sessions/{id}/audit`` shape of SPEC §11 (plus ``undecodable`` and
        ``notes`` when any)."""
        wire: dict[str, Any] = {
            "ok": self.ok,
            "events": self.events,
            "chain": {"ok": self.chain_ok, "firstBadSeq": self.first_bad_seq},
            "projections": {"ok": self.projections_ok, "differences": list(self.differences)},
        }
        if self.undecodable:
            wire["undecodable"] = [u.to_wire() for u in self.undecodable]
        if self.notes:
            wire["notes"] = list(self.notes)
        return wire


def projection_differences(
    store: EventStore, projections: Projections, session_id: str
) -> tuple[str, ...]:
    """What the stored read models get wrong about ``session_id`` (empty when they agree).

    A log or table that cannot be read is itself a difference, named, never a crash.
    """
    try:
        return tuple(compare_session(store, projections, session_id))
    except (StoreBusy, StoreClosed):
        raise
    except (EventLogError, ValueError, TypeError) as exc:
        return (f"execution_state: {session_id} cannot be compared ({exc.__class__.__name__})",)


def log_findings(
    store: EventStore, session_id: str
) -> tuple[tuple[str, ...], tuple[UndecodableAt, ...]]:
    """What one more read of the log shows: each recorded ``PlanFileWriteFailed`` as a note,
    and each event the reader could not decode."""
    notes: list[str] = []
    undecodable: list[UndecodableAt] = []
    try:
        for e in store.read_session(session_id):
            if isinstance(e.data, PlanFileWriteFailed):
                notes.append(f"seq {e.seq}: plan file {e.data.path} not written ({e.data.error})")
            elif isinstance(e.data, Undecodable):
                undecodable.append(UndecodableAt(e.seq, e.data.stored_type, e.data.reason))
    except (StoreBusy, StoreClosed):
        raise
    except (EventLogError, ValueError, TypeError):
        pass  # the projection half names what cannot be read
    return tuple(notes), tuple(undecodable)


def audit_session(store: EventStore, projections: Projections, session_id: str) -> AuditReport:
    """Both halves of one session's audit (the caller checks the session exists), with the
    events it cannot decode and the plan files it could not write."""
    (chain,) = store.verify(session_id)
    return _with_findings(
        store, AuditReport.from_chain(
            chain, projection_differences(store, projections, session_id)
        ),
    )


def _with_findings(store: EventStore, report: AuditReport) -> AuditReport:
    notes, undecodable = log_findings(store, report.session_id)
    return replace(report, notes=notes, undecodable=undecodable)


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
                else replace(fresh, notes=earlier.notes, undecodable=earlier.undecodable)
            )
    return list(reports.values())
