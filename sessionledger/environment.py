"""The environment variables the commands read, named once for every floor (the command hook
reads them with nothing else of the package loaded)."""

from __future__ import annotations

__all__ = ["DB_ENV", "TOKEN_ENV"]

DB_ENV = "SESSIONLEDGER_DB"
"""Names the store when ``--db`` is not given (every command)."""
TOKEN_ENV = "SESSIONLEDGER_TOKEN"
"""Holds ``serve``'s bearer token (``serve``, and the command hook forwarding to it)."""
