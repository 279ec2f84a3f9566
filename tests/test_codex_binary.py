"""The real Codex CLI against a scripted Responses model, with the configuration
``sessionledger setup codex`` writes (issue 40).

Codex CLI (the version ``tests/hosts/package-lock.json`` pins) runs headless (``codex exec``)
against ``tests/openai_model.py`` on 127.0.0.1, its hooks forwarding to a real ``serve``. No
``--dangerously-bypass-hook-trust``: the hooks run because ``setup`` trusted them.
"""

from __future__ import annotations

import json
import queue
import threading
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from agent_cli_support import (
    approve_in_ledger,
    codex_config,
    codex_plan_turn,
    imported,
    imports_as_hooked,
    ledger_session,
    outcomes_of,
    run_codex,
    sessionledger,
)
from claude_binary_support import installed_claude, project_in
from host_support import CODEX_PACKAGE, ClaudeCode
from openai_model import Custom, ResponsesModel, Search, Text, ToolUse
from server_support import ServerProcess, running_server

from sessionledger.permission.descriptors import HOST_TOOLS, SERVICE_TOOLS

PATCH = "*** Begin Patch\n*** Add File: notes.txt\n+written by the model\n*** End Patch\n"


@pytest.fixture(scope="module")
def hosts() -> ClaudeCode:
    return installed_claude()


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with running_server(tmp_path_factory.mktemp("codex-binary")) as server:
        yield server


def set_up(project: Path, server: ServerProcess, model: ResponsesModel, *args: str,
           url: bool = True) -> None:
    """Codex's home in ``project/.home/.codex``: the model, then what ``setup codex`` writes
    (with ``url``, hooks and the MCP server on ``server``'s HTTP; without, the hooks on the
    database and ``sessionledger mcp`` over stdio)."""
    codex_home = project / ".home" / ".codex"
    codex_config(codex_home, model.url)
    where = ("--url", server.base_url) if url else ()
    done = sessionledger("setup", "codex", "--codex-home", str(codex_home), *where, *args)
    assert done.returncode == 0, done.stderr


def thread_of(lines: list[dict[str, Any]]) -> str:
    return str(next(line["thread_id"] for line in lines if line.get("type") == "thread.started"))


def looked_around_then_plan(hosts: ClaudeCode, project: Path,
                            served: ServerProcess) -> tuple[str, str]:
    """A first ``codex exec`` run, then Plan set in the ledger on the session its hooks
    recorded: Codex's thread and that session."""
    first = run_codex(hosts.codex, project, prompt="Look around.")
    assert first.returncode == 0, first.stderr[-2000:]
    thread = thread_of(first.json_lines())
    session_id, _events = ledger_session(served, thread)
    with httpx.Client(base_url=served.base_url, timeout=30) as http:
        assert http.post(f"/v1/sessions/{session_id}/mode",
                         json={"mode": "plan"}).status_code == 200
    return thread, session_id


@pytest.mark.slow
def test_every_tool_the_pinned_codex_offers_is_classified(
        hosts: ClaudeCode, served: ServerProcess) -> None:
    project = project_in(served)
    with ResponsesModel([]) as model:
        set_up(project, served, model, "--no-mcp")
        run = run_codex(hosts.codex, project)
        assert run.returncode == 0, run.stderr[-2000:]
        offered = model.tools_offered()
    assert "exec_command" in offered and "apply_patch" in offered, offered
    # Codex's hooks name exec_command "Bash"
    unknown = sorted(set(offered) - {"exec_command"} - set(HOST_TOOLS) - set(SERVICE_TOOLS))
    assert unknown == [], (
        f"Codex CLI {hosts.version_of(CODEX_PACKAGE)} offers tools the ledger does not "
        f"classify: {unknown} (give each a descriptor in sessionledger/permission/"
        "descriptors.py)")


