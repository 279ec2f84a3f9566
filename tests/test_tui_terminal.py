"""The TUI in a real terminal: ``sessionledger tui`` inside tmux at 80x24 (SPEC EG-7; issue 23
items 1 and 5).

A real SQLite file holds a plan under approval with hostile lines; the real command runs in a
tmux session of a tmux server of its own (``-L``), and ``tmux capture-pane -p`` reads what is
on the screen. Without tmux the test is skipped with the reason — unless ``CI=true``, where it
fails (``.ci/run`` installs tmux). Every captured screen is kept as text under
``test-artifacts/tui/<test>/`` (ignored by git).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from hostile_text import COMMENT, HOSTILE_LINES, SHOWN
from server_support import sessionledger_command
from tui_support import opened, resolutions

ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = ROOT / "test-artifacts" / "tui"
TMUX = shutil.which("tmux")
WAIT_S = 30.0
"""How long a screen may take to show what a step waits for (the command starts Textual)."""


def _skip_or_fail(reason: str) -> None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"the TUI's terminal test must run on CI: {reason}", pytrace=False)
    pytest.skip(f"TUI terminal test skipped: {reason}")


class Terminal:
    """One tmux server (socket of its own) with the command in its only window."""

    def __init__(self, tmux: str, artifacts: Path) -> None:
        self.tmux = tmux
        self.socket = f"sessionledger-test-{uuid.uuid4().hex[:12]}"
        self.artifacts = artifacts
        self.shots = 0

    def run(self, *args: str) -> str:
        done = subprocess.run([self.tmux, "-u", "-L", self.socket, "-f", os.devnull, *args],
                              capture_output=True, text=True, timeout=30, check=True)
        return done.stdout

    def start(self, command: list[str], cwd: Path) -> None:
        env = [f"-e{name}={os.environ[name]}" for name in ("PYTHONPATH", "PATH")
               if name in os.environ] + ["-eLANG=C.UTF-8", "-eTERM=tmux-256color",
                                           # no smooth scrolling: a capture of a loaded
                                           # machine never lands between two frames of it
                                           "-eTEXTUAL_ANIMATIONS=none"]
        self.run("new-session", "-d", "-s", "tui", "-x", "80", "-y", "24", "-c", str(cwd),
                 *env, subprocess.list2cmdline(command))

    def capture(self) -> list[str]:
        return self.run("capture-pane", "-p", "-t", "tui").splitlines()

    def wait_for(self, ready: Callable[[list[str]], bool], name: str) -> list[str]:
        """Capture until ``ready(screen)`` holds on a screen that stopped changing (drawing and
        scrolling done); keep it as ``NN-name.txt``."""
        deadline = time.monotonic() + WAIT_S
        previous: list[str] = []
        same = 0
        while True:
            rows = self.capture()
            same = same + 1 if rows == previous else 0
            if (ready(rows) and same >= 2) or time.monotonic() > deadline:
                break
            previous = rows
            time.sleep(0.15)
        self.shots += 1
        self.artifacts.mkdir(parents=True, exist_ok=True)
        (self.artifacts / f"{self.shots:02d}-{name}.txt").write_text(
            "\n".join(rows) + "\n", encoding="utf-8")
        assert ready(rows), f"the screen never showed {name!r}:\n" + "\n".join(rows)
        return rows

    def keys(self, *keys: str) -> None:
        self.run("send-keys", "-t", "tui", *keys)

    def kill(self) -> None:
        subprocess.run([self.tmux, "-L", self.socket, "kill-server"], capture_output=True,
                       timeout=30, check=False)


@contextmanager
def terminal(name: str) -> Iterator[Terminal]:
    if TMUX is None:
        _skip_or_fail("tmux is not installed (apt-get install tmux)")
    assert TMUX is not None
    artifacts = ARTIFACTS / name
    shutil.rmtree(artifacts, ignore_errors=True)
    term = Terminal(TMUX, artifacts)
    try:
        yield term
    finally:
        term.kill()


def _has(text: str) -> Callable[[list[str]], bool]:
    return lambda rows: any(text in row for row in rows)


def _plan_rows(rows: list[str]) -> list[str]:
    """The rows inside the plan's box (right of the sidebar's border), in screen order."""
    return [m.group(1) for row in rows if (m := re.search(r"│\s*│ (.*?) *│", row))]


def _merged(seen: list[str], fresh: list[str]) -> list[str]:
    """``seen`` and then the rows of ``fresh`` it does not end with (a page may overlap)."""
    for k in range(min(len(seen), len(fresh)), 0, -1):
        if seen[-k:] == fresh[:k]:
            return seen + fresh[k:]
    return seen + fresh


def _stray_enter_chooses_nothing(term: Terminal, tmp_path: Path, session: str) -> None:
    """Enter on an approval where nothing is chosen yet: still waiting, nothing recorded."""
    term.keys("Enter")
    time.sleep(0.5)
    assert any("Approval queue: 1 waiting" in row for row in term.capture())
    with opened(tmp_path) as service:
        assert resolutions(service, session) == []


def test_eg7_the_tui_in_tmux_shows_a_hostile_plan_and_records_what_it_showed(
    tmp_path: Path,
) -> None:  # EG-7, issue 23.1, issue 23.5
    plan = "\n".join([*HOSTILE_LINES, *(f"step {n}" for n in range(1, 41)), "The last line."])
    with opened(tmp_path) as service:
        session = service.create_session(host="tui", mode="plan")["sessionId"]
        assert service.tools.call(session, "ExitPlanMode", {"plan": plan}).status_code == 202
    db = f"sqlite:///{tmp_path / 'ledger.db'}"

    with terminal("test_eg7_the_tui_in_tmux_shows_a_hostile_plan") as term:
        term.start([*sessionledger_command(), "tui", session, "--db", db], cwd=tmp_path)
        first = term.wait_for(_has("Then run DROP TABLE users;"), "plan-under-approval")
        assert any(COMMENT in row for row in first)
        assert any("Approval queue: 1 waiting" in row for row in first)
        assert any("PgDn" in row for row in first) and any("End" in row for row in first)
        assert len(first) == 24 and all(len(row) <= 80 for row in first)
        # Page through the plan to its last line: every line was on the screen, in order.
        seen, rows = _plan_rows(first), first
        for page in range(1, 40):
            if any("The last line." in row for row in rows):
                break
            before = _plan_rows(rows)
            term.keys("PageDown")
            rows = term.wait_for(lambda r, before=before: _plan_rows(r) != before, f"page-{page}")
            assert any("Approval queue: 1 waiting" in row for row in rows)  # never scrolls off
            seen = _merged(seen, _plan_rows(rows))
        shown = "".join("".join(seen).split())
        for line in plan.split("\n"):
            expected = "".join(SHOWN.get(line, line).split())
            assert expected in shown, line
        _stray_enter_chooses_nothing(term, tmp_path, session)
        term.keys("1")  # Approve
        done = term.wait_for(_has("nothing waits for you"), "approved")
        assert not any("Enter choose" in row for row in done)
        assert any("Plan approved" in row for row in done)  # the page's words

    with opened(tmp_path) as service:
        (resolved,) = resolutions(service, session)
        assert resolved["decision"] == "approve"
        workspace = Path(service.document(session)["workspace"])
        written = workspace / ".zcode" / "plans" / f"plan-{session}.md"
        assert written.read_text(encoding="utf-8") == plan  # what was shown is what is recorded


def test_at_80x24_the_newest_event_shows_and_the_words_are_the_pages(tmp_path: Path) -> None:
    """A session with a long todo list and many events, a question and a plan waiting, in a
    real 80x24 terminal: the newest event is on screen (never the one cut off), the queue
    and panel speak as the page does (no tool names, no call ids), and nothing is chosen for
    the user (issue 42)."""
    with opened(tmp_path) as service:
        session = service.create_session(host="tui", mode="plan")["sessionId"]
        todos = [{"content": f"Task number {n} of the long list", "status": "pending",
                  "priority": "medium"} for n in range(1, 31)]
        for _ in range(4):
            service.tools.call(session, "TodoWrite", {"todos": todos})
        assert service.tools.call(session, "ExitPlanMode", {"plan": "# Plan\n1. Do it."}
                                  ).status_code == 202
        newest = service.store.version(session)
    db = f"sqlite:///{tmp_path / 'ledger.db'}"

    with terminal("test_at_80x24_the_newest_event_shows") as term:
        term.start([*sessionledger_command(), "tui", session, "--db", db], cwd=tmp_path)
        rows = term.wait_for(_has("Plan approval"), "opened")
        screen = "\n".join(rows)
        assert re.search(rf"\b{newest} Interaction", screen), screen
        assert "ExitPlanMode" not in screen and "call_" not in screen
        assert "Nothing is chosen yet" in screen and "▸" not in screen
        _stray_enter_chooses_nothing(term, tmp_path, session)
        term.keys("3")  # Reject
        done = term.wait_for(_has("Plan rejected"), "rejected")
        latest = "\n".join(done)
        with opened(tmp_path) as service:
            last = service.store.version(session)
        assert re.search(rf"\b{last}\b ", latest), latest  # the newest still shows
