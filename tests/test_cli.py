"""The installed ``sessionledger`` command (SPEC §11 CLI): output, exit codes, ``--db``.

Sessions are written in process through :class:`SessionService`; every command under test
runs as the real console script in a subprocess on that temporary database. Exit codes: 0
success, 1 a fault found, 2 bad usage or input, with a one-line message and no traceback.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from server_support import sessionledger_command

from eventlog import DEFAULT_STORE_URL, NewEvent, SessionCreated, open_store
from sessionledger import SessionService, resolve_store_url


@dataclass
class Ledger:
    """A temporary database with a few sessions, and how to run the CLI on it."""

    path: Path
    sessions: list[str]

    @property
    def url(self) -> str:
        return f"sqlite:///{self.path}"

    def run(
        self, *args: str, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        return run_cli(*args, "--db", self.url, cwd=self.path.parent, env=env)

    def execute(self, sql: str, params: tuple[Any, ...]) -> None:
        """Tamper with the file behind the store's back, as an attacker or bit rot would."""
        with closing(sqlite3.connect(self.path)) as conn, conn:
            assert conn.execute(sql, params).rowcount == 1


def run_cli(
    *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if k != "SESSIONLEDGER_DB"}
    environment.update(env or {})
    return subprocess.run(
        [*sessionledger_command(), *args], cwd=cwd, env=environment, capture_output=True,
        text=True, timeout=60, check=False,
    )


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[Ledger]:
    """Three sessions; the first has three events (seq 1 to 3)."""
    path = tmp_path / "ledger.db"
    service = SessionService.open(f"sqlite:///{path}", workspace_root=tmp_path)
    try:
        ids = [service.create_session()["sessionId"] for _ in range(3)]
        for _ in range(2):
            service.store.append(
                ids[0], [NewEvent(SessionCreated(workspace="/w"), actor="system")]
            )
    finally:
        service.close()
    yield Ledger(path, ids)


def assert_clean_failure(result: subprocess.CompletedProcess[str], code: int) -> None:
    assert result.returncode == code, result.stdout + result.stderr
    assert "Traceback" not in result.stderr


# -- sessions, events ------------------------------------------------------------------------


def test_sessions_lists_every_session(ledger: Ledger) -> None:
    result = ledger.run("sessions")
    assert result.returncode == 0, result.stderr
    for session_id in ledger.sessions:
        assert session_id in result.stdout
    positions = [result.stdout.index(s) for s in ledger.sessions]
    assert positions[0] < positions[2] < positions[1]  # most recently updated first


def test_sessions_limit_and_waiting_read_the_list_a_page_at_a_time(  # issue 41
    tmp_path: Path,
) -> None:
    """1,005 sessions (more than a page of the list), the oldest with a question waiting:
    ``--limit 2`` prints the newest two, ``--waiting`` only the waiting one, and the whole list
    all of them."""
    path = tmp_path / "ledger.db"
    service = SessionService.open(f"sqlite:///{path}", workspace_root=tmp_path)
    try:
        ids = [service.create_session()["sessionId"] for _ in range(1_005)]
        service.tools.call(ids[0], "AskUserQuestion", {"questions": [{
            "question": "Which?", "header": "Q", "multiSelect": False,
            "options": [{"label": "A", "description": "a"}, {"label": "B", "description": "b"}],
        }]})
    finally:
        service.close()
    ledger = Ledger(path, ids)
    newest = ledger.run("sessions", "--limit", "2")
    assert newest.returncode == 0, newest.stderr
    assert [sid for sid in ids if sid in newest.stdout] == [ids[0], ids[-1]]
    waiting = ledger.run("sessions", "--waiting")
    assert [sid for sid in ids if sid in waiting.stdout] == [ids[0]]
    every = ledger.run("sessions")
    assert sum(sid in every.stdout for sid in ids) == 1_005
    assert_clean_failure(ledger.run("sessions", "--limit", "0"), 2)


def test_sessions_on_an_empty_store(tmp_path: Path) -> None:
    SessionService.open(f"sqlite:///{tmp_path}/ledger.db", workspace_root=tmp_path).close()
    result = run_cli("sessions", "--db", f"sqlite:///{tmp_path}/ledger.db", cwd=tmp_path)
    assert result.returncode == 0 and result.stdout == "no sessions\n"


def test_events_json_is_one_wire_envelope_per_line(ledger: Ledger) -> None:
    session = ledger.sessions[0]
    result = ledger.run("events", session, "--json")
    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    store = open_store(ledger.url)
    try:
        assert lines == [e.to_wire() for e in store.read_session(session)]
    finally:
        store.close()
    after = ledger.run("events", session, "--json", "--after", "1")
    assert [json.loads(line)["seq"] for line in after.stdout.splitlines()] == [2, 3]


def test_events_human_readable(ledger: Ledger) -> None:
    result = ledger.run("events", ledger.sessions[1])
    assert result.returncode == 0 and "SessionCreated" in result.stdout


