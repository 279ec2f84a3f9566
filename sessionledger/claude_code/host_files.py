"""Codex CLI's rollouts and Gemini CLI's chat recordings read into the observations a
transcript gives (:mod:`.transcripts`), so ``sessionledger import codex|gemini`` records them as
their hooks would have (issue 40).

Each observation is what that host's hook would have said — Codex's ``exec_command`` as
``Bash`` with ``{"command": …}`` and ``apply_patch`` with its patch in ``command``, each call
by its ``call_id``; Gemini's calls by tool and input in order, as its hooks (which give no id)
name them — so a file imported into the session its hooks recorded adds only what they never
saw (the assistant's text), and importing again adds nothing.

- **Codex** (``$CODEX_HOME/sessions/YYYY/MM/DD/rollout-*.jsonl``): lines ``{timestamp, type,
  payload}``. ``session_meta`` names the session and its ``cwd``; an ``event_msg`` completing
  a ``UserMessage`` is a prompt; ``response_item`` lines are the conversation — an assistant
  ``message`` (its text), a ``function_call`` or ``custom_tool_call`` and its ``*_output``; an
  ``event_msg`` ``context_compacted`` is a compaction. A call the ledger refused shows the model
  ``… blocked by PreToolUse hook: sessionledger: …``: recorded as refused here.
- **Gemini** (``~/.gemini/tmp/<project>/chats/session-*.jsonl``): a header line
  ``{sessionId, projectHash, startTime, …}``, then message records and ``{"$set": …}`` updates;
  the project's directory is the one ``~/.gemini/projects.json`` names ``<project>``.
  A ``user`` record with text is a prompt (the first, ``<session_context>``, is the CLI's own); a
  ``gemini`` record is the model's text and, when it is written again with ``toolCalls``, each
  call with its result (``status``: ``success`` or ``error``).

A line that cannot be read (not UTF-8, not JSON, not an object, missing what its kind needs) is
reported skipped and yields nothing.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eventlog import format_instant, parse_instant

from .observations import (
    REFUSED_HERE,
    AssistantText,
    Compacted,
    Observation,
    Origin,
    Prompt,
    Seen,
    ToolResult,
    ToolUse,
    content_key,
    gemini_call_id,
)
from .recorder import ledger_tool
from .transcripts import MalformedLine, Skipped, Transcript, TranscriptFile, json_object_line

__all__ = ["BLOCKED", "read_codex_rollout", "read_gemini_chat"]

BLOCKED = ("Command blocked by PreToolUse hook: ", "Tool execution blocked: ")
"""How Codex and Gemini show the model a call a hook refused, before the hook's reason."""


def _instant(value: Any) -> str:
    if not isinstance(value, str):
        raise MalformedLine("no \"timestamp\"")
    try:
        return format_instant(parse_instant(value))
    except (ValueError, OverflowError):
        raise MalformedLine(f"\"timestamp\" {value!r} is not an ISO 8601 instant") from None


def _refused(content: str) -> tuple[str, bool]:
    """A call's result as the hooks record it: a refusal of this ledger's, shown by the host
    behind its own words, is the ledger's reason and a failure."""
    for prefix in BLOCKED:
        at = content.find(prefix + REFUSED_HERE)
        if at >= 0:
            return content[at + len(prefix):], True
    return content, False


@dataclass(slots=True)
class _Read:
    file: TranscriptFile
    transcript: Transcript
    session: str | None = None
    cwd: str | None = None
    calls: dict[str, tuple[str, dict[str, Any]]] = field(default_factory=dict)
    contents: dict[str, int] = field(default_factory=dict)
    """Gemini: calls so far by tool and input (:func:`.observations.gemini_call_id`)."""

    def origin(self, at: str, client: str) -> Origin:
        if self.session is None:
            raise MalformedLine("a line before the session's first line")
        return Origin(session_id=self.session, client=client, cwd=self.cwd, occurred_at=at)


