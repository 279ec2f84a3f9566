"""Helpers for the tests of issue 8's tools: a service over either backend, configurations.

:func:`open_service` opens a :class:`SessionService` over ``memory://`` or a SQLite file in a
fresh workspace root holding the given ``config.toml``; :func:`tools_with` builds a
:class:`ToolService` over the same store with injected ports (a fake auxiliary model, a
manual clock, a fixed catalog). Everything opened is closed by the context manager.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from eventlog import Clock
from projections import open_projected_store
from sessionledger import SessionService
from sessionledger.config.workspace import config_path
from sessionledger.tools.ports import ToolPorts
from sessionledger.tools.service import ToolService

__all__ = ["CATALOG_TOML", "FLAG_ONLY", "open_service", "tools_with", "write_config"]

FLAG_ONLY = "[features]\ndynamicWorkflows = true\n"

CATALOG_TOML = FLAG_ONLY + """
[offPeak]
windows = ["22:00-06:00"]

[models]
current = "anthropic/sonnet"

[[models.providers]]
id = "anthropic"
name = "Anthropic"

[[models.providers.models]]
id = "sonnet"
name = "Claude Sonnet"
contextWindow = 200000
reasoningLevels = ["low", "medium", "high"]
defaultLevel = "medium"

[[models.providers.models]]
id = "opus"
contextWindow = 200000
disabled = "no API key configured"

[[models.providers]]
id = "openrouter"
name = "OpenRouter"

[[models.providers.models]]
id = "sonnet"
contextWindow = 100000

[[models.providers.models]]
id = "llama"
"""
"""A catalog with a current model, a disabled one and one bare id under two providers."""


def write_config(root: Path, text: str) -> None:
    path = config_path(root)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


@contextmanager
def open_service(
    backend: str, directory: Path, *, config: str | None = CATALOG_TOML,
    clock: Clock | None = None,
) -> Iterator[SessionService]:
    """A service over ``backend`` whose workspace root holds ``config`` (none if ``None``);
    its store records times from ``clock`` when given."""
    root = directory / "root"
    root.mkdir(exist_ok=True)
    if config is not None:
        write_config(root, config)
    url = "memory://" if backend == "memory" else f"sqlite:///{directory / 'ledger.db'}"
    store, projections = open_projected_store(url, clock=clock)
    service = SessionService(store, projections, workspace_root=root)
    try:
        yield service
    finally:
        service.close()


def tools_with(service: SessionService, **ports: Any) -> ToolService:
    """A tool service over ``service``'s store whose ports are ``ports`` (else the defaults)."""
    return ToolService(
        ledger=service.ledger,
        ports=ToolPorts(config=service.tools.permissions.config, **ports),
    )
