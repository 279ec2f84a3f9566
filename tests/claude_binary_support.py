"""The real Claude Code in the tests: a project under a running ``serve`` with the page's
hooks, headless runs' and the interactive TUI's helpers, and what the ledger recorded
(``tests/test_claude_code_binary.py``, ``tests/browser/test_web_claude_code.py``)."""

from __future__ import annotations

import json
import os
import re
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
from anthropic_model import ScriptedModel, ToolUse
from host_support import (
    ClaudeCode,
    Terminal,
    host_environment,
    install,
    interactive_home,
    settings_file,
    skip_or_fail,
    unavailable,
    with_model,
)
from server_support import ServerProcess

ROOT = Path(__file__).resolve().parents[1]


def installed_claude() -> ClaudeCode:
    """The pinned Claude Code, installed (skipped where it cannot be, failed under CI)."""
    reason = unavailable()
    if reason is not None:
        skip_or_fail(reason)
    return install()


def created(subject: str) -> ToolUse:
    """The model creating a task in Claude Code's task list."""
    return ToolUse("TaskCreate", {"subject": subject, "description": subject,
                                  "activeForm": f"Working on: {subject}"})


def project_in(server: ServerProcess) -> Path:
    """A new project inside the server's workspace root (a ``cwd`` outside it is not
    recorded)."""
    project = server.workspace / f"project-{uuid.uuid4().hex[:8]}"
    project.mkdir()
    return project


def hooked(project: Path, server: ServerProcess, settings: str) -> None:
    """The page's hooks (``settings``: ``http`` or ``command``) in ``project``'s
    ``.claude/settings.json``, on ``server``."""
    (project / ".claude").mkdir(parents=True, exist_ok=True)
    (project / ".claude" / "settings.json").write_text(
        settings_file(settings, server.base_url, server.db_url), encoding="utf-8")


def this_path() -> str:
    """``PATH`` with this environment's ``sessionledger`` first (the command hooks')."""
    return os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])


def claude_session_of(lines: list[Any]) -> str:
    session: str = next(line["session_id"] for line in lines if line.get("type") == "result")
    return session


def ledger_events(server: ServerProcess, claude_session: str) -> tuple[str, list[Any]]:
    with httpx.Client(base_url=server.base_url, timeout=30) as http:
        (ledger_session,) = [s["sessionId"] for s in http.get("/v1/sessions").json()["sessions"]
                             if s.get("externalSessionId") == claude_session]
        events = http.get(f"/v1/sessions/{ledger_session}/events",
                          params={"limit": 1000}).json()["events"]
    return ledger_session, events


PLAN_FILE = re.compile(r"(/[^\s\"\\]+/plans/[\w.-]+\.md)")


PLAN_TEXT = "# Port the parser\n\n1. Read the grammar\n2. Port it\n"


DIALOG_PLAN = "Would you like to proceed?"


DIALOG_QUESTION = "Enter to select"


QUESTION = {"questions": [{"question": "Which parser?", "header": "Parser", "multiSelect": False,
                           "options": [{"label": "PEG", "description": "a PEG parser"},
                                       {"label": "LALR", "description": "an LALR parser"}]}]}


def plan_written(body: Any) -> dict[str, Any]:
    """The model writing its plan to the file Claude Code named in its request."""
    found = PLAN_FILE.search(json.dumps(body))
    assert found is not None, "Claude Code named no plan file"
    return {"file_path": found.group(1), "content": PLAN_TEXT}


@contextmanager
def interactive(claude: ClaudeCode, server: ServerProcess, project: Path,
                script: list[list[Any]], *args: str) -> Iterator[tuple[Terminal, ScriptedModel]]:
    """Claude Code's TUI in a tmux pane, in ``project`` with the page's HTTP hooks on
    ``server``, against a model server playing ``script``; ready for a prompt."""
    hooked(project, server, "http")
    home = project / ".home"
    interactive_home(home, project)
    with ScriptedModel(script) as model:
        env = host_environment(home, model.url, path=this_path(),
                               extra={"PYTHONPATH": str(ROOT), "TERM": "xterm-256color"})
        if "--permission-mode" not in args:  # Claude Code 2.1.337 starts in auto otherwise
            args = ("--permission-mode", "default", *args)
        with Terminal([str(claude.claude), *with_model(args)], cwd=project,
                      env=env) as terminal:
            terminal.wait_for("for shortcuts" if "plan" not in args else "plan mode on")
            yield terminal, model


def answered(model: ScriptedModel, prompt: str) -> dict[str, Any] | None:
    """The first main-loop request that holds ``prompt``, if one came."""
    return next((r.body for r in model.main_requests() if prompt in json.dumps(r.body)), None)


def claude_session_in(project: Path) -> str:
    """The Claude session of the one transcript Claude Code wrote under ``project``'s
    throwaway home."""
    (transcript,) = (project / ".home" / ".claude" / "projects").rglob("*.jsonl")
    return transcript.stem


def ledger_session_of(server: ServerProcess, project: Path) -> str:
    """The ledger session Claude Code's first hook (its SessionStart command, which may still
    be starting when the TUI is ready) creates for ``project``."""
    with httpx.Client(base_url=server.base_url, timeout=30) as http:
        for _ in range(300):
            found = [s["sessionId"] for s in http.get("/v1/sessions").json()["sessions"]
                     if s["workspace"] == str(project)]
            if found:
                assert len(found) == 1, found
                return str(found[0])
            time.sleep(0.2)
    raise AssertionError(f"no ledger session for {project}")


def waiting_interaction(server: ServerProcess, session_id: str, kind: str) -> dict[str, Any]:
    """The session's pending interaction of ``kind`` once there is one (the hook holds)."""
    with httpx.Client(base_url=server.base_url, timeout=30) as http:
        for _ in range(300):
            pending = [i for i in http.get(f"/v1/sessions/{session_id}").json()["interactions"]
                       if i["kind"] == kind]
            if pending:
                return dict(pending[0])
            time.sleep(0.2)
    raise AssertionError(f"no {kind} waits in {session_id}")


def respond(server: ServerProcess, session_id: str, interaction: dict[str, Any],
            **answer: Any) -> None:
    with httpx.Client(base_url=server.base_url, timeout=30) as http:
        response = http.post(f"/v1/sessions/{session_id}/interactions/"
                             f"{interaction['interactionId']}/respond", json=answer)
    assert response.status_code == 200, response.text


def execution_state(server: ServerProcess, session_id: str) -> dict[str, Any]:
    """The ledger session's execution state as its document gives it now."""
    with httpx.Client(base_url=server.base_url, timeout=30) as http:
        state: dict[str, Any] = http.get(f"/v1/sessions/{session_id}").json()["executionState"]
    return state
