"""What the commands read before the command line loads: the environment variables, named
once for every floor, and the options of the fast paths (the command hook, ``mcp``'s early
handshake), read with nothing else of the package loaded."""

from __future__ import annotations

__all__ = ["DB_ENV", "TOKEN_ENV", "WRITER_ENV", "read_options"]

DB_ENV = "SESSIONLEDGER_DB"
"""Names the store when ``--db`` is not given (every command)."""
TOKEN_ENV = "SESSIONLEDGER_TOKEN"
"""Holds ``serve``'s bearer token (``serve``, and the command hook forwarding to it)."""
WRITER_ENV = "SESSIONLEDGER_HOOK_WRITER"
"""The command hook's writer (with no ``serve`` running it starts one of its own for the events
that follow): ``off`` (or ``0``) never starts one, a number of seconds is how long it stays
without a request (default 600)."""


def read_options(args: list[str], valued: frozenset[str],
                 flags: frozenset[str] = frozenset()) -> dict[str, str | bool] | None:
    """``--name VALUE``, ``--name=VALUE`` (for ``valued``) and ``--flag`` (for ``flags``) by
    name; ``None`` for anything else — a name not listed, a missing value, ``--help`` — which
    the full command line then parses and explains."""
    values: dict[str, str | bool] = {}
    index = 0
    while index < len(args):
        word = args[index]
        index += 1
        if word in flags:
            values[word] = True
            continue
        name, has_value, value = word.partition("=")
        if name not in valued:
            return None
        if not has_value:
            if index >= len(args):
                return None
            value = args[index]
            index += 1
        values[name] = value
    return values
