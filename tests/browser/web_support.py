"""Helpers of the browser tests: numbered screenshots, the page's timeline, the session URL."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from playwright.sync_api import Page

__all__ = ["Shots", "session_url", "timeline_seqs"]


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
