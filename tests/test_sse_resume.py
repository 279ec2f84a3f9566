"""Reconnecting clients (SPEC EL-5, §11 streams) against the real server over real HTTP.

A client reads a stream, drops, more events are appended, and it comes back with
``Last-Event-ID`` (or ``?after=``): it must receive exactly the events it missed and then the
live ones — no gap, no duplicate — also while events are being appended during the
reconnect. Events are appended both through the server (``POST /v1/sessions``, which wakes
streams in process) and by this test process writing the same SQLite file (which the server
notices by polling), so both paths of live delivery are exercised.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from httpx_sse import ServerSentEvent, connect_sse
from server_support import ServerProcess

from eventlog import EventStore, NewEvent, SessionCreated
from sessionledger import ServerSettings, SessionService
from sessionledger.http.streaming import CommitNotifier, follow

READ_TIMEOUT_S = 8.0


@pytest.fixture
def http(server: ServerProcess) -> Iterator[httpx.Client]:
    timeout = httpx.Timeout(10.0, read=READ_TIMEOUT_S)
    with server.client(timeout=timeout) as client:
        yield client


@pytest.fixture
def store(server: ServerProcess) -> Iterator[EventStore]:
    """The server's database, opened by the test process as a second writer."""
    opened = server.open_store()
    yield opened
    opened.close()


def new_session(http: httpx.Client) -> str:
    response = http.post("/v1/sessions", json={})
    assert response.status_code == 201, response.text
    session_id: str = response.json()["sessionId"]
    return session_id


def append_to(store: EventStore, session_id: str, count: int) -> None:
    """More events for an existing session (SessionCreated is the only type so far)."""
    for _ in range(count):
        store.append(session_id, [NewEvent(SessionCreated(workspace="/w"), actor="system")])


def read(
    http: httpx.Client, url: str, count: int, *, last_event_id: int | None = None,
    params: dict[str, Any] | None = None,
) -> list[ServerSentEvent]:
    """Open a stream, read ``count`` events (keep-alive comments skipped), disconnect."""
    headers = {} if last_event_id is None else {"Last-Event-ID": str(last_event_id)}
    received: list[ServerSentEvent] = []
    with connect_sse(http, "GET", url, headers=headers, params=params) as source:
        assert source.response.status_code == 200
        assert source.response.headers["content-type"].startswith("text/event-stream")
        if count == 0:
            return received
        for event in source.iter_sse():
            if event.data:
                received.append(event)
            if len(received) == count:
                break
    return received


def ids(events: list[ServerSentEvent]) -> list[int]:
    return [int(e.id) for e in events]


def session_url(session_id: str) -> str:
    return f"/v1/sessions/{session_id}/events/stream"


# -- one session's stream (id = seq) ---------------------------------------------------------


def test_session_stream_without_cursor_starts_at_the_beginning(
    http: httpx.Client, store: EventStore
) -> None:  # EL-5
    session = new_session(http)
    append_to(store, session, 2)
    events = read(http, session_url(session), 3)
    assert ids(events) == [1, 2, 3]
    assert {e.event for e in events} == {"SessionCreated"}
    paged = http.get(f"/v1/sessions/{session}/events").json()["events"]
    assert [json.loads(e.data) for e in events] == paged


def test_session_stream_resumes_after_last_event_id(
    http: httpx.Client, store: EventStore
) -> None:  # EL-5: missed events, then live ones, no gap and no duplicate
    session = new_session(http)
    append_to(store, session, 2)
    first = read(http, session_url(session), 3)
    append_to(store, session, 4)  # appended while the client is away
    with connect_sse(
        http, "GET", session_url(session), headers={"Last-Event-ID": first[-1].id}
    ) as source:
        received: list[ServerSentEvent] = []
        for event in source.iter_sse():
            if not event.data:
                continue
            received.append(event)
            if len(received) == 4:
                append_to(store, session, 2)  # live, after the catch-up
            if len(received) == 6:
                break
    assert ids(received) == [4, 5, 6, 7, 8, 9]
    assert all(json.loads(e.data)["sessionId"] == session for e in received)


def test_session_stream_resumes_from_the_after_parameter(
    http: httpx.Client, store: EventStore
) -> None:  # §11: ?after=N is the same cursor as Last-Event-ID
    session = new_session(http)
    append_to(store, session, 3)
    assert ids(read(http, session_url(session), 2, params={"after": 2})) == [3, 4]
    # A browser reconnects with its original URL: Last-Event-ID wins over ?after=.
    resumed = read(http, session_url(session), 1, params={"after": 1}, last_event_id=3)
    assert ids(resumed) == [4]


