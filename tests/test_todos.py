"""TodoRead and TodoWrite through the service (SPEC TD-1 … TD-3, TD-6).

Covers the strict contract and its exact schema description, the result of a write
(``oldTodos``, ``todos``, ``summary``, ``droppedUnfinished`` — issue 5's acceptance 3), the
tools allowed in every mode and on every host, a workspace rule that makes TodoWrite ask (the
answer step runs on the list as it is then), and the ``sessionledger todos`` command printing
the list with completed/total progress (TD-6). The ``todo`` table itself is tested in
``test_todo_table.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError
from server_support import sessionledger_command
from todo_support import as_items, events, item, reopen, stored, write

from sessionledger import SessionService
from sessionledger.errors import InvalidInput
from sessionledger.permission.descriptors import SERVICE_TOOLS
from sessionledger.tools.todo import (
    READ_DESCRIPTION,
    TODOS_DESCRIPTION,
    WRITE_DESCRIPTION,
    TodoItem,
    TodoReadHandler,
    TodoWriteHandler,
    dropped_unfinished,
    parse_write_input,
    write_model_schema,
)

EXACT_DESCRIPTION = (
    "The complete updated todo list. At most one item may be in_progress at a time."
)
MODES = ("plan", "build", "edit", "yolo", "auto")
HOSTS = ("protocol", "tui", "headless")

pytest_plugins = ["todo_fixtures"]


# -- TD-1, TD-2: the contract ----------------------------------------------------------------


def test_td1_an_item_is_content_status_priority_without_id() -> None:
    parsed = parse_write_input({"todos": [item("write the parser", "in_progress", "high")]})
    assert parsed.todos[0].model_dump() == item("write the parser", "in_progress", "high")
    schema = write_model_schema()
    todo = schema["$defs"]["TodoItem"]
    assert set(todo["properties"]) == {"content", "status", "priority"}
    assert set(todo["required"]) == {"content", "status", "priority"}
    assert todo["properties"]["status"]["enum"] == ["pending", "in_progress", "completed"]
    assert todo["properties"]["priority"]["enum"] == ["high", "medium", "low"]
    assert todo["additionalProperties"] is False and schema["additionalProperties"] is False
    assert schema["required"] == ["todos"]


@pytest.mark.parametrize("raw", [
    {"todos": [{**item("a"), "id": "1"}]},  # no id, no unknown field on an item
    {"todos": [item("a")], "merge": True},  # no unknown top-level field
    {"todos": [item("")]},
    {"todos": [item("   ")]},
    {"todos": [item("a", status="done")]},
    {"todos": [item("a", priority="urgent")]},
    {"todos": [{"content": 1, "status": "pending", "priority": "low"}]},  # strict: no coercion
    {"todos": ({"content": "a", "status": "pending", "priority": "low"},)},
    {"todos": "a, b"},
    {},
])
def test_td1_strict_input_rejects(raw: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        parse_write_input(raw)


def test_td2_the_exact_schema_description_of_todos() -> None:
    assert TODOS_DESCRIPTION == EXACT_DESCRIPTION
    assert write_model_schema()["properties"]["todos"]["description"] == EXACT_DESCRIPTION
    assert TodoWriteHandler().model_schema() == write_model_schema()


def test_td2_descriptions_ask_for_the_whole_list_and_one_in_progress() -> None:
    handler = TodoWriteHandler()
    assert handler.description == WRITE_DESCRIPTION
    text = WRITE_DESCRIPTION.lower()
    assert "complete list every time" in text and "replaces the whole list" in text
    assert "at most one item in_progress" in text
    assert "todo list" in READ_DESCRIPTION.lower()
    assert TodoReadHandler().model_schema()["properties"] == {}


def test_td2_more_than_one_in_progress_is_accepted(service: SessionService, session: str) -> None:
    todos = [item("a", "in_progress"), item("b", "in_progress"), item("c", "in_progress")]
    doc = write(service, session, todos)
    assert doc["result"]["summary"] == {
        "pending": 0, "in_progress": 3, "completed": 0, "total": 3,
    }
    assert as_items(stored(service, session)) == todos


# -- TD-3: a write replaces the list ---------------------------------------------------------


def test_td3_write_replaces_the_whole_list_and_returns_old_new_summary(
    any_service: SessionService,
) -> None:
    sid = any_service.create_session()["sessionId"]
    first = [item("design", "completed", "high"), item("build", "in_progress"),
             item("ship", "pending", "low")]
    doc = write(any_service, sid, first)
    assert doc["result"] == {
        "oldTodos": [], "todos": first, "droppedUnfinished": [],
        "summary": {"pending": 1, "in_progress": 1, "completed": 1, "total": 3},
    }
    second = [item("build", "completed"), item("ship", "in_progress", "low")]
    result = write(any_service, sid, second)["result"]
    assert result["oldTodos"] == first and result["todos"] == second
    assert result["summary"] == {"pending": 0, "in_progress": 1, "completed": 1, "total": 2}
    assert as_items(stored(any_service, sid)) == second
    assert write(any_service, sid, [])["result"]["summary"]["total"] == 0
    assert stored(any_service, sid) == []


def test_td3_model_text_states_counts(service: SessionService, session: str) -> None:
    text = write(service, session, [item("a", "in_progress"), item("b"), item("c"),
                                    item("d", "completed")])["modelContent"]
    assert "4 items: 1 in progress, 2 pending, 1 completed" in text
    assert "no longer in it" not in text


def test_td3_todo_read_returns_the_current_list_and_summary(
    any_service: SessionService,
) -> None:
    sid = any_service.create_session()["sessionId"]
    empty = any_service.tools.call(sid, "TodoRead", {}).document
    assert empty["success"] is True and empty["result"]["todos"] == []
    assert "empty" in empty["modelContent"]
    todos = [item("read the seed", "completed"), item("write tests", "in_progress", "high")]
    write(any_service, sid, todos)
    doc = any_service.tools.call(sid, "TodoRead", {}).document
    assert doc["result"] == {
        "todos": todos, "summary": {"pending": 0, "in_progress": 1, "completed": 1, "total": 2},
    }
    assert "1. [completed] read the seed\n2. [in_progress] write tests" in doc["modelContent"]
    assert not any(e.type == "TodosWritten" for e in events(any_service, sid)[-3:])


def test_td3_todo_read_takes_no_input(service: SessionService, session: str) -> None:
    version = service.store.version(session)
    with pytest.raises(InvalidInput):
        service.tools.call(session, "TodoRead", {"todos": []})
    assert service.store.version(session) == version


def test_td3_tr2_descriptors_read_only_session_scope_no_approval() -> None:
    write_tool, read_tool = SERVICE_TOOLS["TodoWrite"], SERVICE_TOOLS["TodoRead"]
    assert TodoWriteHandler.descriptor is write_tool and TodoReadHandler.descriptor is read_tool
    assert write_tool.read_only and write_tool.side_effect_scope == "session"
    assert write_tool.allowed_in_plan_mode and not write_tool.needs_approval
    assert not write_tool.requires_user_interaction and not write_tool.destructive
    assert read_tool.read_only and not read_tool.needs_approval


@pytest.mark.parametrize("host", HOSTS)
@pytest.mark.parametrize("mode", MODES)
def test_td3_allowed_in_every_mode_including_plan(
    service: SessionService, mode: str, host: str
) -> None:
    sid = service.create_session(mode=mode, host=host)  # type: ignore[arg-type]
    session_id = sid["sessionId"]
    for tool, raw in (("TodoWrite", {"todos": [item("plan the work", "in_progress")]}),
                      ("TodoRead", {})):
        doc = service.tools.call(session_id, tool, raw).document
        assert doc["status"] == "completed" and doc["success"] is True, doc
        (decided,) = [e for e in events(service, session_id)
                      if e.type == "PermissionDecided" and e.data.call_id == doc["callId"]]
        assert decided.data.decision.behavior == "allow"
    assert as_items(stored(service, session_id)) == [item("plan the work", "in_progress")]


# -- acceptance 3: droppedUnfinished ---------------------------------------------------------


def dropped(service: SessionService, sid: str, old: list[dict[str, str]],
            new: list[dict[str, str]]) -> list[dict[str, str]]:
    write(service, sid, old)
    doc = write(service, sid, new)
    result: list[dict[str, str]] = doc["result"]["droppedUnfinished"]
    if result:
        assert "no longer in it" in doc["modelContent"]
        for gone in result:
            assert f"[{gone['status']}] {gone['content']}" in doc["modelContent"]
    else:
        assert "no longer in it" not in doc["modelContent"]
    return result


def test_acceptance3_a_rename_counts_as_dropped(service: SessionService, session: str) -> None:
    old = [item("write tests", "in_progress"), item("ship")]
    new = [item("write unit tests", "in_progress"), item("ship")]
    assert dropped(service, session, old, new) == [item("write tests", "in_progress")]
    assert as_items(stored(service, session)) == new  # the write still replaces the list


def test_acceptance3_reorders_and_status_changes_are_not_dropped(
    service: SessionService, session: str
) -> None:
    old = [item("a", "in_progress"), item("b"), item("c")]
    new = [item("c", "in_progress"), item("a", "completed"), item("b", priority="high")]
    assert dropped(service, session, old, new) == []


def test_acceptance3_removed_unfinished_items_are_named(
    service: SessionService, session: str
) -> None:
    old = [item("a", "completed"), item("b", "in_progress"), item("c"), item("d")]
    new = [item("d", "in_progress")]
    assert dropped(service, session, old, new) == [item("b", "in_progress"), item("c")]
    assert dropped(service, session, [item("x")], []) == [item("x")]


def test_acceptance3_empty_when_only_completed_items_go(
    service: SessionService, session: str
) -> None:
    old = [item("a", "completed"), item("b", "completed"), item("c")]
    assert dropped(service, session, old, [item("c", "in_progress")]) == []
    assert dropped(service, session, [item("a", "completed")], []) == []


def test_acceptance3_duplicates_match_as_a_multiset() -> None:
    # D28: each new item covers one old item of its content; the last unfinished are reported.
    def data(*items: dict[str, str]) -> list[Any]:
        return [TodoItem.model_validate(i).to_data() for i in items]

    old = data(item("A", "completed"), item("A"), item("A", "in_progress"), item("B"))
    assert dropped_unfinished(old, data(item("A"), item("B"))) == data(
        item("A", "in_progress")
    )
    assert dropped_unfinished(old, data(item("A"), item("A"), item("B"))) == []
    assert dropped_unfinished(old, data(item("a"), item("B"))) == data(  # exact match only
        item("A"), item("A", "in_progress")
    )


# -- answer step: a workspace rule may make TodoWrite ask ------------------------------------


def test_td3_a_rule_that_asks_runs_the_write_on_the_list_at_answer_time(
    service: SessionService, root: Path
) -> None:
    workspace = root / "asks"
    (workspace / ".sessionledger").mkdir(parents=True)
    (workspace / ".sessionledger" / "config.toml").write_text(
        '[permission]\nask = ["TodoWrite"]\n', encoding="utf-8"
    )
    sid = service.create_session(workspace=str(workspace))["sessionId"]
    first = service.tools.call(sid, "TodoWrite", {"todos": [item("first")]}).document
    assert first["status"] == "pending"
    service.tools.respond(sid, first["interactionId"], "approve")
    second = service.tools.call(sid, "TodoWrite", {"todos": [item("second")]}).document
    (listed,) = service.document(sid)["interactions"]
    assert listed["kind"] == "toolApproval" and listed["payload"]["tool"] == "TodoWrite"
    done = service.tools.respond(
        sid, second["interactionId"], "modify", input={"todos": [item("modified")]}
    )
    assert done["result"]["oldTodos"] == [item("first")]
    assert done["result"]["droppedUnfinished"] == [item("first")]
    assert as_items(stored(service, sid)) == [item("modified")]
    third = service.tools.call(sid, "TodoWrite", {"todos": []}).document
    declined = service.tools.respond(sid, third["interactionId"], "deny")
    assert declined["success"] is False
    assert as_items(stored(service, sid)) == [item("modified")]


# -- TD-6: the CLI ---------------------------------------------------------------------------


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if k != "SESSIONLEDGER_DB"}
    return subprocess.run(
        [*sessionledger_command(), *args], cwd=cwd, env=environment, capture_output=True,
        text=True, timeout=60, check=False,
    )


def test_td6_cli_prints_the_list_with_completed_total(
    db_path: Path, root: Path
) -> None:
    service = reopen(db_path, root)
    try:
        sid = service.create_session()["sessionId"]
        empty = service.create_session()["sessionId"]
        gone = service.create_session()["sessionId"]
        write(service, sid, [item("design [schema]", "completed", "high"),
                             item("build it", "in_progress"), item("ship it", "pending", "low")])
        service.delete_session(gone)
    finally:
        service.close()
    db = f"sqlite:///{db_path}"
    shown = run_cli("todos", sid, "--db", db, cwd=root)
    assert shown.returncode == 0, shown.stderr
    out = shown.stdout
    assert f"{sid}: 1/3 completed" in out
    for text in ("design [schema]", "build it", "ship it", "in_progress", "high", "low"):
        assert text in out
    assert out.index("design [schema]") < out.index("build it") < out.index("ship it")
    as_json = json.loads(run_cli("todos", sid, "--json", "--db", db, cwd=root).stdout)
    assert as_json["progress"] == {"completed": 1, "total": 3}
    assert [t["content"] for t in as_json["todos"]] == ["design [schema]", "build it", "ship it"]
    nothing = run_cli("todos", empty, "--db", db, cwd=root)
    assert nothing.returncode == 0 and "0/0 completed" in nothing.stdout
    assert "no todos" in nothing.stdout
    deleted = run_cli("todos", gone, "--db", db, cwd=root)
    assert deleted.returncode == 1 and "was deleted" in deleted.stderr
    unknown = run_cli("todos", "sess_unknown", "--db", db, cwd=root)
    assert unknown.returncode == 2 and "not found" in unknown.stderr
    for failed in (deleted, unknown):
        assert "Traceback" not in failed.stderr and failed.stdout == ""
