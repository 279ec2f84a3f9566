"""Plan mode end to end over HTTP with a real server (issue 7 acceptance 4; SPEC §7, §11).

One ``sessionledger serve`` subprocess (the shared ``server`` fixture): enter Plan from
``yolo`` with the EnterPlanMode tool, a host ``Write`` is denied by the permission check,
ExitPlanMode waits as a plan approval, feedback keeps Plan on and hands back the follow-up
input, a second ExitPlanMode is approved — the file on disk equals the plan byte for byte and
the mode is ``yolo`` again — and after ``compact`` the next ``prepare-request`` carries the
plan-file reference.
"""

from __future__ import annotations

from typing import Any

import httpx
from server_support import ServerProcess, create_session

from sessionledger.tools.plan_files import plan_path

PLAN = "# Migration plan\n\n1. Add the column ✓\n2. Backfill in batches\r\n3. Drop the old one\n"
APPROVED = (
    "User has approved your plan. You can now start coding. Start with updating your todo "
    "list if applicable.\n\n## Approved Plan:\n"
)


def _call(http: httpx.Client, sid: str, tool: str, body: dict[str, Any]) -> httpx.Response:
    return http.post(f"/v1/sessions/{sid}/tool-calls", json={"tool": tool, "input": body})


def _respond(http: httpx.Client, sid: str, iid: str, **body: Any) -> dict[str, Any]:
    response = http.post(f"/v1/sessions/{sid}/interactions/{iid}/respond", json=body)
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


def _state(http: httpx.Client, sid: str) -> dict[str, Any]:
    state: dict[str, Any] = http.get(f"/v1/sessions/{sid}").json()["executionState"]
    return state


def test_plan_mode_end_to_end_over_http(server: ServerProcess, http: httpx.Client) -> None:
    sid = create_session(http, mode="yolo")
    entered = _call(http, sid, "EnterPlanMode", {})
    assert entered.status_code == 200 and entered.json()["success"] is True
    assert _state(http, sid) == {"mode": "yolo", "planEnabled": True, "goal": None}

    check = http.post(f"/v1/sessions/{sid}/permission-check",
                      json={"tool": "Write", "input": {"file_path": "a.txt", "content": "x"}})
    assert check.status_code == 200 and check.json()["behavior"] == "deny"
    assert check.json()["ruleId"] == "mode.plan.denyWrites"

    first = _call(http, sid, "ExitPlanMode", {"plan": "too vague"})
    assert first.status_code == 202
    [waiting] = http.get(f"/v1/sessions/{sid}").json()["interactions"]
    assert waiting["kind"] == "planApproval" and waiting["autoResolution"] is None
    assert waiting["payload"]["questions"][0]["question"] == "Review this implementation plan."
    blank = http.post(f"/v1/sessions/{sid}/interactions/{waiting['interactionId']}/respond",
                      json={"decision": "feedback", "feedback": "  "})
    assert blank.status_code == 422
    fed = _respond(http, sid, first.json()["interactionId"], decision="feedback",
                   feedback="Say how the backfill is batched.")
    assert fed["status"] == "completed" and fed["success"] is False
    assert fed["modelContent"] == "The plan was not approved by the user."
    assert fed["followUpUserInput"] == {
        "input": "Say how the backfill is batched.", "reasonSource": "plan_approval_feedback",
    }
    assert _state(http, sid)["planEnabled"] is True

    second = _call(http, sid, "ExitPlanMode", {"plan": PLAN})
    assert second.status_code == 202
    done = _respond(http, sid, second.json()["interactionId"], decision="approve")
    assert done["success"] is True and done["modelContent"] == APPROVED + PLAN
    workspace = http.get(f"/v1/sessions/{sid}").json()["workspace"]
    assert plan_path(workspace, sid).read_bytes() == PLAN.encode("utf-8")
    assert _state(http, sid) == {"mode": "yolo", "planEnabled": False, "goal": None}

    assert http.post(f"/v1/sessions/{sid}/compact").status_code in (200, 201)
    prepared = http.post(f"/v1/sessions/{sid}/prepare-request", json={"tools": []})
    assert prepared.status_code == 200
    kinds = [r["kind"] for r in prepared.json()["reminders"]]
    assert kinds == ["plan_exit", "plan_file_reference"]
    reference = prepared.json()["reminders"][1]["text"]
    assert reference.startswith(
        f"A plan file exists from plan mode at: {plan_path(workspace, sid)}"
    )
    assert PLAN in reference
    assert server.process.poll() is None


def test_pm9_headless_session_over_http_stops_the_turn(http: httpx.Client) -> None:
    sid = create_session(http, mode="build", host="headless")
    assert _call(http, sid, "EnterPlanMode", {}).status_code == 200
    denied = _call(http, sid, "ExitPlanMode", {"plan": PLAN})
    assert denied.status_code == 200
    body = denied.json()
    assert body["status"] == "denied"
    assert body["modelContent"] == "No permission client configured for ExitPlanMode"
    assert body["turnControl"] == {"reason": "plan_exit_denied", "stopTurnAfterResult": True}
    assert _state(http, sid)["planEnabled"] is True


def test_pm6_invalid_plan_is_422_and_appends_nothing(http: httpx.Client) -> None:
    sid = create_session(http, mode="plan")
    before = http.get(f"/v1/sessions/{sid}").json()["version"]
    for bad in ({}, {"plan": ""}, {"plan": "   "}, {"plan": "x" * 20001}):
        response = _call(http, sid, "ExitPlanMode", bad)
        assert response.status_code == 422
        assert response.json()["error"]["code"] == "invalid_input"
    assert http.get(f"/v1/sessions/{sid}").json()["version"] == before


def test_unwritable_plans_directory_over_http_is_left_recorded_and_audited(
    server: ServerProcess, http: httpx.Client
) -> None:
    """Acceptance 3 against the real server: ``.zcode`` is a file, so the plans directory
    cannot be made (this works as root too, unlike a read-only mode)."""
    workspace = server.workspace / "blocked"
    workspace.mkdir()
    (workspace / ".zcode").write_text("not a directory", encoding="utf-8")
    sid = create_session(http, mode="plan", workspace=str(workspace))
    pending = _call(http, sid, "ExitPlanMode", {"plan": PLAN})
    done = _respond(http, sid, pending.json()["interactionId"], decision="approve")
    assert done["success"] is True and done["modelContent"] == APPROVED + PLAN
    assert done["result"]["fileWritten"] is False
    assert _state(http, sid)["planEnabled"] is False
    types = [e["type"] for e in http.get(f"/v1/sessions/{sid}/events").json()["events"]]
    assert types.index("PlanFileWriteFailed") + 1 == types.index("PlanApproved")
    audit = http.get(f"/v1/sessions/{sid}/audit").json()
    assert audit["ok"] is True and "not written" in audit["notes"][0]
