"""The TUI's sidebar: mode badge, Goal, the todo list with its progress, the latest events.

What a person glances at beside the approval queue (SPEC TD-6, ES-1, ES-4): the *display*
mode as a badge (``plan`` when Plan is on, with the mode underneath named), the active Goal,
the session's todos in list order with "completed/total" progress — the same text the
``sessionledger todos`` command prints — and the last few events the app has seen in the log
(seq, type, actor; ``sessionledger replay`` tells the whole story). It only draws what the
app hands it (the session document, the todo list, events); it reads nothing itself.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from rich.text import Text
from textual.containers import Vertical
from textual.widgets import Static

from eventlog import RecordedEvent

from ..service.documents import TodoList

__all__ = ["RECENT_EVENTS", "Sidebar", "mode_badge", "todo_lines"]

RECENT_EVENTS = 8
"""How many of the latest events the sidebar lists."""

_STATUS_MARK = {"completed": ("✔", "green"), "in_progress": ("▶", "bold yellow"),
                "pending": ("○", "")}
_MODE_STYLE = {"plan": "black on cyan", "build": "black on green", "edit": "black on yellow",
               "yolo": "white on red", "auto": "black on magenta"}


def mode_badge(document: Mapping[str, Any]) -> Text:
    """``[ plan ]`` and, in Plan, the mode underneath (ES-1, ES-3)."""
    display = str(document["displayMode"])
    badge = Text.assemble((f" {display} ", _MODE_STYLE.get(display, "reverse")))
    execution = document["executionState"]
    if execution["planEnabled"]:
        badge.append(f"  ({execution['mode']} underneath)", style="dim")
    badge.append("\nShift+Tab cycles the mode", style="dim")
    return badge


def _goal(document: Mapping[str, Any]) -> Text:
    goal = document["executionState"]["goal"]
    text = Text.assemble(("Goal: ", "bold"))
    if goal is None:
        text.append("none", style="dim")
    else:
        text.append(str(goal["objective"]))
    return text


def todo_lines(todos: TodoList) -> Text:
    """The todos with their progress headline, e.g. ``Todos 1/3 completed`` (TD-6)."""
    text = Text.assemble(("Todos ", "bold"), todos.progress)
    if not todos.items:
        text.append("\nno todos", style="dim")
    for item in todos.items:
        mark, style = _STATUS_MARK.get(item.status, ("?", ""))
        text.append(f"\n{mark} ", style=style)
        text.append(item.content, style="strike dim" if item.status == "completed" else "")
    return text


def _event_lines(events: Iterable[RecordedEvent]) -> Text:
    text = Text.assemble(("Latest events", "bold"))
    for event in events:
        text.append(f"\n{event.seq:>4} ", style="dim")
        text.append(event.type)
        text.append(f" by {event.actor}", style="dim")
    return text


class Sidebar(Vertical):
    """The left column of the app."""

    DEFAULT_CSS = """
    Sidebar { width: 40; border-right: solid $primary; padding: 0 1; }
    Sidebar Static { margin: 0 0 1 0; }
    """

    def __init__(self) -> None:
        super().__init__(id="sidebar")
        self.badge = Static(id="mode-badge")
        self.goal = Static(id="goal")
        self.todos = Static(id="todos")
        self.events = Static(id="events")

    def compose(self) -> Any:
        yield self.badge
        yield self.goal
        yield self.todos
        yield self.events

    def show(self, document: Mapping[str, Any], todos: TodoList) -> None:
        """Draw the session as its document and todo list say."""
        self.badge.update(mode_badge(document))
        self.goal.update(_goal(document))
        self.todos.update(todo_lines(todos))

    def show_events(self, events: Iterable[RecordedEvent]) -> None:
        """Draw the latest events (oldest first)."""
        self.events.update(_event_lines(events))
