"""The tool registry: which tools each kind of session is offered (SPEC TR-1, TR-2, ES-7).

The rules of TR-1 are checked with a registry holding a fake handler for every tool name the
SPEC knows: the expected surface is computed here from the SPEC's wording, independently of
the registry, for every host, port and flag combination. Then the real default registry —
every handler but the Plan tools (issue 7) — is held to the same rule per host, with the
workspace's ``dynamicWorkflows`` flag off and on and its off-peak port closed and open
(acceptance 5 of issue 8). The descriptors of the service's own tools are held to the TR-2
table.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from eventlog import HostKind, InteractionKind
from sessionledger import SessionService
from sessionledger.config.workspace import config_path
from sessionledger.errors import InvalidInput
from sessionledger.permission.descriptors import SERVICE_TOOLS, ToolDescriptor
from sessionledger.tools.handlers import HandlerOutcome, Resolution, ToolContext
from sessionledger.tools.registry import SurfaceOptions, ToolRegistry
from sessionledger.tools.service import ToolService, default_registry

HOSTS: tuple[HostKind, ...] = ("protocol", "tui", "headless")

# -- the SPEC's tool names (TR-1, TR-2, TR-5) ---------------------------------------------

ALWAYS = frozenset({
    "TodoRead", "TodoWrite", "AskUserQuestion", "EnterPlanMode", "ExitPlanMode",
    "ReadSessionContext",
})
LIST_MODELS = frozenset({"ListModels"})
CRON = frozenset({"CronCreate", "CronList", "CronUpdate", "CronDelete"})
OFF_PEAK = frozenset({"OffPeakCreate", "OffPeakList"})
PLAN = frozenset({"EnterPlanMode", "ExitPlanMode"})
EVERY_TOOL = ALWAYS | LIST_MODELS | CRON | OFF_PEAK


def expected_surface(
    host: HostKind, *, subagent: bool, dynamic_workflows: bool, off_peak_port: bool
) -> set[str]:
    """TR-1 and ES-7 in the SPEC's words, for a registry that has every handler."""
    tools = set(ALWAYS)
    if dynamic_workflows:
        tools |= LIST_MODELS  # ListModels with the dynamic-workflow flag
    if host == "protocol":
        tools |= CRON  # a cron port is injected: protocol sessions always have one
    if off_peak_port and host == "protocol":
        tools |= OFF_PEAK  # only when the host opens the port; TUI and -p inject neither
    if subagent:
        tools -= PLAN  # ES-7
    return tools


@dataclass(frozen=True)
class FakeHandler:
    """A handler for any tool name: always valid, completes with ``ok``."""

    descriptor: ToolDescriptor
    description: str = "a fake tool for registry tests"

    def model_schema(self) -> dict[str, Any]:
        return {"type": "object"}

    def validate_input(self, raw: Mapping[str, Any]) -> None:
        return None

    def validate_answer(self, raw: Mapping[str, Any], *, original: Mapping[str, Any]) -> None:
        return None

    def interaction(self, raw: Mapping[str, Any]) -> tuple[InteractionKind, dict[str, Any]]:
        return "toolApproval", dict(raw)

    def run(
        self, context: ToolContext, raw: Mapping[str, Any], resolution: Resolution | None
    ) -> HandlerOutcome:
        return HandlerOutcome(success=True, model_content="ok")


def fake(name: str) -> FakeHandler:
    descriptor = SERVICE_TOOLS.get(name) or ToolDescriptor(
        name=name, kind="service", read_only=True
    )
    return FakeHandler(descriptor)


def full_registry() -> ToolRegistry:
    return ToolRegistry(fake(name) for name in sorted(EVERY_TOOL))


# -- the rules of TR-1 over every combination -----------------------------------------------

COMBINATIONS = [
    (host, subagent, flag, port)
    for host, subagent, flag, port in itertools.product(HOSTS, *[(False, True)] * 3)
    if host == "protocol" or not port  # TUI and -p never open an off-peak port
]


