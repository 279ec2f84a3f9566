"""A store holding events this build cannot decode keeps working (SPEC EG-1, last sentences).

The store is seeded as an earlier version could have left it: events whose payloads the
current reader refuses (JSON nested 300 deep, a lone surrogate escape, a value its model
rejects), written through SQL with the hash chain recomputed over the stored text, so the chain
itself is intact. Then the real ``sessionledger serve`` must start (also when a projection
needs its rebuild), answer the events page, deliver every other event on both streams and go
on past the undecodable ones, and ``audit`` must name each as ``undecodable`` at its ``seq``,
not as a chain break; the CLI's ``events --json``, ``replay`` and ``rebuild`` finish.
"""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import httpx
from httpx_sse import ServerSentEvent, connect_sse
from server_support import running_server
from test_cli import run_cli

from eventlog import UNDECODABLE, MessageRecorded, NewEvent, envelope_hash
from sessionledger import SessionService

DEEP = ('{"callId":"call_deep","host":"protocol","input":{"x":' + "[" * 300 + "]" * 300
        + '},"tool":"Read"}')
SURROGATE = '{"callId":"call_s","host":"protocol","input":{"x":"\\ud800"},"tool":"Read"}'
REFUSED_BY_MODEL = '{"content":"hi","role":"nobody"}'
POISONS = {  # seq in the poisoned session → (stored type, stored data)
    2: ("ToolCallRequested", DEEP),
    3: ("ToolCallRequested", SURROGATE),
    4: ("MessageRecorded", REFUSED_BY_MODEL),
}
_COLUMNS = ("global_position, session_id, seq, type, schema_version, data, recorded_at, actor, "
            "causation_id, correlation_id, prev_hash")


def poison(db: Path, session_id: str, poisons: dict[int, tuple[str, str]]) -> None:
    """Replace the type and data of some of a session's rows, recomputing every hash from the
    first of them on (and the head record) over the stored text: the chain stays intact."""
    with closing(sqlite3.connect(db)) as conn, conn:
        rows = conn.execute(
            f"SELECT {_COLUMNS} FROM events WHERE session_id = ? AND seq >= ? ORDER BY seq",
            (session_id, min(poisons)),
        ).fetchall()
        prev = rows[0][10]
        for position, sid, seq, etype, version, data, at, actor, cause, corr, _prev in rows:
            etype, data = poisons.get(seq, (etype, data))
            digest = envelope_hash(prev, sid, seq, etype, version, data, at, actor, cause, corr)
            conn.execute(
                "UPDATE events SET type = ?, data = ?, prev_hash = ?, hash = ? "
                "WHERE global_position = ?", (etype, data, prev, digest, position),
            )
            prev = digest
        conn.execute("UPDATE streams SET head_hash = ? WHERE session_id = ?", (prev, session_id))
        # An upgrade that changed a projection: serve rebuilds it from the log at startup.
        conn.execute("UPDATE projection_versions SET version = version + 100 "
                     "WHERE name = 'turn_counters'")


def seed(directory: Path) -> tuple[str, str]:
    """Session A: created, four messages (seq 2-4 then poisoned), B: created and a message."""
    (directory / "workspace").mkdir()
    service = SessionService.open(
        f"sqlite:///{directory / 'ledger.db'}", workspace_root=directory / "workspace"
    )
    try:
        poisoned, other = (service.create_session()["sessionId"] for _ in range(2))
        for session_id, count in ((poisoned, 4), (other, 1)):
            for number in range(count):
                message = MessageRecorded(role="user", content=f"message {number}")
                service.store.append(session_id, [NewEvent(message, actor="user")])
    finally:
        service.close()
    poison(directory / "ledger.db", poisoned, POISONS)
    return poisoned, other


def read_stream(http: httpx.Client, url: str, until_id: int) -> list[ServerSentEvent]:
    """Events of a stream from its start until the one with id ``until_id``."""
    received: list[ServerSentEvent] = []
    with connect_sse(http, "GET", url) as source:
        assert source.response.status_code == 200
        for event in source.iter_sse():
            if event.data:
                received.append(event)
            if event.id and int(event.id) >= until_id:
                return received
    raise AssertionError(f"{url} ended before id {until_id}: {received}")


