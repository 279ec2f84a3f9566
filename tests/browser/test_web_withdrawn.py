"""A question withdrawn because its MCP caller cancelled, as the page shows it (issue 21, D157).

A real ``sessionledger serve``: an MCP client on the 2025-11-25 handshake asks a question
through ``/mcp`` and gives up after a second (its request timeout sends
``notifications/cancelled``). The card leaves the page, a notice says the question was
withdrawn and nobody answered, and the timeline tells the withdrawal and the cancelled call —
also after a reload.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import anyio
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_support import QUESTION, NeverAnswers
from server_support import ServerProcess, create_session, running_server
from web_support import Shots, session_url

if TYPE_CHECKING:
    from playwright.sync_api import Page


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with running_server(tmp_path_factory.mktemp("web-withdrawn")) as running:
        yield running


def _ask_and_give_up(url: str, outcome: dict[str, Any]) -> None:
    """The MCP host: asks, its form stays open, its request times out after 1 s."""
    async def scenario() -> None:
        async with (
            streamable_http_client(url) as (read, write),
            ClientSession(read, write, elicitation_callback=NeverAnswers()) as client,
        ):
            await client.initialize()
            try:
                await client.call_tool("AskUserQuestion", QUESTION, read_timeout_seconds=1.0)
            except MCPError as exc:
                outcome["error"] = exc.error.code

    anyio.run(scenario)


def test_a_withdrawn_question_is_shown_as_withdrawn(  # issue 21 finding 6, D157
    page: Page, shots: Shots, server: ServerProcess,
) -> None:
    from playwright.sync_api import expect

    with server.client() as http:
        sid = create_session(http)
    page.goto(session_url(server.base_url, sid))
    expect(page.locator("#connection")).to_have_attribute("data-state", "live")
    outcome: dict[str, Any] = {}
    host = threading.Thread(
        target=_ask_and_give_up, args=(f"{server.base_url}/mcp?session={sid}", outcome),
        daemon=True,
    )
    host.start()
    expect(page.locator(".question-card")).to_have_count(1)
    shots.take(page, "asked")
    notice = page.locator("#withdrawn")
    expect(notice).to_be_visible(timeout=15_000)
    expect(notice).to_contain_text("Withdrawn — the agent cancelled its request; nobody answered")
    expect(notice).to_contain_text("Which database?")
    expect(page.locator(".question-card")).to_have_count(0)
    expect(page.locator("#auto-continued")).to_be_hidden()
    timeline = page.locator("#timeline")
    expect(timeline).to_contain_text("withdrawn — the agent cancelled its request")
    expect(timeline).to_contain_text("AskUserQuestion cancelled")
    shots.take(page, "withdrawn")
    host.join(30)
    assert outcome.get("error") is not None  # the host saw its own timeout
    page.reload()
    expect(page.locator("#withdrawn")).to_contain_text("Withdrawn")
    shots.take(page, "withdrawn-after-reload")
