"""Importing Claude Code transcripts (SPEC §13, CC-9): the reader, then the command.

The real transcripts are read in place (tests/claude_data.py); the cases they lack (a rejected
plan, a plan answered with feedback, ``permissionMode: "plan"``, a declined question, malformed
lines) are small transcripts this file writes into ``tmp_path`` in Claude Code's own shape.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from claude_data import transcripts_dir
from claude_hooks_support import opened, run_cli, wire_events

from eventlog import format_instant, parse_instant
from sessionledger.claude_code.observations import (
    AssistantText,
    Compacted,
    Prompt,
    Seen,
    ToolResult,
    ToolUse,
    ledger_session_id,
)
from sessionledger.claude_code.transcripts import (
    NotATranscript,
    Transcript,
    find_transcripts,
    read_transcript,
)

MAIN = "8463c716-a2ea-4c14-9efa-87158ebd9f20"
ASKING = "491e126e-1e71-469c-ade2-fcc8af567c74"
TODOS = "c7d3d95c-57f0-4359-8f4b-926a9bef5a3f"
EXPLORE = "a7be2f0"
INSTANT = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
REJECTED = ("The user doesn't want to proceed with this tool use. The tool use was rejected "
            "(eg. if it was a file edit, the new_string was NOT written to the file). STOP what "
            "you are doing and wait for the user to tell you how to proceed.")


def real(session: str, agent: str | None = None) -> Path:
    """A real transcript's path."""
    name = f"{session}.jsonl" if agent is None else f"{session}/subagents/agent-{agent}.jsonl"
    found = sorted(transcripts_dir().glob(f"*/{name}"))
    assert len(found) == 1, f"{name}: {found}"
    return found[0]


def of(transcript: Transcript, kind: type[Any]) -> list[Any]:
    return [s.observation for s in transcript.seen if isinstance(s.observation, kind)]


def seen_of(transcript: Transcript, kind: type[Any]) -> list[Seen]:
    return [s for s in transcript.seen if isinstance(s.observation, kind)]


def line_number(seen: Seen) -> int:
    return int(seen.where.rpartition(":")[2])


def tool_counts(transcript: Transcript) -> Counter[str]:
    return Counter(use.tool for use in of(transcript, ToolUse))


# -- transcripts written by the tests, in Claude Code's shape ------------------------------------

SESSION = "5e55a0e1-0000-4000-8000-000000000001"


class Writer:
    """Builds a transcript line by line the way Claude Code writes one."""

    def __init__(self, cwd: str = "/home/dev/project") -> None:
        self.cwd = cwd
        self.lines: list[str] = []
        self.second = 0

    def _envelope(self, kind: str, **extra: Any) -> dict[str, Any]:
        self.second += 1
        return {"parentUuid": None, "isSidechain": False, "userType": "external",
                "cwd": self.cwd, "sessionId": SESSION, "version": "2.1.39",
                "gitBranch": "main", "type": kind, "uuid": f"uuid-{len(self.lines) + 1}",
                "timestamp": f"2026-02-11T21:41:{self.second:02d}.5Z", **extra}

    def raw(self, text: str) -> None:
        self.lines.append(text)

    def prompt(self, text: str, **extra: Any) -> None:
        self.lines.append(json.dumps(self._envelope(
            "user", message={"role": "user", "content": text}, **extra)))

    def assistant(self, *blocks: dict[str, Any], message_id: str = "msg_1") -> None:
        self.lines.append(json.dumps(self._envelope("assistant", message={
            "model": "claude-opus-4-6", "id": message_id, "type": "message",
            "role": "assistant", "content": list(blocks)})))

    def use(self, use_id: str, tool: str, tool_input: dict[str, Any]) -> None:
        self.assistant({"type": "tool_use", "id": use_id, "name": tool, "input": tool_input},
                       message_id=f"msg_{use_id}")

    def result(self, use_id: str, content: Any, response: Any = None,
               error: bool = False) -> None:
        block: dict[str, Any] = {"type": "tool_result", "content": content,
                                 "tool_use_id": use_id}
        if error:
            block["is_error"] = True
        extra = {} if response is None else {"toolUseResult": response}
        self.lines.append(json.dumps(self._envelope(
            "user", message={"role": "user", "content": [block]}, **extra)))

    def write(self, path: Path) -> Path:
        path.write_text("".join(line + "\n" for line in self.lines), encoding="utf-8")
        return path


PLAN = "# Plan\n\n1. Read the code.\n2. Change it.\n"


@pytest.fixture
def writer() -> Iterator[Writer]:
    yield Writer()


# -- finding transcripts ------------------------------------------------------------------------

