"""Tool calls over real HTTP and from the installed CLI (SPEC §11, AQ-5, HO-3, HO-8, TR-3).

Every test here talks to the installed ``sessionledger`` command in a subprocess: one
``serve`` shared by the module for the wire shapes, a server of its own that is SIGKILLed
while a question waits (issue 4 acceptance 5: pending calls live in the log), and
``sessionledger call`` as the headless host (acceptance 4).
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from server_support import ServerProcess, running_server, sessionledger_command
from server_support import create_session as create
from server_support import session_version as version

from sessionledger import SessionService

ASK = "AskUserQuestion"
MISSING_ANSWERS = "AskUserQuestion requires user answers before execution"
ALL_ANSWERED_PREFIX = "User has answered your questions: "
HEADLESS_DENIAL = "No permission client configured for AskUserQuestion"
PENDING_KEYS = {"status", "callId", "interactionId"}
COMPLETED_KEYS = {
    "status", "callId", "success", "result", "modelContent", "turnControl", "followUpUserInput",
}
DENIED_KEYS = {
    "status", "callId", "modelContent", "permission", "turnControl", "followUpUserInput",
}
INTERACTION_KEYS = {"interactionId", "callId", "kind", "payload", "autoResolution"}
QUESTION = "Which database?"
INPUT: dict[str, Any] = {"questions": [{
    "question": QUESTION, "header": "Database", "multiSelect": False,
    "options": [
        {"label": "Postgres (Recommended)", "description": "the server database"},
        {"label": "SQLite", "description": "one file", "preview": "```\nledger.db\n```"},
    ],
}]}
ANSWERED = {**INPUT, "answers": {QUESTION: "SQLite"}}


def post_call(http: httpx.Client, sid: str, raw: Any, **extra: Any) -> httpx.Response:
    return http.post(f"/v1/sessions/{sid}/tool-calls", json={"tool": ASK, "input": raw, **extra})


def respond(http: httpx.Client, sid: str, iid: str, **body: Any) -> httpx.Response:
    return http.post(f"/v1/sessions/{sid}/interactions/{iid}/respond", json=body)


def assert_error(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    body: dict[str, Any] = response.json()
    assert set(body) == {"error"}
    assert set(body["error"]) == {"code", "message", "details"}
    assert body["error"]["code"] == code
    assert body["error"]["message"]
    return body


def ask(http: httpx.Client, sid: str, **extra: Any) -> dict[str, Any]:
    response = post_call(http, sid, INPUT, **extra)
    assert response.status_code == 202, response.text
    pending: dict[str, Any] = response.json()
    assert set(pending) == PENDING_KEYS
    assert pending["status"] == "pending"
    return pending


# -- SPEC §11 wire shapes ------------------------------------------------------------------


def test_pending_then_modify_completes_with_the_spec_shapes(http: httpx.Client) -> None:
    sid = create(http)
    pending = ask(http, sid)
    call_url = f"/v1/sessions/{sid}/tool-calls/{pending['callId']}"
    assert http.get(call_url).json() == pending

    document = http.get(f"/v1/sessions/{sid}").json()
    (listed,) = document["interactions"]
    assert set(listed) == INTERACTION_KEYS
    assert listed["interactionId"] == pending["interactionId"]
    assert listed["callId"] == pending["callId"]
    assert listed["kind"] == "askUserQuestion"
    assert listed["payload"] == INPUT
    timer = listed["autoResolution"]  # HO-4: at the head of the queue, its clock runs
    assert timer["state"] == "hiddenGrace"
    started, visible, deadline = (
        datetime.fromisoformat(timer[k]) for k in ("startedAt", "visibleAt", "deadlineAt")
    )
    assert (visible - started, deadline - started) == (timedelta(seconds=60),
                                                       timedelta(seconds=300))

    answered = respond(http, sid, pending["interactionId"], decision="modify", input=ANSWERED)
    assert answered.status_code == 200, answered.text
    done = answered.json()
    assert set(done) == COMPLETED_KEYS
    assert done["status"] == "completed"
    assert done["callId"] == pending["callId"]
    assert done["success"] is True
    assert done["modelContent"].startswith(ALL_ANSWERED_PREFIX)
    assert done["modelContent"].startswith(f'{ALL_ANSWERED_PREFIX}"{QUESTION}"="SQLite"')
    assert done["turnControl"] is None and done["followUpUserInput"] is None
    # answered only after the completion is committed: it reads as completed at once
    fetched = http.get(call_url)
    assert fetched.status_code == 200 and fetched.json() == done
    assert http.get(f"/v1/sessions/{sid}").json()["interactions"] == []

    # acceptance 6 through the events API: every step carries its call id
    trail = [
        e for e in http.get(f"/v1/sessions/{sid}/events").json()["events"]
        if e["data"].get("callId") == pending["callId"]
    ]
    assert [e["type"] for e in trail] == [
        "ToolCallRequested", "PermissionDecided", "InteractionRequested",
        "InteractionResolved", "ToolCallCompleted",
    ]
    assert {e["causationId"] for e in trail} == {pending["callId"]}
    assert trail[3]["data"]["decision"] == "modify"
    assert trail[3]["data"]["input"] == ANSWERED
    assert trail[3]["actor"] == "user"


def test_resent_call_id_returns_the_original(http: httpx.Client) -> None:
    sid = create(http)
    pending = ask(http, sid, callId="toolu_resend")
    before = version(http, sid)
    again = post_call(http, sid, {"questions": []}, callId="toolu_resend")
    assert again.status_code == 202 and again.json() == pending
    assert version(http, sid) == before
    done = respond(http, sid, pending["interactionId"], decision="deny").json()
    after = post_call(http, sid, INPUT, callId="toolu_resend")
    assert after.status_code == 200 and after.json() == done
    requested = [
        e for e in http.get(f"/v1/sessions/{sid}/events").json()["events"]
        if e["type"] == "ToolCallRequested"
    ]
    assert len(requested) == 1


def test_invalid_input_is_422_and_appends_nothing(http: httpx.Client) -> None:
    sid = create(http)
    before = version(http, sid)
    bad_inputs: list[Any] = [
        {},
        {"questions": []},
        {"questions": [{**INPUT["questions"][0], "options": INPUT["questions"][0]["options"][:1]}]},
        {"questions": INPUT["questions"] * 2},
        {"questions": [{**INPUT["questions"][0], "options": [
            {"label": "Other", "description": "x"}, {"label": "SQLite", "description": "y"},
        ]}]},
        {"questions": [{**INPUT["questions"][0], "options": [
            {"label": "A", "description": "x", "preview": "<script>alert(1)</script>"},
            {"label": "B", "description": "y"},
        ]}]},
        {**INPUT, "extra": True},
        ANSWERED,  # answers are the approval step's, not the model's
    ]
    for raw in bad_inputs:
        body = assert_error(post_call(http, sid, raw), 422, "invalid_input")
        assert body["error"]["details"], raw
    # request-shape errors are 422 too
    assert_error(post_call(http, sid, ["not", "an", "object"]), 422, "invalid_input")
    assert_error(
        http.post(f"/v1/sessions/{sid}/tool-calls", json={"tool": ASK}), 422, "invalid_input"
    )
    assert_error(
        http.post(f"/v1/sessions/{sid}/tool-calls", json={"tool": "Nope", "input": {}}),
        422, "invalid_input",
    )
    assert version(http, sid) == before
    assert http.get(f"/v1/sessions/{sid}").json()["interactions"] == []


def test_invalid_modify_is_422_and_the_call_stays_pending(http: httpx.Client) -> None:
    sid = create(http)
    pending = ask(http, sid)
    iid = pending["interactionId"]
    before = version(http, sid)
    for raw in (
        INPUT,  # no answers
        {**INPUT, "answers": {"Which databases?": "SQLite"}},
        {**INPUT, "answers": {QUESTION: "  "}},
        {**ANSWERED, "extra": 1},
    ):
        body = assert_error(respond(http, sid, iid, decision="modify", input=raw), 422,
                            "invalid_input")
        assert body["error"]["details"]
    assert_error(respond(http, sid, iid, decision="modify"), 422, "invalid_input")
    assert_error(respond(http, sid, iid, decision="maybe"), 422, "invalid_input")
    assert version(http, sid) == before
    assert http.get(f"/v1/sessions/{sid}/tool-calls/{pending['callId']}").json() == pending
    (listed,) = http.get(f"/v1/sessions/{sid}").json()["interactions"]
    assert listed["interactionId"] == iid

    # HO-8: an old client's approve without answers completes with the exact AQ-3 message
    approved = respond(http, sid, iid, decision="approve")
    assert approved.status_code == 200, approved.text
    done = approved.json()
    assert set(done) == COMPLETED_KEYS
    assert done["success"] is False
    assert done["modelContent"] == MISSING_ANSWERS
    assert_error(respond(http, sid, iid, decision="modify", input=ANSWERED), 409, "conflict")
    assert_error(respond(http, sid, "int_missing", decision="deny"), 404, "not_found")
    assert_error(http.get(f"/v1/sessions/{sid}/tool-calls/call_missing"), 404, "not_found")


def test_ho3_headless_session_is_denied_over_http(http: httpx.Client) -> None:
    sid = create(http, host="headless")
    response = post_call(http, sid, INPUT)
    assert response.status_code == 200, response.text
    denied = response.json()
    assert set(denied) == DENIED_KEYS
    assert denied["status"] == "denied"
    assert denied["modelContent"] == HEADLESS_DENIAL
    assert denied["permission"] == {
        "behavior": "deny", "reason": HEADLESS_DENIAL,
        "ruleId": denied["permission"]["ruleId"],
    }
    assert http.get(f"/v1/sessions/{sid}").json()["interactions"] == []


def test_aq5_disallowed_tools_over_http(http: httpx.Client, server: ServerProcess) -> None:
    workspace = server.workspace / "no-questions"
    (workspace / ".sessionledger").mkdir(parents=True)
    (workspace / ".sessionledger" / "config.toml").write_text(
        '[permission]\ndisallowedTools = ["AskUserQuestion"]\n', encoding="utf-8"
    )
    sid = create(http, workspace=str(workspace), mode="yolo")
    response = post_call(http, sid, INPUT)
    assert response.status_code == 200, response.text
    assert response.json()["status"] == "denied"
    assert response.json()["permission"]["behavior"] == "deny"
    # yolo elsewhere still asks (AQ-5)
    ask(http, create(http, mode="yolo"))


def test_tr3_permission_check_over_http(http: httpx.Client) -> None:
    sid = create(http)
    url = f"/v1/sessions/{sid}/permission-check"
    cases = [
        ({"tool": "Bash", "input": {"command": "ls"}}, "allow"),
        ({"tool": "Bash", "input": {"command": "rm -rf x"}}, "ask"),
        ({"tool": "mcp__github__create_issue", "input": {}, "readOnly": False}, "ask"),
    ]
    for body, behavior in cases:
        before = version(http, sid)
        response = http.post(url, json=body)
        assert response.status_code == 200, response.text
        check = response.json()
        assert set(check) == {"behavior", "reason", "ruleId", "callId"}
        assert check["behavior"] == behavior
        (event,) = http.get(
            f"/v1/sessions/{sid}/events", params={"after": before}
        ).json()["events"]
        assert event["type"] == "PermissionDecided"
        assert event["data"]["callId"] == event["causationId"] == check["callId"]
        assert event["data"]["decision"] == {
            "behavior": check["behavior"], "reason": check["reason"], "ruleId": check["ruleId"]
        }
    before = version(http, sid)
    assert_error(http.post(url, json={"tool": "HostOnly", "input": {}}), 422, "invalid_input")
    assert version(http, sid) == before


# -- acceptance 5: a pending question survives a SIGKILL of serve --------------------------


@pytest.mark.slow  # a server killed or restarted under load: make verify (D182)
def test_acceptance5_pending_call_survives_sigkill_and_completes(tmp_path: Path) -> None:
    with running_server(tmp_path) as first, first.client() as http:
        sid = create(http)
        pending = ask(http, sid, callId="toolu_survivor")
        first.process.kill()  # SIGKILL: no shutdown, no flush beyond what was acknowledged
        assert first.process.wait(timeout=10) == -9

    with running_server(tmp_path) as second, second.client() as http:
        assert second.db_path == first.db_path
        call_url = f"/v1/sessions/{sid}/tool-calls/toolu_survivor"
        assert http.get(call_url).json() == pending
        (listed,) = http.get(f"/v1/sessions/{sid}").json()["interactions"]
        assert listed["interactionId"] == pending["interactionId"]
        assert listed["payload"] == INPUT

        answered = respond(
            http, sid, pending["interactionId"], decision="modify", input=ANSWERED
        )
        assert answered.status_code == 200, answered.text
        done = answered.json()
        assert done["status"] == "completed" and done["success"] is True
        assert done["modelContent"].startswith(ALL_ANSWERED_PREFIX)
        assert http.get(call_url).json() == done
        assert http.get(f"/v1/sessions/{sid}").json()["interactions"] == []
        audit = http.get(f"/v1/sessions/{sid}/audit").json()
        assert audit["ok"] is True, audit


# -- acceptance 4: `sessionledger call` is the headless host --------------------------------


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ}
    environment.pop("SESSIONLEDGER_DB", None)
    return subprocess.run(
        [*sessionledger_command(), *args], cwd=cwd, env=environment, capture_output=True,
        text=True, timeout=60, check=False,
    )


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[tuple[str, str]]:
    """A temporary database with one protocol session; (db url, session id)."""
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    service = SessionService.open(url, workspace_root=tmp_path)
    try:
        sid = str(service.create_session()["sessionId"])
    finally:
        service.close()
    yield url, sid


def read_back(url: str, root: Path, sid: str) -> tuple[dict[str, Any], list[str]]:
    service = SessionService.open(url, workspace_root=root)
    try:
        return service.document(sid), [e.type for e in service.store.read_session(sid)]
    finally:
        service.close()


def test_acceptance4_cli_call_is_denied_as_headless(
    ledger: tuple[str, str], tmp_path: Path
) -> None:
    url, sid = ledger
    result = run_cli("call", sid, ASK, "--input", json.dumps(INPUT), "--db", url, cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    assert result.stdout == f"{HEADLESS_DENIAL}\n"
    assert "Traceback" not in result.stderr
    document, types = read_back(url, tmp_path, sid)
    assert document["interactions"] == []
    assert types == [
        "SessionCreated", "ToolCallRequested", "PermissionDecided", "PermissionDecided",
        "ToolCallCompleted",
    ]


@pytest.mark.parametrize(
    "bad",
    ["{not json", "[1, 2]", "\"text\"", json.dumps({"questions": []}), json.dumps(ANSWERED)],
)
def test_acceptance4_cli_bad_input_exits_2_and_appends_nothing(
    ledger: tuple[str, str], tmp_path: Path, bad: str
) -> None:
    url, sid = ledger
    result = run_cli("call", sid, ASK, "--input", bad, "--db", url, cwd=tmp_path)
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert result.stderr.strip()
    assert "Traceback" not in result.stderr
    _document, types = read_back(url, tmp_path, sid)
    assert types == ["SessionCreated"]
