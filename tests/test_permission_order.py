"""The permission service against the SPEC's order of checks (PM-1 … PM-4, AQ-5, TR-3, TR-4).

The acceptance table crosses every mode, planEnabled, tool class and rule combination (no
rule, one rule, or two rules of the five project-rule kinds, each naming the tool) and
compares the service with :func:`reference`, a plain reading of the SPEC text written without
the service's code. Explicit rows then pin the cases the issue names, exact texts included.
"""

from __future__ import annotations

import importlib
import itertools
import re
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from eventlog import PermissionMode
from sessionledger import permission
from sessionledger.config.workspace import parse_workspace_config
from sessionledger.permission import (
    RULE_IDS,
    PermissionConfig,
    PermissionDecision,
    PermissionRequest,
    PermissionService,
    parse_pattern,
)
from sessionledger.permission.descriptors import named_tool
from sessionledger.tools import HOST_TOOLS, SERVICE_TOOLS, ToolDescriptor, mcp_tool
from statemachine.execution import ExecutionState

MODES: tuple[PermissionMode, ...] = ("build", "edit", "yolo", "auto")
RULE_KINDS = ("disallowedTools", "deny", "ask", "allow", "allowedTools")
PREAPPROVED = ["python.org"]


@dataclass(frozen=True)
class Case:
    """A tool class with its facts labelled by hand from the SPEC (TR-2, TR-3, PM-4)."""

    tool: ToolDescriptor
    input: dict[str, Any] = field(default_factory=dict)
    read_only: bool = False
    destructive: bool = False
    edit_inside: bool | None = None
    """``None``: not a file edit; else whether the path lies inside the workspace."""
    network: bool = False
    preapproved: bool = False


def _mcp(name: str, *, read_only: bool, destructive: bool = False) -> ToolDescriptor:
    return mcp_tool(name, read_only=read_only, destructive=destructive)


CASES: dict[str, Case] = {
    "read": Case(HOST_TOOLS["Read"], {"file_path": "src/app.py"}, read_only=True),
    "grep": Case(HOST_TOOLS["Grep"], {"pattern": "TODO", "path": "src"}, read_only=True),
    "write_inside": Case(HOST_TOOLS["Write"], {"file_path": "src/new.py"}, edit_inside=True),
    "edit_outside": Case(HOST_TOOLS["Edit"], {"file_path": "../other/x.py"}, edit_inside=False),
    "bash_read_only": Case(HOST_TOOLS["Bash"], {"command": "git status && ls -la | wc -l"},
                           read_only=True),
    "bash_write": Case(HOST_TOOLS["Bash"], {"command": "npm install"}),
    "bash_destructive": Case(HOST_TOOLS["Bash"], {"command": "rm -rf build"}, destructive=True),
    "mcp_read_only": Case(_mcp("mcp__github__get_issue", read_only=True), read_only=True),
    "mcp_write": Case(_mcp("mcp__github__create_issue", read_only=False)),
    "mcp_destructive": Case(_mcp("mcp__github__delete_repo", read_only=False, destructive=True),
                            destructive=True),
    "webfetch_preapproved": Case(HOST_TOOLS["WebFetch"], {"url": "https://docs.python.org/3/"},
                                 read_only=True, network=True, preapproved=True),
    "webfetch_other": Case(HOST_TOOLS["WebFetch"], {"url": "https://example.com/"},
                           read_only=True, network=True),
    "ask_user_question": Case(SERVICE_TOOLS["AskUserQuestion"], read_only=True),
    "enter_plan_mode": Case(SERVICE_TOOLS["EnterPlanMode"]),
    "exit_plan_mode": Case(SERVICE_TOOLS["ExitPlanMode"]),
    "todo_write": Case(SERVICE_TOOLS["TodoWrite"], read_only=True),
    "todo_read": Case(SERVICE_TOOLS["TodoRead"], read_only=True),
}
USER_INTERACTION = {"AskUserQuestion", "ExitPlanMode"}
PLAN_CONTROLS = {"TodoWrite", "EnterPlanMode", "ExitPlanMode"}
RULE_SETS = [set(c) for n in range(3) for c in itertools.combinations(RULE_KINDS, n)]


