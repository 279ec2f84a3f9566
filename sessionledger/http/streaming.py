"""Server-sent event streams of the log: one session's, and every session's (EL-5).

A stream keeps its own cursor and repeats one step: read the events after the cursor from the
store, send them, advance the cursor, then wait until something may have been committed. Since
every event sent comes from a cursor-ordered read, the seam between catch-up and live events
has no gap and no duplicate, whoever wrote the events.

The wait ends early when this process commits (:class:`CommitNotifier` bridges the store's
listener, called on the committing thread, into the event loop) and otherwise after
``stream_poll_s``, which is how appends by other processes on the same SQLite file arrive (on
PostgreSQL the store's listener also hears other processes' commits by LISTEN/NOTIFY, D116,
and the poll is only the backstop).
Idle streams send a comment every ``stream_keepalive_s``; all streams end when the server
starts stopping, so a graceful shutdown is not held up by open connections. A session
stream also ends after sending the session's ``SessionDeleted`` event, and a deleted session's
stream answers 410 ``session_deleted`` (its events stay readable from the events page).

Many streams usually wait at the same cursor (every live subscriber of the global stream is at
the head), so a commit would otherwise have each of them read, decode and encode the same
events. :class:`SharedPages` makes that one read per cursor and commit: a stream takes a page
another stream at its cursor started reading after every commit this stream has been woken
for (the notifier counts wakes), and a page is encoded to SSE bytes once. A stream sends a
page as one write (:class:`Page` ``.body``), not one write per event (D98).

Memory is bounded by bytes, not by events (EG-5): a page holds at most
:data:`PAGE_BYTES` of SSE text (or one larger event alone) and at most :data:`PAGE_SIZE`
events, and is read from the store in steps sized by the events already read, so a page of
250 KB events reads a few events, not :data:`PAGE_SIZE` of them. A stream reads its next page
only when the server has handed the previous one to the connection, and uvicorn waits for a
slow reader's socket to drain before it takes another write, so a stream holds at most
:data:`STREAM_BUFFER_BYTES` for a slow reader: the page being sent and the next one. A slow
reader is slowed, never the server; a shared page is forgotten when its window ends.
"""

# No ``from __future__ import annotations``: FastAPI reads the route signatures at runtime,
# and they refer to dependencies defined inside stream_routes().
import asyncio
import json
import threading
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Annotated

import anyio
from fastapi import APIRouter, Depends, Header, Query
from fastapi.responses import StreamingResponse
from fastapi.sse import ServerSentEvent

from eventlog import EventStore, RecordedEvent

from ..config import ServerSettings
from ..errors import InvalidInput, SessionLedgerError
from ..logs import log_event, logger
from ..service.sessions import SessionService, check_cursor
from .middleware import api_router
from .schemas import PlainInt, SessionIdPath, error_responses

__all__ = [
    "DELETED_EVENT", "PAGE_BYTES", "PAGE_SIZE", "STREAM_BUFFER_BYTES", "STREAM_SUFFIX",
    "CommitNotifier", "EventStreamResponse", "Frame", "Page", "SharedPages", "follow",
    "follow_pages", "read_page", "stream_routes", "to_sse",
]

DELETED_EVENT = "SessionDeleted"
"""The last event a session stream sends: a deleted session's routes answer 410 after it."""
STREAM_SUFFIX = "/stream"
"""Every event stream's path ends so, and no other route's (HEAD skips them)."""
PAGE_SIZE = 500
"""Events per page at most; a full page is followed by another read without waiting."""
PAGE_BYTES = 1024 * 1024
"""SSE bytes per page at most (a single larger event makes a page alone)."""
STREAM_BUFFER_BYTES = 2 * PAGE_BYTES
"""What one stream holds for a slow reader at most: the page the connection is still
sending and the next one (plus one event when a single event is larger than a page)."""
FIRST_STEP = 8
"""Events a page's first read from the store asks for; later reads are sized by the mean
size of the events already read, to fill the rest of :data:`PAGE_BYTES`."""
KEEPALIVE = b": keep-alive\n\n"
SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
"""The headers FastAPI's own SSE responses carry."""
SSE_ITEM_SCHEMA = {
    "type": "object",
    "properties": {
        "data": {"type": "string"}, "event": {"type": "string"}, "id": {"type": "string"},
        "retry": {"type": "integer", "minimum": 0},
    },
}
"""One event of a ``text/event-stream`` answer in OpenAPI 3.2, as FastAPI describes it."""

