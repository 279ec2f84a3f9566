"""The hosts' hooks answered by the ledger (CC-1 … CC-8): one event in, its output out.

``POST /v1/hooks/claude-code`` (an ``"type": "http"`` hook) and ``sessionledger hook
claude-code`` (a ``"type": "command"`` hook) both call :func:`answer_hook`, so the two differ
only in how the bytes arrive. Codex CLI (``/v1/hooks/codex``, ``hook codex``) sends Claude
Code's events in Claude Code's shape; Gemini CLI (``/v1/hooks/gemini``, ``hook gemini``) its
own (:data:`GEMINI_EVENTS`). Each is read into the same observations and answered in the
host's own output (:func:`_decided`), as the section "Three dialects" below says.

An event is read into a :class:`~.observations.Seen`, recorded by
the :class:`~.recorder.Recorder` at most once, and answered:

- ``PreToolUse``: this service's permission authority decides (PM-3, PM-4, TR-3, TR-4 on the
  session's workspace rules; Plan denies every write, under ``bypassPermissions`` too) and the
  decision is recorded and returned as ``permissionDecision``; ``AskUserQuestion`` and
  ``ExitPlanMode`` get none, since Claude Code asks its user itself (CC-4).
- ``PermissionRequest`` (Claude Code is about to ask its user): the same authority answers
  for the user where it decides — ``deny`` (Plan's writes) or ``allow`` — and records it; an
  ``ask`` is no decision, and Claude Code's prompt asks.
- ``UserPromptSubmit``: the prompt is recorded; the answer warns of unfinished todos the last
  ``TodoWrite`` dropped, once per drop (CC-6).
- ``SessionStart`` after a compaction or on resume: the approved plan and the todo list, so
  neither is lost (CC-7). Gemini CLI sends nothing after it compresses: each of its
  ``BeforeModel`` requests that follows a compression gets them added to the summary.
- everything else (``PostToolUse``, ``PostToolUseFailure``, ``PreCompact``, ``Stop``, …) is
  recorded where it fits and answered ``{}``.

A hook must never stop the agent: an event that cannot be read, or whose ``cwd`` lies outside
the root, is answered ``{}`` (no opinion) with the reason beside it for a log line, and
nothing is recorded.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from eventlog import (
    JsonShapeError,
    NewEvent,
    PermissionDecided,
    PermissionVerdict,
    ReminderInjected,
    TodosWritten,
    check_json,
    loads_json,
)

from ..errors import SessionLedgerError
from ..ledger import eventlog_errors
from ..permission.descriptors import named_tool
from ..service.turns import plan_file_reference_text, todo_line
from ..tools.ask import declined_text, parse_model_input, result_text
from .observations import (
    Compacted,
    Noted,
    Observation,
    Origin,
    PermissionAsked,
    Prompt,
    Seen,
    SessionBegan,
    ToolResult,
    ToolUse,
    content_key,
)
from .recorder import (
    AskHere,
    Recorder,
    Tally,
    approved_plan,
    recorded_by_our_server,
    refusal_text,
    todo_list_refusal,
)
from .wire import HOOK_PATH, HOOK_PATHS

__all__ = [
    "GEMINI_EVENTS", "HOOK_EVENTS", "HOOK_PATH", "HOOK_PATHS", "MAX_HOOK_BYTES", "HookAnswer",
    "MalformedHook", "answer_hook", "read_hook",
]

HOOK_EVENTS = (
    "SessionStart", "UserPromptSubmit", "PreToolUse", "PermissionRequest", "PostToolUse",
    "PostToolUseFailure", "PreCompact", "Stop", "SubagentStop", "Notification", "SessionEnd",
)
"""The events :func:`answer_hook` reads for what they hold; any other is :class:`Noted`."""

MAX_HOOK_BYTES = 8 * 1024 * 1024
"""The largest event read (a ``Write`` of a big file carries its whole content); the HTTP
route takes bodies up to this size (other routes: 1 MiB)."""

DROPPED_WARNING = (
    "The last change to your todo list dropped unfinished todos without completing them: "
    "{items}. "
    "If they still matter, add them back; if not, say why they were dropped."
)
TODOS_CARRIED = "The todo list of this session, as its last change left it:"
NO_OPINION: dict[str, Any] = {}
HOLD_S = 590.0
"""How long a hook waits for a question or plan approval to be answered here: under the
600-second timeout ``setup claude-code`` gives these hooks, after which Claude Code would
ask in its own dialog anyway."""
POLL_S = 0.25
"""How often a waiting hook looks for the answer."""
ANSWERED_HERE = "sessionledger: answered by the user on the ledger's page"
PLAN_REJECTED_HERE = ("The user rejected this plan. Plan mode stays on: do not make changes; "
                      "ask what to change, or plan again.")


class MalformedHook(ValueError):
    """An event that is not one Claude Code sends: not JSON, not an object, no session."""


@dataclass(frozen=True, slots=True)
class HookAnswer:
    """The hook's JSON output, and why it has no opinion when it has none for a reason
    (for the log line; never sent to Claude Code)."""

    output: dict[str, Any]
    problem: str | None = None
    session_id: str | None = None


# -- three dialects ----------------------------------------------------------------------------
#
# Codex CLI's hooks are Claude Code's: the same events and fields (its ``exec_command`` is named
# ``Bash``, ``apply_patch`` carries its patch in ``command``), ``permission_mode`` included, and
# the same outputs — but ``allow`` and ``ask`` change nothing there (the call runs), so a call
# this ledger would ask about is refused with the reason (Codex cannot be made to ask its user
# from a hook) and an allowed one gets no opinion. Its plan tool ``update_plan`` is the todo
# list. A PermissionRequest (Codex is about to ask its user) is answered as Claude Code's: an
# ``ask`` leaves it to Codex's prompt. Gemini CLI names its events its own way (below), gives no
# call id (a call is named by its tool, input and how many such calls came before; its
# AfterTool finds the waiting call with its tool and input) and no mode; it is refused with
# ``{"decision": "deny", "reason": …}`` and never sent ``ask`` (it would hang), so a call to ask
# about gets no opinion and Gemini's own approval mode decides.

GEMINI_EVENTS = {
    "BeforeTool": "PreToolUse", "AfterTool": "PostToolUse", "BeforeAgent": "UserPromptSubmit",
    "AfterAgent": "Stop", "SessionStart": "SessionStart", "SessionEnd": "SessionEnd",
}
"""Gemini CLI's events by the Claude Code event each reads as. A ``BeforeModel`` whose
request follows a compression is a :class:`Compacted` (answered with the hand-back); every
other event (its ``PreCompress`` comes before every model call, compacting or not; the other
model events, notifications) is :class:`Noted`."""
GEMINI_COMPRESSED = "Got it. Thanks for the additional context!"
"""The model turn Gemini CLI's compression puts after the summary that replaces the history
(its ``chatCompressionService``): a model request beginning so follows a compression. Gemini
sends no hook after it compresses (its ``PreCompress`` comes before the check, at every model
call) and keeps no change a ``BeforeModel`` hook makes to a request, so each such request gets
the hand-back again, added to the summary's turn."""
GEMINI_SUMMARY_WITHIN = 3
"""How many of a request's first turns are looked at for the summary and the turn after it
(Gemini puts its environment's turn first)."""
GEMINI_SNAPSHOT = "<state_snapshot>"
"""What Gemini's compression prompt makes every summary hold: a model turn that only says
:data:`GEMINI_COMPRESSED` after a user turn without it (a user can ask for those words) is no
compression."""
GEMINI_HOOK_TAG = "hook_context"
"""The tag Gemini CLI wraps a hook's ``additionalContext`` in, which its system prompt names."""
CODEX_CANNOT_ASK = " Codex CLI cannot be asked to ask its user from a hook, so it is refused."


