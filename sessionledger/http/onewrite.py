"""A response's head and body leave in one write (issue 24).

uvicorn's httptools protocol writes a response's head when the app sends
``http.response.start`` and its body when it sends ``http.response.body``: two ``send`` calls
on the socket, and on loopback two wake-ups of the client, the first for a head it cannot use
without the body. :class:`OneWriteHttpToolsProtocol` hands the protocol a transport that holds
a head back until the next write (the body, sent in the same step of the loop by every
response of this app) and writes both at once; a head with nothing after it (an event stream
waiting for its first event) leaves at the end of the loop's step. The bytes and their order
are unchanged; only the number of writes is.
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

__all__ = ["HeadWithBody", "OneWriteHttpToolsProtocol"]

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


class OneWriteHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol over a :class:`HeadWithBody` transport."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(
            HeadWithBody(transport, asyncio.get_running_loop())  # type: ignore[arg-type]
        )
