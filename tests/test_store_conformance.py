"""One conformance suite for every event-store backend (SPEC EL-1 … EL-9).

Each test runs once per backend through the parametrised ``store`` / ``store_factory``
fixtures of ``conftest.py``. Hypothesis drives random interleavings of appends against a plain
reference model of the log; the SQLite-only checks at the end hold the ``events`` table to its
published shape (EL-9).
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Sequence
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from payload_strategies import payload_strategy
from pg_support import PG_BACKEND

from eventlog import (
    CATALOG,
    GENESIS_HASH,
    AppendBatch,
    AppendResult,
    ConcurrencyConflict,
    EventStore,
    InvalidStoreUrl,
    ManualClock,
    NewEvent,
    RecordedEvent,
    SessionCreated,
    StorageFault,
    StoreClosed,
    SystemClock,
    canonical_json,
    envelope_hash,
    format_instant,
    open_store,
)
from eventlog.envelope import now_text
from eventlog.postgres import PostgresEventStore
from eventlog.sqlite import SQLiteEventStore
from sessionledger.errors import StorageUnavailable

if TYPE_CHECKING:
    from conftest import StoreFactory

# The store factories hand every example a fresh store, so sharing them across examples is safe.
per_example_stores = settings(
    suppress_health_check=[
        *settings().suppress_health_check, HealthCheck.function_scoped_fixture
    ]
)

ACTORS = ("model", "user", "host", "timer", "system")


@pytest.fixture(params=["memory", "sqlite", PG_BACKEND])
def backend(request: pytest.FixtureRequest) -> str:
    """Every backend, PostgreSQL included (SPEC EL-8: one suite for all of them)."""
    return str(request.param)


ISO_MS_Z = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")

# SPEC EL-9: the events table, column by column, in order.
EL9_COLUMNS = [
    ("global_position", "INTEGER"), ("session_id", "TEXT"), ("seq", "INTEGER"),
    ("type", "TEXT"), ("schema_version", "INTEGER"), ("data", "TEXT"),
    ("recorded_at", "TEXT"), ("actor", "TEXT"), ("causation_id", "TEXT"),
    ("correlation_id", "TEXT"), ("idempotency_key", "TEXT"), ("prev_hash", "TEXT"),
    ("hash", "TEXT"),
]
COLUMNS = tuple(name for name, _kind in EL9_COLUMNS)


def new(marker: str, actor: str = "user", **ids: str | None) -> NewEvent:
    """One ``SessionCreated`` whose workspace field carries a unique marker."""
    return NewEvent(SessionCreated(workspace=marker), actor=actor, **ids)  # type: ignore[arg-type]


def markers(events: Sequence[RecordedEvent]) -> list[str]:
    return [e.data.workspace for e in events]  # type: ignore[attr-defined]


def snapshot(store: EventStore) -> list[tuple[int, str, int, str]]:
    """Everything the log holds, as (global_position, session, seq, hash)."""
    return [(e.global_position, e.session_id, e.seq, e.hash) for e in store.read_all()]


def assert_gapless(store: EventStore) -> dict[str, int]:
    """EL-1: global positions 1..N; per session seq 1..n; versions agree. Returns versions."""
    events = list(store.read_all())
    assert [e.global_position for e in events] == list(range(1, len(events) + 1))
    assert store.head_position() == len(events)
    seqs: dict[str, list[int]] = {}
    for event in events:
        seqs.setdefault(event.session_id, []).append(event.seq)
    for session_id, numbers in seqs.items():
        assert numbers == list(range(1, len(numbers) + 1)), session_id
        assert store.version(session_id) == len(numbers)
        assert [e.seq for e in store.read_session(session_id)] == numbers
    return {sid: len(numbers) for sid, numbers in seqs.items()}


def assert_verifies(store: EventStore) -> None:
    """EL-4: every chain of an untouched log verifies."""
    reports = store.verify()
    assert all(r.ok for r in reports), [r for r in reports if not r.ok]


# -- EL-1 / EL-2 / EL-3: a reference model under random interleavings ---------------------

SESSIONS = ("sess_a", "sess_b", "sess_c")


@dataclass(frozen=True)
class PlannedBatch:
    session: int
    size: int
    expect: Literal["any", "right", "wrong"]
    key: int | None


planned_batch = st.builds(
    PlannedBatch,
    session=st.integers(0, len(SESSIONS) - 1),
    size=st.integers(1, 4),
    expect=st.sampled_from(["any", "right", "wrong"]),
    key=st.none() | st.integers(0, 3),
)
operation = st.tuples(st.just("append"), planned_batch.map(lambda b: [b])) | st.tuples(
    st.just("append_many"), st.lists(planned_batch, min_size=1, max_size=4)
)


@dataclass
class LogModel:
    """What the log must hold: per-session markers, global order and idempotency keys."""

    sessions: dict[str, list[str]] = field(default_factory=dict)
    order: list[tuple[str, int, str]] = field(default_factory=list)
    keys: dict[tuple[str, str], tuple[int, ...]] = field(default_factory=dict)

    def version(self, session_id: str) -> int:
        return len(self.sessions.get(session_id, []))

    def predict(self, batch: AppendBatch) -> tuple[str, tuple[int, ...]]:
        """("replay"|"conflict"|"append", positions), applying the batch to the model."""
        if batch.idempotency_key is not None:
            earlier = self.keys.get((batch.session_id, batch.idempotency_key))
            if earlier is not None:
                return "replay", earlier
        version = self.version(batch.session_id)
        if batch.expected_version is not None and batch.expected_version != version:
            return "conflict", ()
        start = len(self.order) + 1
        positions = tuple(range(start, start + len(batch.events)))
        for offset, new_event in enumerate(batch.events):
            marker = new_event.event.workspace  # type: ignore[attr-defined]
            self.sessions.setdefault(batch.session_id, []).append(marker)
            self.order.append((batch.session_id, version + offset + 1, marker))
        if batch.idempotency_key is not None:
            self.keys[(batch.session_id, batch.idempotency_key)] = positions
        return "append", positions


def to_batch(plan: PlannedBatch, model: LogModel, tag: str) -> AppendBatch:
    session_id = SESSIONS[plan.session]
    version = model.version(session_id)
    expected = {"any": None, "right": version, "wrong": version + 1}[plan.expect]
    key = None if plan.key is None else f"{session_id}-key-{plan.key}"
    events = tuple(new(f"{tag}.{i}") for i in range(plan.size))
    return AppendBatch(session_id, events, expected, key)


def check_outcome(
    outcome: AppendResult | Exception, predicted: tuple[str, tuple[int, ...]], batch: AppendBatch
) -> None:
    kind, positions = predicted
    if kind == "conflict":
        assert isinstance(outcome, ConcurrencyConflict), outcome  # EL-2
        assert outcome.expected == batch.expected_version
        return
    assert isinstance(outcome, AppendResult), outcome
    assert outcome.replayed is (kind == "replay")  # EL-3
    assert outcome.positions == positions
    seqs = [e.seq for e in outcome.events]
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))


@per_example_stores
@given(operations=st.lists(operation, min_size=1, max_size=12))
def test_el1_el2_el3_random_interleavings_match_the_model(
    store_factory: StoreFactory, depth: str, operations: list[tuple[str, list[PlannedBatch]]]
) -> None:
    """EL-1 gapless seq and global_position, EL-2 conflicts, EL-3 idempotent re-sends."""
    model = LogModel()
    with store_factory.fresh() as store:
        for number, (kind, plans) in enumerate(operations):
            batches, predictions = [], []
            for index, plan in enumerate(plans):
                batch = to_batch(plan, model, f"op{number}.{index}")
                batches.append(batch)
                predictions.append(model.predict(batch))  # sequential, like the store
            outcomes: list[AppendResult | Exception]
            if kind == "append":
                (batch,) = batches
                try:
                    outcomes = [store.append(
                        batch.session_id, batch.events,
                        expected_version=batch.expected_version,
                        idempotency_key=batch.idempotency_key,
                    )]
                except ConcurrencyConflict as exc:
                    outcomes = [exc]
            else:
                outcomes = list(store.append_many(batches))
            for outcome, predicted, batch in zip(outcomes, predictions, batches, strict=True):
                check_outcome(outcome, predicted, batch)
            assert store.head_position() == len(model.order)
        versions = assert_gapless(store)
        assert versions == {sid: len(m) for sid, m in model.sessions.items()}
        stored = [(e.session_id, e.seq, e.data.workspace) for e in store.read_all()]  # type: ignore[attr-defined]
        assert stored == model.order
        assert_verifies(store)


@per_example_stores
@given(prefill=st.integers(0, 5), wrong=st.integers(-3, 12), batch_size=st.integers(1, 3))
def test_el2_expected_version_conflict_appends_nothing(
    store_factory: StoreFactory, depth: str, prefill: int, wrong: int, batch_size: int
) -> None:
    """EL-2: a mismatched expected version raises ConcurrencyConflict and appends nothing."""
    with store_factory.fresh() as store:
        for i in range(prefill):
            store.append("sess_x", [new(f"pre{i}")])
        store.append("sess_other", [new("other")])
        if wrong == prefill:
            wrong = prefill + 1
        before = snapshot(store)
        with pytest.raises(ConcurrencyConflict) as caught:
            store.append(
                "sess_x", [new(f"bad{i}") for i in range(batch_size)], expected_version=wrong
            )
        assert (caught.value.session_id, caught.value.expected) == ("sess_x", wrong)
        assert caught.value.actual == prefill
        assert store.version("sess_x") == prefill
        assert snapshot(store) == before
        assert_verifies(store)


def test_el2_expected_version_zero_requires_a_new_session(store: EventStore) -> None:
    """EL-2: ``expected_version=0`` creates; a second create of the same session conflicts."""
    store.append("sess_x", [new("first")], expected_version=0)
    with pytest.raises(ConcurrencyConflict):
        store.append("sess_x", [new("second")], expected_version=0)
    assert markers(list(store.read_session("sess_x"))) == ["first"]


@per_example_stores
@given(sizes=st.lists(st.integers(1, 3), min_size=1, max_size=3), resend_expected=st.booleans())
def test_el3_idempotency_key_returns_original_positions(
    store_factory: StoreFactory, depth: str, sizes: list[int], resend_expected: bool
) -> None:
    """EL-3: re-sending a key returns the original positions and appends nothing."""
    with store_factory.fresh() as store:
        originals = []
        for n, size in enumerate(sizes):
            store.append("sess_noise", [new(f"noise{n}")])
            events = [new(f"k{n}.{i}") for i in range(size)]
            version = store.version("sess_x")
            originals.append(store.append(
                "sess_x", events, expected_version=version, idempotency_key=f"key-{n}"
            ))
        before = snapshot(store)
        for n, original in enumerate(originals):
            again = store.append(
                "sess_x", [new("must-not-land")],
                # a re-send carries the (now stale) version of the first attempt
                expected_version=original.events[0].seq - 1 if resend_expected else None,
                idempotency_key=f"key-{n}",
            )
            assert again.replayed and not original.replayed
            assert again.positions == original.positions
            assert [e.seq for e in again.events] == [e.seq for e in original.events]
            assert [e.hash for e in again.events] == [e.hash for e in original.events]
            assert markers(again.events) == markers(original.events)
        assert snapshot(store) == before
        assert_verifies(store)


@per_example_stores
@given(
    prefill=st.lists(st.integers(0, 3), min_size=2, max_size=5),
    data=st.data(),
)
def test_el2_append_many_one_conflicting_batch_fails_alone(
    store_factory: StoreFactory, depth: str, prefill: list[int], data: st.DataObject
) -> None:
    """EL-2: in ``append_many`` the bad batch alone fails; the others commit."""
    bad = data.draw(st.integers(0, len(prefill) - 1), label="bad batch")
    with store_factory.fresh() as store:
        for n, count in enumerate(prefill):
            for i in range(count):
                store.append(f"sess_{n}", [new(f"pre{n}.{i}")])
        head = store.head_position()
        batches = [
            AppendBatch(
                f"sess_{n}",
                tuple(new(f"many{n}.{i}") for i in range(1 + n % 3)),
                expected_version=count + 1 if n == bad else count,
            )
            for n, count in enumerate(prefill)
        ]
        outcomes = store.append_many(batches)
        assert isinstance(outcomes[bad], ConcurrencyConflict)
        assert store.version(f"sess_{bad}") == prefill[bad]
        good = [o for n, o in enumerate(outcomes) if n != bad]
        assert all(isinstance(o, AppendResult) and not o.replayed for o in good)
        positions = [p for o in good for p in o.positions]  # type: ignore[union-attr]
        assert positions == list(range(head + 1, head + 1 + len(positions)))
        for n, batch in enumerate(batches):
            stored = markers(list(store.read_session(batch.session_id, after=prefill[n])))
            assert stored == ([] if n == bad else markers_of(batch))
        assert_gapless(store)
        assert_verifies(store)


def markers_of(batch: AppendBatch) -> list[str]:
    return [n.event.workspace for n in batch.events]  # type: ignore[attr-defined]


def test_el2_append_many_batches_to_one_session_apply_in_order(store: EventStore) -> None:
    """EL-2: batches of one group see each other: the second expects the first's version."""
    outcomes = store.append_many([
        AppendBatch("sess_x", (new("a"), new("b")), expected_version=0),
        AppendBatch("sess_x", (new("c"),), expected_version=2),
        AppendBatch("sess_x", (new("d"),), expected_version=2),
    ])
    assert [type(o) for o in outcomes] == [AppendResult, AppendResult, ConcurrencyConflict]
    assert markers(list(store.read_session("sess_x"))) == ["a", "b", "c"]


