"""Two OS processes append to one session of one SQLite file (SPEC EL-2, acceptance 3).

Each worker (``tests/workers/mp_appender.py``) appends at the version it just read, retries on
``ConcurrencyConflict`` and records every acknowledged event. Afterwards every acknowledged
event is in the log exactly once, where the worker was told it landed; ``seq`` is gapless;
batches are contiguous; the chain verifies; and no "database is locked" — or any other error —
ever reached a worker (both exit 0 with a clean stderr).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import Counter
from contextlib import closing
from pathlib import Path

import pytest

from eventlog import ManualClock, NewEvent, SessionCreated, SessionDeleted, open_store

WORKER = Path(__file__).parent / "workers" / "mp_appender.py"
SESSION = "sess_shared"


def wait_for_files(paths: list[Path], procs: list[subprocess.Popen[bytes]]) -> None:
    """Wait until every worker signalled it is ready (failing fast if one died)."""
    deadline = time.monotonic() + 60
    while not all(p.exists() for p in paths):
        dead = [p.returncode for p in procs if p.poll() is not None]
        assert not dead, f"a worker exited before starting (exit codes {dead})"
        assert time.monotonic() < deadline, "workers did not get ready within 60 s"
        time.sleep(0.005)


def run_workers(tmp_path: Path, url: str, names: list[str], seconds: float) -> None:
    """Start the workers together, wait for them; assert clean exits."""
    procs: list[subprocess.Popen[bytes]] = []
    go = tmp_path / "go"
    try:
        for name in names:
            with (tmp_path / f"{name}.out").open("wb") as out, \
                    (tmp_path / f"{name}.err").open("wb") as err:
                procs.append(subprocess.Popen(
                    [sys.executable, str(WORKER), url, SESSION, name, str(seconds),
                     str(tmp_path / f"{name}.acks"), str(tmp_path / f"{name}.ready"), str(go)],
                    stdout=out, stderr=err, cwd=tmp_path,
                ))
        wait_for_files([tmp_path / f"{name}.ready" for name in names], procs)
        go.touch()
        for proc in procs:
            proc.wait(timeout=seconds + 60)
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    for name, proc in zip(names, procs, strict=True):
        stderr = (tmp_path / f"{name}.err").read_text(encoding="utf-8", errors="replace")
        assert "locked" not in stderr.lower(), stderr  # EL-2: never leaks to a caller
        assert proc.returncode == 0 and stderr == "", f"worker {name}: {stderr}"


def read_acks(path: Path) -> list[tuple[int, int, str]]:
    acks = []
    for line in path.read_text(encoding="utf-8").splitlines():
        seq, position, marker = line.split(" ")
        acks.append((int(seq), int(position), marker))
    return acks


@pytest.mark.parametrize("seconds", [3.0, pytest.param(20.0, marks=pytest.mark.slow)])
def test_el2_two_processes_append_to_one_session(tmp_path: Path, seconds: float) -> None:
    """EL-2: no duplicate or missing seq, no lost acknowledged append, no "database is locked"."""
    url = f"sqlite:///{tmp_path}/ledger.db"
    names = ["w1", "w2"]
    run_workers(tmp_path, url, names, seconds)

    summaries = [json.loads((tmp_path / f"{n}.out").read_text()) for n in names]
    assert all(s["appends"] > 0 for s in summaries), summaries  # both made progress
    acks = [ack for name in names for ack in read_acks(tmp_path / f"{name}.acks")]
    assert len({marker for *_, marker in acks}) == len(acks), "markers must be unique"

    with closing(open_store(url, clock=ManualClock())) as store:
        events = list(store.read_session(SESSION))
        stored = [(e.seq, e.global_position, e.data.workspace) for e in events]  # type: ignore[attr-defined]
        counts = Counter(marker for *_, marker in stored)
        assert [m for m, c in counts.items() if c > 1] == []  # nothing twice
        assert sorted(acks) == stored  # every acknowledged event, where it was said to land
        assert [seq for seq, *_ in stored] == list(range(1, len(stored) + 1))
        assert [pos for _, pos, _ in stored] == list(range(1, len(stored) + 1))
        assert store.version(SESSION) == len(stored)
        assert all(r.ok for r in store.verify()), store.verify()
    assert_batches_contiguous(stored)


def assert_batches_contiguous(stored: list[tuple[int, int, str]]) -> None:
    """Each batch (markers ``worker-append-index``) occupies consecutive seqs, in order."""
    batches: dict[str, list[tuple[int, int]]] = {}
    for seq, _position, marker in stored:
        worker, append, index = marker.split("-")
        batches.setdefault(f"{worker}-{append}", []).append((int(index), seq))
    for batch, members in batches.items():
        members.sort()
        indexes = [index for index, _ in members]
        seqs = [seq for _, seq in members]
        assert indexes == list(range(len(members))), batch
        assert seqs == list(range(seqs[0], seqs[0] + len(seqs))), batch
        assert len(members) == int(batch.split("-")[1]) % 3 + 1, batch  # no partial batch


def test_el2_two_connections_interleaving_on_one_session_chain_correctly(tmp_path: Path) -> None:
    """EL-2: a writer's cached session heads are dropped when another connection commits, and
    a purge forgets the purged session's head, so numbering and chains stay right."""
    url = f"sqlite:///{tmp_path / 'two.db'}"
    clock = ManualClock()
    with closing(open_store(url, clock=clock)) as one, closing(open_store(url, clock=clock)) as two:
        one.append("sess_a", [NewEvent(SessionCreated(workspace="/w"), actor="user")])
        for turn in range(6):
            writer = (one, two)[turn % 2]
            result = writer.append("sess_a", [NewEvent(SessionDeleted(), actor="user")])
            assert result.version == turn + 2
        one.purge("sess_a")
        again = one.append("sess_a", [NewEvent(SessionCreated(workspace="/w"), actor="user")])
        assert again.version == 1
        assert two.append("sess_a", [NewEvent(SessionDeleted(), actor="user")]).version == 2
        assert [e.seq for e in one.read_session("sess_a")] == [1, 2]
        assert all(report.ok for report in one.verify("sess_a"))
