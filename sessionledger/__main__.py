"""``python -m sessionledger``: the same command as the installed ``sessionledger``."""

from __future__ import annotations

from .launch import main

__all__: list[str] = []

if __name__ == "__main__":
    main()
