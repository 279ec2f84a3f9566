"""What the read commands of the CLI promise a newcomer (issue 42): they never create a store,
their ``--json`` is the documented shape, ``export`` writes what ``events``/``audit`` say, the
bare command is its help, and every error is one ``error: …`` line.

Each command runs as the real console script in a subprocess; the store is written in
process through :class:`SessionService`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import BaseModel
from test_cli import Ledger, assert_clean_failure, run_cli

from sessionledger import SessionService
from sessionledger.http.schemas import CLI_OUTPUTS, CliAuditedSession, Envelope

QUESTION = {"questions": [{
    "question": "Which database should the service use?", "header": "Database",
    "multiSelect": False,
    "options": [{"label": "SQLite", "description": "embedded"},
                {"label": "PostgreSQL", "description": "a server"}],
}]}
PLAN = "# Plan\n\n1. Read the code.\n2. Change it.\n"


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Ledger]:
    """Three sessions: one with todos and a question waiting, one with a plan waiting for
    approval, one deleted."""
    path = tmp_path / "ledger.db"
    service = SessionService.open(f"sqlite:///{path}", workspace_root=tmp_path)
    try:
        asking, planning, gone = (service.create_session()["sessionId"] for _ in range(3))
        service.tools.call(asking, "TodoWrite", {"todos": [
            {"content": "Read the code", "status": "completed", "priority": "high"},
            {"content": "Change it", "status": "in_progress", "priority": "medium"},
        ]})
        assert service.tools.call(asking, "AskUserQuestion", QUESTION).document[
            "status"] == "pending"
        service.set_mode(planning, "plan")
        assert service.tools.call(planning, "ExitPlanMode", {"plan": PLAN}).document[
            "status"] == "pending"
        service.delete_session(gone)
    finally:
        service.close()
    yield Ledger(path, [asking, planning, gone])


def listing(directory: Path) -> list[str]:
    return sorted(str(p.relative_to(directory)) for p in directory.rglob("*"))


def valid(model: type[BaseModel], text: str) -> BaseModel:
    """``text`` read as ``model`` (extra keys refused: the documented shape is closed)."""
    return model.model_validate_json(text, strict=False)


# -- no store is created by reading ------------------------------------------------------------

READS = [["sessions"], ["sessions", "--json"], ["state", "s1"], ["todos", "s1", "--json"],
         ["events", "s1"], ["replay", "s1", "--json"], ["audit"], ["audit", "s1"],
         ["export", "s1"], ["tui", "s1"], ["rebuild"], ["purge", "s1"],
         ["backup", "copy.db"]]


@pytest.mark.parametrize("args", READS, ids=" ".join)
def test_a_read_command_never_creates_a_store(tmp_path: Path, args: list[str]) -> None:
    """In a folder without a store, with a mistyped ``--db`` and through the environment: exit
    2, one line naming the file that is missing, and nothing created."""
    mistyped = tmp_path / "nonexistent" / "dir" / "x.db"
    for extra, env in (([], {}), (["--db", f"sqlite:///{mistyped}"], {}),
                       (["--db", f"SQLITE:///{mistyped}"], {}),
                       ([], {"SESSIONLEDGER_DB": f"sqlite:///{mistyped}"})):
        result = run_cli(*args, *extra, cwd=tmp_path, env=env)
        assert_clean_failure(result, 2)
        missing = mistyped if (extra or env) else tmp_path / ".sessionledger" / "ledger.db"
        assert result.stderr == (
            f"error: no event store at {missing}: nothing has been recorded there. Check --db "
            "or $SESSIONLEDGER_DB, or start recording with `sessionledger serve` (it creates "
            "the store)\n")
        assert listing(tmp_path) == []


def test_a_write_command_creates_the_store_and_says_so_once(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/new.db"
    first = run_cli("call", "--db", url, "sess_x", "TodoRead", "--input", "{}", cwd=tmp_path)
    assert_clean_failure(first, 2)  # the session is unknown, but the store now exists
    assert first.stderr.count("created a new event store") == 1
    assert f"created a new event store at {tmp_path}/new.db\n" in first.stderr
    assert (tmp_path / "new.db").is_file()
    again = run_cli("call", "--db", url, "sess_x", "TodoRead", "--input", "{}", cwd=tmp_path)
    assert "created" not in again.stderr
    assert run_cli("sessions", "--db", url, cwd=tmp_path).stdout == "no sessions\n"


def test_a_bad_url_option_is_named_before_the_missing_file(tmp_path: Path) -> None:
    result = run_cli("sessions", "--db", f"sqlite:///{tmp_path}/x.db?bogus=1", cwd=tmp_path)
    assert_clean_failure(result, 2)
    assert result.stderr == "error: unknown sqlite URL option(s): bogus\n"


# -- --json is the documented shape --------------------------------------------------------------


def test_sessions_json_says_what_waits_in_each(store: Ledger) -> None:
    asking, planning, gone = store.sessions
    result = store.run("sessions", "--json", "--all")
    assert result.returncode == 0, result.stderr
    listed = valid(CLI_OUTPUTS["sessions"], result.stdout).model_dump()["sessions"]
    by_id = {entry["sessionId"]: entry for entry in listed}
    assert [e["sessionId"] for e in listed] == [gone, planning, asking]  # newest first
    assert by_id[asking]["pending"]["questions"] == 1
    assert by_id[asking]["pending"]["deadlineAt"] is not None
    assert by_id[planning]["pending"]["planApprovals"] == 1
    assert [e["deleted"] for e in listed] == [True, False, False]
    assert by_id[planning]["name"] and by_id[asking]["workspace"]
    without = json.loads(store.run("sessions", "--json").stdout)["sessions"]
    assert [e["sessionId"] for e in without] == [planning, asking]
    waiting = json.loads(store.run("sessions", "--json", "--waiting").stdout)["sessions"]
    assert {e["sessionId"] for e in waiting} == {planning, asking}


def test_sessions_table_says_what_waits_in_words(store: Ledger) -> None:
    asking, planning, _gone = store.sessions
    lines = store.run("sessions").stdout.splitlines()
    line_of = {sid: next(line for line in lines if sid in line) for sid in (asking, planning)}
    assert "1 question — deadline 20" in line_of[asking]
    assert "1 plan approval" in line_of[planning]


def test_state_todos_replay_and_audit_json_are_their_documented_shapes(store: Ledger) -> None:
    asking, planning, gone = store.sessions
    state = valid(CLI_OUTPUTS["state"], store.run("state", planning, "--json").stdout)
    assert state.model_dump()["displayMode"] == "plan"
    todos = valid(CLI_OUTPUTS["todos"], store.run("todos", asking, "--json").stdout).model_dump()
    assert todos["progress"] == {"completed": 1, "total": 2}
    assert todos["summary"]["in_progress"] == 1
    replay = store.run("replay", asking, "--json")
    assert replay.returncode == 0, replay.stderr
    replayed = valid(CLI_OUTPUTS["replay"], replay.stdout).model_dump()
    seqs = [entry["seq"] for entry in replayed["entries"]]
    assert seqs == list(range(1, len(seqs) + 1)) and replayed["state"]["version"] == seqs[-1]
    assert replayed["entries"][0]["type"] == "SessionCreated"
    early = json.loads(store.run("replay", asking, "--json", "--until", "2").stdout)
    assert [e["seq"] for e in early["entries"]] == [1, 2] and early["state"]["version"] == 2
    audit = valid(CLI_OUTPUTS["audit"], store.run("audit", "--json").stdout).model_dump()
    assert audit["ok"] is True
    assert {s["sessionId"] for s in audit["sessions"]} == {asking, planning, gone}
    for line in store.run("events", gone, "--json").stdout.splitlines():
        valid(Envelope, line)


def test_export_writes_the_events_and_the_audit(store: Ledger, tmp_path: Path) -> None:
    _asking, planning, gone = store.sessions
    out = tmp_path / "out"
    out.mkdir()
    for session in (planning, gone):  # a deleted session exports too
        result = store.run("export", session, "--dir", str(out))
        assert result.returncode == 0, result.stderr
        events = (out / f"{session}.events.jsonl").read_text(encoding="utf-8")
        assert events == store.run("events", session, "--json").stdout
        seqs = [json.loads(line)["seq"] for line in events.splitlines()]
        assert seqs == list(range(1, len(seqs) + 1))
        audit = valid(CliAuditedSession, (out / f"{session}.audit.json").read_text())
        assert audit.model_dump()["sessionId"] == session
        assert audit.model_dump()["events"] == len(seqs)
    before = (out / f"{planning}.audit.json").read_bytes()
    again = store.run("export", planning, "--dir", str(out))
    assert_clean_failure(again, 2)
    assert "--overwrite" in again.stderr and (out / f"{planning}.audit.json").read_bytes() == before
    assert store.run("export", planning, "--dir", str(out), "--overwrite").returncode == 0
    assert sorted(os.listdir(out)) == sorted(
        f"{s}.{suffix}" for s in (planning, gone) for suffix in ("events.jsonl", "audit.json"))
    unknown = store.run("export", "sess_nope", "--dir", str(out))
    assert_clean_failure(unknown, 2)
    assert unknown.stderr == "error: session 'sess_nope' not found\n"
    sneaky = store.run("export", "../escape", "--dir", str(out))
    assert_clean_failure(sneaky, 2)
    assert not (tmp_path / "escape.events.jsonl").exists()
    # a folder nothing can be written in, even by root: one error line, no traceback
    refused = store.run("export", planning, "--dir", "/proc")
    assert_clean_failure(refused, 2)
    assert refused.stderr.startswith("error: cannot write the export into /proc: ")
    assert refused.stderr.count("\n") == 1


# -- help and errors ----------------------------------------------------------------------------


@pytest.mark.parametrize("args", [[], ["hook"], ["import"], ["setup"]], ids=" ".join)
def test_a_bare_command_prints_its_help_and_exits_0(tmp_path: Path, args: list[str]) -> None:
    result = run_cli(*args, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(" ".join(["Usage: sessionledger", *args]))
    assert "Commands:" in result.stdout and result.stderr == ""
    assert listing(tmp_path) == []


@pytest.mark.parametrize(("args", "said"), [
    (["bogus"], "error: No such command 'bogus'. See `sessionledger --help`.\n"),
    (["state"], "error: Missing argument 'SESSION'. See `sessionledger state --help`.\n"),
    (["sessions", "--limit", "x"], "error: Invalid value for '--limit': 'x' is not a valid "
     "integer range. See `sessionledger sessions --help`.\n"),
    (["--bogus"], "error: No such option '--bogus'. See `sessionledger --help`.\n"),
], ids=lambda v: " ".join(v) if isinstance(v, list) else "")
def test_usage_errors_are_one_line_in_the_one_error_style(
    tmp_path: Path, args: list[str], said: str
) -> None:
    result = run_cli(*args, cwd=tmp_path)
    assert_clean_failure(result, 2)
    assert result.stderr == said and result.stdout == ""
