"""Audits: each session's hash chain, and its read models against a fresh fold of its log.

An audit has two halves (SPEC §11 ``audit``): the chain check of the event log (EL-4, the
store's ``verify``) and the projection check (:func:`projections.compare_session`: the stored
execution state against the state folded again from the events). A session is sound when both
are. Audits never crash on a damaged log or table: what cannot be read is reported as a fault
of the session it belongs to.
"""

from __future__ import annotations

import sqlite3
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
)
from projections import Projections, compare_session

__all__ = [
    "AuditProgress", "AuditReport", "audit_log", "audit_session", "plan_file_notes",
    "projection_differences",
]

AuditProgress = Callable[[int, int], None]
"""``progress(done, total)``: sessions audited so far out of all of them."""


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
        return self.chain_ok and self.projections_ok

    def to_wire(self) -> dict[str, Any]:
        """The ``GET /v1/sessions/{id}/audit`` shape of SPEC §11 (plus ``notes`` when any)."""
        wire: dict[str, Any] = {
            "ok": self.ok,
            "events": self.events,
            "chain": {"ok": self.chain_ok, "firstBadSeq": self.first_bad_seq},
            "projections": {"ok": self.projections_ok, "differences": list(self.differences)},
        }
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
    except (EventLogError, ValueError, TypeError, sqlite3.DatabaseError) as exc:
        return (f"execution_state: {session_id} cannot be compared ({exc.__class__.__name__})",)


def plan_file_notes(store: EventStore, session_id: str) -> tuple[str, ...]:
    """Each recorded ``PlanFileWriteFailed`` as a note (the log is read once more)."""
    try:
        return tuple(
            f"seq {e.seq}: plan file {e.data.path} not written ({e.data.error})"
            for e in store.read_session(session_id)
            if isinstance(e.data, PlanFileWriteFailed)
        )
    except (StoreBusy, StoreClosed):
        raise
    except (EventLogError, ValueError, TypeError, sqlite3.DatabaseError):
        return ()  # the projection half names what cannot be read


def audit_session(store: EventStore, projections: Projections, session_id: str) -> AuditReport:
    """Both halves of one session's audit (the caller checks the session exists), with the
    plan files it could not write as notes."""
    (chain,) = store.verify(session_id)
    report = AuditReport.from_chain(
        chain, projection_differences(store, projections, session_id)
    )
    return replace(report, notes=plan_file_notes(store, session_id))


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
            notes = (earlier.notes if earlier is not None
                     else plan_file_notes(store, chain.session_id))
            reports[chain.session_id] = replace(
                AuditReport.from_chain(chain, differences), notes=notes
            )
    return list(reports.values())