def assert_undecodable(envelope: dict[str, Any], seq: int) -> None:
    """The wire shape of an undecodable event (docs/http-api.md): type ``Undecodable``, the
    stored type and text and the reason in ``data``, the rest of the envelope as stored."""
    stored_type, stored_data = POISONS[seq]
    assert envelope["seq"] == seq and envelope["type"] == UNDECODABLE, envelope
    assert envelope["data"]["storedType"] == stored_type
    assert envelope["data"]["storedData"] == stored_data
    assert envelope["data"]["reason"]
    assert envelope["schemaVersion"] == 1 and len(envelope["hash"]) == 64


def test_serve_streams_audit_and_cli_over_undecodable_events(tmp_path: Path) -> None:  # EG-1
    poisoned, other = seed(tmp_path)
    timeout = httpx.Timeout(10.0, read=8.0)
    with running_server(tmp_path) as server, server.client(timeout=timeout) as http:
        page = http.get(f"/v1/sessions/{poisoned}/events")
        assert page.status_code == 200, page.text
        events = page.json()["events"]
        assert [e["seq"] for e in events] == [1, 2, 3, 4, 5] and page.json()["version"] == 5
        for seq in POISONS:
            assert_undecodable(events[seq - 1], seq)
        assert events[4]["type"] == "MessageRecorded" and events[4]["data"]["content"] == (
            "message 3")

        audit = http.get(f"/v1/sessions/{poisoned}/audit").json()
        assert audit["chain"] == {"ok": True, "firstBadSeq": None} and audit["ok"] is False
        assert [(u["seq"], u["type"]) for u in audit["undecodable"]] == [
            (seq, stored_type) for seq, (stored_type, _data) in POISONS.items()
        ]
        assert http.get(f"/v1/sessions/{other}/audit").json()["ok"] is True

        # The session works on: a new event, after the undecodable ones, on both streams.
        sent = http.post(f"/v1/sessions/{poisoned}/messages",
                         json={"role": "user", "content": "after"})
        assert sent.status_code == 201, sent.text
        streamed = read_stream(http, f"/v1/sessions/{poisoned}/events/stream", 6)
        assert [int(e.id) for e in streamed] == [1, 2, 3, 4, 5, 6]
        assert [json.loads(e.data) for e in streamed[:5]] == events
        assert [e.event for e in streamed[1:4]] == [UNDECODABLE] * 3
        assert json.loads(streamed[5].data)["data"]["content"] == "after"

        head = http.get(f"/v1/sessions/{poisoned}/events", params={"after": 5}).json()
        everything = read_stream(http, "/v1/events/stream", head["events"][0]["globalPosition"])
        assert len(everything) == 6 + 2  # every event of both sessions
        assert sorted(json.loads(e.data)["seq"] for e in everything
                      if json.loads(e.data)["sessionId"] == poisoned) == [1, 2, 3, 4, 5, 6]
    assert "Traceback" not in server.log() and "unexpected error" not in server.log()

    cwd, db = tmp_path, f"sqlite:///{tmp_path / 'ledger.db'}"
    audited = run_cli("audit", "--db", db, cwd=cwd)
    assert audited.returncode == 1, audited
    for seq in POISONS:
        assert f"FAIL {poisoned}: undecodable at seq {seq}:" in audited.stdout
    assert "chain broken" not in audited.stdout and other not in audited.stdout

    printed = run_cli("events", poisoned, "--json", "--db", db, cwd=cwd)
    assert printed.returncode == 0, printed
    lines = [json.loads(line) for line in printed.stdout.splitlines()]
    assert [e["seq"] for e in lines] == [1, 2, 3, 4, 5, 6] and lines[:5] == events

    replayed = run_cli("replay", poisoned, "--db", db, cwd=cwd)
    assert replayed.returncode == 0, replayed
    assert "undecodable ToolCallRequested event, passed over" in replayed.stdout
    assert "state as of seq 6" in replayed.stdout

    rebuilt = run_cli("rebuild", "--db", db, cwd=cwd)
    assert rebuilt.returncode == 0, rebuilt
    assert "8 events folded" in rebuilt.stdout  # every event, the undecodable ones counted
    again = run_cli("audit", "--db", db, cwd=cwd)
    assert again.returncode == 1
    fails = [line for line in again.stdout.splitlines() if line.startswith("FAIL")]
    assert len(fails) == len(POISONS) and all("undecodable at seq" in f for f in fails)
    assert run_cli("audit", other, "--db", db, cwd=cwd).returncode == 0
