"""The approval queue's panels: a question's questionnaire, or an ordinary approval request.

One panel shows the head of the session's interaction queue (HO-1). A panel owns no
rules and does no I/O: it feeds keys to its pure state (:mod:`.questionnaire`,
:mod:`.approval`), draws it, opens a text field when the user types Other or feedback, and
posts what the user decided as an :class:`Answered` message — the app answers it through the
same service call as HTTP's respond route. User actions are posted as :class:`Engaged` so
the app can record HO-5 activity. While the text field is open it gets every key; Escape
there closes the field (it does not reject the question).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.text import Text
from textual import events
from textual.containers import Vertical
from textual.message import Message
from textual.widgets import Input, Static

from eventlog import UserActivityAction

from ..tools.ask import HEADER_CHIP_WIDTH
from ..tools.executor import Decision
from .questionnaire import Approval, ApprovalEffect, Effect, Questionnaire
from .shown import plan_text, shown

__all__ = [
    "APPROVAL_HINTS",
    "Answered",
    "ApprovalPanel",
    "CONFIRM_HINTS",
    "Engaged",
    "InteractionPanel",
    "QUESTION_HINTS",
    "QuestionPanel",
    "Redrawn",
    "SCROLL_HINTS",
    "panel_for",
    "render_questionnaire",
]

_ACTIVITY: dict[str, UserActivityAction] = {
    "moved": "move", "selected": "select", "type_other": "type",
}


class Answered(Message):
    """The user answered the interaction: the app calls the service's respond."""

    def __init__(
        self, interaction_id: str, decision: Decision, *,
        input: dict[str, Any] | None = None, feedback: str | None = None,
    ) -> None:
        super().__init__()
        self.interaction_id = interaction_id
        self.decision: Decision = decision
        self.input = input
        self.feedback = feedback


class Engaged(Message):
    """The user acted on the interaction (moved, selected, typed): HO-5 activity."""

    def __init__(self, interaction_id: str, action: UserActivityAction) -> None:
        super().__init__()
        self.interaction_id = interaction_id
        self.action: UserActivityAction = action


SCROLL_HINTS = "PgUp PgDn Home End scroll"
"""The app's scroll keys, named in every panel's key hints."""
QUESTION_HINTS = (
    "↑↓/j k move · 1-9 pick · space toggle · o Other · s skip · Enter review · Esc reject"
)
CONFIRM_HINTS = "Enter submit · ↑↓/j k back to the questions · Esc reject"
APPROVAL_HINTS = "↑↓/j k move · 1-9 pick · Enter choose · Esc reject"


class Redrawn(Message):
    """The panel drew its state anew: the app redraws the key hints it names."""

    def __init__(self, interaction_id: str, hints: str) -> None:
        super().__init__()
        self.interaction_id = interaction_id
        self.hints = hints