def test_plan_set_in_the_ledger_refuses_codexs_writes_and_the_rollout_imports_alike(
        hosts: ClaudeCode, served: ServerProcess,
        tmp_path: Path) -> None:  # issue 40, acceptances 1 and 2
    project = project_in(served)
    script: list[list[Any]] = [
        [ToolUse("exec_command", {"cmd": "ls"})],
        [Text("Listed.")],
        [Custom("apply_patch", PATCH)],
        [ToolUse("exec_command", {"cmd": "echo hi > shell.txt"})],
        [ToolUse("exec_command", {"cmd": "cat notes.txt shell.txt || true"})],
    ]
    with ResponsesModel(script) as model:
        set_up(project, served, model, "--no-mcp")
        thread, _session_id = looked_around_then_plan(hosts, project, served)
        second = run_codex(hosts.codex, project, resume=thread, prompt="Now write notes.")
        assert second.returncode == 0, second.stderr[-2000:]
        outputs = model.tool_outputs()
    assert not (project / "notes.txt").exists() and not (project / "shell.txt").exists()
    shown = [str(item.get("output")) for item in outputs.values()]
    refused = [text for text in shown if "sessionledger: " in text]
    assert len(refused) == 2, shown
    assert all("Plan mode" in text for text in refused), refused
    _id, events = ledger_session(served, thread)
    requested = {e["data"]["callId"]: e["data"]["tool"] for e in events
                 if e["type"] == "ToolCallRequested"}
    decided = [(requested[e["data"]["callId"]], e["data"]["decision"]["behavior"])
               for e in events if e["type"] == "PermissionDecided"]
    assert decided == [("Bash", "allow"), ("apply_patch", "deny"), ("Bash", "deny"),
                       ("Bash", "allow")]
    outcomes = {requested[e["data"]["callId"]] + ":" + e["data"]["status"]
                for e in events if e["type"] == "ToolCallCompleted"}
    assert outcomes == {"Bash:completed", "apply_patch:denied", "Bash:denied"}
    state = [e["data"] for e in events if e["type"] == "SessionModeChanged"][-1]
    assert state["planEnabled"] is True  # Codex's bypassPermissions is mirrored under Plan
    created = next(e["data"] for e in events if e["type"] == "SessionCreated")
    assert (created["client"], created["externalSessionId"]) == ("codex", thread)

    # acceptance 2: its rollout imports as its hooks recorded it
    (rollout,) = (project / ".home" / ".codex" / "sessions").rglob("rollout-*.jsonl")
    imports_as_hooked("codex", rollout, served, thread, events, tmp_path)


STEPS = [{"step": "Read the grammar", "status": "completed"},
         {"step": "Port the lexer", "status": "in_progress"},
         {"step": "Benchmark it", "status": "pending"}]


def test_codexs_plan_tool_is_the_sessions_todo_list_and_its_rollout_imports_alike(
        hosts: ClaudeCode, served: ServerProcess,
        tmp_path: Path) -> None:  # issue 40, acceptances 1 and 2
    # `setup codex` enables update_plan, which codex exec offers only so; an item the model
    # dropped unfinished is pointed out at the next prompt.
    project = project_in(served)
    dropped = [step for step in STEPS if step["step"] != "Benchmark it"]
    script: list[list[Any]] = [
        [ToolUse("update_plan", {"explanation": "Porting.", "plan": STEPS})],
        [Text("Planned.")],
        [ToolUse("update_plan", {"plan": dropped})],
        [Text("Trimmed.")],
    ]
    with ResponsesModel(script) as model:
        set_up(project, served, model, "--no-mcp")
        first = run_codex(hosts.codex, project, prompt="Plan the port.")
        assert first.returncode == 0, first.stderr[-2000:]
        assert "update_plan" in model.tools_offered()
        thread = thread_of(first.json_lines())
        second = run_codex(hosts.codex, project, resume=thread, prompt="Trim the plan.")
        assert second.returncode == 0, second.stderr[-2000:]
        seen = len(model.main_requests())
        third = run_codex(hosts.codex, project, resume=thread, prompt="Go on.")
        assert third.returncode == 0, third.stderr[-2000:]
        warned = json.dumps(model.main_requests()[seen].body)
        outputs = model.tool_outputs()
    assert [item.get("output") for item in outputs.values()] == ["Plan updated"] * 2
    assert "Benchmark it" in warned and "dropped" in warned, warned[-3000:]
    _id, events = ledger_session(served, thread)
    written = [e["data"]["todos"] for e in events if e["type"] == "TodosWritten"]
    assert [[(t["content"], t["status"]) for t in todos] for todos in written] == [
        [(s["step"], s["status"]) for s in STEPS], [(s["step"], s["status"]) for s in dropped]]
    (rollout,) = (project / ".home" / ".codex" / "sessions").rglob("rollout-*.jsonl")
    imports_as_hooked("codex", rollout, served, thread, events, tmp_path,
                      expected=("dropped_unfinished_todos",))


