"""The command hook's writer (issue 38): with no ``serve`` running, the hook records the event
itself and starts ``serve --hook-writer`` in the background, to which the events that follow
are forwarded — the hook's start then stays near the interpreter's.

Each test runs the hook as a host does (a new process, the event on stdin, in the project
directory) with ``SESSIONLEDGER_HOOK_WRITER`` set, and stops every writer it started: the ones
the discovery file names and any other whose command line names the test's directory.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import httpx
import pytest
from claude_hooks_support import hook_event, this_repo_env
from test_start_up import SERVICE, modules_after

from eventlog import open_store
from sessionledger.claude_code import forward
from sessionledger.claude_code.wire import (
    DISCOVERY_SUFFIX,
    WRITER_LOCK_SUFFIX,
    WRITER_LOG_SUFFIX,
)
from sessionledger.environment import WRITER_ENV

WAIT_S = 60.0
"""How long a test waits for a writer to start or stop (a loaded machine is slow to start
one; nothing here is timed)."""


def _writers_of(directory: Path) -> list[int]:
    """The ``serve --hook-writer`` processes whose command line names ``directory``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            words = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"--hook-writer" in words and any(str(directory).encode() in w for w in words):
            found.append(int(entry.name))
    return found


@pytest.fixture
def project(tmp_path: Path) -> Iterator[Path]:
    """A project directory with the database beside it; every writer of it stopped after."""
    (tmp_path / "project").mkdir()
    yield tmp_path / "project"
    for pid in _writers_of(tmp_path):
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)  # one this process started (forward.start_writer) is its child
        except (ProcessLookupError, ChildProcessError):
            pass


def db_of(project: Path) -> Path:
    return project.parent / "ledger.db"


def read_event(project: Path, tool_use_id: str | None = None) -> bytes:
    return json.dumps(hook_event(
        "PreToolUse", "writer-session", project, tool_name="Read",
        tool_input={"file_path": str(project / "a.py")},
        tool_use_id=tool_use_id or f"toolu_{uuid.uuid4().hex[:12]}")).encode()


def run_hook(project: Path, body: bytes, *, writer: str = "30",
             args: tuple[str, ...] = ()) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "sessionledger", "hook", "claude-code", "--db",
         f"sqlite:///{db_of(project)}", *args],
        input=body, capture_output=True, cwd=project, timeout=120, check=False,
        env={**this_repo_env(), WRITER_ENV: writer},
    )


def discovered(project: Path) -> dict[str, Any] | None:
    try:
        record = json.loads(Path(f"{db_of(project)}{DISCOVERY_SUFFIX}").read_text())
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def wait_for(condition: Any, what: str) -> Any:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"not within {WAIT_S} s: {what}")


def started_writer(project: Path) -> dict[str, Any]:
    record = wait_for(lambda: (r := discovered(project)) and r.get("writer") and r,
                      "the writer's discovery file")
    assert isinstance(record, dict)
    return record


def allowed(done: subprocess.CompletedProcess[bytes]) -> bool:
    assert done.returncode == 0 and done.stderr == b"", done.stderr
    output = json.loads(done.stdout)
    return bool(output["hookSpecificOutput"]["permissionDecision"] == "allow")


def recorded_calls(project: Path) -> list[str]:
    store = open_store(f"sqlite:///{db_of(project)}")
    try:
        return [e.data.call_id for e in store.read_all() if e.type == "ToolCallRequested"]
    finally:
        store.close()


