"""Killing a writer at any instant loses no acknowledged event (SPEC EL-7, acceptance 4).

A child (``tests/workers/crash_appender.py``) appends in a loop to one SQLite file with the
default ``synchronous=FULL`` — single events, multi-event batches, ``append_many`` over several
sessions, and a concurrent thread — acknowledging each append on stdout (redirected to a file)
after it returns. The test SIGKILLs it at random moments, sometimes while it is still opening
the store, and after every kill reopens the file and checks: every acknowledged event is
present where it was acknowledged, no batch is partial, ``seq`` and global positions are
gapless, and every chain verifies.
"""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import time
from collections import defaultdict
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from eventlog import ManualClock, open_store

WORKER = Path(__file__).parent / "workers" / "crash_appender.py"
ASYNC_WORKER = Path(__file__).parent / "workers" / "crash_async_appender.py"


def acknowledged(path: Path) -> dict[str, dict[str, Any]]:
    """Complete acknowledgement lines by batch id (a torn last line was never acknowledged)."""
    text = path.read_text(encoding="utf-8")
    lines = text.split("\n")[:-1]  # whatever follows the last newline is incomplete
    return {ack["batch"]: ack for ack in map(json.loads, lines)}


def run_and_kill(
    tmp_path: Path, url: str, run_id: str, rng: random.Random, worker: Path = WORKER,
    *, acknowledged_first: bool = False,
) -> Path:
    """Start the child, SIGKILL it at a random moment (with ``acknowledged_first``, only once
    it acknowledged an append); return its acknowledgement file."""
    acks, errors = tmp_path / f"{run_id}.acks", tmp_path / f"{run_id}.err"
    with acks.open("wb") as out, errors.open("wb") as err:
        proc = subprocess.Popen(
            [sys.executable, str(worker), url, run_id, str(rng.randrange(2**32))],
            stdout=out, stderr=err, cwd=tmp_path,
        )
    try:
        early = rng.random() < 0.2
        if early and not acknowledged_first:  # now and then, kill while it starts or opens
            time.sleep(rng.uniform(0.0, 0.4))
        else:
            deadline = time.monotonic() + 60
            while acks.stat().st_size == 0:
                assert proc.poll() is None, errors.read_text()
                assert time.monotonic() < deadline, "no acknowledgement within 60 s"
                time.sleep(0.002)
            time.sleep(rng.uniform(0.0, 0.3))
        assert proc.poll() is None, f"the worker died by itself: {errors.read_text()}"
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == -signal.SIGKILL
    assert errors.read_text() == "", errors.read_text()
    return acks


def check_log(url: str, acks: dict[str, dict[str, Any]]) -> int:
    """EL-7 after a kill: acknowledged events present, batches whole, gapless, chains ok."""
    with closing(open_store(url, clock=ManualClock())) as store:
        events = list(store.read_all())
        assert [e.global_position for e in events] == list(range(1, len(events) + 1))
        by_session: dict[str, list[int]] = defaultdict(list)
        batches: dict[str, list[tuple[int, int, int, str]]] = defaultdict(list)
        for e in events:
            by_session[e.session_id].append(e.seq)
            batch_id, _, place = e.data.workspace.partition("#")  # type: ignore[attr-defined]
            index, size = map(int, place.split("/"))
            batches[batch_id].append((index, size, e.seq, e.session_id))
            batches[batch_id].sort()
        for session_id, seqs in by_session.items():
            assert seqs == list(range(1, len(seqs) + 1)), session_id
            assert store.version(session_id) == len(seqs)
        for batch_id, members in batches.items():
            size = members[0][1]
            assert [m[0] for m in members] == list(range(size)), f"partial batch {batch_id}"
            assert len({m[3] for m in members}) == 1
        positions = {(e.session_id, e.seq): e.global_position for e in events}
        for batch_id, ack in acks.items():
            assert batch_id in batches, f"acknowledged batch {batch_id} was lost"
            assert [m[2] for m in batches[batch_id]] == ack["seqs"], batch_id
            assert [positions[(ack["session"], s)] for s in ack["seqs"]] == ack["positions"]
        bad = [r for r in store.verify() if not r.ok]
        assert bad == []
        return len(events)


@pytest.mark.parametrize("kills", [4, pytest.param(25, marks=pytest.mark.slow)])
def test_el7_sigkill_loses_no_acknowledged_event_and_leaves_no_partial_batch(
    tmp_path: Path, kills: int
) -> None:
    """EL-7: after each SIGKILL the reopened log holds every acknowledged event, whole."""
    seed = random.randrange(2**32)
    print(f"crash test seed {seed}")  # shown on failure, to replay the kill schedule
    rng = random.Random(seed)
    url = f"sqlite:///{tmp_path}/ledger.db"  # synchronous=FULL, the default
    acks: dict[str, dict[str, Any]] = {}
    sizes = []
    for run in range(kills):
        # The last run is killed only after an acknowledgement: some run always has one
        # (each run's early kill had a 1 in 5 chance, so all of them did now and then).
        acks.update(acknowledged(run_and_kill(tmp_path, url, f"r{run}", rng,
                                              acknowledged_first=run == kills - 1)))
        sizes.append(check_log(url, acks))
    assert len(acks) > 0 and sizes[-1] >= sum(len(a["seqs"]) for a in acks.values())
    assert sizes == sorted(sizes)


@pytest.mark.parametrize("kills", [3, pytest.param(15, marks=pytest.mark.slow)])
def test_sigkill_of_async_appends_loses_no_awaited_event(  # EL-7, issue 24.6
    tmp_path: Path, kills: int
) -> None:
    """Coroutines awaiting ``append_async`` (with a thread's ``append`` in the same groups),
    killed at random moments: every append whose await returned is in the log, whole, and
    every chain verifies."""
    seed = random.randrange(2**32)
    print(f"crash test seed {seed}")
    rng = random.Random(seed)
    url = f"sqlite:///{tmp_path}/ledger.db"
    acks: dict[str, dict[str, Any]] = {}
    sizes = []
    for run in range(kills):
        acks.update(acknowledged(run_and_kill(tmp_path, url, f"r{run}", rng, ASYNC_WORKER,
                                              acknowledged_first=run == kills - 1)))
        sizes.append(check_log(url, acks))
    assert len(acks) > 0 and sizes[-1] >= sum(len(a["seqs"]) for a in acks.values())
    assert sizes == sorted(sizes)
