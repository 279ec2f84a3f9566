"""The terminal UI host (SPEC HO-1, TD-6, ES-4): ``sessionledger tui SESSION``.

An in-process approver over one :class:`~sessionledger.service.sessions.SessionService`: no
protocol,
no HTTP. It reads everything from the store — the session document, the todo list, the log —
and changes nothing except through the service calls the HTTP routes use: Shift+Tab is
``cycle_mode`` (the execution machine decides; a refusal such as ES-5's is shown, nothing is
appended), an answer is ``tools.respond`` (``modify`` with the answers filled in, ``approve``,
``feedback`` or ``deny``), user activity on a counting-down question is ``timers.activity``
(HO-5). It runs no timer scheduler: a TUI session's questions are never eligible for
auto-continue (HO-4), and the app waits forever.

Refreshing is polling: every :data:`POLL_S` seconds the app reads the session's events after
the last ``seq`` it has seen (another process — ``serve``, ``call`` — may append to the same
database, which an in-process subscription would miss); when there are any it redraws from
the projections (docs/decisions.md D82).

Here too: the sidebar (the session, its todo list, its most recent events).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping
from typing import Any, ClassVar

from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import Footer, Header, Static

from eventlog import RecordedEvent

from ..errors import SessionDeleted, SessionLedgerError
from ..service.documents import TodoList, client_name, occurred_at
from ..service.sessions import SessionService
from .panels import Answered, Engaged, InteractionPanel, panel_for

__all__ = [
    "PAGE",
    "POLL_S",
    "RECENT_EVENTS",
    "SessionApp",
    "Sidebar",
    "client_lines",
    "mode_badge",
    "queue_lines",
    "run_tui",
    "todo_lines",
]


# -- the sidebar: the session, its todos, its recent events ------------------------------------
#
# The TUI's sidebar: mode badge, Goal, the todo list with its progress, the latest events.
#
# What a person glances at beside the approval queue (SPEC TD-6, ES-1, ES-4): the *display*
# mode as a badge (``plan`` when Plan is on, with the mode underneath named), the active Goal,
# the session's todos in list order with "completed/total" progress — the same text the
# ``sessionledger todos`` command prints — and the last few events the app has seen in the log
# (seq, type, actor; ``sessionledger replay`` tells the whole story). A session another program
# created names it and its session id there, and an event its host timed itself (an imported
# transcript's) shows that time (CC-9). It only draws what the app hands it (the session
# document, the todo list, events); it reads nothing itself.

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


def client_lines(document: Mapping[str, Any]) -> Text:
    """``Client: Claude Code`` and its session id, for a session it created (CC-2, CC-9);
    nothing for the service's own sessions."""
    client = document.get("client")
    if client is None:
        return Text()
    text = Text.assemble(("Client: ", "bold"), client_name(str(client)))
    external = document.get("externalSessionId")
    if external is not None:
        text.append(f"\n  {external}", style="dim")
    return text


def _event_lines(events: Iterable[RecordedEvent]) -> Text:
    text = Text.assemble(("Latest events", "bold"))
    for event in events:
        text.append(f"\n{event.seq:>4} ", style="dim")
        text.append(event.type)
        text.append(f" by {event.actor}", style="dim")
        occurred = occurred_at(event)
        if occurred is not None:  # the host's own time (CC-9)
            text.append(f"\n     occurred {occurred}", style="dim")
    return text


class Sidebar(Vertical):
    """The left column of the app."""

    DEFAULT_CSS = """
    Sidebar { width: 40; border-right: solid $primary; padding: 0 1; }
    Sidebar Static { margin: 0 0 1 0; }
    """

    def __init__(self) -> None:
        super().__init__(id="sidebar")
        self.client = Static(id="client")
        self.client.display = False  # shown for a session another program created
        self.badge = Static(id="mode-badge")
        self.goal = Static(id="goal")
        self.todos = Static(id="todos")
        self.events = Static(id="events")

    def compose(self) -> Any:
        yield self.client
        yield self.badge
        yield self.goal
        yield self.todos
        yield self.events

    def show(self, document: Mapping[str, Any], todos: TodoList) -> None:
        """Draw the session as its document and todo list say."""
        origin = client_lines(document)
        self.client.update(origin)
        self.client.display = bool(origin.plain)
        self.badge.update(mode_badge(document))
        self.goal.update(_goal(document))
        self.todos.update(todo_lines(todos))

    def show_events(self, events: Iterable[RecordedEvent]) -> None:
        """Draw the latest events (oldest first)."""
        self.events.update(_event_lines(events))