_log = logger.getChild("http")
_BAD_CURSOR = "`after` or `Last-Event-ID` is not a cursor (`invalid_input`)"

PageReader = Callable[[int, int], list[RecordedEvent]]
"""``read(after, limit)``: up to ``limit`` events after the cursor, in cursor order."""
CursorOf = Callable[[RecordedEvent], int]


class CommitNotifier:
    """Wakes the streams waiting in one event loop after each commit of the store.

    ``generation`` counts the wakes: a read started when it was ``g`` sees every commit whose
    wake made it ``g`` or less.
    """

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._waiters: set[asyncio.Event] = set()
        self._unsubscribe: Callable[[], None] | None = None
        self._lock = threading.Lock()
        self._wake_queued = False
        self.generation = 0

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
        self.generation += 1
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


class EventStreamResponse(StreamingResponse):
    """A ``text/event-stream`` answer whose body this module writes, a page per write.

    FastAPI's ``EventSourceResponse`` routes encode and send each yielded event on its own,
    through two in-memory streams and a timer per event; a hundred subscribers times every
    event made that the server's main cost (docs/performance.md, D98).
    """

    media_type = "text/event-stream"


def to_sse(event: RecordedEvent, event_id: int) -> ServerSentEvent:
    """``id:`` the cursor, ``event:`` the type, ``data:`` the envelope as one JSON line."""
    data = json.dumps(event.to_wire(), ensure_ascii=False, separators=(",", ":"))
    return ServerSentEvent(id=str(event_id), event=event.type, raw_data=data)


@dataclass(frozen=True, slots=True)
class Frame:
    """One event of a page: its cursor, type, and where its envelope JSON lies in the body
    (``body[start:end]``; the page holds each event's bytes once)."""

    cursor: int
    type: str
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class Page:
    """The events of one read after a cursor, and all their frames as one body."""

    frames: tuple[Frame, ...]
    body: bytes
    full: bool

    def events(self) -> Iterator[ServerSentEvent]:
        """Each frame as a :class:`ServerSentEvent` (for :func:`follow`)."""
        for frame in self.frames:
            data = self.body[frame.start:frame.end].decode()
            yield ServerSentEvent(id=str(frame.cursor), event=frame.type, raw_data=data)


def read_page(read: PageReader, cursor_of: CursorOf, after: int, *,
              max_bytes: int = PAGE_BYTES, max_events: int = PAGE_SIZE) -> Page:
    """The events after ``after`` up to ``max_bytes`` of SSE frames (at least one event) and
    ``max_events``, framed as FastAPI's SSE encoder writes them: ``event:``, ``data:``,
    ``id:``. Read in steps sized by the events read so far; full unless the log ended."""
    frames: list[Frame] = []
    parts: list[bytes] = []
    size = 0
    cursor, step = after, min(FIRST_STEP, max_events)
    while True:
        events = read(cursor, step)
        for event in events:
            cursor = cursor_of(event)
            data = json.dumps(event.to_wire(), ensure_ascii=False, separators=(",", ":"))
            head = f"event: {event.type}\ndata: ".encode()
            body = data.encode()
            tail = f"\nid: {cursor}\n\n".encode()
            length = len(head) + len(body) + len(tail)
            if frames and size + length > max_bytes:
                return _page(frames, parts, full=True)
            start = size + len(head)
            frames.append(Frame(cursor, event.type, start, start + len(body)))
            parts += (head, body, tail)
            size += length
            if len(frames) == max_events:
                return _page(frames, parts, full=True)
        if len(events) < step:
            return _page(frames, parts, full=False)
        mean = size / len(frames)
        step = max(1, min(max_events - len(frames), int((max_bytes - size) / mean)))