def _read(path: str | Path | TranscriptFile, client: str,
          line: Callable[[_Read, dict[str, Any]], list[Observation]]) -> Transcript:
    file = path if isinstance(path, TranscriptFile) else TranscriptFile(Path(path))
    transcript = Transcript(file.path)
    state = _Read(file, transcript)
    with file.path.open("rb") as stream:
        for number, raw in enumerate(stream, start=1):
            transcript.lines = number
            where = f"{file.path}:{number}"
            try:
                value = json_object_line(raw)
                if value is None:
                    continue
                observations = line(state, value)
                at = _instant(value.get("timestamp")) if observations else ""
                origin = state.origin(at, client) if observations else None
            except (MalformedLine, KeyError, TypeError, AttributeError) as error:
                reason = str(error) if isinstance(error, MalformedLine) else \
                    f"not a {client} line ({error.__class__.__name__}: {error})"
                transcript.skipped.append(Skipped(number, reason, where))
                continue
            if origin is not None:
                transcript.seen += [Seen(origin, o, where) for o in observations]
    return transcript


# -- Codex CLI -------------------------------------------------------------------------------


def read_codex_rollout(path: str | Path | TranscriptFile) -> Transcript:
    """One Codex rollout's observations in order, and the lines skipped."""
    return _read(path, "codex", _codex_line)


def _codex_line(state: _Read, value: dict[str, Any]) -> list[Observation]:
    kind, payload = value.get("type"), value.get("payload")
    if not isinstance(payload, dict):
        raise MalformedLine("no \"payload\" object")
    if kind == "session_meta":
        session = payload.get("id")
        if not isinstance(session, str) or not session:
            raise MalformedLine("a session_meta without \"id\"")
        state.session = state.session or session
        cwd = payload.get("cwd")
        state.cwd = state.cwd or (cwd if isinstance(cwd, str) else None)
        return []
    if kind == "event_msg":
        event = payload.get("type")
        if event == "item_completed" and isinstance(payload.get("item"), dict) \
                and payload["item"].get("type") == "UserMessage":
            texts = [str(c["text"]) for c in payload["item"].get("content", [])
                     if isinstance(c, dict) and isinstance(c.get("text"), str)]
            return [Prompt(text="\n".join(texts), calls_before=len(state.calls))] if texts \
                else []
        if event == "context_compacted":
            return [Compacted(trigger="auto", calls_before=len(state.calls))]
        return []
    if kind != "response_item":
        return []
    item = payload.get("type")
    if item == "message" and payload.get("role") == "assistant":
        texts = [str(c["text"]) for c in payload.get("content", [])
                 if isinstance(c, dict) and c.get("type") == "output_text"
                 and isinstance(c.get("text"), str)]
        text = "\n".join(texts)
        return [AssistantText(text=text, message_id=str(payload.get("id")))] if text else []
    if item in ("function_call", "custom_tool_call"):
        call_id, name = payload["call_id"], payload["name"]
        if not isinstance(call_id, str) or not isinstance(name, str):
            raise MalformedLine("a call without \"call_id\" or \"name\"")
        namespace = payload.get("namespace")
        if isinstance(namespace, str) and namespace:  # an MCP server's: as Codex's hooks name it
            name = f"{namespace}__{name}"
        tool, given = _codex_call(name, payload)
        if ledger_tool(tool):
            return []  # the ledger's MCP server recorded it where it ran (not a call counted)
        state.calls[call_id] = (tool, given)
        return [ToolUse(tool=tool, input=given, tool_use_id=call_id)]
    if item in ("function_call_output", "custom_tool_call_output"):
        call_id = payload["call_id"]
        if call_id not in state.calls:
            return []  # the output of a call this file does not hold
        tool, given = state.calls[call_id]
        output = payload.get("output")
        shown = output if isinstance(output, str) else json.dumps(output, ensure_ascii=False)
        content, refused = _refused(shown)
        return [ToolResult(tool=tool, input=given, response=None if refused else shown,
                           content=content, error=refused, tool_use_id=call_id)]
    return []


