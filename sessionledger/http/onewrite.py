"""A response's head and body leave in one write (issue 24).

uvicorn's httptools protocol writes a response's head when the app sends
``http.response.start`` and its body when it sends ``http.response.body``: two ``send`` calls
on the socket, and on loopback two wake-ups of the client, the first for a head it cannot use
without the body. :class:`OneWriteHttpToolsProtocol` hands the protocol a transport that holds
a head back until the next write (the body, sent in the same step of the loop by every
response of this app) and writes both at once; a head with nothing after it (an event stream
waiting for its first event) leaves at the end of the loop's step. The bytes and their order
are unchanged; only the number of writes is.

It also keeps connections that do not send a request from holding the server's descriptors
(issue 41): a connection gets :data:`HEADER_TIMEOUT_S` seconds from its first byte of a request
to the end of that request's headers, and a new connection the keep-alive time (uvicorn's, 5 s)
to send its first byte, or it is closed. And when the open connections reach
:func:`connection_limit` (the descriptor limit less a reserve for the store and the log), a new
one closes the oldest connection that has no request in progress — one that is idle, or has
sent part of its headers — so half-open sockets cannot lock other clients out until they time
out. Shedding is logged (``connections_shed``) at most once every :data:`SHED_LOG_EVERY_S`.
"""

from __future__ import annotations

import asyncio
import logging
import resource
import time
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from ..logs import log_event, logger

__all__ = [
    "HEADER_TIMEOUT_S", "RESERVED_DESCRIPTORS", "HeadWithBody", "OneWriteHttpToolsProtocol",
    "connection_limit",
]

HEADER_TIMEOUT_S = 10.0
"""From a request's first byte to the end of its headers, at most (slow or half-sent heads)."""
RESERVED_DESCRIPTORS = 64
"""Descriptors kept from connections: the store's files and connections, the log, the
listening sockets, a stream's pipe."""
SHED_LOG_EVERY_S = 10.0
_log = logger.getChild("http")

_HEAD_START = b"HTTP/1.1 "
_HEAD_END = b"\r\n\r\n"


class HeadWithBody:
    """A transport that holds back a written response head until the next write (joined
    with it) or the end of the loop's step; everything else is the wrapped transport's."""

    __slots__ = ("_head", "_loop", "_transport")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._head: bytes | None = None

    def write(self, data: bytes | bytearray | memoryview) -> None:
        head = self._head
        if head is not None:
            self._head = None
            self._transport.write(head + bytes(data))
            return
        if (
            type(data) is bytes and data.startswith(_HEAD_START) and data.endswith(_HEAD_END)
            and not self._transport.is_closing()
        ):
            self._head = data
            self._loop.call_soon(self.flush)
            return
        self._transport.write(data)

    def writelines(self, list_of_data: Any) -> None:
        self.write(b"".join(list_of_data))

    def flush(self) -> None:
        """Write a head still held back (the end of the loop's step, or before closing)."""
        head = self._head
        if head is not None:
            self._head = None
            self._transport.write(head)

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def write_eof(self) -> None:
        self.flush()
        self._transport.write_eof()

    def get_write_buffer_size(self) -> int:
        return self._transport.get_write_buffer_size() + len(self._head or b"")

    def __getattr__(self, name: str) -> Any:  # is_closing, get_extra_info, pause_reading, ...
        return getattr(self._transport, name)


def connection_limit() -> int:
    """How many connections may be open before a new one closes an idle one: the soft
    descriptor limit less :data:`RESERVED_DESCRIPTORS` (at least 16)."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        soft = 1 << 20
    return max(16, int(soft) - RESERVED_DESCRIPTORS)


class _Shedding:
    """How many idle connections were closed to make room, logged now and then."""

    shed = 0
    logged_at = -SHED_LOG_EVERY_S

    @classmethod
    def one(cls, open_connections: int, limit: int) -> None:
        cls.shed += 1
        now = time.monotonic()
        if now - cls.logged_at >= SHED_LOG_EVERY_S:
            cls.logged_at = now
            log_event(_log, "connections_shed", level=logging.WARNING, shed=cls.shed,
                      open=open_connections, limit=limit)


class OneWriteHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol over a :class:`HeadWithBody` transport, which closes
    connections that send no complete request head in time and sheds idle ones when the
    connections reach :func:`connection_limit` (the module's docstring)."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self.opened_at = time.monotonic()
        self.header_timer: asyncio.TimerHandle | None = None
        super().connection_made(
            HeadWithBody(transport, asyncio.get_running_loop())  # type: ignore[arg-type]
        )
        # the first byte within the keep-alive time, as between two requests
        self.timeout_keep_alive_task = self.loop.call_later(
            self.timeout_keep_alive, self.timeout_keep_alive_handler)
        if len(self.connections) > RESERVED_DESCRIPTORS:  # the limit read as it is now
            limit = connection_limit()
            if len(self.connections) > limit:
                self._shed_one(limit)

    def _idle(self) -> bool:
        """No request is being answered here: none yet, one whose head is still arriving,
        or the last one answered."""
        cycle = self.cycle
        return cycle is None or cycle.response_complete or self.header_timer is not None

    def _shed_one(self, limit: int) -> None:
        candidates = [c for c in self.connections if c is not self
                      and isinstance(c, OneWriteHttpToolsProtocol) and c._idle()
                      and not c.transport.is_closing()]
        if not candidates:
            return
        oldest = min(candidates, key=lambda c: c.opened_at)
        oldest.transport.close()
        _Shedding.one(len(self.connections), limit)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._cancel_header_timer()
        self.header_timer = self.loop.call_later(HEADER_TIMEOUT_S, self._header_timeout)

    def on_headers_complete(self) -> None:
        self._cancel_header_timer()
        super().on_headers_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_header_timer()
        super().connection_lost(exc)

    def _cancel_header_timer(self) -> None:
        if self.header_timer is not None:
            self.header_timer.cancel()
            self.header_timer = None

    def _header_timeout(self) -> None:
        self.header_timer = None
        if not self.transport.is_closing():
            self.transport.close()