def read_hook(body: bytes | str | Any, host: str = "claude-code") -> tuple[str, Seen]:
    """The event's name (as the host names it) and what it says, for ``host`` (one of
    :data:`HOOK_PATHS`); raises :class:`MalformedHook`."""
    if isinstance(body, bytes | str):
        if len(body) > MAX_HOOK_BYTES:
            raise MalformedHook(f"the event is larger than {MAX_HOOK_BYTES} bytes")
        try:
            raw = loads_json(body)
        except (JsonShapeError, ValueError) as exc:
            raise MalformedHook(f"the event is not JSON: {exc}") from None
    else:
        raw = body
        try:
            check_json(raw)
        except JsonShapeError as exc:
            raise MalformedHook(f"the event cannot be recorded: {exc}") from None
    if not isinstance(raw, dict):
        raise MalformedHook("the event is not a JSON object")
    name = _text(raw, "hook_event_name")
    session = _text(raw, "session_id")
    if not name or not session:
        raise MalformedHook("the event names no hook_event_name and session_id")
    claude = host == "claude-code"
    transcript = _text(raw, "transcript_path") if claude else None
    claude_dir = _claude_dir(transcript)
    origin = Origin(
        session_id=session, client=host, cwd=_text(raw, "cwd"), agent_id=_text(raw, "agent_id"),
        permission_mode=_text(raw, "permission_mode"), claude_dir=claude_dir,
        transcript=transcript if claude_dir is not None else None,
    )
    if host == "gemini":
        read_as = GEMINI_EVENTS.get(name)
        if read_as is not None:
            observation = _observation(read_as, _gemini(read_as, raw))
        else:
            compressed = _compressed(raw) if name == "BeforeModel" else None
            observation = compressed or Noted(event=name)
    else:
        observation = _observation(name, raw)
    return name, Seen(origin, observation, where=name)