def test_a_hook_with_no_server_starts_a_writer_and_the_next_events_are_forwarded_to_it(
        project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert allowed(run_hook(project, read_event(project, "toolu_first")))
    record = started_writer(project)
    assert record["url"].startswith("http://127.0.0.1:") and record["root"] == str(project)
    # its token is its own, and the file holding it is this user's alone
    assert stat.S_IMODE(Path(f"{db_of(project)}{DISCOVERY_SUFFIX}").stat().st_mode) == 0o600
    assert httpx.get(record["url"] + "/v1/sessions").status_code == 401
    # the next event is forwarded: the hook loads nothing of the service
    monkeypatch.setenv(WRITER_ENV, "30")
    modules, done = modules_after(
        ["hook", "claude-code", "--db", f"sqlite:///{db_of(project)}"], tmp_path,
        stdin=read_event(project, "toolu_second"), cwd=project)
    assert allowed(done)
    assert [p for p in SERVICE if p in modules] == []
    assert recorded_calls(project) == ["toolu_first", "toolu_second"]
    assert _writers_of(tmp_path) == [record["pid"]]


def test_a_plan_set_in_the_ledger_is_the_writers_answer_as_it_was_the_hooks(
        project: Path) -> None:
    body = json.dumps(hook_event("PreToolUse", "writer-plan", project, tool_name="Write",
                                 tool_input={"file_path": str(project / "b.txt"),
                                             "content": "x"},
                                 tool_use_id="toolu_w1", mode="plan")).encode()
    direct = run_hook(project, body, args=("--direct",))
    assert run_hook(project, read_event(project)).returncode == 0
    started_writer(project)
    forwarded = run_hook(project, body.replace(b"toolu_w1", b"toolu_w2"))
    assert direct.returncode == forwarded.returncode == 0
    assert json.loads(forwarded.stdout) == json.loads(direct.stdout)
    assert json.loads(direct.stdout)["hookSpecificOutput"]["permissionDecision"] == "deny"


@pytest.mark.slow  # make verify
def test_one_writer_per_database_and_none_started_again_while_one_starts(
        project: Path, tmp_path: Path) -> None:
    url = f"sqlite:///{db_of(project)}"
    first = forward.start_writer(url, str(project), 30)
    assert first is not None
    assert forward.start_writer(url, str(project), 30) is None  # started a moment ago
    record = started_writer(project)
    assert record["pid"] == first
    lock = Path(f"{db_of(project)}{WRITER_LOCK_SUFFIX}")
    os.utime(lock, (0, 0))  # long ago: only the lock it holds keeps another from starting
    assert forward.start_writer(url, str(project), 30) is None
    # a second writer started by hand finds the lock held and stops at once
    done = subprocess.run(
        [sys.executable, "-m", "sessionledger", "serve", "--db", url, "--port", "0",
         "--workspace", str(project), "--idle-exit", "30", "--hook-writer"],
        cwd=project, env={**this_repo_env(), "SESSIONLEDGER_TOKEN": "t" * 32},
        capture_output=True, timeout=120, check=False)
    assert done.returncode == 0
    assert _writers_of(tmp_path) == [first]
    assert discovered(project) == record
    os.kill(first, signal.SIGTERM)  # this process's child: waited for here
    os.waitpid(first, 0)
    assert discovered(project) is None


@pytest.mark.slow  # make verify
def test_the_writer_stops_when_idle_and_takes_its_discovery_file_with_it(
        project: Path, tmp_path: Path) -> None:
    assert allowed(run_hook(project, read_event(project), writer="2"))
    record = started_writer(project)
    assert allowed(run_hook(project, read_event(project), writer="2"))  # forwarded
    wait_for(lambda: not _writers_of(tmp_path), "the idle writer's exit")
    assert discovered(project) is None
    assert Path(f"{db_of(project)}{WRITER_LOG_SUFFIX}").read_text() == ""  # no warning
    assert len(recorded_calls(project)) == 2 and record["pid"] > 0


def test_the_writer_stops_when_its_database_is_removed(project: Path, tmp_path: Path) -> None:
    assert allowed(run_hook(project, read_event(project)))
    started_writer(project)
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db_of(project)}{suffix}").unlink(missing_ok=True)
    wait_for(lambda: not _writers_of(tmp_path), "the writer's exit")


def test_a_killed_writer_is_passed_by_and_replaced(project: Path, tmp_path: Path) -> None:
    assert allowed(run_hook(project, read_event(project, "toolu_a")))
    record = started_writer(project)
    os.kill(record["pid"], signal.SIGKILL)
    wait_for(lambda: not _writers_of(tmp_path), "the killed writer's end")
    os.utime(Path(f"{db_of(project)}{WRITER_LOCK_SUFFIX}"), (0, 0))  # started long ago
    assert allowed(run_hook(project, read_event(project, "toolu_b")))  # recorded here
    replaced = wait_for(lambda: (r := discovered(project)) and r["pid"] != record["pid"] and r,
                        "a new writer")
    assert _writers_of(tmp_path) == [replaced["pid"]]
    assert recorded_calls(project) == ["toolu_a", "toolu_b"]


def sessions_created(project: Path) -> dict[str, str]:
    """Each session's workspace, by the host's own session id."""
    store = open_store(f"sqlite:///{db_of(project)}")
    try:
        return {e.data.external_session_id: e.data.workspace for e in store.read_all()
                if e.type == "SessionCreated"}
    finally:
        store.close()