@pytest.mark.parametrize(("host", "subagent", "dynamic_workflows", "off_peak_port"), COMBINATIONS)
def test_tr1_es7_surface_for_every_host_port_and_flag(
    host: HostKind, subagent: bool, dynamic_workflows: bool, off_peak_port: bool
) -> None:
    registry = full_registry()
    options = SurfaceOptions(
        host=host, subagent=subagent, dynamic_workflows=dynamic_workflows,
        off_peak_port=off_peak_port,
    )
    expected = expected_surface(
        host, subagent=subagent, dynamic_workflows=dynamic_workflows,
        off_peak_port=off_peak_port,
    )
    surface = registry.surface(options)
    assert surface == sorted(surface)
    assert set(surface) == expected
    for name in EVERY_TOOL:
        assert registry.offered(name, options) is (name in expected)


def test_tr1_always_offered_means_offered_under_every_combination() -> None:
    """The executor skips the surface options (and the workspace configuration behind them)
    for a tool offered whatever they are (D73): exactly the tools every combination offers."""
    registry = full_registry()
    for name in EVERY_TOOL:
        everywhere = all(
            registry.offered(name, SurfaceOptions(
                host=host, subagent=subagent, dynamic_workflows=flag, off_peak_port=port,
            ))
            for host, subagent, flag, port in COMBINATIONS
        )
        assert registry.always_offered(name) is everywhere, name
    assert registry.always_offered("TodoWrite")
    assert not registry.always_offered("NotATool")


@pytest.mark.parametrize("host", HOSTS)
def test_tr1_always_tools_on_every_host_without_ports_or_flags(host: HostKind) -> None:
    surface = set(full_registry().surface(SurfaceOptions(host=host)))
    assert surface >= ALWAYS
    assert not surface & LIST_MODELS  # the flag is off by default
    assert not surface & OFF_PEAK  # no host opened the port


def test_tr1_list_models_only_with_dynamic_workflows() -> None:
    registry = full_registry()
    for host in HOSTS:
        assert not registry.offered("ListModels", SurfaceOptions(host=host))
        assert registry.offered("ListModels", SurfaceOptions(host=host, dynamic_workflows=True))


def test_tr1_cron_tools_only_on_protocol_hosts() -> None:
    registry = full_registry()
    assert set(registry.surface(SurfaceOptions(host="protocol"))) >= CRON
    for host in ("tui", "headless"):
        assert not set(registry.surface(SurfaceOptions(host=host))) & CRON


def test_tr1_off_peak_tools_only_with_the_port() -> None:
    registry = full_registry()
    assert not set(registry.surface(SurfaceOptions(host="protocol"))) & OFF_PEAK
    assert set(registry.surface(SurfaceOptions(host="protocol", off_peak_port=True))) >= OFF_PEAK


@pytest.mark.parametrize("host", ["tui", "headless"])
def test_tr1_tui_and_headless_inject_neither_port(host: HostKind) -> None:
    surface = set(full_registry().surface(SurfaceOptions(host=host)))
    assert not surface & (CRON | OFF_PEAK)
    assert surface == ALWAYS


@pytest.mark.parametrize("host", HOSTS)
def test_es7_subagent_never_gets_plan_tools(host: HostKind) -> None:
    registry = full_registry()
    for dynamic_workflows, off_peak in itertools.product((False, True), repeat=2):
        options = SurfaceOptions(
            host=host, subagent=True, dynamic_workflows=dynamic_workflows,
            off_peak_port=off_peak and host == "protocol",
        )
        surface = set(registry.surface(options))
        assert not surface & PLAN
        assert surface >= ALWAYS - PLAN
    # the main agent does get them
    assert set(registry.surface(SurfaceOptions(host=host))) >= PLAN