class InteractionPanel(Vertical, can_focus=True):
    """A focusable panel for one pending interaction, with an optional text field.

    Its key hints (:attr:`hints`) are drawn by the app in a line that never scrolls away.
    """

    HINTS = "Esc reject"

    DEFAULT_CSS = """
    InteractionPanel { height: auto; padding: 0 1; }
    InteractionPanel:focus { background: $boost; }
    InteractionPanel Input { margin: 1 0 0 0; }
    InteractionPanel .panel-plan { border: round $secondary; padding: 0 1; height: auto; }
    """

    def __init__(self, interaction: Mapping[str, Any]) -> None:
        super().__init__(classes="interaction-panel")
        self.interaction_id = str(interaction["interactionId"])
        self.kind = str(interaction["kind"])
        self.payload: Mapping[str, Any] = interaction["payload"]
        self.body = Static(classes="panel-body")
        self.field: Input | None = None

    def compose(self) -> Any:
        yield self.body

    def on_mount(self) -> None:
        self.redraw()

    def redraw(self) -> None:
        self.body.update(self.render_state())
        self.post_message(Redrawn(self.interaction_id, self.hints))

    def render_state(self) -> RenderableType:
        raise NotImplementedError

    @property
    def hints(self) -> str:
        """The keys this panel takes now, and the scroll keys."""
        return f"{self.HINTS} · {SCROLL_HINTS}"

    def apply_key(self, key: str) -> bool:
        """Apply a key to the state; whether the panel used it."""
        raise NotImplementedError

    def field_done(self, text: str) -> None:
        """The text field was submitted with ``text``."""
        raise NotImplementedError

    def on_key(self, event: events.Key) -> None:
        if self.field is not None:  # typing: the field has every key but Escape
            if event.key == "escape":
                event.stop()
                event.prevent_default()
                self.close_field()
            elif not self.field.has_focus:  # focus wandered off (Tab): back to typing
                self.field.focus()
            return
        if self.apply_key(event.key):
            event.stop()
            event.prevent_default()
            self.redraw()

    def open_field(self, placeholder: str, value: str = "") -> None:
        self.close_field()
        self.field = Input(value=value, placeholder=placeholder, classes="panel-field")
        self.mount(self.field)
        self.field.focus()

    def close_field(self) -> None:
        if self.field is not None:
            self.field.remove()
            self.field = None
            self.focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        text = event.value
        self.close_field()
        self.field_done(text)
        self.redraw()

    def engaged(self, action: UserActivityAction) -> None:
        self.post_message(Engaged(self.interaction_id, action))

    def answer(
        self, decision: Decision, *, input: dict[str, Any] | None = None,
        feedback: str | None = None,
    ) -> None:
        self.post_message(
            Answered(self.interaction_id, decision, input=input, feedback=feedback)
        )


class QuestionPanel(InteractionPanel):
    """The questionnaire of an AskUserQuestion (HO-1)."""

    HINTS = QUESTION_HINTS

    def __init__(self, interaction: Mapping[str, Any]) -> None:
        super().__init__(interaction)
        self.state = Questionnaire.from_payload(self.payload)

    def render_state(self) -> RenderableType:
        return render_questionnaire(self.state)

    @property
    def hints(self) -> str:
        keys = CONFIRM_HINTS if self.state.confirming else QUESTION_HINTS
        return f"{keys} · {SCROLL_HINTS}"

    def apply_key(self, key: str) -> bool:
        effect: Effect = self.state.press(key)
        if effect == "none":
            return False
        if effect in _ACTIVITY:
            self.engaged(_ACTIVITY[effect])
        if effect == "type_other":
            question = self.state.questions[self.state.current]
            other = self.state.states[self.state.current].other or ""
            self.open_field(f"Other: your answer to {shown(question.text).plain!r}", other)
        elif effect == "submit":
            self.answer("modify", input=self.state.modify_input(self.payload["questions"]))
        elif effect == "reject":
            self.answer("deny")
        return True

    def field_done(self, text: str) -> None:
        self.state.type_other(text)


