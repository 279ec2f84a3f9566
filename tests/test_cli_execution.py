"""The CLI's execution-state and maintenance commands (SPEC §11): state, replay, audit of the
projections, rebuild, purge, ``sessions --all``.

Sessions are written in process through :class:`SessionService` (projections attached, as
the server writes them); every command under test runs as the installed console script on
that database. Exit codes: 0 success, 1 a fault found or a refused command, 2 bad input.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from test_cli import assert_clean_failure, run_cli

from sessionledger import SessionService


@dataclass
class Ledger:
    """A database with three sessions: ``busy`` has a history, ``plain`` and ``gone`` do not
    (``gone`` is deleted)."""

    path: Path
    busy: str
    plain: str
    gone: str

    @property
    def url(self) -> str:
        return f"sqlite:///{self.path}"

    def run(self, *args: str) -> Any:
        return run_cli(*args, "--db", self.url, cwd=self.path.parent)

    def sql(self, statement: str, params: tuple[Any, ...] = ()) -> None:
        """Change the file behind the store's back."""
        with closing(sqlite3.connect(self.path)) as conn, conn:
            conn.execute(statement, params)

    def rows(self, session_id: str) -> list[tuple[Any, ...]]:
        with closing(sqlite3.connect(self.path)) as conn:
            return conn.execute(
                "SELECT * FROM events WHERE session_id = ? ORDER BY seq", (session_id,)
            ).fetchall()


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[Ledger]:
    path = tmp_path / "ledger.db"
    service = SessionService.open(f"sqlite:///{path}", workspace_root=tmp_path)
    try:
        busy = service.create_session()["sessionId"]  # seq 1
        service.set_mode(busy, "yolo")  # seq 2
        service.start_goal(busy, "Ship the release")  # seq 3
        service.end_goal(busy)  # seq 4
        service.set_mode(busy, "plan", task="Plan the migration")  # seq 5, 6 (message)
        plain = service.create_session(mode="edit")["sessionId"]
        gone = service.create_session()["sessionId"]
        service.delete_session(gone)
    finally:
        service.close()
    yield Ledger(path, busy, plain, gone)


# -- state -----------------------------------------------------------------------------------


def test_state_json(ledger: Ledger) -> None:
    result = ledger.run("state", ledger.busy, "--json")
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert set(document) == {
        "sessionId", "executionState", "displayMode", "version", "updatedAt", "deleted",
    }
    assert document["executionState"] == {"mode": "yolo", "planEnabled": True, "goal": None}
    assert (document["displayMode"], document["version"], document["deleted"]) == (
        "plan", 6, False,
    )


def test_state_text(ledger: Ledger) -> None:
    result = ledger.run("state", ledger.plain)
    assert result.returncode == 0, result.stderr
    lines = {line.split()[0]: line.split(maxsplit=1)[1] for line in result.stdout.splitlines()}
    assert lines["display"] == "edit" and lines["mode"] == "edit" and lines["plan"] == "off"
    assert lines["goal"] == "none" and lines["version"].startswith("1 ")
    deleted = ledger.run("state", ledger.gone)
    assert deleted.returncode == 0 and "deleted" in deleted.stdout


def test_state_of_an_unknown_session_exits_2(ledger: Ledger) -> None:
    result = ledger.run("state", "sess_missing")
    assert_clean_failure(result, 2)
    assert "sess_missing" in result.stderr


# -- replay ----------------------------------------------------------------------------------


def test_replay_until_shows_the_timeline_and_the_state_as_of_it(ledger: Ledger) -> None:
    result = ledger.run("replay", ledger.busy, "--until", "3")
    assert result.returncode == 0, result.stderr
    timeline, _, final = result.stdout.rstrip().rpartition("\n\n")
    lines = timeline.splitlines()
    assert [int(line.split()[0]) for line in lines] == [1, 2, 3]
    assert [line.split()[3] for line in lines] == [
        "SessionCreated", "SessionModeChanged", "GoalStarted",
    ]
    assert [line.split()[2] for line in lines] == ["host", "user", "user"]  # who
    assert "build → yolo via mode_command" in lines[1]
    assert '"Ship the release"' in lines[2]
    assert final.startswith("state as of seq 3 (")
    assert 'display yolo (mode yolo, plan off, goal "Ship the release")' in final


