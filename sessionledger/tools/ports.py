"""The ports the later service tools reach the host through.

Handlers do no I/O of their own; what they need from outside the log comes through a port
injected when the registry is built (:class:`ToolPorts`):

* the **model catalog** (ListModels, model references) — :mod:`sessionledger.tools.models`;
* an optional **auxiliary model** that extracts material for ReadSessionContext (RS-2), with
  a fallback to local material when it is absent, fails or overruns its time;
* the **cron** port (TR-5), which validates five-field expressions and answers next-due
  times — protocol sessions always have one, TUI and headless never;
* the **off-peak** port, open only when the host declares its off-peak windows (the
  ``[offPeak]`` table of the workspace configuration) and only on protocol sessions.

A handler bounds a port call by a wall-clock budget with
:func:`~sessionledger.tools.handlers.call_with_timeout`. Which tools a session sees, from its
host and these ports, is the registry's (:mod:`sessionledger.tools.registry`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Protocol

from eventlog import Clock, SystemClock

from ..config.workspace import WorkspaceConfig, load_workspace_config
from .models import FileModelCatalog, ModelCatalogPort
from .schedule import CroniterCron, CronPort, OffPeakPorts

__all__ = [
    "AUXILIARY_TIMEOUT_S",
    "AuxiliaryModel",
    "ExtractionRequest",
    "ToolPorts",
]

AUXILIARY_TIMEOUT_S = 270.0
"""How long the auxiliary model may take: the tool's fixed 5 minutes (RS-2) less a margin
for reading the session and building the local fallback."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ExtractionRequest:
    """What the auxiliary model is asked: material of another session, cut for the query."""

    session_id: str
    query: str
    strategy: Literal["relevant", "handoff"]
    max_tokens: int
    material: str
    """The local material of that session (the source the extraction works from)."""


class AuxiliaryModel(Protocol):
    """A small model the host lends for extraction (RS-2); answers the extracted text."""

    def extract(self, request: ExtractionRequest) -> str: ...


ConfigLoader = Callable[[Path], WorkspaceConfig]


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolPorts:
    """Everything the later tools reach outside the log through; defaults are local."""

    config: ConfigLoader = load_workspace_config
    catalog: ModelCatalogPort | None = None
    """``None``: the file-backed catalog over ``config``."""
    auxiliary: AuxiliaryModel | None = None
    auxiliary_timeout_s: float = AUXILIARY_TIMEOUT_S
    cron: CronPort = field(default_factory=CroniterCron)
    clock: Clock = field(default_factory=SystemClock)
    workspace_root: Path | None = None
    """The server's workspace root: approved plans are written inside it (EG-4)."""

    def model_catalog(self) -> ModelCatalogPort:
        return self.catalog if self.catalog is not None else FileModelCatalog(self.config)

    def off_peak(self) -> OffPeakPorts:
        return OffPeakPorts(self.config)
