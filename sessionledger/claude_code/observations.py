"""What Claude Code tells us, in one vocabulary, before anything is recorded (CC-1 … CC-10).

A hook event (:mod:`.hooks`) and a transcript line (:mod:`.transcripts`) say the same things
in two shapes: a user prompt, an assistant text, a tool call about to run, its result, a
compaction, a session (re)starting, and on most of them Claude Code's ``permission_mode``. Each
source turns its shape into :class:`Seen` values; :mod:`.recorder` turns those into events,
the same way whichever source they came from — which is why an imported session and a hooked
session of the same conversation agree (issue 22, acceptance 4).

The idempotency key of each observation (CC-8) is computed here from what both sources know:
a tool call's ``tool_use_id``; a prompt's text and the number of tool calls before it in its
session; an assistant text's message id. A retried hook, a re-import and an import of a
transcript whose events hooks already recorded therefore land on the same key, and the log
appends the batch at most once.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, TypeAlias

__all__ = [
    "CLIENT",
    "CLIENTS",
    "REFUSED_HERE",
    "AssistantText",
    "Compacted",
    "Noted",
    "Observation",
    "Origin",
    "PermissionAsked",
    "Prompt",
    "Seen",
    "SessionBegan",
    "ToolResult",
    "ToolUse",
    "digest",
    "gemini_call_id",
    "ledger_session_id",
    "observation_key",
]

REFUSED_HERE = "sessionledger: "
"""How the reason this ledger gives Claude Code for a refusal begins, which Claude Code shows
the model as the call's result: a transcript's error result that begins so was refused here
and never ran."""

CLIENT = "claude-code"
"""The ``client`` of every session Claude Code's hooks or transcripts create (CC-2)."""
CLIENTS = ("claude-code", "codex", "gemini")
"""The hosts whose hooks (and session files) this package reads: Claude Code, Codex CLI and
Gemini CLI speak one vocabulary here, each its own dialect (:mod:`.hooks`)."""

_ID_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"  # Crockford base32, as ULIDs spell it


