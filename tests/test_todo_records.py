"""What a TodoWrite leaves in the log and the read models, and that every reader still gets
the whole call (issue 5; docs/decisions.md D70, D71, D74).

* D70 — ``ToolCallCompleted`` records TodoWrite's result without the two lists: the new list
  is the call's own ``TodosWritten`` and the old one the ``TodosWritten`` at ``oldTodosSeq``.
  The answer, ``GET …/tool-calls/{id}``, a re-sent ``callId`` and an answer to an asked call
  give the full TD-3 result all the same — after later writes, a restart and a rebuild — and
  a result recorded in full before D70 is answered as it was recorded.
* D71 — a completed call's document keeps no copy of its input; a pending one does.
* D74 — what a process remembers about a session (its todo list by the write's seq, the
  projections' state by chain head) is used only while it is still current: a write by
  another store on the same file is seen by the next call.
* issue 24.5 — a new call starts from the session's summary as of the last commit this
  process heard; one behind another store's commits decides nothing that is appended.
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from todo_support import as_items, events, item, reopen, stored, write

from eventlog import (
    NewEvent,
    PermissionDecided,
    PermissionVerdict,
    RecordedEvent,
    TodosWritten,
    ToolCallCompleted,
    ToolCallRequested,
)
from projections import compare_session
from projections.session import ChainCache, SummaryMemory, session_spans
from projections.tables import SessionSummary
from sessionledger import SessionService
from sessionledger.errors import InvalidInput, SessionDeleted

pytest_plugins = ["todo_fixtures"]


def completion(service: SessionService, sid: str, call_id: str) -> ToolCallCompleted:
    (found,) = [e.data for e in events(service, sid)
                if isinstance(e.data, ToolCallCompleted) and e.data.call_id == call_id]
    return found


def written_seqs(service: SessionService, sid: str) -> list[int]:
    return [e.seq for e in events(service, sid) if e.type == "TodosWritten"]


# -- D70: the recorded result refers to the lists --------------------------------------------


def test_d70_the_completion_records_counts_and_the_replaced_write_not_the_lists(
    any_service: SessionService,
) -> None:
    sid = any_service.create_session()["sessionId"]
    first = [item("design", "in_progress"), item("build")]
    one = write(any_service, sid, first)
    assert completion(any_service, sid, one["callId"]).result == {
        "summary": {"pending": 1, "in_progress": 1, "completed": 0, "total": 2},
        "droppedUnfinished": [], "oldTodosSeq": None,
    }
    two = write(any_service, sid, [item("design", "completed"), item("ship")])
    recorded = completion(any_service, sid, two["callId"]).result
    assert set(recorded) == {"summary", "droppedUnfinished", "oldTodosSeq"}
    assert recorded["oldTodosSeq"] == written_seqs(any_service, sid)[0]
    assert recorded["droppedUnfinished"] == [item("build")]
    assert two["result"]["oldTodos"] == first  # the answer still carries both lists
    assert two["result"]["droppedUnfinished"] == [item("build")]
    # An emptied list replaces nothing the next time.
    write(any_service, sid, [])
    four = write(any_service, sid, [item("again")])
    assert completion(any_service, sid, four["callId"]).result["oldTodosSeq"] is None
    assert four["result"]["oldTodos"] == []


def test_d70_every_reader_gets_the_full_result_after_later_writes(
    any_service: SessionService,
) -> None:
    sid = any_service.create_session()["sessionId"]
    answers = [write(any_service, sid, [item(f"step {n}", "in_progress"), item("last")])
               for n in range(4)]
    for answer in answers:
        call_id = answer["callId"]
        assert any_service.tools.get(sid, call_id).document == answer
        again = any_service.tools.call(
            sid, "TodoWrite", {"todos": [item("ignored")]}, call_id=call_id
        )
        assert again.document == answer  # a re-sent callId never runs the call again
    assert as_items(stored(any_service, sid)) == [item("step 3", "in_progress"), item("last")]
    assert compare_session(any_service.store, any_service.projections, sid) == []


def test_d70_the_full_result_after_a_restart_and_a_rebuild(
    service: SessionService, db_path: Path, root: Path
) -> None:
    sid = service.create_session()["sessionId"]
    answers = [write(service, sid, [item(f"v{n}"), item("shared", "completed")])
               for n in range(3)]
    service.close()
    reopened = reopen(db_path, root)
    try:
        for answer in answers:
            assert reopened.tools.get(sid, answer["callId"]).document == answer
        reopened.rebuild_projections()
        for answer in answers:
            assert reopened.tools.get(sid, answer["callId"]).document == answer
        assert compare_session(reopened.store, reopened.projections, sid) == []
    finally:
        reopened.close()


def test_d70_an_asked_write_answers_with_the_lists_it_wrote(
    service: SessionService, root: Path
) -> None:
    workspace = root / "asks"
    (workspace / ".sessionledger").mkdir(parents=True)
    (workspace / ".sessionledger" / "config.toml").write_text(
        '[permission]\nask = ["TodoWrite"]\n', encoding="utf-8"
    )
    sid = service.create_session(workspace=str(workspace))["sessionId"]
    pending = service.tools.call(sid, "TodoWrite", {"todos": [item("a")]}).document
    done = service.tools.respond(sid, pending["interactionId"], "approve")
    assert done["result"]["todos"] == [item("a")] and done["result"]["oldTodos"] == []
    second = service.tools.call(sid, "TodoWrite", {"todos": [item("b")]}).document
    done = service.tools.respond(
        sid, second["interactionId"], "modify", input={"todos": [item("c")]}
    )
    assert done["result"]["oldTodos"] == [item("a")] and done["result"]["todos"] == [item("c")]
    assert service.tools.get(sid, second["callId"]).document == done
    recorded = completion(service, sid, second["callId"]).result
    assert recorded["oldTodosSeq"] == written_seqs(service, sid)[0]


def test_d70_a_result_recorded_in_full_before_is_answered_as_recorded(
    any_service: SessionService,
) -> None:
    """A log written before D70 holds both lists in the completion; it stays readable and
    is answered exactly as recorded."""
    sid = any_service.create_session()["sessionId"]
    todos = [item("old form", "in_progress")]
    result: dict[str, Any] = {
        "oldTodos": [], "todos": todos, "droppedUnfinished": [],
        "summary": {"pending": 0, "in_progress": 1, "completed": 0, "total": 1},
    }
    verdict = PermissionVerdict(behavior="allow", reason="TodoWrite is read-only",
                                rule_id="tool.readOnly")
    batch = [
        ToolCallRequested(call_id="call_old", tool="TodoWrite", input={"todos": todos},
                          host="protocol"),
        PermissionDecided(call_id="call_old", tool="TodoWrite", decision=verdict),
        TodosWritten.model_validate({"todos": todos}),
        ToolCallCompleted(call_id="call_old", tool="TodoWrite", status="completed",
                          success=True, result=result, model_content="Todo list updated."),
    ]
    any_service.store.append(
        sid, [NewEvent(e, actor="model", causation_id="call_old") for e in batch]
    )
    document = any_service.tools.get(sid, "call_old").document
    assert document["result"] == result and document["success"] is True
    after = write(any_service, sid, [item("new form")])
    assert after["result"]["oldTodos"] == todos


# -- D71: a completed call's document keeps no copy of its input ----------------------------


def test_d71_only_a_pending_call_document_holds_its_input(
    service: SessionService, root: Path, db_path: Path
) -> None:
    workspace = root / "asks"
    (workspace / ".sessionledger").mkdir(parents=True)
    (workspace / ".sessionledger" / "config.toml").write_text(
        '[permission]\nask = ["TodoWrite"]\n', encoding="utf-8"
    )
    sid = service.create_session(workspace=str(workspace))["sessionId"]
    pending = service.tools.call(sid, "TodoWrite", {"todos": [item("a")]}).document
    waiting = service.projections.call(service.store, sid, pending["callId"])
    assert waiting is not None and waiting.body["input"] == {"todos": [item("a")]}
    service.tools.respond(sid, pending["interactionId"], "approve")
    done = service.projections.call(service.store, sid, pending["callId"])
    assert done is not None and done.status == "completed" and "input" not in done.body
    with closing(sqlite3.connect(db_path)) as conn:
        indexes = [r[1] for r in conn.execute("PRAGMA index_list(tool_calls)")]
    assert indexes == ["sqlite_autoindex_tool_calls_1"]  # a session is a range of keys
    assert compare_session(service.store, service.projections, sid) == []


# -- D74: remembered state is used only while it is current ----------------------------------


def test_d74_a_write_by_another_store_is_seen_by_the_next_call(
    service: SessionService, db_path: Path, root: Path
) -> None:
    sid = service.create_session()["sessionId"]
    write(service, sid, [item("mine", "in_progress")])
    other = reopen(db_path, root)
    try:
        write(other, sid, [item("theirs", "in_progress")])
    finally:
        other.close()
    after = write(service, sid, [item("mine again")])
    assert after["result"]["oldTodos"] == [item("theirs", "in_progress")]
    assert after["result"]["droppedUnfinished"] == [item("theirs", "in_progress")]
    assert as_items(stored(service, sid)) == [item("mine again")]
    assert compare_session(service.store, service.projections, sid) == []


def test_d74_a_rolled_back_fold_is_not_remembered(
    service: SessionService, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A projection fails after the others folded the batch: the transaction rolls back,
    and what the others remembered of it is never taken for the session's state."""
    sid = service.create_session()["sessionId"]
    write(service, sid, [item("kept"), item("also kept")])
    timers = service.projections.timers
    assert timers is not None
    real_apply = timers.apply

    def failing(tx: Any, batch: Any) -> None:
        raise RuntimeError("disk trouble")

    monkeypatch.setattr(timers, "apply", failing)
    with pytest.raises(RuntimeError):
        service.tools.call(sid, "TodoWrite", {"todos": [item("lost")]})
    monkeypatch.setattr(timers, "apply", real_apply)
    after = write(service, sid, [item("kept", "completed")])
    assert after["result"]["oldTodos"] == [item("kept"), item("also kept")]
    assert as_items(stored(service, sid)) == [item("kept", "completed")]
    summary = service.summary(sid)
    assert summary.version == service.store.version(sid)
    assert compare_session(service.store, service.projections, sid) == []


