"""Where the real Claude Code data lives for tests (SPEC §13): read in place, never copied.

``SESSIONLEDGER_CLAUDE_DATA`` names the directory; otherwise ``shared/data/claude-code`` beside
the repository or one level further up (a worktree's layout), or beside the repository this
clone was made from (a fresh clone in a temporary directory, as ``.ci/run`` is checked). The
data is not part of the repository and nothing can install it, so a test that needs it skips
when none of these holds it, naming where it looked — on CI too.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

__all__ = ["claude_data", "transcripts_dir"]

REPO = Path(__file__).resolve().parent.parent


def _origin() -> Path | None:
    """The local repository this clone was made from, if it was made from one."""
    try:
        url = subprocess.run(
            ["git", "-C", str(REPO), "remote", "get-url", "origin"],
            capture_output=True, text=True, timeout=10, check=False,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    url = url.removeprefix("file://")
    return Path(url) if url and Path(url).is_dir() else None


def _candidates() -> list[Path]:
    given = os.environ.get("SESSIONLEDGER_CLAUDE_DATA")
    if given:
        return [Path(given)]
    homes = [REPO, REPO.parent]
    origin = _origin()
    if origin is not None:
        homes += [origin, origin.parent]
    return [home.parent / "shared" / "data" / "claude-code" for home in homes]


def claude_data() -> Path:
    """The real Claude Code data directory (the test skips without it)."""
    for candidate in _candidates():
        if (candidate / "README.md").is_file():
            return candidate
    pytest.skip("no Claude Code data at " + " or ".join(str(c) for c in _candidates())
                + " (set SESSIONLEDGER_CLAUDE_DATA)")


def transcripts_dir() -> Path:
    """``transcripts/`` of the real data."""
    return claude_data() / "transcripts"