CODEX_QUESTION = {"questions": [{
    "id": "parser", "header": "Parser", "question": "Which parser?",
    "options": [{"label": "PEG", "description": "a PEG parser"},
                {"label": "LALR", "description": "an LALR parser"}]}]}


def test_codexs_question_to_its_user_is_recorded_with_the_answer(
        hosts: ClaudeCode, served: ServerProcess,
        tmp_path: Path) -> None:  # issue 40: request_user_input
    # Codex offers request_user_input in its Plan collaboration mode only (exec answers "is
    # unavailable in Default mode"): driven as its IDE extension drives it, the person's
    # answer reaches the model, and the ledger records the question with that answer.
    project = project_in(served)
    script: list[list[Any]] = [[ToolUse("request_user_input", CODEX_QUESTION)],
                               [Text("Using PEG.")]]
    with ResponsesModel(script) as model:
        set_up(project, served, model, "--no-mcp")
        sent = codex_plan_turn(hosts.codex, project, "Ask me.", {"parser": ["PEG"]})
        (output,) = model.tool_outputs().values()
    assert [m for m in sent if m.get("method") == "item/tool/requestUserInput"], sent[-3:]
    assert json.loads(output["output"]) == {"answers": {"parser": {"answers": ["PEG"]}}}
    thread = next(m["result"]["thread"]["id"] for m in sent if m.get("id") == 2)
    _id, events = ledger_session(served, thread)
    kinds = [e["type"] for e in events]
    assert "PermissionDecided" not in kinds, kinds  # Codex asks its user itself
    (asked,) = [e["data"] for e in events if e["type"] == "InteractionRequested"]
    assert asked["kind"] == "askUserQuestion"
    assert asked["payload"]["questions"][0]["question"] == "Which parser?"
    (resolved,) = [e["data"] for e in events if e["type"] == "InteractionResolved"]
    assert resolved["decision"] == "modify"
    assert resolved["input"]["answers"] == {"Which parser?": "PEG"}
    (rollout,) = (project / ".home" / ".codex" / "sessions").rglob("rollout-*.jsonl")
    imports_as_hooked("codex", rollout, served, thread, events, tmp_path)


@pytest.mark.slow
def test_a_call_the_ledger_would_ask_about_is_refused_with_why(
        hosts: ClaudeCode, served: ServerProcess) -> None:
    # Codex runs a call its hook answers "ask": the ledger refuses it and says why.
    project = project_in(served)
    (project / ".sessionledger").mkdir()
    (project / ".sessionledger" / "config.toml").write_text(
        '[permission]\nask = ["Bash(rm *)"]\n', encoding="utf-8")
    (project / "keep.txt").write_text("keep\n", encoding="utf-8")
    script: list[list[Any]] = [[ToolUse("exec_command", {"cmd": "rm keep.txt"})]]
    with ResponsesModel(script) as model:
        set_up(project, served, model, "--no-mcp")
        run = run_codex(hosts.codex, project)
        assert run.returncode == 0, run.stderr[-2000:]
        (output,) = model.tool_outputs().values()
    assert (project / "keep.txt").exists()
    assert "Codex CLI cannot be asked to ask its user" in str(output["output"]), output
    _id, events = ledger_session(served, thread_of(run.json_lines()))
    (decision,) = [e["data"]["decision"] for e in events if e["type"] == "PermissionDecided"]
    assert decision["behavior"] == "deny" and decision["ruleId"] == "config.ask[0]", decision


