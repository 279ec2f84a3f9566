"""A scripted OpenAI Responses model server on 127.0.0.1, for driving a real Codex CLI.

:class:`ResponsesModel` is ``tests/anthropic_model.py``'s :class:`ScriptedModel` speaking the
Responses API: ``POST /v1/responses`` with ``stream: true`` answered as Server-Sent Events
(``response.created``, ``response.output_item.added`` / ``.done`` for each output item,
``response.completed``), from the same kind of script — turns of :class:`Text`,
:class:`ToolUse` (a ``function_call`` item: the tool's ``arguments`` as JSON text) and
:class:`Custom` (a ``custom_tool_call``: a freeform tool's whole ``input`` text, as Codex's
``apply_patch`` takes its patch) and :class:`Search` (a client-executed
``tool_search_call``: Codex offers MCP tools only after the model searched for them; a
:class:`ToolUse` named ``NAMESPACE.NAME`` then calls one, ``mcp__sessionledger.TodoWrite``).

A request is the main loop's when it offers ``tools``; the same conversation sent again (the
same ``input``) gets the same turn. ``GET /v1/models`` answers an empty list. Every request is
recorded (:attr:`requests`); :meth:`tool_outputs` gives the ``*_output`` items Codex sent back
by ``call_id``.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from anthropic_model import Block, Recorded, ScriptedModel, Text, ToolUse, _Handler, next_turn

__all__ = ["Custom", "Recorded", "ResponsesModel", "Search", "Text", "ToolUse"]


@dataclass(frozen=True, slots=True)
class Custom:
    """A ``custom_tool_call``: the freeform tool ``name`` given ``input`` as text."""

    name: str
    input: str


@dataclass(frozen=True, slots=True)
class Search:
    """A ``tool_search_call`` the client executes: the model looks for tools by ``query``."""

    query: str


class ResponsesModel(ScriptedModel):
    """The Responses API server; see the module docstring."""

    def tools_offered(self) -> list[str]:
        """The tool names (namespaced ones as ``namespace.name``) of the last main request."""
        main = self.main_requests()
        return _tool_names(main[-1].body.get("tools", [])) if main else []

    def all_tools_offered(self) -> set[str]:
        """Every tool name any main request offered (deferred tools appear once searched)."""
        found: set[str] = set()
        for request in self.main_requests():
            found.update(_tool_names(request.body.get("tools", [])))
            for item in request.body.get("input", []):
                if isinstance(item, dict) and item.get("type") == "tool_search_output":
                    found.update(_tool_names(item.get("tools", [])))
        return found

    def tool_outputs(self) -> dict[str, dict[str, Any]]:  # type: ignore[override]
        """Every ``function_call_output`` / ``custom_tool_call_output`` item sent back."""
        found: dict[str, dict[str, Any]] = {}
        for request in self.main_requests():
            for item in request.body.get("input", []):
                if isinstance(item, dict) and str(item.get("type", "")).endswith("_output") \
                        and "call_id" in item:
                    found[str(item["call_id"])] = item
        return found


def _tool_names(tools: Any) -> list[str]:
    names: list[str] = []
    for tool in tools if isinstance(tools, list) else ():
        if not isinstance(tool, dict):
            continue
        if tool.get("type") == "namespace":
            names += [f"{tool.get('name')}.{t.get('name')}" for t in tool.get("tools", [])
                      if isinstance(t, dict)]
        elif tool.get("name"):
            names.append(str(tool["name"]))
        else:
            names.append(str(tool.get("type", "")))
    return names


def _item(block: Block | Custom | Search, number: int, body: Any) -> dict[str, Any]:
    match block:
        case Text(text=text):
            return {"type": "message", "id": f"msg_{number}", "role": "assistant",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": text, "annotations": []}]}
        case Custom(name=name, input=given):
            return {"type": "custom_tool_call", "id": f"ctc_{number}",
                    "call_id": f"call_scripted{number:06d}", "name": name, "input": given,
                    "status": "completed"}
        case Search(query=query):
            return {"type": "tool_search_call", "id": f"tsc_{number}",
                    "call_id": f"call_scripted{number:06d}", "execution": "client",
                    "status": "completed", "arguments": {"query": query}}
    assert isinstance(block, ToolUse)
    namespace, _, name = block.name.rpartition(".")  # a deferred tool: NAMESPACE.NAME
    return {"type": "function_call", "id": f"fc_{number}",
            "call_id": f"call_scripted{number:06d}", "name": name,
            **({"namespace": namespace} if namespace else {}),
            "arguments": json.dumps(block.input(body) if callable(block.input)
                                    else block.input),
            "status": "completed"}


def _sse(response_id: str, model: str, items: list[dict[str, Any]]) -> bytes:
    base = {"id": response_id, "object": "response", "created_at": 0, "model": model}
    frames: list[dict[str, Any]] = [
        {"type": "response.created",
         "response": {**base, "status": "in_progress", "output": []}}]
    for index, item in enumerate(items):
        frames.append({"type": "response.output_item.added", "output_index": index,
                       "item": item})
        frames.append({"type": "response.output_item.done", "output_index": index,
                       "item": item})
    frames.append({"type": "response.completed", "response": {
        **base, "status": "completed", "output": items,
        "usage": {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0},
                  "output_tokens": 5, "output_tokens_details": {"reasoning_tokens": 0},
                  "total_tokens": 15}}})
    return b"".join(f"event: {f['type']}\ndata: {json.dumps(f)}\n\n".encode() for f in frames)


class _ResponsesHandler(_Handler):
    def do_GET(self) -> None:
        if self.path.split("?")[0] == "/v1/models":
            self._record(None, "side")
            self._json(200, {"object": "list", "data": [], "models": []})
            return
        super().do_GET()

    def do_POST(self) -> None:
        body = self._body()
        state = self.shared
        if self.path.split("?")[0] != "/v1/responses" or not isinstance(body, dict):
            self._record(body, "other")
            self._json(404, {"error": {"message": f"no such path here: {self.path}"}})
            return
        main = bool(body.get("tools"))
        with state.lock:
            if main:
                key = hashlib.sha256(json.dumps(body.get("input"), sort_keys=True).encode(
                    "utf-8", "surrogatepass")).hexdigest()
                if key not in state.answered:
                    blocks: list[Any] = list(next_turn(state))
                    state.answered[key] = (
                        [_item(b, next(state.ids), body) for b in blocks], "")
                items = state.answered[key][0]
            else:
                items = [_item(Text(state.side_text), next(state.ids), body)]
            number = next(state.ids)
        self._record(body, "main" if main else "side")
        self._send(200, _sse(f"resp_{number}", str(body.get("model", "")), items),
                   "text/event-stream; charset=utf-8")


ResponsesModel.handler = _ResponsesHandler
