"""The model-facing texts of the turn-loop reminders, kept apart from the rules that pick them.

SPEC TD-5 and PM-5 fix the opening sentences (marked **exact** there; tests compare them
literally) and what the rest must say; the remainder is ours (docs/decisions.md D32). Texts
only: :mod:`sessionledger.service.reminders` decides when each is injected. The todo text is
built from the current list by :func:`todo_reminder_text`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from eventlog import TodoItemData

__all__ = [
    "plan_file_reference_text",
    "PLAN_EXIT",
    "PLAN_MODE_FULL",
    "PLAN_MODE_FULL_OPENING",
    "PLAN_MODE_SPARSE",
    "TODO_EMPTY",
    "TODO_REMINDER_HEADER",
    "TODO_REMINDER_OPENING",
    "todo_line",
    "todo_reminder_text",
]

TODO_REMINDER_OPENING = "The TodoWrite tool hasn't been used recently."
"""TD-5: every todo reminder starts with this sentence (**exact**)."""

TODO_REMINDER_HEADER = (
    f"{TODO_REMINDER_OPENING} If you are working on tasks that would benefit from tracking "
    "progress, consider using the TodoWrite tool to track it, and clean up the list if it has "
    "become stale and no longer matches what you are working on. Only use it if it is "
    "relevant to the current work; this is a gentle reminder, ignore it if not applicable, "
    "and never mention it to the user. Here is your current todo list:"
)
"""The header sentences; the list follows after a blank line (TD-5 layout)."""

TODO_EMPTY = "The todo list is empty."
"""What stands in place of the numbered lines when the list has no items."""

PLAN_MODE_FULL_OPENING = (
    "Plan mode is active. The user indicated that they do not want you to execute yet -- "
    "you MUST NOT make any edits, run any non-readonly tools (including changing configs or "
    "making commits), or otherwise make any changes to the system."
)
"""PM-5: the full Plan reminder starts with this paragraph (**exact**)."""

PLAN_MODE_FULL = f"""{PLAN_MODE_FULL_OPENING} This supersedes any other instructions you \
have received.

## Plan workflow

### Phase 1: Understand
Build a thorough understanding of the request by reading the code and asking the user \
questions. In this phase use explore subagents only, and launch at most 3 of them in \
parallel.

### Phase 2: Design
Design an implementation approach from what you learned: the files to change, the steps in \
order, and the trade-offs between the options you considered.

### Phase 3: Review
Check the design against the user's request and the code you read. Use AskUserQuestion to \
clarify anything that is still open; do not guess what the user wants.

### Phase 4: Exit
When the plan is ready, call ExitPlanMode with the final plan; the user reviews and approves \
it there.

Your turn may only end with a call to AskUserQuestion (to clarify requirements) or to \
ExitPlanMode (to ask for approval of the plan). Never ask whether the plan is OK in any other \
way -- not in text and not with AskUserQuestion: any form of "is this plan OK?" must go \
through ExitPlanMode, because the user cannot see the plan until you call it."""
"""The 1st, 6th, 11th … Plan reminder of a Plan period: rules plus the four-phase workflow."""

PLAN_MODE_SPARSE = (
    "Plan mode is still active (see the full instructions earlier in this conversation): make "
    "no edits and run no non-readonly tools. Follow the workflow -- understand (explore "
    "subagents only, at most 3 in parallel), design, review (clarify with AskUserQuestion), "
    "then call ExitPlanMode. End your turn only with AskUserQuestion or ExitPlanMode, and ask "
    "for approval of the plan only through ExitPlanMode."
)
"""The Plan reminders between the full ones: the same rules, short."""

PLAN_EXIT = (
    "You have exited plan mode. You may now make edits, run tools and take actions. If a plan "
    "was approved, carry it out, starting with updating your todo list if applicable."
)
"""The one reminder after Plan was left (``plan_exit``)."""


def todo_line(position: int, item: TodoItemData) -> str:
    """``1. [in_progress] content`` — line breaks inside the content become spaces."""
    content = " ".join(item.content.splitlines())
    return f"{position}. [{item.status}] {content}"


def todo_reminder_text(todos: Sequence[TodoItemData]) -> str:
    """The header, a blank line, then one numbered line per item (or the empty-list note)."""
    lines = [todo_line(i, item) for i, item in enumerate(todos, start=1)]
    body = "\n".join(lines) if lines else TODO_EMPTY
    return f"{TODO_REMINDER_HEADER}\n\n{body}"


def plan_file_reference_text(path: Path, content: str) -> str:
    """PM-10's reminder: the exact opening, the path, the content, then carry on."""
    return (
        f"A plan file exists from plan mode at: {path}\n\n"
        f"Plan contents:\n\n{content}\n\n"
        "If this plan is relevant to the current work and not already complete, "
        "continue working on it."
    )
