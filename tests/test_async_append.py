"""Appends awaited on the event loop: one writer thread, one wake-up per group (issue 24.1).

``await store.append_async(...)`` gathers the batch with the others its loop submits in the
same pass, then queues them in the store's group committer beside the thread callers of
``append`` (a lone batch on a free committer commits on the loop's thread instead, D196); the
committer's writer thread commits what is queued through the same commit function and settles
the futures. These tests pin that every coroutine gets its
own outcome (a conflict or a bad batch fails alone, an error of the whole commit reaches the
whole group), that sync and async callers share groups, and what cancelling and closing do.
Groups are made deterministic by holding the committer's writer lock (``exclusive()``) while
callers queue: whoever leads next commits everything queued as one group.
"""

from __future__ import annotations

import asyncio
import math
import sqlite3
import threading
import time
from collections.abc import Callable, Coroutine, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Literal

import pytest
from pg_support import PG_BACKEND

from eventlog import (
    AppendResult,
    ConcurrencyConflict,
    Event,
    EventStore,
    NewEvent,
    SessionCreated,
    StorageFault,
    StoreClosed,
    UnknownEventType,
)
from eventlog.appending import GroupCommitter

if TYPE_CHECKING:
    from conftest import StoreFactory

WRITERS = 32


@pytest.fixture(params=["memory", "sqlite", PG_BACKEND])
def backend(request: pytest.FixtureRequest) -> str:
    """Every backend (PostgreSQL where a server is found): the mixin serves them all."""
    return str(request.param)


def created(tag: str) -> NewEvent:
    return NewEvent(SessionCreated(workspace=tag), actor="user")


def committer(store: EventStore) -> GroupCommitter[Any, AppendResult]:
    return store._committer  # type: ignore[attr-defined, no-any-return]


