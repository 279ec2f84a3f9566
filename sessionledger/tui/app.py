"""The terminal UI host (HO-1, TD-6, ES-4): ``sessionledger tui SESSION``.

An in-process approver over one :class:`~sessionledger.service.sessions.SessionService`: no
protocol,
no HTTP. It reads everything from the store — the session document, the todo list, the log —
and changes nothing except through the service calls the HTTP routes use: Shift+Tab is
``cycle_mode`` (the execution machine decides; a refusal such as ES-5's is shown, nothing is
appended), an answer is ``tools.respond`` (``modify`` with the answers filled in, ``approve``,
``feedback`` or ``deny``), user activity on a counting-down question is ``timers.activity``
(HO-5). It runs no timer scheduler: a TUI session's questions are never eligible for
auto-continue (HO-4), and the app waits forever. On a protocol session (whose questions a
running ``serve`` auto-continues) it draws the head's countdown from the absolute times of its
``autoResolution`` and an injectable clock, and "Unanswered — auto-continued" once the timer
answered (HO-4, HO-5, HO-7).

Every text from the log goes through :func:`.shown.shown` (EG-7). The queue header, the
countdown, the status line and the key hints stay put; only the head's panel scrolls
(PgUp/PgDn/Home/End). Below 120 columns the sidebar is narrow, below 60 it is hidden.

Refreshing is polling: every :data:`POLL_S` seconds the app reads the session's events after
the last ``seq`` it has seen (another process — ``serve``, ``call`` — may append to the same
database, which an in-process subscription would miss); when there are any it redraws from
the projections (docs/decisions.md D82).

Here too: the sidebar (the session, its todo list, its most recent events).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any, ClassVar

from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import Footer, Header, Static

from eventlog import Clock, RecordedEvent

from ..errors import SessionDeleted, SessionLedgerError
from ..service.documents import TodoList, client_name, occurred_at, session_name
from ..service.sessions import SessionService
from .panels import Answered, Engaged, InteractionPanel, Redrawn, panel_for
from .shown import shown

__all__ = [
    "PAGE",
    "POLL_S",
    "RECENT_EVENTS",
    "SessionApp",
    "Sidebar",
    "client_lines",
    "countdown_line",
    "mode_badge",
    "notice_line",
    "queue_lines",
    "run_tui",
    "todo_lines",
]


# -- the sidebar: the session, its todos, its recent events ------------------------------------
#
# The TUI's sidebar: mode badge, Goal, the todo list with its progress, the latest events.
#
# What a person glances at beside the approval queue (TD-6, ES-1, ES-4): the *display*
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
        text.append_text(shown(goal["objective"]))
    return text


def todo_lines(todos: TodoList) -> Text:
    """The todos with their progress headline, e.g. ``Todos 1/3 completed`` (TD-6)."""
    text = Text.assemble(("Todos ", "bold"), todos.progress)
    if not todos.items:
        text.append("\nno todos", style="dim")
    for item in todos.items:
        mark, style = _STATUS_MARK.get(item.status, ("?", ""))
        text.append(f"\n{mark} ", style=style)
        text.append_text(shown(item.content,
                               "strike dim" if item.status == "completed" else ""))
    return text


def client_lines(document: Mapping[str, Any]) -> Text:
    """``Client: Claude Code`` and its session id, for a session it created (CC-2, CC-9);
    nothing for the service's own sessions."""
    client = document.get("client")
    if client is None:
        return Text()
    text = Text.assemble(("Client: ", "bold"), shown(client_name(str(client))))
    external = document.get("externalSessionId")
    if external is not None:
        text.append("\n  ")
        text.append_text(shown(external, "dim"))
    return text


def _event_lines(events: Iterable[RecordedEvent]) -> Text:
    """The latest events, newest first: a short terminal cuts the oldest, never the newest."""
    text = Text.assemble(("Latest events", "bold"), (" (newest first)", "dim"))
    for event in reversed(list(events)):
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
    Sidebar #events { text-wrap: nowrap; text-overflow: ellipsis; }
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
        yield self.events  # above the todo list, whose length has no bound
        yield self.todos

    def show(self, document: Mapping[str, Any], todos: TodoList) -> None:
        """Draw the session as its document and todo list say."""
        origin = client_lines(document)
        self.client.update(origin)
        self.client.display = bool(origin.plain)
        self.badge.update(mode_badge(document))
        self.goal.update(_goal(document))
        self.todos.update(todo_lines(todos))

    def show_events(self, events: Iterable[RecordedEvent]) -> None:
        """Draw the latest events (newest first)."""
        self.events.update(_event_lines(events))


# -- the app -----------------------------------------------------------------------------------
#
# The terminal UI host (HO-1, TD-6, ES-4): ``sessionledger tui SESSION``.
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


QUEUE_SHOWN = 3
"""Queue entries listed under the header; the rest are counted (the header never moves)."""


def _summary(interaction: Mapping[str, Any]) -> Text:
    payload = interaction["payload"]
    if interaction["kind"] == "askUserQuestion":
        questions = payload.get("questions") or []
        first = questions[0]["question"] if questions else ""
        more = f" (+{len(questions) - 1} more)" if len(questions) > 1 else ""
        return Text.assemble("Question: ", shown(first), more)
    return shown(approval_label(interaction["kind"], payload))


