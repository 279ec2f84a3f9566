"""Claude Code's JSONL transcripts read into :class:`~.observations.Seen` values (CC-9).

Claude Code writes each session to ``~/.claude/projects/<project dir>/<session id>.jsonl``,
one JSON object a line, and each ``Task`` subagent's conversation to
``<session id>/subagents/agent-<id>.jsonl``. :func:`find_transcripts` finds those files (parents
before their subagents); :func:`read_transcript` reads one into observations in transcript
order, each with its :class:`~.observations.Origin` (the line's ``sessionId``, ``cwd``,
``agentId``, ``permissionMode`` and ``timestamp``) and ``where`` (``file:line``).

What a line becomes:

- ``user`` with text: a :class:`Prompt` (``calls_before``: the ``tool_use`` blocks before it
  in this file) — unless the text is not something the user wrote to the agent: ``isMeta``
  lines (a skill's expansion, system reminders, hook feedback), ``isCompactSummary`` (the
  summary after a compaction), local command output and caveats (``<local-command-stdout>``,
  ``<local-command-caveat>``, ``<bash-input>``…), interruption notes (``[Request interrupted
  by user…]``) and background-task notifications (``<task-notification>``). A slash command
  (``<command-name>/x</command-name>`` with ``<command-args>``) is recorded as the user typed
  it: ``/x args`` — except ``/compact``, which Claude Code carries out itself with no
  ``UserPromptSubmit`` (its ``compact_boundary`` is the record).
- ``user`` with ``tool_result`` blocks: a :class:`ToolResult` each (tool and input from the
  matching ``tool_use``; ``response``: the line's ``toolUseResult`` when the line holds one
  result; ``content``: the block's text; ``error``: ``is_error``).
- ``assistant``: its ``text`` blocks (:class:`AssistantText`, ``message_id`` the line's
  ``uuid`` and the block's index) and ``tool_use`` blocks (:class:`ToolUse`) in block order.
  One API message is split over several lines sharing ``message.id``, each with its own
  blocks; a block repeated on a later line of the same message is read once. ``thinking``,
  images and other block kinds are not recorded; nor are Claude Code's synthetic messages
  (``model: "<synthetic>"``).
- ``system`` with ``subtype: "compact_boundary"``: a :class:`Compacted`
  (``compactMetadata.trigger``).
- anything else (``progress``, ``file-history-snapshot``, ``summary``, ``queue-operation``,
  other ``system`` lines…) carries nothing to record.

A malformed line (not UTF-8, not JSON, not an object, or missing what its kind needs) is
reported in :attr:`Transcript.skipped` and yields nothing — a line is read whole or not at
all. So is a sidechain line without ``agentId`` in a session's own file (an older Claude
Code's subagent line: its calls ran in a subagent, not in this session).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
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
    digest,
)

__all__ = [
    "MalformedLine",
    "NotATranscript",
    "Skipped",
    "Transcript",
    "TranscriptFile",
    "find_transcripts",
    "json_object_line",
    "read_transcript",
]

SUBAGENTS = "subagents"
"""The directory beside a session's transcript that holds its subagents' transcripts."""

_NOT_PROMPTS = (
    "<local-command-stdout>", "<local-command-stderr>", "<local-command-caveat>",
    "<bash-input>", "<bash-stdout>", "<bash-stderr>", "<task-notification>",
    "[Request interrupted by user",
)
"""How text Claude Code writes as a ``user`` line without the user writing it begins."""

LOCAL_COMMANDS = frozenset({"/compact"})
"""Slash commands Claude Code carries out itself, sending no ``UserPromptSubmit``: not a
prompt (``/compact`` is recorded as the compaction its ``compact_boundary`` line marks)."""

_COMMAND_NAME = re.compile(r"<command-name>(.*?)</command-name>", re.DOTALL)
_COMMAND_ARGS = re.compile(r"<command-args>(.*?)</command-args>", re.DOTALL)


class NotATranscript(ValueError):
    """A path given to :func:`find_transcripts` that is neither a directory nor a
    ``.jsonl`` file."""


@dataclass(frozen=True, slots=True)
class TranscriptFile:
    """A transcript file, and for a subagent's the session it belongs to."""

    path: Path
    parent_session_id: str | None = None
    """A subagent transcript's parent Claude session (the ``<session id>`` directory)."""
    agent_id: str | None = None
    """A subagent transcript's agent id (from ``agent-<id>.jsonl``)."""