def reference(mode: str, plan: bool, case: Case, rules: set[str]) -> tuple[str, str]:
    """SPEC PM-3's order read literally; every rule names the tool at list index 1."""
    name = case.tool.name
    if "disallowedTools" in rules:
        return "deny", "config.disallowedTools"
    if name == "EnterPlanMode":  # PM-1
        return "allow", "tool.plan.enter"
    if name == "ExitPlanMode" and not plan:  # PM-2
        return "deny", "mode.plan.exitOnly"
    if name in USER_INTERACTION:  # AQ-5
        return "ask", "tool.requiresUserInteraction"
    for kind, behavior in (("deny", "deny"), ("ask", "ask")):
        if kind in rules:
            return behavior, f"config.{kind}[1]"
    plan_passes = (case.read_only and not case.destructive) or name in PLAN_CONTROLS
    if plan and not plan_passes:
        return "deny", "mode.plan.denyWrites"
    if "allow" in rules:
        return "allow", "config.allow[1]"
    if case.preapproved:
        return "allow", "webfetch.preapproved"
    if "allowedTools" in rules:
        return "allow", "config.allowedTools"
    return _mode_default(mode, case)


def _mode_default(mode: str, case: Case) -> tuple[str, str]:
    """PM-4: read-only allowed everywhere (network reads ask in build/edit), then the mode."""
    if case.read_only and not case.network:
        return "allow", "tool.readOnly"
    if mode == "yolo":
        return "allow", "mode.yolo.allowAll"
    if case.network and mode in ("build", "edit"):
        return "ask", f"mode.{mode}.askNetwork"
    if mode == "build":
        return "ask", "mode.build.askWrites"
    if case.edit_inside is not None:
        if case.edit_inside:
            return "allow", f"mode.{mode}.allowWorkspaceEdits"
        return "ask", f"mode.{mode}.askOutsideWorkspace"
    if mode == "edit":
        return "ask", "mode.edit.askShell" if case.tool.shell else "mode.edit.askWrites"
    if case.destructive:
        return "ask", "mode.auto.askDestructive"
    return "allow", "mode.auto.allowNonDestructive"


def config_for(name: str, rules: set[str]) -> PermissionConfig:
    """Each named rule list holds a pattern that does not match, then the tool's name."""
    data: dict[str, Any] = {kind: ["NoSuchTool", name] for kind in rules}
    data["webFetchPreapproved"] = PREAPPROVED
    return PermissionConfig.model_validate(data)


def check(
    case: Case, *, mode: PermissionMode = "build", plan: bool = False,
    config: PermissionConfig | None = None, workspace: Path,
) -> PermissionDecision:
    request = PermissionRequest(
        tool=case.tool, input=case.input, state=ExecutionState(mode=mode, plan_enabled=plan),
        workspace=workspace,
    )
    return PermissionService(config).check(request)


@pytest.mark.parametrize("case_name", sorted(CASES))
@pytest.mark.parametrize("plan", [False, True], ids=["noPlan", "plan"])
@pytest.mark.parametrize("mode", MODES)
def test_pm3_pm4_aq5_table_matches_the_spec_order(
    mode: PermissionMode, plan: bool, case_name: str, tmp_path: Path
) -> None:
    case = CASES[case_name]
    mismatches = []
    for rules in RULE_SETS:
        config = config_for(case.tool.name, rules)
        decision = check(case, mode=mode, plan=plan, config=config, workspace=tmp_path)
        expected = reference(mode, plan, case, rules)
        if (decision.behavior, decision.rule_id) != expected:
            mismatches.append((sorted(rules), expected, decision))
    assert not mismatches


def test_tr3_every_rule_id_the_table_produces_is_documented(tmp_path: Path) -> None:
    seen = set()
    for mode, plan, case, rules in itertools.product(MODES, (False, True), CASES.values(),
                                                     RULE_SETS):
        config = config_for(case.tool.name, rules)
        decision = check(case, mode=mode, plan=plan, config=config, workspace=tmp_path)
        seen.add(re.sub(r"\[\d+\]", "[<i>]", decision.rule_id))
        assert decision.reason
    # The host's own plan file: only a request that names the host's plans folder reaches it.
    plans = tmp_path / "claude" / "plans"
    for plan, expected in ((True, "mode.plan.hostPlanFile"), (False, "mode.build.askWrites")):
        request = PermissionRequest(
            tool=named_tool("Write"), input={"file_path": str(plans / "p.md"), "content": "x"},
            state=ExecutionState(plan_enabled=plan), workspace=tmp_path, plan_files=plans)
        decision = PermissionService(PermissionConfig()).check(request)
        assert decision.rule_id == expected, decision
        seen.add(decision.rule_id)
    assert seen == set(RULE_IDS)


