"""Browser tests of the web client (issue 9): Playwright for Python driving Debian's chromium.

The browser is the system's ``/usr/bin/chromium`` (``SESSIONLEDGER_CHROMIUM`` overrides it),
launched headless with ``--no-sandbox`` (CI runs as root) and the flags that keep it off the
network, which is closed here. Without the ``playwright`` package or the browser every test
in this directory is skipped with the reason — unless ``CI=true``, where it fails: CI must
run them (``.ci/run`` installs chromium, ``make test`` the ``browser`` extra).

Each step a test names is kept as a screenshot under ``test-artifacts/browser/<test>/``
(ignored by git), and a page that throws an uncaught JavaScript error fails its test.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from web_support import Shots

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page, Playwright

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts" / "browser"
CHROMIUM = os.environ.get("SESSIONLEDGER_CHROMIUM", "/usr/bin/chromium")
LAUNCH_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
EXPECT_TIMEOUT_MS = 10_000


def unavailable() -> str | None:
    """Why the browser tests cannot run here, or None when they can."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright is not installed (pip install -e '.[dev,browser]')"
    if not (Path(CHROMIUM).is_file() and os.access(CHROMIUM, os.X_OK)):
        return f"no chromium at {CHROMIUM} (apt-get install chromium)"
    return None


def _skip_or_fail(reason: str) -> None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"browser tests must run on CI: {reason}", pytrace=False)
    pytest.skip(f"browser tests skipped: {reason}")


@pytest.fixture(scope="module")
def playwright_instance() -> Iterator[Playwright]:
    """Playwright's sync API, for one module at a time: while it is open an event loop runs
    in this thread, so ``asyncio.run`` (the TUI's pilot tests) would fail in other modules."""
    reason = unavailable()
    if reason is not None:
        _skip_or_fail(reason)
    from playwright.sync_api import expect, sync_playwright

    expect.set_options(timeout=EXPECT_TIMEOUT_MS)
    with sync_playwright() as instance:
        yield instance


@pytest.fixture(scope="module")
def launch_browser(playwright_instance: Playwright) -> Iterator[Callable[..., Browser]]:
    """Launch chromium with :data:`LAUNCH_ARGS` and any more flags; closed with the module."""
    launched: list[Browser] = []

    def launch(*flags: str) -> Browser:
        launched.append(playwright_instance.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=[*LAUNCH_ARGS, *flags]
        ))
        return launched[-1]

    try:
        yield launch
    finally:
        for browser in launched:
            browser.close()


@pytest.fixture(scope="module")
def browser(launch_browser: Callable[..., Browser]) -> Browser:
    return launch_browser()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    """A fresh page (its own context, UTC, a desktop viewport); fails on uncaught JS errors."""
    context = browser.new_context(viewport={"width": 1360, "height": 1000}, timezone_id="UTC")
    opened = context.new_page()
    errors: list[str] = []
    opened.on("pageerror", lambda error: errors.append(str(error)))
    try:
        yield opened
    finally:
        context.close()
    assert errors == [], f"uncaught errors in the page: {errors}"


@pytest.fixture
def shots(request: pytest.FixtureRequest) -> Shots:
    name = re.sub(r"[^A-Za-z0-9_.-]+", "-", request.node.name)
    directory = ARTIFACTS / name
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    return Shots(directory)


@pytest.fixture(scope="module")
def axe() -> str:
    """The pinned axe-core's ``axe.min.js`` (:func:`axe_support.axe_source`)."""
    from axe_support import axe_source

    return axe_source()