def _codex_call(name: str, payload: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The tool and input Codex's hooks name a call by."""
    if payload.get("type") == "custom_tool_call":
        given = payload.get("input")
        return name, {"command": given if isinstance(given, str) else ""}
    raw = payload.get("arguments")
    try:
        arguments = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        arguments = {"arguments": raw}
    arguments = arguments if isinstance(arguments, dict) else {"arguments": arguments}
    if name == "exec_command":
        return "Bash", {"command": arguments.get("cmd", "")}
    return name, arguments


# -- Gemini CLI ------------------------------------------------------------------------------


def read_gemini_chat(path: str | Path | TranscriptFile) -> Transcript:
    """One Gemini chat recording's observations in order, and the lines skipped. Its lines
    name no ``cwd``: the project is the one ``projects.json`` of the Gemini directory the file
    lies in (``<dir>/tmp/<project>/chats/``) maps to the project's short name."""
    file = path if isinstance(path, TranscriptFile) else TranscriptFile(Path(path))
    cwd = _gemini_project(file.path)

    def line(state: _Read, value: dict[str, Any]) -> list[Observation]:
        state.cwd = state.cwd or cwd
        return _gemini_line(state, value)

    return _read(file, "gemini", line)


def _gemini_project(chat: Path) -> str | None:
    """The project directory of a chat file, from Gemini's ``projects.json``."""
    short, gemini_dir = chat.parent.parent.name, chat.parent.parent.parent.parent
    try:
        projects = json.loads((gemini_dir / "projects.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    table = projects.get("projects") if isinstance(projects, dict) else None
    found = [directory for directory, name in (table or {}).items() if name == short]
    return found[0] if len(found) == 1 and isinstance(found[0], str) else None


SESSION_CONTEXT = "<session_context>"
"""How the CLI's own first user message (the workspace it describes) begins."""


def _gemini_line(state: _Read, value: dict[str, Any]) -> list[Observation]:
    if "sessionId" in value and "type" not in value:  # the header
        session = value["sessionId"]
        if not isinstance(session, str) or not session:
            raise MalformedLine("a header without \"sessionId\"")
        state.session = state.session or session
        return []
    if "$set" in value or "$unset" in value:
        return []
    kind = value.get("type")
    if kind == "user":
        content = value.get("content")
        texts = [p["text"] for p in content if isinstance(p, dict)
                 and isinstance(p.get("text"), str)] if isinstance(content, list) else (
            [content] if isinstance(content, str) else [])
        text = "\n".join(texts)
        if not text.strip() or text.lstrip().startswith(SESSION_CONTEXT):
            return []
        return [Prompt(text=text, calls_before=len(state.calls))]
    if kind != "gemini":
        return []
    observations: list[Observation] = []
    said = value.get("content")
    if isinstance(said, str) and said.strip():
        observations.append(AssistantText(text=said, message_id=str(value["id"])))
    for call in value.get("toolCalls") or []:
        name, args, call_id = call["name"], call.get("args") or {}, call["id"]
        if not isinstance(name, str) or not isinstance(args, dict) or call_id in state.calls:
            continue  # (a record written again holds its calls again)
        state.calls[call_id] = (name, args)
        key = content_key(name, args)
        named = gemini_call_id(name, args, state.contents.get(key, 0))
        state.contents[key] = state.contents.get(key, 0) + 1
        shown = _gemini_result(call.get("result"))
        content, refused = _refused(shown)
        observations.append(ToolUse(tool=name, input=dict(args), tool_use_id=named))
        observations.append(ToolResult(
            tool=name, input=dict(args), response=None if refused else {"llmContent": shown},
            content=content, error=refused or call.get("status") == "error",
            tool_use_id=named))
    return observations


def _gemini_result(result: Any) -> str:
    """A call's result as the model was shown it (the ``functionResponse``'s output or
    error)."""
    for part in result if isinstance(result, list) else ():
        response = part.get("functionResponse", {}).get("response") if isinstance(
            part, dict) else None
        if isinstance(response, dict):
            given = response.get("output", response.get("error"))
            if isinstance(given, str):
                return given
            return json.dumps(response, ensure_ascii=False)
    return ""