def _gemini(read_as: str, raw: dict[str, Any]) -> dict[str, Any]:
    """A Gemini CLI event in Claude Code's fields: an AfterTool's result text and failure
    (a call has no id: the recorder names it by tool, input and order, as the chat file
    import does)."""
    if read_as == "PostToolUse":
        response = raw.get("tool_response")
        given = response if isinstance(response, Mapping) else {}
        if given.get("error"):
            shown = given.get("llmContent")
            return {**raw, "hook_event_name": "PostToolUseFailure",
                    "error": shown if isinstance(shown, str) else str(given["error"])}
    return raw


def _compressed(raw: Mapping[str, Any]) -> Compacted | None:
    """A Gemini CLI model request whose history its compression replaced by a summary: its
    text turns up to the summary (the user turn holding :data:`GEMINI_SNAPSHOT` just before
    :data:`GEMINI_COMPRESSED`, within the first :data:`GEMINI_SUMMARY_WITHIN` turns), or
    ``None``."""
    request = raw.get("llm_request")
    messages = request.get("messages") if isinstance(request, Mapping) else None
    if not isinstance(messages, list):
        return None
    turns: list[tuple[str, str]] = []
    for message in messages[:GEMINI_SUMMARY_WITHIN + 1]:
        content = message.get("content") if isinstance(message, Mapping) else None
        if not isinstance(content, str):
            return None
        role = message.get("role")
        if role == "model" and content == GEMINI_COMPRESSED and turns \
                and GEMINI_SNAPSHOT in turns[-1][1]:
            return Compacted(summary_turns=tuple(turns))
        if role != "user":
            return None
        turns.append(("user", content))
    return None


def _claude_dir(transcript: str | None) -> str | None:
    """Claude Code's configuration directory from a transcript's path
    (``<dir>/projects/<project>/<session>.jsonl``), if it is one."""
    if transcript is None:
        return None
    path = Path(transcript)
    if not path.is_absolute() or len(path.parents) < 3 or path.parents[1].name != "projects":
        return None
    return str(path.parents[2])


def _text(raw: Mapping[str, Any], key: str) -> str | None:
    value = raw.get(key)
    return value if isinstance(value, str) and value else None


def _object(raw: Mapping[str, Any], key: str) -> dict[str, Any]:
    value = raw.get(key)
    return dict(value) if isinstance(value, Mapping) else {}