def test_setup_codex_trusts_exactly_its_hooks_and_removes_them(
        hosts: ClaudeCode, served: ServerProcess, tmp_path: Path) -> None:
    codex_home = tmp_path / "codex"
    codex_home.mkdir()
    (codex_home / "config.toml").write_text('# mine\nmodel = "gpt-5.5"\n', encoding="utf-8")
    (codex_home / "hooks.json").write_text(json.dumps({"hooks": {"Stop": [
        {"hooks": [{"type": "command", "command": "echo mine", "timeout": 5}]}]}}),
        encoding="utf-8")
    first = sessionledger("setup", "codex", "--codex-home", str(codex_home))
    again = sessionledger("setup", "codex", "--codex-home", str(codex_home))
    assert first.returncode == again.returncode == 0, first.stderr + again.stderr
    assert "unchanged" in again.stdout and "written" not in again.stdout, again.stdout
    listed = _codex_hooks(hosts, codex_home, tmp_path)
    ours = {h["key"]: h["trustStatus"] for h in listed if "sessionledger" in h["command"]}
    theirs = [h["trustStatus"] for h in listed if "sessionledger" not in h["command"]]
    assert len(ours) == 7 and set(ours.values()) == {"trusted"}, ours
    assert theirs == ["untrusted"]  # the user's own hook is the user's to trust
    config = (codex_home / "config.toml").read_text(encoding="utf-8")
    assert config.startswith("# mine\n") and "[mcp_servers.sessionledger]" in config
    assert tomllib.loads(config)["tools"] == {"update_plan": {"enabled": True}}
    removed = sessionledger("setup", "codex", "--codex-home", str(codex_home), "--remove")
    assert removed.returncode == 0, removed.stderr
    assert (codex_home / "config.toml").read_text(encoding="utf-8") == \
        '# mine\nmodel = "gpt-5.5"\n'
    left = json.loads((codex_home / "hooks.json").read_text(encoding="utf-8"))
    assert left == {"hooks": {"Stop": [
        {"hooks": [{"type": "command", "command": "echo mine", "timeout": 5}]}]}}


@pytest.mark.parametrize(("mine", "enabled"), [
    ("[tools.update_plan]\nenabled = false\n", False),  # the user's own, either way
    ("[tools.update_plan]\nenabled = true\n", True),
    ("[tools.update_plan]\n", True),  # a header of the user's, kept on --remove
    ("[tools]\nweb_search = true\n", True),
    ("[tools.update_plan]\nother = 1\n", True),
    ('model = "gpt-5.5"\n\n[tools.web_search]\nx = 1\n\n[other]\ny = 2\n', True),
    ("tools = { web_search = true }\n", None),  # shapes left to the user
    ("tools.update_plan.other = 1\n", None),
    ("[tools]\nupdate_plan.other = 1\n", None),
    ("[tools]\nupdate_plan = true\n", None),
    ('tools = "x"\n', None),
    ("[[tools]]\nx = 1\n", None),
])
def test_setup_codex_turns_on_the_plan_tool_and_remove_gives_the_file_back(
        tmp_path: Path, mine: str, enabled: bool | None) -> None:
    (tmp_path / "config.toml").write_text(mine, encoding="utf-8")
    done = sessionledger("setup", "codex", "--codex-home", str(tmp_path), "--no-mcp")
    assert done.returncode == 0, done.stderr
    config = tomllib.loads((tmp_path / "config.toml").read_text(encoding="utf-8"))
    tools = config.get("tools")
    plan_tool = tools.get("update_plan") if isinstance(tools, dict) else None
    found = plan_tool.get("enabled") if isinstance(plan_tool, dict) else None
    assert found is enabled, config
    assert ("note:" in done.stderr) is (enabled is None), done.stderr
    removed = sessionledger("setup", "codex", "--codex-home", str(tmp_path), "--no-mcp",
                            "--remove")
    assert removed.returncode == 0, removed.stderr
    assert (tmp_path / "config.toml").read_text(encoding="utf-8") == mine


