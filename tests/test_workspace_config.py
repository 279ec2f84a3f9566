"""The workspace configuration file ``.sessionledger/config.toml`` (SPEC TR-4, LM-1's catalog).

A full valid file loads into typed, frozen models; a missing file means the defaults; every
kind of invalid configuration is a ``ConfigurationError`` whose message names the key.
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from pydantic import ValidationError
from server_support import (
    ServerProcess,
    create_session,
    running_server,
    session_version,
    sessionledger_command,
)

from sessionledger.config.workspace import (
    CONFIG_PATH,
    WorkspaceConfig,
    config_path,
    load_workspace_config,
)
from sessionledger.errors import ConfigurationError, OutOfDescriptors
from sessionledger.permission import RulePattern
from sessionledger.permission.descriptors import SERVICE_TOOLS, host_tool
from sessionledger.tools.service import WorkspacePermissions
from statemachine.execution import ExecutionState

VALID = """
[permission]
disallowedTools = ["WebFetch"]
allowedTools = ["mcp__github__get_*"]
allow = ["Bash(git *)", "Read(src/**)"]
ask = ["Bash(npm publish*)"]
deny = ["Read(.env)", "mcp__prod__*"]
webFetchPreapproved = ["docs.python.org", "PyPI.org."]

[features]
dynamicWorkflows = true

[models]
current = "anthropic/claude-sonnet"

[[models.providers]]
id = "anthropic"
name = "Anthropic"

[[models.providers.models]]
id = "claude-sonnet"
name = "Claude Sonnet"
contextWindow = 200000
reasoningLevels = ["low", "medium", "high"]
defaultLevel = "medium"

[[models.providers.models]]
id = "claude-opus"
disabled = "no API key configured"