def _observation(name: str, raw: Mapping[str, Any]) -> Observation:
    if raw.get("hook_event_name") == "PostToolUseFailure":
        name = "PostToolUseFailure"  # a Gemini AfterTool that failed
    tool = _text(raw, "tool_name")
    if name in ("PreToolUse", "PermissionRequest", "PostToolUse",
                "PostToolUseFailure") and tool is None:
        raise MalformedHook(f"a {name} event names no tool_name")
    tool_input = _object(raw, "tool_input")
    use_id = _text(raw, "tool_use_id")
    fallback = None if use_id else content_key(tool, tool_input)
    match name:
        case "UserPromptSubmit":
            prompt = raw.get("prompt")
            if not isinstance(prompt, str):
                raise MalformedHook("a UserPromptSubmit event carries no prompt")
            return Prompt(text=prompt)
        case "PreToolUse":
            assert tool is not None
            return ToolUse(tool=tool, input=tool_input, tool_use_id=use_id,
                           fallback_key=fallback)
        case "PermissionRequest":
            assert tool is not None
            return PermissionAsked(tool=tool, input=tool_input, tool_use_id=use_id,
                                   fallback_key=fallback)
        case "PostToolUse":
            assert tool is not None
            response = raw.get("tool_response")
            return ToolResult(tool=tool, input=tool_input, response=response,
                              content=_shown(response), tool_use_id=use_id,
                              fallback_key=fallback)
        case "PostToolUseFailure":
            assert tool is not None
            error = raw.get("error")
            return ToolResult(tool=tool, input=tool_input, response=None,
                              content=error if isinstance(error, str) else "", error=True,
                              tool_use_id=use_id, fallback_key=fallback)
        case "PreCompact":
            return Compacted(trigger=_text(raw, "trigger"))
        case "SessionStart":
            return SessionBegan(source=_text(raw, "source"))
    return Noted(event=name)


def _shown(response: Any) -> str:
    """What a tool's response reads as, for the record (Gemini's: its ``llmContent``)."""
    if isinstance(response, str):
        return response
    if isinstance(response, Mapping) and isinstance(response.get("llmContent"), str):
        return str(response["llmContent"])
    if response is None:
        return ""
    return json.dumps(response, ensure_ascii=False, sort_keys=True)


def answer_hook(recorder: Recorder, body: bytes | str | Any, *, host: str = "claude-code",
                hold_s: float = HOLD_S) -> HookAnswer:
    """Record one of ``host``'s hook events and answer it (CC-1); never raises for what the
    event holds. A question or plan approval of a session answered here waits up to
    ``hold_s`` for the answer (Claude Code's)."""
    try:
        name, seen = read_hook(body, host)
    except MalformedHook as exc:
        return HookAnswer(NO_OPINION, str(exc))
    try:
        session_id = recorder.bind(seen.origin)
        if session_id is None:
            return HookAnswer(NO_OPINION, "the session's cwd cannot be recorded here (outside "
                                          "the workspace root, or missing), or it was deleted")
        return _answered(recorder, session_id, name, seen, hold_s=hold_s)
    except SessionLedgerError as exc:  # the ledger could not record it (busy, a bad input)
        return HookAnswer(NO_OPINION, exc.message)