class ApprovalPanel(InteractionPanel):
    """An ordinary approval request: a plan approval on the TUI (PM-6), or a tool's."""

    HINTS = APPROVAL_HINTS

    def __init__(self, interaction: Mapping[str, Any]) -> None:
        super().__init__(interaction)
        self.state = Approval.for_kind(self.kind)
        self.request = Static(classes="panel-request")
        self.plan = Static(classes="panel-plan")
        self.plan.border_title = "Plan"
        self.plan.display = False
        """What is asked (the plan, or the tool's input): drawn once, as a long plan is
        expensive to lay out; only the choices below are redrawn on a key."""

    def compose(self) -> Any:
        yield self.request
        yield self.plan
        yield self.body

    def on_mount(self) -> None:
        self.request.update(self.render_request())
        super().on_mount()

    def render_request(self) -> RenderableType:
        parts: list[RenderableType] = []
        if self.kind == "planApproval":  # the page's words: "Plan approval", its question
            questions = self.payload.get("questions") or [{}]
            asked = questions[0].get("question") if isinstance(questions[0], dict) else None
            parts.append(Text.assemble(("Plan approval", "bold"), "\n", shown(
                asked if isinstance(asked, str) and asked else "Review this implementation plan.")))
            # Every line as written: no Markdown, which would drop HTML (EG-7).
            self.plan.update(plan_text(str(self.payload.get("plan", ""))))
            self.plan.display = True
            for prompt in self.payload.get("allowedPrompts") or []:
                parts.append(Text.assemble(
                    "  asks to allow ", shown(prompt.get("tool")), ": ",
                    shown(prompt.get("prompt")),
                ))
        else:
            parts.append(Text.assemble(("Tool approval: ", "bold"), shown(
                self.payload.get("tool", "a tool"), style="bold"), " asks to run"))
            asked = json.dumps(self.payload.get("input", {}), ensure_ascii=False, indent=2)
            parts.append(Panel(shown(asked), title="Input"))
        return Group(*parts)

    def render_state(self) -> RenderableType:
        parts: list[RenderableType] = []
        for row, (_choice, label) in enumerate(self.state.choices):
            mark = "▸" if row == self.state.cursor else " "
            style = "reverse" if row == self.state.cursor else ""
            parts.append(Text(f"{mark} {row + 1}. {label}", style=style))
        if self.state.cursor is None:
            numbers = ", ".join(str(n) for n in range(1, len(self.state.choices) + 1))
            parts.append(Text(f"Nothing is chosen yet: press {numbers}, or move to a choice "
                              "and press Enter", style="dim"))
        return Group(*parts)

    def apply_key(self, key: str) -> bool:
        effect: ApprovalEffect = self.state.press(key)
        if effect == "none":
            return False
        if effect == "approve":
            self.answer("approve")
        elif effect == "reject":
            self.answer("deny")
        elif effect == "type_feedback":
            self.open_field("Feedback: what should change in the plan? (Enter sends)")
        return True

    def field_done(self, text: str) -> None:
        self.answer("feedback", feedback=text)


def panel_for(interaction: Mapping[str, Any]) -> InteractionPanel:
    """The panel that shows ``interaction``: questions get the questionnaire."""
    if interaction["kind"] == "askUserQuestion":
        return QuestionPanel(interaction)
    return ApprovalPanel(interaction)


# -- drawing the questionnaire ------------------------------------------------------------


def render_questionnaire(state: Questionnaire) -> RenderableType:
    """The question page (every question, cursor, choices) or the confirmation page."""
    if state.confirming:
        return _confirmation(state)
    parts: list[RenderableType] = []
    for index, question in enumerate(state.questions):
        chip = question.header[:HEADER_CHIP_WIDTH]
        kind = "several answers" if question.multi_select else "one answer"
        title = Text.assemble(shown(f" {chip} ", "reverse bold"), " ",
                              shown(question.text, "bold"), (f"  ({kind})", "dim"))
        if state.states[index].skipped:
            title.append("  skipped", style="italic yellow")
        parts.append(title)
        parts.extend(_option_lines(state, index))
        parts.append(Text(""))
    preview = _cursor_preview(state)
    if preview is not None:
        parts.append(Panel(shown(preview), title="Preview"))
    return Group(*parts)


def _option_lines(state: Questionnaire, index: int) -> list[Text]:
    question, answer = state.questions[index], state.states[index]
    lines = []
    for row in range(question.rows):
        here = state.cursor == (index, row)
        if row == question.other_row:
            picked = answer.other is not None
            label = "Other" + (f": {answer.other}" if picked else "…")
            description = ""
        else:
            picked = row in answer.chosen
            label, description = question.labels[row], question.descriptions[row]
        box = ("[x]" if picked else "[ ]") if question.multi_select else (
            "(•)" if picked else "( )")
        line = Text(f"{'▸' if here else ' '} {row + 1}. {box} ")
        line.append_text(shown(label))
        if description:
            line.append(" — ", style="dim")
            line.append_text(shown(description, "dim"))
        if here:
            line.stylize("reverse")
        lines.append(line)
    return lines


def _cursor_preview(state: Questionnaire) -> str | None:
    index, row = state.cursor
    question = state.questions[index]
    return question.previews[row] if row < len(question.previews) else None


def _confirmation(state: Questionnaire) -> RenderableType:
    parts: list[RenderableType] = [Text("Review your answers", style="bold")]
    for index, question in enumerate(state.questions):
        parts.append(Text.assemble("  ", shown(question.text), " → ",
                                   shown(state.status(index), "bold")))
    return Group(*parts)
