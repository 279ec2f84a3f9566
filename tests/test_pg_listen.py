"""Other processes' commits reach a PostgreSQL store's listeners by LISTEN/NOTIFY (D116, #11).

Two :class:`PostgresEventStore` instances on one schema stand for two ``serve`` processes: a
listener on store B must hear store A's appends at once (not at the next 0.5 s poll), all of
them, in global order and once each, while B's own appends still reach it exactly once. Then
the same through the service's stream code in process (with a 30 s poll, so only the
notification can wake it), and through two real ``serve`` processes over HTTP.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import closing
from pathlib import Path

import httpx
import pytest
from httpx_sse import connect_sse
from server_support import running_server

from eventlog import AppendBatch, NewEvent, RecordedEvent, SessionCreated
from eventlog.postgres import PostgresEventStore
from sessionledger import ServerSettings, SessionService
from sessionledger.http.streaming import CommitNotifier, follow

pytestmark = pytest.mark.postgres

WAIT_S = 30.0
"""How long a test waits for what must come: it only bounds a hang (issue 36)."""
"""A generous bound for delivery; the poll the notification replaces is 0.5 s."""


def new(marker: str) -> NewEvent:
    return NewEvent(SessionCreated(workspace=marker), actor="user")


def markers(events: Sequence[RecordedEvent]) -> list[str]:
    return [e.data.workspace for e in events]  # type: ignore[attr-defined]


class Heard:
    """A listener that collects what it is told and signals when it holds ``wanted`` events."""

    def __init__(self) -> None:
        self.events: list[RecordedEvent] = []
        self.calls = 0
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)

    def __call__(self, events: Sequence[RecordedEvent]) -> None:
        with self._changed:
            self.events.extend(events)
            self.calls += 1
            self._changed.notify_all()

    def wait_for(self, count: int, timeout: float = WAIT_S) -> list[RecordedEvent]:
        with self._changed:
            self._changed.wait_for(lambda: len(self.events) >= count, timeout)
            return list(self.events)


@pytest.fixture
def url(pg_database: str, request: pytest.FixtureRequest) -> str:
    return f"{pg_database}?schema=listen_{request.node.name[5:30].lower()}"


@pytest.fixture
def two_stores(url: str) -> Iterator[tuple[PostgresEventStore, PostgresEventStore]]:
    with closing(PostgresEventStore(url)) as a, closing(PostgresEventStore(url)) as b:
        yield a, b


def test_a_listener_hears_another_stores_append_at_once(
    two_stores: tuple[PostgresEventStore, PostgresEventStore],
) -> None:
    a, b = two_stores  # B never polls: only the notification can tell it of A's append
    heard = Heard()
    b.subscribe(heard)
    result = a.append("sess_a", [new("a1"), new("a2")])
    events = heard.wait_for(2)
    assert events == list(result.events)
    time.sleep(0.3)  # nothing more arrives (no duplicate from a later notification)
    assert heard.events == list(result.events)


def test_a_burst_from_another_store_arrives_complete_in_order_once(
    two_stores: tuple[PostgresEventStore, PostgresEventStore],
) -> None:
    a, b = two_stores
    heard = Heard()
    b.subscribe(heard)
    sessions = [f"sess_{i}" for i in range(8)]

    def writer(n: int) -> None:
        for k in range(25):
            a.append(sessions[n], [new(f"{n}-{k}")])

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(len(sessions))]
    for thread in threads:
        thread.start()
    a.append_many([AppendBatch("sess_many", (new("m1"), new("m2"))),
                   AppendBatch("sess_many", (new("m3"),))])
    for thread in threads:
        thread.join()
    total = 8 * 25 + 3
    events = heard.wait_for(total, timeout=3 * WAIT_S)
    assert events == list(a.read_all())
    positions = [e.global_position for e in events]
    assert positions == list(range(1, total + 1))


def test_own_appends_are_published_once_among_foreign_ones(
    two_stores: tuple[PostgresEventStore, PostgresEventStore],
) -> None:
    a, b = two_stores
    heard = Heard()
    b.subscribe(heard)
    stop = threading.Event()

    def foreign() -> None:
        k = 0
        while not stop.is_set():
            a.append("sess_a", [new(f"a{k}")])
            k += 1

    thread = threading.Thread(target=foreign)
    thread.start()
    try:
        own = [e for k in range(30) for e in b.append("sess_b", [new(f"b{k}")]).events]
    finally:
        stop.set()
        thread.join()
    everything = list(b.read_all())
    heard.wait_for(len(everything))
    time.sleep(0.3)  # let any late duplicate arrive
    assert sorted(heard.events, key=lambda e: e.global_position) == everything
    assert len(heard.events) == len(everything)  # no event twice
    assert [e for e in heard.events if e.session_id == "sess_b"] == own
    foreign_heard = [e for e in heard.events if e.session_id == "sess_a"]
    assert foreign_heard == [e for e in everything if e.session_id == "sess_a"]  # in order
    assert foreign_heard  # A wrote while B did


def _listening_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("eventlog-listen-")]


def test_the_listening_thread_stops_with_the_last_unsubscribe_and_comes_back(
    two_stores: tuple[PostgresEventStore, PostgresEventStore],
) -> None:
    a, b = two_stores
    first, second = Heard(), Heard()
    drop_first, drop_second = b.subscribe(first), b.subscribe(second)
    assert len(_listening_threads()) == 1
    a.append("sess_a", [new("a1")])
    assert markers(second.wait_for(1)) == ["a1"]
    drop_first()
    assert len(_listening_threads()) == 1  # someone still listens
    drop_second()
    deadline = time.monotonic() + WAIT_S
    while _listening_threads() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _listening_threads() == []  # no thread or connection left for nobody
    a.append("sess_a", [new("a2")])  # heard by no one
    again = Heard()
    b.subscribe(again)
    a.append("sess_a", [new("a3")])
    assert markers(again.wait_for(1)) == ["a3"]
    time.sleep(0.3)
    assert markers(again.events) == ["a3"]
    assert markers(first.events) == ["a1"] and markers(second.events) == ["a1"]


def test_stores_in_other_schemas_are_not_heard(pg_database: str, url: str) -> None:
    with closing(PostgresEventStore(url)) as b, \
            closing(PostgresEventStore(f"{pg_database}?schema=listen_elsewhere")) as other:
        heard = Heard()
        b.subscribe(heard)
        other.append("sess_o", [new("o")])
        b.append("sess_b", [new("b")])
        time.sleep(0.5)
        assert markers(heard.events) == ["b"]


def test_after_a_lost_listening_connection_it_catches_up_from_the_cursor(
    two_stores: tuple[PostgresEventStore, PostgresEventStore], pg_database: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    import psycopg

    a, b = two_stores
    heard = Heard()
    b.subscribe(heard)
    a.append("sess_a", [new("before")])
    assert markers(heard.wait_for(1)) == ["before"]
    with psycopg.connect(pg_database, autocommit=True) as admin:
        admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query LIKE %s "
            "AND pid <> pg_backend_pid()", ("LISTEN %",),
        )
    a.append("sess_a", [new("during")])  # the notification may be lost with the connection
    a.append("sess_a", [new("after")])
    assert markers(heard.wait_for(3)) == ["before", "during", "after"]
    time.sleep(0.3)
    assert markers(heard.events) == ["before", "during", "after"]
    assert "listening for commits" in caplog.text  # the connection was lost, and replaced


@pytest.mark.slow  # two processes on one database: make verify (D182)
def test_a_stream_in_process_b_is_woken_by_process_a(url: str, tmp_path: Path) -> None:
    """The service's stream code, unchanged, wakes on the notification (poll set to 30 s)."""

    async def scenario() -> None:
        service_b = SessionService.open(url, workspace_root=tmp_path)
        service_a = SessionService.open(url, workspace_root=tmp_path)
        notifier = CommitNotifier()
        notifier.attach(service_b.store, asyncio.get_running_loop())
        settings = ServerSettings(
            workspace_root=tmp_path, stream_poll_s=3600.0, stream_keepalive_s=3600.0
        )
        stop = threading.Event()
        stream = follow(
            lambda after, limit: service_b.global_page(after=after, limit=limit),
            lambda event: event.global_position, service_b.store.head_position(),
            notifier=notifier, settings=settings, stopping=stop,
        )
        try:
            first = asyncio.ensure_future(anext(stream))
            await asyncio.sleep(0.2)  # the stream has read its (empty) page and waits
            await asyncio.to_thread(service_a.create_session)
            item = await asyncio.wait_for(first, WAIT_S)  # the poll would come in an hour
            assert item.event == "SessionCreated"
            stop.set()
        finally:
            await stream.aclose()
            notifier.detach()
            service_a.close()
            service_b.close()

    asyncio.run(scenario())


@pytest.mark.slow  # two processes on one database: make verify (D182)
def test_an_sse_client_of_server_b_sees_a_session_created_on_server_a(
    url: str, tmp_path: Path
) -> None:
    args = ("--db", url)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    with running_server(tmp_path / "a", args=args) as server_a, \
            running_server(tmp_path / "b", args=args) as server_b, \
            server_a.client() as client_a, \
            server_b.client(timeout=httpx.Timeout(10.0, read=WAIT_S)) as client_b:
        with connect_sse(client_b, "GET", "/v1/events/stream") as source:
            assert source.response.status_code == 200
            created = client_a.post("/v1/sessions", json={})
            assert created.status_code == 201, created.text
            session_id = created.json()["sessionId"]
            for event in source.iter_sse():
                if event.data:
                    assert event.event == "SessionCreated"
                    assert session_id in event.data
                    break
