"""The page on a server with a token (issue 23.7): a login form, then a cookie, streams included.

Over one real ``sessionledger serve --token …`` (loopback): the page opens on its login form;
a wrong token shows an error; the right one opens the session view, whose live stream then
follows a mode change made over HTTP with the bearer header; a reload stays logged in; the
token is never in the URL, and the login cookie is HttpOnly (``document.cookie`` is empty);
a login ended elsewhere brings the form back at the page's next call, and logging in again
carries on; "Log out" brings the form back; the server's log holds neither the token nor the cookie.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest
from server_support import ServerProcess, create_session, running_server
from web_support import Shots, session_url

if TYPE_CHECKING:
    from playwright.sync_api import Page

TOKEN = "browser-login-token-9d2e"


@pytest.fixture(scope="module")
def web_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with running_server(tmp_path_factory.mktemp("web-login"), args=["--token", TOKEN]) as running:
        yield running


def test_the_page_logs_in_with_the_token_and_its_stream_follows(  # issue 23.7
    page: Page, shots: Shots, web_server: ServerProcess,
) -> None:
    from playwright.sync_api import expect

    with web_server.client(headers={"Authorization": f"Bearer {TOKEN}"}) as http:
        sid = create_session(http)
        page.goto(session_url(web_server.base_url, sid))
        token = page.get_by_label("Token")
        expect(token).to_be_visible()
        expect(token).to_have_attribute("type", "password")
        expect(page.locator("#session-view")).to_be_hidden()
        shots.take(page, "login")

        token.fill("not-the-token")
        page.get_by_role("button", name="Log in").click()
        expect(page.locator("#login-error")).to_be_visible()
        expect(page.locator("#login-error")).to_contain_text("not this server's token")
        assert page.context.cookies() == []
        shots.take(page, "login-wrong-token")

        token.fill(TOKEN)
        page.get_by_role("button", name="Log in").click()
        badge = page.locator("#mode-badge")
        expect(badge).to_have_text("build")
        expect(page.locator("#connection")).to_have_attribute("data-state", "live")
        expect(page.get_by_role("button", name="Log out")).to_be_visible()
        expect(token).to_be_hidden()

        changed = http.post(f"/v1/sessions/{sid}/mode", json={"mode": "plan"})
        assert changed.status_code == 200, changed.text
        expect(badge).to_have_text("plan")  # through the stream, on the cookie alone
        shots.take(page, "logged-in")

        page.reload()
        expect(badge).to_have_text("plan")
        expect(token).to_be_hidden()
        assert TOKEN not in page.url
        assert page.evaluate("document.cookie") == ""  # HttpOnly: no script reads it
        (cookie,) = page.context.cookies()
        assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
        assert TOKEN not in cookie["value"]

        with web_server.client(headers={"Cookie": f"{cookie['name']}={cookie['value']}"}) as other:
            assert other.post("/v1/logout").status_code == 200  # the login ends elsewhere
        assert http.post(f"/v1/sessions/{sid}/mode", json={"mode": "edit"}).status_code == 200
        expect(token).to_be_visible()  # the page's next call answered 401: the form again
        token.fill(TOKEN)
        page.get_by_role("button", name="Log in").click()
        expect(badge).to_have_text("edit")
        (renewed,) = page.context.cookies()
        assert renewed["value"] != cookie["value"]

        # The logout ends the login at once: the page's stream may end and show the form
        # before the logout's own answer (which clears the cookie) has reached the browser.
        with page.expect_response(lambda answer: answer.url.endswith("/v1/logout")) as out:
            page.get_by_role("button", name="Log out").click()
        assert out.value.status == 200
        expect(token).to_be_visible()
        assert page.context.cookies() == []
        assert TOKEN not in page.url
        shots.take(page, "logged-out")
    log = web_server.log()
    assert TOKEN not in log
    assert cookie["value"] not in log and renewed["value"] not in log
