"""The group committer on its own: every caller answered once, with its own outcome (EL-2).

The store tests show appends land; these pin the combining machinery under heavy concurrency:
no lost wake-up, no item answered twice or with another's result, groups really formed, and a
failing commit failing exactly the callers of its group.
"""

from __future__ import annotations

import asyncio
import errno
import itertools
import threading
import time
from collections.abc import Sequence
from typing import Any

import pytest

from eventlog import WriterFailed
from eventlog.appending import GroupCommitter, _Latch

THREADS = 32
PER_THREAD = 200


class Recorder:
    """A commit function that answers each item with its double and remembers the groups."""

    def __init__(self, *, fail_on: int | None = None, delay: float = 0.0) -> None:
        self.groups: list[list[int]] = []
        self.fail_on = fail_on
        self.delay = delay
        self.inside = 0
        self.overlapped = False

    def __call__(self, items: Sequence[int]) -> list[int | BaseException]:
        self.inside += 1
        self.overlapped |= self.inside > 1
        try:
            if self.delay:
                time.sleep(self.delay)  # like an fsync: others queue meanwhile
            self.groups.append(list(items))
            if self.fail_on is not None and self.fail_on in items:
                raise OSError("disk on fire")
            return [ValueError(f"odd {i}") if i % 7 == 0 else i * 2 for i in items]
        finally:
            self.inside -= 1


