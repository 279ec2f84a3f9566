"""sessionledger: event-sourced session state for AI coding-agent hosts (SPEC §0).

This package is the layer that answers "who asks": the application service over the event
log, the HTTP service with its event streams, and the ``sessionledger`` CLI. The HTTP part
lives in :mod:`sessionledger.http` and is imported only by the code that serves.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("sessionledger")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0+unknown"

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