def approval_label(kind: str, payload: Mapping[str, Any]) -> str:
    """An approval as the page names it: ``Plan approval``, ``Tool approval: Bash``."""
    if kind == "planApproval":
        return "Plan approval"
    return f"Tool approval: {payload.get('tool', 'a tool')}"


def queue_lines(interactions: list[dict[str, Any]]) -> Text:
    """The approval queue, head first: the head is the panel below (HO-4's FIFO order).
    At most :data:`QUEUE_SHOWN` entries, one line each; the others are counted."""
    if not interactions:
        return Text("Approval queue: nothing waits for you", style="dim")
    text = Text(f"Approval queue: {len(interactions)} waiting", style="bold")
    for position, interaction in enumerate(interactions[:QUEUE_SHOWN]):
        mark = "▶" if position == 0 else " "
        line = Text(f"{mark} {position + 1}. ", style="" if position == 0 else "dim")
        line.append_text(_summary(interaction))
        text.append("\n")
        text.append_text(line)
    if len(interactions) > QUEUE_SHOWN:
        text.append(f"\n  … and {len(interactions) - QUEUE_SHOWN} more", style="dim")
    return text


# -- the countdown and the auto-continued notice (HO-4, HO-5, HO-7) -----------------------


def _instant(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def _local_clock(moment: datetime) -> str:
    """An instant as this machine's local wall-clock time, ``HH:MM:SS``."""
    return moment.astimezone().strftime("%H:%M:%S")


def _minutes_seconds(seconds: float) -> str:
    total = max(0, int(-(-seconds // 1)))  # rounded up, like the web page's countdown
    return f"{total // 60}:{total % 60:02d}"


def countdown_line(timer: Mapping[str, Any] | None, now: datetime) -> Text | None:
    """What the head question's ``autoResolution`` shows at ``now``: nothing while there is no
    timer or during the silent grace (before ``visibleAt``); then the time left and the
    absolute deadline; ``Countdown paused`` once the user engaged (HO-5). Only the recorded
    absolute times are used, so a restart or a second TUI shows the same deadline (HO-7)."""
    if timer is None:
        return None
    state = timer.get("state")
    if state == "paused":
        return Text("Countdown paused — this question waits for your answer", style="yellow")
    if state not in ("hiddenGrace", "countdown"):
        return None
    if state == "hiddenGrace" and now < _instant(str(timer["visibleAt"])):
        return None
    deadline = _instant(str(timer["deadlineAt"]))
    left = (deadline - now).total_seconds()
    said = f"Auto-continues in {_minutes_seconds(left)}" if left > 0 else "Auto-continuing…"
    return Text.assemble((said, "bold yellow"), f" · deadline {_local_clock(deadline)}",
                         (f" ({timer['deadlineAt']})", "dim"))


Resolution = tuple[str, str, str]
"""The last resolution read from the log: interaction id, decision, ``recordedAt``."""


def notice_line(resolution: Resolution | None, questions: list[str]) -> Text | None:
    """``Unanswered — auto-continued at HH:MM:SS`` and the questions the timer answered, while
    the last interaction resolved in the session was resolved by the timer (HO-4, HO-8)."""
    if resolution is None or resolution[1] != "autoContinued":
        return None
    text = Text.assemble(("Unanswered — auto-continued", "bold"),
                         f" at {_local_clock(_instant(resolution[2]))}")
    for asked in questions:
        text.append("\n  · ")
        text.append_text(shown(asked))
    return text


class SessionApp(App[None]):
    """One session's sidebar, mode badge and approval queue."""

    TITLE = "sessionledger"
    ENABLE_COMMAND_PALETTE = False  # the keys are HO-1's and Shift+Tab; Ctrl+Q quits
    CSS = """
    #body { height: 1fr; }
    #main { width: 1fr; padding: 0 1; }
    #queue { height: auto; border-bottom: solid $primary; text-wrap: nowrap;
             text-overflow: ellipsis; }
    #countdown, #notice, #status { height: auto; }
    #panel-scroll { height: 1fr; }
    #panel-slot { height: auto; }
    #hints { height: auto; color: $text-muted; }
    Screen.-narrow #sidebar { width: 26; }
    Screen.-tiny #sidebar { display: none; }
    """
    HORIZONTAL_BREAKPOINTS = [  # noqa: RUF012 (Textual types it as an instance variable)
        (0, "-tiny"), (60, "-narrow"), (120, "-wide"),
    ]
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("shift+tab", "cycle_mode", "Cycle mode", priority=True),
    ]
    """PgUp/PgDn/Home/End (and Ctrl+Home/Ctrl+End) are the scroll container's own keys: the
    head's panel, which has the focus, sits in it and leaves them alone."""

    def __init__(
        self, service: SessionService, session_id: str, *, poll_s: float = POLL_S,
        clock: Clock | None = None,
    ) -> None:
        super().__init__()
        self.service = service
        self.session_id = session_id
        self.poll_s = poll_s
        self.clock: Clock = clock or service.timers.clock
        """What the countdown counts with (the service's clock unless a test injects one)."""
        self.asked: dict[str, list[str]] = {}
        """What each interaction read from the log asked: its question texts."""
        self.resolution: Resolution | None = None
        """The last ``InteractionResolved`` read from the log."""
        self.drawn: dict[str, Text | None] = {}
        """What the countdown and the notice show now (to redraw only changes)."""
        self.seen = 0
        """The last ``seq`` read from the log."""
        self.recent: deque[RecordedEvent] = deque(maxlen=RECENT_EVENTS)
        self.interactions: list[dict[str, Any]] = []
        self.panel: InteractionPanel | None = None
        self.paused: set[str] = set()
        """Interactions whose activity was recorded by this app (once each)."""
        self.sidebar = Sidebar()
        self.queue = Static(id="queue")
        self.countdown = Static(id="countdown")
        self.notice = Static(id="notice")
        self.status = Static(id="status")
        self.slot = Vertical(id="panel-slot")
        # Not focusable: the head's panel keeps every key (Tab cannot strand them).
        self.scroller = VerticalScroll(id="panel-scroll", can_focus=False)
        self.hints = Static(id="hints")
        self.countdown.display = self.notice.display = self.status.display = False

    def compose(self) -> ComposeResult:
        yield Header()
        with Horizontal(id="body"):
            yield self.sidebar
            with Vertical(id="main"):
                yield self.queue  # these stay put; only the panel scrolls
                yield self.countdown
                yield self.notice
                yield self.status
                with self.scroller:
                    yield self.slot
                yield self.hints
        yield Footer()

    def on_mount(self) -> None:
        summary = self.service.find_summary(self.session_id)  # its name, as the page shows it
        self.sub_title = session_name(summary) if summary is not None else self.session_id
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
            self.remember(fresh)
            self.reload()
        self.tick()

    def remember(self, events: Iterable[RecordedEvent]) -> None:
        """Keep what the notice needs: each interaction's questions, the last resolution."""
        for event in events:
            if event.type == "InteractionRequested":
                data = event.data
                payload = getattr(data, "payload", {})
                if getattr(data, "kind", "") == "askUserQuestion":
                    texts = [str(q.get("question", "")) for q in payload.get("questions") or []]
                else:
                    texts = [approval_label(str(getattr(data, "kind", "")), payload)]
                self.asked[str(getattr(data, "interaction_id", ""))] = texts
            elif event.type == "InteractionResolved":
                data = event.data
                self.resolution = (str(getattr(data, "interaction_id", "")),
                                   str(getattr(data, "decision", "")), event.recorded_at)

    def tick(self) -> None:
        """Redraw the countdown at the clock's time, and the auto-continued notice."""
        head = self.interactions[0] if self.interactions else None
        line = countdown_line(head["autoResolution"] if head else None, self.clock.now())
        self._show(self.countdown, line)
        questions = self.asked.get(self.resolution[0], []) if self.resolution else []
        self._show(self.notice, notice_line(self.resolution, questions))

    def _show(self, widget: Static, text: Text | None) -> None:
        """Show ``text`` in ``widget`` (hide it for ``None``); update only what changed."""
        widget.display = text is not None
        key = str(widget.id)
        if text is not None and text != self.drawn.get(key):
            widget.update(text)
        self.drawn[key] = text

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
            self.scroller.scroll_home(animate=False)
            self.call_after_refresh(self.panel.focus)
        if head is None:
            self.hints.update("")

    def on_redrawn(self, message: Redrawn) -> None:
        """The head's panel redrew: its key hints, in the line that does not scroll (a panel
        already replaced is not the head's)."""
        if self.panel is not None and message.interaction_id == self.panel.interaction_id:
            self.hints.update(Text(message.hints))

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
            self.service.tools.respond(
                self.session_id, message.interaction_id, message.decision,
                input=message.input, feedback=message.feedback,
            )
        except SessionLedgerError as exc:
            self.say(exc.message, error=True)
            self.poll()
            return
        self.say(_answered_words(message.decision, self._kind(message.interaction_id)))
        self.poll()

    def _kind(self, interaction_id: str) -> str:
        return next((str(i["kind"]) for i in self.interactions
                     if i["interactionId"] == interaction_id), "")

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
        self.status.update(shown(text, "bold red" if error else "green"))
        self.status.display = True


def _answered_words(decision: str, kind: str) -> str:
    """What the page says once an answer is sent (its toasts' titles)."""
    if decision == "modify":
        return "Answers sent"
    if kind == "planApproval":
        return {"approve": "Plan approved", "feedback": "Feedback sent; Plan stays on",
                "deny": "Plan rejected"}.get(decision, "Answer sent")
    if kind == "askUserQuestion":
        return "Declined to answer" if decision == "deny" else "Answer sent"
    return {"approve": "Approved: the tool runs", "deny": "Rejected: the tool does not run"}.get(
        decision, "Answer sent")


def run_tui(service: SessionService, session_id: str) -> None:
    """Run the app on a terminal until the user quits (Ctrl+Q)."""
    service.require_live(session_id)
    SessionApp(service, session_id).run()
