"""The session view lists the session's audit findings (CC-10), as text, in a real browser.

Over one real ``sessionledger serve``: a session in Plan opens with no findings; a host
records a Write that ran while Plan was on (appended from the test process, a second writer)
and a TodoWrite drops an unfinished item; the Findings panel follows, each finding as
``seq N kind: detail`` — a path that looks like HTML stays text.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest
from server_support import ServerProcess, create_session, running_server
from web_support import Shots, session_url

from eventlog import NewEvent, ToolCallCompleted, ToolCallRequested

if TYPE_CHECKING:
    from playwright.sync_api import Page

PATH = "src/<b>bold</b>.py"


@pytest.fixture(scope="module")
def web_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with running_server(tmp_path_factory.mktemp("web-findings")) as running:
        yield running


def _todos(*contents: str) -> dict[str, list[dict[str, str]]]:
    return {"todos": [{"content": c, "status": "pending", "priority": "medium"}
                      for c in contents]}


def test_the_session_view_lists_findings_as_text(  # CC-10
    page: Page, shots: Shots, web_server: ServerProcess,
) -> None:
    from playwright.sync_api import expect

    with web_server.client() as http:
        sid = create_session(http, mode="plan")
        page.goto(session_url(web_server.base_url, sid))
        panel = page.locator("#findings")
        expect(panel).to_have_attribute("data-count", "0")
        expect(panel).to_contain_text("No findings.")
        shots.take(page, "no-findings")
        store = web_server.open_store()
        try:
            store.append(sid, [
                NewEvent(ToolCallRequested(call_id="call_w", tool="Write",
                                           input={"file_path": PATH}, host="protocol"),
                         actor="host"),
                NewEvent(ToolCallCompleted(call_id="call_w", tool="Write", status="completed",
                                           success=True, model_content="written"),
                         actor="host"),
            ])
        finally:
            store.close()
        calls = f"/v1/sessions/{sid}/tool-calls"
        for body in (_todos("Keep me", "Drop me"), _todos("Keep me")):
            assert http.post(calls, json={"tool": "TodoWrite", "input": body}).status_code == 200
        seqs = [f["seq"] for f in http.get(f"/v1/sessions/{sid}/audit").json()["findings"]]
    items = panel.locator("li.finding")
    expect(items).to_have_count(2)
    expect(items.nth(0)).to_have_text(
        f"seq {seqs[0]} write_in_plan: Write {PATH} while Plan was on")
    expect(items.nth(0)).to_have_attribute("data-kind", "write_in_plan")
    expect(items.nth(1)).to_have_text(
        f'seq {seqs[1]} dropped_unfinished_todos: unfinished todos dropped: "Drop me"')
    assert panel.locator("b").count() == 0  # the path is text, never markup
    shots.take(page, "findings")
