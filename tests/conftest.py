"""Shared test setup: hypothesis profiles, event stores per backend, raw tampering helpers.

Hypothesis profiles come from the ``HYPOTHESIS_PROFILE`` environment variable: ``ci`` (the
default, used by ``make test``) and ``long`` (many more examples, used by ``make verify``).
Property tests that should also run long ask for the ``depth`` fixture: its ``slow`` variant
carries the ``slow`` marker, so ``make verify`` (``-m slow``) runs them under the long profile.

Every store fixture is parametrised over the backends (``memory``, ``sqlite``) so one suite
holds both to the contract (SPEC EL-8), and every store is closed when the test ends. A module
adds PostgreSQL by overriding ``backend`` with :data:`pg_support.PG_BACKEND` among its params:
its stores then live in one schema each of a database made for the module (``pg_database``)
on the server of ``pg_server`` (see :mod:`pg_support`).
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any, Protocol

import httpx
import node_support
import pg_support
import pytest
from hypothesis import HealthCheck, settings
from server_support import ServerProcess, running_server

from eventlog import EventStore, ManualClock, UpcasterRegistry, default_upcasters, open_store
from eventlog.memory import MemoryEventStore
from eventlog.postgres import PostgresEventStore
from eventlog.sqlite import SQLiteEventStore

# The command hook starts a writer of its own when no ``serve`` runs (issue 38); a test's
# hook would leave one running past the test. tests/test_hook_writer.py turns it on where it
# is the subject, and stops what it started.
os.environ["SESSIONLEDGER_HOOK_WRITER"] = "off"

settings.register_profile(
    "ci", max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile(
    "long", max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The longest tests first (a stable sort): under ``-n 2`` (``make verify``) one worker
    spends the whole-service machine's wall-clock budget while the other runs the rest,
    instead of the budget starting after everything else (D179)."""
    items.sort(key=lambda item: item.get_closest_marker("longest_first") is None)


BACKENDS = ("memory", "sqlite")

COLUMNS = (
    "global_position", "session_id", "seq", "type", "schema_version", "data", "recorded_at",
    "actor", "causation_id", "correlation_id", "idempotency_key", "prev_hash", "hash",
)
"""The ``events`` columns in SPEC EL-9 order, which is also the order of a raw row tuple."""


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    """The backend under test: every store fixture below follows it."""
    return str(request.param)


@pytest.fixture(params=["fast", pytest.param("slow", marks=pytest.mark.slow)])
def depth(request: pytest.FixtureRequest) -> str:
    """Runs a property test twice: in ``make test`` and, marked slow, in ``make verify``."""
    return str(request.param)


@pytest.fixture
def clock() -> ManualClock:
    """The injected clock of the ``store`` fixture; tests advance it by hand."""
    return ManualClock()


class StoreFactory:
    """Opens stores of one backend in one directory and closes them all at teardown.

    Hypothesis tests use :meth:`fresh` to get a new, empty store for every example, which is
    why sharing this function-scoped factory across examples is safe.
    """

    def __init__(self, backend: str, directory: Path, pg_url: str | None = None) -> None:
        self.backend = backend
        self.directory = directory
        self.pg_url = pg_url
        self._opened: list[EventStore] = []
        self._count = 0

    def new_path(self) -> Path:
        """``ledger.db`` for the first store, then ``ledger-2.db``, ``ledger-3.db`` …"""
        self._count += 1
        name = "ledger.db" if self._count == 1 else f"ledger-{self._count}.db"
        return self.directory / name

    def open(
        self,
        *,
        clock: ManualClock | None = None,
        upcasters: UpcasterRegistry | None = None,
        path: Path | None = None,
        inline_budget_s: float | None = None,
    ) -> EventStore:
        """A new store (or, for sqlite, the file at ``path`` reopened). ``inline_budget_s``
        replaces the budget of a lone coroutine's commit on its loop's thread: a test that
        asserts which thread committed sets it, so the machine's speed never decides (issue
        36; PostgreSQL has no such commit)."""
        clock = clock or ManualClock()
        plain = upcasters is None and inline_budget_s is None  # opened by its URL
        upcasters = upcasters or default_upcasters
        budget = {} if inline_budget_s is None else {"inline_budget_s": inline_budget_s}
        store: EventStore
        if self.backend == "memory":
            store = (
                open_store("memory://", clock=clock) if plain
                else MemoryEventStore(clock=clock, upcasters=upcasters, **budget)
            )
        elif self.backend == "postgresql":
            assert self.pg_url is not None
            url = pg_support.schema_url(self.pg_url, self.directory, path or self.new_path())
            store = (
                open_store(url, clock=clock) if plain
                else PostgresEventStore(url, clock=clock, upcasters=upcasters)
            )
        else:
            path = path or self.new_path()
            store = (
                open_store(f"sqlite:///{path}", clock=clock) if plain
                else SQLiteEventStore(path, clock=clock, upcasters=upcasters, **budget)
            )
        self._opened.append(store)
        return store

    @contextmanager
    def fresh(self, **options: Any) -> Iterator[EventStore]:
        """A new store closed when the block ends (one per hypothesis example)."""
        store = self.open(**options)
        try:
            yield store
        finally:
            store.close()

    def close_all(self) -> None:
        for store in self._opened:
            store.close()
        self._opened.clear()


