"""Copying a SQLite log into PostgreSQL keeps every chain (issue 11, ``eventlog.migrate``).

The copy is verified on arrival in the copy's transaction: a source that does not verify, or a
destination that is not empty, leaves the destination untouched.
"""

from __future__ import annotations

import sqlite3
import subprocess
from contextlib import closing
from pathlib import Path

import pytest
from server_support import sessionledger_command
from todo_support import item, write

from eventlog import ManualClock, NewEvent, SessionCreated, open_store
from eventlog.migrate import MigrationRefused, migrate, raw_log
from projections import compare_session
from sessionledger import SessionService

pytestmark = pytest.mark.postgres


def _sqlite_log(tmp_path: Path) -> tuple[str, list[str]]:
    """A SQLite log of a few sessions with todos, idempotency keys and interleaved appends."""
    root = tmp_path / "root"
    root.mkdir()
    url = f"sqlite:///{tmp_path}/ledger.db"
    service = SessionService.open(url, workspace_root=root)
    try:
        ids = [str(service.create_session()["sessionId"]) for _ in range(3)]
        for n, sid in enumerate(ids):
            write(service, sid, [item(f"task {n}"), item("second", status="in_progress")])
    finally:
        service.close()
    with closing(open_store(url, clock=ManualClock())) as store:
        for n in range(5):
            store.append(ids[n % 3], [NewEvent(SessionCreated(workspace=f"w{n}"), "user")] * 2,
                         idempotency_key=f"key-{n}")
    return url, ids


def test_migrate_copies_every_row_and_chain_and_folds_the_projections(
    tmp_path: Path, pg_database: str
) -> None:
    source_url, ids = _sqlite_log(tmp_path)
    target_url = f"{pg_database}?schema=migrated"
    report = migrate(source_url, target_url)
    with closing(open_store(source_url)) as source:
        source_rows = list(raw_log(source))
    assert (report.sessions, report.events) == (3, len(source_rows))
    assert all(r.ok for r in report.chains)
    service = SessionService.open(target_url, workspace_root=tmp_path / "root")
    try:
        store = service.store
        copied = list(raw_log(store))
        # Everything but the store's own global position is kept, in the same order.
        assert [r[1:] for r in copied] == [r[1:] for r in source_rows]
        assert [r[0] for r in copied] == list(range(1, len(copied) + 1))
        assert all(r.ok for r in store.verify())
        for sid in ids:
            assert compare_session(store, service.projections, sid) == []
        assert store.append(ids[0], [NewEvent(SessionCreated(workspace="x"), "user")],
                            idempotency_key="key-0").replayed
    finally:
        service.close()


def test_migrate_refuses_a_broken_source_and_a_non_empty_destination(
    tmp_path: Path, pg_database: str
) -> None:
    source_url, ids = _sqlite_log(tmp_path)
    target_url = f"{pg_database}?schema=refused"
    where = "WHERE session_id = ? AND seq = 2"
    with closing(sqlite3.connect(tmp_path / "ledger.db")) as conn, conn:
        (actor,) = conn.execute(f"SELECT actor FROM events {where}", (ids[1],)).fetchone()
        conn.execute(f"UPDATE events SET actor = 'tampered' {where}", (ids[1],))
    with pytest.raises(MigrationRefused, match=f"session {ids[1]} breaks at seq 2"):
        migrate(source_url, target_url)
    with closing(open_store(target_url)) as target:
        assert target.head_position() == 0
        target.append("sess_other", [NewEvent(SessionCreated(workspace="w"), "user")])
    with closing(sqlite3.connect(tmp_path / "ledger.db")) as conn, conn:
        conn.execute(f"UPDATE events SET actor = ? {where}", (actor, ids[1]))
    with pytest.raises(MigrationRefused, match="not empty"):
        migrate(source_url, target_url)


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*sessionledger_command(), *args], capture_output=True, text=True,
                          timeout=120, check=False)


def test_migrate_command_copies_then_audits_clean_and_refuses_bad_targets(
    tmp_path: Path, pg_database: str
) -> None:
    """`sessionledger migrate --from … --to …`: exit 0 with the counts, the copy audits clean
    (chains and projections), a second run into the same store is refused with exit 1 and
    a non-PostgreSQL target is bad usage, exit 2 — neither writes anything."""
    source_url, ids = _sqlite_log(tmp_path)
    target_url = f"{pg_database}?schema=by_cli"
    with closing(open_store(source_url)) as source:
        events = len(list(raw_log(source)))
    done = _cli("migrate", "--from", source_url, "--to", target_url)
    assert done.returncode == 0, done.stderr
    assert f"migrated {events} events of 3 sessions" in done.stdout
    audit = _cli("audit", "--db", target_url)
    assert audit.returncode == 0, audit.stdout + audit.stderr
    listed = _cli("sessions", "--db", target_url)
    assert all(sid in listed.stdout for sid in ids)
    again = _cli("migrate", "--from", source_url, "--to", target_url)
    assert again.returncode == 1 and "not empty" in again.stderr
    other = tmp_path / "other.db"
    wrong = _cli("migrate", "--from", source_url, "--to", f"sqlite:///{other}")
    assert wrong.returncode == 2 and "postgresql://" in wrong.stderr
    assert not other.exists()
    with closing(open_store(target_url)) as target:
        assert target.head_position() == events