def _answered(recorder: Recorder, session_id: str, name: str, seen: Seen, *,
              hold_s: float = HOLD_S) -> HookAnswer:
    observation = seen.observation
    host = seen.origin.client
    if recorded_by_our_server(host, observation):  # the ledger's MCP server records the call
        return HookAnswer(_permission_request(_OURS) if isinstance(observation, PermissionAsked)
                          else NO_OPINION, session_id=session_id)
    if isinstance(observation, ToolUse | PermissionAsked):
        ask_here = _ask_here(recorder, session_id, observation) if host == "claude-code" \
            else None
        decide = _decider(recorder, seen.origin,
                          refuse_asks=host == "codex" and isinstance(observation, ToolUse))
        recorded = recorder.record(session_id, seen, decide=decide, ask_here=ask_here)
        if ask_here is not None:
            return _answered_here(recorder, session_id, observation, hold_s)
        verdict = next((e.data.decision for e in recorded.events
                        if isinstance(e.data, PermissionDecided)), None)
        if verdict is None:  # AskUserQuestion, ExitPlanMode, a PermissionRequest's ask:
            return HookAnswer(NO_OPINION, session_id=session_id)  # the host asks its user
        return HookAnswer(_decided(host, observation, verdict), session_id=session_id)
    if isinstance(observation, Compacted) and observation.summary_turns:
        # sent before every model call until the next compression: what it closes (a call
        # refused since) is appended apart from the compaction, recorded once per summary
        recorder.record(session_id, replace(seen, observation=Noted(event=name)))
    recorded = recorder.record(session_id, seen)
    context: str | None = None
    if isinstance(observation, Prompt):
        context = _dropped_warning(recorder, session_id, again=recorded.replayed)
    elif isinstance(observation, SessionBegan) and observation.source in ("compact", "resume"):
        context = _carried_over(recorder, session_id)
    elif isinstance(observation, Compacted) and observation.summary_turns:
        carried = _carried_over(recorder, session_id)
        return HookAnswer(NO_OPINION if carried is None else _summary_with(
            observation.summary_turns, carried), session_id=session_id)
    if context is None:
        return HookAnswer(NO_OPINION, session_id=session_id)
    return HookAnswer({"hookSpecificOutput": {
        "hookEventName": name, "additionalContext": context,
    }}, session_id=session_id)


def _decider(recorder: Recorder, origin: Origin, *, refuse_asks: bool = False) -> Any:
    """The permission authority for the session's calls; ``refuse_asks``: an ``ask`` is a
    ``deny`` with why (Codex's PreToolUse, which runs a call it is told to ask about)."""
    permissions = recorder.service.tools.permissions
    plans = None if origin.claude_dir is None else Path(origin.claude_dir) / "plans"

    def decide(tally: Tally, use: ToolUse) -> PermissionVerdict:
        verdict = permissions.decide(
            tool=named_tool(use.tool), input=use.input, state=tally.execution,
            workspace=tally.workspace, plan_files=plans,
        )
        too_long = todo_list_refusal(use.tool, use.input, len(tally.todos))
        if too_long is not None and verdict.behavior != "deny":
            return verdict.model_copy(update={"behavior": "deny", "reason": too_long})
        if refuse_asks and verdict.behavior == "ask":
            return verdict.model_copy(update={"behavior": "deny",
                                              "reason": verdict.reason + "." + CODEX_CANNOT_ASK})
        return verdict

    return decide


def _decided(host: str, observation: ToolUse | PermissionAsked,
             verdict: PermissionVerdict) -> dict[str, Any]:
    """The decision in the host's own output: Claude Code's as it is; Codex only what
    changes something there (a deny); Gemini a deny, and nothing else (``ask`` hangs it)."""
    if isinstance(observation, PermissionAsked):
        return _permission_request(verdict)
    if host == "claude-code":
        return _pre_tool_use(verdict)
    if verdict.behavior != "deny":
        return NO_OPINION
    if host == "gemini":
        return {"decision": "deny", "reason": refusal_text(verdict.reason, verdict.rule_id)}
    return _pre_tool_use(verdict)


# -- answered here: the hook waits for the person --------------------------------------------


def _ask_here(recorder: Recorder, session_id: str,
              observation: ToolUse | PermissionAsked) -> AskHere | None:
    """The question (PreToolUse of AskUserQuestion) or plan approval (PermissionRequest of
    ExitPlanMode) to put to the user here, when the session's questions are answered here
    and the call is one this service can show."""
    if isinstance(observation, ToolUse) and observation.tool == "AskUserQuestion":
        try:
            asked = parse_model_input(observation.input)
        except (ValidationError, ValueError):
            return None  # not a question this service can show: Claude Code asks
        payload = asked.model_dump(mode="json", by_alias=True, exclude_none=True)
        found: AskHere = ("askUserQuestion", {"questions": payload["questions"]})
    elif isinstance(observation, PermissionAsked) and observation.tool == "ExitPlanMode":
        plan = observation.input.get("plan")
        if not isinstance(plan, str) or not plan.strip():
            return None  # no plan to show (its file is not written): Claude Code asks
        found = ("planApproval", {"plan": plan})
    else:
        return None
    return found if recorder.service.answer_in(session_id) == "here" else None


