"""Tools: what each tool declares (descriptors), their contracts and handlers, the registry.

The service's own tools (TodoRead, AskUserQuestion, …) have contracts and handlers here; the
host's tools (Read, Bash, MCP tools, …) only have descriptors, because the service is their
permission authority, not their runner (TR-3).
"""

from __future__ import annotations

from ..permission.descriptors import HOST_TOOLS, SERVICE_TOOLS, ToolDescriptor, host_tool, mcp_tool

__all__ = ["HOST_TOOLS", "SERVICE_TOOLS", "ToolDescriptor", "host_tool", "mcp_tool"]
