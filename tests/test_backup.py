"""``sessionledger backup DEST`` (SPEC §11; issue 10): SQLite's online backup, restored and audited.

A populated store (sessions in several modes, TodoWrites, a pending question) is copied by
the installed command; the copy passes ``sessionledger audit``, holds the same events with the
same chains, and reads as the same session documents. While a thread, or HTTP clients of a
real ``serve``, keep appending, every copy holds every event acknowledged before the backup
began and is a clean prefix of the log; a server started on the restored copy serves it.
Refusals (exit 2, nothing written): DEST exists without ``--overwrite``, DEST is the store, a
directory, or in a missing directory, and a store that is not a SQLite event log.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import httpx
import pytest
from server_support import create_session, running_server, sessionledger_command

from eventlog import BackupFailed, BackupRefused, backup_store, open_store
from eventlog import sqlite_backup as backup_module
from sessionledger import SessionService

Chain = list[tuple[int, str, int, str]]
"""(global position, session, seq, hash) of every event, in global order."""


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if k != "SESSIONLEDGER_DB"}
    return subprocess.run(
        [*sessionledger_command(), *args], cwd=cwd, env=environment, capture_output=True,
        text=True, timeout=120, check=False,
    )


def todo(content: str, status: str = "pending") -> dict[str, str]:
    return {"content": content, "status": status, "priority": "medium"}


QUESTION = {"questions": [{
    "question": "Which database?", "header": "Database", "multiSelect": False,
    "options": [{"label": "SQLite", "description": "one file"},
                {"label": "Postgres", "description": "a server"}],
}]}


def populate(service: SessionService) -> list[str]:
    """Three sessions: todos written twice, a subagent, and a question left pending."""
    first = service.create_session(mode="auto")["sessionId"]
    second = service.create_session(mode="plan")["sessionId"]
    child = service.create_session(parent_session_id=first)["sessionId"]
    for sid, items in ((first, [todo("read"), todo("write")]),
                       (first, [todo("read", "completed"), todo("write", "in_progress")]),
                       (child, [todo("help")])):
        assert service.tools.call(sid, "TodoWrite", {"todos": items}).status_code == 200
    assert service.tools.call(second, "AskUserQuestion", QUESTION).status_code == 202
    return [first, second, child]


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[tuple[Path, list[str]]]:
    path = tmp_path / "ledger.db"
    service = SessionService.open(f"sqlite:///{path}", workspace_root=tmp_path)
    try:
        sessions = populate(service)
    finally:
        service.close()
    yield path, sessions


def chain_of(path: Path) -> Chain:
    """Every event of the store at ``path``, opened as a store (its chains verified)."""
    store = open_store(f"sqlite:///{path}")
    try:
        assert all(report.ok for report in store.verify())
        return [(e.global_position, e.session_id, e.seq, e.hash) for e in store.read_all()]
    finally:
        store.close()


def documents(path: Path, root: Path) -> dict[str, dict[str, Any]]:
    service = SessionService.open(f"sqlite:///{path}", workspace_root=root)
    try:
        return {s.session_id: service.document(s.session_id) for s in service.summaries()}
    finally:
        service.close()


def assert_prefix(copy: Chain, source: Chain) -> None:
    """The copy is the log as of one commit: a prefix of it, session by session too."""
    assert copy == source[: len(copy)]


def leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(".partial"))


# -- a quiet store ---------------------------------------------------------------------------


def test_backup_copies_every_event_and_the_copy_audits(
    ledger: tuple[Path, list[str]], tmp_path: Path
) -> None:
    path, sessions = ledger
    copy = tmp_path / "copies" / "backup.db"
    copy.parent.mkdir()
    result = run_cli("backup", "--db", f"sqlite:///{path}", str(copy), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    source = chain_of(path)
    assert result.stdout.startswith(f"backed up {len(source)} events of 3 sessions")
    assert str(copy) in result.stdout.replace("\n", "")
    # One self-contained file, as readable as the store, and nothing left beside it.
    assert sorted(p.name for p in copy.parent.iterdir()) == ["backup.db"]
    assert copy.stat().st_mode & 0o777 == path.stat().st_mode & 0o777
    with closing(sqlite3.connect(copy)) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    audit = run_cli("audit", "--db", f"sqlite:///{copy}", cwd=tmp_path)
    assert audit.returncode == 0, audit.stdout + audit.stderr
    assert audit.stdout.startswith(f"OK: 3 sessions, {len(source)} events")
    assert chain_of(copy) == source
    restored = documents(copy, tmp_path)
    assert restored == documents(path, tmp_path) and set(restored) == set(sessions)
    assert restored[sessions[1]]["interactions"][0]["kind"] == "askUserQuestion"


def test_overwrite_replaces_an_existing_file(
    ledger: tuple[Path, list[str]], tmp_path: Path
) -> None:
    path, _sessions = ledger
    copy = tmp_path / "backup.db"
    copy.write_text("an older backup")
    result = run_cli("backup", "--db", f"sqlite:///{path}", str(copy), "--overwrite",
                     cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert chain_of(copy) == chain_of(path) and leftovers(tmp_path) == []


# -- refusals ----------------------------------------------------------------------------------


def _not_a_ledger(tmp_path: Path) -> str:
    with closing(sqlite3.connect(tmp_path / "other.db")) as conn:
        conn.execute("CREATE TABLE t (x)")
    return f"sqlite:///{tmp_path / 'other.db'}"


def _text_file(tmp_path: Path) -> str:
    (tmp_path / "notes.db").write_text("not a database at all, just some text " * 40)
    return f"sqlite:///{tmp_path / 'notes.db'}"


REFUSALS: dict[str, tuple[Callable[[Path, Path], tuple[str, list[str]]], str]] = {
    "dest exists": (lambda db, t: (f"sqlite:///{db}", [str(t / "kept.db")]), "exists"),
    "dest directory missing": (
        lambda db, t: (f"sqlite:///{db}", [str(t / "nowhere" / "b.db")]), "does not exist"),
    "dest is the store": (lambda db, t: (f"sqlite:///{db}", [str(db), "--overwrite"]),
                          "the store itself"),
    "dest is the store's WAL": (
        lambda db, t: (f"sqlite:///{db}", [f"{db}-wal", "--overwrite"]), "the store itself"),
    "dest is a directory": (lambda db, t: (f"sqlite:///{db}", [str(t)]), "is a directory"),
    "memory store": (lambda db, t: ("memory://", [str(t / "b.db")]), "memory://"),
    "postgresql store": (lambda db, t: ("postgresql://u@localhost/x", [str(t / "b.db")]),
                         "pg_dump"),
    "not a URL": (lambda db, t: ("ledger.db", [str(t / "b.db")]), "SQLite"),
    "missing store": (lambda db, t: (f"sqlite:///{t / 'missing.db'}", [str(t / "b.db")]),
                      "no event store"),
    "not a ledger": (lambda db, t: (_not_a_ledger(t), [str(t / "b.db")]), "no events table"),
    "not a database": (lambda db, t: (_text_file(t), [str(t / "b.db")]),
                       "not a sessionledger store"),
}


@pytest.mark.parametrize("case", list(REFUSALS))
def test_refusals_exit_2_and_write_nothing(
    ledger: tuple[Path, list[str]], tmp_path: Path, case: str
) -> None:
    path, _sessions = ledger
    (tmp_path / "kept.db").write_text("an older backup")
    make, expected = REFUSALS[case]
    db, args = make(path, tmp_path)
    source = chain_of(path)
    before = sorted(p.name for p in tmp_path.iterdir())
    result = run_cli("backup", "--db", db, *args, cwd=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr and result.stdout == ""
    assert result.stderr.startswith("error: ") and expected in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # nothing created
    assert (tmp_path / "kept.db").read_text() == "an older backup"
    assert chain_of(path) == source


def test_a_failed_copy_leaves_the_destination_as_it_was(
    ledger: tuple[Path, list[str]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path, _sessions = ledger
    copy = tmp_path / "backup.db"
    copy.write_text("an older backup")

    def broken(source: Path, temporary: Path) -> None:
        temporary.write_bytes(b"half a copy")
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(backup_module, "_copy", broken)
    with pytest.raises(BackupFailed, match="disk is full"):
        backup_store(f"sqlite:///{path}", copy, overwrite=True)
    assert copy.read_text() == "an older backup" and leftovers(tmp_path) == []


def test_a_destination_that_appears_during_the_copy_is_not_replaced(
    ledger: tuple[Path, list[str]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path, _sessions = ledger
    copy = tmp_path / "backup.db"
    real_copy = backup_module._copy

    def racing(source: Path, temporary: Path) -> None:
        real_copy(source, temporary)
        copy.write_text("written by someone else meanwhile")

    monkeypatch.setattr(backup_module, "_copy", racing)
    with pytest.raises(BackupRefused, match="exists"):
        backup_store(f"sqlite:///{path}", copy)
    assert copy.read_text() == "written by someone else meanwhile"
    assert leftovers(tmp_path) == []


# -- while the store is written --------------------------------------------------------------


class Writer:
    """A thread appending TodoWrites to ``sessions`` until stopped; what was acknowledged."""

    def __init__(self, service: SessionService, sessions: list[str]) -> None:
        self.service = service
        self.sessions = sessions
        self.acknowledged: dict[str, int] = {}
        self.errors: list[BaseException] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Writer:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)
        assert not self._thread.is_alive() and self.errors == []

    def _run(self) -> None:
        step = 0
        try:
            while not self._stop.is_set():
                sid = self.sessions[step % len(self.sessions)]
                items = [todo(f"step {step}"), todo(f"step {step + 1}")]
                answer = self.service.tools.call(sid, "TodoWrite", {"todos": items})
                assert answer.status_code == 200, answer.document
                with self._lock:  # only this thread writes: the version is what was acked
                    self.acknowledged[sid] = self.service.store.version(sid)
                step += 1
        except BaseException as exc:  # reported by __exit__
            self.errors.append(exc)

    def snapshot(self, *, at_least: int) -> dict[str, int]:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with self._lock:
                if sum(self.acknowledged.values()) >= at_least:
                    return dict(self.acknowledged)
            time.sleep(0.01)
        raise AssertionError(f"the writer is stuck: {self.errors}")


def versions(chain: Chain) -> dict[str, int]:
    heads: dict[str, int] = {}
    for _position, sid, seq, _hash in chain:
        heads[sid] = seq
    return heads


def test_backups_taken_while_a_thread_appends_hold_every_acknowledged_event(
    ledger: tuple[Path, list[str]], tmp_path: Path
) -> None:
    path, sessions = ledger
    service = SessionService.open(f"sqlite:///{path}", workspace_root=tmp_path)
    copies: list[tuple[Path, dict[str, int]]] = []
    try:
        with Writer(service, [sessions[0], sessions[2]]) as writer:
            for round_ in range(3):
                acknowledged = writer.snapshot(at_least=10 * (round_ + 1))
                copy = tmp_path / f"copy-{round_}.db"
                report = backup_store(f"sqlite:///{path}", copy)
                copies.append((copy, acknowledged))
                assert report.sessions == 3 and report.destination == copy
    finally:
        service.close()
    source = chain_of(path)
    for copy, acknowledged in copies:
        copied = chain_of(copy)
        assert_prefix(copied, source)
        heads = versions(copied)
        assert all(heads[sid] >= version for sid, version in acknowledged.items())
        reports = documents_audit(copy, tmp_path)
        assert reports and all(reports), copy
    assert len(source) > len(chain_of(copies[0][0]))  # the writer went on after the first


def documents_audit(path: Path, root: Path) -> list[bool]:
    service = SessionService.open(f"sqlite:///{path}", workspace_root=root)
    try:
        return [report.ok for report in service.audit_all()]
    finally:
        service.close()


@pytest.mark.slow  # a server killed or restarted under load: make verify (D182)
def test_backup_of_a_serving_store_under_http_load_restores_and_audits(tmp_path: Path) -> None:
    acknowledged: list[str] = []
    stop = threading.Event()
    errors: list[BaseException] = []

    def load(http: httpx.Client, sids: list[str]) -> None:
        step = 0
        try:
            while not stop.is_set():
                sid = sids[step % len(sids)]
                answer = http.post(f"/v1/sessions/{sid}/tool-calls", json={
                    "tool": "TodoWrite", "input": {"todos": [todo(f"step {step}")]}})
                assert answer.status_code == 200, answer.text
                acknowledged.append(answer.json()["callId"])
                step += 1
        except BaseException as exc:  # asserted below
            errors.append(exc)

    served = tmp_path / "served"
    served.mkdir()
    copy = tmp_path / "backup.db"
    with running_server(served) as server, server.client() as http:
        sids = [create_session(http) for _ in range(3)]
        writer = threading.Thread(target=load, args=(http, sids), daemon=True)
        writer.start()
        while len(acknowledged) < 10 and writer.is_alive():
            time.sleep(0.01)
        before = list(acknowledged)
        result = run_cli("backup", "--db", server.db_url, str(copy), cwd=tmp_path)
        stop.set()
        writer.join(timeout=30)
    assert errors == [] and result.returncode == 0, result.stderr
    audit = run_cli("audit", "--db", f"sqlite:///{copy}", cwd=tmp_path)
    assert audit.returncode == 0, audit.stdout + audit.stderr
    assert_prefix(chain_of(copy), chain_of(server.db_path))
    store = open_store(f"sqlite:///{copy}")
    try:
        completed = {e.causation_id for e in store.read_all() if e.type == "ToolCallCompleted"}
    finally:
        store.close()
    assert set(before) <= completed
    # Restore: the copy in place of a stopped store, served again.
    restored = tmp_path / "restored"
    restored.mkdir()
    shutil.copyfile(copy, restored / "ledger.db")
    with running_server(restored) as server, server.client() as http:
        listed = {s["sessionId"] for s in http.get("/v1/sessions").json()["sessions"]}
        assert listed == set(sids)
        for sid in sids:
            assert http.get(f"/v1/sessions/{sid}/audit").json()["ok"] is True


def _fifo(tmp_path: Path) -> Path:
    os.mkfifo(tmp_path / "pipe")
    return tmp_path / "pipe"


def _symlink(tmp_path: Path) -> Path:
    (tmp_path / "target.txt").write_text("the link's target")
    (tmp_path / "link.db").symlink_to(tmp_path / "target.txt")
    return tmp_path / "link.db"


def _socket(tmp_path: Path) -> Path:
    import socket

    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(tmp_path / "s.sock"))
    listener.close()  # the socket file stays
    return tmp_path / "s.sock"


def _device(tmp_path: Path) -> Path:
    if os.geteuid() != 0:
        pytest.skip("making a device node needs root")
    import stat

    os.mknod(tmp_path / "null", 0o666 | stat.S_IFCHR, os.makedev(1, 3))  # as /dev/null
    return tmp_path / "null"


NOT_FILES = {"a FIFO": _fifo, "a symbolic link": _symlink, "a socket": _socket,
             "a character device": _device}


@pytest.mark.parametrize("kind", list(NOT_FILES))
def test_overwrite_replaces_only_a_regular_file(  # issue 41, finding 4
    ledger: tuple[Path, list[str]], tmp_path: Path, kind: str
) -> None:
    path, _sessions = ledger
    destination = NOT_FILES[kind](tmp_path)
    before = os.lstat(destination)
    result = run_cli("backup", "--db", f"sqlite:///{path}", str(destination), "--overwrite",
                     cwd=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.startswith("error: ") and f"is {kind}, not a regular file" in \
        result.stderr, result.stderr
    after = os.lstat(destination)
    assert (after.st_mode, after.st_ino) == (before.st_mode, before.st_ino)  # left as it was
    assert leftovers(tmp_path) == []
