"""A scripted Gemini API model server on 127.0.0.1, for driving a real Gemini CLI.

:class:`GeminiModel` is ``tests/anthropic_model.py``'s :class:`ScriptedModel` speaking the
Gemini API: ``POST /v1beta/models/{model}:streamGenerateContent?alt=sse`` answered as
Server-Sent Events (one ``data:`` chunk holding the turn's parts and ``finishReason: STOP``)
and ``:generateContent`` as one JSON response, ``:countTokens`` with an estimate. A turn's
:class:`Text` is a ``text`` part and :class:`ToolUse` a ``functionCall`` part; a turn's
:class:`Usage` is the prompt size its answer reports (Gemini compresses its history at the next
model call when the last prompt filled half the model's context).

A request is the main loop's when it offers ``tools``; the same conversation sent again (the
same ``contents``) gets the same turn. Other requests (the CLI's side questions: is the next
speaker the user, a loop check, a summary) get the side text, or a JSON object when the request
asks for JSON (``generationConfig.responseMimeType``). Every request is recorded;
:meth:`function_responses` gives the ``functionResponse`` parts the CLI sent back, in order.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from anthropic_model import Recorded, ScriptedModel, Text, ToolUse, _Handler, next_turn

__all__ = ["GeminiModel", "Recorded", "Text", "ToolUse", "Usage"]

PROMPT_TOKENS = 10
"""The prompt size an answer reports unless its turn says otherwise."""


@dataclass(frozen=True, slots=True)
class Usage:
    """A turn's reported ``usageMetadata.promptTokenCount``."""

    prompt_tokens: int

SIDE_JSON = {"next_speaker": "user", "reasoning": "The scripted turn is over."}
"""The answer to a side request that wants JSON: Gemini CLI asks who speaks next."""


class GeminiModel(ScriptedModel):
    """The Gemini API server; see the module docstring."""

    def tools_offered(self) -> list[str]:
        main = self.main_requests()
        if not main:
            return []
        names: list[str] = []
        for tool in main[-1].body.get("tools", []):
            for declared in tool.get("functionDeclarations", []) if isinstance(tool, dict) else ():
                names.append(str(declared.get("name", "")))
        return names

    def function_responses(self) -> list[dict[str, Any]]:
        """Every ``functionResponse`` part of the last main request's conversation."""
        main = self.main_requests()
        found: list[dict[str, Any]] = []
        for content in main[-1].body.get("contents", []) if main else ():
            for part in content.get("parts", []) if isinstance(content, dict) else ():
                if isinstance(part, dict) and "functionResponse" in part:
                    found.append(part["functionResponse"])
        return found


def _response(parts: list[dict[str, Any]], model: str,
              prompt_tokens: int = PROMPT_TOKENS) -> dict[str, Any]:
    return {
        "candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP",
                        "index": 0}],
        "usageMetadata": {"promptTokenCount": prompt_tokens, "candidatesTokenCount": 5,
                          "totalTokenCount": prompt_tokens + 5},
        "modelVersion": model,
    }


class _GeminiHandler(_Handler):
    def do_POST(self) -> None:
        body = self._body()
        state = self.shared
        path = self.path.split("?")[0]
        model, _, method = path.rpartition("/")[2].partition(":")
        if not path.startswith("/v1beta/models/") or not isinstance(body, dict):
            self._record(body, "other")
            self._json(404, {"error": {"code": 404, "message": f"no such path: {self.path}"}})
            return
        if method == "countTokens":
            self._record(body, "count_tokens")
            self._json(200, {"totalTokens": max(1, len(json.dumps(body)) // 4)})
            return
        main = bool(body.get("tools"))
        prompt_tokens = PROMPT_TOKENS
        if main:
            key = hashlib.sha256(json.dumps(body.get("contents"), sort_keys=True).encode(
                "utf-8", "surrogatepass")).hexdigest()
            with state.lock:
                if key not in state.answered:
                    parts: list[dict[str, Any]] = []
                    for block in next_turn(state):
                        if isinstance(block, Usage):
                            prompt_tokens = block.prompt_tokens
                        elif isinstance(block, ToolUse):
                            given = block.input(body) if callable(block.input) else block.input
                            parts.append({"functionCall": {"name": block.name,
                                                           "args": dict(given)}})
                        else:
                            parts.append({"text": block.text})
                    state.answered[key] = (parts, str(prompt_tokens))
                parts, reported = state.answered[key]
                prompt_tokens = int(reported)
        else:
            config = body.get("generationConfig") or {}
            wants_json = config.get("responseMimeType") == "application/json"
            parts = [{"text": json.dumps(SIDE_JSON) if wants_json else state.side_text}]
        self._record(body, "main" if main else "side")
        answer = _response(parts, model, prompt_tokens)
        if method == "streamGenerateContent":
            self._send(200, f"data: {json.dumps(answer)}\r\n\r\n".encode(),
                       "text/event-stream; charset=utf-8")
        else:
            self._json(200, answer)


GeminiModel.handler = _GeminiHandler
