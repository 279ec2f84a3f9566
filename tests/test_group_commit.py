"""The group committer on its own: every caller answered once, with its own outcome (EL-2).

The store tests show appends land; these pin the combining machinery under heavy concurrency:
no lost wake-up, no item answered twice or with another's result, groups really formed, and a
failing commit failing exactly the callers of its group.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

import pytest

from eventlog.appending import GroupCommitter

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
