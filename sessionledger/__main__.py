"""``python -m sessionledger``: the same CLI as the installed ``sessionledger`` command."""

from __future__ import annotations

from .cli import main

__all__: list[str] = []

if __name__ == "__main__":
    main(prog_name="sessionledger")
