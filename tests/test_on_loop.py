"""The async face of the services (issue 24): a service call run by ``on_loop`` on the event
loop's thread awaits its appends instead of blocking, and takes turns with threads."""

from __future__ import annotations

import asyncio
import contextvars
import threading
from pathlib import Path
from typing import Any

import pytest

from eventlog import NewEvent, open_store
from eventlog.catalog import SessionCreated
from sessionledger.errors import InvalidInput
from sessionledger.ledger import await_only, awaiting, on_loop, pause
from sessionledger.service.sessions import SessionService


def _todos(n: int, tag: str) -> dict[str, Any]:
    return {"todos": [{"content": f"{tag} {i}", "status": "pending", "priority": "low"}
                      for i in range(n)]}


@pytest.fixture
def service(tmp_path: Path) -> Any:
    opened = SessionService.open(f"sqlite:///{tmp_path / 'ledger.db'}", workspace_root=tmp_path)
    yield opened
    opened.close()


def test_concurrent_calls_on_the_loop_append_every_batch_in_chain(service: Any) -> None:  # ES-6
    sessions = [service.create_session()["sessionId"] for _ in range(8)]
    threads_before = threading.active_count()

    async def run() -> list[str]:
        async def writer(sid: str, k: int) -> str:
            answer = await on_loop(service.tools.call, sid, "TodoWrite", _todos(3, f"w{k}"))
            return str(answer.document["status"])

        return await asyncio.gather(*(writer(sid, k) for k in range(4) for sid in sessions))

    assert set(asyncio.run(run())) == {"completed"}
    assert all(report.ok for report in service.store.verify())
    for sid in sessions:  # each session's four writers took turns: four calls recorded
        calls = [e for e in service.store.read_session(sid) if e.type == "ToolCallCompleted"]
        assert len(calls) == 4
        assert len(service.ledger.todo_rows(sid)) == 3
    assert len(service.ledger.writers) == 0
    assert threading.active_count() <= threads_before + 2  # no thread per call


def test_a_refusal_inside_the_loop_is_raised_to_the_awaiting_route(service: Any) -> None:  # EG-1
    sid = service.create_session()["sessionId"]
    version = service.store.version(sid)

    async def run() -> None:
        await on_loop(service.set_mode, sid, "no-such-mode")

    with pytest.raises(InvalidInput):
        asyncio.run(run())
    assert service.store.version(sid) == version


def test_threads_and_loop_calls_take_turns_on_one_session(service: Any) -> None:  # ES-6
    sid = service.create_session()["sessionId"]
    inside: list[int] = []
    overlaps: list[int] = []

    def turn(tag: str) -> None:
        with service.ledger.writers.held(sid):
            inside.append(1)
            if len(inside) > 1:
                overlaps.append(len(inside))
            pause(0.002)  # on the loop: awaited, so another call could run meanwhile
            inside.pop()

    def thread_writer() -> None:
        for _ in range(5):
            turn("thread")

    async def run() -> None:
        await asyncio.gather(*(on_loop(turn, f"loop {k}") for k in range(10)))

    worker = threading.Thread(target=thread_writer)
    worker.start()
    asyncio.run(run())
    worker.join()
    assert overlaps == []
    assert len(service.ledger.writers) == 0


def test_context_is_copied_and_await_only_needs_the_loop() -> None:
    var: contextvars.ContextVar[str] = contextvars.ContextVar("var", default="unset")

    def inside() -> tuple[str, bool, int]:
        seen = var.get()
        var.set("changed inside")
        return seen, awaiting(), await_only(asyncio.sleep(0, result=7))

    async def run() -> tuple[str, bool, int]:
        var.set("the route's")
        got = await on_loop(inside)
        assert var.get() == "the route's"
        return got

    assert asyncio.run(run()) == ("the route's", True, 7)
    assert not awaiting()
    with pytest.raises(RuntimeError, match="outside on_loop"):
        await_only(asyncio.sleep(0))


def test_a_cancelled_call_is_told_where_it_awaited(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path / 'l.db'}")
    finished: list[str] = []

    def slow() -> None:
        try:
            pause(30)
        except asyncio.CancelledError:
            finished.append("cancelled at its pause")
            raise

    async def run() -> None:
        task = asyncio.ensure_future(on_loop(slow))
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        # the loop is free and appends still work
        created = SessionCreated(workspace="/w")
        await store.append_async("sess_x", [NewEvent(created, actor="host")])

    try:
        asyncio.run(run())
        store_version = store.version("sess_x")
    finally:
        store.close()
    assert finished == ["cancelled at its pause"]
    assert store_version == 1