def test_session_stream_reconnect_during_concurrent_appends(
    http: httpx.Client, store: EventStore
) -> None:  # EL-5 at the seam: appends race the catch-up read
    session = new_session(http)
    seen = ids(read(http, session_url(session), 1))
    total = 1 + 40
    writer = threading.Thread(target=_trickle, args=(store, session, 40), daemon=True)
    writer.start()
    try:
        time.sleep(0.05)
        seen += ids(read(http, session_url(session), total - 1, last_event_id=seen[-1]))
    finally:
        writer.join(timeout=30)
    assert seen == list(range(1, total + 1))


def _trickle(store: EventStore, session_id: str, count: int) -> None:
    for _ in range(count):
        append_to(store, session_id, 1)
        time.sleep(0.003)


def test_bad_last_event_id_is_invalid_input(http: httpx.Client) -> None:
    session = new_session(http)
    response = http.get(session_url(session), headers={"Last-Event-ID": "seven"})
    assert response.status_code == 422
    assert response.json()["error"]["code"] == "invalid_input"
    missing = http.get(session_url("sess_missing"))
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "session_not_found"


# -- the global stream (id = global position) ------------------------------------------------


def test_global_stream_without_cursor_starts_at_the_beginning(
    http: httpx.Client, store: EventStore
) -> None:  # EL-5
    new_session(http)
    head = store.head_position()
    events = read(http, "/v1/events/stream", head)
    assert ids(events) == list(range(1, head + 1))
    expected = [e.to_wire() for e in store.read_all(limit=head)]
    assert [json.loads(e.data) for e in events] == expected


def test_global_stream_resumes_with_concurrent_writers(
    http: httpx.Client, store: EventStore, server: ServerProcess
) -> None:  # EL-5: server-side and other-process appends, during and after the reconnect
    new_session(http)
    cursor = store.head_position()
    for _ in range(3):
        new_session(http)  # missed while away
    stop = threading.Event()
    writers = [
        threading.Thread(target=_post_sessions, args=(server, stop), daemon=True),
        threading.Thread(target=_append_sessions, args=(store, stop), daemon=True),
    ]
    for writer in writers:
        writer.start()
    try:
        time.sleep(0.05)
        received = ids(read(http, "/v1/events/stream", 40, last_event_id=cursor))
    finally:
        stop.set()
        for writer in writers:
            writer.join(timeout=30)
    assert received == list(range(cursor + 1, cursor + 41))
    sessions = {e.session_id for e in store.read_all(after=cursor, limit=40)}
    assert len(sessions) == 40  # each one a new session's SessionCreated


def _post_sessions(server: ServerProcess, stop: threading.Event) -> None:
    with server.client() as client:
        while not stop.is_set():
            assert client.post("/v1/sessions", json={}).status_code == 201
            time.sleep(0.01)


def _append_sessions(store: EventStore, stop: threading.Event) -> None:
    from eventlog import new_session_id

    while not stop.is_set():
        created = NewEvent(SessionCreated(workspace=str(Path.cwd())), actor="system")
        store.append(new_session_id(), [created], expected_version=0)
        time.sleep(0.01)


# -- the follow loop, in process -------------------------------------------------------------


def test_follow_wakes_on_commit_sends_keepalives_and_stops(tmp_path: Path) -> None:
    """A local commit wakes the stream (the poll interval is an hour: nothing else could
    bring the event); idle streams ping."""

    async def scenario() -> None:
        service = SessionService.open("memory://", workspace_root=tmp_path)
        store = service.store
        notifier = CommitNotifier()
        notifier.attach(store, asyncio.get_running_loop())
        settings = ServerSettings(
            workspace_root=tmp_path, stream_poll_s=3600.0, stream_keepalive_s=0.05
        )
        stop = threading.Event()
        service.create_session()
        stream = follow(
            lambda after, limit: service.global_page(after=after, limit=limit),
            lambda event: event.global_position, 0,
            notifier=notifier, settings=settings, stopping=stop,
        )
        try:
            first = await anext(stream)
            assert (first.id, first.event) == ("1", "SessionCreated")
            await asyncio.sleep(0.1)  # idle past the keep-alive interval
            assert (await anext(stream)).comment == "keep-alive"
            await asyncio.to_thread(service.create_session)
            item = await asyncio.wait_for(anext(stream), 60)
            while item.comment is not None:
                item = await asyncio.wait_for(anext(stream), 60)
            assert item.id == "2"  # woken, not polled (the poll would come in an hour)
            stop.set()
            await asyncio.to_thread(service.create_session)  # wake it to see the flag
            assert [i async for i in stream if i.comment is None] == []
        finally:
            await stream.aclose()
            notifier.detach()
            store.close()

    asyncio.run(scenario())
