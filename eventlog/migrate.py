"""Copying a log to another store with its chains intact (issue 11: SQLite → PostgreSQL).

The hash of an event leaves its global position out (EL-4), so a log copied row by row
into another store keeps every chain; :func:`migrate` reads the source's rows in global order
and hands them to the destination, which checks every chain as it arrives before committing
(:meth:`eventlog.postgres.PostgresEventStore.import_rows`). The destination must be an empty
PostgreSQL store; the source any store.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator, Sequence
from contextlib import closing
from dataclasses import dataclass

from .chain import ChainReport
from .envelope import RawRow
from .errors import EventLogError
from .inline import InlineProjection
from .store import EventStore, backend_of, open_store

__all__ = ["MigrationRefused", "MigrationReport", "migrate", "raw_log"]


class MigrationRefused(EventLogError):
    """The source's chains do not verify, or the destination cannot take the copy."""


@dataclass(frozen=True, slots=True)
class MigrationReport:
    """What was copied: sessions and events, each session's chain as verified on arrival."""

    sessions: int
    events: int
    chains: tuple[ChainReport, ...]


def raw_log(store: EventStore) -> Iterator[RawRow]:
    """Every stored row of ``store`` in global order (each session's rows merged)."""
    ids = sorted({h.session_id for h in store.session_heads()})
    sessions = [store.raw_session(sid) for sid in ids]
    return heapq.merge(*sessions, key=lambda row: int(row[0]))


def migrate(
    from_url: str, to_url: str, *, projections: Sequence[InlineProjection] = ()
) -> MigrationReport:
    """Copy the log at ``from_url`` into the empty PostgreSQL store at ``to_url``.

    The source's chains are verified first (a broken log is not copied); the destination
    verifies every chain again on arrival, in the copy's transaction, and folds
    ``projections`` (build them for the destination's backend). Nothing is written to the
    destination unless everything verified.
    """
    if backend_of(to_url) != "postgresql":
        raise MigrationRefused(f"migrate copies into a postgresql:// store, not {to_url!r}")
    from .postgres import PostgresEventStore

    with closing(open_store(from_url)) as source:
        broken = [r for r in source.verify() if not r.ok]
        if broken:
            first = broken[0]
            raise MigrationRefused(
                f"{from_url}: session {first.session_id} breaks at seq {first.first_bad_seq}"
                f" ({first.reason}); repair or purge it before migrating"
            )
        with closing(PostgresEventStore(to_url, projections=projections)) as target:
            try:
                chains = target.import_rows(raw_log(source))
            except EventLogError as exc:
                raise MigrationRefused(str(exc)) from exc
    return MigrationReport(len(chains), sum(r.events for r in chains), tuple(chains))
