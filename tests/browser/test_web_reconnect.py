"""The page keeps working when the server is restarted under it (issue 9 acceptance 2).

A real ``sessionledger serve`` on a fixed port is stopped (SIGTERM) while the page is open on
a session; another writer appends events to the same database while it is down; the server
is started again on the same port. The browser's own EventSource reconnects, sending the last
``seq`` it saw (``Last-Event-ID``, or the ``after`` cursor the page's stream started at, the
timeline's head), and the page's audit timeline then holds every event of
the session exactly once, in order; the badge, Goal and todos show what was appended
meanwhile, and a live event after the restart arrives once too.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

import httpx
from server_support import create_session, free_port, running_server, session_version
from web_support import Shots, session_url, timeline_seqs

from sessionledger import SessionService

if TYPE_CHECKING:
    from playwright.sync_api import Page, Response

TODOS = [{"content": "Restart the server", "status": "completed", "priority": "high"},
         {"content": "Check the page", "status": "in_progress", "priority": "high"}]


def _expect() -> Any:
    from playwright.sync_api import expect

    return expect


def _seqs(http: httpx.Client, sid: str) -> list[int]:
    return [e["seq"] for e in http.get(f"/v1/sessions/{sid}/events").json()["events"]]


def test_server_restart_under_the_page_every_event_shown_once(
    page: Page, shots: Shots, tmp_path: Path,
) -> None:
    expect = _expect()
    port = free_port()
    resumed_after: list[str | None] = []

    def on_response(response: Response) -> None:
        url = urlsplit(response.url)
        if url.path == f"/v1/sessions/{sid}/events/stream":
            # The page starts the stream at the timeline's head (?after=); a reconnection
            # resumes with Last-Event-ID, or with that cursor while no event came since.
            after = parse_qs(url.query).get("after", [None])[0]
            resumed_after.append(response.request.all_headers().get("last-event-id") or after)

    with running_server(tmp_path, port=port) as first, first.client() as http:
        sid = create_session(http)
        assert http.post(f"/v1/sessions/{sid}/mode", json={"mode": "edit"}).status_code == 200
        page.on("response", on_response)
        page.goto(session_url(first.base_url, sid))
        expect(page.locator("#mode-badge")).to_have_text("edit")
        before = session_version(http, sid)
        expect(page.locator("#timeline > li")).to_have_count(before)
        expect(page.locator("#connection")).to_have_attribute("data-state", "live")
        shots.take(page, "before-restart")
        assert first.terminate() == 0
    expect(page.locator("#connection")).to_have_attribute("data-state", "reconnecting")

    # Appended while the server is down, by another writer on the same database.
    service = SessionService.open(first.db_url, workspace_root=first.workspace)
    try:
        service.set_mode(sid, "yolo")
        service.start_goal(sid, "Survive restarts")
        assert service.tools.call(sid, "TodoWrite", {"todos": TODOS}).status_code == 200
    finally:
        service.close()
    shots.take(page, "server-down")

    with running_server(tmp_path, port=port) as second, second.client() as http:
        expected = _seqs(http, sid)
        assert len(expected) > before
        expect(page.locator("#timeline > li")).to_have_count(len(expected), timeout=20_000)
        assert timeline_seqs(page) == expected  # every event, once, in order
        expect(page.locator("#connection")).to_have_attribute("data-state", "live")
        expect(page.locator("#mode-badge")).to_have_text("yolo")
        expect(page.locator("#goal .goal-objective")).to_have_text("Survive restarts")
        expect(page.locator("#todo-progress")).to_have_text("1/2")
        assert resumed_after[0] == str(before)  # the stream started at the timeline's head
        assert str(before) in resumed_after[1:]  # and resumed after what it had seen
        shots.take(page, "after-restart")

        assert http.post(f"/v1/sessions/{sid}/mode", json={"mode": "auto"}).status_code == 200
        expect(page.locator("#mode-badge")).to_have_text("auto")
        expect(page.locator("#timeline > li")).to_have_count(len(expected) + 1)
        assert timeline_seqs(page) == _seqs(http, sid) == list(range(1, len(expected) + 2))
        shots.take(page, "live-after-restart")