@dataclass(frozen=True, slots=True)
class Skipped:
    """A line that was not imported, and why."""

    line: int
    reason: str
    where: str
    """``file:line``."""


@dataclass(slots=True)
class Transcript:
    """What one transcript file holds, in order."""

    path: Path
    seen: list[Seen] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    lines: int = 0
    """Lines read (blank lines included)."""
    parent_session_id: str | None = None
    agent_id: str | None = None

    @property
    def session_id(self) -> str | None:
        """The Claude session of the first observation."""
        return self.seen[0].origin.session_id if self.seen else None

    @property
    def cwd(self) -> str | None:
        """The directory of the first observation that names one."""
        return next((s.origin.cwd for s in self.seen if s.origin.cwd), None)


def find_transcripts(paths: Iterable[str | Path]) -> list[TranscriptFile]:
    """The transcripts at ``paths``: a ``.jsonl`` file itself, a directory searched
    recursively for ``*.jsonl``. Each file once; a session's transcript before its subagents'.

    Raises :class:`FileNotFoundError` for a path that does not exist and
    :class:`NotATranscript` for a file that is not ``.jsonl``."""
    found: dict[Path, TranscriptFile] = {}
    for given in paths:
        path = Path(given)
        if path.is_dir():
            files = sorted(p for p in path.rglob("*.jsonl") if p.is_file())
        elif path.is_file():
            if path.suffix != ".jsonl":
                raise NotATranscript(f"{path}: not a .jsonl transcript")
            files = [path]
        else:
            raise FileNotFoundError(f"{path}: no such file or directory")
        for file in files:
            found.setdefault(file.resolve(), _transcript_file(file))
    return sorted(found.values(), key=_order)


def _transcript_file(path: Path) -> TranscriptFile:
    if path.parent.name == SUBAGENTS and path.name.startswith("agent-"):
        return TranscriptFile(path, parent_session_id=path.parent.parent.name,
                              agent_id=path.stem.removeprefix("agent-"))
    return TranscriptFile(path)


def _order(file: TranscriptFile) -> tuple[str, int, str]:
    if file.parent_session_id is None:
        return (str(file.path.with_suffix("")), 0, "")
    return (str(file.path.parent.parent), 1, file.path.name)


class MalformedLine(Exception):
    """A line that cannot be read whole; its message is the reason."""


