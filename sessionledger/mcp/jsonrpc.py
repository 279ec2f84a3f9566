"""What a JSON-RPC message must be before the MCP SDK reads it, on both transports (issue 41).

The SDK answers nothing at all to much of what JSON-RPC 2.0 says must be answered: a stdio line
that is not JSON, not UTF-8 or nested 100,000 deep, an empty array, a batch (which MCP no
longer takes), a request whose ``id`` is ``null``, ``1.5``, ``true``, an object or an array
(over HTTP: 202 and nothing), an ``id`` holding a lone surrogate; and of two requests in flight
with one ``id`` it answers one, leaving the other waiting for good. :func:`screen` reads one
message as the client sent it and says what the server answers in the SDK's place — a parse
error (-32700) or an invalid request (-32600) naming what is wrong — or lets it through; an
:class:`InFlight` per connection (stdio) or MCP session (HTTP) refuses an ``id`` that a request
still in progress holds. Nothing refused here reaches a handler, so nothing is appended.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = [
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "MAX_CAPABILITIES_BYTES",
    "PARSE_ERROR",
    "InFlight",
    "Screened",
    "error_response",
    "screen",
]

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
INVALID_PARAMS = -32602
MAX_CAPABILITIES_BYTES = 64 * 1024
"""What a client may declare in ``initialize`` (its ``capabilities`` and ``clientInfo``, as
JSON): the session keeps it for its life, so 0.9 MB of it cost ~6 MB a session."""


def error_response(code: int, message: str, request_id: Any = None) -> dict[str, Any]:
    """A JSON-RPC error response (``id`` null when the request's could not be read)."""
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}


class Screened:
    """One message read: ``message`` to pass on (``None`` when answered here), ``error`` the
    answer to send instead."""

    __slots__ = ("error", "message")

    def __init__(self, message: dict[str, Any] | None, error: dict[str, Any] | None) -> None:
        self.message = message
        self.error = error

    @property
    def request_id(self) -> str | int | None:
        """The id of a request (``None`` for a notification, a response, or one refused)."""
        message = self.message
        if message is None or not isinstance(message.get("method"), str):
            return None
        found = message.get("id")
        return found if valid_id(found) else None


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def screen(raw: bytes | str) -> Screened:
    """Read one JSON-RPC message; what to answer in the SDK's place, if anything."""
    if isinstance(raw, bytes):
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            return Screened(None, error_response(
                PARSE_ERROR, f"Parse error: not UTF-8 (byte 0x{raw[exc.start]:02x} at "
                             f"offset {exc.start})"))
    else:
        text = raw
    try:
        message = json.loads(text, parse_constant=_no_constant)
    except RecursionError:
        return Screened(None, error_response(PARSE_ERROR, "Parse error: nested too deeply"))
    except ValueError as exc:
        return Screened(None, error_response(PARSE_ERROR, f"Parse error: {exc}"))
    if isinstance(message, list):
        what = "an empty batch" if not message else (
            "a batch: send one message at a time (MCP takes no JSON-RPC batches)")
        return Screened(None, error_response(INVALID_REQUEST, f"Invalid Request: {what}"))
    if not isinstance(message, dict):
        return Screened(None, error_response(
            INVALID_REQUEST, "Invalid Request: a message is a JSON object"))
    has_id = "id" in message
    request_id = message.get("id")
    answer_id = request_id if valid_id(request_id) else None
    if message.get("jsonrpc") != "2.0":
        return Screened(None, error_response(
            INVALID_REQUEST, 'Invalid Request: "jsonrpc" must be "2.0"', answer_id))
    if "method" in message:
        if not isinstance(message["method"], str) or not _unicode(message["method"]):
            return Screened(None, error_response(
                INVALID_REQUEST, 'Invalid Request: "method" must be a string', answer_id))
        if has_id and answer_id is None:
            return Screened(None, error_response(
                INVALID_REQUEST, 'Invalid Request: "id" must be a string or an integer '
                                 f"(not {_kind(request_id)})"))
        if message["method"] == "initialize":
            declared = _declared_bytes(message.get("params"))
            if declared > MAX_CAPABILITIES_BYTES:
                return Screened(None, error_response(
                    INVALID_PARAMS, f"Invalid params: capabilities and clientInfo take at "
                                    f"most {MAX_CAPABILITIES_BYTES:,} bytes of JSON, not "
                                    f"{declared:,}", answer_id))
        return Screened(message, None)
    if "result" in message or "error" in message:
        return Screened(message, None)  # the client's answer to a request of the server's
    return Screened(None, error_response(
        INVALID_REQUEST, 'Invalid Request: neither "method" nor "result" nor "error"',
        answer_id))


def _declared_bytes(params: Any) -> int:
    """The JSON size of what an ``initialize`` declares that its session keeps."""
    if not isinstance(params, dict):
        return 0
    kept = {k: params.get(k) for k in ("capabilities", "clientInfo")}
    return len(json.dumps(kept, ensure_ascii=False).encode("utf-8", "surrogatepass"))


def valid_id(value: Any) -> bool:
    """A request id MCP allows: a string (of Unicode) or an integer, never null."""
    if isinstance(value, str):
        return _unicode(value)
    return isinstance(value, int) and not isinstance(value, bool)


def _unicode(text: str) -> bool:
    """No lone surrogate (what a ``\\ud800`` escape gives): the text is Unicode."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, str):
        return "a string with a lone surrogate"
    return {bool: "a boolean", float: "a number with a fraction", dict: "an object",
            list: "an array"}.get(type(value), type(value).__name__)


class InFlight:
    """The request ids in progress on one connection or MCP session."""

    __slots__ = ("_ids",)

    def __init__(self) -> None:
        self._ids: set[tuple[type, str | int]] = set()

    @staticmethod
    def _key(request_id: str | int) -> tuple[type, str | int]:
        return (type(request_id), request_id)  # 1 and "1" are two ids

    def begin(self, screened: Screened) -> Screened:
        """``screened``, or the refusal of a request whose id one in progress holds."""
        request_id = screened.request_id
        if request_id is None:
            return screened
        key = self._key(request_id)
        if key in self._ids:
            return Screened(None, error_response(
                INVALID_REQUEST, f"Invalid Request: id {json.dumps(request_id)} is held by a "
                                 "request still in progress", request_id))
        self._ids.add(key)
        return screened

    @property
    def empty(self) -> bool:
        return not self._ids

    def end(self, request_id: Any) -> None:
        """The request ``request_id`` was answered (or cancelled)."""
        if valid_id(request_id):
            self._ids.discard(self._key(request_id))

    def ended_by(self, message: Any) -> None:
        """Note what ``message`` ends: a response sent ends its request; the client's
        ``notifications/cancelled`` ends the one it names (no answer follows one)."""
        if not isinstance(message, dict):
            return
        if "method" not in message and ("result" in message or "error" in message):
            self.end(message.get("id"))
        elif message.get("method") == "notifications/cancelled":
            params = message.get("params")
            if isinstance(params, dict):
                self.end(params.get("requestId"))
