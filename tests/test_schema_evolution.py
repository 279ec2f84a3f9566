"""Schema evolution of stored events (SPEC EL-6), on every backend.

An event of a type the catalog does not hold, or of a schema version no upcaster chain
reaches, is an explicit error naming it (and where it is) — never silently dropped. Registered
upcasters turn old stored payloads into the current model on read. A payload of a known type
and version that the reader cannot decode (its model or an upcaster refuses it, JSON nested
too deep, a lone surrogate, bytes that are not UTF-8) is read as an ``Undecodable`` envelope in
its place, and the chain over its stored text still verifies (SPEC EG-1). Test-only event types are
put into ``eventlog.catalog.CATALOG`` with ``monkeypatch`` (undone after each test), and each
store gets its own fresh ``UpcasterRegistry`` so the process-wide default stays untouched.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import pytest
from pg_support import PG_BACKEND, Unrepresentable

from eventlog import (
    CATALOG,
    UNDECODABLE,
    Event,
    EventStore,
    NewEvent,
    SessionCreated,
    Undecodable,
    UnknownEventType,
    UnknownSchemaVersion,
    UpcasterRegistry,
    default_upcasters,
)
from eventlog.catalog import CATALOG as CATALOG_IN_MODULE

if TYPE_CHECKING:
    from conftest import StoreFactory, Tamper


class ProbeV1(Event):
    """A test-only event type as first released."""

    schema_version: ClassVar[int] = 1
    type: Literal["ProbeRecorded"] = "ProbeRecorded"
    name: str


class ProbeV2(Event):
    """Version 2: ``name`` became an upper-cased ``title``, ``tags`` were added."""

    schema_version: ClassVar[int] = 2
    type: Literal["ProbeRecorded"] = "ProbeRecorded"
    title: str
    tags: tuple[str, ...] = ()


class ProbeRenamed(Event):
    """Version 1 again, but ``name`` became ``title`` without a version bump (a bug that
    leaves the stored payloads undecodable)."""

    schema_version: ClassVar[int] = 1
    type: Literal["ProbeRecorded"] = "ProbeRecorded"
    title: str


class ProbeV3(Event):
    """Version 3: a ``priority`` was added."""

    schema_version: ClassVar[int] = 3
    type: Literal["ProbeRecorded"] = "ProbeRecorded"
    title: str
    tags: tuple[str, ...] = ()
    priority: int


Catalog = Callable[[type[Event]], None]


@pytest.fixture
def catalog(monkeypatch: pytest.MonkeyPatch) -> Catalog:
    """``catalog(cls)`` makes ``cls`` the current model of its type until the test ends."""
    assert CATALOG is CATALOG_IN_MODULE

    def use(cls: type[Event]) -> None:
        monkeypatch.setitem(CATALOG_IN_MODULE, cls.model_fields["type"].default, cls)

    return use


@pytest.fixture
def upcasters() -> UpcasterRegistry:
    """A registry of its own: V1 → V2 → V3 for ``ProbeRecorded``."""
    registry = UpcasterRegistry()

    @registry.register("ProbeRecorded", 1)
    def name_to_title(payload: dict[str, Any]) -> dict[str, Any]:
        return {"title": payload["name"].upper(), "tags": ["from-v1"]}

    @registry.register("ProbeRecorded", 2)
    def add_priority(payload: dict[str, Any]) -> dict[str, Any]:
        return {**payload, "priority": len(payload["tags"])}

    return registry


def created(marker: str) -> NewEvent:
    return NewEvent(SessionCreated(workspace=marker), actor="user")


def probe(event: Event) -> NewEvent:
    return NewEvent(event, actor="model", causation_id="call_1")


def workspaces(store: EventStore, session_id: str, after: int = 0) -> list[str]:
    return [e.data.workspace for e in store.read_session(session_id, after=after)]  # type: ignore[attr-defined]


# -- unknown types ------------------------------------------------------------------------


def test_el6_unknown_type_is_an_error_naming_type_session_and_seq(
    store: EventStore, catalog: Catalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """EL-6: a stored type the catalog no longer holds raises UnknownEventType on read."""
    catalog(ProbeV1)
    store.append("sess_x", [created("before"), probe(ProbeV1(name="n")), created("after")])
    monkeypatch.delitem(CATALOG_IN_MODULE, "ProbeRecorded")

    reader = store.read_session("sess_x")
    assert next(reader).seq == 1
    with pytest.raises(UnknownEventType, match=r"'ProbeRecorded'.*sess_x.*seq 2") as caught:
        next(reader)
    assert caught.value.event_type == "ProbeRecorded"
    with pytest.raises(UnknownEventType, match="ProbeRecorded"):
        list(store.read_all())  # never silently dropped
    assert workspaces(store, "sess_x", after=2) == ["after"]
    (report,) = store.verify("sess_x")
    assert report.first_bad_seq == 2 and "unknown event type" in (report.reason or "")


def test_el6_unknown_type_in_a_stored_row(store: EventStore, tamper: Tamper) -> None:
    """EL-6: a row whose type column names no catalog type is an explicit error."""
    store.append("sess_x", [created("a"), created("b")])
    tamper.update("sess_x", 2, "type", "SessionTeleported")
    with pytest.raises(UnknownEventType, match=r"'SessionTeleported'.*sess_x.*seq 2"):
        list(store.read_session("sess_x"))


# -- unknown versions ---------------------------------------------------------------------


def test_el6_future_schema_version_is_an_error(store: EventStore, catalog: Catalog) -> None:
    """EL-6: a version newer than the catalog's (written by a newer build) is refused."""
    catalog(ProbeV3)
    store.append("sess_x", [probe(ProbeV3(title="t", priority=1))])
    catalog(ProbeV2)  # this build only knows version 2
    with pytest.raises(
        UnknownSchemaVersion, match=r"version 3 of event type 'ProbeRecorded'.*sess_x.*seq 1"
    ) as caught:
        list(store.read_session("sess_x"))
    assert (caught.value.event_type, caught.value.version) == ("ProbeRecorded", 3)
    with pytest.raises(UnknownSchemaVersion):
        list(store.read_all())


