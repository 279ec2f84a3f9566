"""The store protocol every backend implements, and opening a store from its URL.

The protocol is small on purpose (one small interface): append with an expected
version, read a session from a ``seq`` cursor, read everything from a global position, verify
chains, and listen for committed events. Backends: :mod:`eventlog.memory` (a twin for tests),
:mod:`eventlog.sqlite` (the embedded default) and :mod:`eventlog.postgres` (scale-out, needs
the ``postgres`` extra).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, Protocol, TypeVar
from urllib.parse import parse_qs, urlsplit

from .appending import Listener
from .chain import ChainReport
from .envelope import (
    AppendBatch,
    AppendResult,
    Clock,
    NewEvent,
    RecordedEvent,
    SessionHead,
    SystemClock,
)
from .errors import EventLogError, InvalidStoreUrl
from .inline import InlineProjection, Progress

__all__ = [
    "DEFAULT_STORE_URL",
    "EventStore",
    "backend_of",
    "open_store",
    "sqlite_path_from_url",
]

DEFAULT_STORE_URL = "sqlite:///.sessionledger/ledger.db"

T = TypeVar("T")


class EventStore(Protocol):
    """What every backend offers; the conformance suite holds them to it."""

    @property
    def url(self) -> str: ...

    def append(
        self,
        session_id: str,
        events: Sequence[NewEvent],
        *,
        expected_version: int | None = None,
        idempotency_key: str | None = None,
    ) -> AppendResult: ...

    def append_many(
        self, batches: Sequence[AppendBatch]
    ) -> list[AppendResult | EventLogError]: ...

    async def append_async(
        self,
        session_id: str,
        events: Sequence[NewEvent],
        *,
        expected_version: int | None = None,
        idempotency_key: str | None = None,
    ) -> AppendResult: ...

    def read_session(
        self, session_id: str, *, after: int = 0, limit: int | None = None
    ) -> Iterator[RecordedEvent]: ...

    def read_all(
        self, *, after: int = 0, limit: int | None = None
    ) -> Iterator[RecordedEvent]: ...

    def raw_session(self, session_id: str) -> Iterator[tuple[Any, ...]]: ...

    def version(self, session_id: str) -> int: ...

    def head_position(self) -> int: ...

    def session_heads(self) -> list[SessionHead]: ...

    def session_head(self, session_id: str) -> SessionHead | None: ...

    def verify(self, session_id: str | None = None) -> list[ChainReport]: ...

    def verify_and_read(
        self, session_id: str
    ) -> tuple[ChainReport, list[RecordedEvent] | None]: ...

    def verify_and_stream(
        self, session_id: str
    ) -> tuple[ChainReport, Iterator[RecordedEvent] | None]: ...

    def subscribe(self, listener: Listener) -> Callable[[], None]: ...

    def rebuild_projections(self, *, progress: Progress | None = None) -> int: ...

    def read_view(self, query: Callable[[Any], T]) -> T: ...

    def purge(self, session_id: str) -> int: ...

    def close(self) -> None: ...


_SUPPORTED = "use sqlite:///path, postgresql://… or memory://"


def backend_of(url: str) -> str:
    """``sqlite``, ``postgresql`` or ``memory``: which backend a URL opens (projections pick
    their tables)."""
    scheme = urlsplit(url).scheme
    if scheme not in ("sqlite", "memory", "postgresql"):
        raise InvalidStoreUrl(f"unsupported store URL {url!r}: {_SUPPORTED}")
    return scheme


def sqlite_path_from_url(url: str) -> tuple[Path, dict[str, str]]:
    """``sqlite:///rel/path.db`` or ``sqlite:////abs/path.db`` → path and query options."""
    parts = urlsplit(url)
    if parts.scheme != "sqlite" or parts.netloc:
        raise InvalidStoreUrl(f"not a sqlite URL: {url!r} (use sqlite:///path/to/file.db)")
    raw = parts.path[1:] if parts.path.startswith("/") else parts.path
    if not raw:
        raise InvalidStoreUrl(f"sqlite URL without a path: {url!r}")
    options = {k: v[-1] for k, v in parse_qs(parts.query, keep_blank_values=True).items()}
    return Path(raw), options


def sqlite_target(url: str) -> tuple[Path, str]:
    """The file and the ``synchronous`` setting a ``sqlite:`` URL names, its options checked
    (:class:`InvalidStoreUrl` names a bad one) without opening anything."""
    path, options = sqlite_path_from_url(url)
    sync = options.pop("synchronous", "full").lower()
    if options:
        raise InvalidStoreUrl(f"unknown sqlite URL option(s): {', '.join(sorted(options))}")
    if sync not in ("full", "normal"):
        raise InvalidStoreUrl(f"synchronous must be 'full' or 'normal', not {sync!r}")
    return path, sync


def open_store(
    url: str,
    *,
    clock: Clock | None = None,
    projections: Sequence[InlineProjection] = (),
) -> EventStore:
    """Open the backend the URL names: ``sqlite:///…``, ``postgresql://…`` or ``memory://``.

    ``projections`` are updated inline on every append; build them for the backend the URL
    names (see :func:`backend_of`).
    """
    clock = clock or SystemClock()
    scheme = urlsplit(url).scheme
    # Each backend is imported when its URL is opened (no backend imports this module):
    # PostgreSQL needs the optional ``postgres`` extra, and a store loads only its own backend.
    if scheme == "memory":
        from .memory import MemoryEventStore

        return MemoryEventStore(clock=clock, projections=projections)
    if scheme == "sqlite":
        from .sqlite import SQLiteEventStore

        path, sync = sqlite_target(url)
        return SQLiteEventStore(path, synchronous=sync, clock=clock, projections=projections)
    if scheme == "postgresql":
        from .postgres import PostgresEventStore

        return PostgresEventStore(url, clock=clock, projections=projections)
    raise InvalidStoreUrl(f"unsupported store URL {url!r}: {_SUPPORTED}")
