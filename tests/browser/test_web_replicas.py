"""Three ``serve`` replicas on one PostgreSQL database (issue 41, acceptance 6).

Three real ``sessionledger serve --token …`` processes on one PostgreSQL schema, each on its
own port of 127.0.0.1 (a browser sends a host's cookies to every port of it, as it would to
replicas behind one address): a Chromium page that logs in on the first replica is served by
the other two with no login form, and follows live there a change made through a third; the
cookie a login on one replica set is taken by the others over HTTP and SSE. An MCP client whose
session was opened on one replica and reaches another is answered 404 with a JSON-RPC error
saying the session lives on another replica and to initialize again; the replica that opened
it still serves it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest
from server_support import ServerProcess, create_session, running_server
from web_support import Shots, session_url

if TYPE_CHECKING:
    from playwright.sync_api import Page

pytestmark = [pytest.mark.postgres, pytest.mark.slow]  # three servers on PostgreSQL: verify

TOKEN = "replica-login-token-4a7e"
BEARER = {"Authorization": f"Bearer {TOKEN}"}
MCP_HEADERS = {**BEARER, "Accept": "application/json, text/event-stream",
               "Content-Type": "application/json"}
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {},
    "clientInfo": {"name": "replica-test", "version": "1"}}}


@pytest.fixture
def replicas(pg_database: str, tmp_path: Path) -> Iterator[list[ServerProcess]]:
    args = ("--db", f"{pg_database}?schema=replicas", "--token", TOKEN)
    with ExitStack() as stack:
        started = []
        for name in ("a", "b", "c"):
            (tmp_path / name).mkdir()
            started.append(stack.enter_context(running_server(tmp_path / name, args=args)))
        yield started


def _mcp(server: ServerProcess, body: dict[str, Any], session: str | None = None
         ) -> httpx.Response:
    headers = MCP_HEADERS if session is None else {**MCP_HEADERS, "Mcp-Session-Id": session}
    with server.client() as http:
        return http.post("/mcp", json=body, headers=headers)


def test_a_login_on_one_replica_is_taken_by_the_others(  # issue 41 acceptance 6
    page: Page, shots: Shots, replicas: list[ServerProcess],
) -> None:
    from playwright.sync_api import expect

    first, second, third = replicas
    with third.client(headers=BEARER) as http:
        sid = create_session(http)
        page.goto(session_url(first.base_url, sid))
        token = page.get_by_label("Token")
        token.fill(TOKEN)
        page.get_by_role("button", name="Log in").click()
        badge = page.locator("#mode-badge")
        expect(badge).to_have_text("build")
        shots.take(page, "logged-in-on-the-first")
        (cookie,) = page.context.cookies()

        for other, mode in ((second, "plan"), (third, "edit")):
            page.goto(session_url(other.base_url, sid))
            expect(page.locator("#connection")).to_have_attribute("data-state", "live")
            expect(token).to_be_hidden()
            changed = http.post(f"/v1/sessions/{sid}/mode", json={"mode": mode})
            assert changed.status_code == 200, changed.text
            expect(badge).to_have_text(mode)  # the stream of this replica, on the cookie alone
            shots.take(page, f"served-by-{other.base_url.rsplit(':', 1)[1]}")

    for other in replicas:
        with other.client(headers={"Cookie": f"{cookie['name']}={cookie['value']}"}) as http:
            assert http.get(f"/v1/sessions/{sid}").status_code == 200
            with http.stream("GET", f"/v1/sessions/{sid}/events/stream") as stream:
                assert stream.status_code == 200
        with other.client() as http:
            assert http.get(f"/v1/sessions/{sid}").status_code == 401


def test_an_mcp_session_reaching_another_replica_is_told_why(  # issue 41 acceptance 6
    replicas: list[ServerProcess],
) -> None:
    first, second, _third = replicas
    opened = _mcp(first, INITIALIZE)
    assert opened.status_code == 200, opened.text
    session = opened.headers["mcp-session-id"]
    initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert _mcp(first, initialized, session).status_code == 202
    listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}

    elsewhere = _mcp(second, listing, session)
    assert elsewhere.status_code == 404  # MCP: the client starts a new session
    error = elsewhere.json()["error"]
    assert error["code"] == -32600
    assert f"MCP session {session!r} is not open on this server" in error["message"]
    assert "another replica" in error["message"] and "Mcp-Session-Id" in error["message"]
    assert "Send initialize" in error["message"]

    served = _mcp(first, listing, session)
    assert served.status_code == 200, served.text
    assert "TodoWrite" in served.text
    again = _mcp(second, INITIALIZE)  # the client's next initialize, on whichever replica
    assert again.status_code == 200 and again.headers["mcp-session-id"] != session