def test_tr1_registry_offers_only_tools_with_a_handler() -> None:
    registry = ToolRegistry([fake("TodoRead"), fake("CronList")])
    assert registry.surface(SurfaceOptions(host="protocol")) == ["CronList", "TodoRead"]
    assert registry.surface(SurfaceOptions(host="tui")) == ["TodoRead"]
    assert not registry.offered("AskUserQuestion", SurfaceOptions(host="protocol"))
    assert registry.handler("AskUserQuestion") is None


def test_registry_keeps_the_handler_of_a_tool_not_offered() -> None:
    """Answers to old calls still run after a surface changes."""
    registry = full_registry()
    options = SurfaceOptions(host="protocol", subagent=True)
    assert not registry.offered("ExitPlanMode", options)
    handler = registry.handler("ExitPlanMode")
    assert handler is not None
    assert handler.descriptor.name == "ExitPlanMode"


def test_registry_refuses_a_name_registered_twice() -> None:
    registry = ToolRegistry([fake("TodoRead")])
    with pytest.raises(ValueError, match="TodoRead"):
        registry.register(fake("TodoRead"))


# -- the default registry: every handler that exists (the Plan tools came with issue 7) --

EXISTING = EVERY_TOOL
"""The tools whose handlers exist today: all of them."""


@pytest.mark.parametrize("subagent", [False, True])
@pytest.mark.parametrize("host", HOSTS)
def test_tr1_default_registry_without_a_store_offers_the_session_only_tools(
    host: HostKind, subagent: bool
) -> None:
    options = SurfaceOptions(host=host, subagent=subagent)
    assert default_registry().surface(options) == ["AskUserQuestion", "TodoRead", "TodoWrite"]


@pytest.fixture
def service(tmp_path: Path) -> Iterator[SessionService]:
    root = tmp_path / "root"
    root.mkdir()
    opened = SessionService.open(f"sqlite:///{tmp_path / 'ledger.db'}", workspace_root=root)
    try:
        yield opened
    finally:
        opened.close()


def _configure(root: Path, *, dynamic_workflows: bool, off_peak: bool) -> None:
    path = config_path(root)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = f"[features]\ndynamicWorkflows = {'true' if dynamic_workflows else 'false'}\n"
    if off_peak:
        text += '[offPeak]\nwindows = ["22:00-06:00"]\n'
    path.write_text(text, encoding="utf-8")


@pytest.mark.parametrize("off_peak", [False, True])
@pytest.mark.parametrize("dynamic_workflows", [False, True])
@pytest.mark.parametrize("host", HOSTS)
def test_tr1_tr5_lm1_sessions_of_every_host_flag_and_port(
    service: SessionService, host: HostKind, dynamic_workflows: bool, off_peak: bool
) -> None:
    """Acceptance 5 (#8): ListModels with the flag only, cron tools on protocol sessions
    (their port is always injected there), off-peak tools only when the host opened the port
    (the workspace declares its windows) and only on protocol sessions; TUI and -p get
    neither port; a subagent never gets the Plan tools."""
    _configure(service.workspace_root, dynamic_workflows=dynamic_workflows, off_peak=off_peak)
    parent = service.create_session(host=host, mode="plan")["sessionId"]
    child = service.create_session(host=host, parent_session_id=parent)["sessionId"]
    for session, subagent in ((parent, False), (child, True)):
        expected = expected_surface(
            host, subagent=subagent, dynamic_workflows=dynamic_workflows,
            off_peak_port=off_peak and host == "protocol",
        )
        assert service.tools.surface(session) == sorted(expected & EXISTING)


def test_tr1_lm1_list_models_behind_the_flag_is_refused_and_appends_nothing(
    service: SessionService,
) -> None:
    _configure(service.workspace_root, dynamic_workflows=False, off_peak=False)
    session = service.create_session()["sessionId"]
    before = service.store.version(session)
    with pytest.raises(InvalidInput) as refused:
        service.tools.call(session, "ListModels", {})
    assert refused.value.status == 422
    assert service.store.version(session) == before
    _configure(service.workspace_root, dynamic_workflows=True, off_peak=False)
    assert "ListModels" in service.tools.surface(session)  # the file is read again