def test_d74_chain_cache_answers_only_at_its_head() -> None:
    cache: ChainCache[int] = ChainCache()
    cache.put("s", "h1", 7)
    assert cache.get("s", "h1") == (True, 7)
    assert cache.get("s", "h0") == (False, None)
    assert cache.get("t", "h1") == (False, None)
    cache.advance({"s": ("h1", "h3"), "t": ("x", "y")})
    assert cache.get("s", "h1") == (False, None) and cache.get("s", "h3") == (True, 7)
    cache.advance({"s": ("h2", "h4")})  # a batch that does not chain from it: no carry
    assert cache.get("s", "h3") == (True, 7) and cache.get("s", "h4") == (False, None)
    cache.forget("s")
    assert cache.get("s", "h3") == (False, None)


def test_d74_session_spans_are_first_prev_hash_and_last_hash(
    service: SessionService, session: str
) -> None:
    write(service, session, [item("a")])
    batch = events(service, session)[1:]  # the TodoWrite's four events
    assert session_spans(batch) == {session: (batch[0].prev_hash, batch[-1].hash)}


# -- issue 24.5: the summary a new call starts from is the last commit heard -----------------


def _memory(service: SessionService) -> SummaryMemory:
    memory = service.tools.executor._summaries  # the executor's (white box)
    assert isinstance(memory, SummaryMemory)
    return memory