# -- explicit rows: the cases the issue names ------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_aq5_ask_user_question_asks_in_every_mode_yolo_included(
    mode: PermissionMode, tmp_path: Path
) -> None:
    decision = check(CASES["ask_user_question"], mode=mode, workspace=tmp_path)
    assert (decision.behavior, decision.rule_id) == ("ask", "tool.requiresUserInteraction")


def test_aq5_exit_plan_mode_in_plan_asks_in_yolo_even_with_allow_rules(tmp_path: Path) -> None:
    config = config_for("ExitPlanMode", {"allow", "allowedTools"})
    decision = check(CASES["exit_plan_mode"], mode="yolo", plan=True, config=config,
                     workspace=tmp_path)
    assert (decision.behavior, decision.rule_id) == ("ask", "tool.requiresUserInteraction")


def test_aq5_disallowed_tools_denies_a_user_interaction_tool(tmp_path: Path) -> None:
    config = config_for("AskUserQuestion", {"disallowedTools"})
    decision = check(CASES["ask_user_question"], mode="yolo", config=config, workspace=tmp_path)
    assert (decision.behavior, decision.rule_id) == ("deny", "config.disallowedTools")


@pytest.mark.parametrize("plan", [False, True])
def test_pm1_enter_plan_mode_is_allowed_with_the_exact_reason(plan: bool, tmp_path: Path) -> None:
    decision = check(CASES["enter_plan_mode"], plan=plan, workspace=tmp_path)
    assert decision.to_wire() == {
        "behavior": "allow",
        "reason": "EnterPlanMode switches to plan mode without a permission prompt",
        "ruleId": "tool.plan.enter",
    }


@pytest.mark.parametrize("mode", MODES)
def test_pm2_exit_plan_mode_outside_plan_is_denied_with_the_exact_reason(
    mode: PermissionMode, tmp_path: Path
) -> None:
    decision = check(CASES["exit_plan_mode"], mode=mode, workspace=tmp_path)
    assert decision.to_wire() == {
        "behavior": "deny",
        "reason": "ExitPlanMode can only be used while plan mode is active",
        "ruleId": "mode.plan.exitOnly",
    }


@pytest.mark.parametrize("case_name", ["enter_plan_mode", "read", "todo_read", "mcp_read_only"])
def test_pm3_disallowed_tools_beats_everything(case_name: str, tmp_path: Path) -> None:
    case = CASES[case_name]
    config = config_for(case.tool.name, {"disallowedTools", "allow", "allowedTools"})
    decision = check(case, mode="yolo", config=config, workspace=tmp_path)
    assert (decision.behavior, decision.rule_id) == ("deny", "config.disallowedTools")


@pytest.mark.parametrize("case_name", ["write_inside", "bash_write", "mcp_write",
                                       "bash_destructive", "mcp_destructive"])
def test_pm3_plan_denies_writes_not_asks_even_in_yolo_with_allow_rules(
    case_name: str, tmp_path: Path
) -> None:
    case = CASES[case_name]
    config = config_for(case.tool.name, {"allow", "allowedTools"})
    decision = check(case, mode="yolo", plan=True, config=config, workspace=tmp_path)
    assert (decision.behavior, decision.rule_id) == ("deny", "mode.plan.denyWrites")


def test_pm3_project_deny_rule_beats_the_plan_check(tmp_path: Path) -> None:
    config = PermissionConfig.model_validate({"deny": ["Read(secrets/**)", "Write"]})
    decision = check(CASES["write_inside"], plan=True, config=config, workspace=tmp_path)
    assert (decision.behavior, decision.rule_id) == ("deny", "config.deny[1]")


def test_pm3_project_ask_rule_beats_the_plan_check_for_a_read_only_tool(tmp_path: Path) -> None:
    config = PermissionConfig.model_validate({"ask": ["Read(src/**)"]})
    decision = check(CASES["read"], mode="yolo", plan=True, config=config, workspace=tmp_path)
    assert (decision.behavior, decision.rule_id) == ("ask", "config.ask[0]")


def test_pm3_allow_rule_beats_the_mode_default_but_not_plan(tmp_path: Path) -> None:
    config = PermissionConfig.model_validate({"allow": ["Bash(npm *)"]})
    outside = check(CASES["bash_write"], mode="build", config=config, workspace=tmp_path)
    assert (outside.behavior, outside.rule_id) == ("allow", "config.allow[0]")
    inside = check(CASES["bash_write"], mode="build", plan=True, config=config,
                   workspace=tmp_path)
    assert (inside.behavior, inside.rule_id) == ("deny", "mode.plan.denyWrites")