@pytest.mark.parametrize("args", [("events", "sess_missing"), ("audit", "sess_missing")])
def test_unknown_session_exits_2(ledger: Ledger, args: tuple[str, ...]) -> None:
    result = ledger.run(*args)
    assert_clean_failure(result, 2)
    assert "sess_missing" in result.stderr and "not found" in result.stderr


def test_events_bad_cursor_is_a_usage_error(ledger: Ledger) -> None:
    assert_clean_failure(ledger.run("events", ledger.sessions[0], "--after", "-1"), 2)


# -- audit (SPEC EL-4: names the first broken seq) ------------------------------------------


def test_audit_of_a_sound_log_exits_0(ledger: Ledger) -> None:
    result = ledger.run("audit")
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith("OK: 3 sessions, 5 events")
    single = ledger.run("audit", ledger.sessions[0])
    assert single.returncode == 0 and single.stdout.startswith("OK: 1 session, 3 events")


def test_audit_names_an_edited_row(ledger: Ledger) -> None:  # EL-4
    session = ledger.sessions[0]
    ledger.execute(
        "UPDATE events SET data = replace(data, '\"/w\"', '\"/x\"') WHERE session_id = ? "
        "AND seq = 2", (session,),
    )
    for args in (("audit",), ("audit", session)):
        result = ledger.run(*args)
        assert_clean_failure(result, 1)
        assert session in result.stdout and "seq 2" in result.stdout
        assert ledger.sessions[1] not in result.stdout


def test_audit_names_a_malformed_row(ledger: Ledger) -> None:  # EL-4: invalid JSON in data
    session = ledger.sessions[0]
    ledger.execute(
        "UPDATE events SET data = '{not json' WHERE session_id = ? AND seq = 3", (session,)
    )
    result = ledger.run("audit")
    assert_clean_failure(result, 1)
    assert session in result.stdout and "seq 3" in result.stdout


def test_audit_finds_events_whose_head_record_was_deleted(ledger: Ledger) -> None:
    session = ledger.sessions[1]
    ledger.execute("DELETE FROM streams WHERE session_id = ?", (session,))
    result = ledger.run("audit")
    assert_clean_failure(result, 1)
    assert session in result.stdout and "seq 1" in result.stdout


def test_audit_reports_progress_per_session(tmp_path: Path) -> None:
    service = SessionService.open(f"sqlite:///{tmp_path}/ledger.db", workspace_root=tmp_path)
    try:
        for _ in range(5):
            service.create_session()
        calls: list[tuple[int, int]] = []
        reports = service.audit_all(progress=lambda done, total: calls.append((done, total)))
    finally:
        service.close()
    assert calls == [(n, 5) for n in range(1, 6)]
    assert len(reports) == 5 and all(r.ok for r in reports)


# -- --db and configuration -----------------------------------------------------------------


@pytest.mark.parametrize(
    "url", ["postgres://localhost/x", "sqlite://", "sqlite:///x.db?bogus=1", "nonsense"]
)
def test_bad_db_url_exits_2_with_a_clear_message(tmp_path: Path, url: str) -> None:
    result = run_cli("sessions", "--db", url, cwd=tmp_path)
    assert_clean_failure(result, 2)
    named = "bogus" if "bogus" in url else url[:8]  # the option, else the URL itself
    assert result.stderr.startswith("error: ") and named in result.stderr


def test_db_option_beats_environment_beats_default(ledger: Ledger, tmp_path: Path) -> None:
    assert resolve_store_url("sqlite:///a.db", env={"SESSIONLEDGER_DB": "sqlite:///b.db"}) == (
        "sqlite:///a.db"
    )
    assert resolve_store_url(None, env={"SESSIONLEDGER_DB": "sqlite:///b.db"}) == "sqlite:///b.db"
    assert resolve_store_url(None, env={}) == DEFAULT_STORE_URL
    from_env = run_cli("sessions", cwd=tmp_path, env={"SESSIONLEDGER_DB": ledger.url})
    assert ledger.sessions[0] in from_env.stdout
    default = run_cli("sessions", cwd=tmp_path)  # reading never creates the default store
    assert default.returncode == 2 and "/.sessionledger/ledger.db" in default.stderr
    assert not (tmp_path / ".sessionledger").exists()


@pytest.mark.parametrize(
    "args",
    [("--host", "0.0.0.0"), ("--question-grace-s", "400"), ("--question-deadline-s", "nan"),
     ("--port", "70000"), ("--workspace", "/no/such/dir")],
)
def test_serve_refuses_bad_settings_with_exit_2(tmp_path: Path, args: tuple[str, ...]) -> None:
    result = run_cli("serve", "--db", f"sqlite:///{tmp_path}/l.db", *args, cwd=tmp_path)
    assert_clean_failure(result, 2)


def test_python_dash_m_runs_the_same_cli(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "sessionledger", "--help"], cwd=tmp_path, capture_output=True,
        text=True, timeout=60, check=False,
    )
    assert result.returncode == 0
    for command in ("serve", "sessions", "events", "audit"):
        assert command in result.stdout
