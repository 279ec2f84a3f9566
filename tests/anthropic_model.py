"""A scripted Anthropic Messages model server on 127.0.0.1, for driving a real Claude Code.

:class:`ScriptedModel` listens on a free loopback port (``ThreadingHTTPServer`` in a thread;
the standard library only) and answers ``POST /v1/messages`` as the Anthropic Messages API
does — streamed (``stream: true``: Server-Sent Events ``message_start``,
``content_block_start`` / ``content_block_delta`` with ``text_delta`` or ``input_json_delta`` /
``content_block_stop``, ``message_delta``, ``message_stop``) or as one JSON message — from a
**script**: a list of turns, each a list of content blocks (:class:`Text`, :class:`ToolUse`).

Only the agent's main loop consumes the script. A request is the main loop's when its body
offers ``tools``; each such request gets the next turn (a ``tool_use`` turn ends with
``stop_reason: "tool_use"``), and once the script is spent the final text with
``end_turn``. The same conversation sent again (a retry: the same ``messages``) gets the same
turn again rather than the next. Everything else the host asks on the side — a session title,
a quota check, a small model's summary, possibly in parallel with the main loop — is answered
with a short text and consumes nothing. ``POST /v1/messages/count_tokens`` answers an
estimate, ``HEAD``/``GET /`` answers 200, and any other path 404 with an Anthropic error body;
those are kept in :attr:`ScriptedModel.unknown`.

Every request is recorded (:attr:`ScriptedModel.requests`: method, path, headers, parsed body),
so a test can inspect the tools offered and the ``tool_result`` blocks sent back
(:meth:`ScriptedModel.tool_results`). Use it as a context manager: ``with ScriptedModel(script)
as model: … model.url …``; leaving it stops the server and joins its thread.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
import socket
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

__all__ = ["Block", "Recorded", "ScriptedModel", "Text", "ToolUse", "next_turn"]

DEFAULT_MODEL = "claude-sonnet-4-5"
SIDE_TEXT = "Scripted session"
FINAL_TEXT = "Done."
DEFERRED_TOOLS = "The following deferred tools are now available via ToolSearch."
TOOL_NAME = re.compile(r"[A-Za-z_][\w-]*")


@dataclass(frozen=True, slots=True)
class Text:
    """A text block of an assistant turn."""

    text: str


@dataclass(frozen=True, slots=True)
class ToolUse:
    """A ``tool_use`` block: the model asks for ``name`` with ``input`` — or with what
    ``input(body)`` gives for the request's parsed body (an input that depends on what the
    host sent, such as the plan file path Claude Code names in its system prompt)."""

    name: str
    input: dict[str, Any] | Callable[[Any], dict[str, Any]]


Block = Text | ToolUse


@dataclass(frozen=True, slots=True)
class Recorded:
    """One request as the server received it."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any
    """The parsed JSON body, the raw text when it is not JSON, None without a body."""
    kind: str
    """``main`` (consumed or replayed a turn), ``side``, ``count_tokens`` or ``other``."""


@dataclass(slots=True)
class _State:
    script: list[list[Block]]
    final_text: str
    side_text: str
    requests: list[Recorded] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)
    next_turn: int = 0
    answered: dict[str, tuple[list[dict[str, Any]], str]] = field(default_factory=dict)
    ids: itertools.count[int] = field(default_factory=itertools.count)
    lock: threading.Lock = field(default_factory=threading.Lock)