def test_finds_every_transcript_with_parents_before_their_subagents() -> None:  # CC-9
    files = find_transcripts([transcripts_dir()])
    names = [f.path.name for f in files]
    assert sorted(names) == sorted([f"{MAIN}.jsonl", "agent-a7be2f0.jsonl",
                                    "agent-acompact-f46190.jsonl", f"{ASKING}.jsonl",
                                    f"{TODOS}.jsonl"])
    assert names.index(f"{MAIN}.jsonl") < names.index("agent-a7be2f0.jsonl")
    assert names.index(f"{MAIN}.jsonl") < names.index("agent-acompact-f46190.jsonl")
    subagents = {f.agent_id: f.parent_session_id for f in files if f.agent_id}
    assert subagents == {EXPLORE: MAIN, "acompact-f46190": MAIN}
    assert all(f.parent_session_id is None for f in files if f.agent_id is None)
    # A file named twice, or inside a directory also named, is one transcript.
    again = find_transcripts([real(MAIN), transcripts_dir(), real(MAIN)])
    assert [f.path.name for f in again] == names


def test_a_path_that_is_no_transcript_is_refused(tmp_path: Path) -> None:  # CC-9
    with pytest.raises(FileNotFoundError, match="no such file"):
        find_transcripts([tmp_path / "absent.jsonl"])
    (tmp_path / "notes.txt").write_text("hello\n", encoding="utf-8")
    with pytest.raises(NotATranscript, match=r"not a \.jsonl"):
        find_transcripts([tmp_path / "notes.txt"])
    assert find_transcripts([tmp_path]) == []


# -- the real transcripts ---------------------------------------------------------------------

def test_todo_lists_with_the_dropped_unfinished_item() -> None:  # CC-9
    transcript = read_transcript(real(TODOS))
    assert transcript.skipped == []
    assert tool_counts(transcript) == {"TodoWrite": 10, "Bash": 16, "Write": 7, "Read": 3,
                                       "Task": 1, "Edit": 1, "Glob": 1}
    writes = [s for s in seen_of(transcript, ToolUse) if s.observation.tool == "TodoWrite"]
    assert [line_number(s) for s in writes] == [6, 19, 23, 27, 32, 36, 40, 54, 60, 81]
    results = [r for r in of(transcript, ToolResult) if r.tool == "TodoWrite"]
    assert [r.tool_use_id for r in results] == [w.observation.tool_use_id for w in writes]
    assert all(set(r.response) >= {"oldTodos", "newTodos"} for r in results)
    assert all("activeForm" in item and "priority" not in item
               for r in results for item in r.response["newTodos"])
    seventh = results[6]
    dropped = "Write comprehensive tests for all modules"
    old = {item["content"]: item["status"] for item in seventh.response["oldTodos"]}
    new = {item["content"] for item in seventh.response["newTodos"]}
    assert old[dropped] == "pending" and dropped not in new
    assert (len(old), len(new)) == (10, 9)
    assert seventh.input == writes[6].observation.input
    assert [p.text[:29] for p in of(transcript, Prompt)] == ["Port this Python project to R"]
    assert all(s.origin.permission_mode is None for s in transcript.seen)


def test_questions_answers_and_a_plan_approved() -> None:  # CC-9
    transcript = read_transcript(real(ASKING))
    assert transcript.skipped == []
    assert tool_counts(transcript) == {"WebFetch": 1, "WebSearch": 5, "Glob": 1, "Read": 1,
                                       "AskUserQuestion": 1, "Task": 1, "Write": 1,
                                       "ExitPlanMode": 1, "Bash": 4}
    [ask] = [s for s in seen_of(transcript, ToolUse) if s.observation.tool == "AskUserQuestion"]
    assert line_number(ask) == 33 and len(ask.observation.input["questions"]) == 2
    [answered] = [s for s in seen_of(transcript, ToolResult)
                  if s.observation.tool == "AskUserQuestion"]
    assert line_number(answered) == 34 and not answered.observation.error
    assert answered.observation.input == ask.observation.input
    assert sorted(answered.observation.response["answers"].values()) == [
        "Credo + Dialyxir + mix_audit", "No rig"]
    assert "User has answered your questions" in answered.observation.content
    [plan] = [s for s in seen_of(transcript, ToolResult) if s.observation.tool == "ExitPlanMode"]
    assert line_number(plan) == 68 and plan.observation.input == {}
    assert not plan.observation.error
    assert plan.observation.content == "User has approved exiting plan mode. You can now proceed."
    # The skill's expansion (isMeta, line 5) and the interruption (line 69) are not prompts;
    # the slash command is recorded as typed.
    prompts = seen_of(transcript, Prompt)
    assert [line_number(s) for s in prompts] == [4, 71]
    assert prompts[0].observation.text.startswith("/handgemacht:create-beads websearch to learn")
    assert "<command" not in prompts[0].observation.text
    assert prompts[1].observation == Prompt(text="create the beads", calls_before=12)
    assert prompts[1].origin.permission_mode == "default"
    assert [s.origin.permission_mode for s in transcript.seen if s.origin.permission_mode] == [
        "default"]