def _answered_here(recorder: Recorder, session_id: str,
                   observation: ToolUse | PermissionAsked, hold_s: float) -> HookAnswer:
    """Wait up to ``hold_s`` for the answer given here (the web page, the TUI, the CLI,
    or the auto-continue timer) and hand it to Claude Code; no answer by then is no
    decision, and Claude Code asks in its own dialog."""
    tally = recorder.tally(session_id)
    call_id = tally.waiting.get(content_key(observation.tool, observation.input))
    if call_id is None or call_id not in tally.interactions:
        return HookAnswer(NO_OPINION, session_id=session_id)
    deadline = time.monotonic() + hold_s
    ledger = recorder.service.ledger
    while True:
        with eventlog_errors(payloads=True):
            doc = ledger.call(session_id, call_id)
        if doc is None or doc.status != "pending":
            return HookAnswer(NO_OPINION, session_id=session_id)
        resolution = doc.body.get("resolution")
        if isinstance(resolution, Mapping):
            break
        if time.monotonic() >= deadline:
            return HookAnswer(NO_OPINION, "nobody answered here in time: Claude Code asks",
                              session_id=session_id)
        time.sleep(POLL_S)
    if isinstance(observation, ToolUse):
        return HookAnswer(_question_answer(observation.input, resolution),
                          session_id=session_id)
    return HookAnswer(_plan_answer(observation.input, resolution), session_id=session_id)


def _question_answer(asked: Mapping[str, Any], resolution: Mapping[str, Any]) -> dict[str, Any]:
    """PreToolUse's answer for a question answered here: the answers in ``updatedInput``
    (Claude Code then shows no dialog), or refused with what the model should know."""
    decision = resolution.get("decision")
    raw = resolution.get("input")
    given: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
    answers = given.get("answers")
    if decision == "modify" and isinstance(answers, Mapping) and answers:
        updated = {**asked, "answers": dict(answers)}
        if isinstance(given.get("annotations"), Mapping):
            updated["annotations"] = dict(given["annotations"])
        return {"hookSpecificOutput": {
            "hookEventName": "PreToolUse", "permissionDecision": "allow",
            "permissionDecisionReason": ANSWERED_HERE, "updatedInput": updated,
        }}
    questions = asked.get("questions")
    texts = [q.get("question", "") for q in questions if isinstance(q, Mapping)] if isinstance(
        questions, list) else []
    reason = (declined_text(resolution.get("feedback")) if decision == "deny"
              else result_text(texts, {}))
    return {"hookSpecificOutput": {
        "hookEventName": "PreToolUse", "permissionDecision": "deny",
        "permissionDecisionReason": reason,
    }}


HOST_MODES = {"build": "default", "edit": "acceptEdits", "yolo": "bypassPermissions"}
"""The ledger's modes by Claude Code's name for them (an approval may name the mode to
carry on in)."""


def _plan_answer(asked: Mapping[str, Any], resolution: Mapping[str, Any]) -> dict[str, Any]:
    """PermissionRequest's answer for a plan answered here: approved (in the mode the
    approval names, if it names one; ``modify``: as the person edited it), or refused with the
    feedback or the rejection. An approval gives the call's input back as ``updatedInput``
    (the edited plan in it): Claude Code 2.1.337 runs an allowed ExitPlanMode only with it
    (without, its dialog stays open and the call waits)."""
    decision = resolution.get("decision")
    given = resolution.get("input")
    given = given if isinstance(given, Mapping) else {}
    decided: dict[str, Any]
    if decision in ("approve", "modify"):
        updated = dict(asked)
        if decision == "modify" and isinstance(given.get("plan"), str):
            updated["plan"] = given["plan"]  # approved as the person edited it
        decided = {"behavior": "allow", "updatedInput": updated}
        mode = given.get("mode")
        if mode in HOST_MODES:
            decided["updatedPermissions"] = [
                {"type": "setMode", "mode": HOST_MODES[mode], "destination": "session"}]
    elif decision == "feedback" and str(resolution.get("feedback") or "").strip():
        decided = {"behavior": "deny", "message": str(resolution["feedback"]).strip()}
    else:
        decided = {"behavior": "deny", "message": PLAN_REJECTED_HERE}
    return {"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": decided}}


