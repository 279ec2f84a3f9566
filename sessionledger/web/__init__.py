"""The web client's files (docs/web-client.md): static HTML, JavaScript modules and CSS.

Nothing here runs on the server: the files in ``static/`` are shipped as package data and
served as they are by :mod:`sessionledger.http.routes` (no build step, no CDN). The page
talks to the service only through its public HTTP routes and SSE streams; ``docs/web-client.md``
describes what it shows.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["INDEX_FILE", "STATIC_DIR"]

STATIC_DIR = Path(__file__).resolve().parent / "static"
"""The directory served under ``/static``."""
INDEX_FILE = STATIC_DIR / "index.html"
"""The page served at ``/``."""
