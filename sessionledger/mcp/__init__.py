"""The Model Context Protocol server (issue 12): the session tools for any MCP client.

:mod:`.catalog` lists the tools with the schemas and descriptions of their pydantic contracts
and annotations from their descriptors; :mod:`.forms` maps a questionnaire or a plan approval
to one MCP elicitation and its answer back to a ``respond`` decision, and :mod:`.rounds` carries
that form in a 2026-07-28 ``input_required`` round; :mod:`.results` turns a tool-call document
into an MCP tool result; :mod:`.server` binds one MCP connection to one ledger session and runs
every call through :meth:`ToolService.call <sessionledger.tools.service.ToolService.call>`, the
path the HTTP routes take; :mod:`.http` is the streamable-HTTP endpoint ``serve`` mounts at
``/mcp``.
"""

from __future__ import annotations

from .server import DEFAULT_WEB_URL, SESSION_META, LedgerMcp, McpOptions, run_stdio

__all__ = ["DEFAULT_WEB_URL", "SESSION_META", "LedgerMcp", "McpOptions", "run_stdio"]