def record_groups(store: EventStore, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The size of every group the store commits from now on."""
    sizes: list[int] = []
    inner = committer(store)._commit

    def commit(items: Sequence[Any]) -> Sequence[Any]:
        sizes.append(len(items))
        return inner(items)

    monkeypatch.setattr(committer(store), "_commit", commit)
    return sizes


def wait_queued(store: EventStore, count: int) -> None:
    """Until ``count`` items are queued (thread callers queue on their own threads)."""
    deadline = time.monotonic() + 30
    while len(committer(store)._queue) < count:
        assert time.monotonic() < deadline, "callers never queued"
        time.sleep(0.001)


async def until_queued(store: EventStore, count: int) -> None:
    """Until ``count`` items are queued: coroutines' batches queue once their loop's pass
    that gathered them is over."""
    for _ in range(100):
        if len(committer(store)._queue) >= count:
            break
        await asyncio.sleep(0)
    assert len(committer(store)._queue) == count


def run(main: Callable[[], Coroutine[Any, Any, Any]]) -> Any:
    return asyncio.run(main())


def sync_callers(calls: list[Callable[[], Any]]) -> tuple[list[Any], Callable[[], None]]:
    """Start each call on a thread of its own: the list gets its result or exception, the
    function joins the threads."""
    outcomes: list[Any] = [None] * len(calls)

    def work(i: int) -> None:
        try:
            outcomes[i] = calls[i]()
        except Exception as exc:
            outcomes[i] = exc

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(calls))]
    for thread in threads:
        thread.start()

    def join() -> None:
        for thread in threads:
            thread.join(timeout=60)
            assert not thread.is_alive(), "a sync caller was never answered"

    return outcomes, join


def test_32_coroutines_own_and_shared_sessions_conflicts_and_keys(  # issue 24.1
    store: EventStore,
) -> None:
    """Each coroutine gets its own outcome; a conflict appends nothing; every chain holds."""
    rounds = 5

    async def own(w: int) -> None:
        for version in range(rounds):
            result = await store.append_async(
                f"sess_own{w}", [created(f"{w}.{version}")], expected_version=version
            )
            assert [e.seq for e in result.events] == [version + 1]

    async def shared(w: int) -> AppendResult | BaseException:
        try:
            return await store.append_async(
                "sess_shared", [created(f"s{w}"), created(f"s{w}+")], expected_version=0
            )
        except ConcurrencyConflict as exc:
            return exc

    async def keyed(w: int) -> AppendResult:
        return await store.append_async(
            f"sess_key{w % 4}", [created(f"k{w}")], idempotency_key="once"
        )

    async def main() -> list[Any]:
        return await asyncio.gather(
            *(own(w) for w in range(WRITERS // 2)),
            *(shared(w) for w in range(WRITERS // 4)),
            *(keyed(w) for w in range(WRITERS // 4)),
        )

    outcomes = run(main)
    shared_outcomes = outcomes[WRITERS // 2 : WRITERS // 2 + WRITERS // 4]
    won = [o for o in shared_outcomes if isinstance(o, AppendResult)]
    lost = [o for o in shared_outcomes if isinstance(o, ConcurrencyConflict)]
    assert len(won) == 1 and len(lost) == WRITERS // 4 - 1
    assert all((c.expected, c.actual) == (0, 2) for c in lost)
    assert store.version("sess_shared") == 2  # only the winner's two events
    by_session: dict[str, list[AppendResult]] = {}
    for result in outcomes[WRITERS // 2 + WRITERS // 4 :]:
        by_session.setdefault(result.session_id, []).append(result)
    for results in by_session.values():  # one batch per key written, the others replayed it
        assert sorted(r.replayed for r in results) == [False, True]
        assert {r.positions for r in results} == {results[0].positions}
    assert store.version("sess_key0") == 1
    for w in range(WRITERS // 2):
        assert store.version(f"sess_own{w}") == rounds
    total = WRITERS // 2 * rounds + 2 + 4
    assert [e.global_position for e in store.read_all()] == list(range(1, total + 1))
    assert all(report.ok for report in store.verify())
    replay = store.append("sess_key1", [created("again")], idempotency_key="once")
    assert replay.replayed and replay.positions == by_session["sess_key1"][0].positions


def test_sync_and_async_callers_share_one_group_and_a_conflict_fails_alone(  # issue 24.1
    store: EventStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Thread callers and coroutines queued together commit as one group; each conflicting
    batch fails with its own ConcurrencyConflict, the others land in arrival order."""
    store.append("sess_c", [created("base")])
    groups = record_groups(store, monkeypatch)

    async def main() -> tuple[list[Any], list[Any]]:
        calls = [lambda i=i: store.append(f"sess_t{i}", [created(f"t{i}")]) for i in range(3)]
        calls.append(lambda: store.append("sess_c", [created("stale")], expected_version=0))
        with committer(store).exclusive():
            sync_outcomes, join = sync_callers(calls)
            wait_queued(store, len(calls))
            tasks = [asyncio.ensure_future(store.append_async(f"sess_a{i}", [created(f"a{i}")]))
                     for i in range(5)]
            tasks.append(asyncio.ensure_future(
                store.append_async("sess_c", [created("stale")], expected_version=7)
            ))
            await until_queued(store, len(calls) + len(tasks))  # every task queued its batch
        async_outcomes = await asyncio.gather(*tasks, return_exceptions=True)
        join()
        return sync_outcomes, async_outcomes

    sync_outcomes, async_outcomes = run(main)
    assert groups == [10]
    assert isinstance(sync_outcomes[3], ConcurrencyConflict) and sync_outcomes[3].expected == 0
    assert isinstance(async_outcomes[5], ConcurrencyConflict)
    assert async_outcomes[5].expected == 7 and async_outcomes[5].actual == 1
    written = [*sync_outcomes[:3], *async_outcomes[:5]]
    assert all(isinstance(o, AppendResult) for o in written)
    assert sorted(o.positions[0] for o in written) == list(range(2, 10))
    assert store.version("sess_c") == 1
    assert all(report.ok for report in store.verify())


def test_a_cancelled_caller_breaks_nothing_and_its_batch_may_still_commit(  # issue 24.1
    store: EventStore,
) -> None:
    """A coroutine cancelled after queueing: its batch is committed with the group anyway
    (documented), the writer answers everyone else; a payload outside the catalog is refused
    on the caller and queues nothing."""

    class NotInCatalog(Event):
        type: Literal["NotInCatalog"] = "NotInCatalog"

    async def main() -> None:
        with committer(store).exclusive():
            cancelled = asyncio.ensure_future(store.append_async("sess_x", [created("gone")]))
            conflicting = asyncio.ensure_future(
                store.append_async("sess_y", [created("c")], expected_version=3)
            )
            kept = asyncio.ensure_future(store.append_async("sess_z", [created("kept")]))
            await until_queued(store, 3)
            cancelled.cancel()
            conflicting.cancel()  # its exception is never set on a cancelled future
            with pytest.raises(UnknownEventType, match="NotInCatalog"):
                await store.append_async("sess_n", [NewEvent(NotInCatalog(), actor="user")])
            assert len(committer(store)._queue) == 3  # the refused one queued nothing
        assert (await kept).positions == (2,)
        for task in (cancelled, conflicting):
            with pytest.raises(asyncio.CancelledError):
                await task
        after = await store.append_async("sess_x", [created("next")])
        assert after.events[0].seq == 2  # the cancelled caller's batch is in the log

    run(main)
    assert store.version("sess_x") == 2 and store.version("sess_y") == 0
    assert store.version("sess_n") == 0
    assert all(report.ok for report in store.verify())


def refuse_commits(store: EventStore, backend: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every commit of ``store`` fails as a whole: on SQLite a real full disk (the writer's
    ``max_page_count`` at the file's size: SQLITE_FULL), in memory a fault in the row write."""
    if backend == "sqlite":
        conn: sqlite3.Connection = store._writer  # type: ignore[attr-defined]
        (pages,) = conn.execute("PRAGMA page_count").fetchone()
        conn.execute(f"PRAGMA max_page_count = {pages}")
        return

    def broken(*_args: Any) -> None:
        raise StorageFault("injected: the disk refused the write", reason="injected")

    monkeypatch.setattr(store, "_write", broken)


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
def test_an_error_of_the_whole_commit_reaches_every_caller_of_the_group(  # issue 24.1
    store: EventStore, backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A StorageFault of the group's transaction fails every batch in it, sync or async;
    nothing is appended and the next group commits normally."""
    store.append("sess_base", [created("base")])
    refuse_commits(store, backend, monkeypatch)
    big = "x" * 20_000  # needs new pages on any backend

    async def main() -> tuple[list[Any], list[Any]]:
        with committer(store).exclusive():
            sync_outcomes, join = sync_callers([lambda: store.append("sess_t", [created(big)])])
            wait_queued(store, 1)
            tasks = [asyncio.ensure_future(store.append_async(f"sess_a{i}", [created(big)]))
                     for i in range(6)]
            await until_queued(store, 7)
        async_outcomes = await asyncio.gather(*tasks, return_exceptions=True)
        join()
        return sync_outcomes, async_outcomes

    sync_outcomes, async_outcomes = run(main)
    for outcome in [*sync_outcomes, *async_outcomes]:
        assert isinstance(outcome, StorageFault), outcome
    assert store.head_position() == 1
    monkeypatch.undo()
    if backend == "sqlite":
        store._writer.execute("PRAGMA max_page_count = 1073741823")  # type: ignore[attr-defined]
    result = run(lambda: store.append_async("sess_a0", [created("after")]))
    assert result.positions == (2,)
    assert all(report.ok for report in store.verify())


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
def test_close_while_queued_fails_them_with_store_closed_and_stops_the_writer(  # issue 24.1
    store_factory: StoreFactory, backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Batches still queued when the store closes fail with StoreClosed, nothing hangs; the
    writer thread, started by the first appends it had to take, is gone after ``close``."""
    store = store_factory.open(inline_budget_s=math.inf)  # the machine's speed never decides
    run(lambda: store.append_async("sess_x", [created("first")]))
    assert committer(store)._thread is None  # a lone batch committed on the loop's thread

    async def two() -> list[AppendResult]:
        return await asyncio.gather(*(store.append_async(f"sess_w{i}", [created("w")])
                                      for i in range(2)))

    run(two)
    writer = committer(store)._thread
    assert writer is not None and writer.is_alive() and writer.daemon
    # Hold close() inside its exclusive block while coroutines queue behind it.
    gate = threading.Event()
    if backend == "memory":
        lock = store._lock  # type: ignore[attr-defined]
        held = lock.acquire()
        assert held
    else:
        real = store._writer  # type: ignore[attr-defined]

        class ClosingSlowly:
            def __getattr__(self, name: str) -> Any:
                return getattr(real, name)

            def close(self) -> None:
                gate.wait(timeout=60)
                real.close()

        monkeypatch.setattr(store, "_writer", ClosingSlowly())

    # close() holds the writer from here on: known when it is inside, not guessed from the
    # lock (the writer thread of ``two`` may still hold it a moment after answering).
    inside = threading.Event()
    exclusive = committer(store).exclusive

    @contextmanager
    def entered() -> Iterator[None]:
        with exclusive():
            inside.set()
            yield

    monkeypatch.setattr(committer(store), "exclusive", entered)

    async def main() -> list[Any]:
        closing = threading.Thread(target=store.close)
        closing.start()
        assert await asyncio.to_thread(inside.wait, 30)
        tasks = [asyncio.ensure_future(store.append_async(f"sess_q{i}", [created(str(i))]))
                 for i in range(5)]
        await until_queued(store, 5)
        if backend == "memory":
            lock.release()
        gate.set()
        outcomes = await asyncio.gather(*tasks, return_exceptions=True)
        await asyncio.to_thread(closing.join, 60)
        assert not closing.is_alive()
        return outcomes

    outcomes = run(main)
    assert all(isinstance(o, StoreClosed) for o in outcomes), outcomes
    assert not writer.is_alive()
    with pytest.raises(StoreClosed):
        run(lambda: store.append_async("sess_x", [created("late")]))
    reopened = store_factory.open(path=store_factory.directory / "ledger.db") if (
        backend == "sqlite") else None
    if reopened is not None:
        sessions = [e.session_id for e in reopened.read_all()]
        assert sessions == ["sess_x", "sess_w0", "sess_w1"]
        assert all(report.ok for report in reopened.verify())


@pytest.mark.parametrize("backend", ["sqlite"])
def test_a_lone_append_never_holds_the_loop_while_another_process_writes(  # D196
    store_factory: StoreFactory, backend: str
) -> None:
    """While another connection (another process, in production) holds the database's write
    lock, a lone coroutine's batch is not committed on the loop's thread — SQLite would make
    that thread wait out its 5-s busy timeout — but by the writer thread, which waits; the
    loop goes on, and the batch lands once the lock is free. (No budget on how long the last
    commit took: which thread commits is decided by the lock here, never by how fast this
    machine's fsync was; issue 36.)"""
    store = store_factory.open(inline_budget_s=math.inf)
    store.append("sess_a", [created("base")])
    path = store.path  # type: ignore[attr-defined]
    run(lambda: store.append_async("sess_a", [created("quick")], expected_version=1))
    assert committer(store)._thread is None  # no other writer: committed on the loop
    held, turned = threading.Event(), threading.Event()
    seen: dict[str, bool] = {}

    def other_writer() -> None:
        conn = sqlite3.connect(path, isolation_level=None)
        try:
            conn.execute("BEGIN IMMEDIATE")
            held.set()
            # A loop stuck in SQLite's busy wait (5 s) could not say it turned within 3 s.
            seen["loop turned"] = turned.wait(3)
            conn.execute("ROLLBACK")
        finally:
            conn.close()

    async def main() -> AppendResult:
        holder = threading.Thread(target=other_writer)
        holder.start()
        assert await asyncio.to_thread(held.wait, 30)
        task = asyncio.ensure_future(
            store.append_async("sess_a", [created("held")], expected_version=2)
        )
        await asyncio.sleep(0.01)  # the batch was gathered and handed on meanwhile
        turned.set()
        result = await task
        await asyncio.to_thread(holder.join, 30)
        return result

    result = run(main)
    assert seen == {"loop turned": True}
    assert committer(store)._thread is not None  # the writer thread waited instead
    assert result.events[0].seq == 3
    assert [e.data.workspace for e in store.read_session("sess_a")] == [  # type: ignore[attr-defined]
        "base", "quick", "held"]
    assert all(report.ok for report in store.verify())
