"""Every configuration snippet of docs/mcp.md runs (issue 21 acceptance 6).

The snippets are read out of the document, not copied here: the fenced ``json`` blocks with an
``mcpServers`` table (the stdio command, and the HTTP URL) and the ``python`` block. Each is
changed only where it names a machine's place — the ``sessionledger`` command becomes the
installed console script, ``sqlite:///path/to/ledger.db`` and ``/path/to/project`` a temporary
database and workspace, port 8765 the port of a real ``sessionledger serve``, the Python
block's ``[...]`` a todo list — and then run: each ``mcpServers`` entry with the Python SDK's
``Client`` (TodoWrite, then TodoRead gives the list back) and, as a file, by the MCP
Inspector's config-file mode (``mcp-inspector --cli --config FILE --server sessionledger``);
the Python block is executed as written.

A snippet removed, renamed or broken fails here: the snippets are counted by kind.
"""

from __future__ import annotations

import json
import os
import re
import textwrap
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters
from mcp_support import TODOS, server_env
from node_support import NodeClients, run_json_lines
from server_support import ServerProcess, sessionledger_command

from sessionledger.mcp import SESSION_META

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "mcp.md"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.MULTILINE | re.DOTALL)
DOC_DB, DOC_WORKSPACE, DOC_PORT = "sqlite:///path/to/ledger.db", "/path/to/project", "8765"
DOC_BASE = f"http://127.0.0.1:{DOC_PORT}"
RUN_TIMEOUT_S = 60.0


def snippets() -> dict[str, list[str]]:
    """The configuration snippets of docs/mcp.md by kind: ``stdio`` and ``http`` (``json``
    blocks with an ``mcpServers`` table, told apart by their entry's ``url``) and ``python``."""
    found: dict[str, list[str]] = {"stdio": [], "http": [], "python": [], "other": []}
    for language, body in FENCE.findall(DOC.read_text(encoding="utf-8")):
        if language == "json" and "mcpServers" in body:
            (entry,) = json.loads(body)["mcpServers"].values()
            found["http" if "url" in entry else "stdio"].append(body)
        elif language == "python":
            found["python"].append(body)
        else:
            found["other"].append(body)
    return found


def substituted(text: str, replacements: dict[str, str]) -> str:
    """``text`` with each placeholder replaced; every one must be in it."""
    for placeholder, value in replacements.items():
        assert placeholder in text, f"the snippet no longer names {placeholder!r}:\n{text}"
        text = text.replace(placeholder, value)
    return text


def the_only(kind: str) -> str:
    (snippet,) = snippets()[kind]
    return snippet


def entry_of(config: str) -> dict[str, Any]:
    servers = json.loads(config)["mcpServers"]
    assert list(servers) == ["sessionledger"]
    return dict(servers["sessionledger"])


def stdio_config(tmp_path: Path) -> tuple[str, Path]:
    """The stdio snippet for a temporary database and workspace: its text, and the database."""
    workspace = tmp_path / "project"
    workspace.mkdir()
    db_path = tmp_path / "ledger.db"
    (script,) = sessionledger_command()
    text = substituted(the_only("stdio"), {
        '"command": "sessionledger"': f'"command": {json.dumps(script)}',
        DOC_DB: f"sqlite:///{db_path}", DOC_WORKSPACE: str(workspace),
    })
    return text, db_path


def http_config(server: ServerProcess) -> str:
    return substituted(the_only("http"), {DOC_BASE: server.base_url})


def write_then_read(target: str | StdioServerParameters, **options: Any) -> list[Any]:
    """TodoWrite then TodoRead with ``mcp.Client(target)``; the todos read. A 2026-07-28
    client over HTTP has no MCP session (D156): it passes the session the first result named."""
    todos: list[Any] = []
    handle = isinstance(target, str) and options.get("mode", "auto") != "legacy"

    async def scenario() -> None:
        async with Client(target, **options) as client:
            written = await client.call_tool("TodoWrite", TODOS)
            assert not written.is_error and written.meta is not None, written
            session = written.meta[SESSION_META]
            read = await client.call_tool("TodoRead", {"sessionId": session} if handle else {})
            assert not read.is_error and read.structured_content is not None, read
            assert read.structured_content["sessionId"] == session
            todos.extend(read.structured_content["result"]["todos"])

    anyio.run(scenario)
    return todos


