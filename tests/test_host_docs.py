"""Every command of docs/codex.md and docs/gemini.md runs as written, and what the pages show
`setup` writes is what it writes (issue 40, acceptance 6).

The snippets are read out of the pages. Each ``sh`` line but ``serve`` (a running test server
stands in for it) runs through a shell with only the places that name a machine changed:
``sqlite:///path/to/ledger.db`` a temporary database, ``http://127.0.0.1:8765`` the test
server, ``~`` a temporary home. After the ``setup`` line the page's JSON (and Codex's TOML)
blocks are compared with the files it wrote; the ``import`` line reads session files this test
writes in each host's layout. The version each page names is the version the tests pin.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from agent_cli_support import approve_in_ledger
from server_support import ServerProcess, running_server

ROOT = Path(__file__).resolve().parents[1]
FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.MULTILINE | re.DOTALL)
DOC_DB, DOC_BASE = "sqlite:///path/to/ledger.db", "http://127.0.0.1:8765"
PINNED = json.loads((ROOT / "tests" / "hosts" / "package.json").read_text())["dependencies"]
PAGES = {"codex": ("docs/codex.md", "@openai/codex", "Codex CLI"),
         "gemini": ("docs/gemini.md", "@google/gemini-cli", "Gemini CLI")}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with running_server(tmp_path_factory.mktemp("host-docs")) as running:
        yield running


def blocks(page: str) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for language, body in FENCE.findall((ROOT / page).read_text(encoding="utf-8")):
        found.setdefault(language, []).append(body)
    return found


def commands(page: str) -> list[str]:
    return [line.strip() for body in blocks(page).get("sh", []) for line in body.splitlines()
            if line.strip().startswith("sessionledger ")]


def run(line: str, *, server: ServerProcess, home: Path, cwd: Path) -> str:
    text = (line.replace(DOC_DB, server.db_url).replace(DOC_BASE, server.base_url)
            .replace("~/src", str(server.workspace)).replace("~/", f"{home}/"))
    env = {**os.environ, "HOME": str(home), "PATH": os.pathsep.join(
        [str(Path(sys.executable).parent), os.environ["PATH"]])}
    env.pop("CODEX_HOME", None)
    done = subprocess.run(text, shell=True, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, (text, done.stdout, done.stderr)
    return done.stdout


@pytest.mark.parametrize("host", sorted(PAGES))
def test_the_page_names_the_pinned_version(host: str) -> None:
    page, package, name = PAGES[host]
    assert f"**{name} {PINNED[package]}**" in (ROOT / page).read_text(encoding="utf-8")


@pytest.mark.parametrize("host", sorted(PAGES))
def test_every_command_of_the_page_runs_and_setup_writes_what_it_shows(
        host: str, server: ServerProcess, tmp_path: Path) -> None:
    page = PAGES[host][0]
    home = tmp_path / "home"
    project = server.workspace / f"docs-{host}"
    project.mkdir()
    _session_file(host, home, project)
    lines = commands(page)
    assert [line.split()[1] for line in lines] == ["serve", "setup", "import"], lines
    for line in lines[1:]:
        out = run(line, server=server, home=home, cwd=project)
        if line.split()[1] == "import":
            assert re.search(rf"session sess_\w+ \({host} \S+\), [1-9]\d* events appended, "
                             r"0 lines skipped", out), out
    shown = blocks(page)["json"][0]  # the settings; gemini.md's second is a hook's answer
    expected = json.loads(shown.replace(DOC_BASE, server.base_url))
    if host == "codex":
        written = json.loads((home / ".codex" / "hooks.json").read_text(encoding="utf-8"))
        assert written == expected
        (toml,) = blocks(page)["toml"]
        config = tomllib.loads((home / ".codex" / "config.toml").read_text(encoding="utf-8"))
        page_config = tomllib.loads(toml.replace(DOC_BASE, server.base_url))
        assert config["mcp_servers"] == page_config["mcp_servers"]
        assert config["tools"] == page_config["tools"]
        (page_key,) = page_config["hooks"]["state"]
        key = page_key.replace("/home/me/", f"{home}/")
        assert re.fullmatch(r"sha256:[0-9a-f]{64}", config["hooks"]["state"][key]["trusted_hash"])
        assert len(config["hooks"]["state"]) == len(expected["hooks"])
    else:
        written = json.loads((project / ".gemini" / "settings.json").read_text(
            encoding="utf-8"))
        assert written == expected


def _like(shown: Any, given: Any) -> bool:
    """Whether ``given`` is what ``shown`` shows, a page's "…" standing for any text."""
    if isinstance(shown, dict):
        return isinstance(given, dict) and shown.keys() == given.keys() and all(
            _like(shown[key], given[key]) for key in shown)
    if isinstance(shown, list):
        return isinstance(given, list) and len(shown) == len(given) and all(
            _like(a, b) for a, b in zip(shown, given, strict=True))
    if isinstance(shown, str) and isinstance(given, str):
        pattern = ".*?".join(re.escape(part) for part in shown.split("…"))
        return re.fullmatch(pattern, given, re.DOTALL) is not None
    return bool(shown == given)


