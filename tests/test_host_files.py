"""Codex rollouts and Gemini chat recordings of any shape are read without a crash: a line is
an observation or a skipped line with its reason (issue 40; the real files are read in
tests/test_codex_binary.py and tests/test_gemini_binary.py)."""

from __future__ import annotations

import json
import tempfile
from contextlib import closing
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from sessionledger import SessionService
from sessionledger.claude_code.hooks import answer_hook
from sessionledger.claude_code.host_files import read_codex_rollout, read_gemini_chat
from sessionledger.claude_code.observations import ToolResult, ToolUse, ledger_session_id
from sessionledger.claude_code.recorder import Recorder

SCALARS = st.none() | st.booleans() | st.integers() | st.text(max_size=8)
KEYS = st.sampled_from(["type", "payload", "id", "call_id", "name", "arguments", "output",
                        "role", "content", "text", "item", "timestamp", "sessionId",
                        "toolCalls", "args", "result", "status", "input", "cwd", "$set",
                        "namespace"])
VALUES = st.recursive(
    SCALARS | st.sampled_from(["session_meta", "response_item", "event_msg", "function_call",
                               "function_call_output", "custom_tool_call", "message",
                               "assistant", "user", "gemini", "UserMessage", "item_completed",
                               "2026-12-06T10:00:00.000Z", "exec_command"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(KEYS, inner, max_size=5),
    max_leaves=20)
LINES = st.lists(st.dictionaries(KEYS, VALUES, max_size=6) | VALUES, max_size=8)


@settings(max_examples=150, deadline=None)
@given(lines=LINES)
def test_any_lines_are_read_or_skipped(lines: list[Any]) -> None:
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "session.jsonl"
        path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
        for read in (read_codex_rollout, read_gemini_chat):
            transcript = read(path)
            read_lines = {s.where.rpartition(":")[2] for s in transcript.seen}
            skipped = {str(s.line) for s in transcript.skipped}
            assert not read_lines & skipped  # a line is read whole or not at all
            assert transcript.lines == len(lines)


def test_codexs_mcp_calls_are_named_as_its_hooks_name_them(tmp_path: Path) -> None:
    # A rollout names an MCP server's tool by name and namespace; Codex's hooks send
    # mcp__<server>__<tool>. The ledger's own tools are not read: its MCP server recorded each
    # call where it ran (and a call it refused nowhere), so they are not the session's calls.
    def call(call_id: str, name: str, namespace: str, arguments: str) -> dict[str, Any]:
        return {"type": "response_item", "payload": {
            "type": "function_call", "name": name, "namespace": namespace,
            "arguments": arguments, "call_id": call_id}}

    def output(call_id: str) -> dict[str, Any]:
        return {"type": "response_item", "payload": {
            "type": "function_call_output", "call_id": call_id, "output": "done"}}

    lines = [{"type": "session_meta", "payload": {"id": "thread-1", "cwd": str(tmp_path)}},
             call("c1", "ping", "mcp__probe", "{}"), output("c1"),
             call("c2", "ExitPlanMode", "mcp__sessionledger", '{"plan": "p"}'), output("c2"),
             call("c3", "InteractionStatus", "mcp__sessionledger", '{"interactionId": "i"}'),
             output("c3")]
    path = tmp_path / "rollout.jsonl"
    path.write_text("".join(json.dumps({"timestamp": "2026-12-07T10:00:00.000Z", **line}) + "\n"
                            for line in lines), encoding="utf-8")
    seen = [s.observation for s in read_codex_rollout(path).seen]
    assert [(type(o).__name__, o.tool) for o in seen if isinstance(o, ToolUse | ToolResult)] == [
        ("ToolUse", "mcp__probe__ping"), ("ToolResult", "mcp__probe__ping")]


def test_a_codex_prompt_after_a_call_of_the_ledgers_own_tools_is_recorded_once(
    tmp_path: Path,
) -> None:
    # CC-8 on Codex: a prompt is keyed by the calls before it. A call of the ledger's own
    # tools is recorded by the ledger's MCP server (in the hooks' session, D219); the hooks
    # and the rollout reader leave it out, so both count the calls without it and a rollout
    # imported after the hooks recorded the run appends nothing (not the prompt again).
    thread = "thread-keys"
    shell = {"tool_name": "Bash", "tool_input": {"command": "ls"}, "tool_use_id": "c1"}
    own = {"tool_name": "mcp__sessionledger__TodoRead", "tool_input": {}, "tool_use_id": "c2"}

    def hook(name: str, **fields: Any) -> None:
        answer_hook(Recorder(service), {
            "session_id": thread, "turn_id": "t1", "cwd": str(tmp_path),
            "hook_event_name": name, "permission_mode": "bypassPermissions", **fields},
            host="codex")

    def line(kind: str, payload: dict[str, Any]) -> str:
        return json.dumps({"timestamp": "2026-12-07T10:00:00.000Z", "type": kind,
                           "payload": payload}) + "\n"

    def prompt(text: str) -> str:
        return line("event_msg", {"type": "item_completed", "item": {
            "type": "UserMessage", "content": [{"type": "text", "text": text}]}})

    with closing(SessionService.open(f"sqlite:///{tmp_path / 'ledger.db'}",
                                     workspace_root=tmp_path)) as service:
        session = ledger_session_id(thread, None, "codex")
        hook("UserPromptSubmit", prompt="look around")
        hook("PreToolUse", **shell)
        hook("PostToolUse", **shell, tool_response="notes.txt")
        hook("PreToolUse", **own)  # the server records this call: the hooks do not
        assert service.tools.call(session, "TodoRead", {}).document["status"] == "completed"
        hook("PostToolUse", **own, tool_response="[]")
        hook("UserPromptSubmit", prompt="now write it")
        before = service.find_summary(session)
        assert before is not None

        rollout = tmp_path / "rollout.jsonl"
        rollout.write_text("".join([
            line("session_meta", {"id": thread, "cwd": str(tmp_path)}),
            prompt("look around"),
            line("response_item", {"type": "function_call", "name": "exec_command",
                                   "arguments": '{"cmd": "ls"}', "call_id": "c1"}),
            line("response_item", {"type": "function_call_output", "call_id": "c1",
                                   "output": "notes.txt"}),
            line("response_item", {"type": "function_call", "name": "TodoRead",
                                   "namespace": "mcp__sessionledger", "arguments": "{}",
                                   "call_id": "c2"}),
            line("response_item", {"type": "function_call_output", "call_id": "c2",
                                   "output": "[]"}),
            prompt("now write it")]), encoding="utf-8")
        outcome = Recorder(service).record_all(read_codex_rollout(rollout).seen)
        assert sum(outcome.appended.values()) == 0, outcome
        prompts = [e.data.content for e in service.store.read_session(session)
                   if e.type == "MessageRecorded"]
        assert prompts == ["look around", "now write it"]
        assert [e.data.tool for e in service.store.read_session(session)
                if e.type == "ToolCallRequested"] == ["Bash", "TodoRead"]