def test_a_long_session_with_plan_mode_compaction_and_a_subagent() -> None:  # CC-9
    transcript = read_transcript(real(MAIN))
    assert transcript.skipped == [] and transcript.lines == 1593
    assert tool_counts(transcript) == {"Bash": 74, "Read": 40, "Grep": 20, "Edit": 22,
                                       "Glob": 9, "Write": 5, "TaskOutput": 3, "Skill": 1,
                                       "Task": 1, "EnterPlanMode": 1, "ExitPlanMode": 1}
    uses = seen_of(transcript, ToolUse)
    results = of(transcript, ToolResult)
    assert len({u.observation.tool_use_id for u in uses}) == 177
    assert sorted(r.tool_use_id for r in results) == sorted(
        u.observation.tool_use_id for u in uses)
    by_line = {line_number(u): u.observation for u in uses}
    assert by_line[115].tool == "EnterPlanMode" and by_line[132].tool == "ExitPlanMode"
    assert len(by_line[132].input["plan"]) == 3385
    assert len(by_line[132].input["allowedPrompts"]) == 2
    assert by_line[947].tool == "Task"
    [approved] = [s for s in seen_of(transcript, ToolResult)
                  if s.observation.tool == "ExitPlanMode"]
    assert line_number(approved) == 134 and not approved.observation.error
    assert approved.observation.content.startswith("User has approved your plan.")
    assert approved.observation.response["plan"] == by_line[132].input["plan"]
    # One compaction (auto); the summary after it is not a user prompt.
    [compacted] = seen_of(transcript, Compacted)
    assert line_number(compacted) == 714
    assert compacted.observation == Compacted(
        trigger="auto", calls_before=sum(1 for u in uses if line_number(u) < 714))
    prompts = seen_of(transcript, Prompt)
    assert [line_number(p) for p in prompts] == [6]
    assert prompts[0].origin.permission_mode == "bypassPermissions"
    assert prompts[0].observation.calls_before == 0
    # Split messages: every line's blocks once; every text's id unique.
    texts = of(transcript, AssistantText)
    assert len(texts) == 78 and len({t.message_id for t in texts}) == 78
    assert all(s.origin.session_id == MAIN and s.origin.agent_id is None
               for s in transcript.seen)
    assert transcript.session_id == MAIN
    assert transcript.cwd == "/home/USER/projects/spotter-worktrees/spotter-fum"


def test_a_subagent_transcript_belongs_to_its_parent() -> None:  # CC-9
    [file] = [f for f in find_transcripts([real(MAIN).parent]) if f.agent_id == EXPLORE]
    transcript = read_transcript(file)
    assert transcript.skipped == []
    assert tool_counts(transcript) == {"Read": 7, "Glob": 1, "Bash": 11}
    assert len(of(transcript, ToolResult)) == 19
    assert {(s.origin.session_id, s.origin.agent_id) for s in transcript.seen} == {
        (MAIN, EXPLORE)}
    assert (transcript.parent_session_id, transcript.agent_id) == (MAIN, EXPLORE)
    [prompt] = of(transcript, Prompt)
    assert prompt.text.startswith("I need to understand:")
    summariser = read_transcript(real(MAIN, "acompact-f46190"))
    assert [type(s.observation) for s in summariser.seen] == [Prompt, AssistantText]
    assert {s.origin.agent_id for s in summariser.seen} == {"acompact-f46190"}


def test_every_observation_keeps_the_transcripts_own_time() -> None:  # CC-9
    for file in find_transcripts([transcripts_dir()]):
        transcript = read_transcript(file)
        raw = file.path.read_text(encoding="utf-8").splitlines()
        assert transcript.seen
        for seen in transcript.seen:
            assert seen.where.startswith(f"{file.path}:")
            stamp = json.loads(raw[line_number(seen) - 1])["timestamp"]
            assert seen.origin.occurred_at == format_instant(parse_instant(stamp))
            assert INSTANT.match(seen.origin.occurred_at or "")


# -- cases the real transcripts lack ----------------------------------------------------------

