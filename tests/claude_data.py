"""Where the real Claude Code data lives for tests (SPEC §13): read in place, never copied.

``SESSIONLEDGER_CLAUDE_DATA`` names the directory; otherwise the ``shared/data/claude-code``
directory beside the repository or one level further up (a worktree's layout). A test that
needs it skips when it is absent — and fails under ``CI=true``, where it must be there.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

__all__ = ["claude_data", "transcripts_dir"]

REPO = Path(__file__).resolve().parent.parent


def _candidates() -> list[Path]:
    given = os.environ.get("SESSIONLEDGER_CLAUDE_DATA")
    if given:
        return [Path(given)]
    return [REPO.parent / "shared" / "data" / "claude-code",
            REPO.parent.parent / "shared" / "data" / "claude-code"]


def claude_data() -> Path:
    """The real Claude Code data directory (skips, or fails under ``CI=true``, without it)."""
    for candidate in _candidates():
        if (candidate / "README.md").is_file():
            return candidate
    reason = "no Claude Code data at " + " or ".join(str(c) for c in _candidates()) + \
        " (set SESSIONLEDGER_CLAUDE_DATA)"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"CI=true but {reason}")
    pytest.skip(reason)


def transcripts_dir() -> Path:
    """``transcripts/`` of the real data."""
    return claude_data() / "transcripts"