def test_el2_concurrent_threads_never_duplicate_or_skip_a_seq(store: EventStore) -> None:
    """EL-2 under group commit: threads racing on one session retry their conflicts."""
    acknowledged: list[tuple[int, str]] = []
    lock = threading.Lock()

    def writer(name: str) -> None:
        for i in range(15):
            while True:
                version = store.version("sess_shared")
                try:
                    result = store.append(
                        "sess_shared", [new(f"{name}.{i}")], expected_version=version
                    )
                    break
                except ConcurrencyConflict:
                    continue
            store.append(f"sess_{name}", [new(f"{name}.own{i}")])
            with lock:
                acknowledged.append((result.events[0].seq, f"{name}.{i}"))

    threads = [threading.Thread(target=writer, args=(f"t{n}",)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    stored = [(e.seq, e.data.workspace) for e in store.read_session("sess_shared")]  # type: ignore[attr-defined]
    assert sorted(acknowledged) == stored
    assert_gapless(store)
    assert_verifies(store)


# -- EL-1: every catalog type round-trips, with its envelope ------------------------------


optional_id = st.none() | st.text(max_size=12)
# PostgreSQL's text holds no U+0000 and no lone surrogate; the store refuses them (D110,
# tested below).
pg_text = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
    max_size=12,
)


def round_trip(
    store_factory: StoreFactory, event_type: str, data: st.DataObject, *, nul: bool = True
) -> None:
    """payload → stored row → read back equal, with type, version and envelope."""
    cls = CATALOG[event_type]
    ids = optional_id if nul else st.none() | pg_text
    payloads = data.draw(st.lists(payload_strategy(cls), min_size=1, max_size=3), label="events")
    news = [
        NewEvent(
            payload,
            actor=data.draw(st.sampled_from(ACTORS)),
            causation_id=data.draw(ids),
            correlation_id=data.draw(ids),
        )
        for payload in payloads
    ]
    session_text = st.text(min_size=1, max_size=10) if nul else pg_text.filter(bool)
    session_id = data.draw(session_text, label="session_id")
    with store_factory.fresh() as store:
        result = store.append(session_id, news)
        for stored in (list(store.read_session(session_id)), list(store.read_all())):
            assert [e.data for e in stored] == payloads
            assert [e.data for e in result.events] == payloads
            for event, sent, returned in zip(stored, news, result.events, strict=True):
                assert event == returned
                assert (event.type, event.schema_version) == (event_type, cls.schema_version)
                assert (event.actor, event.causation_id, event.correlation_id) == (
                    sent.actor, sent.causation_id, sent.correlation_id
                )
                assert event.session_id == session_id
        assert_verifies(store)


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
@pytest.mark.parametrize("event_type", sorted(CATALOG))
@per_example_stores
@given(data=st.data())
def test_el1_every_catalog_type_round_trips(
    store_factory: StoreFactory, depth: str, event_type: str, data: st.DataObject
) -> None:
    """EL-1: payload → stored row → read back equal, with type, version and envelope."""
    round_trip(store_factory, event_type, data)


@pytest.mark.parametrize("backend", [PG_BACKEND])
@pytest.mark.parametrize("event_type", sorted(CATALOG))
@settings(per_example_stores, max_examples=5)
@given(data=st.data())
def test_el1_every_catalog_type_round_trips_on_postgresql(
    store_factory: StoreFactory, depth: str, event_type: str, data: st.DataObject
) -> None:
    """EL-1 on PostgreSQL, with fewer examples per type: opening a store there costs a
    schema, and the payload travels as the same JSON text for every type."""
    round_trip(store_factory, event_type, data, nul=False)


def test_el1_system_clock_text_is_the_wire_format_of_now(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """EL-1: the system clock's fast text equals ``format_instant`` of the same instant,
    across second boundaries, for instants the cached second does not cover."""
    from datetime import UTC, datetime

    import eventlog.envelope as clock_module

    system = SystemClock()
    instants = [
        1_764_460_800_000_000_000,  # a second boundary
        1_764_460_800_999_999_999,  # its last nanosecond: still .999
        1_764_460_801_000_500_000,  # the next second
        1_764_460_800_123_456_789,  # back to an earlier second (a clock step)
        946_684_799_999_000_000,  # 1999-12-31T23:59:59.999
    ]
    for ns in instants:
        monkeypatch.setattr(clock_module, "service_time_ns", lambda ns=ns: ns)
        moment = datetime.fromtimestamp(ns // 1_000_000 / 1000, UTC)
        assert system.now_text() == format_instant(moment)
        assert now_text(system) == format_instant(moment)
    manual = ManualClock(datetime(2026, 3, 4, 5, 6, 7, 891_234, tzinfo=UTC))
    assert now_text(manual) == "2026-03-04T05:06:07.891Z"


@pytest.mark.parametrize("step_s", [-3600, 86_400])
def test_the_system_clock_does_not_follow_a_step_of_the_wall_clock(  # issue 41 finding 2
    monkeypatch: pytest.MonkeyPatch, step_s: int,
) -> None:
    """Read once, the wall clock is carried forward by the elapsed time: a later step of the
    wall clock moves neither ``now`` nor the ids' time."""
    import time

    import eventlog.envelope as clock_module

    system = SystemClock()
    before = clock_module.service_time_ns()
    stepped = time.time_ns() + step_s * 1_000_000_000
    monkeypatch.setattr(clock_module.time, "time_ns", lambda: stepped)
    monkeypatch.setattr(clock_module, "_anchor", clock_module._anchor)  # restored afterwards
    after_ms = int(system.now().timestamp() * 1000)
    assert 0 <= after_ms - before // 1_000_000 < 5_000
    assert abs(clock_module.service_time_ns() - stepped) > 3_000 * 10**9  # not the stepped wall


def test_el1_envelope_fields(store: EventStore, clock: ManualClock) -> None:
    """EL-1: every envelope field is present; recorded_at comes from the injected clock."""
    first = store.append(
        "sess_x", [new("a", actor="model", causation_id="call_1", correlation_id="corr_1"),
                   new("b", actor="host")],
    )
    clock.advance(61.2345)
    second = store.append("sess_y", [new("c", actor="timer")])
    clock.advance(0.001)
    third = store.append("sess_x", [new("d", actor="system", correlation_id="corr_2")])
    events = list(store.read_all())
    assert events == [*first.events, *second.events, *third.events]
    stamps = [e.recorded_at for e in events]
    assert stamps == ["2026-01-01T00:00:00.000Z"] * 2 + [
        "2026-01-01T00:01:01.234Z", "2026-01-01T00:01:01.235Z"
    ]
    assert all(ISO_MS_Z.match(s) for s in stamps)
    assert stamps[-1] == format_instant(clock.now())
    assert [(e.global_position, e.session_id, e.seq) for e in events] == [
        (1, "sess_x", 1), (2, "sess_x", 2), (3, "sess_y", 1), (4, "sess_x", 3)
    ]
    assert [e.actor for e in events] == ["model", "host", "timer", "system"]
    assert [e.causation_id for e in events] == ["call_1", None, None, None]
    assert [e.correlation_id for e in events] == ["corr_1", None, None, "corr_2"]
    assert {(e.type, e.schema_version) for e in events} == {("SessionCreated", 1)}
    # EL-4: each session's chain starts at the genesis hash and links event to event
    session_x = [e for e in events if e.session_id == "sess_x"]
    assert session_x[0].prev_hash == GENESIS_HASH == events[2].prev_hash
    assert [e.prev_hash for e in session_x[1:]] == [e.hash for e in session_x[:-1]]
    assert all(re.fullmatch(r"[0-9a-f]{64}", e.hash) for e in events)
    wire = events[0].to_wire()
    assert wire["globalPosition"] == 1 and wire["recordedAt"] == stamps[0]
    assert wire["data"] == {"workspace": "a", "host": "protocol", "parentSessionId": None,
                            "executionState": {"mode": "build", "planEnabled": False,
                                               "goal": None}}


# -- EL-5: reading by cursor and limit; listeners -----------------------------------------


def test_el5_cursors_and_limits_across_page_boundaries(store: EventStore) -> None:
    """EL-5: paging stays correct past the SQLite page size (2000 rows)."""
    for block in range(41):  # 4100 events in sess_big, 410 in sess_small, interleaved
        store.append("sess_big", [new(f"big{block}.{i}") for i in range(100)])
        store.append("sess_small", [new(f"small{block}.{i}") for i in range(10)])
    big_total, total = 4100, 4510
    for after, limit in [(0, None), (0, 2000), (0, 2001), (1, 2000), (1999, 2), (2000, 1),
                         (1999, None), (2001, 2500), (4099, 5), (4100, None), (0, 0),
                         (5000, None)]:
        seqs = [e.seq for e in store.read_session("sess_big", after=after, limit=limit)]
        end = big_total if limit is None else min(big_total, after + limit)
        assert seqs == list(range(after + 1, end + 1)), (after, limit)
    for after, limit in [(0, None), (0, 4000), (1999, 2002), (2000, None), (4509, 10),
                         (4510, None)]:
        positions = [e.global_position for e in store.read_all(after=after, limit=limit)]
        end = total if limit is None else min(total, after + limit)
        assert positions == list(range(after + 1, end + 1)), (after, limit)
    small = list(store.read_session("sess_small", after=205))
    assert markers(small)[:2] == ["small20.5", "small20.6"] and len(small) == 205


@per_example_stores
@given(sizes=st.lists(st.integers(1, 4), max_size=8), data=st.data())
def test_el5_read_cursor_and_limit_match_the_model(
    store_factory: StoreFactory, depth: str, sizes: list[int], data: st.DataObject
) -> None:
    """EL-5: ``read_session(after, limit)`` and ``read_all(after, limit)`` slice the log."""
    with store_factory.fresh() as store:
        order: list[str] = []
        for n, size in enumerate(sizes):
            session_id = f"sess_{n % 2}"
            store.append(session_id, [new(f"{n}.{i}") for i in range(size)])
            order.extend([session_id] * size)
        total = len(order)
        after = data.draw(st.integers(0, total + 1), label="after")
        limit = data.draw(st.none() | st.integers(0, total + 1), label="limit")
        stop = None if limit is None else after + limit
        got = [e.global_position for e in store.read_all(after=after, limit=limit)]
        assert got == list(range(1, total + 1))[after:stop]
        count = order.count("sess_0")
        got = [e.seq for e in store.read_session("sess_0", after=after, limit=limit)]
        assert got == list(range(1, count + 1))[after:stop]


def test_el5_listeners_get_committed_events_in_order_not_replays(store: EventStore) -> None:
    """Listeners see each commit once, in global order, after it is readable."""
    received: list[RecordedEvent] = []
    visible: list[bool] = []

    def listener(events: Sequence[RecordedEvent]) -> None:
        visible.append(store.head_position() >= events[-1].global_position)
        received.extend(events)

    unsubscribe = store.subscribe(listener)
    store.append("sess_x", [new("a"), new("b")], idempotency_key="k1")
    store.append("sess_y", [new("c")])
    assert store.append("sess_x", [new("again")], idempotency_key="k1").replayed
    with pytest.raises(ConcurrencyConflict):
        store.append("sess_x", [new("late")], expected_version=0)
    outcomes = store.append_many([
        AppendBatch("sess_x", (new("d"),), expected_version=2),
        AppendBatch("sess_y", (new("bad"),), expected_version=7),
        AppendBatch("sess_z", (new("e"), new("f"))),
        AppendBatch("sess_x", (new("again"),), idempotency_key="k1"),
    ])
    assert [type(o) for o in outcomes] == [
        AppendResult, ConcurrencyConflict, AppendResult, AppendResult
    ]
    assert markers(received) == ["a", "b", "c", "d", "e", "f"]
    assert received == list(store.read_all())
    assert all(visible)
    unsubscribe()
    store.append("sess_x", [new("unheard")])
    assert len(received) == 6


# -- EL-4: the hash is sha256 over prev_hash + canonical JSON of the envelope --------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: st.lists(children, max_size=3)
    | st.dictionaries(st.text(max_size=5), children, max_size=3),
    max_leaves=10,
)


def design_canonical(value: Any) -> bytes:
    """DESIGN "Events": the canonical form, written out independently of the package."""
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False
    ).encode("utf-8")


def test_el5_a_failing_listener_never_fails_a_committed_append(
    store: EventStore, caplog: pytest.LogCaptureFixture
) -> None:
    """The events are durable before listeners run: a raising listener is logged only."""
    heard: list[str] = []

    def broken(events: Sequence[RecordedEvent]) -> None:
        raise RuntimeError("listener bug")

    store.subscribe(broken)
    store.subscribe(lambda events: heard.extend(markers(events)))
    result = store.append("sess_l", [new("kept")], expected_version=0)
    assert result.version == 1 and heard == ["kept"]
    assert markers(store.read_session("sess_l")) == ["kept"]
    assert "listener" in caplog.text


def test_el6_only_catalog_types_can_be_appended(store: EventStore) -> None:
    """A payload class outside the closed catalog could never be read back: refused."""
    from typing import Literal as _Literal

    from eventlog import Event, UnknownEventType

    class NotInCatalog(Event):
        type: _Literal["NotInCatalog"] = "NotInCatalog"

    with pytest.raises(UnknownEventType, match="NotInCatalog"):
        store.append("sess_n", [NewEvent(NotInCatalog(), actor="user")])
    assert store.version("sess_n") == 0 and store.head_position() == 0


@given(
    envelope=st.fixed_dictionaries({
        "session_id": st.text(), "seq": st.integers(min_value=1), "type": st.text(),
        "schema_version": st.integers(min_value=0), "recorded_at": st.text(),
        "actor": st.text(), "causation_id": optional_id, "correlation_id": optional_id,
        "prev_hash": st.text(alphabet="0123456789abcdef", min_size=64, max_size=64),
        "data": st.dictionaries(st.text(max_size=8), json_values, max_size=4),
    })
)
def test_el4_envelope_hash_is_sha256_of_prev_hash_and_canonical_envelope(
    envelope: dict[str, Any],
) -> None:
    """EL-4: ``envelope_hash`` hashes exactly ``prev_hash + canonical_json(envelope)``."""
    digest = envelope_hash(
        prev_hash=envelope["prev_hash"], session_id=envelope["session_id"],
        seq=envelope["seq"], event_type=envelope["type"],
        schema_version=envelope["schema_version"], data_json=canonical_json(envelope["data"]),
        recorded_at=envelope["recorded_at"], actor=envelope["actor"],
        causation_id=envelope["causation_id"], correlation_id=envelope["correlation_id"],
    )
    text = envelope["prev_hash"] + canonical_json(envelope)
    assert digest == hashlib.sha256(text.encode("utf-8")).hexdigest()
    assert canonical_json(envelope).encode("utf-8") == design_canonical(envelope)


def envelope_dict(row: Sequence[Any]) -> dict[str, Any]:
    """The hashed envelope of a raw row: every column but hash and global_position."""
    named = dict(zip(COLUMNS, row, strict=True))
    named["data"] = json.loads(named["data"])
    for column in ("hash", "global_position", "idempotency_key"):
        del named[column]
    return named


@per_example_stores
@given(sizes=st.lists(st.integers(1, 3), min_size=1, max_size=5))
def test_el4_stored_hashes_recompute_from_the_rows(
    store_factory: StoreFactory, depth: str, sizes: list[int]
) -> None:
    """EL-4: anyone can recheck a chain from the raw rows with hashlib alone."""
    with store_factory.fresh() as store:
        for n, size in enumerate(sizes):
            store.append(f"sess_{n % 2}", [new(f"{n}.{i}", actor=ACTORS[i]) for i in range(size)],
                         idempotency_key=f"key{n}")
        for session_id in {f"sess_{n % 2}" for n in range(len(sizes))}:
            prev = GENESIS_HASH
            for row in store.raw_session(session_id):
                assert row[COLUMNS.index("prev_hash")] == prev
                body = design_canonical(envelope_dict(row))
                expected = hashlib.sha256(prev.encode("utf-8") + body).hexdigest()
                assert row[COLUMNS.index("hash")] == expected
                prev = expected
        assert_verifies(store)


def test_el4_verify_is_ok_on_an_untouched_log(store: EventStore) -> None:
    """EL-4: ``verify`` reports every session ok, and one session when asked for one."""
    assert store.verify() == []
    for n in range(3):
        store.append(f"sess_{n}", [new(f"{n}.{i}") for i in range(n + 1)])
    reports = store.verify()
    assert [(r.session_id, r.events, r.ok) for r in reports] == [
        ("sess_0", 1, True), ("sess_1", 2, True), ("sess_2", 3, True)
    ]
    (report,) = store.verify("sess_2")
    assert report.ok and report.first_bad_seq is None and report.events == 3
    (missing,) = store.verify("sess_unknown")
    assert missing.ok and missing.events == 0


# -- lifecycle ----------------------------------------------------------------------------


def test_closed_store_refuses_appends_and_reads(store: EventStore) -> None:
    """StoreClosed after ``close()``, for writing and for reading; closing twice is fine."""
    store.append("sess_x", [new("a")])
    store.close()
    store.close()
    with pytest.raises(StoreClosed):
        store.append("sess_x", [new("b")])
    outcomes = store.append_many([AppendBatch("sess_x", (new("c"),))])
    assert [type(o) for o in outcomes] == [StoreClosed]
    with pytest.raises(StoreClosed):
        list(store.read_session("sess_x"))
    with pytest.raises(StoreClosed):
        list(store.read_all())
    with pytest.raises(StoreClosed):
        store.version("sess_x")
    with pytest.raises(StoreClosed):
        store.verify()


# -- backend specific: SQLite persistence, URL and the published table (EL-7 … EL-9) --------


def test_el8_sqlite_log_survives_reopening(tmp_path: Path) -> None:
    """EL-8: the SQLite file is the log: reopened, it reads, verifies and keeps numbering."""
    url = f"sqlite:///{tmp_path}/nested/ledger.db"
    with closing(open_store(url, clock=ManualClock())) as first:
        first.append("sess_x", [new("a"), new("b")], idempotency_key="k")
    with closing(open_store(url, clock=ManualClock())) as second:
        assert markers(list(second.read_session("sess_x"))) == ["a", "b"]
        assert second.append("sess_x", [new("x")], idempotency_key="k").replayed
        result = second.append("sess_x", [new("c")], expected_version=2)
        assert (result.version, result.positions) == (3, (3,))
        assert_verifies(second)


@pytest.mark.parametrize(
    ("url", "synchronous"),
    [("sqlite:///{dir}/a.db", "FULL"), ("sqlite:///{dir}/b.db?synchronous=normal", "NORMAL")],
)
def test_el7_el8_sqlite_url_selects_durability(
    tmp_path: Path, url: str, synchronous: str
) -> None:
    """EL-7/EL-8: WAL always; synchronous FULL unless the URL trades it for NORMAL."""
    with closing(open_store(url.format(dir=tmp_path))) as store:
        assert isinstance(store, SQLiteEventStore)
        store.append("sess_x", [new("a")])
        conn = store._writer
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        level = conn.execute("PRAGMA synchronous").fetchone()[0]
        assert level == {"FULL": 2, "NORMAL": 1}[synchronous]


@pytest.mark.parametrize(
    "url", ["postgres://x", "sqlite://host/x.db", "sqlite:///x.db?synchronous=off",
            "sqlite:///x.db?journal=delete"],
)
def test_el8_unsupported_urls_are_refused(url: str) -> None:
    """EL-8: a URL this build cannot open is a named error, not a surprise file."""
    with pytest.raises(InvalidStoreUrl):
        open_store(url)




@pytest.fixture
def sqlite_log(tmp_path: Path) -> Path:
    """A small SQLite log, closed, for inspection with other tools."""
    path = tmp_path / "ledger.db"
    with closing(SQLiteEventStore(path, clock=ManualClock())) as store:
        store.append("sess_x", [new("a", causation_id="call_1"), new("b")],
                     idempotency_key="k")
        store.append("sess_y", [new("ü ✓ \"quoted\"")])
    return path


def test_el9_events_table_has_the_published_columns(sqlite_log: Path) -> None:
    """EL-9: exactly the published columns and types, INTEGER PRIMARY KEY, UNIQUE(session, seq)."""
    with closing(sqlite3.connect(sqlite_log)) as conn:
        info = conn.execute("PRAGMA table_info(events)").fetchall()
        assert [(name, kind) for _cid, name, kind, *_ in info] == EL9_COLUMNS
        assert [name for _cid, name, _kind, _nn, _default, pk in info if pk] == [
            "global_position"
        ]
        unique = [
            [col for *_, col in conn.execute(f"PRAGMA index_info({name!r})")]
            for _seq, name, is_unique, *_ in conn.execute("PRAGMA index_list(events)")
            if is_unique
        ]
        assert ["session_id", "seq"] in unique
        row = conn.execute("SELECT * FROM events WHERE seq = 1 AND session_id = 'sess_x'")
        duplicate = list(row.fetchone())
        duplicate[0] = 99
        with pytest.raises(sqlite3.IntegrityError):
            conn.execute(f"INSERT INTO events VALUES ({','.join('?' * 13)})", duplicate)


def test_el9_sqlite3_shell_reads_the_rows(sqlite_log: Path) -> None:
    """EL-9: the ``sqlite3`` command-line shell reads the log as Python does."""
    shell = shutil.which("sqlite3")
    if shell is None:
        pytest.skip("the sqlite3 command-line shell is not installed (CI installs it)")
    query = f"SELECT {', '.join(COLUMNS)} FROM events ORDER BY global_position"
    out = subprocess.run(
        [shell, "-readonly", "-json", str(sqlite_log), query],
        check=True, capture_output=True, text=True, encoding="utf-8", timeout=30,
    )
    from_shell = [tuple(row[c] for c in COLUMNS) for row in json.loads(out.stdout)]
    with closing(sqlite3.connect(sqlite_log)) as conn:
        assert from_shell == conn.execute(query).fetchall()
    assert len(from_shell) == 3
    assert json.loads(from_shell[2][COLUMNS.index("data")])["workspace"] == "ü ✓ \"quoted\""


# -- backend specific: PostgreSQL (EL-8, issue 11) -----------------------------------------


@pytest.mark.postgres
def test_el8_postgresql_refuses_nul_in_envelope_text(pg_database: str) -> None:
    """D110: U+0000 cannot be stored in PostgreSQL text; that batch alone is refused."""
    with closing(open_store(f"{pg_database}?schema=nul_text", clock=ManualClock())) as store:
        outcomes = store.append_many([
            AppendBatch("sess_\x00", (new("a"),)),
            AppendBatch("sess_x", (new("b", causation_id="call\x00"),)),
            AppendBatch("sess_\ud800", (new("c"),)),
            AppendBatch("sess_y", (new("nul \x00 in the payload is fine"),)),
        ])
        assert [type(o).__name__ for o in outcomes] == [
            "TextNotStorable", "TextNotStorable", "TextNotStorable", "AppendResult"
        ]
        assert [e.session_id for e in store.read_all()] == ["sess_y"]
        assert markers(list(store.read_all())) == ["nul \x00 in the payload is fine"]
        assert_verifies(store)


def test_el8_postgresql_url_without_psycopg_names_the_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Without the ``postgres`` extra a postgresql:// URL is a named error, not a crash."""
    monkeypatch.setitem(sys.modules, "psycopg", None)
    with pytest.raises(InvalidStoreUrl, match=r"sessionledger\[postgres\]"):
        open_store("postgresql://nobody@127.0.0.1:1/none")


@pytest.mark.parametrize("url", ["postgresql://h/db?schema=Bad-Name", "postgresql://h/db?schema="])
def test_el8_postgresql_schema_option_must_be_a_plain_name(url: str) -> None:
    with pytest.raises(InvalidStoreUrl):
        open_store(url)


@pytest.mark.parametrize(("sqlstate", "medium"), [
    (None, "database connection"), ("08006", "database connection"),
    ("57P01", "database connection"), ("53300", "database connection"),
    ("53100", "disk"), ("58030", "disk"), ("53200", "database server"),
    ("57014", "database server"), ("55P03", "database server"),
])
def test_a_postgresql_fault_names_what_failed(sqlstate: str | None, medium: str) -> None:
    from eventlog.postgres import _medium

    assert _medium(sqlstate) == medium


@pytest.mark.postgres
def test_el8_postgresql_lost_connection_is_a_storage_fault_then_reconnects(
    pg_database: str,
) -> None:
    """A server connection lost mid-way is a StorageFault, nothing half-written; the next
    append connects again (several instances, restarts of the server)."""
    import psycopg

    with closing(open_store(f"{pg_database}?schema=lost", clock=ManualClock())) as store:
        assert isinstance(store, PostgresEventStore)
        store.append("sess_x", [new("a")])
        with psycopg.connect(pg_database, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (store._writer.info.backend_pid,))
        with pytest.raises(StorageFault) as lost:
            store.append("sess_x", [new("b")])
        answer = StorageUnavailable(lost.value)  # the 503 says what failed (issue 41)
        assert answer.message.startswith("the event store's database connection failed: ")
        assert "disk" not in answer.message and "reachable" in answer.message
        assert store.append("sess_x", [new("c")], expected_version=1).version == 2
        assert markers(list(store.read_all())) == ["a", "c"]
        assert_verifies(store)


@pytest.mark.postgres
def test_el8_postgresql_lost_read_connection_is_a_storage_fault_then_reconnects(
    pg_database: str,
) -> None:
    """Every read whose connection the server dropped raises StorageFault (503 over HTTP, not
    a driver error); the next read replaces the broken connection and answers."""
    import psycopg

    reads: dict[str, Any] = {
        "read_all": lambda s: markers(list(s.read_all())),
        "read_session": lambda s: markers(list(s.read_session("sess_x"))),
        "version": lambda s: s.version("sess_x"),
        "head_position": lambda s: s.head_position(),
        "session_heads": lambda s: [h.session_id for h in s.session_heads()],
        "session_head": lambda s: s.session_head("sess_x").version,
        "raw_session": lambda s: len(list(s.raw_session("sess_x"))),
        "verify": lambda s: [r.ok for r in s.verify()],
    }
    with closing(open_store(f"{pg_database}?schema=lostread", clock=ManualClock())) as store:
        assert isinstance(store, PostgresEventStore)
        store.append("sess_x", [new("a"), new("b")])
        with psycopg.connect(pg_database, autocommit=True) as admin:
            for name, read in reads.items():
                expected = read(store)
                with store._readers.connection() as reader:  # the one pooled connection
                    admin.execute("SELECT pg_terminate_backend(%s)",
                                  (reader.info.backend_pid,))
                with pytest.raises(StorageFault):
                    read(store)
                assert read(store) == expected, name


def test_el8_postgresql_unreachable_server_is_a_storage_fault() -> None:
    pytest.importorskip("psycopg")
    with pytest.raises(StorageFault, match=r"127\.0\.0\.1:1/none"):
        open_store("postgresql://nobody@127.0.0.1:1/none?connect_timeout=2")
