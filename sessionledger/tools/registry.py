"""Which tools exist, what each is built over, and which a session is offered (TR-1).

:func:`service_handlers` builds every service tool over one store, its projections and the
host's ports (:class:`~sessionledger.tools.ports.ToolPorts`), so
:mod:`sessionledger.tools.service` stays about running calls; :class:`ToolRegistry` holds them
by name and answers each session's surface from its :class:`SurfaceOptions`, which
:class:`WorkspaceSurface` reads from the session's host, parent and workspace configuration.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import cast

from eventlog import EventStore, HostKind, RecordedEvent, StoreClosed
from projections import Projections, SessionSummary
from projections.tables import Doc

from ..config.workspace import load_workspace_config
from .ask import AskUserQuestionHandler
from .handlers import ToolHandler
from .models import ListModelsHandler
from .plan import EnterPlanModeHandler, ExitPlanModeHandler
from .plan_files import PlanFiles
from .ports import ConfigLoader, ToolPorts
from .schedule import ScheduleTools, schedule_handlers
from .session_context import ReadSessionContextHandler
from .todo import TodoReadHandler, TodoWriteHandler

__all__ = [
    "CRON_TOOLS",
    "OFF_PEAK_TOOLS",
    "PLAN_TOOLS",
    "StoreSessionSource",
    "SurfaceOptions",
    "ToolRegistry",
    "WorkspaceSurface",
    "basic_handlers",
    "service_handlers",
]

# -- the surface: which tools a session is offered (TR-1) -------------------------------------
#
# The registry only offers a tool once its handler exists; each later issue registers its
# handlers. On top of that the surface depends on the host and its ports: ``ListModels`` only
# with the dynamic-workflow feature, cron tools only with a cron port (protocol hosts always
# have one), off-peak tools only when the host opens that port; TUI and headless hosts inject
# neither; a subagent's surface never holds ``EnterPlanMode`` or ``ExitPlanMode`` (ES-7).

CRON_TOOLS = frozenset({"CronCreate", "CronList", "CronUpdate", "CronDelete"})
OFF_PEAK_TOOLS = frozenset({"OffPeakCreate", "OffPeakList"})
PLAN_TOOLS = frozenset({"EnterPlanMode", "ExitPlanMode"})
FLAGGED_TOOLS = frozenset({"ListModels"})
_CONDITIONAL = CRON_TOOLS | OFF_PEAK_TOOLS | PLAN_TOOLS | FLAGGED_TOOLS


@dataclass(frozen=True, slots=True, kw_only=True)
class SurfaceOptions:
    """What decides a session's surface besides the registered handlers."""

    host: HostKind
    subagent: bool = False
    dynamic_workflows: bool = False
    off_peak_port: bool = False

    @property
    def cron_port(self) -> bool:
        """Protocol sessions always have a cron port; TUI and headless never (TR-1)."""
        return self.host == "protocol"


class ToolRegistry:
    """Handlers by tool name, and the surface each kind of session gets."""

    def __init__(self, handlers: Iterable[ToolHandler] = ()) -> None:
        self._handlers: dict[str, ToolHandler] = {}
        for handler in handlers:
            self.register(handler)

    def register(self, handler: ToolHandler) -> None:
        name = handler.descriptor.name
        if name in self._handlers:
            raise ValueError(f"tool {name!r} is registered twice")
        self._handlers[name] = handler

    def offered(self, name: str, options: SurfaceOptions) -> bool:
        """Whether a session with ``options`` is offered tool ``name``."""
        if name not in self._handlers:
            return False
        if name in PLAN_TOOLS and options.subagent:
            return False
        if name in FLAGGED_TOOLS and not options.dynamic_workflows:
            return False
        if name in CRON_TOOLS and not options.cron_port:
            return False
        return not (name in OFF_PEAK_TOOLS and not options.off_peak_port)

    def always_offered(self, name: str) -> bool:
        """Whether every session is offered ``name`` (registered, and not one of the tools
        its host, ports, flags or parent decide): then no :class:`SurfaceOptions` are needed,
        nor the workspace configuration behind them."""
        return name in self._handlers and name not in _CONDITIONAL

    def surface(self, options: SurfaceOptions) -> list[str]:
        """The names offered, sorted."""
        return sorted(n for n in self._handlers if self.offered(n, options))

    def handler(self, name: str) -> ToolHandler | None:
        """The handler of ``name`` whether or not a session is offered it (answers to old
        calls still run after a surface changes)."""
        return self._handlers.get(name)


class WorkspaceSurface:
    """A session's surface options from its host, its parent and its workspace's config."""

    def __init__(self, config: ConfigLoader = load_workspace_config) -> None:
        self._config = config

    def options(self, session: SessionSummary, host: HostKind | None = None) -> SurfaceOptions:
        kind = host or cast(HostKind, session.host)
        config = self._config(Path(session.workspace))
        return SurfaceOptions(
            host=kind,
            subagent=session.parent_session_id is not None,
            dynamic_workflows=config.features.dynamic_workflows,
            off_peak_port=kind == "protocol" and config.off_peak is not None,
        )


# -- the toolset: which service tools exist and what each is built over ----------------------
#
# Every handler lives in :mod:`sessionledger.tools`; the ones added for LM-1, LM-2, TR-1 … TR-5 need
# the store (another session's events for ReadSessionContext, the session's records for the
# cron and off-peak tools, the session's chosen model for ListModels) and the host's ports.

@dataclass(frozen=True, slots=True)
class StoreSessionSource:
    """Sessions, their events and their records as the handlers read them."""

    store: EventStore
    projections: Projections

    def summary(self, session_id: str) -> SessionSummary | None:
        return self.projections.summary(self.store, session_id)

    def events(self, session_id: str) -> Iterator[RecordedEvent]:
        return self.store.read_session(session_id)

    def records(self, session_id: str, status: str) -> list[Doc]:
        records = self.projections.records
        return self.store.read_view(lambda tx: records.records(tx, session_id, status))

    def gone(self, session_id: str) -> bool:
        """Deleted or unknown: a plan file write for it is cancelled (PM-7)."""
        try:
            summary = self.summary(session_id)
        except StoreClosed:  # the service is shutting down
            return True
        return summary is None or summary.deleted

    def chosen_model(self, session_id: str) -> str | None:
        records = self.projections.records
        doc = self.store.read_view(lambda tx: records.chosen_model(tx, session_id))
        return None if doc is None else str(doc.body["model"])


def basic_handlers() -> list[ToolHandler]:
    """The tools that need nothing but the session: todos and questions."""
    return [TodoReadHandler(), TodoWriteHandler(), AskUserQuestionHandler()]


def service_handlers(
    store: EventStore, projections: Projections, ports: ToolPorts
) -> list[ToolHandler]:
    """Every service tool over ``store``, reaching the host through ``ports``."""
    source = StoreSessionSource(store, projections)
    schedules = ScheduleTools(
        cron=ports.cron, off_peak=ports.off_peak(), clock=ports.clock, records=source.records
    )
    return [
        *basic_handlers(),
        ListModelsHandler(ports.model_catalog(), source.chosen_model),
        ReadSessionContextHandler(
            source, auxiliary=ports.auxiliary, auxiliary_timeout_s=ports.auxiliary_timeout_s
        ),
        *schedule_handlers(schedules),
        EnterPlanModeHandler(),
        ExitPlanModeHandler(PlanFiles(ports.workspace_root), session_gone=source.gone,
                            session_events=source.events),
    ]
