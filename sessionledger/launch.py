"""The ``sessionledger`` command's entry point: the paths a host starts on its hot path first.

Hosts start ``sessionledger`` for every hook event and ask ``--version`` of it; importing the
whole command line (the service, the event catalog, rich, click) costs most of a second
there. ``main`` answers ``--version`` and ``hook claude-code|codex|gemini`` with only the
standard library loaded (:mod:`.claude_code.forward`: forward to a running ``serve``, else load
what recording needs), starts ``mcp`` answering the MCP handshake before the SDK loads
(:mod:`.mcp.early`), and hands everything else, help and mistakes included, to :mod:`.cli`
(issue 38).
"""

from __future__ import annotations

import sys

from . import __version__

__all__ = ["main"]


def main() -> None:
    """Run the ``sessionledger`` command with ``sys.argv``."""
    args = sys.argv[1:]
    if args == ["--version"]:
        sys.stdout.write(f"sessionledger, version {__version__}\n")
        return
    if args[:1] == ["mcp"]:
        from .mcp.early import start

        start(args[1:])  # answers the handshake while the rest loads, when it can
    elif args[:1] == ["hook"] and args[1:2] in (["claude-code"], ["codex"], ["gemini"]):
        from .claude_code.forward import main as hook

        if hook(args[2:], args[1]):
            return
    from .cli import main as cli

    cli(prog_name="sessionledger")
