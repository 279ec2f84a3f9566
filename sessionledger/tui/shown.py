"""The TUI's one rule for showing log text (EG-7: text that is shown is text that is seen).

Everything the TUI draws from the log — a plan, a question, an option's label, description and
preview, a tool's input, a todo, a goal, an error message — goes through :func:`shown`, which
turns the text into a :class:`rich.text.Text` holding **every character of it, literally**:

* nothing is interpreted: no Markdown (Rich's Markdown drops raw HTML blocks, inline tags and
  comments, so ``<div>Then run DROP TABLE users;</div>`` or ``<!-- rm -rf ~/.ssh -->`` would
  vanish from a plan under approval), no Rich or Textual markup (``[red]x[/red]`` and
  ``[link=…]`` stay as typed), no emoji codes. HTML is visible text;
* a character that would show as nothing or move other text — control characters (ANSI
  escapes included), format characters (zero-width spaces and joiners, bidirectional
  overrides), line and paragraph separators, fillers and variation selectors (what
  :func:`sessionledger.tools.ask.visible` removes) — is drawn as a marked ``<U+200B>``, the way
  ``less`` shows it; ``\\r\\n`` is a line break and a tab stays a tab;
* long lines wrap (a word longer than the width is folded), they are never cut.

Styling only adds colour to characters that are there (:func:`plan_text` makes a Markdown
heading line bold); it never removes or reorders one, so what Enter approves is what was on
the screen (docs/decisions.md, "One rule for the text the TUI shows").
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

from rich.style import StyleType
from rich.text import Text

from ..tools.ask import visible

__all__ = ["MARK_STYLE", "mark", "plan_text", "shown"]

MARK_STYLE = "reverse"
"""How a marked character's ``<U+XXXX>`` is drawn."""

_KEPT = frozenset("\n\t")
_HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
_ASCII_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_HEADING = re.compile(r"^ {0,3}#{1,6}(\s|$)")


@lru_cache(maxsize=4096)
def _hidden(char: str) -> bool:
    """Whether ``char`` would show as nothing (or steer the terminal) if drawn as itself."""
    if char in _KEPT:
        return False
    if unicodedata.category(char) in _HIDDEN_CATEGORIES:
        return True
    return not char.isspace() and visible(char) == ""


def mark(char: str) -> str:
    """The visible stand-in of a hidden character: ``<U+200B>``."""
    return f"<U+{ord(char):04X}>"


def _hidden_pattern(text: str) -> re.Pattern[str] | None:
    if text.isascii():
        return _ASCII_CONTROLS if _ASCII_CONTROLS.search(text) else None
    found = sorted(c for c in set(text) if _hidden(c))
    if not found:
        return None
    return re.compile("[" + "".join(re.escape(c) for c in found) + "]")


def shown(text: object, style: StyleType = "") -> Text:
    """``text`` as a TUI widget displays it: every character, literally (see the module)."""
    source = str(text).replace("\r\n", "\n")
    result = Text(style=style, overflow="fold", no_wrap=False)
    pattern = _hidden_pattern(source)
    if pattern is None:
        result.append(source)
        return result
    at = 0
    for found in pattern.finditer(source):
        result.append(source[at:found.start()])
        result.append(mark(found.group()), style=MARK_STYLE)
        at = found.end()
    result.append(source[at:])
    return result


def plan_text(plan: str) -> Text:
    """A plan, every line as written: :func:`shown`, with Markdown heading lines in bold."""
    text = shown(plan)
    offset = 0
    for line in text.plain.split("\n"):
        if _HEADING.match(line):
            text.stylize("bold", offset, offset + len(line))
        offset += len(line) + 1
    return text
