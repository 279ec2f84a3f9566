"""A response's head and body leave in one write (issue 24): the transport of
:mod:`sessionledger.http.onewrite` joins them, and changes no byte and no order."""

from __future__ import annotations

import asyncio
import json
import socket
from pathlib import Path
from typing import Any

from server_support import running_server

from sessionledger.http.onewrite import HeadWithBody, OneWriteHttpToolsProtocol
from sessionledger.http.server import _http_protocol

HEAD = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\ncontent-type: application/json\r\n\r\n"


class Recorded:
    """A transport that remembers each write and whether it was closed."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.closed = False
        self.extra = {"peername": ("127.0.0.1", 1)}

    def write(self, data: bytes) -> None:
        assert not self.closed
        self.writes.append(bytes(data))

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed

    def get_write_buffer_size(self) -> int:
        return 0

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self.extra.get(name, default)


def wrapped() -> tuple[HeadWithBody, Recorded]:
    inner = Recorded()
    return HeadWithBody(inner, asyncio.get_running_loop()), inner  # type: ignore[arg-type]


def test_a_head_and_its_body_are_one_write_and_a_lone_head_leaves_at_the_steps_end() -> None:
    async def main() -> None:
        transport, inner = wrapped()
        transport.write(HEAD)
        assert inner.writes == []
        transport.write(b"{}")
        assert inner.writes == [HEAD + b"{}"]
        transport.write(b"more")  # not a head: at once
        assert inner.writes[-1] == b"more"
        transport.write(HEAD)  # a head with no body (yet): an event stream
        assert transport.get_write_buffer_size() == len(HEAD)
        await asyncio.sleep(0)
        assert inner.writes[-1] == HEAD
        transport.write(b"data: 1\n\n")
        assert inner.writes[-1] == b"data: 1\n\n"
        assert transport.get_extra_info("peername") == ("127.0.0.1", 1)  # the transport's

    asyncio.run(main())


def test_closing_writes_a_held_head_first() -> None:
    async def main() -> None:
        transport, inner = wrapped()
        transport.write(HEAD)
        transport.close()
        assert inner.writes == [HEAD] and inner.closed
        await asyncio.sleep(0)  # the end of the step finds nothing to write
        assert inner.writes == [HEAD]

    asyncio.run(main())


def test_serve_uses_the_one_write_protocol() -> None:
    assert _http_protocol() is OneWriteHttpToolsProtocol


def _read_response(sock: socket.socket) -> tuple[bytes, bytes]:
    data = b""
    while b"\r\n\r\n" not in data:
        data += sock.recv(65536)
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                  if line.lower().startswith(b"content-length:"))
    while len(body) < length:
        body += sock.recv(65536)
    assert len(body) == length
    return head, body


def test_a_keep_alive_connection_gets_whole_answers_one_after_another(tmp_path: Path) -> None:
    """A real server: answers with a body, an error, a HEAD request (no body) and a command,
    each complete and in order on one connection."""
    with running_server(tmp_path) as server:
        port = int(server.base_url.rsplit(":", 1)[1])
        host = f"127.0.0.1:{port}"
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            body = b"{}"
            sock.sendall(f"POST /v1/sessions HTTP/1.1\r\nHost: {host}\r\n"
                         "Content-Type: application/json\r\nContent-Length: 2\r\n\r\n".encode()
                         + body)
            head, answer = _read_response(sock)
            assert head.startswith(b"HTTP/1.1 201")
            session = json.loads(answer)["sessionId"]
            sock.sendall(f"GET /v1/sessions/nope HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
            head, answer = _read_response(sock)
            assert head.startswith(b"HTTP/1.1 404")
            assert json.loads(answer)["error"]["code"] == "session_not_found"
            sock.sendall(f"HEAD /healthz HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
            data = b""
            while b"\r\n\r\n" not in data:
                data += sock.recv(65536)
            assert data.startswith(b"HTTP/1.1 200") and data.endswith(b"\r\n\r\n")
            todo = json.dumps({"tool": "TodoWrite", "input": {"todos": [
                {"content": "one", "status": "pending", "priority": "high"}]}}).encode()
            sock.sendall(f"POST /v1/sessions/{session}/tool-calls HTTP/1.1\r\nHost: {host}\r\n"
                         f"Content-Type: application/json\r\nContent-Length: {len(todo)}\r\n\r\n"
                         .encode() + todo)
            head, answer = _read_response(sock)
            assert head.startswith(b"HTTP/1.1 200")
            assert json.loads(answer)["status"] == "completed"
