"""Tampering with stored rows is caught and attributed to the right ``seq`` (SPEC EL-4).

Rows are edited behind the store's back (a raw ``sqlite3`` connection, or the memory twin's row
list) through the backend's ``Tamper`` helper from ``conftest.py``. After ANY single edit,
deletion, reordering or corruption ``verify`` must name the first ``seq`` affected — computed
here from the tampering itself, not from the store — must not raise, and must still pass every
other session.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import pytest
from hypothesis import HealthCheck, given, reject, settings
from hypothesis import strategies as st
from pg_support import PG_BACKEND, Unrepresentable

from eventlog import (
    EventStore,
    ManualClock,
    NewEvent,
    SessionCreated,
    canonical_json,
)
from eventlog.envelope import encode_event

if TYPE_CHECKING:
    from conftest import StoreFactory, Tamper

@pytest.fixture(params=["memory", "sqlite", PG_BACKEND])
def backend(request: pytest.FixtureRequest) -> str:
    """Every backend, PostgreSQL too (EL-8: the same guarantees as SQLite)."""
    return str(request.param)


per_example_stores = settings(
    suppress_health_check=[
        *settings().suppress_health_check, HealthCheck.function_scoped_fixture
    ]
)

ACTORS = ("model", "user", "host", "timer", "system")
UPDATABLE = ("data", "type", "actor", "recorded_at", "causation_id", "correlation_id",
             "prev_hash", "hash", "schema_version", "seq")
TEXT_COLUMNS = ("data", "type", "actor", "recorded_at", "causation_id", "correlation_id",
                "prev_hash", "hash")
COLUMN_INDEX = {
    name: i for i, name in enumerate((
        "global_position", "session_id", "seq", "type", "schema_version", "data",
        "recorded_at", "actor", "causation_id", "correlation_id", "idempotency_key",
        "prev_hash", "hash",
    ))
}


@dataclass(frozen=True)
class Tampering:
    """One edit to one session's rows, and the seq it must be blamed on."""

    kind: Literal["update", "undecodable", "delete", "swap"]
    session_id: str
    seq: int
    column: str = ""
    value: Any = None
    other_seq: int = 0

    @property
    def first_bad_seq(self) -> int:
        """Updates and deletes break their own seq; a swap breaks the smaller of the two."""
        return min(self.seq, self.other_seq) if self.kind == "swap" else self.seq

    def apply(self, tamper: Tamper) -> None:
        if self.kind == "update":
            tamper.update(self.session_id, self.seq, self.column, self.value)
        elif self.kind == "undecodable":
            tamper.undecodable(self.session_id, self.seq, self.column)
        elif self.kind == "delete":
            tamper.delete(self.session_id, self.seq)
        else:
            tamper.swap(self.session_id, self.seq, self.other_seq)


def assert_blamed(store: EventStore, tampering: Tampering) -> None:
    """``verify`` names the expected seq for the tampered session and passes the others."""
    (report,) = store.verify(tampering.session_id)
    assert report.first_bad_seq == tampering.first_bad_seq, (tampering, report)
    assert report.reason
    reports = store.verify()
    assert tampering.session_id in {r.session_id for r in reports}
    for other in reports:
        if other.session_id == tampering.session_id:
            assert other == report
        else:
            assert other.ok, other


def event(marker: str, actor: str = "user", causation_id: str | None = None) -> NewEvent:
    return NewEvent(
        SessionCreated(workspace=marker), actor=actor, causation_id=causation_id  # type: ignore[arg-type]
    )


# -- every listed tampering, on one fixed log ---------------------------------------------


def fixed_log(store: EventStore, clock: ManualClock) -> None:
    """sess_a: 5 events (two batches), sess_b: 3 events, sess_c: 1 event, interleaved."""
    store.append("sess_a", [event("a1", causation_id="call_1"), event("a2", actor="model")])
    clock.advance(1)
    store.append("sess_b", [event("b1"), event("b2")])
    store.append("sess_a", [event("a3"), event("a4", actor="host", causation_id="call_4"),
                            event("a5", actor="timer")])
    clock.advance(1)
    store.append("sess_c", [event("c1")])
    store.append("sess_b", [event("b3")])


OTHER_PAYLOAD = encode_event(SessionCreated(workspace="elsewhere"))
HASH_LIKE = "f" * 64