@pytest.mark.parametrize(("command", "behavior"), [
    ("git log --oneline | head -5", "allow"),
    ("grep -rn TODO src", "allow"),
    ("ls > listing.txt", "deny"),
    ("git commit -m wip", "deny"),
    ("echo $(whoami)", "deny"),
])
def test_pm3_bash_in_plan_passes_only_when_the_classifier_says_read_only(
    command: str, behavior: str, tmp_path: Path
) -> None:
    case = Case(HOST_TOOLS["Bash"], {"command": command})
    assert check(case, mode="yolo", plan=True, workspace=tmp_path).behavior == behavior


def test_pm3_allow_pattern_must_match_every_simple_command(tmp_path: Path) -> None:
    config = PermissionConfig.model_validate({"allow": ["Bash(git *)"]})
    for command, rule_id in [("git commit -m x && git push", "config.allow[0]"),
                             ("git commit -m x && npm publish", "mode.build.askWrites"),
                             ("git commit -m \"$(date)\"", "mode.build.askWrites")]:
        case = Case(HOST_TOOLS["Bash"], {"command": command})
        assert check(case, config=config, workspace=tmp_path).rule_id == rule_id, command


def test_pm3_deny_pattern_matches_any_simple_command(tmp_path: Path) -> None:
    config = PermissionConfig.model_validate({"deny": ["Bash(npm publish*)"]})
    case = Case(HOST_TOOLS["Bash"], {"command": "ls; 'npm'  publish --tag next"})
    decision = check(case, mode="yolo", config=config, workspace=tmp_path)
    assert (decision.behavior, decision.rule_id) == ("deny", "config.deny[0]")


def test_tr4_path_patterns_match_inside_the_workspace_only(tmp_path: Path) -> None:
    config = PermissionConfig.model_validate({"deny": ["Read(src/**)", "Read(/etc/**)"]})
    rows = [("src/a/b.py", "config.deny[0]"), (str(tmp_path / "src" / "x.py"), "config.deny[0]"),
            ("src", "config.deny[0]"), ("lib/../src/y.py", "config.deny[0]"),
            ("../src/z.py", "tool.readOnly"), ("/etc/passwd", "config.deny[1]"),
            ("docs/src/a.py", "tool.readOnly")]
    for path, rule_id in rows:
        case = Case(HOST_TOOLS["Read"], {"file_path": path})
        assert check(case, config=config, workspace=tmp_path).rule_id == rule_id, path


def test_tr4_mcp_server_glob_and_path_key(tmp_path: Path) -> None:
    config = PermissionConfig.model_validate({"ask": ["mcp__github__*"]})
    decision = check(CASES["mcp_read_only"], mode="yolo", config=config, workspace=tmp_path)
    assert decision.rule_id == "config.ask[0]"
    edit = Case(HOST_TOOLS["Edit"], {"path": "src/a.py"})
    assert check(edit, mode="edit", workspace=tmp_path).rule_id == "mode.edit.allowWorkspaceEdits"


@pytest.mark.parametrize(("url", "rule_id"), [
    ("https://docs.python.org/3/library/", "webfetch.preapproved"),
    ("http://python.org", "webfetch.preapproved"),
    ("https://PYTHON.ORG./x", "webfetch.preapproved"),
    ("https://evilpython.org/", "mode.build.askNetwork"),
    ("https://python.org.evil.example/", "mode.build.askNetwork"),
    ("ftp://python.org/", "mode.build.askNetwork"),
    ("not a url", "mode.build.askNetwork"),
])
def test_tr3_webfetch_preapproval_covers_the_domain_and_its_subdomains(
    url: str, rule_id: str, tmp_path: Path
) -> None:
    config = PermissionConfig.model_validate({"webFetchPreapproved": PREAPPROVED})
    case = Case(HOST_TOOLS["WebFetch"], {"url": url})
    assert check(case, config=config, workspace=tmp_path).rule_id == rule_id


def test_tr4_allowed_tools_allow_after_allow_rules_and_before_the_mode_default(
    tmp_path: Path
) -> None:
    config = PermissionConfig.model_validate({"allowedTools": ["Edit", "Bash(make *)"]})
    write = check(CASES["edit_outside"], config=config, workspace=tmp_path)
    assert (write.behavior, write.rule_id) == ("allow", "config.allowedTools")
    make = Case(HOST_TOOLS["Bash"], {"command": "make test && make lint"})
    assert check(make, config=config, workspace=tmp_path).rule_id == "config.allowedTools"
    npm = Case(HOST_TOOLS["Bash"], {"command": "make test && npm publish"})
    assert check(npm, config=config, workspace=tmp_path).rule_id == "mode.build.askWrites"