def test_the_docs_have_each_configuration_snippet_once() -> None:  # issue 21 acceptance 6
    found = snippets()
    counted = {kind: len(blocks) for kind, blocks in found.items()}
    # a new fenced block is a snippet no test runs yet: run it here
    assert counted == {"stdio": 1, "http": 1, "python": 1, "other": 0}, found["other"]
    assert entry_of(the_only("http"))["type"] == "http"


# -- run with the Python SDK -----------------------------------------------------------------


def test_the_stdio_snippet_runs(tmp_path: Path) -> None:  # issue 21 acceptance 6
    config, db_path = stdio_config(tmp_path)
    entry = entry_of(config)
    assert set(entry) == {"command", "args"}
    # the SDK passes a spawned server only a safe default environment; the test's PYTHONPATH
    # is added so the command runs the code under test
    params = StdioServerParameters(command=entry["command"], args=entry["args"], env=server_env())
    assert write_then_read(params) == TODOS["todos"]
    assert write_then_read(params, mode="legacy") == TODOS["todos"]
    assert db_path.exists()  # the database the snippet names


def test_the_http_snippet_runs(server: ServerProcess) -> None:  # issue 21 acceptance 6
    entry = entry_of(http_config(server))
    assert entry == {"type": "http", "url": f"{server.base_url}/mcp"}
    assert write_then_read(entry["url"]) == TODOS["todos"]  # 2026-07-28, the SDK's default
    assert write_then_read(entry["url"], mode="legacy") == TODOS["todos"]


def test_the_python_snippet_runs_as_written(server: ServerProcess) -> None:  # acceptance 6
    code = substituted(the_only("python"), {
        DOC_BASE: server.base_url, "[...]": repr(TODOS["todos"]),
    })
    namespace: dict[str, Any] = {"Client": Client}
    exec(  # the documented snippet, run as a user would run it
        "async def snippet():\n" + textwrap.indent(code, "    ") + "    return locals()\n",
        namespace,
    )
    done: dict[str, Any] = {}

    async def run() -> None:
        done.update(await namespace["snippet"]())

    anyio.run(run)
    read = done["read"]
    assert not read.is_error, read
    assert read.structured_content["result"]["todos"] == TODOS["todos"]
    assert read.structured_content["sessionId"] == done["session"]


# -- the same files in the MCP Inspector's config-file mode -----------------------------------


def inspector_lists(clients: NodeClients, config: str, home: Path, *args: str) -> set[str]:
    """``mcp-inspector --cli --config FILE --server sessionledger --method tools/list``:
    the tool names it printed."""
    home.mkdir(exist_ok=True)
    path = home / "mcp.json"
    path.write_text(config, encoding="utf-8")
    env = {**os.environ, "HOME": str(home), "npm_config_update_notifier": "false"}
    code, lines, stderr = run_json_lines(
        clients.inspector("--config", str(path), "--server", "sessionledger", "--format",
                          "json", *args, "--method", "tools/list"),
        timeout=RUN_TIMEOUT_S, env=env,
    )
    assert code == 0 and len(lines) == 1, (code, lines, stderr)
    return {tool["name"] for tool in lines[0]["result"]["tools"]}


def test_the_stdio_snippet_runs_in_the_inspector(  # issue 21 acceptance 6
    node_clients: NodeClients, tmp_path: Path
) -> None:
    config, _db_path = stdio_config(tmp_path)
    # as with the SDK: the Inspector gives a stdio server a default environment; -e adds the
    # test's PYTHONPATH, the snippet's file stays as documented
    extra = ["-e", f"PYTHONPATH={os.environ['PYTHONPATH']}"] if "PYTHONPATH" in os.environ else []
    listed = inspector_lists(node_clients, config, tmp_path / "home", *extra)
    assert {"TodoWrite", "TodoRead", "AskUserQuestion", "ExitPlanMode"} <= listed


def test_the_http_snippet_runs_in_the_inspector(  # issue 21 acceptance 6
    node_clients: NodeClients, server: ServerProcess, tmp_path: Path
) -> None:
    listed = inspector_lists(node_clients, http_config(server), tmp_path / "home")
    assert {"TodoWrite", "TodoRead", "AskUserQuestion", "ExitPlanMode"} <= listed
