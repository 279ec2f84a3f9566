"""Service tool calls through the executor: validate → permission → broker, answers, audit.

``SessionService.tools`` over a temporary SQLite file. Covers AQ-2 … AQ-5 and HO-3, HO-8 as
they reach the executor (the contract itself is unit-tested in test_ask_user_question.py),
re-sent call ids (SPEC §11), the TR-3 permission check, the session document's pending
interactions, and issue 4's acceptance 6: every decision is read back from the log with its
call id. Two properties: any AskUserQuestion input that fails its schema, and any ``modify``
answer that fails the handler schema, is a 422 that appends nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from eventlog import RecordedEvent
from sessionledger import SessionService
from sessionledger.errors import Conflict, InvalidInput, NotFound, SessionDeleted
from sessionledger.tools.ask import parse_model_input

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
CALL_EVENTS = {
    "ToolCallRequested", "PermissionDecided", "InteractionRequested", "InteractionResolved",
    "ToolCallCompleted",
}


# -- helpers -------------------------------------------------------------------------------


def option(label: str, **extra: Any) -> dict[str, Any]:
    return {"label": label, "description": f"about {label}", **extra}


def question(text: str, **extra: Any) -> dict[str, Any]:
    return {
        "question": text, "header": "Choice",
        "options": [option("Postgres (Recommended)"), option("SQLite")],
        "multiSelect": False, **extra,
    }


TEXTS = ("Which database?", "Which queue?", "Which cache?")


def ask_input(count: int = 2) -> dict[str, Any]:
    return {"questions": [question(text) for text in TEXTS[:count]]}


def answered(raw: dict[str, Any], answers: dict[str, str], **extra: Any) -> dict[str, Any]:
    return {**raw, "answers": answers, **extra}


def log_mark(service: SessionService, session_id: str) -> tuple[int, int]:
    """The store's head position and the session's version: what an append would move."""
    return service.store.head_position(), service.store.version(session_id)


def events(service: SessionService, session_id: str) -> list[RecordedEvent]:
    return list(service.store.read_session(session_id))


def call_events(
    service: SessionService, session_id: str, call_id: str, type_: str | None = None
) -> list[RecordedEvent]:
    return [
        e for e in events(service, session_id)
        if getattr(e.data, "call_id", None) == call_id and type_ in (None, e.type)
    ]


def assert_invalid(error: pytest.ExceptionInfo[InvalidInput]) -> None:
    assert error.value.status == 422
    assert error.value.code == "invalid_input"
    assert error.value.details
    assert error.value.to_wire()["error"]["code"] == "invalid_input"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    path = tmp_path / "root"
    path.mkdir()
    return path


@pytest.fixture
def service(tmp_path: Path, root: Path) -> Iterator[SessionService]:
    opened = SessionService.open(f"sqlite:///{tmp_path / 'ledger.db'}", workspace_root=root)
    try:
        yield opened
    finally:
        opened.close()


@pytest.fixture
def session(service: SessionService) -> str:
    return str(service.create_session()["sessionId"])


def pending_call(
    service: SessionService, session_id: str, raw: dict[str, Any] | None = None,
    call_id: str | None = None,
) -> dict[str, Any]:
    answer = service.tools.call(session_id, ASK, raw or ask_input(), call_id=call_id)
    assert answer.status_code == 202, answer.document
    assert set(answer.document) == PENDING_KEYS
    assert answer.document["status"] == "pending"
    assert answer.document["interactionId"]
    return answer.document


# -- AQ-2 through the executor: invalid input appends nothing ------------------------------

Mutation = Callable[[dict[str, Any]], Any]
JSON_NOT_STR = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False),
    st.lists(st.integers(), max_size=2), st.dictionaries(st.text(max_size=3), st.integers(),
                                                         max_size=2),
)
JSON_NOT_LIST = st.one_of(
    st.none(), st.booleans(), st.integers(), st.text(max_size=5),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)
FORBIDDEN_TAGS = ("<html>", "</body>", "<!DOCTYPE html>", "<script src=x>", "<STYLE>", "<body>")
UNKNOWN_KEYS = st.text(min_size=1, max_size=12).filter(
    lambda k: k not in {"questions", "question", "header", "options", "multiSelect", "label",
                        "description", "preview"}
)


@st.composite
def valid_inputs(draw: st.DrawFn) -> dict[str, Any]:
    count = draw(st.integers(1, 4))
    texts = [f"Question {i}: {draw(st.text(max_size=8))}?" for i in range(count)]
    questions = []
    for text in texts:
        labels = draw(st.integers(2, 4))
        questions.append({
            "question": text, "header": draw(st.text(max_size=15)),
            "options": [option(f"Choice {j}") for j in range(labels)],
            "multiSelect": draw(st.booleans()),
        })
    return {"questions": questions}


def _at(draw: st.DrawFn, raw: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """A random question of ``raw`` and a random option of it (both mutable)."""
    q = draw(st.sampled_from(raw["questions"]))
    return q, draw(st.sampled_from(q["options"]))


@st.composite
def invalid_inputs(draw: st.DrawFn) -> dict[str, Any]:
    """A valid input with one thing broken, each kind of breakage of AQ-2."""
    raw = draw(valid_inputs())
    kind = draw(st.sampled_from([
        "missing_questions", "questions_type", "too_few_questions", "too_many_questions",
        "question_item_type", "question_text_type", "blank_question", "duplicate_question",
        "header_missing", "header_type", "multi_select_type", "options_type",
        "too_few_options", "too_many_options", "duplicate_label", "other_label", "blank_label",
        "label_type", "description_missing", "forbidden_preview", "preview_type",
        "unknown_top", "unknown_question", "unknown_option", "answers_from_model_ok_but_bad",
    ]))
    q, opt = _at(draw, raw)
    if kind == "missing_questions":
        raw.pop("questions")
        if draw(st.booleans()):
            raw[draw(UNKNOWN_KEYS)] = draw(JSON_NOT_STR)
    elif kind == "questions_type":
        raw["questions"] = draw(JSON_NOT_LIST)
    elif kind == "too_few_questions":
        raw["questions"] = []
    elif kind == "too_many_questions":
        extra = draw(st.integers(5, 7))
        raw["questions"] = [question(f"Q{i}?") for i in range(extra)]
    elif kind == "question_item_type":
        raw["questions"].append(draw(JSON_NOT_STR))
    elif kind == "question_text_type":
        q["question"] = draw(JSON_NOT_STR)
    elif kind == "blank_question":
        q["question"] = draw(st.sampled_from(["", " ", "\t\n "]))
    elif kind == "duplicate_question":
        copy = dict(q, question=draw(st.sampled_from([
            q["question"], f"  {q['question']} ", q["question"].upper(),
        ])))
        others = [x for x in raw["questions"] if x is not q][:2]
        raw["questions"] = [q, *others, copy]
    elif kind == "header_missing":
        q.pop("header")
    elif kind == "header_type":
        q["header"] = draw(JSON_NOT_STR)
    elif kind == "multi_select_type":
        q["multiSelect"] = draw(st.one_of(
            st.sampled_from(["true", "false", 0, 1, None]), st.text(max_size=3)
        ))
    elif kind == "options_type":
        q["options"] = draw(JSON_NOT_LIST)
    elif kind == "too_few_options":
        q["options"] = q["options"][: draw(st.integers(0, 1))]
    elif kind == "too_many_options":
        q["options"] = [option(f"Pick {j}") for j in range(draw(st.integers(5, 7)))]
    elif kind == "duplicate_label":
        label = opt["label"]
        others = [x for x in q["options"] if x is not opt][:2]
        q["options"] = [opt, *others, option(draw(st.sampled_from([
            label, label.upper(), f" {label} ", label.lower(),
        ])))]
    elif kind == "other_label":
        opt["label"] = draw(st.sampled_from(["Other", "other", " OTHER ", "\tOther\n", "oThEr"]))
    elif kind == "blank_label":
        opt["label"] = draw(st.sampled_from(["", "  ", "\n"]))
    elif kind == "label_type":
        opt["label"] = draw(JSON_NOT_STR)
    elif kind == "description_missing":
        opt.pop("description")
    elif kind == "forbidden_preview":
        before, after = draw(st.text(max_size=10)), draw(st.text(max_size=10))
        opt["preview"] = before + draw(st.sampled_from(FORBIDDEN_TAGS)) + after
    elif kind == "preview_type":
        opt["preview"] = draw(st.one_of(st.booleans(), st.integers(), st.lists(st.text())))
    elif kind == "unknown_top":
        raw[draw(UNKNOWN_KEYS)] = draw(JSON_NOT_STR)
    elif kind == "unknown_question":
        q[draw(UNKNOWN_KEYS.filter(lambda k: k not in q))] = draw(JSON_NOT_STR)
    elif kind == "unknown_option":
        opt[draw(UNKNOWN_KEYS.filter(lambda k: k not in opt))] = draw(JSON_NOT_STR)
    else:  # answers are the approval step's to write, never the model's (AQ-3)
        raw["answers"] = {}
    return raw


def test_aq2_property_invalid_input_is_422_and_appends_nothing(
    depth: str, service: SessionService, session: str
) -> None:
    mark = log_mark(service, session)

    @given(raw=invalid_inputs(), call_id=st.none() | st.just("call_reused"))
    def check(raw: dict[str, Any], call_id: str | None) -> None:
        with pytest.raises(InvalidInput) as refused:
            service.tools.call(session, ASK, raw, call_id=call_id)
        assert_invalid(refused)
        assert log_mark(service, session) == mark

    check()
    assert service.document(session)["interactions"] == []
    with pytest.raises(NotFound):
        service.tools.get(session, "call_reused")


@given(raw=valid_inputs())
def test_aq2_generator_of_valid_inputs_is_valid(raw: dict[str, Any]) -> None:
    """The base the invalid inputs are broken from is itself accepted (sanity of the property)."""
    parse_model_input(raw)


def test_unknown_tool_is_422_and_appends_nothing(service: SessionService, session: str) -> None:
    mark = log_mark(service, session)
    for tool in ("Frobnicate", "TodoWrite", "Write", "Bash", ""):
        with pytest.raises(InvalidInput) as refused:
            service.tools.call(session, tool, {})
        assert_invalid(refused)
    assert log_mark(service, session) == mark


# -- HO-8: a modify that fails the handler schema is 422 and the call stays pending --------


@st.composite
def invalid_answers(draw: st.DrawFn) -> dict[str, Any]:
    """The pending call's input with the approval step's part broken (AQ-3)."""
    raw = ask_input(2)
    answers = {TEXTS[0]: "Postgres (Recommended)"}
    kind = draw(st.sampled_from([
        "unknown_key", "blank_answer", "missing_answers", "null_answers", "extra_field",
        "answers_type", "answer_type", "unknown_annotation_key", "annotation_field",
        "questions_broken",
    ]))
    if kind == "unknown_key":
        key = draw(st.sampled_from([
            "Which databases?", "which database?", " Which database?", "Which queue", "",
        ]) | st.text(max_size=10).filter(lambda t: t not in TEXTS[:2]))
        return answered(raw, {**answers, key: "Yes"})
    if kind == "blank_answer":
        return answered(raw, {**answers, TEXTS[1]: draw(st.sampled_from(["", " ", "\n\t"]))})
    if kind == "missing_answers":
        return raw if draw(st.booleans()) else {**raw, "annotations": {}}
    if kind == "null_answers":
        return {**raw, "answers": None}
    if kind == "extra_field":
        key = draw(UNKNOWN_KEYS.filter(lambda k: k not in {"answers", "annotations"}))
        return answered(raw, answers, **{key: draw(JSON_NOT_STR)})
    if kind == "answers_type":
        return {**raw, "answers": draw(st.one_of(
            st.lists(st.text(max_size=3), max_size=2), st.text(max_size=3), st.integers(),
        ))}
    if kind == "answer_type":
        return answered(raw, {TEXTS[0]: draw(st.one_of(
            st.integers(), st.booleans(), st.lists(st.text(max_size=3), max_size=2),
        ))})
    if kind == "unknown_annotation_key":
        return answered(raw, answers, annotations={"Which cache?": {"notes": "n"}})
    if kind == "annotation_field":
        return answered(raw, answers, annotations={TEXTS[0]: {"color": "blue"}})
    broken = {"questions": [*raw["questions"], *[question(f"Q{i}?") for i in range(3)]]}
    return answered(broken, answers)


def test_ho8_property_invalid_modify_is_422_never_executed_and_stays_pending(
    depth: str, service: SessionService, session: str
) -> None:
    pending = pending_call(service, session, ask_input(2))
    call_id, interaction = pending["callId"], pending["interactionId"]
    mark = log_mark(service, session)

    @given(raw=invalid_answers())
    def check(raw: dict[str, Any]) -> None:
        with pytest.raises(InvalidInput) as refused:
            service.tools.respond(session, interaction, "modify", input=raw)
        assert_invalid(refused)
        assert log_mark(service, session) == mark
        assert service.tools.get(session, call_id).document == pending

    check()
    assert call_events(service, session, call_id, "InteractionResolved") == []
    assert call_events(service, session, call_id, "ToolCallCompleted") == []
    assert [i["interactionId"] for i in service.document(session)["interactions"]] == [
        interaction
    ]
    # the client corrects its answer: the call completes
    done = service.tools.respond(
        session, interaction, "modify",
        input=answered(ask_input(2), {TEXTS[0]: "SQLite", TEXTS[1]: "Postgres (Recommended)"}),
    )
    assert done["status"] == "completed" and done["success"] is True
    assert service.document(session)["interactions"] == []


def test_ho8_modify_without_input_is_422_and_stays_pending(
    service: SessionService, session: str
) -> None:
    pending = pending_call(service, session)
    mark = log_mark(service, session)
    with pytest.raises(InvalidInput) as refused:
        service.tools.respond(session, pending["interactionId"], "modify")
    assert_invalid(refused)
    with pytest.raises(InvalidInput):
        service.tools.respond(session, pending["interactionId"], "feedback", feedback="no")
    assert log_mark(service, session) == mark
    assert service.tools.get(session, pending["callId"]).document == pending


# -- AQ-3, AQ-4, HO-8: the user's answers through the executor -----------------------------


def test_aq4_modify_with_every_answer(service: SessionService, session: str) -> None:
    pending = pending_call(service, session)
    answers = {TEXTS[0]: "SQLite", TEXTS[1]: "Postgres (Recommended)"}
    done = service.tools.respond(
        session, pending["interactionId"], "modify", input=answered(ask_input(), answers)
    )
    assert set(done) == COMPLETED_KEYS
    assert done["status"] == "completed"
    assert done["callId"] == pending["callId"]
    assert done["success"] is True
    assert done["modelContent"].startswith(ALL_ANSWERED_PREFIX)
    assert f'"{TEXTS[0]}"="SQLite"' in done["modelContent"]
    assert f'"{TEXTS[1]}"="Postgres (Recommended)"' in done["modelContent"]
    assert done["result"]["answers"] == answers
    assert done["turnControl"] is None and done["followUpUserInput"] is None
    assert service.tools.get(session, pending["callId"]).document == done
    assert service.tools.get(session, pending["callId"]).status_code == 200


def test_aq3_multi_select_and_other_free_text(service: SessionService, session: str) -> None:
    raw = {"questions": [question(TEXTS[0], multiSelect=True), question(TEXTS[1])]}
    pending = pending_call(service, session, raw)
    answers = {TEXTS[0]: "Postgres (Recommended), SQLite", TEXTS[1]: "Redis streams, please"}
    done = service.tools.respond(
        session, pending["interactionId"], "modify",
        input=answered(raw, answers, annotations={TEXTS[1]: {"notes": "we run Redis"}}),
    )
    assert done["success"] is True
    assert done["modelContent"].startswith(ALL_ANSWERED_PREFIX)
    assert "Redis streams, please" in done["modelContent"]
    assert "we run Redis" in done["modelContent"]


def test_aq4_modify_with_some_answers(service: SessionService, session: str) -> None:
    pending = pending_call(service, session, ask_input(3))
    done = service.tools.respond(
        session, pending["interactionId"], "modify",
        input=answered(ask_input(3), {TEXTS[1]: "SQLite"}),
    )
    assert done["status"] == "completed" and done["success"] is True
    text = done["modelContent"]
    assert not text.startswith(ALL_ANSWERED_PREFIX)
    assert "1 of 3" in text and "skipped 2" in text
    assert "own judgment" in text
    assert done["result"]["skipped"] == [TEXTS[0], TEXTS[2]]


def test_aq4_modify_with_no_answers(service: SessionService, session: str) -> None:
    pending = pending_call(service, session)
    done = service.tools.respond(
        session, pending["interactionId"], "modify", input=answered(ask_input(), {})
    )
    assert done["status"] == "completed" and done["success"] is True
    text = done["modelContent"]
    assert "did not answer any" in text
    assert "not a rejection" in text
    assert "Do not invent" in text
    assert done["result"]["answers"] == {}


def test_ho8_approve_without_answers_is_never_taken_as_empty(
    service: SessionService, session: str
) -> None:
    pending = pending_call(service, session)
    done = service.tools.respond(session, pending["interactionId"], "approve")
    assert set(done) == COMPLETED_KEYS
    assert done["status"] == "completed"
    assert done["success"] is False
    assert done["modelContent"] == MISSING_ANSWERS
    (resolved,) = call_events(service, session, pending["callId"], "InteractionResolved")
    assert resolved.data.decision == "approve"  # not autoContinued: distinguishable (HO-8)
    assert service.document(session)["interactions"] == []


def test_ho8_user_deny_completes_with_the_declined_text(
    service: SessionService, session: str
) -> None:
    pending = pending_call(service, session)
    done = service.tools.respond(session, pending["interactionId"], "deny")
    assert set(done) == COMPLETED_KEYS
    assert done["status"] == "completed"
    assert done["success"] is False
    assert "declined to answer" in done["modelContent"]
    assert done["turnControl"] is None  # the turn continues
    assert service.document(session)["interactions"] == []


@pytest.mark.parametrize("second", ["modify", "approve", "deny"])
def test_answering_twice_is_a_409_and_appends_nothing(
    service: SessionService, session: str, second: str
) -> None:
    pending = pending_call(service, session)
    first = service.tools.respond(session, pending["interactionId"], "deny")
    mark = log_mark(service, session)
    with pytest.raises(Conflict) as refused:
        service.tools.respond(
            session, pending["interactionId"], second,
            input=answered(ask_input(), {}),
        )
    assert refused.value.status == 409
    assert log_mark(service, session) == mark
    assert service.tools.get(session, pending["callId"]).document == first


def test_respond_to_an_unknown_interaction_is_404(service: SessionService, session: str) -> None:
    other = service.create_session()["sessionId"]
    foreign = pending_call(service, other)
    mark = log_mark(service, session)
    for interaction in ("int_unknown", foreign["interactionId"]):
        with pytest.raises(NotFound) as missing:
            service.tools.respond(session, interaction, "deny")
        assert missing.value.status == 404
    assert log_mark(service, session) == mark
    with pytest.raises(NotFound):
        service.tools.get(session, "call_unknown")
    with pytest.raises(NotFound):
        service.tools.get(session, foreign["callId"])  # call ids are per session


def test_calls_on_a_deleted_session_are_410(service: SessionService, session: str) -> None:
    pending = pending_call(service, session)
    service.delete_session(session)
    with pytest.raises(SessionDeleted):
        service.tools.call(session, ASK, ask_input())
    with pytest.raises(SessionDeleted):
        service.tools.respond(session, pending["interactionId"], "deny")
    with pytest.raises(SessionDeleted):
        service.tools.permission_check(session, "Read", {"file_path": "a"})


# -- re-sent call ids (SPEC §11) -----------------------------------------------------------


def test_resent_call_id_returns_the_original_and_never_runs_twice(
    service: SessionService, session: str
) -> None:
    first = service.tools.call(session, ASK, ask_input(), call_id="call_host_1")
    assert first.status_code == 202
    assert first.document["callId"] == "call_host_1"
    mark = log_mark(service, session)
    for raw in (ask_input(), ask_input(1), {"not": "even valid"}):
        again = service.tools.call(session, ASK, raw, call_id="call_host_1")
        assert again == first
    assert log_mark(service, session) == mark
    done = service.tools.respond(
        session, first.document["interactionId"], "modify", input=answered(ask_input(), {})
    )
    after = service.tools.call(session, ASK, ask_input(), call_id="call_host_1")
    assert after.status_code == 200 and after.document == done
    assert len(call_events(service, session, "call_host_1", "ToolCallRequested")) == 1
    assert len(call_events(service, session, "call_host_1", "InteractionRequested")) == 1
    assert len(call_events(service, session, "call_host_1", "ToolCallCompleted")) == 1
    assert len(service.document(session)["interactions"]) == 0


def test_same_call_id_in_two_sessions_are_two_calls(service: SessionService, session: str) -> None:
    other = service.create_session()["sessionId"]
    a = pending_call(service, session, call_id="call_shared")
    b = pending_call(service, other, call_id="call_shared")
    assert a["interactionId"] != b["interactionId"]


# -- AQ-5: always ask, unless disallowed ---------------------------------------------------


@pytest.mark.parametrize("mode", ["build", "edit", "yolo", "auto", "plan"])
@pytest.mark.parametrize("host", ["protocol", "tui"])
def test_aq5_ask_user_question_asks_in_every_mode(
    service: SessionService, mode: str, host: str
) -> None:
    sid = service.create_session(mode=mode, host=host)["sessionId"]
    pending = pending_call(service, sid)
    (decided,) = call_events(service, sid, pending["callId"], "PermissionDecided")
    assert decided.data.decision.behavior == "ask"
    (listed,) = service.document(sid)["interactions"]
    assert listed["interactionId"] == pending["interactionId"]
    assert listed["kind"] == "askUserQuestion"
    assert listed["payload"] == {"questions": ask_input()["questions"]}


def write_config(workspace: Path, text: str) -> None:
    (workspace / ".sessionledger").mkdir(parents=True, exist_ok=True)
    (workspace / ".sessionledger" / "config.toml").write_text(text, encoding="utf-8")


@pytest.mark.parametrize("mode", ["build", "yolo", "plan"])
def test_aq5_disallowed_tools_deny_ask_user_question(
    service: SessionService, root: Path, mode: str
) -> None:
    workspace = root / "locked"
    workspace.mkdir()
    write_config(workspace, '[permission]\ndisallowedTools = ["AskUserQuestion"]\n')
    sid = service.create_session(mode=mode, workspace=str(workspace))["sessionId"]
    answer = service.tools.call(sid, ASK, ask_input())
    assert answer.status_code == 200
    document = answer.document
    assert set(document) == DENIED_KEYS
    assert document["status"] == "denied"
    assert document["permission"]["behavior"] == "deny"
    assert set(document["permission"]) == {"behavior", "reason", "ruleId"}
    assert document["modelContent"] == document["permission"]["reason"]
    assert service.document(sid)["interactions"] == []
    assert call_events(service, sid, document["callId"], "InteractionRequested") == []
    # a session in another workspace of the same root is not affected
    free = service.create_session(mode=mode)["sessionId"]
    pending_call(service, free)


# -- HO-3: headless hosts deny at once -----------------------------------------------------


def assert_headless_denial(service: SessionService, sid: str, document: dict[str, Any]) -> None:
    assert set(document) == DENIED_KEYS
    assert document["status"] == "denied"
    assert document["modelContent"] == HEADLESS_DENIAL
    assert document["permission"]["behavior"] == "deny"
    assert document["permission"]["reason"] == HEADLESS_DENIAL
    assert document["turnControl"] is None
    assert service.document(sid)["interactions"] == []
    assert call_events(service, sid, document["callId"], "InteractionRequested") == []
    decided = call_events(service, sid, document["callId"], "PermissionDecided")
    assert [e.data.decision.behavior for e in decided] == ["ask", "deny"]
    assert decided[-1].data.decided_by == "broker"
    (completed,) = call_events(service, sid, document["callId"], "ToolCallCompleted")
    assert completed.data.status == "denied"


@pytest.mark.parametrize("mode", ["build", "yolo", "plan"])
def test_ho3_headless_session_denies_ask_user_question(
    service: SessionService, mode: str
) -> None:
    sid = service.create_session(host="headless", mode=mode)["sessionId"]
    answer = service.tools.call(sid, ASK, ask_input())
    assert answer.status_code == 200
    assert_headless_denial(service, sid, answer.document)
    assert service.tools.get(sid, answer.document["callId"]).document == answer.document


def test_ho3_headless_override_on_a_protocol_session(
    service: SessionService, session: str
) -> None:
    """``sessionledger call`` acts as the headless host for that one call."""
    answer = service.tools.call(session, ASK, ask_input(), host="headless")
    assert_headless_denial(service, session, answer.document)
    (requested,) = call_events(service, session, answer.document["callId"], "ToolCallRequested")
    assert requested.data.host == "headless"
    pending_call(service, session)  # the session's own host still asks


# -- acceptance 6: the audit trail ---------------------------------------------------------


def test_acceptance6_every_decision_is_read_back_with_its_call_id(
    service: SessionService, session: str
) -> None:
    pending = pending_call(service, session, call_id="call_audit")
    modified = answered(ask_input(), {TEXTS[0]: "SQLite", TEXTS[1]: "SQLite"})
    service.tools.respond(session, pending["interactionId"], "modify", input=modified)
    check = service.tools.permission_check(session, "Bash", {"command": "rm -rf build"})

    trail = call_events(service, session, "call_audit")
    assert [e.type for e in trail] == [
        "ToolCallRequested", "PermissionDecided", "InteractionRequested",
        "InteractionResolved", "ToolCallCompleted",
    ]
    for event in trail:
        assert event.causation_id == "call_audit"
        assert event.data.call_id == "call_audit"
    by_type = {e.type: e for e in trail}
    assert by_type["PermissionDecided"].data.decision.behavior == "ask"
    resolved = by_type["InteractionResolved"]
    assert resolved.data.decision == "modify"
    assert resolved.data.input == modified
    assert resolved.data.interaction_id == pending["interactionId"]
    assert resolved.actor == "user"
    completed = by_type["ToolCallCompleted"]
    assert completed.data.success is True
    assert completed.data.status == "completed"

    (host_check,) = call_events(service, session, check["callId"])
    assert host_check.type == "PermissionDecided"
    assert host_check.causation_id == check["callId"]
    assert host_check.actor == "host"
    assert host_check.data.tool == "Bash"
    assert host_check.data.decision.behavior == check["behavior"]
    assert host_check.data.decision.rule_id == check["ruleId"]

    # the same through the events API (wire envelopes)
    wire = [
        e for e in service.events(session)["events"]
        if e["type"] in CALL_EVENTS
    ]
    assert len(wire) == len(trail) + 1
    for envelope in wire:
        assert envelope["causationId"] == envelope["data"]["callId"]
    wire_resolved = next(e for e in wire if e["type"] == "InteractionResolved")
    assert wire_resolved["data"]["decision"] == "modify"
    assert wire_resolved["data"]["input"] == modified
    assert wire[-1]["data"]["callId"] == check["callId"]
    assert all(report.ok for report in service.store.verify(session))


# -- TR-3: permission checks for the host's own tools --------------------------------------


@pytest.mark.parametrize(
    ("tool", "raw", "flags", "behavior"),
    [
        ("Bash", {"command": "ls"}, {}, "allow"),
        ("Bash", {"command": "rm -rf x"}, {}, "ask"),
        ("Read", {"file_path": "src/app.py"}, {}, "allow"),
        ("Write", {"file_path": "src/app.py", "content": "x"}, {}, "ask"),
        ("mcp__github__create_issue", {"title": "t"}, {"read_only": False}, "ask"),
        ("mcp__github__get_issue", {"number": 1}, {"read_only": True}, "allow"),
        ("HostSpecialTool", {}, {"read_only": True}, "allow"),
        ("HostSpecialTool", {}, {"read_only": False}, "ask"),
    ],
)
def test_tr3_permission_check_in_build_mode(
    service: SessionService, session: str, tool: str, raw: dict[str, Any],
    flags: dict[str, bool], behavior: str,
) -> None:
    head, version = log_mark(service, session)
    check = service.tools.permission_check(session, tool, raw, **flags)
    assert set(check) == {"behavior", "reason", "ruleId", "callId"}
    assert check["behavior"] == behavior
    assert check["reason"] and check["ruleId"]
    assert log_mark(service, session) == (head + 1, version + 1)
    (event,) = events(service, session)[version:]
    assert event.type == "PermissionDecided"
    assert event.data.call_id == check["callId"] == event.causation_id
    assert event.data.decision.behavior == behavior
    assert event.data.decision.reason == check["reason"]


def test_tr3_permission_check_keeps_the_hosts_call_id(
    service: SessionService, session: str
) -> None:
    check = service.tools.permission_check(session, "Read", {}, call_id="toolu_42")
    assert check["callId"] == "toolu_42"
    (event,) = call_events(service, session, "toolu_42")
    assert event.causation_id == "toolu_42"


def test_tr3_permission_check_refuses_the_id_of_a_service_tool_call(
    service: SessionService,
) -> None:
    """A host check reusing a service call's id would rewrite that call's ``permission``."""
    sid = service.create_session(host="headless")["sessionId"]
    denied = service.tools.call(sid, ASK, ask_input(), call_id="call_taken").document
    mark = log_mark(service, sid)
    with pytest.raises(Conflict) as refused:
        service.tools.permission_check(sid, "Read", {}, call_id="call_taken")
    assert refused.value.status == 409
    assert log_mark(service, sid) == mark
    assert service.tools.get(sid, "call_taken").document == denied
    # the same id in another session is free
    other = service.create_session()["sessionId"]
    assert service.tools.permission_check(other, "Read", {}, call_id="call_taken")["callId"]


def test_tr3_unknown_host_tool_without_read_only_is_422(
    service: SessionService, session: str
) -> None:
    mark = log_mark(service, session)
    with pytest.raises(InvalidInput) as refused:
        service.tools.permission_check(session, "HostSpecialTool", {"x": 1})
    assert_invalid(refused)
    assert log_mark(service, session) == mark


@pytest.mark.parametrize(("mode", "behavior"), [("yolo", "allow"), ("plan", "deny")])
def test_tr3_destructive_bash_follows_the_mode(
    service: SessionService, mode: str, behavior: str
) -> None:
    sid = service.create_session(mode=mode)["sessionId"]
    check = service.tools.permission_check(sid, "Bash", {"command": "rm -rf x"})
    assert check["behavior"] == behavior


# -- the session document's queue (SPEC §11) -----------------------------------------------


def test_session_document_lists_pending_interactions_in_fifo_order(
    service: SessionService, session: str
) -> None:
    calls = [
        pending_call(service, session, {"questions": [question(text)]}, call_id=f"call_{i}")
        for i, text in enumerate(TEXTS)
    ]
    listed = service.document(session)["interactions"]
    assert [i["interactionId"] for i in listed] == [c["interactionId"] for c in calls]
    for index, (entry, text, call) in enumerate(zip(listed, TEXTS, calls, strict=True)):
        assert set(entry) == INTERACTION_KEYS
        assert entry["callId"] == call["callId"]
        assert entry["kind"] == "askUserQuestion"
        # HO-4: only the head of the queue has a clock; the others wait without one
        assert (entry["autoResolution"] is None) == (index > 0)
        assert entry["payload"] == {"questions": [question(text)]}
    assert service.tools.pending_interactions(session) == listed

    service.tools.respond(session, calls[1]["interactionId"], "deny")
    remaining = service.document(session)["interactions"]
    assert [i["interactionId"] for i in remaining] == [
        calls[0]["interactionId"], calls[2]["interactionId"]
    ]
    service.tools.respond(
        session, calls[0]["interactionId"], "modify",
        input=answered({"questions": [question(TEXTS[0])]}, {TEXTS[0]: "SQLite"}),
    )
    assert [i["interactionId"] for i in service.document(session)["interactions"]] == [
        calls[2]["interactionId"]
    ]


def test_projections_agree_with_a_rebuild_after_calls(
    service: SessionService, session: str
) -> None:
    pending = pending_call(service, session)
    pending_call(service, session)
    service.tools.respond(session, pending["interactionId"], "approve")
    service.tools.permission_check(session, "Bash", {"command": "ls"})
    before = service.document(session)
    service.rebuild_projections()
    assert service.document(session) == before
    assert service.audit(session)["ok"] is True