@pytest.mark.parametrize("host", ["tui", "headless"])
def test_tr1_tr5_cron_and_off_peak_tools_are_refused_without_their_ports(
    service: SessionService, host: HostKind
) -> None:
    _configure(service.workspace_root, dynamic_workflows=True, off_peak=True)
    session = service.create_session(host=host)["sessionId"]
    before = service.store.version(session)
    for tool, raw in (("CronCreate", {"cron": "* * * * *", "prompt": "p"}),
                      ("CronList", {}), ("OffPeakCreate", {"prompt": "p"})):
        with pytest.raises(InvalidInput):
            service.tools.call(session, tool, raw)
    assert service.store.version(session) == before


@pytest.mark.parametrize("host", HOSTS)
def test_tr1_es7_executor_applies_the_session_host_and_parent(
    service: SessionService, host: HostKind
) -> None:
    """With every handler registered, a session's surface follows its host and parent: the
    executor injects a cron port for protocol sessions only, no off-peak port and no flag."""
    tools = ToolService(
        ledger=service.ledger,
        registry=full_registry(),
    )
    main = service.create_session(host=host, mode="plan")["sessionId"]
    child = service.create_session(host=host, parent_session_id=main)["sessionId"]
    assert set(tools.surface(main)) == expected_surface(
        host, subagent=False, dynamic_workflows=False, off_peak_port=False
    )
    assert set(tools.surface(child)) == expected_surface(
        host, subagent=True, dynamic_workflows=False, off_peak_port=False
    )
    # ES-7 through the executor: a subagent calling a plan tool is refused, nothing appended
    before = service.store.version(child)
    for name in sorted(PLAN):
        with pytest.raises(InvalidInput) as refused:
            tools.call(child, name, {})
        assert refused.value.status == 422
        assert refused.value.details
    assert service.store.version(child) == before


# -- TR-2: the descriptors of the service's own tools --------------------------------------

# tool: (read-only, requiresUserInteraction, needsApproval; None: not applicable in TR-2)
TR2_TABLE: dict[str, tuple[bool, bool, bool | None]] = {
    "TodoRead": (True, False, False),
    "TodoWrite": (True, False, False),
    "AskUserQuestion": (True, True, None),
    "EnterPlanMode": (False, False, False),
    "ExitPlanMode": (False, True, None),
    "ListModels": (True, False, False),
    "ReadSessionContext": (True, False, False),
}


def test_tr2_service_tools_are_exactly_the_table() -> None:
    assert set(SERVICE_TOOLS) == set(TR2_TABLE)


@pytest.mark.parametrize("name", sorted(TR2_TABLE))
def test_tr2_descriptor_flags_equal_the_table(name: str) -> None:
    read_only, requires_user, needs_approval = TR2_TABLE[name]
    descriptor = SERVICE_TOOLS[name]
    assert descriptor.name == name
    assert descriptor.kind == "service"
    assert descriptor.read_only is read_only
    assert descriptor.requires_user_interaction is requires_user
    if needs_approval is not None:
        assert descriptor.needs_approval is needs_approval
    assert descriptor.destructive is False  # none of the service's tools is destructive


def test_tr2_table_notes() -> None:
    todo_write = SERVICE_TOOLS["TodoWrite"]
    assert todo_write.side_effect_scope == "session"  # TD-3: read-only, scope session
    assert todo_write.allowed_in_plan_mode  # allowed in Plan
    # AQ-5: the two tools that always need the user
    assert {n for n, d in SERVICE_TOOLS.items() if d.requires_user_interaction} == {
        "AskUserQuestion", "ExitPlanMode"
    }


def test_tr2_ask_user_question_handler_uses_the_table_descriptor() -> None:
    handler = default_registry().handler("AskUserQuestion")
    assert handler is not None
    assert handler.descriptor is SERVICE_TOOLS["AskUserQuestion"]