def test_the_hooks_of_every_workspace_are_forwarded_to_the_one_writer(
        project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert allowed(run_hook(project, read_event(project)))
    record = started_writer(project)
    other = tmp_path / "another project é"  # named in a header: percent-encoded
    other.mkdir()
    monkeypatch.setenv(WRITER_ENV, "30")
    body = json.dumps(hook_event("PreToolUse", "other-session", other, tool_name="Read",
                                 tool_input={"file_path": str(other / "a.py")},
                                 tool_use_id="toolu_other")).encode()
    modules, done = modules_after(
        ["hook", "claude-code", "--db", f"sqlite:///{db_of(project)}"], tmp_path,
        stdin=body, cwd=other)
    assert allowed(done)
    assert [p for p in SERVICE if p in modules] == []  # forwarded, not recorded here
    assert _writers_of(tmp_path) == [record["pid"]]
    assert sessions_created(project) == {"writer-session": str(project),
                                         "other-session": str(other)}
    # a session whose cwd lies outside the hook's own root: the writer refuses it as the
    # hook refuses it recording directly
    third = tmp_path / "third"
    third.mkdir()
    outside = json.dumps(hook_event("PreToolUse", "outside-session", third, tool_name="Read",
                                    tool_input={"file_path": str(third / "a.py")},
                                    tool_use_id="toolu_outside")).encode()
    forwarded = run_hook(other, outside, args=("--workspace", str(other)))
    direct = run_hook(other, outside, args=("--workspace", str(other), "--direct"))
    assert json.loads(forwarded.stdout) == json.loads(direct.stdout) == {}
    assert forwarded.stderr == direct.stderr != b""
    assert b"outside the workspace root" in forwarded.stderr
    assert "outside-session" not in sessions_created(project)
    # a root that is not one is refused, and nothing is recorded
    for named in ("relative/root", "%2Fa%00b"):
        answer = httpx.post(record["url"] + "/v1/hooks/claude-code", content=outside,
                            headers={"Authorization": f"Bearer {record['secret']}",
                                     "Sessionledger-Workspace": named})
        assert answer.status_code == 200 and answer.json() == {}
        assert "workspace root" in unquote(answer.headers["Sessionledger-Problem"])
    assert "outside-session" not in sessions_created(project)


@pytest.mark.parametrize("value", ["off", "0"])
def test_no_writer_when_turned_off(project: Path, tmp_path: Path, value: str) -> None:
    assert allowed(run_hook(project, read_event(project), writer=value))
    assert allowed(run_hook(project, read_event(project), args=("--direct",), writer="30"))
    time.sleep(1)  # a writer would have its process by now; none may ever start
    assert _writers_of(tmp_path) == []
    assert not Path(f"{db_of(project)}{WRITER_LOCK_SUFFIX}").exists()


@pytest.mark.parametrize("value, seconds", [
    ("", forward.DEFAULT_WRITER_IDLE_S), ("off", None), ("OFF", None), ("no", None),
    ("0", None), ("45", 45.0), ("2.5", 2.5), ("-3", forward.DEFAULT_WRITER_IDLE_S),
    ("soon", forward.DEFAULT_WRITER_IDLE_S), ("1e9", forward.DEFAULT_WRITER_IDLE_S),
])
def test_the_writers_idle_time_is_read_from_the_environment(
        monkeypatch: pytest.MonkeyPatch, value: str, seconds: float | None) -> None:
    monkeypatch.setenv(WRITER_ENV, value)
    assert forward._writer_idle_s() == seconds


@pytest.mark.parametrize("args, message", [
    (["--idle-exit", "0"], "idle-exit must be a finite number of seconds > 0"),
    (["--idle-exit", "nan"], "idle-exit must be a finite number of seconds > 0"),
    (["--hook-writer"], "--hook-writer needs a token and --idle-exit"),
])
def test_serve_refuses_a_bad_idle_exit(tmp_path: Path, args: list[str], message: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "sessionledger", "serve", "--db",
         f"sqlite:///{tmp_path / 'x.db'}", "--port", "0", *args],
        cwd=tmp_path, env=this_repo_env(), capture_output=True, text=True, timeout=120,
        check=False)
    assert done.returncode != 0 and message in done.stderr
    assert _writers_of(tmp_path) == []


def test_a_writers_log_grown_past_its_limit_is_moved_aside_when_the_next_starts(
        project: Path, tmp_path: Path) -> None:
    log = Path(f"{db_of(project)}{WRITER_LOG_SUFFIX}")
    old = b"{\"level\": \"warning\"}\n" * (forward.WRITER_LOG_MAX_BYTES // 20 + 1)
    log.write_bytes(old)
    url = f"sqlite:///{db_of(project)}"
    started = forward.start_writer(url, str(project), 30)
    assert started is not None
    started_writer(project)
    assert Path(f"{log}.1").read_bytes() == old  # the one before, kept once
    assert log.stat().st_size < len(old)  # a new log
    os.kill(started, signal.SIGTERM)  # this process's child: waited for here
    os.waitpid(started, 0)
    small = b"{\"level\": \"warning\"}\n"
    log.write_bytes(small)  # a log under the limit is appended to
    os.utime(Path(f"{db_of(project)}{WRITER_LOCK_SUFFIX}"), (0, 0))  # started long ago
    again = forward.start_writer(url, str(project), 30)
    assert again is not None
    started_writer(project)
    assert log.read_bytes().startswith(small)
    assert Path(f"{log}.1").read_bytes() == old