# -- the app -----------------------------------------------------------------------------------
#
# The terminal UI host (SPEC HO-1, TD-6, ES-4): ``sessionledger tui SESSION``.
#
# An in-process approver over one :class:`~sessionledger.service.sessions.SessionService`: no
# protocol,
# no HTTP. It reads everything from the store — the session document, the todo list, the log —
# and changes nothing except through the service calls the HTTP routes use: Shift+Tab is
# ``cycle_mode`` (the execution machine decides; a refusal such as ES-5's is shown, nothing is
# appended), an answer is ``tools.respond`` (``modify`` with the answers filled in, ``approve``,
# ``feedback`` or ``deny``), user activity on a counting-down question is ``timers.activity``
# (HO-5). It runs no timer scheduler: a TUI session's questions are never eligible for
# auto-continue (HO-4), and the app waits forever.
#
# Refreshing is polling: every :data:`POLL_S` seconds the app reads the session's events after
# the last ``seq`` it has seen (another process — ``serve``, ``call`` — may append to the same
# database, which an in-process subscription would miss); when there are any it redraws from
# the projections (docs/decisions.md D82).

POLL_S = 0.25
"""Seconds between two looks at the log for new events."""
PAGE = 500
"""Events read per query while catching up."""

_RUNNING = frozenset({"hiddenGrace", "countdown"})
"""Timer states that user activity pauses (HO-5)."""


def _summary(interaction: Mapping[str, Any]) -> str:
    payload = interaction["payload"]
    if interaction["kind"] == "askUserQuestion":
        questions = payload.get("questions") or []
        first = questions[0]["question"] if questions else ""
        more = f" (+{len(questions) - 1} more)" if len(questions) > 1 else ""
        return f"AskUserQuestion: {first}{more}"
    if interaction["kind"] == "planApproval":
        return f"{payload.get('tool', 'ExitPlanMode')}: plan approval"
    return f"{payload.get('tool', 'tool')}: approval"


def queue_lines(interactions: list[dict[str, Any]]) -> Text:
    """The approval queue, head first: the head is the panel below (HO-4's FIFO order)."""
    if not interactions:
        return Text("Approval queue: nothing waits for you", style="dim")
    text = Text(f"Approval queue: {len(interactions)} waiting", style="bold")
    for position, interaction in enumerate(interactions):
        mark = "▶" if position == 0 else " "
        text.append(f"\n{mark} {position + 1}. {_summary(interaction)}",
                    style="" if position == 0 else "dim")
    return text