def test_a_rejected_plan_and_a_plan_answered_with_feedback(
        tmp_path: Path, writer: Writer) -> None:  # CC-9
    writer.prompt("plan the change", permissionMode="plan")
    writer.use("toolu_1", "ExitPlanMode", {"plan": PLAN})
    writer.result("toolu_1", REJECTED, response=f"Error: {REJECTED}", error=True)
    writer.use("toolu_2", "ExitPlanMode", {"plan": PLAN})
    feedback = ("The user doesn't want to proceed with this tool use. The tool use was "
                "rejected (eg. if it was a file edit, the new_string was NOT written to the "
                "file). To tell you how to proceed, the user said:\nalso cover the CLI")
    writer.result("toolu_2", [{"type": "text", "text": feedback}], response=f"Error: {feedback}",
                  error=True)
    transcript = read_transcript(writer.write(tmp_path / f"{SESSION}.jsonl"))
    assert transcript.skipped == []
    assert [type(s.observation) for s in transcript.seen] == [
        Prompt, ToolUse, ToolResult, ToolUse, ToolResult]
    first, second = of(transcript, ToolResult)
    assert first == ToolResult(tool="ExitPlanMode", input={"plan": PLAN},
                               response=f"Error: {REJECTED}", content=REJECTED, error=True,
                               tool_use_id="toolu_1")
    assert second.error and second.content == feedback and second.tool_use_id == "toolu_2"
    assert second.content.endswith("the user said:\nalso cover the CLI")
    modes = [s.origin.permission_mode for s in transcript.seen]
    assert modes == ["plan", None, None, None, None]
    assert of(transcript, Prompt) == [Prompt(text="plan the change", calls_before=0)]


@pytest.mark.parametrize("frame", ["", "PreToolUse:Write hook error: ",
                                   "PreToolUse:Write hook error: [sessionledger hook]: "])
def test_a_call_this_ledger_refused_is_read_as_its_refusal(
        tmp_path: Path, writer: Writer, frame: str) -> None:  # CC-9
    # Claude Code 2.1.337 frames a hook's refusal ("PreToolUse:Write hook error: …"); the
    # result is this ledger's reason, as the hook recorded it, so an import matches the hooks
    reason = "sessionledger: Plan mode is active: writes are refused (mode.plan.denyWrites)"
    writer.prompt("write it", permissionMode="plan")
    writer.use("toolu_w", "Write", {"file_path": "/home/dev/project/a.txt", "content": "x"})
    writer.result("toolu_w", frame + reason, response=f"Error: {frame}{reason}", error=True)
    writer.use("toolu_o", "Write", {"file_path": "/home/dev/project/b.txt", "content": "x"})
    other = "PreToolUse:Write hook error: another hook's reason"  # not this ledger's: as shown
    writer.result("toolu_o", other, response=f"Error: {other}", error=True)
    transcript = read_transcript(writer.write(tmp_path / f"{SESSION}.jsonl"))
    refused, shown = of(transcript, ToolResult)
    assert (refused.content, refused.error) == (reason, True)
    assert (shown.content, shown.error) == (other, True)


def test_a_declined_question(tmp_path: Path, writer: Writer) -> None:  # CC-9
    question = {"questions": [{"question": "Which database?", "header": "Database",
                               "options": [{"label": "SQLite", "description": "a file"},
                                           {"label": "PostgreSQL", "description": "a server"}],
                               "multiSelect": False}]}
    writer.prompt("set up storage")
    writer.use("toolu_q", "AskUserQuestion", question)
    writer.result("toolu_q", REJECTED, response="User rejected tool use", error=True)
    writer.prompt("[Request interrupted by user for tool use]")
    transcript = read_transcript(writer.write(tmp_path / f"{SESSION}.jsonl"))
    [declined] = of(transcript, ToolResult)
    assert declined == ToolResult(tool="AskUserQuestion", input=question,
                                  response="User rejected tool use", content=REJECTED,
                                  error=True, tool_use_id="toolu_q")
    assert of(transcript, Prompt) == [Prompt(text="set up storage", calls_before=0)]


def test_lines_claude_code_wrote_are_not_prompts(tmp_path: Path, writer: Writer) -> None:  # CC-9
    writer.prompt("<local-command-caveat>Caveat: The messages below were generated by the "
                  "user while running local commands.</local-command-caveat>", isMeta=True)
    writer.prompt("<command-name>/model</command-name>\n<command-message>model</command-message>"
                  "\n<command-args></command-args>")
    writer.prompt("<local-command-stdout>Set model to opus</local-command-stdout>")
    # /compact: Claude Code 2.1 compacts itself and sends no UserPromptSubmit (issue 39)
    writer.prompt("<command-name>/compact</command-name>\n<command-message>compact"
                  "</command-message>\n<command-args></command-args>")
    writer.prompt("This session is being continued from a previous conversation…",
                  isCompactSummary=True, isVisibleInTranscriptOnly=True)
    writer.prompt("<task-notification>\n<task-id>b1</task-id>\n</task-notification>")
    writer.prompt("a real question")
    writer.raw(json.dumps({"type": "summary", "summary": "A title", "leafUuid": "u"}))
    writer.raw(json.dumps({"type": "file-history-snapshot", "messageId": "m", "snapshot": {}}))
    transcript = read_transcript(writer.write(tmp_path / f"{SESSION}.jsonl"))
    assert transcript.skipped == []
    assert [p.text for p in of(transcript, Prompt)] == ["/model", "a real question"]