def test_memory_moves_with_every_commit_heard(  # issue 24.5
    service: SessionService, session: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(service, session, [item("a", "in_progress")])
    service.set_mode(session, "plan", task="look around")  # not the executor's: heard too
    service.turns.record_message(session, "assistant", "on it")
    assert _memory(service).get(session) == service.summary(session)
    reads: list[str] = []
    real_live = service.ledger.live
    monkeypatch.setattr(service.ledger, "live", lambda sid, **k: reads.append(sid) or
                        real_live(sid, **k))
    done = service.tools.call(session, "TodoWrite", {"todos": [item("a", "completed")]})
    assert done.document["success"] is True and reads == []  # no summary read
    assert done.document["result"]["oldTodos"] == [item("a", "in_progress")]
    assert _memory(service).get(session) == service.summary(session)
    assert compare_session(service.store, service.projections, session) == []


def test_memory_behind_another_store_decides_nothing(  # issue 24.5
    service: SessionService, db_path: Path, root: Path
) -> None:
    """Two store instances on one file: what the first remembers is behind the second's
    commits, and nothing it decides on that is appended — the call is decided on the log."""
    sid, refused, late = (service.create_session()["sessionId"] for _ in range(3))
    for each in (sid, refused, late):
        write(service, each, [item("mine", "in_progress")])
    other = reopen(db_path, root)
    try:
        write(other, sid, [item("theirs", "in_progress")])
        other.set_mode(sid, "plan")
        other.delete_session(refused)
        other.delete_session(late)
        with pytest.raises(SessionDeleted):  # a refusal from memory stands only if current
            service.tools.call(refused, "TodoWrite", {"todos": [item("")]})
        with pytest.raises(SessionDeleted):  # the guarded append is refused, then 410
            service.tools.call(late, "TodoWrite", {"todos": [item("late")]})
        assert len(events(service, late)) == 6  # created, one write, deleted
        after = write(service, sid, [item("mine again")])
        assert after["result"]["oldTodos"] == [item("theirs", "in_progress")]
        assert service.summary(sid).plan_enabled  # the other store's mode change stands
        with pytest.raises(InvalidInput):  # memory current again: refused without a write
            service.tools.call(sid, "TodoWrite", {"todos": [item("")]})
        assert _memory(service).get(sid) == other.summary(sid)
    finally:
        other.close()
    assert compare_session(service.store, service.projections, sid) == []


def test_memory_holds_no_session_whose_id_can_come_back() -> None:  # issue 24.5
    memory = SummaryMemory()
    base = SessionSummary("s", 3, 9, "/w", "protocol", None, "build", False, None, "t", "t")
    memory.put(base)
    memory.put(replace(base, version=2))  # an older read never replaces a newer one
    assert memory.get("s") == base
    memory.put(replace(base, session_id="c", client="claude-code"))  # its id is derived
    memory.put(replace(base, session_id="d", deleted=True))
    assert memory.get("c") is None and memory.get("d") is None


def test_memory_takes_the_summary_the_projection_saved(  # issue 24.5
    service: SessionService, session: str
) -> None:
    """A committed batch the inline projection folded is not folded again: the memory holds
    the very summary the projection saved at that head."""
    projection = service.projections.execution_state
    for status in ("in_progress", "completed"):
        write(service, session, [item("a", status)])
        found, saved = projection.known(session, events(service, session)[-1].hash)
        assert found and saved == service.summary(session)
        assert _memory(service).get(session) is saved  # taken, not rebuilt


def test_memory_folds_what_the_projection_does_not_know_and_drops_what_it_saw_deleted(
) -> None:  # issue 24.5
    base = SessionSummary("s", 3, 9, "/w", "protocol", None, "build", False, None, "t", "t")
    verdicts: dict[str, tuple[bool, SessionSummary | None]] = {}
    memory = SummaryMemory(known=lambda sid, head: verdicts.get(head, (False, None)))
    memory.put(replace(base, version=2))
    memory.observe([_recorded("s", 3, "h3")])  # not known there: folded as before
    assert memory.get("s") == replace(base, last_position=3, todos_seq=3, todos_updated_at="t")
    memory.put(base)
    later = replace(base, version=9)
    verdicts["h9"] = (True, later)
    event = _recorded("s", 9, "h9")  # seq 9 does not follow 3: only the projection knows it
    memory.observe([event])
    assert memory.get("s") is later
    verdicts["h10"] = (True, replace(later, version=10, deleted=True))
    memory.observe([_recorded("s", 10, "h10")])
    assert memory.get("s") is None


def _recorded(session_id: str, seq: int, head: str) -> RecordedEvent:
    return RecordedEvent(
        seq, session_id, seq, "TodosWritten", 1, TodosWritten(todos=()), "t", "model", None,
        None, "prev", head,
    )