def test_geminis_answer_after_a_compression_is_the_one_the_page_shows(
        server: ServerProcess) -> None:
    import uuid

    import httpx

    from sessionledger.claude_code.observations import ledger_session_id

    (shown,) = blocks(PAGES["gemini"][0])["json"][1:]
    answer = json.loads(shown)
    messages = answer["hookSpecificOutput"]["llm_request"]["messages"]
    project = server.workspace / "docs-gemini-compressed"
    project.mkdir()
    session = str(uuid.uuid4())
    ledger = ledger_session_id(session, None, "gemini")
    todos = {"todos": [{"description": "Port the parser", "status": "in_progress"}]}

    def event(name: str, **fields: Any) -> dict[str, Any]:
        return {"session_id": session, "cwd": str(project), "hook_event_name": name, **fields}

    with httpx.Client(base_url=server.base_url, timeout=30) as http:
        def hook(body: dict[str, Any]) -> Any:
            sent = http.post("/v1/hooks/gemini", json=body)
            assert sent.status_code == 200, sent.text
            return sent.json()

        hook(event("BeforeAgent", prompt="Port the parser."))
        for name in ("BeforeTool", "AfterTool"):
            hook(event(name, tool_name="write_todos", tool_input=todos,
                       tool_response={"llmContent": "Updated."}))
        approve_in_ledger(http, ledger, "# Port the parser\n")
        request = [{"role": m["role"],
                    "content": m["content"].split("\n\n<hook_context>")[0]}
                   for m in messages]
        request += [{"role": "model", "content": "Got it. Thanks for the additional context!"},
                    {"role": "user", "content": "Go on."}]
        given = hook(event("BeforeModel", llm_request={"model": "gemini-2.5-pro",
                                                        "messages": request}))
    assert _like(answer, given), json.dumps(given)


def _session_file(host: str, home: Path, project: Path, number: int = 1) -> None:
    """One short session in the host's own layout under ``home`` (a prompt, a shell call and
    its result, the model's answer), as the pinned binaries write them."""
    session = f"0190{host[:2].encode().hex()}-0000-7000-8000-{number:012d}"
    at = "2026-12-06T10:00:0{}.000Z"
    lines: list[dict[str, Any]]
    if host == "codex":
        path = home / ".codex" / "sessions" / "2026" / "12" / "06" / \
            f"rollout-2026-12-06T10-00-00-{session}.jsonl"
        lines = [
            {"timestamp": at.format(0), "type": "session_meta",
             "payload": {"id": session, "cwd": str(project), "cli_version": "0.171.0"}},
            {"timestamp": at.format(1), "type": "event_msg", "payload": {
                "type": "item_completed", "item": {"type": "UserMessage", "id": "u1",
                                                   "content": [{"type": "text",
                                                                "text": "List it."}]}}},
            {"timestamp": at.format(2), "type": "response_item", "payload": {
                "type": "function_call", "name": "exec_command", "call_id": "call_1",
                "arguments": json.dumps({"cmd": "ls"})}},
            {"timestamp": at.format(3), "type": "response_item", "payload": {
                "type": "function_call_output", "call_id": "call_1", "output": "a.txt\n"}},
            {"timestamp": at.format(4), "type": "response_item", "payload": {
                "type": "message", "role": "assistant", "id": "m1",
                "content": [{"type": "output_text", "text": "One file."}]}},
        ]
    else:
        gemini = home / ".gemini"
        gemini.mkdir(parents=True)
        (gemini / "projects.json").write_text(json.dumps(
            {"projects": {str(project): project.name}}), encoding="utf-8")
        path = (gemini / "tmp" / project.name / "chats"
                / f"session-2026-12-06T10-00-{session[:8]}.jsonl")
        lines = [
            {"sessionId": session, "projectHash": "0" * 64, "startTime": at.format(0),
             "lastUpdated": at.format(0), "kind": "main"},
            {"id": "u1", "timestamp": at.format(1), "type": "user",
             "content": [{"text": "List it."}]},
            {"id": "g1", "timestamp": at.format(2), "type": "gemini", "content": "One file.",
             "toolCalls": [{"id": "run_shell_command_1", "name": "run_shell_command",
                            "args": {"command": "ls"}, "status": "success",
                            "result": [{"functionResponse": {
                                "id": "run_shell_command_1", "name": "run_shell_command",
                                "response": {"output": "a.txt"}}}]}]},
            {"$set": {"lastUpdated": at.format(3)}},
        ]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")


@pytest.mark.parametrize("host", sorted(PAGES))
def test_an_import_reports_malformed_lines_and_keeps_the_rest(
        host: str, server: ServerProcess, tmp_path: Path) -> None:
    home = tmp_path / "home"
    project = server.workspace / f"malformed-{host}"
    project.mkdir()
    _session_file(host, home, project, number=2)
    (path,) = (home / (".codex" if host == "codex" else ".gemini")).rglob("*.jsonl")
    good = path.read_bytes().splitlines(keepends=True)
    bad = [b'{"timestamp": "2026-12-06T10:00:05.000Z", "type": "response_item"\n',
           b"\xff\xfe not UTF-8\n", b'["an", "array"]\n']
    path.write_bytes(b"".join([*good[:2], *bad, *good[2:]]))
    env = {**os.environ, "HOME": str(home)}
    done = subprocess.run(
        [str(Path(sys.executable).parent / "sessionledger"), "import", host, str(path),
         "--db", server.db_url, "--workspace", str(server.workspace), "--json"],
        cwd=project, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    (report,) = json.loads(done.stdout)["transcripts"]
    assert [s["line"] for s in report["skipped"]] == [3, 4, 5], report
    assert "not JSON" in report["skipped"][0]["reason"]
    assert "not UTF-8" in report["skipped"][1]["reason"]
    assert report["appended"] > 0
    again = subprocess.run(
        [str(Path(sys.executable).parent / "sessionledger"), "import", host, str(path),
         "--db", server.db_url, "--workspace", str(server.workspace), "--json"],
        cwd=project, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert json.loads(again.stdout)["transcripts"][0]["appended"] == 0, again.stdout
