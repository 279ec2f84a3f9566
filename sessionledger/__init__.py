"""sessionledger: event-sourced session state for AI coding-agent hosts (docs/spec.md).

This package is the layer that answers "who asks": the application service over the event
log, the HTTP service with its event streams, and the ``sessionledger`` CLI. The HTTP part
lives in :mod:`sessionledger.http` and is imported only by the code that serves.

Importing the package imports nothing else (issue 38: a command hook or ``--version`` must
not pay for the service): the names below load on first use.
"""

from __future__ import annotations

from importlib import import_module

__version__ = "0.1.0"
"""The version; ``pyproject.toml`` reads it from here (no package metadata read at start)."""

TYPE_CHECKING = False  # as typing.TYPE_CHECKING, without importing typing on the hot paths
if TYPE_CHECKING:
    from typing import Any

    from .config import ServerSettings, resolve_store_url
    from .errors import SessionLedgerError
    from .service.sessions import SessionService

__all__ = [
    "ServerSettings",
    "SessionLedgerError",
    "SessionService",
    "__version__",
    "resolve_store_url",
]

_HOMES = {
    "ServerSettings": ".config",
    "resolve_store_url": ".config",
    "SessionLedgerError": ".errors",
    "SessionService": ".service.sessions",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(home, __name__), name)
    globals()[name] = value
    return value
