"""Local material of another session for ReadSessionContext (SPEC RS-2), within a budget.

:func:`digest` reads the session's events once (flat memory: the store pages them) and keeps
what the two strategies need: the messages, the last todo list, the approved plan and the
questions still open. The approved plan is the plan of an ``ExitPlanMode`` call that
completed successfully (the user's modified input if they changed it), or the ``plan`` of a
``PlanApproved`` event where the log has one. Execution state and goal come from the
session's summary.

:func:`relevant_text` ranks message chunks by BM25 against the query
(:mod:`sessionledger.tools.relevance`) and keeps the best that fit; :func:`handoff_text` assembles
goal, execution state, todos with statuses, open questions, the approved plan and then as
many recent messages as fit. Budgets are UTF-8 bytes (a token is estimated as 4 bytes,
rounded up); a cut never splits a character.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from eventlog import (
    InteractionRequested,
    InteractionResolved,
    MessageRecorded,
    RecordedEvent,
    TodosWritten,
    ToolCallCompleted,
    ToolCallRequested,
)
from projections import SessionSummary

from .relevance import Chunk, chunk_text, rank

__all__ = [
    "SessionDigest",
    "cut_utf8",
    "digest",
    "estimate_tokens",
    "handoff_text",
    "relevant_text",
    "size",
]

RECENT_MESSAGE_CHARS = 2000
"""A recent message longer than this is shortened in a handoff."""


def size(text: str) -> int:
    """UTF-8 bytes of ``text``."""
    return len(text.encode("utf-8"))


def estimate_tokens(text: str) -> int:
    """Tokens as SPEC RS-1 estimates them: UTF-8 bytes / 4, rounded up."""
    return math.ceil(size(text) / 4)


def cut_utf8(text: str, budget: int) -> str:
    """``text`` cut to at most ``budget`` bytes, never inside a character."""
    if budget <= 0:
        return ""
    data = text.encode("utf-8")
    if len(data) <= budget:
        return text
    return data[:budget].decode("utf-8", errors="ignore")


@dataclass(slots=True)
class SessionDigest:
    """What the strategies use from a session's log."""

    messages: list[tuple[int, str, str]] = field(default_factory=list)
    """``(seq, role, content)`` in log order."""
    todos: tuple[Any, ...] = ()
    approved_plan: str | None = None
    open_questions: dict[str, list[str]] = field(default_factory=dict)


def _plan_of(payload: Any) -> str | None:
    plan = payload.get("plan") if isinstance(payload, dict) else None
    return plan if isinstance(plan, str) and plan.strip() else None


def digest(events: Iterable[RecordedEvent]) -> SessionDigest:
    """Fold a session's events into a :class:`SessionDigest`."""
    found = SessionDigest()
    plans: dict[str, str | None] = {}
    for event in events:
        data = event.data
        if isinstance(data, MessageRecorded):
            found.messages.append((event.seq, data.role, data.content))
        elif isinstance(data, TodosWritten):
            found.todos = data.todos
        elif isinstance(data, ToolCallRequested) and data.tool == "ExitPlanMode":
            plans[data.call_id] = _plan_of(data.input)
        elif isinstance(data, InteractionRequested):
            questions = data.payload.get("questions") if data.kind == "askUserQuestion" else None
            found.open_questions[data.interaction_id] = [
                str(q.get("question", "")) for q in questions or [] if isinstance(q, dict)
            ] if data.kind == "askUserQuestion" else ["A plan is waiting for the user's approval."]
        elif isinstance(data, InteractionResolved):
            found.open_questions.pop(data.interaction_id, None)
            if data.call_id in plans and _plan_of(data.input) is not None:
                plans[data.call_id] = _plan_of(data.input)
        elif isinstance(data, ToolCallCompleted):
            if data.tool == "ExitPlanMode" and data.success and plans.get(data.call_id):
                found.approved_plan = plans[data.call_id]
        elif event.type == "PlanApproved" and isinstance(getattr(data, "plan", None), str):
            found.approved_plan = getattr(data, "plan")  # noqa: B009 - issue 7's event
    return found


def _message_block(seq: int, role: str, text: str) -> str:
    return f"[seq {seq} · {role}]\n{text}"


def _fill(header: str, blocks: Iterable[str], budget: int) -> tuple[str, bool]:
    """``header`` then as many blocks as fit in ``budget`` bytes (the first is cut to fit)."""
    if size(header) > budget:
        return cut_utf8(header, budget), True
    parts = [header]
    used = size(header)
    for block in blocks:
        need = 2 + size(block)
        if used + need <= budget:
            parts.append(block)
            used += need
            continue
        if len(parts) == 1 and budget - used - 2 > 0:
            parts.append(cut_utf8(block, budget - used - 2))
        return "\n\n".join(parts), True
    return "\n\n".join(parts), False


def relevant_text(query: str, found: SessionDigest, budget: int) -> tuple[str, bool]:
    """The message chunks most relevant to ``query``, best first, within ``budget`` bytes.

    When no chunk shares a term with the query, the most recent messages stand in.
    Returns the text and whether anything was left out.
    """
    chunks = [
        Chunk(seq, role, part, text)
        for seq, role, content in found.messages
        for part, text in enumerate(chunk_text(content))
    ]
    ranked = [chunk for _score, chunk in rank(query, chunks)]
    if ranked:
        header = f"Message excerpts ranked by relevance to the query ({len(ranked)} matched):"
        return _fill(header, (_message_block(c.seq, c.role, c.text) for c in ranked), budget)
    header = "No message matches the query's terms; the most recent messages instead:"
    recent = reversed(found.messages)
    return _fill(header, (_message_block(s, r, c) for s, r, c in recent), budget)


def _section(title: str, lines: Sequence[str]) -> str:
    return f"## {title}\n" + "\n".join(lines)


def handoff_text(
    summary: SessionSummary, found: SessionDigest, budget: int
) -> tuple[str, bool]:
    """A continuation handoff within ``budget`` bytes, and whether anything was cut."""
    goal = summary.goal
    unfinished = sum(1 for t in found.todos if t.status != "completed")
    todos = [f"{i}. [{t.status}] {t.content}" for i, t in enumerate(found.todos, start=1)]
    questions = [q for qs in found.open_questions.values() for q in qs]
    sections = [
        _section("Goal", [goal if goal is not None else "No active goal."]),
        _section("Execution state", [
            f"mode {summary.mode}; Plan {'on' if summary.plan_enabled else 'off'} "
            f"(shown as {summary.display_mode})",
        ]),
        _section(f"Todos ({unfinished} unfinished of {len(todos)})",
                 todos or ["The todo list is empty."]),
        _section("Open questions", questions or ["None."]),
        _section("Approved plan", [found.approved_plan or "No plan was approved."]),
    ]
    text, cut = _fill("Handoff for continuing the session:", sections, budget)
    if cut:
        return text, True
    recent: list[str] = []
    used = size(text) + 2 + size("## Recent messages")
    for seq, role, content in reversed(found.messages):
        short = content if len(content) <= RECENT_MESSAGE_CHARS else (
            content[:RECENT_MESSAGE_CHARS] + " …")
        block = _message_block(seq, role, short)
        if used + 2 + size(block) > budget:
            cut = True
            break
        recent.append(block)
        used += 2 + size(block)
    if recent:
        text += "\n\n## Recent messages\n\n" + "\n\n".join(reversed(recent))
    return text, cut
