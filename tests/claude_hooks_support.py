"""Claude Code's hooks driven the two ways Claude Code calls them (SPEC CC-1 … CC-8).

An ``"type": "http"`` hook POSTs the event to ``serve`` (:func:`post_hook`); a ``"type":
"command"`` hook runs ``sessionledger hook claude-code`` with the event on stdin
(:func:`run_hook`). :class:`Hooks` sends an event one way or the other against one real
``serve`` and its SQLite file (the command writes to the file the server reads), so a test
parametrised over :data:`WAYS` proves both faces do the same.

:func:`hook_event` builds an event with the fields Claude Code's hooks reference documents for
every event (``session_id``, ``transcript_path``, ``cwd``, ``permission_mode``,
``hook_event_name``) and the event's own; :func:`transcript_hooks` turns a transcript into the
events Claude Code would have sent while writing it (issue 22, acceptance 4).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import httpx
import pytest
from server_support import ServerProcess, sessionledger_command

from eventlog import EventStore, open_store
from sessionledger import SessionService
from sessionledger.claude_code.observations import ledger_session_id

__all__ = [
    "WAYS",
    "WAY_PARAMS",
    "Answer",
    "Hooks",
    "Way",
    "hook_event",
    "opened",
    "post_hook",
    "run_cli",
    "run_hook",
    "this_repo_env",
    "transcript_hooks",
    "wire_events",
]

REPO = Path(__file__).resolve().parent.parent
HOOK_TIMEOUT_S = 30.0

Way = Literal["http", "command", "direct"]
WAYS: tuple[Way, ...] = ("http", "command", "direct")
WAY_PARAMS = (pytest.param("http"), pytest.param("command", marks=pytest.mark.slow),
              pytest.param("direct", marks=pytest.mark.slow))
"""``WAYS`` for ``parametrize``: ``command`` is the command hook as hosts run it, which finds
the server by the discovery file beside its database and forwards the event; ``direct`` is
the command hook recording the event itself (``--direct``, as with no server). Each is a
process start, so those faces of the parametrised tests run in ``make verify``; the tests
that drive several faces in one session run in ``make test`` (D182)."""


@dataclass(frozen=True)
class Answer:
    """What a hook answered: its JSON output, and for the command its exit code and stderr
    (HTTP: the status code, stderr empty)."""

    output: Any
    code: int
    stderr: str = ""


def hook_event(name: str, session: str, cwd: str | Path, *, mode: str | None = "default",
               **fields: Any) -> dict[str, Any]:
    """A hook event as Claude Code sends it: the common fields, then the event's own."""
    event: dict[str, Any] = {
        "session_id": session,
        "transcript_path": f"/home/dev/.claude/projects/-project/{session}.jsonl",
        "cwd": str(cwd),
        "hook_event_name": name,
    }
    if mode is not None:
        event["permission_mode"] = mode
    event.update(fields)
    return event


def _body(event: dict[str, Any] | bytes | str) -> bytes:
    if isinstance(event, bytes):
        return event
    if isinstance(event, str):
        return event.encode("utf-8", "surrogatepass")
    return json.dumps(event, ensure_ascii=False).encode("utf-8", "surrogatepass")


def post_hook(client: httpx.Client, event: dict[str, Any] | bytes | str,
              host: str = "claude-code") -> Answer:
    """``POST /v1/hooks/HOST`` with the event's bytes, as an HTTP hook sends them."""
    response = client.post(f"/v1/hooks/{host}", content=_body(event),
                           headers={"content-type": "application/json"})
    try:
        output = response.json()
    except ValueError:
        output = response.text
    return Answer(output, response.status_code)


def this_repo_env() -> dict[str, str]:
    """The environment of a ``sessionledger`` child process running this repository's code
    (no ``SESSIONLEDGER_DB`` of the caller's)."""
    environment = {k: v for k, v in os.environ.items() if k != "SESSIONLEDGER_DB"}
    environment["PYTHONPATH"] = os.pathsep.join(
        [str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])])
    return environment