def test_a_message_split_over_lines_is_read_once(tmp_path: Path, writer: Writer) -> None:  # CC-9
    text = {"type": "text", "text": "Looking."}
    use = {"type": "tool_use", "id": "toolu_r", "name": "Read", "input": {"file_path": "a"}}
    writer.assistant(text, message_id="msg_s")
    writer.assistant({"type": "thinking", "thinking": "hm", "signature": "x"},
                     message_id="msg_s")
    writer.assistant(text, use, message_id="msg_s")  # a line repeating the text before it
    writer.assistant(use, message_id="msg_s")
    writer.result("toolu_r", "1\tcontent", response={"type": "text"})
    transcript = read_transcript(writer.write(tmp_path / f"{SESSION}.jsonl"))
    assert [type(s.observation) for s in transcript.seen] == [AssistantText, ToolUse, ToolResult]
    assert of(transcript, AssistantText) == [AssistantText(text="Looking.", message_id="uuid-1:0")]
    assert [line_number(s) for s in transcript.seen] == [1, 3, 5]


@pytest.mark.parametrize(("bad", "reason"), [
    ("{not json", "not JSON"),
    ("[1, 2]", "not a JSON object (a JSON array)"),
    ('{"sessionId": "s"}', 'no "type"'),
    ('{"type": "user", "sessionId": "s", "timestamp": "2026-02-11T21:41:00Z"}',
     'no "message" object'),
    ('{"type": "user", "timestamp": "2026-02-11T21:41:00Z", "message": {"content": "hi"}}',
     'no "sessionId"'),
    ('{"type": "user", "sessionId": "s", "timestamp": "yesterday", "message": {"content": "hi"}}',
     "is not an ISO 8601 instant"),
    ('{"type": "assistant", "sessionId": "s", "timestamp": "2026-02-11T21:41:00Z", "uuid": "u",'
     ' "message": {"id": "m", "content": [{"type": "tool_use", "id": "toolu_a", "name": "Read",'
     ' "input": {}}, {"type": "tool_use", "id": "toolu_b", "name": "Bash"}]}}',
     "tool_use block 1 has no input object"),
    ('{"type": "user", "sessionId": "s", "timestamp": "2026-02-11T21:41:00Z", "message": '
     '{"content": [{"type": "tool_result", "tool_use_id": "toolu_zz", "content": "x"}]}}',
     "tool_result toolu_zz answers no tool_use before it"),
    ('{"type": "assistant", "isSidechain": true, "sessionId": "s", "uuid": "u", "timestamp": '
     '"2026-02-11T21:41:00Z", "message": {"id": "m", "content": [{"type": "text", "text": "x"}]}}',
     'a sidechain line without "agentId"'),
])
def test_a_malformed_line_is_reported_and_yields_nothing(
        tmp_path: Path, writer: Writer, bad: str, reason: str) -> None:  # CC-9
    writer.prompt("before")
    writer.raw(bad)
    writer.use("toolu_after", "Read", {"file_path": "a"})
    path = writer.write(tmp_path / f"{SESSION}.jsonl")
    transcript = read_transcript(path)
    [skipped] = transcript.skipped
    assert (skipped.line, skipped.where) == (2, f"{path}:2")
    assert reason in skipped.reason
    assert all(line_number(s) != 2 for s in transcript.seen)
    assert [type(s.observation) for s in transcript.seen] == [Prompt, ToolUse]
    # Nothing of the bad line is remembered: the next call is still the first one.
    assert of(transcript, ToolUse)[0].tool_use_id == "toolu_after"


def test_undecodable_and_blank_lines(tmp_path: Path, writer: Writer) -> None:  # CC-9
    writer.prompt("first")
    path = writer.write(tmp_path / f"{SESSION}.jsonl")
    with path.open("ab") as stream:
        stream.write(b"\n   \n\xff\xfe{}\n")
    transcript = read_transcript(path)
    assert [(s.line, s.reason.split(" ")[0]) for s in transcript.skipped] == [(4, "not")]
    assert "UTF-8" in transcript.skipped[0].reason
    assert transcript.lines == 4 and len(transcript.seen) == 1


# -- the command: sessionledger import claude-code ------------------------------------------------