@dataclass(slots=True)
class _Reader:
    """What reading a transcript remembers from line to line."""

    file: TranscriptFile
    calls: int = 0
    """``tool_use`` blocks so far."""
    uses: dict[str, tuple[str, dict[str, Any]]] = field(default_factory=dict)
    """Each ``tool_use`` id's tool and input."""
    blocks: set[tuple[str, str]] = field(default_factory=set)
    """(message id, block digest) of every assistant block read."""

    def observations(self, value: dict[str, Any]) -> list[Observation]:
        """The observations of one line's object; raises :class:`MalformedLine`. Nothing is
        remembered from a line that raises."""
        kind = value["type"]
        if kind == "user":
            return self._user(value)
        if kind == "assistant":
            return self._assistant(value)
        if kind == "system" and value.get("subtype") == "compact_boundary":
            metadata = value.get("compactMetadata")
            trigger = metadata.get("trigger") if isinstance(metadata, dict) else None
            return [Compacted(trigger=trigger if isinstance(trigger, str) else None,
                              calls_before=self.calls)]
        return []

    def _user(self, value: dict[str, Any]) -> list[Observation]:
        content = _content(value)
        blocks: list[Any] = [{"type": "text", "text": content}] if isinstance(content, str) \
            else content
        results: list[tuple[str, Any, bool]] = []
        texts: list[str] = []
        for index, block in enumerate(blocks):
            if not isinstance(block, dict):
                raise MalformedLine(f"content block {index} is not an object")
            match block.get("type"):
                case "tool_result":
                    use = block.get("tool_use_id")
                    if not isinstance(use, str) or not use:
                        raise MalformedLine(f"tool_result block {index} has no tool_use_id")
                    if use not in self.uses:
                        raise MalformedLine(f"tool_result {use} answers no tool_use before it")
                    results.append((use, block.get("content"), block.get("is_error") is True))
                case "text":
                    text = block.get("text")
                    if not isinstance(text, str):
                        raise MalformedLine(f"text block {index} has no text")
                    texts.append(text)
        observations: list[Observation] = []
        for use, shown, error in results:
            tool, tool_input = self.uses[use]
            observations.append(ToolResult(
                tool=tool, input=tool_input,
                response=value.get("toolUseResult") if len(results) == 1 else None,
                content=_unframed(_result_text(shown)) if error else _result_text(shown),
                error=error, tool_use_id=use))
        prompt = _prompt_text("\n".join(texts), value) if texts else None
        if prompt is not None:
            observations.append(Prompt(text=prompt, calls_before=self.calls))
        return observations

    def _assistant(self, value: dict[str, Any]) -> list[Observation]:
        content = _content(value)
        message = value["message"]
        if message.get("model") == "<synthetic>":
            return []
        blocks: list[Any] = [{"type": "text", "text": content}] if isinstance(content, str) \
            else content
        message_id = message.get("id")
        uuid = value.get("uuid")
        observations: list[Observation] = []
        remembered: list[tuple[str, str]] = []
        uses: dict[str, tuple[str, dict[str, Any]]] = {}
        for index, block in enumerate(blocks):
            if not isinstance(block, dict):
                raise MalformedLine(f"content block {index} is not an object")
            kind = block.get("type")
            if kind not in ("text", "tool_use"):
                continue
            if isinstance(message_id, str):
                key = (message_id, digest(block))
                if key in self.blocks:
                    continue  # the same block on a later line of the same message
                remembered.append(key)
            if kind == "text":
                text = block.get("text")
                if not isinstance(text, str):
                    raise MalformedLine(f"text block {index} has no text")
                if not isinstance(uuid, str) or not uuid:
                    raise MalformedLine("an assistant text without the line's \"uuid\"")
                if text.strip():
                    observations.append(AssistantText(text=text, message_id=f"{uuid}:{index}"))
                continue
            use, tool, tool_input = block.get("id"), block.get("name"), block.get("input")
            if not isinstance(use, str) or not use:
                raise MalformedLine(f"tool_use block {index} has no id")
            if not isinstance(tool, str) or not tool:
                raise MalformedLine(f"tool_use block {index} has no name")
            if not isinstance(tool_input, dict):
                raise MalformedLine(f"tool_use block {index} has no input object")
            if use in self.uses or use in uses:
                continue  # a tool call read before
            uses[use] = (tool, tool_input)
            observations.append(ToolUse(tool=tool, input=tool_input, tool_use_id=use))
        self.blocks.update(remembered)
        self.uses.update(uses)
        self.calls += len(uses)
        return observations

    def origin(self, value: dict[str, Any]) -> Origin:
        """The origin of a line that yields observations; raises :class:`MalformedLine`."""
        session = value.get("sessionId")
        if not isinstance(session, str) or not session:
            raise MalformedLine("no \"sessionId\"")
        stamp = value.get("timestamp")
        if not isinstance(stamp, str):
            raise MalformedLine("no \"timestamp\"")
        try:
            occurred_at = format_instant(parse_instant(stamp))
        except (ValueError, OverflowError):
            raise MalformedLine(f"\"timestamp\" {stamp!r} is not an ISO 8601 instant") from None
        cwd, mode, agent = value.get("cwd"), value.get("permissionMode"), value.get("agentId")
        for name, given in (("cwd", cwd), ("permissionMode", mode), ("agentId", agent)):
            if given is not None and not isinstance(given, str):
                raise MalformedLine(f"\"{name}\" is not a string")
        if self.file.agent_id is not None:
            agent = agent or self.file.agent_id
        elif value.get("isSidechain") is True and not agent:
            raise MalformedLine("a sidechain line without \"agentId\" (a subagent's, not this "
                             "session's)")
        elif value.get("isSidechain") is not True:
            agent = None
        return Origin(session_id=session, cwd=cwd, agent_id=agent, permission_mode=mode,
                      occurred_at=occurred_at)


