"""Codex CLI and Gemini CLI in the tests: headless runs against the scripted model servers
(``tests/openai_model.py``, ``tests/gemini_model.py``) with the configuration
``sessionledger setup codex|gemini`` writes, on a running ``serve``
(``tests/test_codex_binary.py``, ``tests/test_gemini_binary.py``).

Each run gets exactly its environment: ``PATH`` with this environment's ``sessionledger``
first (the command hooks and ``sessionledger mcp``), a throwaway ``HOME`` in the project, the
model server's address and a made-up key. Codex's home (``CODEX_HOME``) and Gemini's
``~/.gemini`` live in that ``HOME``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from server_support import ServerProcess

from sessionledger.environment import WRITER_ENV

__all__ = [
    "CODEX_MODEL", "GEMINI_MODEL", "Run", "codex_config", "gemini_settings", "ledger_session",
    "run_codex", "run_gemini", "sessionledger", "this_path",
]

ROOT = Path(__file__).resolve().parents[1]
RUN_TIMEOUT_S = 180
CODEX_MODEL = "gpt-5.5"
"""A model Codex 0.171 knows (an unknown one gets no ``tool_search``: no MCP tools)."""
GEMINI_MODEL = "gemini-2.5-pro"
"""A model Gemini CLI 0.61 offers ``write_todos`` to."""
API_KEY = "scripted-key-0000000000000000"


def this_path() -> str:
    """``PATH`` with this environment's ``sessionledger`` first."""
    return os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])


