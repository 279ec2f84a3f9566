"""``replay`` shows what a person was asked to approve or answer in full (SPEC EG-7, issue 23.1).

The hostile lines of :mod:`hostile_text` — the ones the TUI and web tests show — in a plan under
approval and in a question's text, header, option labels, descriptions and previews: the command
(run as the installed console script, its output piped) prints every one of them under its
timeline line, HTML and Rich markup as typed, and a character that would show as nothing or steer
the terminal as its ``<U+XXXX>`` mark — never the raw escape.
"""

from __future__ import annotations

from pathlib import Path

from hostile_text import COMMENT, DROP, HOSTILE_LINES, LONG_LINE, SHOWN
from test_cli import run_cli

from sessionledger import SessionService

QUESTION_LINES = [line for line in HOSTILE_LINES if len(line) < 200 and "<script>" not in line]
"""A preview may not hold ``<script>`` (AQ-1 refuses it); every other hostile line fits."""


def _record(path: Path) -> tuple[str, str]:
    """A session with the hostile plan submitted, one with the hostile question asked."""
    service = SessionService.open(f"sqlite:///{path}", workspace_root=path.parent)
    try:
        planned: str = service.create_session(mode="build", host="protocol")["sessionId"]
        service.tools.call(planned, "EnterPlanMode", {})
        service.tools.call(planned, "ExitPlanMode", {"plan": "\n".join(HOSTILE_LINES)})
        asked: str = service.create_session(mode="build", host="protocol")["sessionId"]
        service.tools.call(asked, "AskUserQuestion", {"questions": [{
            "question": f"Which one? {DROP}", "header": "[bold]x", "multiSelect": False,
            "options": [
                {"label": "Keep <b>it</b>", "description": COMMENT,
                 "preview": "\n".join(QUESTION_LINES[2:])},
                {"label": "Drop [red]all[/red]", "description": HOSTILE_LINES[6]},
            ],
        }]})
    finally:
        service.close()
    return planned, asked


def _seen(line: str) -> str:
    return SHOWN.get(line, line)


def test_replay_prints_a_hostile_plan_and_question_in_full(tmp_path: Path) -> None:  # EG-7
    path = tmp_path / "ledger.db"
    planned, asked = _record(path)
    url = f"sqlite:///{path}"

    plan = run_cli("replay", planned, "--db", url, cwd=tmp_path)
    assert plan.returncode == 0, plan.stderr
    assert "\x1b" not in plan.stdout and "\u202e" not in plan.stdout
    printed = [line.strip() for line in plan.stdout.splitlines()]
    at = next(i for i, line in enumerate(printed) if " PlanSubmitted " in f" {line} ")
    end = next(i for i in range(at + 1, len(printed)) if printed[i].split()[0].isdigit())
    body = printed[at + 1:end]
    expected = [_seen(line) for line in HOSTILE_LINES]
    assert HOSTILE_LINES[-1] == LONG_LINE
    assert body[:len(expected) - 1] == expected[:-1]  # every line, in order, as typed
    assert "".join(body[len(expected) - 1:]) == LONG_LINE  # folded, never cut

    question = run_cli("replay", asked, "--db", url, cwd=tmp_path)
    assert question.returncode == 0, question.stderr
    out = question.stdout
    assert "\x1b" not in out and "\u200b" not in out
    for text in (f"[[bold]x] Which one? {DROP}", f"1. Keep <b>it</b> — {COMMENT}",
                 f"2. Drop [red]all[/red] — {SHOWN[HOSTILE_LINES[6]]}",
                 *(f"| {_seen(line)}" for line in QUESTION_LINES[2:])):
        assert text in out, text

    events = run_cli("events", planned, "--db", url, cwd=tmp_path)
    assert events.returncode == 0, events.stderr
    assert "\u202e" not in events.stdout and "<U+202E>" in events.stdout