def read_transcript(path: str | Path | TranscriptFile) -> Transcript:
    """Read one transcript file into observations, in order, and the lines skipped.

    Raises :class:`OSError` when the file cannot be read."""
    file = path if isinstance(path, TranscriptFile) else _transcript_file(Path(path))
    transcript = Transcript(file.path, parent_session_id=file.parent_session_id,
                            agent_id=file.agent_id)
    reader = _Reader(file)
    with file.path.open("rb") as stream:
        for number, raw in enumerate(stream, start=1):
            transcript.lines = number
            where = f"{file.path}:{number}"
            try:
                value = _parse(raw)
                if value is None or not _yields(value):
                    continue
                # The origin is checked before the blocks are read, and the blocks are read
                # whole before anything is remembered: a bad line leaves no trace.
                origin = reader.origin(value)
                observations = reader.observations(value)
            except MalformedLine as error:
                transcript.skipped.append(Skipped(number, str(error), where))
                continue
            transcript.seen += [Seen(origin, o, where) for o in observations]
    return transcript


def _parse(raw: bytes) -> dict[str, Any] | None:
    """A transcript line's object (``None``: a blank line); raises :class:`MalformedLine`."""
    value = json_object_line(raw)
    if value is not None and not isinstance(value.get("type"), str):
        raise MalformedLine("no \"type\"")
    return value


def json_object_line(raw: bytes) -> dict[str, Any] | None:
    """One line of a JSONL session file as its object (``None``: a blank line); raises
    :class:`MalformedLine` saying why it is not one (not UTF-8, not JSON, not an object)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise MalformedLine(f"not UTF-8 ({error.reason} at byte {error.start})") from None
    if not text.strip():
        return None
    try:
        value = json.loads(text)
    except (ValueError, RecursionError) as error:
        raise MalformedLine(f"not JSON ({_first_line(str(error))})") from None
    if not isinstance(value, dict):
        raise MalformedLine(f"not a JSON object (a JSON {_json_kind(value)})")
    return value


def _yields(value: dict[str, Any]) -> bool:
    """Whether a line of this kind can yield observations (and so needs an origin)."""
    kind = value.get("type")
    return kind in ("user", "assistant") or (
        kind == "system" and value.get("subtype") == "compact_boundary")


def _content(value: dict[str, Any]) -> str | list[Any]:
    message = value.get("message")
    if not isinstance(message, dict):
        raise MalformedLine("no \"message\" object")
    content = message.get("content")
    if not isinstance(content, (str, list)):
        raise MalformedLine("\"message.content\" is neither a string nor a list of blocks")
    return content


def _prompt_text(text: str, value: dict[str, Any]) -> str | None:
    """What the user wrote on this line, or ``None`` when Claude Code wrote it."""
    if value.get("isMeta") is True or value.get("isCompactSummary") is True:
        return None
    stripped = text.strip()
    if not stripped or stripped.startswith(_NOT_PROMPTS):
        return None
    name = _COMMAND_NAME.search(stripped)
    if name is not None:
        args = _COMMAND_ARGS.search(stripped)
        typed = name.group(1).strip()
        if typed in LOCAL_COMMANDS:
            return None
        arguments = args.group(1).strip() if args else ""
        return f"{typed} {arguments}" if arguments else typed
    return text


def _result_text(shown: Any) -> str:
    """A ``tool_result`` block's content as text: a string, or its text blocks joined."""
    if isinstance(shown, str):
        return shown
    if isinstance(shown, list):
        return "\n".join(b["text"] for b in shown
                         if isinstance(b, dict) and isinstance(b.get("text"), str))
    return ""


_HOOK_ERROR = re.compile(r"PreToolUse:\S+ hook error: (?:\[[^\]\n]*\]: )?")
"""How Claude Code 2.1.337 frames a call a PreToolUse hook refused, in the transcript and to
the model: ``PreToolUse:Write hook error: `` (and a ``[source]: `` tag it may add), then the
hook's reason."""


def _unframed(text: str) -> str:
    """An error result as the hooks record it: this ledger's refusal without the frame Claude
    Code puts around a hook's reason (a transcript of an earlier version has none)."""
    framed = _HOOK_ERROR.match(text)
    if framed is not None and text.startswith(REFUSED_HERE, framed.end()):
        return text[framed.end():]
    return text


def _first_line(text: str) -> str:
    return text.splitlines()[0] if text else text


def _json_kind(value: Any) -> str:
    if isinstance(value, list):
        return "array"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "boolean"
    if value is None:
        return "null"
    return "number"
