"""How each host kind meets a call that needs the user (SPEC HO-1, HO-2, HO-3).

The TUI and protocol hosts get a pending interaction that waits (the TUI's never counts
down); the protocol host sees the request in its event stream and answers with ``modify``;
a headless run is denied at once.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sessionledger import SessionService

QUESTION = {
    "questions": [{
        "question": "Which database?", "header": "DB", "multiSelect": False,
        "options": [{"label": "SQLite (Recommended)", "description": "embedded"},
                    {"label": "PostgreSQL", "description": "a server"}],
    }]
}


@pytest.fixture
def service(tmp_path: Path) -> Iterator[SessionService]:
    svc = SessionService.open(f"sqlite:///{tmp_path}/ledger.db", workspace_root=tmp_path)
    try:
        yield svc
    finally:
        svc.close()


def _types(service: SessionService, session_id: str) -> list[str]:
    return [e.type for e in service.store.read_session(session_id)]


def test_ho1_tui_questions_wait_for_the_panel_and_never_count_down(
    service: SessionService,
) -> None:
    session = service.create_session(host="tui", mode="yolo")["sessionId"]
    answer = service.tools.call(session, "AskUserQuestion", QUESTION)
    assert answer.status_code == 202
    (pending,) = service.document(session)["interactions"]
    assert pending["kind"] == "askUserQuestion" and pending["autoResolution"] is None
    done = service.tools.respond(
        session, pending["interactionId"], "modify",
        input={**QUESTION, "answers": {"Which database?": "PostgreSQL"}},
    )
    assert done["status"] == "completed" and done["success"] is True
    assert service.document(session)["interactions"] == []


def test_ho2_protocol_host_sees_the_request_in_its_stream_and_answers_with_modify(
    service: SessionService,
) -> None:
    session = service.create_session(host="protocol")["sessionId"]
    answer = service.tools.call(session, "AskUserQuestion", QUESTION, call_id="call_q1")
    stream = [e.to_wire() for e in service.store.read_session(session)]
    request: dict[str, Any] = next(e for e in stream if e["type"] == "InteractionRequested")
    assert request["data"]["callId"] == "call_q1"
    assert request["data"]["interactionId"] == answer.document["interactionId"]
    assert request["data"]["payload"]["questions"][0]["question"] == "Which database?"
    done = service.tools.respond(
        session, answer.document["interactionId"], "modify",
        input={**QUESTION, "answers": {"Which database?": "SQLite (Recommended)"}},
    )
    assert done["modelContent"].startswith("User has answered your questions: ")
    assert _types(service, session)[-2:] == ["InteractionResolved", "ToolCallCompleted"]


def test_ho3_headless_denies_at_once_and_leaves_nothing_pending(
    service: SessionService,
) -> None:
    session = service.create_session(host="headless")["sessionId"]
    answer = service.tools.call(session, "AskUserQuestion", QUESTION)
    assert answer.status_code == 200 and answer.document["status"] == "denied"
    assert answer.document["modelContent"] == "No permission client configured for AskUserQuestion"
    assert service.document(session)["interactions"] == []
    assert "InteractionRequested" not in _types(service, session)


def test_aq5_a_modify_must_answer_the_questions_that_were_asked(
    service: SessionService,
) -> None:
    # AQ-5: the modified input is validated again; changing the questions is refused (422)
    # and the question stays pending.
    from sessionledger.errors import InvalidInput

    session = service.create_session()["sessionId"]
    answer = service.tools.call(session, "AskUserQuestion", QUESTION)
    iid = answer.document["interactionId"]
    changed = {"questions": [{**QUESTION["questions"][0], "question": "Which queue?"}]}
    with pytest.raises(InvalidInput, match="keep the questions"):
        service.tools.respond(session, iid, "modify",
                              input={**changed, "answers": {"Which queue?": "PostgreSQL"}})
    assert [i["interactionId"] for i in service.document(session)["interactions"]] == [iid]
