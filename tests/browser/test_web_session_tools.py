"""A long session's audit and timeline on the page (issue 42, acceptance 3).

One real ``sessionledger serve`` over a session of about 3,000 events written in process before
it starts: it began in Plan, seven Writes ran meanwhile (seven ``write_in_plan`` findings near
its start), then ~2,985 user messages; over HTTP a TodoWrite then drops an unfinished item (a
``dropped_unfinished_todos`` finding at its end). The audit's findings are grouped by kind
(a heading with its count, the group of seven collapsed) and each links to its timeline entry,
loaded and highlighted on a click. The timeline is filtered by type and by actor, and "Go to
seq" shows seq 1 in one step. The session is exported from the page: its events as JSON Lines
(the events route's envelopes, seqs 1..N) and its audit as JSON. A deleted session's audit
panel is read again (not left stale), and cleared once the session is purged.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from axe_support import requirement_ids, violations
from server_support import ServerProcess, create_session, running_server, sessionledger_command
from web_support import Shots, session_url, timeline_seqs

from eventlog import MessageRecorded, NewEvent, ToolCallCompleted, ToolCallRequested
from sessionledger import SessionService

if TYPE_CHECKING:
    from playwright.sync_api import Page

EVENTS = 3000
WRITES = 7
WINDOW = 200


def _expect() -> Any:
    from playwright.sync_api import expect

    return expect


@pytest.fixture(scope="module")
def long_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, str]]:
    directory = tmp_path_factory.mktemp("web-session-tools")
    (directory / "workspace").mkdir()
    service = SessionService.open(f"sqlite:///{directory / 'ledger.db'}",
                                  workspace_root=directory / "workspace")
    try:
        sid = service.create_session(mode="plan")["sessionId"]
        writes = []
        for n in range(WRITES):
            writes += [
                NewEvent(ToolCallRequested(call_id=f"call_w{n}", tool="Write",
                                           input={"file_path": f"src/module_{n}.py"},
                                           host="protocol"), actor="host"),
                NewEvent(ToolCallCompleted(call_id=f"call_w{n}", tool="Write", status="completed",
                                           success=True, model_content="written"), actor="host"),
            ]
        service.ledger.append(sid, writes, expected_version=1)
        version = 1 + 2 * WRITES
        while version < EVENTS:
            batch = [NewEvent(MessageRecorded(role="user", content=f"message {n}"), actor="user")
                     for n in range(version + 1, min(version + 500, EVENTS) + 1)]
            service.ledger.append(sid, batch, expected_version=version)
            version += len(batch)
    finally:
        service.close()
    with running_server(directory) as server, server.client() as http:
        calls = f"/v1/sessions/{sid}/tool-calls"
        for todos in (["Keep me", "Drop me"], ["Keep me"]):
            body = {"todos": [{"content": c, "status": "pending", "priority": "medium"}
                              for c in todos]}
            assert http.post(calls, json={"tool": "TodoWrite", "input": body}).status_code == 200
        yield server, sid


def _open(page: Page, server: ServerProcess, sid: str) -> None:
    expect = _expect()
    page.goto(session_url(server.base_url, sid))
    expect(page.locator("#timeline")).to_have_attribute("data-ready", "true")
    expect(page.locator("#connection")).to_have_attribute("data-state", "live")


def test_findings_are_grouped_by_kind_and_lead_to_their_timeline_entries(
    page: Page, shots: Shots, long_session: tuple[ServerProcess, str], axe: str,
) -> None:
    expect = _expect()
    server, sid = long_session
    with server.client() as http:
        findings = http.get(f"/v1/sessions/{sid}/audit").json()["findings"]
    writes = [f["seq"] for f in findings if f["kind"] == "write_in_plan"]
    (dropped,) = [f["seq"] for f in findings if f["kind"] == "dropped_unfinished_todos"]
    assert len(writes) == WRITES and max(writes) < 20
    _open(page, server, sid)
    groups = page.locator("#findings details.finding-group")
    expect(groups).to_have_count(2)
    expect(groups.locator("h5")).to_have_text(
        ["Writes while Plan was on (7)", "Unfinished todos dropped (1)"])
    many, one = groups.nth(0), groups.nth(1)
    expect(many).to_have_attribute("data-kind", "write_in_plan")
    assert many.evaluate("el => el.open") is False  # many: collapsed
    assert one.evaluate("el => el.open") is True
    expect(many.locator("li.finding")).to_have_count(WRITES)
    expect(many.locator("li.finding").first).to_be_hidden()
    shots.take(page, "grouped-findings")
    assert violations(page, axe) == []
    assert requirement_ids(page) == []  # no requirement ids in text or tooltips

    target = page.locator(f"#timeline > li[data-seq='{writes[2]}']")
    expect(target).to_have_count(0)  # far before the newest window
    many.locator("summary").click()
    many.get_by_role("button", name=f"seq {writes[2]}").click()
    expect(target).to_have_class("highlight")
    expect(target).to_be_in_viewport()
    expect(target.locator(".type")).to_have_text("ToolCallCompleted")
    expect(page.locator("#timeline > li.highlight")).to_have_count(1)
    shots.take(page, "finding-in-timeline")

    one.get_by_role("button", name=f"seq {dropped}").click()  # and back to the newest events
    later = page.locator(f"#timeline > li[data-seq='{dropped}']")
    expect(later).to_have_class("highlight")
    expect(later).to_be_in_viewport()
    expect(later.locator(".type")).to_have_text("TodosWritten")
    expect(page.locator("#timeline > li.highlight")).to_have_count(1)


def test_the_timeline_is_filtered_and_goes_to_any_seq_in_one_step(
    page: Page, shots: Shots, long_session: tuple[ServerProcess, str], axe: str,
) -> None:
    expect = _expect()
    server, sid = long_session
    _open(page, server, sid)
    entries = page.locator("#timeline > li")
    visible = page.locator("#timeline > li:visible")
    expect(entries).to_have_count(WINDOW)
    head = timeline_seqs(page)[-1]

    page.get_by_label("Type", exact=True).select_option("TodosWritten")
    expect(visible).to_have_count(2)
    assert visible.evaluate_all("els => els.map(e => e.dataset.type)") == ["TodosWritten"] * 2
    expect(page.locator("#timeline-note")).to_have_text(
        f"2 of the {WINDOW} loaded entries match (Load earlier for more).")
    page.get_by_label("Type", exact=True).select_option("")
    page.get_by_label("Actor", exact=True).select_option("model")
    actors = visible.evaluate_all("els => els.map(e => e.dataset.actor)")
    assert actors and set(actors) == {"model"} and len(actors) < WINDOW
    page.get_by_label("Actor", exact=True).select_option("user")
    expect(visible.first).to_have_attribute("data-actor", "user")
    assert set(visible.evaluate_all("els => els.map(e => e.dataset.actor)")) == {"user"}
    shots.take(page, "filtered-timeline")
    assert violations(page, axe) == []
    page.get_by_label("Actor", exact=True).select_option("")
    expect(visible).to_have_count(WINDOW)

    requests: list[str] = []
    page.on("request", lambda r: requests.append(r.url) if "/timeline" in r.url else None)
    page.get_by_label("Go to seq").fill("1")
    page.get_by_role("button", name="Go", exact=True).click()
    first = page.locator("#timeline > li[data-seq='1']")
    expect(first).to_have_class("highlight")
    expect(first).to_be_in_viewport()
    expect(first.locator(".type")).to_have_text("SessionCreated")
    assert len(requests) == 1, requests  # one step: not page after page of "Load earlier"
    assert timeline_seqs(page) == list(range(1, WINDOW + 1))
    expect(page.locator("#load-earlier")).to_be_hidden()
    later = page.get_by_role("button", name="Load later")
    expect(later).to_have_text(f"Load later ({head - WINDOW} more)")
    later.click()
    expect(entries).to_have_count(2 * WINDOW)
    assert timeline_seqs(page) == list(range(1, 2 * WINDOW + 1))

    page.get_by_label("Go to seq").fill(str(head + 100))
    page.get_by_role("button", name="Go", exact=True).click()
    expect(page.locator("#toast")).to_have_text(
        f"There is no event with seq {head + 100}: the newest is {head}.")


def test_a_session_is_exported_as_jsonl_events_and_json_audit(
    page: Page, shots: Shots, long_session: tuple[ServerProcess, str],
) -> None:
    server, sid = long_session
    with server.client() as http:
        audit = http.get(f"/v1/sessions/{sid}/audit").json()
        served = http.get(f"/v1/sessions/{sid}/events",
                          params={"after": 0, "limit": 10000}).json()
    _open(page, server, sid)
    with page.expect_download() as info:
        page.get_by_role("button", name="Export events (JSONL)").click()
    download = info.value
    assert download.suggested_filename == f"{sid}.events.jsonl"
    text = Path(download.path()).read_text(encoding="utf-8")
    assert text.endswith("\n")
    lines = text.splitlines()
    events = [json.loads(line) for line in lines]  # one JSON event per line
    assert [e["seq"] for e in events] == list(range(1, served["version"] + 1))
    assert events == served["events"]  # each line the envelope the events route gives
    assert all(e["sessionId"] == sid for e in events)

    with page.expect_download() as info:
        page.get_by_role("button", name="Export audit (JSON)").click()
    download = info.value
    assert download.suggested_filename == f"{sid}.audit.json"
    exported = json.loads(Path(download.path()).read_text(encoding="utf-8"))
    assert set(exported) >= {"ok", "events", "chain", "projections", "findings"}
    assert exported["events"] == audit["events"] and exported["findings"] == audit["findings"]


def test_a_deleted_session_audit_is_read_again_and_cleared_once_purged(
    page: Page, shots: Shots, long_session: tuple[ServerProcess, str],
) -> None:
    expect = _expect()
    server, _ = long_session
    with server.client() as http:
        sid = create_session(http, mode="plan")
        page.goto(session_url(server.base_url, sid))
        verdict = page.locator("#audit-verdict")
        expect(verdict).to_contain_text("Audit ok — 1 event:")
        assert http.delete(f"/v1/sessions/{sid}").status_code == 200
        expect(page.locator("#session-banner")).to_contain_text("deleted")
        expect(verdict).to_contain_text("Audit ok — 2 events:")  # read again, not stale
        shots.take(page, "deleted-audit")
    purged = subprocess.run([*sessionledger_command(), "purge", "--db", server.db_url, sid],
                            capture_output=True, text=True, timeout=60, input="y\n")
    assert purged.returncode == 0, purged.stderr
    page.get_by_role("button", name="Check again").click()
    expect(verdict).to_have_text(f"There is no session {sid}: nothing to audit.")
    expect(page.locator("#findings")).to_have_attribute("data-count", "0")
