"""Helpers of the browser tests: numbered screenshots, the page's timeline, the session URL,
and reading an element that the page may redraw while it is read."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from playwright.sync_api import Locator, Page

__all__ = ["Shots", "read_attached", "session_url", "timeline_seqs"]


class Shots:
    """Numbered screenshots of one test's steps, kept under ``test-artifacts/browser``."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.count = 0

    def take(self, page: Page, step: str) -> Path:
        self.count += 1
        path = self.directory / f"{self.count:02d}-{step}.png"
        page.screenshot(path=str(path), full_page=True)
        return path


def session_url(base_url: str, session_id: str) -> str:
    return f"{base_url}/#/sessions/{session_id}"


def timeline_seqs(page: Page) -> list[int]:
    """The seq of every entry in the page's audit timeline, in page order."""
    values: list[Any] = page.locator("#timeline > li").evaluate_all(
        "items => items.map(item => Number(item.dataset.seq))"
    )
    return [int(v) for v in values]


def read_attached(locator: Locator, expression: str, *, timeout_s: float = 10.0) -> Any:
    """``expression`` (a JavaScript function of the element) evaluated on the element
    ``locator`` finds while that element is still on the page.

    Playwright finds the element and then evaluates on it in a second step; a redraw in
    between (the sidebar on every refresh, the inbox on every countdown tick) leaves it
    holding a detached element, whose box is 0 by 0 and whose computed style is empty. The
    check of ``isConnected`` and the reading run in one turn of the page's event loop, so a
    value returned was read from the element as shown; a detached one is found again.
    """
    wrapped = f"(el) => el.isConnected ? {{value: ({expression})(el)}} : null"
    deadline = time.monotonic() + timeout_s
    while True:
        read = locator.evaluate(wrapped)
        if read is not None:
            return read["value"]
        if time.monotonic() > deadline:
            raise AssertionError(f"{locator} was redrawn every time it was read")
        time.sleep(0.02)
