"""Imported and hooked sessions shown like any other (SPEC CC-9; issue 22): ``replay``, the
TUI and the HTTP reads the web client draws name the client and Claude's session id, and show
an event's own time (``occurredAt``) where the host gave one, with when it was recorded.

The sessions are appended through the real service's ledger over a real SQLite file
(:mod:`claude_code_display_support`); ``replay`` and ``events`` run as the installed console
script, the TUI under a Textual pilot, HTTP in process. The web page itself is tested in a
real browser in ``tests/browser/test_web_claude_code.py``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from claude_code_display_support import (
    CREATED_AT,
    EXTERNAL,
    LIVE_REPLY,
    PROMPT,
    PROMPT_AT,
    REPLY_AT,
    imported_session,
)
from server_support import in_process_client
from test_cli import run_cli
from textual.pilot import Pilot
from tui_support import drive, opened, plain

from eventlog import NewEvent, TodoItemData, TodosWritten
from sessionledger import SessionService
from sessionledger.tui import SessionApp


@pytest.fixture
def db(tmp_path: Path) -> Iterator[tuple[Path, str, str]]:
    """A SQLite file holding the imported session and a session of the service's own."""
    path = tmp_path / "ledger.db"
    service = SessionService.open(f"sqlite:///{path}", workspace_root=tmp_path)
    try:
        imported = imported_session(service, tmp_path)
        own = service.create_session()["sessionId"]
    finally:
        service.close()
    yield path, imported, own


def _recorded(path: Path, session_id: str) -> list[str]:
    done = run_cli("events", session_id, "--json", "--db", f"sqlite:///{path}", cwd=path.parent)
    assert done.returncode == 0, done.stderr
    return [json.loads(line)["recordedAt"] for line in done.stdout.splitlines()]


def test_replay_names_the_client_and_shows_each_events_own_time(  # CC-9
    db: tuple[Path, str, str],
) -> None:
    path, session, _own = db
    recorded = _recorded(path, session)
    done = run_cli("replay", session, "--db", f"sqlite:///{path}", cwd=path.parent)
    assert done.returncode == 0, done.stderr
    timeline, _, final = done.stdout.rstrip().rpartition("\n\n")
    header, *lines = timeline.splitlines()
    assert header == f"{session}: client claude-code, session {EXTERNAL}"
    assert [int(line.split()[0]) for line in lines] == [1, 2, 3, 4]
    # The time column is the host's time where it gave one, the recorded time otherwise.
    assert [line.split()[1] for line in lines] == [CREATED_AT, PROMPT_AT, REPLY_AT, recorded[3]]
    for line, at in zip(lines[:3], recorded[:3], strict=True):
        assert line.endswith(f"(recorded {at})")
    assert "(recorded" not in lines[3] and LIVE_REPLY in lines[3]
    assert PROMPT in lines[1]
    assert final.startswith("state as of seq 4 (")


def test_replay_until_still_names_the_client(db: tuple[Path, str, str]) -> None:  # CC-9
    path, session, _own = db
    done = run_cli("replay", session, "--until", "2", "--db", f"sqlite:///{path}",
                   cwd=path.parent)
    assert done.returncode == 0, done.stderr
    first, second, third = done.stdout.splitlines()[:3]
    assert first == f"{session}: client claude-code, session {EXTERNAL}"
    assert second.split()[:2] == ["1", CREATED_AT] and third.split()[:2] == ["2", PROMPT_AT]


def test_replay_of_the_services_own_session_is_unchanged(  # CC-9
    db: tuple[Path, str, str],
) -> None:
    path, _session, own = db
    done = run_cli("replay", own, "--db", f"sqlite:///{path}", cwd=path.parent)
    assert done.returncode == 0, done.stderr
    first = done.stdout.splitlines()[0]
    assert first.split()[0] == "1" and first.split()[3] == "SessionCreated"
    assert "client" not in done.stdout and "(recorded" not in done.stdout


def test_events_json_carries_occurred_at_in_the_data_unchanged(  # CC-9
    db: tuple[Path, str, str],
) -> None:
    path, session, _own = db
    done = run_cli("events", session, "--json", "--db", f"sqlite:///{path}", cwd=path.parent)
    assert done.returncode == 0, done.stderr
    envelopes = [json.loads(line) for line in done.stdout.splitlines()]
    assert [e["data"].get("occurredAt") for e in envelopes] == [
        CREATED_AT, PROMPT_AT, REPLY_AT, None,
    ]
    created = envelopes[0]["data"]
    assert created["client"] == "claude-code" and created["externalSessionId"] == EXTERNAL
    assert all(e["recordedAt"] not in (CREATED_AT, PROMPT_AT, REPLY_AT) for e in envelopes)


def test_tui_sidebar_names_the_client_and_shows_occurred_at(tmp_path: Path) -> None:  # CC-9
    with opened(tmp_path) as service:
        session = imported_session(service, tmp_path)

        async def scenario(app: SessionApp, pilot: Pilot[None]) -> None:
            assert app.sidebar.client.display
            client = plain(app.sidebar.client)
            assert client.splitlines()[0] == "Client: Claude Code"
            assert EXTERNAL in client
            events = plain(app.sidebar.events)
            for at in (CREATED_AT, PROMPT_AT, REPLY_AT):
                assert f"occurred {at}" in events
            assert events.count("occurred ") == 3  # the live event has none
            assert "   4 MessageRecorded by model" in events

        drive(service, session, scenario)


def test_tui_sidebar_of_the_services_own_session_names_no_client(  # CC-9
    tmp_path: Path,
) -> None:
    with opened(tmp_path) as service:
        session = service.create_session(host="tui")["sessionId"]

        async def scenario(app: SessionApp, pilot: Pilot[None]) -> None:
            assert not app.sidebar.client.display
            assert plain(app.sidebar.client).strip() == ""
            assert "occurred" not in plain(app.sidebar.events)

        drive(service, session, scenario)


def test_http_reads_the_web_client_draws_carry_the_client_and_occurred_at(  # CC-9
    tmp_path: Path,
) -> None:
    with in_process_client(tmp_path, store_url=f"sqlite:///{tmp_path / 'ledger.db'}") as (
        client, service,
    ):
        session = imported_session(service, tmp_path)
        document = client.get(f"/v1/sessions/{session}").json()
        assert (document["client"], document["externalSessionId"]) == ("claude-code", EXTERNAL)
        (entry,) = [s for s in client.get("/v1/sessions").json()["sessions"]
                    if s["sessionId"] == session]
        assert (entry["client"], entry["externalSessionId"]) == ("claude-code", EXTERNAL)
        events = client.get(f"/v1/sessions/{session}/events").json()["events"]
        assert [e["data"].get("occurredAt") for e in events] == [
            CREATED_AT, PROMPT_AT, REPLY_AT, None,
        ]


def test_the_summary_keeps_its_client_through_later_events_and_a_rebuild(  # CC-9
    tmp_path: Path,
) -> None:
    # Every later event (a TodoWrite too) restamps the summary; none may drop who created it.
    with opened(tmp_path) as service:
        session = imported_session(service, tmp_path)
        todo = TodoItemData(content="Add the flag", status="pending", priority="medium")
        service.ledger.append(session, [NewEvent(TodosWritten(
            todos=(todo,), occurred_at=REPLY_AT), actor="model")], expected_version=4)
        for _ in range(2):
            summary = service.find_summary(session)
            assert summary is not None and summary.version == 5
            assert (summary.client, summary.external_session_id) == ("claude-code", EXTERNAL)
            assert summary.todos_seq == 5
            assert service.audit_report(session).ok
            service.rebuild_projections()
