"""Server-sent event streams of the log: one session's, and every session's (SPEC EL-5).

A stream keeps its own cursor and repeats one step: read the events after the cursor from the
store, send them, advance the cursor, then wait until something may have been committed. Since
every event sent comes from a cursor-ordered read, the seam between catch-up and live events
has no gap and no duplicate, whoever wrote the events.

The wait ends early when this process commits (:class:`CommitNotifier` bridges the store's
listener, called on the committing thread, into the event loop) and otherwise after
``stream_poll_s``, which is how appends by other processes on the same database arrive.
Idle streams send a comment every ``stream_keepalive_s``; all streams end when the server
starts stopping, so a graceful shutdown is not held up by open connections. A session
stream also ends after sending the session's ``SessionDeleted`` event, and a deleted session's
stream answers 410 ``session_deleted`` (its events stay readable from the events page).
"""

# No ``from __future__ import annotations``: FastAPI reads the route signatures at runtime,
# and they refer to dependencies defined inside stream_routes().
import asyncio
import json
import threading
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Annotated

import anyio
from fastapi import APIRouter, Depends, Header, Query
from fastapi.sse import EventSourceResponse, ServerSentEvent

from eventlog import EventStore, RecordedEvent

from ..config import ServerSettings
from ..errors import InvalidInput, SessionLedgerError
from ..logs import log_event, logger
from ..sessions import SessionService, check_cursor

__all__ = ["DELETED_EVENT", "PAGE_SIZE", "CommitNotifier", "follow", "stream_routes", "to_sse"]

DELETED_EVENT = "SessionDeleted"
"""The last event a session stream sends: a deleted session's routes answer 410 after it."""
PAGE_SIZE = 500
"""Events read per step; a full page is followed by another read without waiting."""

_log = logger.getChild("http")

PageReader = Callable[[int, int], list[RecordedEvent]]
"""``read(after, limit)``: up to ``limit`` events after the cursor, in cursor order."""


class CommitNotifier:
    """Wakes the streams waiting in one event loop after each commit of the store."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._waiters: set[asyncio.Event] = set()
        self._unsubscribe: Callable[[], None] | None = None
        self._lock = threading.Lock()
        self._wake_queued = False

    def attach(self, store: EventStore, loop: asyncio.AbstractEventLoop) -> None:
        """Start listening to ``store``; waiters live in ``loop``."""
        self._loop = loop
        self._unsubscribe = store.subscribe(self._on_commit)

    def detach(self) -> None:
        """Stop listening (server shutdown)."""
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        self._loop = None

    def _on_commit(self, _events: Sequence[RecordedEvent]) -> None:
        # Runs on the committing thread while it holds the writer: only schedule, once.
        loop = self._loop
        if loop is None:
            return
        with self._lock:
            if self._wake_queued:
                return
            self._wake_queued = True
        try:
            loop.call_soon_threadsafe(self._wake)
        except RuntimeError:  # the loop closed during shutdown
            pass

    def _wake(self) -> None:
        with self._lock:
            self._wake_queued = False
        for waiter in self._waiters:
            waiter.set()

    @contextmanager
    def waiter(self) -> Iterator[asyncio.Event]:
        """An event set after each commit, registered for the duration of the block."""
        event = asyncio.Event()
        self._waiters.add(event)
        try:
            yield event
        finally:
            self._waiters.discard(event)


def to_sse(event: RecordedEvent, event_id: int) -> ServerSentEvent:
    """``id:`` the cursor, ``event:`` the type, ``data:`` the envelope as one JSON line."""
    data = json.dumps(event.to_wire(), ensure_ascii=False, separators=(",", ":"))
    return ServerSentEvent(id=str(event_id), event=event.type, raw_data=data)


async def follow(
    read: PageReader,
    cursor_of: Callable[[RecordedEvent], int],
    cursor: int,
    *,
    notifier: CommitNotifier,
    settings: ServerSettings,
    stopping: threading.Event,
) -> AsyncGenerator[ServerSentEvent, None]:
    """Send every event after ``cursor``, then live ones, until stopped or disconnected."""
    with notifier.waiter() as wake:
        idle_since = time.monotonic()
        while not stopping.is_set():
            wake.clear()  # before reading: a commit after the read sets it again
            try:
                page = await anyio.to_thread.run_sync(read, cursor, PAGE_SIZE)
            except SessionLedgerError as exc:
                log_event(_log, "stream_ended", reason=exc.code, message=exc.message)
                return
            for event in page:
                cursor = cursor_of(event)
                yield to_sse(event, cursor)
            if len(page) == PAGE_SIZE:
                continue
            if page:
                idle_since = time.monotonic()
            elif time.monotonic() - idle_since >= settings.stream_keepalive_s:
                idle_since = time.monotonic()
                yield ServerSentEvent(comment="keep-alive")
            keepalive_due = idle_since + settings.stream_keepalive_s - time.monotonic()
            with anyio.move_on_after(max(0.0, min(settings.stream_poll_s, keepalive_due))):
                await wake.wait()


def _parse_cursor(after: int | None, last_event_id: str | None) -> int:
    """``Last-Event-ID`` wins over ``?after=``: a browser reconnects with the original URL."""
    if last_event_id is not None and last_event_id.strip():
        text = last_event_id.strip()
        if not (text.isascii() and text.isdigit()):
            raise InvalidInput(
                f"Last-Event-ID must be a non-negative integer, not {last_event_id!r}",
                details=[{"loc": ["header", "Last-Event-ID"], "message": "not an integer"}],
            )
        return check_cursor(int(text), name="Last-Event-ID")
    return 0 if after is None else check_cursor(after)


def stream_cursor(
    after: Annotated[int | None, Query(description="resume after this cursor")] = None,
    last_event_id: Annotated[str | None, Header(description="resume after this id")] = None,
) -> int:
    """The cursor a stream resumes after (0: from the beginning)."""
    return _parse_cursor(after, last_event_id)


def stream_routes(
    service: SessionService,
    *,
    notifier: CommitNotifier,
    settings: ServerSettings,
    stopping: threading.Event,
) -> APIRouter:
    """The two SSE endpoints of SPEC §11."""
    router = APIRouter(tags=["streams"])

    def live_session(session_id: str) -> str:
        service.require_live(session_id)  # 404 unknown, 410 deleted
        return session_id

    @router.get("/v1/sessions/{session_id}/events/stream", response_class=EventSourceResponse)
    async def session_stream(
        session_id: Annotated[str, Depends(live_session)],
        cursor: Annotated[int, Depends(stream_cursor)],
    ) -> AsyncIterator[ServerSentEvent]:
        """One session's events; ``id:`` is the event's ``seq``; ends after a deletion."""

        def read(after: int, limit: int) -> list[RecordedEvent]:
            return service.session_page(session_id, after=after, limit=limit)

        async for item in follow(
            read, lambda e: e.seq, cursor,
            notifier=notifier, settings=settings, stopping=stopping,
        ):
            yield item
            if item.event == DELETED_EVENT:
                return  # nothing can follow a deletion

    @router.get("/v1/events/stream", response_class=EventSourceResponse)
    async def global_stream(
        cursor: Annotated[int, Depends(stream_cursor)],
    ) -> AsyncIterator[ServerSentEvent]:
        """Every session's events; ``id:`` is the event's global position."""

        def read(after: int, limit: int) -> list[RecordedEvent]:
            return service.global_page(after=after, limit=limit)

        async for item in follow(
            read, lambda e: e.global_position, cursor,
            notifier=notifier, settings=settings, stopping=stopping,
        ):
            yield item

    return router