def _pre_tool_use(verdict: PermissionVerdict) -> dict[str, Any]:
    return {"hookSpecificOutput": {
        "hookEventName": "PreToolUse",
        "permissionDecision": verdict.behavior,
        "permissionDecisionReason": refusal_text(verdict.reason, verdict.rule_id),
    }}


_OURS = PermissionVerdict(behavior="allow", reason="the ledger's own tool: its MCP server "
                          "decides the call", rule_id="tool.ledgerServer")


def _permission_request(verdict: PermissionVerdict) -> dict[str, Any]:
    decided: dict[str, Any] = {"behavior": verdict.behavior}
    if verdict.behavior == "deny":
        decided["message"] = refusal_text(verdict.reason, verdict.rule_id)
    return {"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": decided}}


def _dropped_warning(recorder: Recorder, session_id: str, *, again: bool) -> str | None:
    """CC-6: a warning naming the unfinished todos the last change of the list (TodoWrite, a
    deleted task) dropped, recorded as a
    ``todo_reminder`` once per drop (a retried prompt gets the same warning again)."""
    service = recorder.service
    summary = service.find_summary(session_id)
    if summary is None or summary.todos_seq is None:
        return None
    with eventlog_errors(payloads=True):
        last = next(iter(service.store.read_session(
            session_id, after=summary.todos_seq - 1, limit=1,
        )), None)
    if last is None or not isinstance(last.data, TodosWritten) or not last.data.dropped_unfinished:
        return None
    items = ", ".join(json.dumps(t.content, ensure_ascii=False)
                      for t in last.data.dropped_unfinished)
    text = DROPPED_WARNING.format(items=items)
    with eventlog_errors():
        result = service.ledger.append(
            session_id,
            [NewEvent(ReminderInjected(kind="todo_reminder", text=text), actor="system")],
            idempotency_key=f"cc:dropped:{summary.todos_seq}",
        )
    return text if again or not result.replayed else None


def _summary_with(turns: tuple[tuple[str, str], ...], carried: str) -> dict[str, Any]:
    """Gemini CLI's BeforeModel answer after a compression: the request's text turns up to the
    summary as they were, the summary's with ``carried`` after it (Gemini replaces a request's
    text turns by position and keeps the rest), wrapped as Gemini wraps a hook's context —
    its system prompt tells the model not to take what is inside as instructions."""
    *kept, (role, summary) = turns
    messages = [{"role": r, "content": text} for r, text in kept]
    shown = carried.replace(f"</{GEMINI_HOOK_TAG}>", f"<\\/{GEMINI_HOOK_TAG}>")
    messages.append({"role": role, "content": (
        f"{summary}\n\n<{GEMINI_HOOK_TAG}>{shown}</{GEMINI_HOOK_TAG}>")})
    return {"hookSpecificOutput": {"hookEventName": "BeforeModel",
                                   "llm_request": {"messages": messages}}}


def _carried_over(recorder: Recorder, session_id: str) -> str | None:
    """CC-7: the approved plan (PM-10's text) and the todo list after a compaction."""
    service = recorder.service
    with eventlog_errors(payloads=True):
        events = list(service.store.read_session(session_id))
    parts = []
    found = approved_plan(events)
    if found is not None:
        path, plan = found
        parts.append(plan_file_reference_text(Path(path), plan) if path else (
            f"The plan approved in this session:\n\n{plan}\n\n"
            "If this plan is relevant to the current work and not already complete, "
            "continue working on it."
        ))
    todos = recorder.tally(session_id).todos
    if todos:
        lines = "\n".join(todo_line(i, item) for i, item in enumerate(todos, start=1))
        parts.append(f"{TODOS_CARRIED}\n\n{lines}")
    return "\n\n".join(parts) if parts else None
