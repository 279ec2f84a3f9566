"""Which tools a session is offered (SPEC TR-1), and the handler behind each name.

The registry only offers a tool once its handler exists; each later issue registers its
handlers. On top of that the surface depends on the host and its ports: ``ListModels`` only
with the dynamic-workflow feature, cron tools only with a cron port (protocol hosts always
have one), off-peak tools only when the host opens that port; TUI and headless hosts inject
neither; a subagent's surface never holds ``EnterPlanMode`` or ``ExitPlanMode`` (ES-7).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from eventlog import HostKind

from .handlers import ToolHandler

__all__ = ["CRON_TOOLS", "OFF_PEAK_TOOLS", "PLAN_TOOLS", "SurfaceOptions", "ToolRegistry"]

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
