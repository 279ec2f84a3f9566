"""``sessionledger setup claude-code``: the hooks written into Claude Code's settings, merged
with what the user has there, and taken out again (issue 39, acceptance 8)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from server_support import sessionledger_command

from sessionledger.claude_code.setup import (
    HELD,
    LEDGER_EVENTS,
    is_ledger_hook,
    ledger_hooks,
    merged,
    removed,
)

USER_SETTINGS: dict[str, Any] = {
    "model": "opus",
    "permissions": {"allow": ["Bash(make test)"]},
    "hooks": {
        "PreToolUse": [
            {"matcher": "Bash", "hooks": [{"type": "command", "command": "./audit-bash.sh"}]},
        ],
        "Notification": [{"hooks": [{"type": "command", "command": "notify-send done"}]}],
    },
}


def setup(*args: str, home: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("SESSIONLEDGER_DB",
                                                            "CLAUDE_CONFIG_DIR")}
    env["HOME"] = str(home)
    return subprocess.run([*sessionledger_command(), "setup", "claude-code", *args], cwd=cwd,
                          env=env, capture_output=True, text=True, timeout=60, check=False)


def ours(settings: dict[str, Any]) -> list[tuple[str, str]]:
    return [(event, hook["type"]) for event, entries in settings.get("hooks", {}).items()
            for entry in entries for hook in entry["hooks"] if is_ledger_hook(hook)]


def test_twice_leaves_one_copy_and_the_users_settings_then_remove_restores(
        tmp_path: Path) -> None:
    project = tmp_path / "app"
    (project / ".claude").mkdir(parents=True)
    path = project / ".claude" / "settings.json"
    original = json.dumps(USER_SETTINGS, indent=2)
    path.write_text(original, encoding="utf-8")

    first = setup("--url", "http://127.0.0.1:9999", home=tmp_path, cwd=project)
    assert first.returncode == 0, first.stderr
    assert "+ PermissionRequest: added" in first.stdout and "~ PreToolUse: changed" in first.stdout
    assert (project / ".claude" / "settings.json.bak").read_text(encoding="utf-8") == original
    once = json.loads(path.read_text(encoding="utf-8"))
    second = setup("--url", "http://127.0.0.1:9999", home=tmp_path, cwd=project)
    assert second.returncode == 0, second.stderr
    assert second.stdout.strip().endswith("unchanged")
    twice = json.loads(path.read_text(encoding="utf-8"))
    assert twice == once
    assert sorted(ours(twice)) == sorted(  # the held events have a second, longer hook
        (e, "command" if e == "SessionStart" else "http")
        for e in (*LEDGER_EVENTS, *HELD))
    # the user's own hooks and settings are where they were, theirs first
    assert twice["model"] == "opus" and twice["permissions"] == USER_SETTINGS["permissions"]
    assert twice["hooks"]["PreToolUse"][0] == USER_SETTINGS["hooks"]["PreToolUse"][0]
    assert twice["hooks"]["Notification"] == USER_SETTINGS["hooks"]["Notification"]
    # a different server replaces the hooks rather than adding a second set
    moved = setup("--url", "http://127.0.0.1:7777", home=tmp_path, cwd=project)
    assert moved.returncode == 0, moved.stderr
    assert len(ours(json.loads(path.read_text(encoding="utf-8")))) == len(LEDGER_EVENTS) + len(
        HELD)

    gone = setup("--remove", home=tmp_path, cwd=project)
    assert gone.returncode == 0, gone.stderr
    assert json.loads(path.read_text(encoding="utf-8")) == USER_SETTINGS
    assert setup("--remove", home=tmp_path, cwd=project).stdout.strip().endswith("unchanged")


def test_user_settings_and_command_hooks(tmp_path: Path) -> None:
    done = setup("--user", "--command", "--db", "sqlite:///x.db", home=tmp_path, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    written = json.loads((tmp_path / ".claude" / "settings.json").read_text(encoding="utf-8"))
    assert {kind for _event, kind in ours(written)} == {"command"}
    assert not (tmp_path / ".claude" / "settings.json.bak").exists()  # there was no file


@pytest.mark.parametrize(("content", "args", "message"), [
    ("{not json", (), "cannot be read as JSON"),
    ("[1, 2]", (), "is not a JSON object"),
    ('{"hooks": {"PreToolUse": {"matcher": "*"}}}', (), '"hooks.PreToolUse" is not a list'),
    ("{}", ("--command", "--url", "http://127.0.0.1:1"), "takes no --url"),
    ("{}", ("--url", "ftp://x"), "is not an http"),
])
def test_bad_input_changes_nothing(
        tmp_path: Path, content: str, args: tuple[str, ...], message: str) -> None:
    (tmp_path / ".claude").mkdir()
    path = tmp_path / ".claude" / "settings.json"
    path.write_text(content, encoding="utf-8")
    done = setup(*args, home=tmp_path, cwd=tmp_path)
    assert done.returncode == 2 and message in done.stderr, (done.returncode, done.stderr)
    assert path.read_text(encoding="utf-8") == content
    assert not (tmp_path / ".claude" / "settings.json.bak").exists()


def test_merge_and_remove_keep_a_mixed_entry() -> None:
    # A user entry that also holds one of our hooks keeps its own hook when ours go.
    mine = {"type": "command", "command": "./mine.sh"}
    theirs = {"type": "http", "url": "http://127.0.0.1:8765/v1/hooks/claude-code"}
    settings = {"hooks": {"Stop": [{"hooks": [mine, theirs]}]}}
    assert removed(settings) == {"hooks": {"Stop": [{"hooks": [mine]}]}}
    again = merged(merged(settings, ledger_hooks(url="http://h:1")), ledger_hooks(url="http://h:1"))
    assert again["hooks"]["Stop"][0] == {"hooks": [mine]}
    assert len(again["hooks"]["Stop"]) == 2
    assert not is_ledger_hook({"type": "command", "command": "echo sessionledger hook"})