def _page(frames: list[Frame], parts: list[bytes], *, full: bool) -> Page:
    return Page(tuple(frames), b"".join(parts), full)


class SharedPages:
    """One read and one encoding per cursor and commit, for every stream at that cursor.

    A stream asks for the page after its cursor with the notifier's ``generation`` it saw
    before its read; a page whose read began at that generation or later has every commit
    the stream was woken for, so it is shared. Commits by other processes wake nobody: a
    page is also shared only for ``window_s`` after its read began, so such a commit reaches
    a polling stream at most ``stream_poll_s`` + ``window_s`` late.
    """

    def __init__(self, notifier: CommitNotifier, *, window_s: float) -> None:
        self._notifier = notifier
        self._window_s = window_s
        self._entries: dict[tuple[str, int], tuple[int, float, asyncio.Task[Page]]] = {}

    def __len__(self) -> int:
        """Pages held for sharing now."""
        return len(self._entries)

    async def page(self, scope: str, after: int, generation: int, read: PageReader,
                   cursor_of: CursorOf) -> Page:
        """The page after ``after`` of ``scope`` (a session id, or ``*``), shared if fresh."""
        now = time.monotonic()
        entry = self._entries.get((scope, after))
        if entry is None or not self._usable(entry, generation, now):
            loop = asyncio.get_running_loop()
            task = loop.create_task(self._read(read, cursor_of, after))
            task.add_done_callback(_retrieve)
            entry = (self._notifier.generation, now, task)
            self._entries[(scope, after)] = entry
            # Forgotten when its window ends, so no page outlives the streams that read it.
            loop.call_later(self._window_s, self._forget, (scope, after), entry)
        return await asyncio.shield(entry[2])

    def _forget(self, key: tuple[str, int],
                entry: tuple[int, float, "asyncio.Task[Page]"]) -> None:
        if self._entries.get(key) is entry:
            del self._entries[key]

    def _usable(self, entry: tuple[int, float, asyncio.Task[Page]], generation: int,
                now: float) -> bool:
        began_at, began, task = entry
        failed = task.done() and (task.cancelled() or task.exception() is not None)
        return began_at >= generation and now - began <= self._window_s and not failed

    @staticmethod
    async def _read(read: PageReader, cursor_of: CursorOf, after: int) -> Page:
        return await anyio.to_thread.run_sync(lambda: read_page(read, cursor_of, after))


def _retrieve(task: "asyncio.Task[Page]") -> None:
    """Mark a failed shared read's error as seen (its readers handle it, if any remain)."""
    if not task.cancelled():
        task.exception()


PageFetcher = Callable[[int, int], Awaitable[Page]]
"""``fetch(after, generation)``: the page after the cursor, read after that generation."""


async def follow_pages(
    fetch: PageFetcher,
    cursor: int,
    *,
    notifier: CommitNotifier,
    settings: ServerSettings,
    stopping: threading.Event,
) -> AsyncGenerator[Page | None, None]:
    """Every page after ``cursor``, then live ones, until stopped; ``None``: a keep-alive."""
    with notifier.waiter() as wake:
        idle_since = time.monotonic()
        while not stopping.is_set():
            generation = notifier.generation
            wake.clear()  # before reading: a commit after the read sets it again
            try:
                page = await fetch(cursor, generation)
            except SessionLedgerError as exc:
                log_event(_log, "stream_ended", reason=exc.code, message=exc.message)
                return
            if page.frames:
                cursor = page.frames[-1].cursor
                yield page
            if page.full:
                continue
            if page.frames:
                idle_since = time.monotonic()
            elif time.monotonic() - idle_since >= settings.stream_keepalive_s:
                idle_since = time.monotonic()
                yield None
            keepalive_due = idle_since + settings.stream_keepalive_s - time.monotonic()
            await _wait(wake, max(0.0, min(settings.stream_poll_s, keepalive_due)))


async def _wait(wake: asyncio.Event, timeout: float) -> None:
    """Until ``wake`` is set or ``timeout`` has passed, by a timer that sets it: every stream
    waits after every commit, and a timer handle costs less than a cancel scope."""
    timer = asyncio.get_running_loop().call_later(timeout, wake.set)
    try:
        await wake.wait()
    finally:
        timer.cancel()