class ScriptedModel:
    """The server; see the module docstring. Another API's server (``tests/openai_model.py``,
    ``tests/gemini_model.py``) is this class with its own :attr:`handler` answering ``POST``."""

    handler: type[BaseHTTPRequestHandler]  # set below: _Handler, the Messages API

    def __init__(self, script: Sequence[Sequence[Block]], *, final_text: str = FINAL_TEXT,
                 side_text: str = SIDE_TEXT) -> None:
        self._state = _State([list(turn) for turn in script], final_text, side_text)
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # -- life cycle -------------------------------------------------------------------------

    def start(self) -> ScriptedModel:
        state = self._state

        class Handler(self.handler):  # type: ignore[name-defined,misc]
            shared = state

        server = _Server(("127.0.0.1", 0), Handler)
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, name="scripted-model",
                                        kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        server, thread = self._server, self._thread
        self._server = self._thread = None
        if server is not None:
            server.shutdown()
            server.close_connections()
            server.server_close()  # joins the connections' threads
        if thread is not None:
            thread.join(timeout=10)

    def __enter__(self) -> ScriptedModel:
        return self.start()

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.stop()

    # -- what it saw ------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT``, the host's ``ANTHROPIC_BASE_URL``."""
        assert self._server is not None, "the model server is not running"
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    @property
    def requests(self) -> list[Recorded]:
        with self._state.lock:
            return list(self._state.requests)

    @property
    def unknown(self) -> list[str]:
        """``METHOD path`` of every request to a path this server does not know."""
        with self._state.lock:
            return list(self._state.unknown)

    @property
    def turns_used(self) -> int:
        """How many turns of the script the main loop has consumed."""
        with self._state.lock:
            return self._state.next_turn

    def main_requests(self) -> list[Recorded]:
        return [r for r in self.requests if r.kind == "main"]

    def side_requests(self) -> list[Recorded]:
        return [r for r in self.requests if r.kind == "side"]

    def tools_offered(self) -> list[str]:
        """The tool names of the last main-loop request."""
        main = self.main_requests()
        return [tool.get("name", "") for tool in main[-1].body.get("tools", [])] if main else []

    def tools_deferred(self) -> list[str]:
        """The tools the last main-loop request names as loadable through ``ToolSearch``
        (Claude Code 2.1.337 defers most of its tools: their names come in a message, one a
        line, after :data:`DEFERRED_TOOLS`); none for a version that defers nothing."""
        main = self.main_requests()
        found: list[str] = []
        for message in main[-1].body.get("messages", []) if main else []:
            content = message.get("content") if isinstance(message, dict) else None
            blocks = [content] if isinstance(content, str) else [
                b.get("text", "") for b in content or [] if isinstance(b, dict)]
            for text in blocks:
                _, marker, rest = str(text).partition(DEFERRED_TOOLS)
                if marker:  # a name a line, up to the first line that is none
                    for line in rest.splitlines()[1:]:
                        if not TOOL_NAME.fullmatch(line.strip()):
                            break
                        found.append(line.strip())
        return found

    def tool_results(self) -> dict[str, dict[str, Any]]:
        """Every ``tool_result`` block the main loop sent back, by ``tool_use_id``."""
        found: dict[str, dict[str, Any]] = {}
        for request in self.main_requests():
            for message in request.body.get("messages", []):
                content = message.get("content") if isinstance(message, dict) else None
                if message.get("role") != "user" or not isinstance(content, list):
                    continue
                for block in content:
                    if isinstance(block, dict) and block.get("type") == "tool_result":
                        found[str(block.get("tool_use_id"))] = block
        return found


# --------------------------------------------------------------------------------------------
# The answers.


def _is_main(body: Any) -> bool:
    return isinstance(body, dict) and bool(body.get("tools"))


