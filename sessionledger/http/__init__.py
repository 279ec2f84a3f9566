"""The HTTP face of the service (docs/spec.md): JSON endpoints, SSE streams, uvicorn runner.

Kept apart from the application service so the CLI's other commands never import FastAPI.
"""

from __future__ import annotations

from .app import create_app, error_response
from .server import GracefulServer, serve

__all__ = ["GracefulServer", "create_app", "error_response", "serve"]