async def follow(
    read: PageReader,
    cursor_of: CursorOf,
    cursor: int,
    *,
    notifier: CommitNotifier,
    settings: ServerSettings,
    stopping: threading.Event,
) -> AsyncGenerator[ServerSentEvent, None]:
    """Every event after ``cursor``, then live ones, one :class:`ServerSentEvent` each
    (keep-alives are comments), until stopped; reads of its own, shared with no one."""

    async def fetch(after: int, _generation: int) -> Page:
        return await anyio.to_thread.run_sync(lambda: read_page(read, cursor_of, after))

    pages = follow_pages(fetch, cursor, notifier=notifier, settings=settings,
                         stopping=stopping)
    try:
        async for page in pages:
            if page is None:
                yield ServerSentEvent(comment="keep-alive")
                continue
            for event in page.events():
                yield event
    finally:
        await pages.aclose()


async def _bodies(pages: AsyncGenerator[Page | None, None], *, until_deleted: bool
                  ) -> AsyncIterator[bytes]:
    """What a stream response writes: each page in one piece, keep-alive comments."""
    try:
        async for page in pages:
            if page is None:
                yield KEEPALIVE
                continue
            yield page.body
            if until_deleted and any(f.type == DELETED_EVENT for f in page.frames):
                return  # nothing can follow a deletion
    finally:
        await pages.aclose()


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
    after: Annotated[PlainInt | None, Query(description="resume after this cursor")] = None,
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
    """The two SSE endpoints of docs/spec.md."""
    # The routes answer with an EventStreamResponse of whole pages, not through FastAPI's SSE
    # encoder: the 200 entry says what that encoder would have said of each event.
    router = api_router(tags=["streams"], responses={200: {
        "description": "Successful Response",
        "content": {"text/event-stream": {"itemSchema": SSE_ITEM_SCHEMA}},
    }})
    shared = SharedPages(notifier, window_s=settings.stream_poll_s / 10)

    def stream(scope: str, read: PageReader, cursor_of: CursorOf, cursor: int, *,
               until_deleted: bool) -> EventStreamResponse:
        async def fetch(after: int, generation: int) -> Page:
            return await shared.page(scope, after, generation, read, cursor_of)

        pages = follow_pages(fetch, cursor, notifier=notifier, settings=settings,
                             stopping=stopping)
        return EventStreamResponse(_bodies(pages, until_deleted=until_deleted),
                                   headers=SSE_HEADERS)

    def live_session(session_id: SessionIdPath) -> str:
        service.require_live(session_id)  # 404 unknown, 410 deleted
        return session_id

    @router.get(
        "/v1/sessions/{session_id}/events" + STREAM_SUFFIX, response_class=EventStreamResponse,
        responses=error_responses({
            404: "no such session (`session_not_found`)",
            410: "the session was deleted (`session_deleted`)",
            422: _BAD_CURSOR,
        }, streaming=True),
    )
    async def session_stream(
        session_id: Annotated[str, Depends(live_session)],
        cursor: Annotated[int, Depends(stream_cursor)],
    ) -> EventStreamResponse:
        """One session's events; ``id:`` is the event's ``seq``; ends after a deletion."""

        def read(after: int, limit: int) -> list[RecordedEvent]:
            return service.session_page(session_id, after=after, limit=limit)

        return stream(session_id, read, lambda e: e.seq, cursor, until_deleted=True)

    @router.get(
        "/v1/events" + STREAM_SUFFIX, response_class=EventStreamResponse,
        responses=error_responses({422: _BAD_CURSOR}, streaming=True),
    )
    async def global_stream(
        cursor: Annotated[int, Depends(stream_cursor)],
    ) -> EventStreamResponse:
        """Every session's events; ``id:`` is the event's global position."""

        def read(after: int, limit: int) -> list[RecordedEvent]:
            return service.global_page(after=after, limit=limit)

        return stream("*", read, lambda e: e.global_position, cursor, until_deleted=False)

    return router