def digest(value: Any, *, length: int = 24) -> str:
    """A short stable digest of a JSON value (its canonical text)."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      default=str)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:length]


def content_key(tool: str | None, given: Any) -> str:
    """A call's tool and input as one key: what names a call with no ``tool_use_id``, and how
    a PermissionRequest (which has none) finds the call it asks about."""
    return digest([tool, dict(given) if isinstance(given, dict) else given])


def gemini_call_id(tool: str, given: Any, earlier: int) -> str:
    """A Gemini CLI call's id (its hooks give none): its tool and input, and how many calls
    of the session with that tool and input came before it — what its hooks and its chat
    file both see, so an import finds the calls its hooks recorded."""
    return f"gemini~{digest([content_key(tool, given), earlier], length=26)}"


def ledger_session_id(claude_session_id: str, agent_id: str | None = None,
                      client: str = CLIENT) -> str:
    """The ledger session of a host's session (or of one of its subagents): ``sess_`` and 26
    base32 characters derived from the host's name and ids, so every hook process and every
    import finds the same session without a lookup (CC-2)."""
    raw = hashlib.sha256(
        f"{client}\0{claude_session_id}\0{agent_id or ''}".encode("utf-8", "surrogatepass")
    ).digest()
    number = int.from_bytes(raw[:17], "big") >> 6  # 130 bits: 26 characters of 5 bits
    chars = []
    for _ in range(26):
        number, index = divmod(number, 32)
        chars.append(_ID_ALPHABET[index])
    return "sess_" + "".join(reversed(chars))


@dataclass(frozen=True, slots=True, kw_only=True)
class Origin:
    """Whose observation this is and what Claude Code said around it."""

    session_id: str
    """Claude Code's ``session_id`` (a transcript's ``sessionId``)."""
    client: str = CLIENT
    """The host that said it (one of :data:`CLIENTS`): the session's ``client``."""
    cwd: str | None = None
    """The directory Claude Code runs in: the session's workspace (CC-2)."""
    agent_id: str | None = None
    """A subagent's id: its observations go to a child session (CC-2, CC-9)."""
    permission_mode: str | None = None
    """Claude Code's mode on this event or line, when it gives one (CC-3)."""
    occurred_at: str | None = None
    """When it happened by the transcript's own clock (ISO, ``Z``); ``None`` from a hook."""
    claude_dir: str | None = None
    """Claude Code's configuration directory (``~/.claude``), where it keeps its plan files,
    when the event says (a hook's ``transcript_path`` lies in its ``projects`` folder)."""
    transcript: str | None = None
    """The session's transcript file, when a hook names it (``transcript_path``): where the
    outcome of a question or plan the user turned down in Claude Code's dialog is found, which
    no hook reports."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Prompt:
    """A real user message (UserPromptSubmit; a transcript's user line with text)."""

    text: str
    calls_before: int | None = None
    """Tool calls of this session before it, as its source counts them; ``None``: count
    what the ledger holds (a hook arrives in order, after every earlier call)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class AssistantText:
    """Text the assistant wrote (transcripts only; hooks never see it)."""

    text: str
    message_id: str
    """The line's ``uuid`` and the block's index: unique in the transcript."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolUse:
    """A tool call about to run (PreToolUse; an assistant ``tool_use`` block)."""

    tool: str
    input: dict[str, Any]
    tool_use_id: str | None = None
    fallback_key: str | None = None
    """A digest of the hook payload, for an event without ``tool_use_id`` (CC-8)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PermissionAsked:
    """Claude Code is about to ask its user to permit a call (PermissionRequest, hooks only):
    a hook may answer for the user."""

    tool: str
    input: dict[str, Any]
    tool_use_id: str | None = None
    fallback_key: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolResult:
    """A tool call's outcome (PostToolUse / PostToolUseFailure; a user ``tool_result``)."""

    tool: str
    input: dict[str, Any]
    response: Any = None
    """What the tool returned as data: ``tool_response``, a transcript's ``toolUseResult``."""
    content: str = ""
    """What the model was shown (the ``tool_result`` block's text; the error text)."""
    error: bool = False
    """The call failed or the user refused it (``is_error``; PostToolUseFailure)."""
    tool_use_id: str | None = None
    fallback_key: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Compacted:
    """The context was compacted (PreCompact; a ``compact_boundary`` line)."""

    trigger: str | None = None
    """``manual`` or ``auto``, as given."""
    calls_before: int | None = None
    summary_turns: tuple[tuple[str, str], ...] = ()
    """Gemini CLI (seen in the model request after its compression): the request's text turns
    as ``(role, text)`` up to the summary the compression put at the start of the history,
    which is the last; the hook gives them back with the hand-back added to the summary. One
    compaction is recorded per summary."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionBegan:
    """A session started, resumed, was cleared or came back from a compaction (hooks only)."""

    source: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Noted:
    """An event with nothing of its own to record (Stop, Notification, SessionEnd, one this
    build does not know): only the mode it carries is mirrored (CC-1, CC-3)."""

    event: str


Observation: TypeAlias = (
    Prompt | AssistantText | ToolUse | PermissionAsked | ToolResult | Compacted | SessionBegan
    | Noted
)


@dataclass(frozen=True, slots=True)
class Seen:
    """One observation with its origin; ``where`` names its source for messages (a
    transcript's ``file:line``, a hook's event name)."""

    origin: Origin
    observation: Observation
    where: str = field(default="")


def observation_key(observation: Observation, calls_before: int) -> str | None:
    """The idempotency key of an observation (CC-8); ``None`` for what appends nothing by
    itself (a session start). ``calls_before`` counts the session's earlier tool calls where
    the observation does not carry its own count."""
    match observation:
        case ToolUse(tool_use_id=str(use)) | ToolResult(tool_use_id=str(use)):
            part = "use" if isinstance(observation, ToolUse) else "result"
            return f"cc:{part}:{use}"
        case PermissionAsked(tool_use_id=str(use)):
            return f"cc:permission:{use}"
        case PermissionAsked(fallback_key=str(fallback)):
            return f"cc:permission:~{fallback}"
        case ToolUse(fallback_key=str(fallback)):
            return f"cc:use:~{fallback}"
        case ToolResult(fallback_key=str(fallback)):
            return f"cc:result:~{fallback}"
        case Prompt(text=text, calls_before=counted):
            calls = calls_before if counted is None else counted
            return f"cc:prompt:{calls}:{digest(text)}"
        case AssistantText(message_id=message_id):
            return f"cc:text:{message_id}"
        case Compacted(summary_turns=turns) if turns:
            return f"cc:compact:~{digest(turns[-1][1])}"
        case Compacted(calls_before=counted):
            return f"cc:compact:{calls_before if counted is None else counted}"
    return None
