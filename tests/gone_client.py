"""A host that leaves: an MCP client over streamable HTTP whose form is never answered.

Run as ``python gone_client.py MODE URL`` by tests/test_mcp_gone.py, which kills it (SIGKILL)
once it prints ``asked`` (its form is open). MODE:

``ask``     a 2025-11-25 handshake session calls AskUserQuestion;
``task``    a 2025-11-25 handshake session calls AskUserQuestion as a task (prints
            ``task <id>``), then ``tasks/result``, which opens the form;
``modern``  a 2026-07-28 client calls AskUserQuestion (the form is the client's own, opened
            for the ``input_required`` round).
"""

from __future__ import annotations

import sys
from typing import Any

import anyio
import mcp_types as types
from mcp import Client, ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.jsonrpc_dispatcher import JSONRPCDispatcher

QUESTION = {"questions": [{
    "question": "Which database?", "header": "Database", "multiSelect": False,
    "options": [{"label": "SQLite (Recommended)", "description": "one file"},
                {"label": "Postgres", "description": "a server"}],
}]}


def say(line: str) -> None:
    print(line, flush=True)


async def never(*_args: Any) -> types.ElicitResult:
    say("asked")
    await anyio.sleep_forever()
    raise AssertionError("sleep_forever returned")


async def main(mode: str, url: str) -> None:
    if mode == "modern":
        async with Client(url, elicitation_callback=never) as client:
            await client.call_tool("AskUserQuestion", QUESTION)
        return
    async with streamable_http_client(url) as (read, write):
        dispatcher: JSONRPCDispatcher[Any] = JSONRPCDispatcher(read, write)
        async with ClientSession(dispatcher=dispatcher, elicitation_callback=never) as session:
            initialized = await session.initialize()
            version = initialized.protocol_version
            if mode == "ask":
                await session.call_tool("AskUserQuestion", QUESTION)
                return
            created = await dispatcher.send_raw_request(
                "tools/call",
                {"name": "AskUserQuestion", "arguments": QUESTION, "task": {"ttl": 60_000}},
                {"headers": {"mcp-protocol-version": version}},
            )
            task_id = created["task"]["taskId"]
            say(f"task {task_id}")
            request = types.GetTaskPayloadRequest(
                params=types.GetTaskPayloadRequestParams(task_id=task_id))
            await session.send_request(request, types.CallToolResult)


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], sys.argv[2])
