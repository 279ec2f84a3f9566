"""Driving the Textual app in tests: a real service on a SQLite file, the app under a pilot.

:func:`drive` runs one scenario with ``App.run_test()`` inside ``asyncio.run`` in a thread of
its own — plain synchronous tests, no asyncio plugin (docs/decisions.md D83). :func:`plain`
turns what a widget shows into text, :func:`rendered` the lines Textual draws for a widget
and :func:`screen` the terminal's rows; :func:`resolutions` reads the answers the app recorded
in the log.
"""

from __future__ import annotations

import asyncio
import io
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from rich.console import Console
from textual.geometry import Region
from textual.pilot import Pilot
from textual.widget import Widget
from textual.widgets import Static

from eventlog import Clock
from sessionledger import SessionService
from sessionledger.tui import SessionApp

__all__ = ["QUESTION", "Scenario", "drive", "opened", "plain", "question", "rendered",
           "resolutions", "screen", "types", "until"]

Scenario = Callable[[SessionApp, Pilot[None]], Awaitable[None]]


async def until(pilot: Pilot[None], ready: Callable[[], bool], seconds: float = 30.0) -> None:
    """Let the app poll until ``ready()`` holds (the app reads the log on an interval); the
    bound only stops a hang (a busy machine's app catches up late, never wrongly)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if ready():
            return
        await pilot.pause(0.05)
    assert ready(), "the app did not catch up with the log"


def question(
    text: str, labels: list[str], *, multi: bool = False, header: str = "Pick",
    previews: dict[str, str] | None = None,
) -> dict[str, Any]:
    """One AskUserQuestion question (AQ-2) with ``labels`` as its options."""
    options: list[dict[str, Any]] = []
    for label in labels:
        option: dict[str, Any] = {"label": label, "description": f"about {label}"}
        if previews and label in previews:
            option["preview"] = previews[label]
        options.append(option)
    return {"question": text, "header": header, "multiSelect": multi, "options": options}


QUESTION = {"questions": [question("Which database?", ["SQLite", "PostgreSQL", "DuckDB"],
                                   header="DB")]}


@contextmanager
def opened(tmp_path: Path) -> Iterator[SessionService]:
    """A service over a real SQLite file in ``tmp_path``, closed afterwards."""
    root = tmp_path / "root"
    root.mkdir(exist_ok=True)
    service = SessionService.open(f"sqlite:///{tmp_path / 'ledger.db'}", workspace_root=root)
    try:
        yield service
    finally:
        service.close()


def drive(
    service: SessionService, session_id: str, scenario: Scenario, *,
    size: tuple[int, int] = (140, 60), clock: Clock | None = None,
) -> None:
    """Run the app on ``session_id`` and play ``scenario`` against it under a pilot.

    The app runs in a thread of its own with its own event loop: a test's thread may already
    have a running loop that is not ours (Playwright's sync API keeps one in the browser
    tests' worker), and ``asyncio.run`` refuses to start inside it.
    """

    async def main() -> None:
        app = (SessionApp(service, session_id, poll_s=0.05) if clock is None
               else SessionApp(service, session_id, poll_s=0.05, clock=clock))
        async with app.run_test(size=size) as pilot:
            await pilot.pause()
            await scenario(app, pilot)

    failures: list[BaseException] = []

    def run() -> None:
        try:
            asyncio.run(main())
        except BaseException as exc:  # handed to the test's thread below
            failures.append(exc)

    thread = threading.Thread(target=run, name="tui-pilot")
    thread.start()
    thread.join()
    if failures:
        raise failures[0]


def plain(widget: Static) -> str:
    """The text ``widget`` shows, without styles."""
    console = Console(file=io.StringIO(), width=140, record=True, color_system=None)
    console.print(widget.content)
    return console.export_text()


def rendered(widget: Widget) -> list[str]:
    """Every line Textual draws for ``widget`` at its width, scrolled into view or not."""
    width, height = widget.outer_size  # borders and padding included
    return [strip.text for strip in widget.render_lines(Region(0, 0, width, height))]


def screen(app: SessionApp) -> list[str]:
    """The rows of the (pilot's) terminal as the app drew them last."""
    return [strip.text.rstrip() for strip in app.screen._compositor.render_strips()]


def resolutions(service: SessionService, session_id: str) -> list[dict[str, Any]]:
    """The ``InteractionResolved`` data the log holds for the session, in order."""
    return [e.to_wire()["data"] for e in service.store.read_session(session_id)
            if e.type == "InteractionResolved"]


def types(service: SessionService, session_id: str) -> list[str]:
    return [e.type for e in service.store.read_session(session_id)]
