"""Many writer processes on one PostgreSQL database, and a reader of the global stream
(issue 11, acceptance 2).

Writers (``tests/workers/pg_writer.py``) append to their own sessions and to one shared session
(with conflict retries) while this process reads the global stream from its cursor in pages.
The reader must never see a position skipped — a page always continues at cursor + 1, which
would fail if an event committed after a later one (D109) — nor one twice; afterwards every
acknowledged event is in the log once, where its writer was told, and every chain verifies.
``make test`` runs 4 writers; ``make verify`` 16 writers and 100,000 appends (about 8 minutes
on 2 vCPUs, D114).
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from contextlib import closing
from pathlib import Path

import pytest

from eventlog import open_store

pytestmark = pytest.mark.postgres

WORKER = Path(__file__).parent / "workers" / "pg_writer.py"


def _start(tmp_path: Path, url: str, writers: int, appends: int) -> list[subprocess.Popen[bytes]]:
    procs = []
    for w in range(writers):
        name = f"w{w}"
        with (tmp_path / f"{name}.out").open("wb") as out, \
                (tmp_path / f"{name}.err").open("wb") as err:
            procs.append(subprocess.Popen(
                [sys.executable, str(WORKER), url, name, str(appends),
                 str(tmp_path / f"{name}.acks"), str(tmp_path / f"{name}.ready"),
                 str(tmp_path / "go")],
                stdout=out, stderr=err, cwd=tmp_path,
            ))
    deadline = time.monotonic() + 120
    while not all((tmp_path / f"w{w}.ready").exists() for w in range(writers)):
        assert all(p.poll() is None for p in procs), "a writer died before starting"
        assert time.monotonic() < deadline, "writers did not get ready"
        time.sleep(0.01)
    return procs


def _read_while(url: str, running: threading.Event) -> list[tuple[int, str]]:
    """Read the global stream in pages until the writers are done and it is drained."""
    seen: list[tuple[int, str]] = []
    with closing(open_store(url)) as store:
        while True:
            done = not running.is_set()
            page = list(store.read_all(after=len(seen), limit=500))
            positions = [e.global_position for e in page]
            assert positions == list(range(len(seen) + 1, len(seen) + 1 + len(page))), (
                f"after {len(seen)} the reader got {positions[:5]}…: a skip or a repeat"
            )
            seen += [(e.global_position, e.data.workspace) for e in page]  # type: ignore[attr-defined]
            if done and not page:
                return seen
            if not page:
                time.sleep(0.005)


@pytest.mark.parametrize(
    ("writers", "appends"),
    [(4, 100), pytest.param(16, 6250, marks=[pytest.mark.slow, pytest.mark.timeout(1800)])],
)
def test_writer_processes_and_a_global_reader_see_no_gap_and_no_duplicate(
    tmp_path: Path, pg_database: str, writers: int, appends: int
) -> None:
    url = f"{pg_database}?schema=concurrency"
    with closing(open_store(url)):
        pass  # the tables exist before anyone reads
    procs = _start(tmp_path, url, writers, appends)
    running = threading.Event()
    running.set()
    result: list[list[tuple[int, str]]] = []
    reader = threading.Thread(target=lambda: result.append(_read_while(url, running)))
    reader.start()
    try:
        (tmp_path / "go").touch()
        for proc in procs:
            proc.wait(timeout=3000)
    finally:
        running.clear()
        reader.join(timeout=600)
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    for w, proc in enumerate(procs):
        stderr = (tmp_path / f"w{w}.err").read_text(encoding="utf-8", errors="replace")
        assert proc.returncode == 0 and stderr == "", f"writer w{w}: {stderr}"
    (seen,) = result
    acks = sorted(
        (int(position), marker)
        for w in range(writers)
        for position, marker in (
            line.split(" ") for line in (tmp_path / f"w{w}.acks").read_text().splitlines()
        )
    )
    summaries = [json.loads((tmp_path / f"w{w}.out").read_text()) for w in range(writers)]
    assert sum(s["appends"] for s in summaries) == writers * appends
    assert seen == acks  # every acknowledged event once, where its writer was told
    with closing(open_store(url)) as store:
        assert store.head_position() == len(seen)
        assert all(r.ok for r in store.verify())
