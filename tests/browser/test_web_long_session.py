"""A long session opens like a short one (issue 23.2): the timeline renders a window.

A session of 2,500 events (written in process, in batches, before ``serve`` starts) opens on
its newest 200 entries with the server's one-line summaries (the text ``replay`` prints);
"Load earlier" pages back 200 more; live events still append, once each and in order; opening
an entry shows its event's data as JSON text, fetched then.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest
from server_support import ServerProcess, running_server
from web_support import Shots, session_url, timeline_seqs

from eventlog import MessageRecorded, NewEvent
from sessionledger import SessionService

if TYPE_CHECKING:
    from playwright.sync_api import Page

EVENTS = 2500
WINDOW = 200


def _expect() -> Any:
    from playwright.sync_api import expect

    return expect


@pytest.fixture(scope="module")
def long_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, str]]:
    directory = tmp_path_factory.mktemp("web-long-session")
    (directory / "workspace").mkdir()
    service = SessionService.open(f"sqlite:///{directory / 'ledger.db'}",
                                  workspace_root=directory / "workspace")
    try:
        sid = service.create_session()["sessionId"]
        for start in range(2, EVENTS + 1, 500):
            batch = [NewEvent(MessageRecorded(role="user", content=f"message {n}"), actor="user")
                     for n in range(start, min(start + 500, EVENTS + 1))]
            service.ledger.append(sid, batch, expected_version=start - 1)
    finally:
        service.close()
    with running_server(directory) as running:
        yield running, sid


def test_a_long_session_opens_on_a_window_pages_back_and_follows_live(  # issue 23.2
    page: Page, shots: Shots, long_session: tuple[ServerProcess, str],
) -> None:
    expect = _expect()
    server, sid = long_session
    page.goto(session_url(server.base_url, sid))
    entries = page.locator("#timeline > li")
    expect(page.locator("#timeline")).to_have_attribute("data-ready", "true")
    expect(entries).to_have_count(WINDOW)
    assert timeline_seqs(page) == list(range(EVENTS - WINDOW + 1, EVENTS + 1))
    newest = page.locator(f"#timeline > li[data-seq='{EVENTS}']")
    expect(newest.locator(".summary")).to_have_text(f'real user message: "message {EVENTS}"')
    expect(newest).to_be_in_viewport()  # the view starts at the newest entry

    page.get_by_role("button", name="Load earlier").click()
    expect(entries).to_have_count(2 * WINDOW)
    assert timeline_seqs(page) == list(range(EVENTS - 2 * WINDOW + 1, EVENTS + 1))

    with server.client() as http:
        for mode in ("edit", "yolo"):
            assert http.post(f"/v1/sessions/{sid}/mode", json={"mode": mode}).status_code == 200
    expect(page.locator("#mode-badge")).to_have_text("yolo")
    expect(entries).to_have_count(2 * WINDOW + 2)
    assert timeline_seqs(page) == list(range(EVENTS - 2 * WINDOW + 1, EVENTS + 3))  # once, in order

    live = page.locator(f"#timeline > li[data-seq='{EVENTS + 2}']")
    expect(live.locator(".summary")).to_have_text("edit → yolo via mode_command")
    assert page.locator("#timeline details[data-loaded]").count() == 0  # no JSON built yet
    live.locator("summary").click()
    expect(live.locator(".event-data")).to_contain_text('"mode": "yolo"')
    shots.take(page, "long-session")