def run_cli(*args: str, db: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``sessionledger ARGS… --db sqlite:///DB`` as a real process running this repository's
    code."""
    return subprocess.run(
        [*sessionledger_command(), *args, "--db", f"sqlite:///{db}"],
        cwd=cwd, env=this_repo_env(), capture_output=True, text=True, timeout=120, check=False,
    )


def run_hook(db_url: str, root: Path, event: dict[str, Any] | bytes | str,
             *options: str, host: str = "claude-code") -> Answer:
    """``sessionledger hook HOST --db URL --workspace ROOT [OPTIONS]`` with the event
    on stdin, as a command hook runs it (in the project directory, this repository's code)."""
    environment = this_repo_env()
    done = subprocess.run(
        [*sessionledger_command(), "hook", host, "--db", db_url,
         "--workspace", str(root), *options],
        input=_body(event), cwd=root, env=environment, capture_output=True,
        timeout=HOOK_TIMEOUT_S, check=False,
    )
    stdout = done.stdout.decode("utf-8")
    lines = stdout.splitlines()
    assert len(lines) == 1, f"the command printed {stdout!r} (stderr {done.stderr!r})"
    return Answer(json.loads(lines[0]), done.returncode, done.stderr.decode("utf-8"))


class Hooks:
    """One real ``serve`` answering hooks, and the command writing to its database."""

    def __init__(self, server: ServerProcess) -> None:
        self.server = server
        self.root = server.workspace
        self._store: EventStore | None = None
        self.http = server.client(timeout=HOOK_TIMEOUT_S)
        """One client for every request (a new one per request costs more than the hook)."""

    @property
    def store(self) -> EventStore:
        """The server's log opened for reading from the test process (no projections: this
        handle never appends)."""
        if self._store is None:
            self._store = open_store(self.server.db_url)
        return self._store

    def close(self) -> None:
        self.http.close()
        if self._store is not None:
            self._store.close()
            self._store = None

    def __enter__(self) -> Hooks:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def send(self, way: Way, event: dict[str, Any] | bytes | str,
             host: str = "claude-code") -> Any:
        """Send ``host``'s event ``way``; the output (the answer must be 200 / exit 0 with no
        complaint on stderr)."""
        answer = self.answer(way, event, host)
        assert answer.code == (200 if way == "http" else 0), answer
        assert answer.stderr == "", answer.stderr
        return answer.output

    def answer(self, way: Way, event: dict[str, Any] | bytes | str,
               host: str = "claude-code") -> Answer:
        if way == "http":
            return post_hook(self.http, event, host)
        return run_hook(self.server.db_url, self.root, event,
                        *(["--direct"] if way == "direct" else []), host=host)

    def head(self) -> int:
        """The log's head position (every session's events)."""
        return self.store.head_position()

    def events(self, claude_session: str, agent: str | None = None) -> list[dict[str, Any]]:
        """The wire envelopes of a Claude Code session's ledger session."""
        return [e.to_wire() for e in self.store.read_session(
            ledger_session_id(claude_session, agent))]

    def document(self, claude_session: str) -> dict[str, Any]:
        response = self.http.get(f"/v1/sessions/{ledger_session_id(claude_session)}")
        assert response.status_code == 200, response.text
        document: dict[str, Any] = response.json()
        return document


@contextmanager
def opened(db: Path) -> Iterator[SessionService]:
    """A service over a SQLite file (a second process's view of it)."""
    service = SessionService.open(f"sqlite:///{db}", workspace_root="/")
    try:
        yield service
    finally:
        service.close()


def wire_events(db: Path, session_id: str) -> list[dict[str, Any]]:
    """A session's events as the wire shows them."""
    with opened(db) as service:
        if service.find_summary(session_id) is None:
            return []
        return [e.to_wire() for e in service.iter_events(session_id)]


# -- a transcript as the hook events Claude Code sent while writing it ----------------------------

_NOT_TYPED = (
    "<local-command-stdout>", "<local-command-stderr>", "<local-command-caveat>",
    "<bash-input>", "<bash-stdout>", "<bash-stderr>", "<task-notification>",
    "[Request interrupted by user",
)
_COMMAND = re.compile(r"<command-name>(.*?)</command-name>(?:.*?<command-args>(.*?)"
                      r"</command-args>)?", re.DOTALL)


def _typed(value: dict[str, Any]) -> str | None:
    """The prompt a user line carries as UserPromptSubmit sends it (a slash command as
    typed), or ``None`` for a line the user did not type."""
    if value.get("isMeta") or value.get("isCompactSummary"):
        return None
    content = value["message"]["content"]
    if isinstance(content, list):
        if any(b.get("type") == "tool_result" for b in content):
            return None
        content = "\n".join(b["text"] for b in content if b.get("type") == "text")
    if not content.strip() or content.strip().startswith(_NOT_TYPED):
        return None
    command = _COMMAND.search(content)
    if command is not None:
        typed, args = command.group(1).strip(), (command.group(2) or "").strip()
        if typed == "/compact":  # carried out by Claude Code itself: no UserPromptSubmit
            return None
        return f"{typed} {args}" if args else typed
    return str(content)


def _shown(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(b["text"] for b in content or [] if b.get("type") == "text")


def transcript_hooks(path: Path, cwd: Path) -> list[dict[str, Any]]:
    """The hook events Claude Code sends while writing the transcript at ``path``, in order:
    each typed user prompt → UserPromptSubmit (with the line's ``permissionMode``); each
    assistant ``tool_use`` → PreToolUse; each ``tool_result`` → PostToolUse with
    ``tool_response`` = the line's ``toolUseResult``, or PostToolUseFailure with ``error`` =
    the result's text when ``is_error`` — none for a call this ledger's hook refused (its
    text begins ``sessionledger:``), as Claude Code sends none; a ``compact_boundary`` →
    PreCompact. Every event carries the mode the last prompt named (Claude Code sends its
    current one), none after an approved ExitPlanMode until a prompt names one again;
    ``cwd`` is ``cwd``."""
    events: list[dict[str, Any]] = []
    uses: dict[str, tuple[str, dict[str, Any]]] = {}
    mode: str | None = None
    for raw in path.read_text(encoding="utf-8").splitlines():
        value = json.loads(raw)
        if value.get("isSidechain") or value.get("type") not in ("user", "assistant", "system"):
            continue
        session = value["sessionId"]

        def event(name: str, /, **fields: Any) -> None:
            events.append(hook_event(name, session, cwd, mode=mode, **fields))  # noqa: B023

        if value["type"] == "system":
            if value.get("subtype") == "compact_boundary":
                event("PreCompact", trigger=value.get("compactMetadata", {}).get("trigger"),
                      custom_instructions="")
            continue
        if value["type"] == "user":
            prompt = _typed(value)
            if prompt is not None:
                mode = value.get("permissionMode", mode)
                event("UserPromptSubmit", prompt=prompt)
                continue
            content = value["message"]["content"]
            for block in content if isinstance(content, list) else []:
                if block.get("type") != "tool_result":
                    continue
                tool, tool_input = uses[block["tool_use_id"]]
                common = {"tool_name": tool, "tool_input": tool_input,
                          "tool_use_id": block["tool_use_id"]}
                if block.get("is_error") and _shown(block.get("content")).startswith(
                        "sessionledger: "):
                    continue  # refused by this ledger's hook: Claude Code reports nothing
                if block.get("is_error"):
                    event("PostToolUseFailure", **common, error=_shown(block.get("content")),
                          is_interrupt=False)
                else:
                    event("PostToolUse", **common, tool_response=value.get("toolUseResult"))
                    if tool == "ExitPlanMode":
                        mode = None  # Plan left: the next prompt names the mode
            continue
        if value["message"].get("model") == "<synthetic>":
            continue
        for block in value["message"]["content"]:
            if block.get("type") == "tool_use" and block["id"] not in uses:
                uses[block["id"]] = (block["name"], block["input"])
                event("PreToolUse", tool_name=block["name"], tool_input=block["input"],
                      tool_use_id=block["id"])
    return events