class SessionApp(App[None]):
    """One session's sidebar, mode badge and approval queue."""

    TITLE = "sessionledger"
    ENABLE_COMMAND_PALETTE = False  # the keys are HO-1's and Shift+Tab; Ctrl+Q quits
    CSS = """
    #main { width: 1fr; padding: 0 1; }
    #queue { height: auto; margin: 0 0 1 0; }
    #status { height: auto; margin: 0 0 1 0; }
    #panel-slot { height: auto; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("shift+tab", "cycle_mode", "Cycle mode", priority=True),
    ]

    def __init__(
        self, service: SessionService, session_id: str, *, poll_s: float = POLL_S
    ) -> None:
        super().__init__()
        self.service = service
        self.session_id = session_id
        self.poll_s = poll_s
        self.seen = 0
        """The last ``seq`` read from the log."""
        self.recent: deque[RecordedEvent] = deque(maxlen=RECENT_EVENTS)
        self.interactions: list[dict[str, Any]] = []
        self.panel: InteractionPanel | None = None
        self.paused: set[str] = set()
        """Interactions whose activity was recorded by this app (once each)."""
        self.sidebar = Sidebar()
        self.queue = Static(id="queue")
        self.status = Static(id="status")
        self.slot = Vertical(id="panel-slot")

    def compose(self) -> ComposeResult:
        yield Header()
        with Horizontal():
            yield self.sidebar
            # Not focusable: the head's panel keeps every key (Tab cannot strand them).
            with VerticalScroll(id="main", can_focus=False):
                yield self.queue
                yield self.status
                yield self.slot
        yield Footer()

    def on_mount(self) -> None:
        self.sub_title = self.session_id
        self.poll()
        self.set_interval(self.poll_s, self.poll)

    # -- reading -------------------------------------------------------------------------

    def poll(self) -> None:
        """Read the events after the last seen ``seq``; redraw when there were any."""
        fresh: list[RecordedEvent] = []
        try:
            while True:
                page = self.service.session_page(self.session_id, after=self.seen, limit=PAGE)
                if not page:
                    break
                fresh.extend(page)
                self.seen = page[-1].seq
        except SessionLedgerError as exc:
            self.say(exc.message, error=True)
        if fresh:
            self.recent.extend(fresh)
            self.reload()

    def reload(self) -> None:
        """Redraw the sidebar and the queue from the projections."""
        try:
            document = self.service.document(self.session_id)
            todos = self.service.todos.current(self.session_id)
        except SessionDeleted:
            self.say("This session was deleted; nothing can be answered.", error=True)
            self.show_queue([])
            return
        except SessionLedgerError as exc:
            self.say(exc.message, error=True)
            return
        self.sidebar.show(document, todos)
        self.sidebar.show_events(self.recent)
        self.show_queue(document["interactions"])

    def show_queue(self, interactions: list[dict[str, Any]]) -> None:
        """List the queue; show the head's panel (a new one only when the head changed)."""
        self.interactions = interactions
        self.queue.update(queue_lines(interactions))
        head = interactions[0] if interactions else None
        if self.panel is not None and (head is None or head["interactionId"]
                                       != self.panel.interaction_id):
            self.panel.remove()
            self.panel = None
        if head is not None and self.panel is None:
            self.panel = panel_for(head)
            self.slot.mount(self.panel)
            self.call_after_refresh(self.panel.focus)

    # -- acting --------------------------------------------------------------------------

    def action_cycle_mode(self) -> None:
        """Shift+Tab (ES-4) through the execution machine; a refusal is shown (ES-5)."""
        try:
            document = self.service.cycle_mode(self.session_id)
        except SessionLedgerError as exc:
            self.say(exc.message, error=True)
            return
        self.say(f"Mode: {document['displayMode']}")
        self.poll()

    def on_answered(self, message: Answered) -> None:
        """The same service call as ``POST …/interactions/{iid}/respond``."""
        try:
            done = self.service.tools.respond(
                self.session_id, message.interaction_id, message.decision,
                input=message.input, feedback=message.feedback,
            )
        except SessionLedgerError as exc:
            self.say(exc.message, error=True)
            self.poll()
            return
        outcome = "succeeded" if done.get("success") else "did not succeed"
        self.say(f"Answered {done.get('callId')} ({message.decision}): the call {outcome}.")
        self.poll()

    def on_engaged(self, message: Engaged) -> None:
        """HO-5: the first action on a question whose countdown runs pauses it for good."""
        iid = message.interaction_id
        if iid in self.paused:
            return
        timer = next((i["autoResolution"] for i in self.interactions
                      if i["interactionId"] == iid), None)
        if timer is None or timer.get("state") not in _RUNNING:
            return
        self.paused.add(iid)
        try:
            self.service.timers.activity(self.session_id, iid, message.action)
        except SessionLedgerError as exc:
            self.say(exc.message, error=True)
        self.poll()

    def say(self, text: str, *, error: bool = False) -> None:
        """One status line above the panel (errors in red)."""
        self.status.update(Text(text, style="bold red" if error else "green"))


def run_tui(service: SessionService, session_id: str) -> None:
    """Run the app on a terminal until the user quits (Ctrl+Q)."""
    service.require_live(session_id)
    SessionApp(service, session_id).run()