def run_threads(committer: GroupCommitter[int, int]) -> dict[int, int | BaseException]:
    answers: dict[int, int | BaseException] = {}
    lock = threading.Lock()
    barrier = threading.Barrier(THREADS)

    def work(t: int) -> None:
        barrier.wait()
        for n in range(PER_THREAD):
            item = t * PER_THREAD + n + 1
            (outcome,) = committer.submit_many([item])
            with lock:
                assert item not in answers
                answers[item] = outcome

    threads = [threading.Thread(target=work, args=(t,)) for t in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
        assert not thread.is_alive(), "a caller was never woken"
    return answers


def test_el2_every_caller_gets_its_own_outcome_once_and_groups_form() -> None:
    recorder = Recorder(delay=0.0005)
    answers = run_threads(GroupCommitter(recorder))
    total = THREADS * PER_THREAD
    assert sorted(answers) == list(range(1, total + 1))
    for item, outcome in answers.items():
        if item % 7 == 0:
            assert isinstance(outcome, ValueError) and str(outcome) == f"odd {item}"
        else:
            assert outcome == item * 2
    committed = [i for group in recorder.groups for i in group]
    assert sorted(committed) == list(range(1, total + 1))  # each item committed exactly once
    assert not recorder.overlapped  # one commit at a time
    assert max(len(g) for g in recorder.groups) > 1  # concurrent callers shared commits
    assert len(recorder.groups) < total


def test_el2_a_failing_commit_fails_exactly_its_group() -> None:
    recorder = Recorder(fail_on=1)
    committer: GroupCommitter[int, int] = GroupCommitter(recorder)
    with pytest.raises(OSError, match="disk on fire"):
        committer.submit(1)
    assert committer.submit(2) == 4  # the committer still works afterwards


def test_el2_a_lone_caller_commits_on_its_own_thread() -> None:
    seen: list[str] = []

    def commit(items: Sequence[int]) -> list[int | BaseException]:
        seen.append(threading.current_thread().name)
        return list(items)

    committer: GroupCommitter[int, int] = GroupCommitter(commit)
    assert committer.submit_many([1, 2, 3]) == [1, 2, 3]
    assert seen == [threading.current_thread().name]


def test_coroutines_of_two_loops_and_threads_one_wake_up_per_loop_per_group() -> None:  # issue 24.1
    """Coroutines of two event loops and thread callers share the committer: every item
    answered once with its own outcome, and each group wakes each loop exactly once."""
    import asyncio

    recorder = Recorder(delay=0.0005)
    # Every coroutine's batch through the writer thread (no commit_now: none on a loop's thread).
    committer: GroupCommitter[int, int] = GroupCommitter(recorder)
    answers: dict[int, int | BaseException] = {}
    wakes: dict[int, int] = {0: 0, 1: 0}
    lock = threading.Lock()
    per_loop, coroutines, per_coroutine = 10_000, 16, 40

    async def caller(base: int) -> None:
        for n in range(per_coroutine):
            item = base + n
            try:
                outcome: int | BaseException = await committer.submit_async(item)
            except ValueError as exc:
                outcome = exc
            with lock:
                assert item not in answers
                answers[item] = outcome

    async def main(which: int) -> None:
        loop = asyncio.get_running_loop()
        inner = loop.call_soon_threadsafe

        def counted(*args: object) -> object:
            wakes[which] += 1
            return inner(*args)  # type: ignore[arg-type]

        loop.call_soon_threadsafe = counted  # type: ignore[method-assign]
        await asyncio.gather(*(caller((which + 1) * per_loop + c * 100 + 1)
                               for c in range(coroutines)))

    def thread_caller(t: int) -> None:
        for n in range(per_coroutine):
            item = 50_000 + t * 100 + n + 1
            (outcome,) = committer.submit_many([item])
            with lock:
                answers[item] = outcome

    threads = [threading.Thread(target=asyncio.run, args=(main(w),)) for w in (0, 1)]
    threads += [threading.Thread(target=thread_caller, args=(t,)) for t in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
        assert not thread.is_alive(), "a caller was never answered"
    committer.stop()
    assert len(answers) == (2 * coroutines + 4) * per_coroutine
    for item, outcome in answers.items():
        assert outcome == item * 2 if item % 7 else isinstance(outcome, ValueError)
    committed = [i for group in recorder.groups for i in group]
    assert sorted(committed) == sorted(answers) and not recorder.overlapped
    for which in (0, 1):
        mine = range((which + 1) * per_loop, (which + 2) * per_loop)
        assert wakes[which] == sum(1 for g in recorder.groups if any(i in mine for i in g))
    assert max(len(g) for g in recorder.groups) > 1


class ThreadRecorder(Recorder):
    """A :class:`Recorder` that also notes the thread of each commit, with a clock of its own
    (``timer``, for the committer) that each commit moves on by its entry of ``durations``
    (0 once they run out): how long a commit "took" is the test's to say, never the machine's
    (issue 36)."""

    def __init__(self, *, durations: Sequence[float] = ()) -> None:
        super().__init__()
        self.threads: list[str] = []
        self.durations = list(durations)
        self.now = 0.0

    def timer(self) -> float:
        return self.now

    def __call__(self, items: Sequence[int]) -> list[int | BaseException]:
        self.threads.append(threading.current_thread().name)
        self.now += self.durations.pop(0) if self.durations else 0.0
        return super().__call__(items)


def test_a_lone_coroutine_batch_commits_on_its_loops_thread() -> None:  # issue 24.2, D196
    """A coroutine's batch alone in its loop's pass, with the committer free and quick, is
    committed right there: no writer thread, one group of one, the caller's answer."""
    import asyncio

    recorder = ThreadRecorder()
    committer: GroupCommitter[int, int] = GroupCommitter(
        recorder, commit_now=recorder, inline_budget_s=0.001, timer=recorder.timer
    )

    async def main() -> list[int]:
        return [await committer.submit_async(n) for n in (1, 2, 3)]

    assert asyncio.run(main()) == [2, 4, 6]
    assert recorder.groups == [[1], [2], [3]]
    assert recorder.threads == [threading.current_thread().name] * 3
    assert committer._thread is None


def test_batches_gathered_in_one_pass_commit_together_on_the_writer_thread() -> None:  # issue 24.1
    """Batches submitted in one pass of the loop are one group, committed by the writer
    thread (the loop goes on meanwhile), each caller with its own outcome."""
    import asyncio

    recorder = ThreadRecorder()
    committer: GroupCommitter[int, int] = GroupCommitter(
        recorder, commit_now=recorder, inline_budget_s=0.001, timer=recorder.timer
    )

    async def main() -> list[int | BaseException]:
        return await asyncio.gather(*(committer.submit_async(n) for n in range(1, 9)),
                                    return_exceptions=True)

    outcomes = asyncio.run(main())
    committer.stop()
    assert outcomes[:6] == [2, 4, 6, 8, 10, 12] and outcomes[7] == 16
    assert isinstance(outcomes[6], ValueError)
    assert recorder.groups == [list(range(1, 9))]
    assert recorder.threads == ["eventlog-writer"]


def test_a_slow_commit_sends_lone_batches_to_the_writer_thread_until_one_is_quick(  # D196
) -> None:
    """After a commit slower than the budget the next lone batch is not committed on the
    loop's thread (a slow disk never holds the loop for more than about one commit); after
    a quick commit it is again."""
    import asyncio

    recorder = ThreadRecorder(durations=[0.3, 0.0, 0.0])
    committer: GroupCommitter[int, int] = GroupCommitter(
        recorder, commit_now=recorder, inline_budget_s=0.1, timer=recorder.timer
    )

    async def main() -> list[int]:
        answers = [await committer.submit_async(n) for n in (1, 2)]
        while committer._writer.locked():  # the writer thread lets go after it answered
            await asyncio.sleep(0.001)
        return [*answers, await committer.submit_async(3)]

    assert asyncio.run(main()) == [2, 4, 6]
    committer.stop()
    here = threading.current_thread().name
    assert recorder.threads == [here, "eventlog-writer", here]


def test_a_commit_that_would_wait_is_left_to_the_writer_thread() -> None:  # D196
    """``commit_now`` answering None (another writer holds the database; nothing done) sends
    the lone batch to the writer thread's ``commit``; without ``commit_now`` every batch goes
    there."""
    import asyncio

    recorder = ThreadRecorder()
    declined: list[list[int]] = []

    def would_wait(items: Sequence[int]) -> None:
        declined.append(list(items))

    async def one(committer: GroupCommitter[int, int], item: int) -> int:
        return await committer.submit_async(item)

    committer: GroupCommitter[int, int] = GroupCommitter(
        recorder, commit_now=would_wait, inline_budget_s=0.001, timer=recorder.timer
    )
    assert asyncio.run(one(committer, 5)) == 10
    committer.stop()
    assert declined == [[5]] and recorder.groups == [[5]]
    assert recorder.threads == ["eventlog-writer"]

    plain: GroupCommitter[int, int] = GroupCommitter(recorder)
    assert asyncio.run(one(plain, 6)) == 12
    plain.stop()
    assert recorder.threads == ["eventlog-writer", "eventlog-writer"]


# -- the writer thread's own faults (issue 41, finding 3) ---------------------------------------


class FaultyLatch(_Latch):
    """The writer thread's latch, whose ``wait`` fails ``times`` times as a sleep under a
    faked clock did (EINVAL)."""

    def __init__(self, times: int) -> None:
        super().__init__()
        self.times = times

    def wait(self, timeout: float = -1) -> bool:
        if self.times > 0:
            self.times -= 1
            raise OSError(errno.EINVAL, "Invalid argument")
        return super().wait(timeout)


async def _gathered(committer: GroupCommitter[int, int], items: Sequence[int]) -> list[Any]:
    futures = [committer.submit_async(item) for item in items]  # one pass: the writer thread
    return list(await asyncio.wait_for(asyncio.gather(*futures, return_exceptions=True), 10))


def test_a_writer_thread_that_fails_is_replaced_by_the_next_submit() -> None:
    committer: GroupCommitter[int, int] = GroupCommitter(Recorder())
    committer._thread_wake = FaultyLatch(times=1)  # the thread's idle wait fails once
    assert asyncio.run(_gathered(committer, [1, 2, 3])) == [2, 4, 6]
    deadline = time.monotonic() + 5
    while committer._running and time.monotonic() < deadline:
        time.sleep(0.01)  # the failed thread has ended, and says so
    assert not committer._running
    assert asyncio.run(_gathered(committer, [4, 5])) == [8, 10]  # a new writer answers
    committer.stop()


def test_the_group_in_flight_when_the_writer_fails_gets_a_clear_error() -> None:
    calls = itertools.count()

    def timer() -> float:  # the time taken after the first commit: the thread's own fault
        if next(calls) == 1:
            raise OSError(errno.EINVAL, "Invalid argument")
        return time.perf_counter()

    committer: GroupCommitter[int, int] = GroupCommitter(Recorder(), timer=timer)
    outcomes = asyncio.run(_gathered(committer, [1, 2]))
    assert all(isinstance(o, WriterFailed) for o in outcomes), outcomes
    assert "whether this batch was committed is unknown" in str(outcomes[0])
    assert asyncio.run(_gathered(committer, [3])) == [6]
    committer.stop()