def _conversation_key(body: dict[str, Any]) -> str:
    text = json.dumps(body.get("messages"), sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _estimate_tokens(body: Any) -> int:
    return max(1, len(json.dumps(body, ensure_ascii=False)) // 4)


def next_turn(state: _State) -> list[Block]:
    """The script's next turn, or the final text once it is spent (under the lock)."""
    if state.next_turn < len(state.script):
        state.next_turn += 1
        return state.script[state.next_turn - 1]
    return [Text(state.final_text)]


def _main_turn(state: _State, body: dict[str, Any]) -> tuple[list[dict[str, Any]], str]:
    """The content blocks and stop reason for a main-loop request (under the lock)."""
    key = _conversation_key(body)
    if key in state.answered:
        return state.answered[key]
    turn = next_turn(state)
    blocks: list[dict[str, Any]] = []
    for block in turn:
        if isinstance(block, ToolUse):
            use_id = f"toolu_scripted{next(state.ids):010d}"
            given = block.input(body) if callable(block.input) else dict(block.input)
            blocks.append({"type": "tool_use", "id": use_id, "name": block.name,
                           "input": given})
        else:
            blocks.append({"type": "text", "text": block.text})
    stop = "tool_use" if any(b["type"] == "tool_use" for b in blocks) else "end_turn"
    state.answered[key] = (blocks, stop)
    return blocks, stop


def _message(state: _State, body: dict[str, Any], blocks: list[dict[str, Any]],
             stop: str) -> dict[str, Any]:
    with state.lock:
        number = next(state.ids)
    return {
        "id": f"msg_scripted{number:010d}", "type": "message", "role": "assistant",
        "model": str(body.get("model") or DEFAULT_MODEL), "content": blocks,
        "stop_reason": stop, "stop_sequence": None,
        "usage": {"input_tokens": _estimate_tokens(body.get("messages")),
                  "output_tokens": max(1, _estimate_tokens(blocks)),
                  "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0},
    }


def _sse(message: dict[str, Any]) -> bytes:
    """``message`` as the stream of events the API sends for it."""
    frames: list[tuple[str, dict[str, Any]]] = []
    start = {**message, "content": [], "stop_reason": None,
             "usage": {**message["usage"], "output_tokens": 1}}
    frames.append(("message_start", {"type": "message_start", "message": start}))
    for index, block in enumerate(message["content"]):
        if block["type"] == "tool_use":
            opening = {**block, "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        else:
            opening = {"type": "text", "text": ""}
            delta = {"type": "text_delta", "text": block["text"]}
        frames.append(("content_block_start", {"type": "content_block_start", "index": index,
                                               "content_block": opening}))
        frames.append(("content_block_delta", {"type": "content_block_delta", "index": index,
                                               "delta": delta}))
        frames.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    frames.append(("message_delta", {
        "type": "message_delta",
        "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
        "usage": {"output_tokens": message["usage"]["output_tokens"]}}))
    frames.append(("message_stop", {"type": "message_stop"}))
    return b"".join(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()
                    for name, data in frames)


class _Server(ThreadingHTTPServer):
    """Keeps its open connections, so that stopping it ends them and joins their threads
    (a client holding a kept-alive connection would otherwise keep one alive)."""

    daemon_threads = False
    block_on_close = True

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler]) -> None:
        super().__init__(address, handler)
        self._open: set[socket.socket] = set()
        self._open_lock = threading.Lock()

    def get_request(self) -> tuple[socket.socket, Any]:
        connection, address = super().get_request()
        with self._open_lock:
            self._open.add(connection)
        return connection, address

    def shutdown_request(self, request: Any) -> None:
        with self._open_lock:
            self._open.discard(request)
        super().shutdown_request(request)

    def close_connections(self) -> None:
        with self._open_lock:
            connections = list(self._open)
        for connection in connections:
            try:
                connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # kept-alive connections, as the API's
    shared: _State

    def log_message(self, format: str, *args: Any) -> None:
        pass  # quiet: every request is in ``requests``

    def _body(self) -> Any:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        if not raw:
            return None
        text = raw.decode("utf-8", "replace")
        try:
            return json.loads(text)
        except ValueError:
            return text

    def _record(self, body: Any, kind: str) -> None:
        with self.shared.lock:
            self.shared.requests.append(Recorded(self.command, self.path, dict(self.headers),
                                                 body, kind))
            if kind == "other":
                self.shared.unknown.append(f"{self.command} {self.path}")

    def _send(self, status: int, payload: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(payload)))
        self.send_header("request-id", "req_scripted")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(payload)

    def _json(self, status: int, value: Any) -> None:
        self._send(status, json.dumps(value).encode(), "application/json")

    def _not_found(self) -> None:
        self._json(404, {"type": "error", "error": {
            "type": "not_found_error", "message": f"no such path here: {self.path}"}})

    def do_HEAD(self) -> None:
        self._record(None, "other" if self.path.split("?")[0] != "/" else "side")
        self._send(200, b"", "text/plain")

    def do_GET(self) -> None:
        if self.path.split("?")[0] == "/":
            self._record(None, "side")
            self._send(200, b"ok", "text/plain")
            return
        self._record(None, "other")
        self._not_found()

    def do_POST(self) -> None:
        body = self._body()
        path = self.path.split("?")[0]
        state = self.shared
        if path == "/v1/messages/count_tokens":
            self._record(body, "count_tokens")
            self._json(200, {"input_tokens": _estimate_tokens(body)})
            return
        if path != "/v1/messages" or not isinstance(body, dict):
            self._record(body, "other")
            self._not_found()
            return
        if _is_main(body):
            with state.lock:
                blocks, stop = _main_turn(state, body)
            self._record(body, "main")
        else:
            blocks, stop = [{"type": "text", "text": state.side_text}], "end_turn"
            self._record(body, "side")
        message = _message(state, body, blocks, stop)
        if body.get("stream"):
            self._send(200, _sse(message), "text/event-stream; charset=utf-8")
        else:
            self._json(200, message)


ScriptedModel.handler = _Handler