@pytest.fixture
def store_factory(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[StoreFactory]:
    """Opens stores of the backend under test; every one is closed afterwards."""
    pg_url = None
    if backend == "postgresql":
        if "depth" in request.fixturenames and request.getfixturevalue("depth") == "slow":
            # D114: a PostgreSQL store costs a schema per example; the long profile's
            # thousands would take most of make verify's budget, so PostgreSQL runs the
            # property tests under the ci profile only (in make test).
            pytest.skip("PostgreSQL runs the property tests in make test only (D114)")
        pg_url = str(request.getfixturevalue("pg_database"))
    factory = StoreFactory(backend, tmp_path, pg_url)
    yield factory
    factory.close_all()


@pytest.fixture
def store(store_factory: StoreFactory, clock: ManualClock) -> EventStore:
    """``memory://`` or ``sqlite:///{tmp_path}/ledger.db``, with the manual ``clock``."""
    return store_factory.open(clock=clock)


@pytest.fixture(scope="session")
def pg_server() -> Iterator[str]:
    """A PostgreSQL server URL (``SESSIONLEDGER_TEST_PG``, or a throwaway cluster).

    Skips with the reason when there is none, but fails when ``CI=true``.
    """
    with pg_support.server() as (url, reason):
        if url is None:
            if os.environ.get("CI") == "true":
                pytest.fail(f"CI=true but {reason}")
            pytest.skip(reason)
        yield url


@pytest.fixture(scope="module")
def pg_database(pg_server: str) -> Iterator[str]:
    """A fresh database for the test module, dropped after it."""
    with pg_support.with_database(pg_server) as url:
        yield url


@pytest.fixture(scope="session")
def node_clients() -> node_support.NodeClients:
    """The pinned Node MCP clients (``tests/node``), installed by ``npm ci`` once and reused
    while the lock file is unchanged. Skips with the reason without node/npm, but fails when
    ``CI=true``."""
    reason = node_support.unavailable()
    if reason is not None:
        node_support.skip_or_fail(reason)
    try:
        return node_support.install()
    except (node_support.InstallError, subprocess.TimeoutExpired) as error:
        node_support.skip_or_fail(str(error))
        raise


# -- raw tampering (SPEC EL-4) --------------------------------------------------------------


class Tamper(Protocol):
    """Edits a store's rows behind its back, as an attacker or a broken disk would."""

    def update(self, session_id: str, seq: int, column: str, value: Any) -> None: ...

    def undecodable(self, session_id: str, seq: int, column: str) -> None: ...

    def delete(self, session_id: str, seq: int) -> None: ...

    def swap(self, session_id: str, seq_a: int, seq_b: int) -> None: ...


class SQLiteTamper:
    """Tampers through a raw ``sqlite3`` connection to the store's file."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def _run(self, *statements: tuple[str, tuple[Any, ...]]) -> None:
        with closing(sqlite3.connect(self.path)) as conn, conn:
            for sql, params in statements:
                cursor = conn.execute(sql, params)
                assert cursor.rowcount == 1, f"{sql} {params} touched {cursor.rowcount} rows"

    def update(self, session_id: str, seq: int, column: str, value: Any) -> None:
        assert column in COLUMNS
        self._run(
            (f"UPDATE events SET {column} = ? WHERE session_id = ? AND seq = ?",
             (value, session_id, seq))
        )

    def undecodable(self, session_id: str, seq: int, column: str) -> None:
        """Store bytes that are not UTF-8 as TEXT (bit rot)."""
        assert column in COLUMNS
        self._run(
            (f"UPDATE events SET {column} = CAST(? AS TEXT) WHERE session_id = ? AND seq = ?",
             (b"\xff\xfe{", session_id, seq))
        )

    def delete(self, session_id: str, seq: int) -> None:
        self._run(("DELETE FROM events WHERE session_id = ? AND seq = ?", (session_id, seq)))

    def swap(self, session_id: str, seq_a: int, seq_b: int) -> None:
        where = "WHERE session_id = ? AND seq = ?"
        parked = -(10**9)  # UNIQUE(session_id, seq) forbids a direct swap
        self._run(
            (f"UPDATE events SET seq = ? {where}", (parked, session_id, seq_a)),
            (f"UPDATE events SET seq = ? {where}", (seq_a, session_id, seq_b)),
            (f"UPDATE events SET seq = ? {where}", (seq_b, session_id, parked)),
        )


class MemoryTamper:
    """Tampers with ``MemoryEventStore.rows`` (raw tuples in EL-9 column order)."""

    def __init__(self, store: MemoryEventStore) -> None:
        self.store = store

    def _index(self, session_id: str, seq: int) -> int:
        (index,) = [
            i for i, row in enumerate(self.store.rows) if row[1] == session_id and row[2] == seq
        ]
        return index

    def _set(self, index: int, column: str, value: Any) -> None:
        row = list(self.store.rows[index])
        row[COLUMNS.index(column)] = value
        self.store.rows[index] = tuple(row)  # type: ignore[assignment]

    def update(self, session_id: str, seq: int, column: str, value: Any) -> None:
        self._set(self._index(session_id, seq), column, value)

    def undecodable(self, session_id: str, seq: int, column: str) -> None:
        """A lone surrogate: what undecodable bytes become if decoded with surrogateescape."""
        self._set(self._index(session_id, seq), column, "\udcff\udcfe{")

    def delete(self, session_id: str, seq: int) -> None:
        del self.store.rows[self._index(session_id, seq)]
        by_session: dict[str, list[int]] = {}
        for index, row in enumerate(self.store.rows):
            by_session.setdefault(row[1], []).append(index)
        self.store._by_session = by_session

    def swap(self, session_id: str, seq_a: int, seq_b: int) -> None:
        index_a, index_b = self._index(session_id, seq_a), self._index(session_id, seq_b)
        self._set(index_a, "seq", seq_b)
        self._set(index_b, "seq", seq_a)


def tamper_for(store: EventStore) -> Tamper:
    """The tampering helper matching the store's backend."""
    if isinstance(store, SQLiteEventStore):
        return SQLiteTamper(store.path)
    if isinstance(store, PostgresEventStore):
        return pg_support.PostgresTamper(store.url)
    assert isinstance(store, MemoryEventStore)
    return MemoryTamper(store)


@pytest.fixture
def tamper_factory() -> Callable[[EventStore], Tamper]:
    """``tamper_factory(store)`` → the :class:`Tamper` for a store opened in an example."""
    return tamper_for


@pytest.fixture
def tamper(store: EventStore) -> Tamper:
    """The tampering helper for the ``store`` fixture."""
    return tamper_for(store)


@pytest.fixture(scope="module")
def server(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[ServerProcess]:
    """One real ``sessionledger serve`` per test module, over its own database."""
    with running_server(tmp_path_factory.mktemp(request.module.__name__)) as running:
        yield running


@pytest.fixture
def http(server: ServerProcess) -> Iterator[httpx.Client]:
    """A client of the module's server."""
    with server.client() as client:
        yield client
