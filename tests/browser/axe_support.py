"""axe-core for the browser tests of the many-agents page (issue 42): the pinned
``axe.min.js`` (as ``test_web_a11y.py`` installs it) run in the page, every violation listed."""

from __future__ import annotations

import re
import subprocess
from typing import TYPE_CHECKING, Any

import node_support

if TYPE_CHECKING:
    from playwright.sync_api import Page

__all__ = ["axe_source", "requirement_ids", "violations"]

AXE_PACKAGE = "axe-core"


def axe_source() -> str:
    """The pinned axe-core's ``axe.min.js`` (skipped, or failed on CI, without node)."""
    reason = node_support.unavailable()
    if reason is not None:
        node_support.skip_or_fail(reason)
    try:
        clients = node_support.install()
    except (node_support.InstallError, subprocess.TimeoutExpired) as error:
        node_support.skip_or_fail(str(error))
        raise
    pinned = (node_support.NODE_PROJECT / "package.json").read_text(encoding="utf-8")
    assert f'"{AXE_PACKAGE}": "{clients.version(AXE_PACKAGE)}"' in pinned  # pinned exactly
    return (clients.root / "node_modules" / AXE_PACKAGE / "axe.min.js").read_text(encoding="utf-8")


def violations(page: Page, source: str) -> list[str]:
    """Every axe-core violation of the page as it is now, whatever its impact."""
    if not page.evaluate("typeof window.axe === 'object'"):
        page.evaluate(source + "\n;0")
    found: list[dict[str, Any]] = page.evaluate(
        "axe.run(document, {resultTypes: ['violations']}).then(r => r.violations)")
    return [f"{v['id']} ({v['impact']}): {v['help']} — {[n['target'] for n in v['nodes']][:5]}"
            for v in found]


VISIBLE_WORDS = """() => [document.body.innerText, ...[...document.querySelectorAll(
  '[title], [aria-label], [placeholder]')].flatMap((el) => ['title', 'aria-label', 'placeholder']
  .map((name) => el.getAttribute(name) || ''))].join('\\n')"""
REQUIREMENT_ID = re.compile(r"\b[A-Z]{2,3}-\d+\b")


def requirement_ids(page: Page) -> list[str]:
    """Requirement ids ("HO-6") in the page's visible text, tooltips, labels or placeholders."""
    text: str = page.evaluate(VISIBLE_WORDS)
    return REQUIREMENT_ID.findall(text)