def test_replay_to_the_end(ledger: Ledger) -> None:
    result = ledger.run("replay", ledger.busy)
    assert result.returncode == 0, result.stderr
    assert "yolo → plan (mode yolo underneath) via plan_command" in result.stdout
    assert '"Plan the migration"' in result.stdout and "GoalEnded" in result.stdout
    assert "state as of seq 6" in result.stdout
    assert "display plan (mode yolo, plan on, goal none)" in result.stdout
    deleted = ledger.run("replay", ledger.gone)
    assert deleted.returncode == 0 and "session deleted" in deleted.stdout
    assert deleted.stdout.rstrip().endswith(", deleted")


def test_replay_columns_line_up_and_audit_counts_one_event(ledger: Ledger) -> None:  # issue 23.8
    result = ledger.run("replay", ledger.busy)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.rstrip().rpartition("\n\n")[0].splitlines()
    assert len({len(line) - len(line.split(maxsplit=4)[4]) for line in lines}) == 1  # notes
    assert len({line.index(line.split()[3]) for line in lines}) == 1  # types
    single = ledger.run("audit", ledger.plain)
    assert single.returncode == 0 and single.stdout.startswith("OK: 1 session, 1 event, ")


@pytest.mark.parametrize(
    ("args", "code"),
    [(("replay", "sess_missing"), 2), (("replay", "{busy}", "--until", "7"), 2),
     (("replay", "{busy}", "--until", "0"), 2)],
)
def test_replay_bad_input_exits_2(ledger: Ledger, args: tuple[str, ...], code: int) -> None:
    result = ledger.run(*(a.format(busy=ledger.busy) for a in args))
    assert_clean_failure(result, code)


# -- audit of the projections, rebuild -------------------------------------------------------


def test_tampered_projection_is_found_and_rebuild_repairs_it(ledger: Ledger) -> None:
    assert ledger.run("audit").returncode == 0
    ledger.sql("UPDATE execution_state SET mode = 'auto', goal = 'forged' WHERE session_id = ?",
               (ledger.plain,))
    for args in (("audit",), ("audit", ledger.plain)):
        result = ledger.run(*args)
        assert_clean_failure(result, 1)
        assert f"FAIL {ledger.plain}: projection differs: execution_state.mode: stored 'auto', " \
               "log says 'edit'" in result.stdout
        assert "execution_state.goal: stored 'forged', log says None" in result.stdout
        assert ledger.busy not in result.stdout
    service = SessionService.open(ledger.url, workspace_root=ledger.path.parent)
    try:  # the HTTP audit document carries the same differences
        wire = service.audit(ledger.plain)
    finally:
        service.close()
    assert wire["ok"] is False and wire["chain"] == {"ok": True, "firstBadSeq": None}
    assert wire["projections"]["ok"] is False and len(wire["projections"]["differences"]) == 2
    rebuilt = ledger.run("rebuild")
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert "9 events folded" in rebuilt.stdout  # 6 + 1 + 2: every event of the log
    assert ledger.run("audit").returncode == 0
    state = json.loads(ledger.run("state", ledger.plain, "--json").stdout)
    assert state["executionState"] == {"mode": "edit", "planEnabled": False, "goal": None}


def test_el9_dropped_projection_table_is_rebuilt_from_the_log_at_open(ledger: Ledger) -> None:
    # EL-9: a projection whose table is missing is treated like a version change.
    ledger.sql("DROP TABLE execution_state")
    ok = ledger.run("audit")
    assert ok.returncode == 0 and ok.stdout.startswith("OK: 3 sessions, 9 events")
    state = json.loads(ledger.run("state", ledger.plain, "--json").stdout)
    assert state["executionState"] == {"mode": "edit", "planEnabled": False, "goal": None}