def _codex_hooks(hosts: ClaudeCode, codex_home: Path, cwd: Path) -> list[dict[str, Any]]:
    """Codex's own view of its hooks: ``hooks/list`` of ``codex app-server``."""
    import subprocess

    requests = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize",
         "params": {"clientInfo": {"name": "sessionledger-tests", "version": "0"}}},
        {"jsonrpc": "2.0", "method": "initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "hooks/list", "params": {"cwds": [str(cwd)]}},
    ]
    with subprocess.Popen([str(hosts.codex), "app-server"], cwd=cwd, text=True,
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          stderr=subprocess.DEVNULL,
                          env={"PATH": "/usr/bin:/bin", "HOME": str(cwd),
                               "CODEX_HOME": str(codex_home)}) as server:
        assert server.stdin is not None and server.stdout is not None
        for request in requests:
            server.stdin.write(json.dumps(request) + "\n")
            server.stdin.flush()
        try:
            for line in server.stdout:
                answer = json.loads(line)
                if answer.get("id") == 2:
                    (listed,) = answer["result"]["data"]
                    return list(listed["hooks"])
        finally:
            server.stdin.close()
            server.wait(timeout=30)
    raise AssertionError("codex app-server gave no hooks/list answer")


PLAN = "# Port the parser\n\n1. Read the grammar\n2. Port it\n"


def _window(body: dict[str, Any]) -> int:
    """The number of the context window a Codex request was made in (0 until a compaction)."""
    metadata = json.loads(body.get("client_metadata", {}).get("x-codex-turn-metadata", "{}"))
    return int(metadata.get("window_number", 0))


@pytest.mark.slow
def test_after_codex_compacts_each_request_carries_the_todo_list_and_the_approved_plan(
        hosts: ClaudeCode, served: ServerProcess) -> None:  # issue 40, acceptance 1
    # Codex exec offers no plan tool of its own (update_plan is interactive only): the list
    # here is the one the ledger holds for the session, written through its tool route, and
    # the plan one a person approved on the ledger's respond route.
    project = project_in(served)
    script: list[list[Any]] = [
        [Text("Planned.")], [ToolUse("exec_command", {"cmd": "ls"})], [Text("Ported.")]]
    with ResponsesModel(script) as model:
        set_up(project, served, model, "--no-mcp")
        first = run_codex(hosts.codex, project, prompt="Plan the port.")
        assert first.returncode == 0, first.stderr[-2000:]
        thread = thread_of(first.json_lines())
        session_id, _events = ledger_session(served, thread)
        todos = [{"content": "Port the lexer", "status": "in_progress", "priority": "high"}]
        with httpx.Client(base_url=served.base_url, timeout=30) as http:
            assert http.post(f"/v1/sessions/{session_id}/tool-calls", json={
                "tool": "TodoWrite", "input": {"todos": todos}}).status_code == 200
            approve_in_ledger(http, session_id, PLAN)
        seen_before = len(model.main_requests())
        second = run_codex(hosts.codex, project, "-c", "model_auto_compact_token_limit=12",
                           resume=thread, prompt="Go on with the port.")
        assert second.returncode == 0, second.stderr[-2000:]
        after = [json.dumps(r.body) for r in model.main_requests()[seen_before:]
                 if _window(r.body) > 0]
    assert after, "Codex did not compact"  # a compaction opens a new context window
    for body in after:
        assert "1. [in_progress] Port the lexer" in body, "a request after it lacks the list"
        assert json.dumps(PLAN)[1:-1] in body, "a request after it lacks the approved plan"
    _id, events = ledger_session(served, thread)
    assert [e for e in events if e["type"] == "ContextCompacted"], "no compaction recorded"


QUESTION = {"questions": [{"question": "Which parser?", "header": "Parser", "multiSelect": False,
                           "options": [{"label": "PEG", "description": "a PEG parser"},
                                       {"label": "LALR", "description": "an LALR parser"}]}]}