def sessionledger(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """This environment's ``sessionledger`` with ``args`` (exit status not checked)."""
    return subprocess.run([str(Path(sys.executable).parent / "sessionledger"), *args],
                          cwd=cwd, capture_output=True, text=True, timeout=120, check=False)


@dataclass(frozen=True)
class Run:
    """One headless run: its exit status and what it printed."""

    returncode: int
    stdout: str
    stderr: str

    def json_lines(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.stdout.splitlines()
                if line.strip().startswith("{")]


def _environment(home: Path, extra: dict[str, str]) -> dict[str, str]:
    home.mkdir(parents=True, exist_ok=True)
    writer = {WRITER_ENV: os.environ[WRITER_ENV]} if WRITER_ENV in os.environ else {}
    return {"PATH": this_path(), "HOME": str(home), "PYTHONPATH": str(ROOT), **writer, **extra}


# -- Codex CLI -------------------------------------------------------------------------------


def codex_config(codex_home: Path, model_url: str) -> None:
    """The model settings of Codex's ``config.toml`` (a provider at the model server), written
    before ``setup codex`` merges the ledger's entries into the same file."""
    codex_home.mkdir(parents=True, exist_ok=True)
    (codex_home / "config.toml").write_text(
        f'model = "{CODEX_MODEL}"\nmodel_provider = "scripted"\n\n'
        f'[model_providers.scripted]\nname = "scripted"\nbase_url = "{model_url}/v1"\n'
        'wire_api = "responses"\nenv_key = "SCRIPTED_API_KEY"\n', encoding="utf-8")


def run_codex(codex: Path, project: Path, *args: str, resume: str | None = None,
              prompt: str = "Go on.") -> Run:
    """``codex exec`` (or ``exec resume THREAD``) in ``project``, home ``project/.home``;
    the sandbox is off (the machine's bubblewrap cannot nest here), so the ledger's answers
    are all that stands between the model and the files."""
    home = project / ".home"
    env = _environment(home, {"CODEX_HOME": str(home / ".codex"),
                              "SCRIPTED_API_KEY": API_KEY})
    command = [str(codex), "exec", *(["resume"] if resume else []), "--skip-git-repo-check",
               "--json", "--dangerously-bypass-approvals-and-sandbox", *args,
               *([resume] if resume else []), prompt]
    done = subprocess.run(command, cwd=project, env=env, capture_output=True, text=True,
                          timeout=RUN_TIMEOUT_S, check=False)
    return Run(done.returncode, done.stdout, done.stderr)


def codex_plan_turn(codex: Path, project: Path, prompt: str,
                    answers: dict[str, list[str]]) -> list[dict[str, Any]]:
    """One turn of Codex in its Plan collaboration mode, driven as its IDE extension drives it
    (``codex app-server``, JSON-RPC over stdio): each ``request_user_input`` question is
    answered with ``answers[id]``, as a person in the extension would. What the server sent."""
    home = project / ".home"
    env = _environment(home, {"CODEX_HOME": str(home / ".codex"), "SCRIPTED_API_KEY": API_KEY})
    sent: list[dict[str, Any]] = []
    with subprocess.Popen([str(codex), "app-server"], cwd=project, text=True, env=env,
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          stderr=subprocess.DEVNULL) as server:
        assert server.stdin is not None and server.stdout is not None
        stdin = server.stdin
        deadline = threading.Timer(RUN_TIMEOUT_S, server.kill)  # a turn that never ends
        deadline.start()

        def send(message: dict[str, Any]) -> None:
            stdin.write(json.dumps(message) + "\n")
            stdin.flush()

        send({"id": 1, "method": "initialize", "params": {
            "clientInfo": {"name": "sessionledger-tests", "version": "0"},
            "capabilities": {"experimentalApi": True}}})
        send({"method": "initialized"})
        send({"id": 2, "method": "thread/start", "params": {
            "cwd": str(project), "approvalPolicy": "never", "sandbox": "danger-full-access"}})
        try:
            for line in server.stdout:
                message = json.loads(line)
                sent.append(message)
                if message.get("id") == 2 and "result" in message:
                    send({"id": 3, "method": "turn/start", "params": {
                        "threadId": message["result"]["thread"]["id"],
                        "input": [{"type": "text", "text": prompt}],
                        "collaborationMode": {"mode": "plan",
                                              "settings": {"model": CODEX_MODEL}}}})
                elif message.get("method") == "item/tool/requestUserInput":
                    send({"id": message["id"], "result": {"answers": {
                        q["id"]: {"answers": answers[q["id"]]}
                        for q in message["params"]["questions"]}}})
                elif message.get("method") == "turn/completed" or "error" in message:
                    break
        finally:
            deadline.cancel()
            stdin.close()
            server.wait(timeout=RUN_TIMEOUT_S)
    assert any(m.get("method") == "turn/completed" for m in sent), sent[-5:]
    return sent


# -- Gemini CLI ------------------------------------------------------------------------------


def gemini_settings(home: Path) -> None:
    """The user's ``~/.gemini/settings.json`` with the key's auth chosen (no prompt)."""
    (home / ".gemini").mkdir(parents=True, exist_ok=True)
    (home / ".gemini" / "settings.json").write_text(json.dumps(
        {"security": {"auth": {"selectedType": "gemini-api-key"}}}), encoding="utf-8")


def run_gemini(gemini: Path, project: Path, model_url: str, *args: str,
               prompt: str = "Go on.") -> Run:
    """``gemini -p PROMPT`` in ``project`` (trusted), home ``project/.home``."""
    home = project / ".home"
    env = _environment(home, {"GEMINI_API_KEY": API_KEY, "GOOGLE_GEMINI_BASE_URL": model_url,
                              "GEMINI_CLI_TRUST_WORKSPACE": "true"})
    done = subprocess.run([str(gemini), "-m", GEMINI_MODEL, *args, "-p", prompt], cwd=project,
                          env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT_S,
                          check=False)
    return Run(done.returncode, done.stdout, done.stderr)


# -- the ledger --------------------------------------------------------------------------------


def approve_in_ledger(http: httpx.Client, session_id: str, plan: str) -> None:
    """A plan put to a person through the ledger's tool route and approved on its respond
    route (the session in Plan meanwhile)."""
    assert http.post(f"/v1/sessions/{session_id}/mode", json={"mode": "plan"}).status_code == 200
    asked = http.post(f"/v1/sessions/{session_id}/tool-calls",
                      json={"tool": "ExitPlanMode", "input": {"plan": plan}})
    assert asked.status_code == 202, asked.text
    given = http.post(f"/v1/sessions/{session_id}/interactions/"
                      f"{asked.json()['interactionId']}/respond", json={"decision": "approve"})
    assert given.status_code == 200, given.text


def ledger_session(server: ServerProcess, external: str) -> tuple[str, list[dict[str, Any]]]:
    """The ledger session recording the host's session ``external``, and its events."""
    with httpx.Client(base_url=server.base_url, timeout=30) as http:
        (found,) = [s["sessionId"] for s in http.get("/v1/sessions").json()["sessions"]
                    if s.get("externalSessionId") == external]
        events = http.get(f"/v1/sessions/{found}/events",
                          params={"limit": 1000}).json()["events"]
    return str(found), list(events)


def outcomes_of(events: list[dict[str, Any]]) -> list[tuple[str, ...]]:
    """What an import and the hooks both know of a session, in order: its calls, their
    outcomes and its todo lists (the hooks alone see permission decisions; the file alone
    the assistant's text)."""
    shape: list[tuple[str, ...]] = []
    for event in events:
        data = event["data"]
        if event["type"] == "ToolCallRequested":
            shape.append(("requested", data["tool"], json.dumps(data["input"], sort_keys=True)))
        elif event["type"] == "ToolCallCompleted":
            shape.append(("completed", data["tool"], data["status"]))
        elif event["type"] == "TodosWritten":
            shape.append(("todos", *(f"{t['status']}:{t['content']}" for t in data["todos"])))
    return shape


def imported(host: str, files: list[Path], db_url: str, workspace: Path,
             cwd: Path) -> list[dict[str, Any]]:
    """``sessionledger import HOST FILES --json`` into ``db_url``: the per-file reports."""
    done = sessionledger("import", host, *map(str, files), "--db", db_url, "--workspace",
                         str(workspace), "--json", cwd=cwd)
    assert done.returncode == 0, done.stdout + done.stderr
    reports: list[dict[str, Any]] = json.loads(done.stdout)["transcripts"]
    return reports


def session_events(db_url: str, session_id: str) -> list[dict[str, Any]]:
    from contextlib import closing

    from eventlog import open_store

    with closing(open_store(db_url)) as store:
        return [e.to_wire() for e in store.read_session(session_id)]


def audited(db_url: str, session_id: str, cwd: Path) -> list[tuple[str, str]]:
    """The audit's findings of a session: (kind, call id)."""
    done = sessionledger("audit", session_id, "--db", db_url, "--json", cwd=cwd)
    assert done.returncode == 0, done.stdout + done.stderr
    (document,) = json.loads(done.stdout)["sessions"]
    return sorted((f["kind"], f.get("callId") or "") for f in document["findings"])


def imports_as_hooked(host: str, file: Path, server: ServerProcess, external: str,
                      hooked: list[dict[str, Any]], cwd: Path, *,
                      expected: tuple[str, ...] = ()) -> None:
    """A host's session file imports as its hooks recorded the session (issue 40, acceptance
    2): into a fresh ledger the same calls, outcomes, todo lists and audit findings (exactly
    the ``expected`` kinds: a refused write never ran), again nothing; into the hooked
    session no call twice."""
    session_id, _events = ledger_session(server, external)
    findings = audited(server.db_url, session_id, cwd)
    assert sorted(kind for kind, _call in findings) == sorted(expected), findings
    fresh = f"sqlite:///{cwd / 'fresh.db'}"
    (report,) = imported(host, [file], fresh, server.workspace, cwd)
    assert report["sessionId"] == session_id and report["skipped"] == [], report
    assert outcomes_of(session_events(fresh, session_id)) == outcomes_of(hooked)
    assert audited(fresh, session_id, cwd) == findings
    (again,) = imported(host, [file], fresh, server.workspace, cwd)
    assert again["appended"] == 0, again
    imported(host, [file], server.db_url, server.workspace, cwd)
    _id, after = ledger_session(server, external)
    assert outcomes_of(after) == outcomes_of(hooked), "the import recorded a call again"
    assert all(e["type"] == "MessageRecorded" for e in after[len(hooked):]), after[len(hooked):]