@pytest.mark.parametrize("version", [0, -1, 2, 99])
def test_el6_unknown_version_in_a_stored_row(
    store: EventStore, tamper: Tamper, version: int
) -> None:
    """EL-6: a SessionCreated row at a version no chain reaches (0, 2, …) is refused."""
    store.append("sess_x", [created("a")])
    tamper.update("sess_x", 1, "schema_version", version)
    with pytest.raises(UnknownSchemaVersion, match=rf"version {version} .*'SessionCreated'"):
        list(store.read_session("sess_x"))


def test_el6_old_version_without_an_upcaster_is_an_error(
    store: EventStore, catalog: Catalog
) -> None:
    """EL-6: an old version is an error when no registered upcaster bridges it."""
    catalog(ProbeV1)
    store.append("sess_x", [probe(ProbeV1(name="n"))])
    catalog(ProbeV2)
    with pytest.raises(UnknownSchemaVersion, match=r"version 1 of event type 'ProbeRecorded'"):
        list(store.read_session("sess_x"))


# -- upcasting ----------------------------------------------------------------------------


def test_el6_upcasters_turn_old_payloads_into_the_current_model(
    store_factory: StoreFactory, catalog: Catalog, upcasters: UpcasterRegistry
) -> None:
    """EL-6: stored V1 and V2 payloads read back as V3 models through the registry."""
    store = store_factory.open(upcasters=upcasters)
    catalog(ProbeV1)
    store.append("sess_x", [probe(ProbeV1(name="alpha"))])
    catalog(ProbeV2)
    store.append("sess_x", [probe(ProbeV2(title="Beta", tags=("x", "y")))])
    catalog(ProbeV3)
    store.append("sess_x", [probe(ProbeV3(title="Gamma", priority=7)), created("w")])

    events = list(store.read_session("sess_x"))
    assert [e.data for e in events[:3]] == [
        ProbeV3(title="ALPHA", tags=("from-v1",), priority=1),
        ProbeV3(title="Beta", tags=("x", "y"), priority=2),
        ProbeV3(title="Gamma", priority=7),
    ]
    assert all(type(e.data) is ProbeV3 for e in events[:3])
    assert [e.schema_version for e in events] == [1, 2, 3, 1]  # the stored versions
    assert list(store.read_all()) == events
    assert all(r.ok for r in store.verify())  # the chain hashes the stored payloads