def test_codex_reaches_the_ledgers_tools_on_its_first_turn_and_a_person_answers(
        hosts: ClaudeCode, served: ServerProcess) -> None:  # issue 40, acceptance 3
    # setup's MCP entry (serve's /mcp, required): Codex waits for it, the model
    # finds its tools with tool_search on the first turn; a question and then a plan go
    # pending (Codex's headless run declines forms in milliseconds: no person), are answered
    # on the respond route, and the model's next InteractionStatus gets each answer.
    project = project_in(served)
    waiting: queue.Queue[dict[str, Any]] = queue.Queue()
    answered = [threading.Event(), threading.Event()]

    def asked(which: int) -> Any:
        def status(body: Any) -> dict[str, Any]:
            pending = _last_output(body)  # the test thread says what is wrong with it
            waiting.put(pending)
            answered[which].wait(90)
            return {"interactionId": pending.get("interactionId")}
        return status

    script: list[list[Any]] = [
        [Search("ask the user a question")],
        [ToolUse("mcp__sessionledger.AskUserQuestion", QUESTION)],
        [ToolUse("mcp__sessionledger.InteractionStatus", asked(0))],
        [ToolUse("mcp__sessionledger.EnterPlanMode", {})],
        [ToolUse("mcp__sessionledger.ExitPlanMode", {"plan": PLAN})],
        [ToolUse("mcp__sessionledger.InteractionStatus", asked(1))],
        [Text("PEG it is, and the plan is approved.")],
    ]
    answers = [{"decision": "modify", "input": {**QUESTION, "answers": {"Which parser?": "PEG"}}},
               {"decision": "approve"}]
    runs: list[Any] = []
    statuses: list[dict[str, Any]] = []
    with ResponsesModel(script) as model:
        set_up(project, served, model, "--db", served.db_url)
        run = threading.Thread(target=lambda: runs.append(run_codex(hosts.codex, project)))
        run.start()
        try:
            with httpx.Client(base_url=served.base_url, timeout=30) as http:
                for which, answer in enumerate(answers):
                    pending = waiting.get(timeout=90)
                    assert pending["status"] == "pending", pending
                    given = http.post(f"/v1/sessions/{pending['sessionId']}/interactions/"
                                      f"{pending['interactionId']}/respond", json=answer)
                    assert given.status_code == 200, given.text
                    answered[which].set()
        finally:
            for event in answered:
                event.set()
            run.join(120)
        (done,) = runs
        assert done.returncode == 0, done.stderr[-2000:]
        first_tools = _tool_names(model.main_requests()[1].body)
        statuses = [_last_output(r.body) for r in model.main_requests()
                    if _answered_call(r.body) == "InteractionStatus"]
    assert "mcp__sessionledger.AskUserQuestion" in first_tools, first_tools
    hooked, _events = ledger_session(served, thread_of(done.json_lines()))
    assert pending["sessionId"] == hooked  # the ledger's tools ran in its hooks' session
    question, plan = statuses
    assert question["status"] == "completed" and "PEG" in json.dumps(question), question
    assert plan["status"] == "completed" and plan.get("success") is True, plan
    with httpx.Client(base_url=served.base_url, timeout=30) as http:
        events = http.get(f"/v1/sessions/{pending['sessionId']}/events",
                          params={"limit": 1000}).json()["events"]
    resolved = [e["data"]["decision"] for e in events if e["type"] == "InteractionResolved"]
    assert resolved == ["modify", "approve"], resolved  # no decline of Codex's taken for one
    assert [e["data"]["plan"] for e in events if e["type"] == "PlanApproved"] == [PLAN]


def _answered_call(body: Any) -> str | None:
    """The tool whose output ends the request's input, if it ends with one."""
    items = body.get("input", [])
    if len(items) < 2 or items[-1].get("type") != "function_call_output":
        return None
    call = items[-2]
    return str(call.get("name")) if call.get("type") == "function_call" else None


def _last_output(body: Any) -> dict[str, Any]:
    """The ledger's call document in the last tool output the model was sent (``status``
    ``unreadable`` and the text when it holds none)."""
    (last,) = [i for i in body["input"] if i.get("type") == "function_call_output"][-1:]
    text = str(last["output"])
    try:
        document: dict[str, Any] = json.loads(text[text.index("{"):])
    except ValueError:
        return {"status": "unreadable", "text": text}
    return document


def _tool_names(body: Any) -> list[str]:
    from openai_model import _tool_names as names

    found = names(body.get("tools", []))
    for item in body.get("input", []):
        if item.get("type") == "tool_search_output":
            found += names(item.get("tools", []))
    return found


@pytest.mark.parametrize("transport", [
    "http", pytest.param("stdio", marks=pytest.mark.slow)])  # make verify: the stdio one
