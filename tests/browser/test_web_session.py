"""The session view in a real browser (issue 9 acceptance 1; SPEC §3, §7, TD-6, §11 ``GET /``).

Over one real ``sessionledger serve``: approving a plan in the plan-approval panel updates
the mode badge (Plan off, the mode underneath back); feedback keeps Plan on; the plan is
rendered as Markdown by the page's own renderer, which never lets HTML through. The mode
switcher and Shift+Tab change the mode, a refused change shows the machine's message
(ES-5), and the Goal, the todos with "completed/total" and the session list follow the log.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import httpx
import pytest
from server_support import ServerProcess, create_session, running_server
from web_support import Shots, session_url

if TYPE_CHECKING:
    from playwright.sync_api import Page

PLAN = """# Migration plan

Move the **orders** table to `bigint` ids, in _three_ steps:

1. Add the column
2. Backfill in batches
   - 10 000 rows at a time
   - [x] dry run on staging
3. Drop the old one

| step | risk |
|---|---|
| backfill | low |

```sql
ALTER TABLE orders ADD COLUMN id2 bigint; -- <b>not bold</b>
```

<script>window.__pwned = 1</script> <img src=x onerror="window.__pwned = 2">
[docs](https://example.invalid/plan) and [bad](javascript:alert(1))
"""
EXCLUSIVE = "Plan and Goal cannot be active at the same time."


def _expect() -> Any:
    from playwright.sync_api import expect

    return expect


@pytest.fixture(scope="module")
def web_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with running_server(tmp_path_factory.mktemp("web-session")) as running:
        yield running


def _call(http: httpx.Client, sid: str, tool: str, body: dict[str, Any]) -> httpx.Response:
    return http.post(f"/v1/sessions/{sid}/tool-calls", json={"tool": tool, "input": body})


def _state(http: httpx.Client, sid: str) -> dict[str, Any]:
    return dict(http.get(f"/v1/sessions/{sid}").json()["executionState"])


def test_approving_a_plan_updates_the_mode_badge_and_the_plan_is_safe_markdown(
    page: Page, shots: Shots, web_server: ServerProcess,
) -> None:
    expect = _expect()
    with web_server.client() as http:
        sid = create_session(http, mode="yolo")
        page.goto(session_url(web_server.base_url, sid))
        badge = page.locator("#mode-badge")
        expect(badge).to_have_text("yolo")
        assert _call(http, sid, "EnterPlanMode", {}).json()["success"] is True
        expect(badge).to_have_text("plan")
        expect(page.locator(".underneath")).to_have_text("yolo underneath")

        first = _call(http, sid, "ExitPlanMode", {"plan": "Too vague."})
        assert first.status_code == 202
        card = page.locator(f".plan-card[data-interaction-id='{first.json()['interactionId']}']")
        expect(card.locator(".plan-body")).to_have_text("Too vague.")
        expect(card.get_by_role("button", name="Send feedback")).to_be_disabled()
        card.locator("textarea.feedback").fill("Say how the backfill is batched.")
        shots.take(page, "plan-feedback")
        card.get_by_role("button", name="Send feedback").click()
        expect(card).to_have_count(0)
        fed = http.get(f"/v1/sessions/{sid}/tool-calls/{first.json()['callId']}").json()
        assert fed["success"] is False and fed["followUpUserInput"] == {
            "input": "Say how the backfill is batched.", "reasonSource": "plan_approval_feedback"}
        expect(badge).to_have_text("plan")

        second = _call(http, sid, "ExitPlanMode", {"plan": PLAN})
        card = page.locator(f".plan-card[data-interaction-id='{second.json()['interactionId']}']")
        body = card.locator(".plan-body")
        expect(body.locator("h1")).to_have_text("Migration plan")
        expect(body.locator("strong")).to_have_text("orders")
        expect(body.locator("ol > li")).to_have_count(3)
        expect(body.locator("ol > li ul > li")).to_have_count(2)
        expect(body.locator("td").first).to_have_text("backfill")
        expect(body.locator("pre code")).to_contain_text("-- <b>not bold</b>")
        expect(body).to_contain_text('<script>window.__pwned = 1</script>')
        expect(body).to_contain_text("[bad](javascript:alert(1))")
        assert body.locator("script, img, b, [onerror]").count() == 0
        links = body.locator("a")
        expect(links).to_have_count(1)
        expect(links).to_have_attribute("href", "https://example.invalid/plan")
        assert page.evaluate("window.__pwned") is None
        shots.take(page, "plan-waiting-for-approval")

        card.get_by_role("button", name="Approve").click()
        expect(card).to_have_count(0)
        expect(badge).to_have_text("yolo")
        expect(page.locator(".underneath")).to_have_text("")
        assert _state(http, sid) == {"mode": "yolo", "planEnabled": False, "goal": None}
        expect(page.locator("#timeline > li[data-type='PlanApproved']")).to_have_count(1)
        shots.take(page, "plan-approved-badge-updated")


def test_mode_switcher_shift_tab_goal_todos_and_session_list(
    page: Page, shots: Shots, web_server: ServerProcess,
) -> None:
    expect = _expect()
    with web_server.client() as http:
        sid = create_session(http)
        page.goto(session_url(web_server.base_url, sid))
        badge = page.locator("#mode-badge")
        expect(badge).to_have_text("build")
        page.locator(".mode-button[data-mode='edit']").click()
        expect(badge).to_have_text("edit")
        expect(page.locator(".mode-button[data-mode='edit']")).to_have_attribute(
            "aria-pressed", "true")
        page.locator("body").click(position={"x": 5, "y": 400})
        page.keyboard.press("Shift+Tab")  # ES-4: edit → yolo
        expect(badge).to_have_text("yolo")
        assert _state(http, sid)["mode"] == "yolo"

        assert http.post(f"/v1/sessions/{sid}/goal",
                         json={"objective": "Ship the release"}).status_code == 200
        expect(page.locator("#goal .goal-objective")).to_have_text("Ship the release")
        page.locator(".mode-button[data-mode='plan']").click()
        expect(page.locator("#toast")).to_have_text(EXCLUSIVE)  # ES-5, nothing appended
        expect(badge).to_have_text("yolo")

        todos = [{"content": "Write the tests", "status": "completed", "priority": "high"},
                 {"content": "Fix <b>the</b> bug", "status": "in_progress", "priority": "medium"},
                 {"content": "Release", "status": "pending", "priority": "low"}]
        assert _call(http, sid, "TodoWrite", {"todos": todos}).status_code == 200
        expect(page.locator("#todo-progress")).to_have_text("1/3")
        expect(page.locator("#todos .todo-content")).to_have_text(
            [t["content"] for t in todos])
        expect(page.locator(f".session-link[data-session-id='{sid}'] .badge")).to_have_text(
            "yolo")
        other = create_session(http, mode="auto")
        expect(page.locator(f".session-link[data-session-id='{other}'] .badge")).to_have_text(
            "auto")
        shots.take(page, "mode-goal-todos-sessions")
        page.locator(f".session-link[data-session-id='{other}']").click()
        expect(page.locator(".session-id")).to_have_text(other)
        expect(badge).to_have_text("auto")
        shots.take(page, "other-session")


def test_a_deleted_session_shows_a_banner_and_keeps_its_timeline_after_reload(
    page: Page, shots: Shots, web_server: ServerProcess,
) -> None:
    expect = _expect()
    with web_server.client() as http:
        sid = create_session(http, mode="edit")
        page.goto(session_url(web_server.base_url, sid))
        expect(page.locator("#mode-badge")).to_have_text("edit")
        assert http.delete(f"/v1/sessions/{sid}").status_code == 200
        banner = page.locator("#session-banner")
        expect(banner).to_contain_text("deleted")
        expect(page.locator(".mode-button").first).to_be_disabled()
        expect(page.locator("#timeline > li").last).to_have_attribute(
            "data-type", "SessionDeleted")
        shots.take(page, "deleted")
        page.reload()  # the stream answers 410 now; the events page stays readable
        expect(banner).to_contain_text("deleted")
        expect(page.locator("#timeline > li")).to_have_count(2)
        assert [e["seq"] for e in http.get(f"/v1/sessions/{sid}/events").json()["events"]] == [
            1, 2]
        shots.take(page, "deleted-after-reload")


def test_a_session_deleted_before_its_stream_opens_still_shows_the_banner(
    page: Page, web_server: ServerProcess,
) -> None:
    """The race CI met: the timeline window is read, then the session is deleted, then the
    stream is asked for and answers 410; the page must not stay "reconnecting" forever."""
    expect = _expect()
    with web_server.client() as http:
        sid = create_session(http, mode="edit")
        deleted: list[int] = []

        def delete_first(route: Any) -> None:
            if not deleted:
                deleted.append(http.delete(f"/v1/sessions/{sid}").status_code)
            route.continue_()

        page.route(f"**/v1/sessions/{sid}/events/stream*", delete_first)
        page.goto(session_url(web_server.base_url, sid))
        expect(page.locator("#session-banner")).to_contain_text("deleted")
        assert deleted == [200]
        expect(page.locator("#timeline > li")).to_have_count(2)
        expect(page.locator("#timeline > li").last).to_have_attribute(
            "data-type", "SessionDeleted")
        expect(page.locator(".mode-button").first).to_be_disabled()