def test_el6_upcasting_a_catalog_type_by_bumping_its_version(
    store_factory: StoreFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """EL-6: after SessionCreated moves to version 2, stored version-1 rows are upcast."""
    registry = UpcasterRegistry()
    registry.register("SessionCreated", 1)(
        lambda payload: {**payload, "workspace": "/upcast" + payload["workspace"]}
    )
    store = store_factory.open(upcasters=registry)
    store.append("sess_x", [created("/w")])
    monkeypatch.setattr(SessionCreated, "schema_version", 2)
    store.append("sess_x", [created("/v2")])
    assert workspaces(store, "sess_x") == ["/upcast/w", "/v2"]
    assert [e.schema_version for e in store.read_session("sess_x")] == [1, 2]


def test_el6_registries_are_per_store(
    store_factory: StoreFactory, catalog: Catalog, upcasters: UpcasterRegistry
) -> None:
    """A store without the registry does not upcast; the default registry stays empty."""
    catalog(ProbeV1)
    plain = store_factory.open()
    plain.append("sess_x", [probe(ProbeV1(name="n"))])
    catalog(ProbeV2)
    with pytest.raises(UnknownSchemaVersion):
        list(plain.read_session("sess_x"))
    assert upcasters is not default_upcasters
    with pytest.raises(UnknownSchemaVersion):
        default_upcasters.upcast("ProbeRecorded", 1, {"name": "n"}, target=2)


# -- undecodable payloads (EG-1) ----------------------------------------------------------

every_backend = pytest.mark.parametrize("backend", ["memory", "sqlite", PG_BACKEND])
"""PostgreSQL too: the reading code is shared (EL-8)."""


def undecodable_at(store: EventStore, session_id: str) -> dict[int, Undecodable]:
    """The session's undecodable events by seq; every event read, the others decoded."""
    events = list(store.read_session(session_id))
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    found = {e.seq: e.data for e in events if isinstance(e.data, Undecodable)}
    assert all(events[seq - 1].type == UNDECODABLE for seq in found)
    return found


@every_backend
def test_eg1_a_payload_its_model_now_refuses_is_undecodable_and_the_chain_holds(
    store: EventStore, catalog: Catalog
) -> None:
    """EG-1: read in its place as ``Undecodable`` (stored type and text, why), by session and
    globally; the chain, checked over the stored text, verifies."""
    catalog(ProbeV1)
    store.append("sess_x", [created("before"), probe(ProbeV1(name="n")), created("after")])
    catalog(ProbeRenamed)
    (found,) = undecodable_at(store, "sess_x").items()
    assert found[0] == 2 and (found[1].stored_type, found[1].stored_data) == (
        "ProbeRecorded", '{"name":"n"}')
    assert "title" in found[1].reason
    assert [e.type for e in store.read_all()] == ["SessionCreated", UNDECODABLE, "SessionCreated"]
    assert workspaces(store, "sess_x", after=2) == ["after"]
    assert [r.ok for r in store.verify()] == [True]
    assert store.rebuild_projections() == 3


@every_backend
def test_eg1_an_upcaster_that_fails_makes_the_event_undecodable(
    store_factory: StoreFactory, catalog: Catalog
) -> None:
    """EG-1: an upcaster raising on an old payload it did not expect is no read error."""
    registry = UpcasterRegistry()
    registry.register("ProbeRecorded", 1)(lambda payload: {"title": payload["label"]})
    store = store_factory.open(upcasters=registry)
    catalog(ProbeV1)
    store.append("sess_x", [probe(ProbeV1(name="n")), created("after")])
    catalog(ProbeV2)
    (found,) = undecodable_at(store, "sess_x").values()
    assert found.reason.startswith("KeyError") and found.stored_data == '{"name":"n"}'


@every_backend
@pytest.mark.parametrize("data", [
    '{"workspace":' + "[" * 300 + "]" * 300 + "}",  # deeper than the reader's JSON parser
    '{"workspace":"\\ud800"}',  # a lone surrogate escape
    "{not json",
    "[1, 2]",
])
def test_eg1_stored_text_the_reader_cannot_parse_is_undecodable(
    store: EventStore, tamper: Tamper, data: str
) -> None:
    """EG-1: whatever the text, reading goes on past it (the edit itself breaks the chain)."""
    store.append("sess_x", [created("a"), created("b"), created("c")])
    tamper.update("sess_x", 2, "data", data)
    (found,) = undecodable_at(store, "sess_x").values()
    assert found.stored_data == data and found.stored_type == "SessionCreated"
    assert [e.seq for e in store.read_all()] == [1, 2, 3]
    (report,) = store.verify("sess_x")
    assert report.first_bad_seq == 2


@every_backend
def test_eg1_bytes_that_are_not_utf8_are_undecodable(store: EventStore, tamper: Tamper) -> None:
    """EG-1: bit rot in a payload (SQLite TEXT that is not UTF-8) is read with its bad bytes
    escaped, never as a driver error; PostgreSQL cannot hold such text."""
    store.append("sess_x", [created("a"), created("b")])
    try:
        tamper.undecodable("sess_x", 1, "data")
    except Unrepresentable as exc:
        pytest.skip(str(exc))
    (found,) = undecodable_at(store, "sess_x").values()
    assert "\\x" in found.stored_data or "\\u" in found.stored_data
    found.stored_data.encode("utf-8")  # writable as UTF-8 JSON
    assert workspaces(store, "sess_x", after=1) == ["b"]