FIXED_CASES: list[Tampering] = [
    Tampering("update", "sess_a", 3, "data", OTHER_PAYLOAD),
    Tampering("update", "sess_a", 3, "data", OTHER_PAYLOAD.replace("protocol", "tui")),
    Tampering("update", "sess_a", 3, "type", "SessionDeleted"),
    Tampering("update", "sess_a", 3, "actor", "model"),
    Tampering("update", "sess_a", 3, "recorded_at", "2026-01-01T00:00:01.001Z"),
    Tampering("update", "sess_a", 3, "causation_id", "call_forged"),
    Tampering("update", "sess_a", 4, "causation_id", None),
    Tampering("update", "sess_a", 3, "correlation_id", ""),
    Tampering("update", "sess_a", 3, "prev_hash", HASH_LIKE),
    Tampering("update", "sess_a", 1, "prev_hash", HASH_LIKE),
    Tampering("update", "sess_a", 3, "hash", HASH_LIKE),
    Tampering("update", "sess_a", 5, "hash", HASH_LIKE),
    Tampering("update", "sess_c", 1, "hash", HASH_LIKE),
    Tampering("update", "sess_a", 3, "schema_version", 2),
    Tampering("update", "sess_a", 3, "schema_version", 0),
    Tampering("update", "sess_a", 3, "seq", 99),
    Tampering("update", "sess_a", 5, "seq", 6),
    Tampering("update", "sess_a", 3, "seq", 0),
    Tampering("update", "sess_a", 3, "seq", -1),
    Tampering("delete", "sess_a", 1),
    Tampering("delete", "sess_a", 3),
    Tampering("delete", "sess_a", 5),
    Tampering("delete", "sess_c", 1),
    Tampering("swap", "sess_a", 2, other_seq=4),
    Tampering("swap", "sess_a", 4, other_seq=5),
    Tampering("swap", "sess_a", 1, other_seq=2),
    Tampering("swap", "sess_b", 3, other_seq=1),
    # corruption: malformed rows are breaks at their seq, never a crash
    Tampering("update", "sess_a", 3, "data", "{not json"),
    Tampering("update", "sess_a", 3, "data", "[" * 5000),
    Tampering("update", "sess_a", 3, "data", "[1, 2]"),
    Tampering("update", "sess_a", 3, "data", '{"workspace": 5}'),
    Tampering("update", "sess_a", 3, "data", 12345),
    Tampering("update", "sess_a", 3, "data", b"\x00\x01"),
    Tampering("update", "sess_a", 3, "seq", "three"),
    Tampering("update", "sess_a", 3, "seq", 2.5),
    Tampering("update", "sess_a", 5, "seq", b"\x05"),
    Tampering("update", "sess_a", 3, "type", 7),
    Tampering("update", "sess_a", 3, "schema_version", "one"),
    Tampering("update", "sess_a", 3, "actor", b"user"),
    Tampering("undecodable", "sess_a", 3, "data"),
    Tampering("undecodable", "sess_a", 3, "actor"),
    Tampering("undecodable", "sess_a", 5, "hash"),
]


@pytest.mark.parametrize(
    "tampering", FIXED_CASES,
    ids=[f"{t.kind}-{t.column or t.other_seq}-{t.session_id}-{t.seq}-{i}"
         for i, t in enumerate(FIXED_CASES)],
)
def test_el4_each_kind_of_tampering_is_blamed_on_its_seq(
    store: EventStore, clock: ManualClock, tamper: Tamper, tampering: Tampering
) -> None:
    """EL-4: each listed edit, deletion, swap or corruption names the first affected seq."""
    fixed_log(store, clock)
    assert all(r.ok for r in store.verify())
    try:
        tampering.apply(tamper)
    except Unrepresentable as exc:
        pytest.skip(f"cannot happen on this backend: {exc}")
    assert_blamed(store, tampering)


# -- property: a random log, then any single tampering ------------------------------------


@st.composite
def random_log(draw: st.DrawFn) -> list[tuple[int, list[tuple[str, str | None]]]]:
    """Appends as (session index, [(actor, causation_id), ...]), interleaved at random."""
    batch = st.lists(
        st.tuples(st.sampled_from(ACTORS), st.none() | st.sampled_from(["call_1", "call_2"])),
        min_size=1, max_size=3,
    )
    return draw(st.lists(st.tuples(st.integers(0, 2), batch), min_size=1, max_size=8))