def test_codexs_hooks_and_the_ledgers_tools_share_one_session_so_its_exitplanmode_leaves_plan(
        hosts: ClaudeCode, served: ServerProcess, tmp_path: Path,
        transport: str) -> None:  # issue 40: one run, one session
    # Codex names its session in every MCP call's _meta: the ledger's MCP server (serve's
    # /mcp, or sessionledger mcp over stdio: setup without --url) runs the call in the
    # session Codex's hooks record into. Plan set on
    # that session refuses a patch; the model asks to leave Plan through the ledger's
    # ExitPlanMode; a person approves that session's plan on the respond route; the same patch
    # is then written. The hooks record no call of the ledger's own tools (the server does).
    project = project_in(served)
    waiting: queue.Queue[dict[str, Any]] = queue.Queue()
    answered = threading.Event()

    def asked(body: Any) -> dict[str, Any]:
        pending = _last_output(body)
        waiting.put(pending)
        answered.wait(90)
        return {"interactionId": pending.get("interactionId")}

    script: list[list[Any]] = [
        [ToolUse("exec_command", {"cmd": "ls"})],
        [Text("Looked.")],
        [Custom("apply_patch", PATCH)],
        [Search("leave plan mode")],
        [ToolUse("mcp__sessionledger.ExitPlanMode", {"plan": PLAN})],
        [ToolUse("mcp__sessionledger.InteractionStatus", asked)],
        [Custom("apply_patch", PATCH)],
        [Text("Written.")],
    ]
    runs: list[Any] = []
    before = _session_ids(served)
    with ResponsesModel(script) as model:
        set_up(project, served, model, "--db", served.db_url, url=transport == "http")
        thread, session_id = looked_around_then_plan(hosts, project, served)
        with httpx.Client(base_url=served.base_url, timeout=30) as http:
            second = threading.Thread(target=lambda: runs.append(run_codex(
                hosts.codex, project, resume=thread, prompt="Write the notes.")))
            second.start()
            try:
                pending = waiting.get(timeout=120)
                assert pending.get("status") == "pending", pending
                assert pending["sessionId"] == session_id, pending  # the hooks' session
                given = http.post(f"/v1/sessions/{session_id}/interactions/"
                                  f"{pending['interactionId']}/respond",
                                  json={"decision": "approve"})
                assert given.status_code == 200, given.text
            finally:
                answered.set()
                second.join(120)
        (done,) = runs
        assert done.returncode == 0, done.stderr[-2000:]
        shown = [str(item.get("output")) for item in model.tool_outputs().values()]
    assert (project / "notes.txt").read_text(encoding="utf-8") == "written by the model\n"
    assert len([text for text in shown if "Plan mode" in text]) == 1, shown
    _id, events = ledger_session(served, thread)
    requested = {e["data"]["callId"]: e["data"]["tool"] for e in events
                 if e["type"] == "ToolCallRequested"}
    assert not [t for t in requested.values() if "sessionledger" in t], requested
    assert "ExitPlanMode" in requested.values(), requested
    decided = [(requested[e["data"]["callId"]], e["data"]["decision"]["behavior"])
               for e in events if e["type"] == "PermissionDecided"
               and requested[e["data"]["callId"]] == "apply_patch"]
    assert decided == [("apply_patch", "deny"), ("apply_patch", "allow")], decided
    assert [e["data"]["plan"] for e in events if e["type"] == "PlanApproved"] == [PLAN]
    assert [e for e in events if e["type"] == "SessionModeChanged"][-1]["data"][
        "planEnabled"] is False
    assert _session_ids(served) - before == {session_id}  # and no second one
    # its rollout imported into this session adds no call (the ledger's tool calls included)
    (rollout,) = (project / ".home" / ".codex" / "sessions").rglob("rollout-*.jsonl")
    imported("codex", [rollout], served.db_url, served.workspace, tmp_path)
    _id, after = ledger_session(served, thread)
    assert outcomes_of(after) == outcomes_of(events)


def _session_ids(served: ServerProcess) -> set[str]:
    with httpx.Client(base_url=served.base_url, timeout=30) as http:
        listed = http.get("/v1/sessions", params={"limit": 1000}).json()["sessions"]
    return {str(s["sessionId"]) for s in listed}