def run_import(*args: str, db: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``sessionledger import claude-code ARGS… --db sqlite:///DB`` as a real process."""
    return run_cli("import", "claude-code", *args, db=db, cwd=cwd)


def imported(result: subprocess.CompletedProcess[str]) -> list[dict[str, Any]]:
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert list(document) == ["transcripts"]
    entries: list[dict[str, Any]] = document["transcripts"]
    return entries


def test_importing_the_real_transcripts_records_what_they_hold(tmp_path: Path) -> None:  # CC-9
    db = tmp_path / "ledger.db"
    result = run_import(str(transcripts_dir()), "--workspace", "/", db=db, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    files = find_transcripts([transcripts_dir()])
    assert len(lines) == len(files) == 5
    with opened(db) as service:
        summaries = {s.session_id: s for s in service.summaries()}
    for line, file in zip(lines, files, strict=True):
        transcript = read_transcript(file)
        origin = transcript.seen[0].origin
        session = ledger_session_id(origin.session_id, origin.agent_id)
        events = wire_events(db, session)
        external = origin.session_id if file.agent_id is None else f"{MAIN}/{file.agent_id}"
        assert re.fullmatch(
            rf"{re.escape(str(file.path))}: session {session} \(claude {re.escape(external)}"
            rf"(, child of {ledger_session_id(MAIN)})?\), {len(events)} events appended, "
            r"0 lines skipped", line), line
        created = events[0]["data"]
        assert events[0]["type"] == "SessionCreated"
        assert (created["client"], created["externalSessionId"]) == ("claude-code", external)
        assert created["parentSessionId"] == (
            None if file.agent_id is None else ledger_session_id(MAIN))
        assert summaries[session].external_session_id == external
        # Every event keeps the transcript's time; per kind, what the transcript holds.
        assert all(INSTANT.match(e["data"]["occurredAt"]) for e in events)
        messages = Counter(e["data"]["role"] for e in events if e["type"] == "MessageRecorded")
        assert messages == Counter(user=len(of(transcript, Prompt)),
                                   assistant=len(of(transcript, AssistantText)))
        requested = Counter(e["data"]["tool"] for e in events
                            if e["type"] == "ToolCallRequested")
        assert requested == tool_counts(transcript)
        completed = [e for e in events if e["type"] == "ToolCallCompleted"]
        assert len(completed) == len(of(transcript, ToolResult))
        kinds = Counter(e["type"] for e in events)
        assert kinds["ContextCompacted"] == len(of(transcript, Compacted))
        assert kinds["TodosWritten"] == (10 if origin.session_id == TODOS else 0)
        approved = 1 if origin.session_id in (MAIN, ASKING) and file.agent_id is None else 0
        assert kinds["PlanApproved"] == approved
    todos = [e["data"] for e in wire_events(db, ledger_session_id(TODOS))
             if e["type"] == "TodosWritten"]
    assert [d["droppedUnfinished"] for d in todos if d.get("droppedUnfinished")] == [
        [{"content": "Write comprehensive tests for all modules", "priority": "medium",
          "status": "pending"}]]
    assert todos.index(next(d for d in todos if d.get("droppedUnfinished"))) == 6
    [compacted] = [e for e in wire_events(db, ledger_session_id(MAIN))
                   if e["type"] == "ContextCompacted"]
    assert compacted["data"]["occurredAt"] == "2026-02-11T22:31:35.739Z"

    # Importing again appends nothing.
    again = imported(run_import(str(transcripts_dir()), "--workspace", "/", "--json", db=db,
                                cwd=tmp_path))
    assert [e["appended"] for e in again] == [0] * 5
    with opened(db) as service:
        assert {s.session_id: s.version for s in service.summaries()} == {
            k: s.version for k, s in summaries.items()}


def test_a_grown_transcript_appends_only_what_is_new(tmp_path: Path) -> None:  # CC-9
    source = real(MAIN).read_bytes().splitlines(keepends=True)
    grown = tmp_path / "project" / f"{MAIN}.jsonl"
    grown.parent.mkdir()
    grown.write_bytes(b"".join(source[: len(source) // 2]))
    db = tmp_path / "ledger.db"
    [first] = imported(run_import(str(grown), "--workspace", "/", "--json", db=db, cwd=tmp_path))
    grown.write_bytes(b"".join(source))
    [second] = imported(run_import(str(grown), "--workspace", "/", "--json", db=db,
                                   cwd=tmp_path))
    fresh_db = tmp_path / "fresh.db"
    [fresh] = imported(run_import(str(grown), "--workspace", "/", "--json", db=fresh_db,
                                  cwd=tmp_path))
    assert 0 < first["appended"] < fresh["appended"]
    assert second["appended"] == fresh["appended"] - first["appended"]
    session = ledger_session_id(MAIN)
    assert first["sessionId"] == second["sessionId"] == session

    def shape(db: Path) -> list[tuple[str, Any]]:
        return [(e["type"], e["data"].get("callId") or e["data"].get("content"))
                for e in wire_events(db, session)]

    assert shape(db) == shape(fresh_db)


def test_json_and_a_malformed_line(tmp_path: Path, writer: Writer) -> None:  # CC-9
    workspace = tmp_path / "project"
    workspace.mkdir()
    writer.cwd = str(workspace)
    writer.prompt("list the files", permissionMode="plan")
    writer.raw('{"type": "assistant", "sessionId": "' + SESSION + '", "message": ')
    writer.use("toolu_ls", "Bash", {"command": "ls"})
    writer.result("toolu_ls", "a\nb", response={"stdout": "a\nb", "stderr": ""})
    path = writer.write(tmp_path / f"{SESSION}.jsonl")
    db = tmp_path / "ledger.db"
    text = run_import(str(path), "--workspace", str(tmp_path), db=db, cwd=tmp_path)
    assert text.returncode == 0, text.stderr
    session = ledger_session_id(SESSION)
    created, reported = text.stderr.split("\n", 1)  # the first import made the store
    assert created == f"created a new event store at {db}"
    assert reported.startswith(f"{path}:2: not JSON")
    assert text.stdout == (f"{path}: session {session} (claude {SESSION}), 4 events appended, "
                           "1 line skipped\n")
    events = wire_events(db, session)
    assert [e["type"] for e in events] == [
        "SessionCreated", "MessageRecorded", "ToolCallRequested", "ToolCallCompleted"]
    assert events[0]["data"]["workspace"] == str(workspace)
    assert events[0]["data"]["executionState"]["planEnabled"] is True  # permissionMode plan
    [entry] = imported(run_import(str(path), "--workspace", str(tmp_path), "--json", db=db,
                                  cwd=tmp_path))
    assert set(entry) == {"path", "sessionId", "externalSessionId", "parentSessionId",
                          "appended", "skipped"}
    assert entry["skipped"][0]["reason"].startswith("not JSON")
    assert entry | {"skipped": []} == {
        "path": str(path), "sessionId": session, "externalSessionId": SESSION,
        "parentSessionId": None, "appended": 0, "skipped": []}
    assert [s["line"] for s in entry["skipped"]] == [2]


def test_a_todo_list_over_the_bounds_is_recorded_as_the_call_and_said(  # issue 41
    tmp_path: Path, writer: Writer,
) -> None:
    """A TodoWrite of 1,001 items that Claude Code ran: the import records the call, keeps the
    list it held before, and says so at the line, naming the bound."""
    workspace = tmp_path / "project"
    workspace.mkdir()
    writer.cwd = str(workspace)
    writer.prompt("plan everything")
    small = {"todos": [{"content": "one", "status": "pending", "activeForm": "One"}]}
    writer.use("toolu_t1", "TodoWrite", small)
    writer.result("toolu_t1", "Todos have been modified")
    huge = {"todos": [{"content": f"step {n}", "status": "pending", "activeForm": f"Step {n}"}
                      for n in range(1_001)]}
    writer.use("toolu_t2", "TodoWrite", huge)
    writer.result("toolu_t2", "Todos have been modified")
    path = writer.write(tmp_path / f"{SESSION}.jsonl")
    db = tmp_path / "ledger.db"
    text = run_import(str(path), "--workspace", str(tmp_path), db=db, cwd=tmp_path)
    assert text.returncode == 0, text.stderr
    note = "recorded as the call, not as the session's todo list: a todo list holds at most " \
        "1,000 items; this one has 1,001"
    assert text.stderr == f"created a new event store at {db}\n{path}:5: {note}\n"
    assert text.stdout.endswith(", 0 lines skipped\n")
    events = wire_events(db, ledger_session_id(SESSION))
    written = [e for e in events if e["type"] == "TodosWritten"]
    assert len(written) == 1 and len(written[0]["data"]["todos"]) == 1
    assert sum(e["type"] == "ToolCallCompleted" for e in events) == 2
    [entry] = imported(run_import(str(path), "--workspace", str(tmp_path), "--json", db=db,
                                  cwd=tmp_path))
    assert entry["notes"] == [{"line": 5, "note": note}] and entry["skipped"] == []


def test_a_transcript_from_elsewhere_is_not_imported_unless_placed(
        tmp_path: Path, writer: Writer) -> None:  # CC-9
    root = tmp_path / "root"
    (root / "here").mkdir(parents=True)
    writer.cwd = "/home/someone/projects/app"
    writer.prompt("hello")
    path = writer.write(tmp_path / f"{SESSION}.jsonl")
    db = tmp_path / "ledger.db"
    refused = run_import(str(path), "--workspace", str(root), db=db, cwd=tmp_path)
    assert refused.returncode == 1
    assert refused.stdout == ""
    assert f"{path}: not imported: its cwd /home/someone/projects/app lies outside the " \
        f"workspace root {root}" in refused.stderr
    with opened(db) as service:
        assert list(service.summaries()) == []
    [entry] = imported(run_import(str(path), "--workspace", str(root), "--into",
                                  str(root / "here"), "--json", db=db, cwd=tmp_path))
    assert entry["appended"] == 2
    [created, _prompt] = wire_events(db, entry["sessionId"])
    assert created["data"]["workspace"] == str(root / "here")


@pytest.mark.parametrize("args", [
    [],
    ["{missing}"],
    ["{notes}"],
    ["{empty}"],
    ["{empty}", "--into", "/"],
])
def test_bad_arguments_change_nothing(tmp_path: Path, args: list[str]) -> None:  # CC-9
    (tmp_path / "notes.txt").write_text("hi\n", encoding="utf-8")
    (tmp_path / "empty").mkdir()
    names = {"missing": str(tmp_path / "absent.jsonl"), "notes": str(tmp_path / "notes.txt"),
             "empty": str(tmp_path / "empty")}
    db = tmp_path / "ledger.db"
    given = [a.format(**names) for a in args]
    result = run_import(*given, "--workspace", str(tmp_path), db=db, cwd=tmp_path)
    assert result.returncode == 2, result
    assert result.stdout == "" and "Traceback" not in result.stderr
    assert result.stderr.strip()
    assert not db.exists()


def run_audit(*args: str, db: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``sessionledger audit ARGS… --db sqlite:///DB`` as a real process."""
    return run_cli("audit", *args, db=db, cwd=cwd)


def test_the_audit_of_imported_sessions_lists_what_a_reviewer_looks_for(
        tmp_path: Path, writer: Writer) -> None:  # CC-9, CC-10 (issue 22 acceptance 3)
    # Our own transcript for what the real ones lack: a question declined, a Bash that
    # writes while Plan is on, a plan rejected (Plan stays on).
    question = {"questions": [{"question": "Which database?", "header": "Database",
                               "options": [{"label": "SQLite", "description": "a file"},
                                           {"label": "PostgreSQL", "description": "a server"}],
                               "multiSelect": False}]}
    writer.prompt("set up storage", permissionMode="plan")
    writer.use("toolu_q", "AskUserQuestion", question)
    writer.result("toolu_q", REJECTED, response="User rejected tool use", error=True)
    writer.use("toolu_ls", "Bash", {"command": "ls -la"})
    writer.result("toolu_ls", "total 0")
    writer.use("toolu_rm", "Bash", {"command": "rm -rf build"})
    writer.result("toolu_rm", "")
    writer.use("toolu_p", "ExitPlanMode", {"plan": PLAN})
    writer.result("toolu_p", REJECTED, response=f"Error: {REJECTED}", error=True)
    (tmp_path / "own").mkdir()
    own = writer.write(tmp_path / "own" / f"{SESSION}.jsonl")
    db = tmp_path / "ledger.db"
    for path in (str(transcripts_dir()), str(own)):
        assert run_import(path, "--workspace", "/", db=db, cwd=tmp_path).returncode == 0

    audited = run_audit("--json", db=db, cwd=tmp_path)
    assert audited.returncode == 0, audited.stderr  # findings are not faults
    document = json.loads(audited.stdout)
    assert document["ok"] is True
    found = {s["sessionId"]: [(f["kind"], f.get("tool"), f.get("path") or f.get("command")
                               or f.get("dropped") or f.get("questions"))
                              for f in s["findings"]]
             for s in document["sessions"]}
    # Claude Code's own plan file (~/.claude/plans/…), written in Plan, is the plan being
    # written, not a write in Plan (issue 39).
    assert found[ledger_session_id(MAIN)] == []
    assert found[ledger_session_id(TODOS)] == [
        ("dropped_unfinished_todos", None, ["Write comprehensive tests for all modules"])]
    assert found[ledger_session_id(ASKING)] == []  # both questions answered; plan approved
    assert found[ledger_session_id(SESSION)] == [
        ("unanswered_question", None, ["Which database?"]),
        ("write_in_plan", "Bash", "rm -rf build"),
    ]
    with opened(db) as service:
        own_events = [e.type for e in service.iter_events(ledger_session_id(SESSION))]
        still = service.summary(ledger_session_id(SESSION))
    assert "PlanRejected" in own_events and still.plan_enabled  # rejected: Plan stays on

    strict = run_audit("--strict", db=db, cwd=tmp_path)
    assert strict.returncode == 1
    assert "write_in_plan" in strict.stdout
