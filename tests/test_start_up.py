"""Start in milliseconds: what the hot entry points import, and the forwarding command hook
(issue 38).

A host starts ``sessionledger`` for every hook event, so the module set of those paths is
kept small by a structural test, not a timed one: each path runs in a real interpreter and
reports ``sys.modules`` afterwards. The command hook forwards to a running ``serve`` found by
the discovery file beside its database (or ``--url``/``SESSIONLEDGER_URL``), and records the
event itself otherwise; when a named server cannot answer it answers ``{}`` and says why.
The hook tests of tests/test_claude_code_hooks.py run over both (the ``command`` and
``direct`` ways).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote_to_bytes, urlsplit

import pytest
from claude_hooks_support import REPO, hook_event, this_repo_env
from hypothesis import given
from hypothesis import strategies as st
from server_support import ServerProcess, running_server

from eventlog import DEFAULT_STORE_URL
from eventlog.store import sqlite_path_from_url
from sessionledger.claude_code import forward
from sessionledger.claude_code.forward import DEFAULT_DB_URL, parse_hook_args
from sessionledger.claude_code.wire import DISCOVERY_SUFFIX, discovery_path

HEAVY = ("fastapi", "starlette", "uvicorn", "mcp", "mcp_types", "textual", "rich", "httpx",
         "anyio")
"""Packages no hot path may import (the server's, the MCP SDK's, the terminal UI's)."""
SERVICE = ("pydantic", "eventlog", "projections", "statemachine", "sqlite_utils", "click",
           "tree_sitter", "transitions", "sessionledger.service", "sessionledger.cli")
"""What ``--version`` and a forwarded hook do without: the service and the catalog."""
LEAN = ("asyncio", "http.client", "email")
"""What neither hook path needs (no event loop; a request is a socket's few lines)."""
FORWARD_LEAN = ("socket", "selectors", "json")
"""What the forwarding hook does without: ``_socket`` makes its one connection, ``_json``
reads and writes its JSON (the json package imports ``re``)."""

_REPORT = """
import sys
from sessionledger.launch import main
sys.argv = ["sessionledger", *sys.argv[1:]]
try:
    main()
finally:
    loaded = sorted(sys.modules)  # before this report's own json
    import json
    with open({report!r}, "w") as out:
        json.dump(loaded, out)
"""


def modules_after(args: list[str], tmp_path: Path, *, stdin: bytes = b"",
                  cwd: Path | None = None) -> tuple[set[str], subprocess.CompletedProcess[bytes]]:
    """Run ``sessionledger ARGS`` in a new interpreter; the modules it had loaded at the end
    (top-level packages and the full names) and how it ran."""
    report = tmp_path / f"modules-{uuid.uuid4().hex}.json"
    done = subprocess.run(
        [sys.executable, "-c", _REPORT.format(report=str(report)), *args],
        input=stdin, capture_output=True, cwd=cwd or tmp_path, env=this_repo_env(),
        timeout=120, check=False,
    )
    names = set(json.loads(report.read_text()))
    return names | {name.split(".")[0] for name in names}, done


def heavy_in(modules: set[str], packages: tuple[str, ...]) -> list[str]:
    return sorted(p for p in packages if p in modules)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with running_server(tmp_path_factory.mktemp("start-up")) as server:
        yield server


def event(server: ServerProcess, name: str = "PreToolUse", **fields: Any) -> dict[str, Any]:
    project = server.workspace / "project"
    project.mkdir(exist_ok=True)
    fields.setdefault("tool_name", "Bash")
    fields.setdefault("tool_input", {"command": "ls -la"})
    fields.setdefault("tool_use_id", f"toolu_{uuid.uuid4().hex[:12]}")
    return hook_event(name, str(uuid.uuid4()), project, **fields)


# -- what the hot paths import ------------------------------------------------------------------


def test_version_imports_nothing_of_the_service(tmp_path: Path) -> None:
    modules, done = modules_after(["--version"], tmp_path)
    assert done.returncode == 0 and done.stdout.decode().startswith("sessionledger, version ")
    assert heavy_in(modules, HEAVY + SERVICE) == []


def test_the_installed_command_starts_our_code_first(tmp_path: Path) -> None:
    # The ``sessionledger`` that hosts start is our script (pyproject's script-files), not the
    # one pip writes for an entry point, which imports ``re`` before our code runs (D206).
    # Run without ``site`` (``-S``: the editable install's path finder imports ``re`` too),
    # the checkout on the path: what ``--version`` loads is the script's and ours alone.
    script = Path(sys.executable).parent / "sessionledger"
    done = subprocess.run(
        [sys.executable, "-S", "-X", "importtime", str(script), "--version"],
        capture_output=True, cwd=tmp_path, env={**this_repo_env(), "PYTHONPATH": str(REPO)},
        timeout=60, check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode().startswith("sessionledger, version ")
    loaded = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.decode().splitlines()
              if line.startswith("import time:")}
    assert "sessionledger.launch" in loaded
    assert heavy_in(loaded, ("re", "enum", "typing", "pathlib", *HEAVY, *SERVICE)) == []


def test_a_forwarded_hook_imports_nothing_of_the_service(
        served: ServerProcess, tmp_path: Path) -> None:
    body = json.dumps(event(served)).encode()
    modules, done = modules_after(["hook", "claude-code", "--db", served.db_url], tmp_path,
                                  stdin=body)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["hookSpecificOutput"]["permissionDecision"] == "allow"
    assert done.stderr == b""
    assert heavy_in(modules, HEAVY + SERVICE + LEAN + FORWARD_LEAN) == []


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@given(JSON_VALUES)
def test_the_hooks_json_is_the_json_packages(value: Any) -> None:
    # forward.loads/dumps use json's own C scanner and encoder without importing json
    text = json.dumps(value, ensure_ascii=False)
    assert forward.dumps(value) == text
    assert forward.loads(text) == value
    assert forward.loads(json.dumps(value, indent=2)) == value


@pytest.mark.parametrize("text", ["", "{", "{} x", "[1,]", "nan", "'a'", "{\"a\" 1}"])
def test_what_is_not_one_json_value_is_refused_like_json_refuses_it(text: str) -> None:
    with pytest.raises(ValueError):
        json.loads(text)
    with pytest.raises(ValueError):
        forward.loads(text)


@pytest.mark.parametrize("url", [
    "http://127.0.0.1:8765", "http://127.0.0.1:8765/", "http://LOCALHOST/base/", "http://h:1/P",
    "http://[::1]:8765", "http://u@h:1", "http://h:1?q", "http://h:x", "http://:1",
    "https://h:1", "http:/h:1", "http://h:\uff11\uff12", "http://h:99999",
])
def test_the_forwarding_address_is_the_one_urlsplit_reads(url: str) -> None:
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        expected = None
    else:
        expected = ((parts.hostname, port or 80, parts.path)
                    if parts.scheme == "http" and parts.hostname else None)
    assert forward._http_address(url) == expected


def test_a_hook_that_records_itself_imports_no_server_and_no_terminal_ui(
        tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    body = json.dumps(hook_event("PreToolUse", str(uuid.uuid4()), project, tool_name="Read",
                                 tool_input={"file_path": str(project / "a.py")},
                                 tool_use_id="toolu_1")).encode()
    db = f"sqlite:///{tmp_path / 'ledger.db'}"
    created, done = modules_after(["hook", "claude-code", "--db", db], tmp_path, stdin=body,
                                  cwd=project)
    assert done.returncode == 0, done.stderr
    assert "sqlite_utils" in created  # the first event makes the schema
    modules, done = modules_after(["hook", "claude-code", "--db", db], tmp_path, stdin=body,
                                  cwd=project)  # the same event again, on the file made
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["hookSpecificOutput"]["permissionDecision"] == "allow"
    assert heavy_in(modules, (*HEAVY, "asyncio", "http.client", "sqlite_utils",
                              "projections.pg_tables", "psycopg")) == []
    assert "sessionledger.cli" not in modules


# -- finding the server -------------------------------------------------------------------------


def test_the_hook_defaults_to_the_store_the_service_opens() -> None:
    # forward.py keeps eventlog's default store URL so that forwarding loads no catalog
    assert DEFAULT_DB_URL == DEFAULT_STORE_URL


@pytest.mark.parametrize("url", [
    "sqlite:///ledger.db", "sqlite:////abs/dir/ledger.db", "sqlite:///a/b.db?timeout=5",
    "sqlite:///.sessionledger/ledger.db",
])
def test_the_discovery_file_lies_beside_the_database_the_store_opens(url: str) -> None:
    database, _ = sqlite_path_from_url(url)
    assert discovery_path(url) == str(database.with_name(database.name + DISCOVERY_SUFFIX))


@pytest.mark.parametrize("url", ["memory://", "postgresql://u@h/db", "sqlite://host/x.db"])
def test_other_stores_have_no_discovery_file(url: str) -> None:
    assert discovery_path(url) is None


def test_serve_writes_where_it_listens_and_removes_it_when_it_stops(tmp_path: Path) -> None:
    with running_server(tmp_path) as server:
        found = discovery_path(server.db_url)
        assert found is not None
        path = Path(found)
        record = json.loads(path.read_text())
        assert record == {"url": server.base_url, "pid": server.process.pid, "token": False}
        server.process.send_signal(signal.SIGTERM)
        assert server.process.wait(timeout=30) == 0
        assert not path.exists()


@pytest.mark.parametrize("args, parsed", [
    (["--db", "sqlite:///x.db"], {"db": "sqlite:///x.db"}),
    (["--db=sqlite:///x.db", "--direct"], {"db": "sqlite:///x.db", "direct": True}),
    (["--url", "http://127.0.0.1:1", "--timeout", "2.5"],
     {"url": "http://127.0.0.1:1", "timeout": 2.5}),
])
def test_the_hook_options_are_read_without_the_parser(
        args: list[str], parsed: dict[str, Any]) -> None:
    options = parse_hook_args(args)
    assert options is not None
    assert {k: getattr(options, k) for k in parsed} == parsed


@pytest.mark.parametrize("args", [
    ["--help"], ["--db"], ["--timeout", "0"], ["--timeout", "nan"], ["--timeout", "9999"],
    ["--bogus"], ["extra"],
])
def test_what_the_fast_reader_does_not_know_goes_to_the_parser(
        args: list[str], tmp_path: Path) -> None:
    assert parse_hook_args(args) is None
    done = subprocess.run(
        [sys.executable, "-m", "sessionledger", "hook", "claude-code", *args],
        input=b"{}", capture_output=True, cwd=tmp_path, env=this_repo_env(), timeout=120,
        check=False,
    )
    if args == ["--help"]:
        assert done.returncode == 0 and b"Usage:" in done.stdout
    else:
        assert done.returncode == 2 and done.stderr.startswith(b"error: ") and done.stdout == b""


# -- when the server cannot answer --------------------------------------------------------------


def run_hook(args: list[str], body: bytes, cwd: Path,
             env: dict[str, str] | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "sessionledger", "hook", "claude-code", *args], input=body,
        capture_output=True, cwd=cwd, env={**this_repo_env(), **(env or {})}, timeout=120,
        check=False,
    )


def test_a_stale_discovery_file_is_passed_by_and_the_event_recorded_here(
        tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    db = tmp_path / "ledger.db"
    with socket.socket() as closed:  # a port nothing listens on
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    (tmp_path / f"ledger.db{DISCOVERY_SUFFIX}").write_text(json.dumps(
        {"url": f"http://127.0.0.1:{port}", "pid": 1, "token": False}))
    body = json.dumps(hook_event("PreToolUse", str(uuid.uuid4()), project, tool_name="Read",
                                 tool_input={"file_path": "a.py"}, tool_use_id="t1")).encode()
    done = run_hook(["--db", f"sqlite:///{db}", "--workspace", str(tmp_path)], body, project)
    assert done.returncode == 0 and done.stderr == b"", done.stderr
    assert json.loads(done.stdout)["hookSpecificOutput"]["permissionDecision"] == "allow"
    assert db.exists()  # recorded here


def test_a_named_server_that_is_down_gets_no_decision_and_a_reason(tmp_path: Path) -> None:
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    done = run_hook([], b'{"hook_event_name": "Stop"}', tmp_path,
                    env={"SESSIONLEDGER_URL": f"http://127.0.0.1:{port}"})
    assert done.returncode == 0 and json.loads(done.stdout) == {}
    assert b"refused the connection" in done.stderr
    assert not (tmp_path / ".sessionledger").exists()  # nothing recorded here instead


def test_a_server_that_never_answers_is_left_after_the_timeout(tmp_path: Path) -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:  # takes the connection and never answers
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                accepted.append(listener.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        port = listener.getsockname()[1]
        done = run_hook(["--url", f"http://127.0.0.1:{port}", "--timeout", "0.5"],
                        b'{"hook_event_name": "Stop"}', tmp_path)
    finally:
        stop.set()
        thread.join(timeout=10)
        for connection in accepted:
            connection.close()
        listener.close()
    assert done.returncode == 0 and json.loads(done.stdout) == {}
    assert b"did not answer" in done.stderr and b"timed out" in done.stderr


def test_a_forwarded_problem_is_said_on_stderr_as_when_recorded_here(
        served: ServerProcess, tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    body = json.dumps(hook_event("PreToolUse", str(uuid.uuid4()), outside, tool_name="Read",
                                 tool_input={"file_path": "a.py"}, tool_use_id="t1")).encode()
    answers = [run_hook(["--db", served.db_url, "--workspace", str(served.workspace), *extra],
                        body, outside) for extra in ([], ["--direct"])]
    for done in answers:
        assert done.returncode == 0 and json.loads(done.stdout) == {}
    assert answers[0].stderr == answers[1].stderr != b""


@given(st.text(alphabet=st.characters(codec="utf-8"), max_size=40)
       | st.binary(max_size=40).map(os.fsdecode))
def test_the_root_a_hook_names_its_writer_is_read_back_as_it_was(path: str) -> None:
    # the hook percent-encodes without urllib; the writer reads it with urllib
    quoted = forward._quoted(path)
    assert quoted == quote(os.fsencode(path), safe="/~")
    assert quoted.isascii() and os.fsdecode(unquote_to_bytes(quoted)) == path


def test_an_earlier_writer_of_another_workspace_is_not_forwarded_to(tmp_path: Path) -> None:
    # a writer of an earlier version serves one workspace's hooks, and takes no root named
    db = tmp_path / "ledger.db"
    inside, elsewhere = tmp_path / "inside", tmp_path / "elsewhere"
    record = {"url": "http://127.0.0.1:9", "pid": 1, "token": True, "secret": "s",
              "root": str(inside), "writer": True}
    Path(f"{db}{DISCOVERY_SUFFIX}").write_text(json.dumps(record))

    def server(workspace: Path) -> Any:
        options = parse_hook_args(["--db", f"sqlite:///{db}", "--workspace", str(workspace)])
        assert options is not None
        return forward._server(options)

    assert server(elsewhere) is None
    assert server(inside / "sub").root == str(inside / "sub")
    Path(f"{db}{DISCOVERY_SUFFIX}").write_text(json.dumps({**record, "anyRoot": True}))
    found = server(elsewhere)
    assert (found.url, found.token, found.root) == (record["url"], "s", str(elsewhere))


def test_a_token_server_is_forwarded_to_with_the_token_only(tmp_path: Path) -> None:
    token = "s3cret-token-for-the-hook"
    with running_server(tmp_path, env={"SESSIONLEDGER_TOKEN": token}) as server:
        found = discovery_path(server.db_url)
        assert found is not None and json.loads(Path(found).read_text())["token"] is True
        project = server.workspace / "p"
        project.mkdir()
        body = json.dumps(hook_event("UserPromptSubmit", str(uuid.uuid4()), project,
                                     prompt="hello")).encode()
        with_token = run_hook(["--db", server.db_url], body, project,
                              env={"SESSIONLEDGER_TOKEN": token})
        assert with_token.returncode == 0 and with_token.stderr == b""
        assert "hook answered" not in server.log()
        requests = [r for r in server.log_records() if r.get("path") == "/v1/hooks/claude-code"]
        assert [r.get("status") for r in requests] == [200]
        without = run_hook(["--db", server.db_url], body, project,
                           env={"SESSIONLEDGER_TOKEN": ""})
        assert without.returncode == 0 and without.stderr == b""  # recorded here instead
        assert len([r for r in server.log_records()
                    if r.get("path") == "/v1/hooks/claude-code"]) == 1


# -- sessionledger mcp: the handshake before the SDK --------------------------------------------


def test_the_early_mcp_answers_import_no_sdk_and_no_service(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", "import json, sys\nfrom sessionledger.mcp import early\n"
         "print(json.dumps(sorted(sys.modules)))"],
        capture_output=True, cwd=tmp_path, env=this_repo_env(), timeout=120, check=True,
    )
    names = set(json.loads(done.stdout))
    modules = names | {name.split(".")[0] for name in names}
    assert heavy_in(modules, HEAVY + SERVICE) == []
    assert "sessionledger.mcp.server" not in modules


def _mcp(workspace: Path, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "sessionledger", "mcp", "--db",
         f"sqlite:///{workspace / 'ledger.db'}", "--workspace", str(workspace), *extra],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        cwd=workspace, env=this_repo_env(),
    )


def _exchange(process: subprocess.Popen[str], *messages: dict[str, Any]) -> list[Any]:
    """Send the messages (waiting for each request's answer); close; every line written."""
    assert process.stdin is not None and process.stdout is not None
    seen: list[Any] = []
    with process:  # its pipes closed at the end
        for message in messages:
            process.stdin.write(json.dumps(message) + "\n")
            process.stdin.flush()
            if "id" in message:
                while True:
                    seen.append(json.loads(process.stdout.readline()))
                    if seen[-1].get("id") == message["id"]:
                        break
        process.stdin.close()
        seen += [json.loads(line) for line in process.stdout.read().splitlines()]
        assert process.wait(timeout=60) == 0
    return seen


HANDSHAKE = [
    {"jsonrpc": "2.0", "id": 1, "method": "initialize",
     "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                "clientInfo": {"name": "test", "version": "0"}}},
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
    {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
    {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
     "params": {"name": "TodoRead", "arguments": {}}},
    {"jsonrpc": "2.0", "id": 4, "method": "tools/list"},
]


@pytest.mark.parametrize("extra", [[], ["--web-url", "http://127.0.0.1:8765/"]],
                         ids=["early", "sdk only"])
def test_mcp_answers_each_request_once_and_the_same_early_or_not(
        tmp_path: Path, extra: list[str]) -> None:
    seen = _exchange(_mcp(tmp_path, *extra), *HANDSHAKE)
    assert [m["id"] for m in seen] == [1, 2, 3, 4]  # no request answered twice
    handshake = json.loads((REPO / "sessionledger" / "mcp" / "handshake.json").read_text())
    assert seen[0]["result"] == handshake["initialize"]["2025-06-18"]
    assert seen[1]["result"] == seen[3]["result"] == handshake["tools"]["2025-06-18"]
    assert seen[2]["result"]["isError"] is False


def test_mcp_with_a_workspace_configuration_starts_as_before(tmp_path: Path) -> None:
    (tmp_path / ".sessionledger").mkdir()
    (tmp_path / ".sessionledger" / "config.toml").write_text("[permission]\nbogus = 1\n")
    done = subprocess.run(
        [sys.executable, "-m", "sessionledger", "mcp", "--db", "memory://", "--workspace",
         str(tmp_path)], input=json.dumps(HANDSHAKE[0]) + "\n", capture_output=True, text=True,
        cwd=tmp_path, env=this_repo_env(), timeout=120, check=False,
    )
    assert done.returncode == 2 and done.stdout == ""  # refused before anything is written


def test_a_protocol_version_outside_the_handshake_era_is_left_to_the_sdk(
        tmp_path: Path) -> None:
    asking = {**HANDSHAKE[0], "params": {**HANDSHAKE[0]["params"],
                                         "protocolVersion": "1999-01-01"}}
    seen = _exchange(_mcp(tmp_path), asking, *HANDSHAKE[1:3])
    assert [m["id"] for m in seen] == [1, 2]
    handshake = json.loads((REPO / "sessionledger" / "mcp" / "handshake.json").read_text())
    assert seen[0]["result"]["protocolVersion"] in handshake["initialize"]


_HAND_OVER_WHEN = """
import asyncio, json, os, sys, time
from pathlib import Path
from sessionledger.mcp import early
early.start(["--workspace", sys.argv[1]])
wire = early.active()
assert wire is not None
go = Path(sys.argv[2])
while not go.exists():  # the SDK "loads" until the test says so
    time.sleep(0.05)
wire.handed_over()
asyncio.run(wire.write(json.dumps({"jsonrpc": "2.0", "method": "handed-over"}) + "\\n"))
time.sleep(3 * early.PROGRESS_S)  # a ticker that kept going would write meanwhile
"""


def test_a_call_that_asked_for_progress_is_kept_alive_until_the_sdk_has_it(
        tmp_path: Path) -> None:
    # A host whose request timeout restarts on progress (the TypeScript SDK's
    # resetTimeoutOnProgress) calls a tool right after the early handshake: it hears progress,
    # increasing and below the SDK server's own count, until the SDK server takes the wire.
    go = tmp_path / "go"
    process = subprocess.Popen(
        [sys.executable, "-c", _HAND_OVER_WHEN, str(tmp_path), str(go)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=tmp_path,
        env=this_repo_env(),
    )
    assert process.stdin is not None and process.stdout is not None
    call = {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
            "params": {"name": "TodoRead", "arguments": {}, "_meta": {"progressToken": "p1"}}}
    quiet = {"jsonrpc": "2.0", "id": 4, "method": "tools/call",
             "params": {"name": "TodoRead", "arguments": {}}}
    with process:
        for message in (*HANDSHAKE[:3], call, quiet):
            process.stdin.write(json.dumps(message) + "\n")
        process.stdin.flush()
        seen = [json.loads(process.stdout.readline()) for _ in range(4)]  # 2 answers, 2 beats
        go.touch()
        process.stdin.close()
        seen += [json.loads(line) for line in process.stdout.read().splitlines()]
        assert process.wait(timeout=60) == 0
    assert [m.get("id") for m in seen[:2]] == [1, 2]  # the handshake, answered early
    marker = [m.get("method") for m in seen].index("handed-over")
    beats = seen[2:marker]
    assert len(beats) >= 2 and {m["method"] for m in beats} == {"notifications/progress"}
    assert {m["params"]["progressToken"] for m in beats} == {"p1"}  # not the quiet call
    values = [m["params"]["progress"] for m in beats]
    assert values == sorted(set(values)) and values[-1] < 1
    assert seen[marker + 1:] == []  # nothing once the SDK server has the wire


# -- help: click and the command line, none of the service ------------------------------------

HELP_NEEDS = ("click", "sessionledger.cli")
"""What ``--help`` loads of :data:`SERVICE`: the parser and the commands it describes."""


@pytest.mark.parametrize("args", [
    ["--help"], ["serve", "--help"], ["sessions", "--help"], ["hook", "claude-code", "--help"],
    ["import", "claude-code", "--help"], ["events", "--help"], ["replay", "--help"],
], ids=" ".join)
def test_help_imports_nothing_of_the_service(args: list[str], tmp_path: Path) -> None:
    modules, done = modules_after(args, tmp_path)
    usage = " ".join(["Usage: sessionledger", *args[:-1]]).encode()
    assert done.returncode == 0 and done.stdout.startswith(usage), done.stderr
    light = tuple(p for p in SERVICE if p not in HELP_NEEDS)
    assert heavy_in(modules, HEAVY + light) == []


def test_serve_builds_its_app_without_the_mcp_sdk(tmp_path: Path) -> None:
    # /mcp loads the SDK at its first request (tests/test_mcp_*.py use it); a server that is
    # never asked for MCP never imports it.
    script = (
        "import json, sys\n"
        "from pathlib import Path\n"
        "from sessionledger import ServerSettings, SessionService\n"
        "from sessionledger.http import create_app\n"
        "root = Path(sys.argv[1])\n"
        "service = SessionService.open(f'sqlite:///{root / \"ledger.db\"}', workspace_root=root)\n"
        "create_app(service=service, settings=ServerSettings(workspace_root=root))\n"
        "service.close()\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path)], capture_output=True,
                          cwd=tmp_path, env=this_repo_env(), timeout=120, check=True)
    names = set(json.loads(done.stdout))
    assert heavy_in(names | {n.split(".")[0] for n in names}, ("mcp", "mcp_types")) == []
    assert "fastapi" in names  # the app was built
