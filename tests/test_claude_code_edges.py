"""Claude Code's hooks at the edges: events as large as the files they carry, and the byte
strings nobody planned for (SPEC CC-1, CC-4; EG-1).

A PreToolUse of a ``Write`` carries the whole file. Were such an event refused for its size,
Claude Code would take the refusal as a non-blocking hook error and run the call anyway — in
Plan, a write the ledger should have denied. So the hook route takes bodies up to
``MAX_HOOK_BYTES`` (8 MiB) where every other route takes 1 MiB.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from server_support import ServerProcess, running_server

from sessionledger.claude_code.hooks import HOOK_PATH, MAX_HOOK_BYTES


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with running_server(tmp_path_factory.mktemp("hooks-edges")) as running:
        yield running


def _event(server: ServerProcess, session: str, **fields: Any) -> dict[str, Any]:
    return {"session_id": session, "transcript_path": str(server.workspace / "t.jsonl"),
            "cwd": str(server.workspace), **fields}


def test_a_write_of_a_large_file_in_plan_is_still_denied(server: ServerProcess) -> None:  # CC-4
    content = "x = 1\n" * (3 * 1024 * 1024 // 6)  # 3 MiB: over the 1 MiB of other routes
    event = _event(server, "big-1", hook_event_name="PreToolUse", permission_mode="plan",
                   tool_name="Write", tool_use_id="toolu_big_1",
                   tool_input={"file_path": str(server.workspace / "big.py"),
                               "content": content})
    with server.client(timeout=60.0) as http:
        answer = http.post(HOOK_PATH, content=json.dumps(event),
                           headers={"content-type": "application/json"})
        other = http.post("/v1/sessions", content=json.dumps({"workspace": content}),
                          headers={"content-type": "application/json"})
    assert answer.status_code == 200, answer.text
    decided = answer.json()["hookSpecificOutput"]
    assert decided["permissionDecision"] == "deny"
    assert "Plan" in decided["permissionDecisionReason"]
    assert other.status_code == 413  # the larger limit is the hook route's alone


def test_an_event_over_the_hook_limit_is_refused_whole(server: ServerProcess) -> None:  # CC-1
    with server.client(timeout=60.0) as http:
        before = http.get("/v1/sessions").json()
        answer = http.post(HOOK_PATH, content=b"{" + b" " * MAX_HOOK_BYTES + b"}",
                           headers={"content-type": "application/json"})
        after = http.get("/v1/sessions").json()
    assert answer.status_code == 413
    assert answer.json()["error"]["code"] == "payload_too_large"
    assert after == before


@pytest.mark.parametrize("body", [
    b'{"session_id": "s", "hook_event_name": "UserPromptSubmit", "prompt": "\\ud800", '
    b'"cwd": "CWD"}',
    b'{"session_id": "s", "hook_event_name": "UserPromptSubmit", "prompt": NaN, "cwd": "CWD"}',
    b'\xff\xfe not utf-8',
    b'[' * 5000 + b']' * 5000,
    b'{"session_id": "s", "hook_event_name": "PreToolUse", "cwd": "CWD", "tool_name": "Bash",'
    b' "tool_input": ' + b'{"a": ' * 300 + b'1' + b'}' * 300 + b'}',
], ids=["lone-surrogate", "nan", "not-utf8", "deep-array", "deep-input"])
def test_hostile_bytes_get_no_opinion_and_record_nothing(
    server: ServerProcess, body: bytes
) -> None:  # CC-1, EG-1
    body = body.replace(b"CWD", str(server.workspace).encode())
    with server.client() as http:
        before = http.get("/v1/sessions").json()
        answer = http.post(HOOK_PATH, content=body, headers={"content-type": "application/json"})
        after = http.get("/v1/sessions").json()
    assert answer.status_code == 200, answer.text
    assert answer.json() == {}
    assert after == before


def test_a_lookalike_cwd_outside_the_root_records_nothing(
    server: ServerProcess, tmp_path: Path
) -> None:  # CC-2
    sibling = server.workspace.parent / (server.workspace.name + "-evil")
    sibling.mkdir()
    for cwd in (str(sibling), str(server.workspace / ".." / (server.workspace.name + "-evil")),
                str(tmp_path)):
        event = _event(server, "outside", hook_event_name="UserPromptSubmit", prompt="hi")
        event["cwd"] = cwd
        with server.client() as http:
            before = http.get("/v1/sessions").json()
            answer = http.post(HOOK_PATH, json=event)
            assert answer.status_code == 200
            assert answer.json() == {}
            assert http.get("/v1/sessions").json() == before
