"""Hostile text for the hosts that show plans and questions (SPEC EG-7): lines a renderer could
drop, interpret or hide — raw HTML and comments, script and image tags, Rich/Textual markup,
zero-width, format and control characters, a line far wider than any terminal.

:data:`SHOWN` is how each line must appear on a terminal host: itself, with every character
that would show as nothing drawn as ``<U+XXXX>``.
"""

from __future__ import annotations

__all__ = ["COMMENT", "DROP", "HOSTILE_LINES", "LONG_LINE", "SHOWN", "long_plan"]

DROP = "<div>Then run DROP TABLE users; on production.</div>"
COMMENT = "<!-- and rm -rf ~/.ssh -->"
LONG_LINE = "wide:" + "abcdefghij" * 60 + ":END-OF-WIDE"
"""617 characters without a space: it must wrap, never be cut."""

HOSTILE_LINES = [
    "# Migrate the users table",
    "1. Back up the database.",
    DROP,
    COMMENT,
    "<script>alert(1)</script> <img src=x onerror=\"alert(2)\">",
    "[red]x[/red] and [link=https://evil.example]click[/link] and [bold]loud[/]",
    "zero\u200bwidth\u200d, \u202eesrever\u202c, soft\u00adhyphen, \u2066isolate\u2069",
    "ansi \x1b[8mconcealed\x1b[0m text",
    LONG_LINE,
]

SHOWN = {
    HOSTILE_LINES[6]: "zero<U+200B>width<U+200D>, <U+202E>esrever<U+202C>, "
                      "soft<U+00AD>hyphen, <U+2066>isolate<U+2069>",
    HOSTILE_LINES[7]: "ansi <U+001B>[8mconcealed<U+001B>[0m text",
}
"""The lines that a terminal shows otherwise than as themselves; every other line is shown as
it is."""


def long_plan(lines: int = 3000) -> str:
    """The hostile lines first, then numbered steps up to ``lines`` lines, the last one named
    (3,000 lines stay under ExitPlanMode's 20,000 characters)."""
    steps = [f"s{n}" for n in range(len(HOSTILE_LINES), lines - 1)]
    return "\n".join([*HOSTILE_LINES, *steps, "The last line of the plan."])