MODE_DEFAULTS = {
    # case: (build, edit, yolo, auto)
    "read": ("allow", "allow", "allow", "allow"),
    "write_inside": ("ask", "allow", "allow", "allow"),
    "edit_outside": ("ask", "ask", "allow", "ask"),
    "bash_read_only": ("allow", "allow", "allow", "allow"),
    "bash_write": ("ask", "ask", "allow", "allow"),
    "bash_destructive": ("ask", "ask", "allow", "ask"),
    "mcp_read_only": ("allow", "allow", "allow", "allow"),
    "mcp_write": ("ask", "ask", "allow", "allow"),
    "mcp_destructive": ("ask", "ask", "allow", "ask"),
    "webfetch_other": ("ask", "ask", "allow", "allow"),
}


@pytest.mark.parametrize(("case_name", "mode"), list(itertools.product(MODE_DEFAULTS, MODES)))
def test_pm4_mode_defaults_outside_plan(
    case_name: str, mode: PermissionMode, tmp_path: Path
) -> None:
    expected = MODE_DEFAULTS[case_name][MODES.index(mode)]
    assert check(CASES[case_name], mode=mode, workspace=tmp_path).behavior == expected


def test_tr3_decision_wire_shape_and_recorded_verdict(tmp_path: Path) -> None:
    decision = check(CASES["bash_write"], workspace=tmp_path)
    assert set(decision.to_wire()) == {"behavior", "reason", "ruleId"}
    verdict = decision.to_verdict()
    assert (verdict.behavior, verdict.rule_id) == ("ask", "mode.build.askWrites")


def test_tr4_service_takes_a_loaded_workspace_config(tmp_path: Path) -> None:
    config = parse_workspace_config({"permission": {"deny": ["Grep"]}})
    service = PermissionService(config)
    request = PermissionRequest(tool=HOST_TOOLS["Grep"], input={"pattern": "x"},
                                state=ExecutionState(), workspace=tmp_path)
    assert service.check(request).rule_id == "config.deny[0]"
    assert service.config is config.permission


def test_tr4_path_allow_rules_match_by_workspace_relative_or_absolute_form(
    tmp_path: Path
) -> None:
    config = PermissionConfig.model_validate({"allow": ["Write(src/**)", "Edit(~/notes/*)"]})
    rows = [(HOST_TOOLS["Write"], "src/pkg/a.py", "config.allow[0]"),
            (HOST_TOOLS["Write"], str(tmp_path / "src" / "b.py"), "config.allow[0]"),
            (HOST_TOOLS["Write"], "../src/c.py", "mode.build.askWrites"),
            (HOST_TOOLS["Edit"], "~/notes/todo.md", "config.allow[1]"),
            (HOST_TOOLS["Edit"], "~/notes/deep/todo.md", "mode.build.askWrites")]
    for tool, path, rule_id in rows:
        case = Case(tool, {"file_path": path})
        assert check(case, config=config, workspace=tmp_path).rule_id == rule_id, path


@pytest.mark.parametrize(("text", "tool", "argument"), [
    ("Write", "Write", None), ("mcp__github__*", "mcp__github__*", None), ("*", "*", None),
    ("Bash(git *)", "Bash", "git *"), ("Bash(echo (hi))", "Bash", "echo (hi)"),
    ("Read(src/**)", "Read", "src/**"), ("WebFetch(https://*.python.org/*)", "WebFetch",
                                        "https://*.python.org/*"),
])
def test_tr4_pattern_syntax_round_trips(text: str, tool: str, argument: str | None) -> None:
    pattern = parse_pattern(text)
    assert (pattern.tool, pattern.argument, str(pattern)) == (tool, argument, text)


@pytest.mark.parametrize("text", ["", " Write", "Bash(", "Bash()", "(x)", "Bash(a))",
                                  "Bash(a) b", "Web Fetch", "Bash(a(b)"])
def test_tr4_malformed_patterns_are_refused(text: str) -> None:
    with pytest.raises(ValueError):
        parse_pattern(text)


@pytest.mark.parametrize("module", [permission, *(
    importlib.import_module(f"sessionledger.permission.{name}")
    for name in ("authority", "shell", "shell_git")
)], ids=lambda m: m.__name__)
def test_every_public_name_is_exported(module: ModuleType) -> None:
    assert all(hasattr(module, name) for name in module.__all__)