def test_deleted_projection_rows_are_found_and_rebuilt(ledger: Ledger) -> None:
    ledger.sql("DELETE FROM execution_state")
    result = ledger.run("audit")
    assert_clean_failure(result, 1)
    for session in (ledger.busy, ledger.plain, ledger.gone):
        assert f"execution_state: {session} is missing from the projection" in result.stdout
    assert ledger.run("rebuild").returncode == 0
    ok = ledger.run("audit")
    assert ok.returncode == 0 and ok.stdout.startswith("OK: 3 sessions, 9 events")


def test_a_projection_row_for_no_session_is_a_fault(ledger: Ledger) -> None:
    ledger.sql("UPDATE execution_state SET session_id = 'sess_ghost' WHERE session_id = ?",
               (ledger.plain,))
    result = ledger.run("audit")
    assert_clean_failure(result, 1)
    assert "sess_ghost is missing from the log" in result.stdout
    assert f"{ledger.plain} is missing from the projection" in result.stdout


def test_rebuild_of_an_empty_store(tmp_path: Path) -> None:
    SessionService.open(f"sqlite:///{tmp_path}/empty.db", workspace_root=tmp_path).close()
    result = run_cli("rebuild", "--db", f"sqlite:///{tmp_path}/empty.db", cwd=tmp_path)
    assert result.returncode == 0 and "0 events folded" in result.stdout


# -- purge, sessions --all -------------------------------------------------------------------


def test_purge_removes_only_a_deleted_sessions_events(ledger: Ledger) -> None:
    kept = {s: ledger.rows(s) for s in (ledger.busy, ledger.plain)}
    refused = ledger.run("purge", ledger.plain)
    assert_clean_failure(refused, 1)
    assert "not deleted" in refused.stderr and ledger.rows(ledger.plain) == kept[ledger.plain]
    assert_clean_failure(ledger.run("purge", "sess_missing"), 2)
    result = ledger.run("purge", ledger.gone)
    assert result.returncode == 0, result.stderr
    assert f"purged {ledger.gone}: 2 events removed" in result.stdout
    assert ledger.rows(ledger.gone) == []
    assert {s: ledger.rows(s) for s in kept} == kept  # other chains untouched
    audit = ledger.run("audit")
    assert audit.returncode == 0, audit.stdout
    assert audit.stdout.startswith("OK: 2 sessions, 7 events")
    for args in (("state", ledger.gone), ("events", ledger.gone), ("purge", ledger.gone)):
        assert_clean_failure(ledger.run(*args), 2)  # the session is gone for good


def test_sessions_hides_deleted_sessions_unless_asked(ledger: Ledger) -> None:
    listed = ledger.run("sessions")
    assert ledger.busy in listed.stdout and ledger.gone not in listed.stdout
    everything = ledger.run("sessions", "--all")
    assert ledger.gone in everything.stdout and "(deleted)" in everything.stdout


def test_help_lists_the_commands(tmp_path: Path) -> None:
    result = run_cli("--help", cwd=tmp_path)
    for command in ("state", "replay", "rebuild", "purge", "audit"):
        assert command in result.stdout


def test_piped_output_keeps_one_event_per_line(tmp_path: Path) -> None:
    service = SessionService.open(f"sqlite:///{tmp_path}/l.db", workspace_root=tmp_path)
    try:
        session = service.create_session()["sessionId"]
        service.start_goal(session, "a long objective " * 30)  # 510 characters of payload
    finally:
        service.close()
    for command in ("events", "replay"):
        result = run_cli(command, session, "--db", f"sqlite:///{tmp_path}/l.db", cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        assert [line.split()[0] for line in result.stdout.splitlines()[:2]] == ["1", "2"]