[[models.providers]]
id = "local"
"""


def write_config(workspace: Path, text: str | bytes) -> Path:
    path = config_path(workspace)
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def test_tr4_a_valid_file_loads_into_typed_models(tmp_path: Path) -> None:
    write_config(tmp_path, VALID)
    config = load_workspace_config(tmp_path)
    permission = config.permission
    assert permission.disallowed_tools == (RulePattern("WebFetch"),)
    assert permission.allow == (RulePattern("Bash", "git *"), RulePattern("Read", "src/**"))
    assert [str(p) for p in permission.deny] == ["Read(.env)", "mcp__prod__*"]
    assert permission.web_fetch_preapproved == ("docs.python.org", "pypi.org")
    assert config.features.dynamic_workflows is True
    assert config.models is not None
    assert config.models.current == "anthropic/claude-sonnet"
    anthropic, local = config.models.providers
    sonnet, opus = anthropic.models
    assert (sonnet.context_window, sonnet.reasoning_levels, sonnet.default_level) == (
        200000, ("low", "medium", "high"), "medium")
    assert opus.disabled == "no API key configured" and sonnet.disabled is None
    assert (local.display_name, local.models) == ("local", ())
    with pytest.raises(ValidationError):
        config.features.dynamic_workflows = False  # type: ignore[misc]


def test_tr4_a_missing_file_means_the_defaults(tmp_path: Path) -> None:
    config = load_workspace_config(tmp_path)
    assert config == WorkspaceConfig()
    assert config.permission.allow == () and config.features.dynamic_workflows is False
    assert config.models is None
    assert CONFIG_PATH.as_posix() == ".sessionledger/config.toml"


def test_tr4_an_empty_file_and_empty_tables_mean_the_defaults(tmp_path: Path) -> None:
    write_config(tmp_path, "[permission]\n[features]\n")
    assert load_workspace_config(tmp_path) == WorkspaceConfig()


MODEL = '[[models.providers]]\nid = "p"\n[[models.providers.models]]\nid = "m"\n'
INVALID = [
    ("unknown top-level table", "[colors]\nx = 1", "colors: unknown key"),
    ("unknown permission key", "[permission]\nallowed = []", "permission.allowed: unknown key"),
    ("snake case key", "[permission]\ndisallowed_tools = []",
     "permission.disallowed_tools: unknown key"),
    ("unknown feature", "[features]\nturbo = true", "features.turbo: unknown key"),
    ("table expected", "permission = 3", "permission: expected a table"),
    ("list expected", "[permission]\nallow = \"Write\"", "permission.allow: expected a list"),
    ("pattern not a string", "[permission]\ndeny = [\"Write\", 3]",
     "permission.deny[1]: a pattern must be a string"),
    ("unclosed pattern", "[permission]\nallow = [\"Write\", \"Read\", \"Bash(git *\"]",
     "permission.allow[2]: pattern 'Bash(git *': missing closing ')'"),
    ("empty pattern", "[permission]\nask = [\"\"]", "permission.ask[0]: empty pattern"),
    ("empty argument", "[permission]\nallowedTools = [\"Bash()\"]",
     "permission.allowedTools[0]: pattern 'Bash()': empty argument"),
    ("bad tool name", "[permission]\ndisallowedTools = [\"Web Fetch\"]",
     "permission.disallowedTools[0]: pattern 'Web Fetch': tool name"),
    ("trailing text", "[permission]\ndeny = [\"Bash(rm *) x\"]",
     "permission.deny[0]: pattern 'Bash(rm *) x': missing closing ')'"),
    ("domain with scheme", "[permission]\nwebFetchPreapproved = [\"https://docs.python.org\"]",
     "permission.webFetchPreapproved[0]: 'https://docs.python.org' is not a domain name"),
    ("domain wildcard", "[permission]\nwebFetchPreapproved = [\"*.python.org\"]",
     "permission.webFetchPreapproved[0]:"),
    ("string for bool", "[features]\ndynamicWorkflows = \"false\"",
     "features.dynamicWorkflows: expected true or false"),
    ("int for bool", "[features]\ndynamicWorkflows = 1",
     "features.dynamicWorkflows: expected true or false"),
    ("providers not a list", "[models]\nproviders = 3", "models.providers: expected a list"),
    ("provider id with slash", '[[models.providers]]\nid = "a/b"',
     "models.providers[0].id: an id must not be empty or contain"),
    ("provider without id", '[[models.providers]]\nname = "x"', "models.providers[0].id:"),
    ("duplicate provider", '[[models.providers]]\nid = "a"\n[[models.providers]]\nid = "A"',
     "models.providers[1].id: duplicate id 'A'"),
    ("duplicate model", MODEL + '[[models.providers.models]]\nid = "M"',
     "models.providers[0].models[1].id: duplicate id"),
    ("context window zero", MODEL + "contextWindow = 0",
     "models.providers[0].models[0].contextWindow:"),
    ("context window text", MODEL + 'contextWindow = "big"',
     "models.providers[0].models[0].contextWindow: expected an integer"),
    ("default level unknown", MODEL + 'reasoningLevels = ["low"]\ndefaultLevel = "high"',
     "models.providers[0].models[0].defaultLevel: 'high' is not one of reasoningLevels"),
    ("levels repeated", MODEL + 'reasoningLevels = ["low", "low"]',
     "models.providers[0].models[0].reasoningLevels: levels must be unique"),
    ("empty disabled reason", MODEL + 'disabled = ""',
     "models.providers[0].models[0].disabled: must not be empty"),
    ("unknown model key", MODEL + "price = 3", "models.providers[0].models[0].price: unknown key"),
    ("current not listed", MODEL + '[models]\ncurrent = "p/other"',
     "models.current: 'p/other' is not a listed model"),
]


@pytest.mark.parametrize(("text", "expected"), [(t, e) for _, t, e in INVALID],
                         ids=[name for name, _, _ in INVALID])
def test_tr4_invalid_configuration_names_the_key(
    text: str, expected: str, tmp_path: Path
) -> None:
    path = write_config(tmp_path, text)
    with pytest.raises(ConfigurationError) as caught:
        load_workspace_config(tmp_path)
    assert expected in caught.value.message
    assert str(path) in caught.value.message
    assert caught.value.details["errors"][0]["key"] == expected.split(":")[0]
    assert caught.value.exit_code == 2


def test_tr4_every_invalid_key_is_reported_at_once(tmp_path: Path) -> None:
    write_config(tmp_path, '[permission]\nallow = ["Bash("]\ndeny = [1]\n[features]\nx = 1')
    with pytest.raises(ConfigurationError) as caught:
        load_workspace_config(tmp_path)
    keys = [e["key"] for e in caught.value.details["errors"]]
    assert keys == ["permission.allow[0]", "permission.deny[0]", "features.x"]


@pytest.mark.parametrize(("content", "expected"), [
    (b"[permission\nallow = []", "is not valid TOML"),
    (b"allow = [", "is not valid TOML"),
    (b"[permission]\nallow = [\"\xff\"]", "is not UTF-8"),
])
def test_tr4_a_file_that_is_not_toml_is_a_clear_error(
    content: bytes, expected: str, tmp_path: Path
) -> None:
    write_config(tmp_path, content)
    with pytest.raises(ConfigurationError, match=expected):
        load_workspace_config(tmp_path)


def test_tr4_an_unreadable_config_path_is_a_clear_error(tmp_path: Path) -> None:
    config_path(tmp_path).mkdir(parents=True)
    with pytest.raises(ConfigurationError, match="cannot read"):
        load_workspace_config(tmp_path)


# -- the rules in use: reloaded on change, decisions without an argument kept (D73) ---------


def test_tr4_a_decision_without_an_argument_is_kept_until_the_rules_change(
    tmp_path: Path,
) -> None:
    permissions = WorkspacePermissions()
    todo_write = SERVICE_TOOLS["TodoWrite"]
    build = ExecutionState("build")
    first = permissions.decide(tool=todo_write, input={"todos": []}, state=build,
                               workspace=tmp_path)
    again = permissions.decide(tool=todo_write, input={"todos": [{"content": "x"}]},
                               state=build, workspace=tmp_path)
    assert first.behavior == "allow" and again is first  # kept: the input cannot matter
    plan = permissions.decide(tool=todo_write, input={}, state=ExecutionState(plan_enabled=True),
                              workspace=tmp_path)
    assert plan == first and plan is not first  # another state is decided afresh
    path = config_path(tmp_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text('[permission]\ndeny = ["TodoWrite"]\n', encoding="utf-8")
    os.utime(path, (1_000_000, 1_000_000))  # a new stamp even on a coarse clock
    denied = permissions.decide(tool=todo_write, input={"todos": []}, state=build,
                                workspace=tmp_path)
    assert denied.behavior == "deny" and denied.rule_id == "config.deny[0]"
    # A call with a path is decided every time: the rules may match the path.
    write = host_tool("Write")
    assert write is not None
    inside = permissions.decide(tool=write, input={"file_path": str(tmp_path / "a.txt")},
                                state=ExecutionState("edit"), workspace=tmp_path)
    outside = permissions.decide(tool=write, input={"file_path": "/elsewhere/a.txt"},
                                 state=ExecutionState("edit"), workspace=tmp_path)
    assert inside.behavior == "allow" and outside.behavior == "ask"


# -- a broken file over the wire: 422 naming the key, nothing appended (EG-2) -----------------

BROKEN: list[tuple[str, str | bytes | None, str]] = [
    ("wrong type in a list", "[permission]\nallowedTools = [42]\n", "permission.allowedTools[0]"),
    ("a string for a list", '[permission]\nallow = "Bash(ls)"\n', "permission.allow"),
    ("a bad pattern", '[permission]\ndeny = ["Read", "Bash("]\n', "permission.deny[1]"),
    ("a string for a boolean", '[features]\ndynamicWorkflows = "yes"\n',
     "features.dynamicWorkflows"),
    ("an unknown key", "[permission]\nalow = []\n", "permission.alow"),
    ("an unknown table", "[permissions]\nallow = []\n", "permissions"),
    ("an unlisted current model", '[models]\ncurrent = "x/y"\n', "models.current"),
    ("not TOML", "[permission\nallow = []\n", "(file)"),
    ("not UTF-8", b'[permission]\nallow = ["\xff"]\n', "(file)"),
    ("a directory named config.toml", None, "(file)"),
]


def _break(workspace: Path, content: str | bytes | None) -> None:
    if content is None:
        path = config_path(workspace)
        if path.is_file():
            path.unlink()
        path.mkdir(parents=True, exist_ok=True)
    else:
        write_config(workspace, content)


def _repair(workspace: Path) -> None:
    path = config_path(workspace)
    if path.is_dir():
        path.rmdir()
    write_config(workspace, "[permission]\nallow = []\n")


def _names_the_key(response: httpx.Response, key: str) -> None:
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["code"] == "invalid_configuration"
    assert [e["key"] for e in error["details"]["errors"]] == [key]
    assert key in error["message"]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with running_server(tmp_path_factory.mktemp("config-server")) as running:
        yield running


@pytest.mark.parametrize(("case", "content", "key"), BROKEN, ids=[c[0] for c in BROKEN])
def test_eg2_a_broken_config_refuses_the_session_with_422_naming_the_key(
    server: ServerProcess, case: str, content: str | bytes | None, key: str
) -> None:  # EG-2, TR-4
    workspace = server.workspace / f"at-creation-{BROKEN.index((case, content, key))}"
    workspace.mkdir()
    _break(workspace, content)
    with server.client() as http:
        before = http.get("/v1/sessions").json()
        _names_the_key(http.post("/v1/sessions", json={"workspace": workspace.name}), key)
        assert http.get("/v1/sessions").json() == before  # nothing appended
        _repair(workspace)
        assert http.post("/v1/sessions", json={"workspace": workspace.name}).status_code == 201


TODO_CALL = {"tool": "TodoWrite", "input": {"todos": [
    {"content": "Fix the config", "status": "pending", "priority": "high"}]}}


@pytest.mark.parametrize(("case", "content", "key"), BROKEN, ids=[c[0] for c in BROKEN])
def test_eg2_a_config_broken_later_refuses_every_call_with_422_and_allows_nothing(
    server: ServerProcess, case: str, content: str | bytes | None, key: str
) -> None:  # EG-2, TR-4
    workspace = server.workspace / f"later-{BROKEN.index((case, content, key))}"
    workspace.mkdir()
    with server.client() as http:
        session = create_session(http, workspace=workspace.name, mode="plan")
        _break(workspace, content)
        before = session_version(http, session)
        calls = [
            ("/tool-calls", TODO_CALL),
            ("/tool-calls", {"tool": "ExitPlanMode", "input": {"plan": "# Plan"}}),
            ("/permission-check", {"tool": "Bash", "input": {"command": "ls"}}),
            ("/permission-check", {"tool": "Write", "input": {"file_path": "x.py"}}),
        ]
        for path, body in calls:
            _names_the_key(http.post(f"/v1/sessions/{session}{path}", json=body), key)
        child = http.post("/v1/sessions",
                          json={"parentSessionId": session, "workspace": workspace.name})
        _names_the_key(child, key)  # nor a subagent in the same workspace
        assert session_version(http, session) == before
        _repair(workspace)
        answer = http.post(f"/v1/sessions/{session}/tool-calls", json=TODO_CALL)
        assert answer.status_code == 200, answer.text


def test_eg2_the_cli_refuses_a_call_in_a_broken_workspace_naming_the_key(
    server: ServerProcess,
) -> None:  # EG-2: the same error from the CLI, exit 2
    workspace = server.workspace / "cli"
    workspace.mkdir()
    with server.client() as http:
        session = create_session(http, workspace=workspace.name)
        write_config(workspace, "[permission]\nallowedTools = [42]\n")
        before = session_version(http, session)
        done = subprocess.run(
            [*sessionledger_command(), "call", "--db", server.db_url, session, "TodoWrite",
             "--input", json.dumps(TODO_CALL["input"])],
            capture_output=True, text=True, timeout=60, check=False,
        )
        assert done.returncode == 2, done.stdout + done.stderr
        assert "permission.allowedTools[0]" in done.stderr
        assert "Traceback" not in done.stderr
        assert session_version(http, session) == before


def test_eg5_no_descriptor_left_reading_the_config_is_service_unavailable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:  # EG-5: running out of descriptors is never blamed on the file
    write_config(tmp_path, "[permission]\nallowedTools = []\n")

    def exhausted(self: Path) -> bytes:
        raise OSError(errno.EMFILE, "Too many open files")

    monkeypatch.setattr(Path, "read_bytes", exhausted)
    with pytest.raises(OutOfDescriptors) as caught:
        load_workspace_config(tmp_path)
    assert caught.value.status == 503 and caught.value.code == "service_unavailable"