def build(store: EventStore, clock: ManualClock, log: list[Any]) -> dict[str, int]:
    for number, (session, batch) in enumerate(log):
        store.append(
            f"sess_{session}",
            [event(f"{number}.{i}", actor, cause) for i, (actor, cause) in enumerate(batch)],
        )
        clock.advance(0.5)
    return {h.session_id: h.version for h in store.session_heads()}


def flip_hex(text: str, index: int) -> str:
    char = "0" if text[index] != "0" else "1"
    return text[:index] + char + text[index + 1:]


def different(strategy: st.SearchStrategy[Any], original: Any) -> st.SearchStrategy[Any]:
    return strategy.filter(lambda v: v != original or type(v) is not type(original))


def value_strategy(column: str, row: tuple[Any, ...], count: int) -> st.SearchStrategy[Any]:
    """A new value for one column of ``row``, never equal to the original."""
    original = row[COLUMN_INDEX[column]]
    corrupt = st.sampled_from([12345, b"\x00\x01"])
    if column == "data":
        payload = SessionCreated.model_validate_json(original)
        forged = st.text(max_size=5).map(
            lambda t: canonical_json(
                {**payload.model_dump(mode="json", by_alias=True, exclude={"type"}),
                 "workspace": payload.workspace + "!" + t}
            )
        )
        malformed = st.sampled_from(
            ["{not json", "[" * 5000, "[1, 2]", "null", '{"workspace": 5}', ""]
        )
        return forged | malformed | corrupt
    if column in ("prev_hash", "hash"):
        flipped = st.integers(0, 63).map(lambda i: flip_hex(original, i))
        return flipped | different(st.just(original.upper()), original) | corrupt
    if column == "seq":
        return (st.integers(count + 1, count + 50) | st.integers(-5, 0)
                | st.sampled_from(["x", 2.5, b"\x01"]))
    if column == "schema_version":
        return different(st.integers(-2, 5), original) | st.just("one")
    if column in ("causation_id", "correlation_id"):
        return different(st.none() | st.text(max_size=8), original)
    if column == "actor":
        return different(st.sampled_from([*ACTORS, "intruder"]), original) | corrupt
    return different(st.text(max_size=30), original) | corrupt  # type, recorded_at


@st.composite
def tamperings(draw: st.DrawFn, store: EventStore, versions: dict[str, int]) -> Tampering:
    session_id = draw(st.sampled_from(sorted(versions)), label="session")
    count = versions[session_id]
    seq = draw(st.integers(1, count), label="seq")
    kinds = ["update", "undecodable", "delete"] + (["swap"] if count > 1 else [])
    kind = draw(st.sampled_from(kinds), label="kind")
    if kind == "delete":
        return Tampering("delete", session_id, seq)
    if kind == "swap":
        other = draw(st.integers(1, count).filter(lambda s: s != seq), label="other seq")
        return Tampering("swap", session_id, seq, other_seq=other)
    if kind == "undecodable":
        return Tampering("undecodable", session_id, seq, draw(st.sampled_from(TEXT_COLUMNS)))
    column = draw(st.sampled_from(UPDATABLE), label="column")
    row = next(r for r in store.raw_session(session_id) if r[2] == seq)
    value = draw(value_strategy(column, row, count), label="value")
    return Tampering("update", session_id, seq, column, value)


@per_example_stores
@given(log=random_log(), data=st.data())
def test_el4_any_single_tampering_is_blamed_on_the_first_affected_seq(
    store_factory: StoreFactory,
    tamper_factory: Callable[[EventStore], Tamper],
    depth: str,
    log: list[Any],
    data: st.DataObject,
) -> None:
    """EL-4 property: random log, any single tampering → ``first_bad_seq`` as predicted."""
    clock = ManualClock()
    with store_factory.fresh(clock=clock) as store:
        versions = build(store, clock, log)
        assert all(r.ok for r in store.verify())
        tampering = data.draw(tamperings(store, versions), label="tampering")
        try:
            tampering.apply(tamper_factory(store))
        except Unrepresentable:
            reject()  # PostgreSQL's typed columns cannot hold this corruption
        assert_blamed(store, tampering)

