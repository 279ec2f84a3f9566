"""The real agent hosts, installed from a lock file and run offline (Claude Code, Codex CLI,
Gemini CLI).

``tests/hosts/package.json`` pins Claude Code (npm ``@anthropic-ai/claude-code``), Codex CLI
(``@openai/codex``) and Gemini CLI (``@google/gemini-cli``) exactly and
``tests/hosts/package-lock.json`` pins the whole tree with integrity hashes (the wrappers and
their per-platform native packages). :func:`install` runs ``npm ci`` from the lock file into
:data:`INSTALL_DIR` — a cache directory outside the repository (``$SESSIONLEDGER_HOSTS_DIR``,
else ``$XDG_CACHE_HOME/sessionledger/hosts``, else ``~/.cache/sessionledger/hosts``: the
native binary is a few hundred megabytes) — once, and reuses it while the lock file, the
manifest, the node version and the platform are the same (their hash is kept in
:data:`STAMP`); an ``flock`` keeps concurrent callers from installing at once.

:func:`host_environment` is the environment a host runs in: ``PATH``, a throwaway ``HOME``
the caller gives, the model server's address (``tests/anthropic_model.py``) and the switches
that keep the binary from reaching anything else; nothing else of this process's environment.

Without ``node``/``npm`` (or with a node older than the package's engines) the tests that ask
for the install are skipped with the reason — unless ``CI=true``, where they fail, as in
``tests/node_support.py``.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import shlex
import shutil
import signal
import subprocess
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

import node_support
from node_support import (
    InstallError,
    locked,
    node_missing,
    node_version,
    npm_ci,
)

from sessionledger.environment import WRITER_ENV

__all__ = [
    "CLAUDE_MODEL", "HOST_PROJECT", "INSTALL_DIR", "ClaudeCode", "InstallError", "Terminal",
    "claude_headless", "documented_settings", "host_environment", "install", "interactive_home",
    "node_version", "settings_file", "skip_or_fail", "unavailable", "with_model",
]

ROOT = Path(__file__).resolve().parents[1]
HOST_PROJECT = ROOT / "tests" / "hosts"
CLAUDE_PACKAGE = "@anthropic-ai/claude-code"
CODEX_PACKAGE = "@openai/codex"
GEMINI_PACKAGE = "@google/gemini-cli"


def _cache_dir() -> Path:
    explicit = os.environ.get("SESSIONLEDGER_HOSTS_DIR")
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "sessionledger" / "hosts"


INSTALL_DIR = _cache_dir()
STAMP = ".installed-sha256"
MIN_NODE = (20, 0)  # the engines of @google/gemini-cli 0.61 (Claude Code 2.1: 18, Codex: 16)
INSTALL_TIMEOUT_S = 900
VERSION_TIMEOUT_S = 60
PROJECT_FILES = ("package.json", "package-lock.json")
API_KEY = "sk-ant-scripted-0000000000000000000000000000"
"""Any key does: the model server is ours and does not check it."""


def unavailable() -> str | None:
    """Why the hosts cannot be installed here, or None when they can."""
    return node_missing(MIN_NODE, CLAUDE_PACKAGE)


def skip_or_fail(reason: str) -> None:
    """Skip locally; fail under ``CI=true``, where the real hosts must run."""
    node_support.skip_or_fail(reason, "agent hosts")


def _digest() -> str:
    digest = hashlib.sha256()
    for name in PROJECT_FILES:
        digest.update((HOST_PROJECT / name).read_bytes())
    digest.update(repr((node_version(), platform.system(), platform.machine())).encode())
    return digest.hexdigest()


@dataclass(frozen=True)
class ClaudeCode:
    """The installed Claude Code."""

    root: Path
    """Where ``npm ci`` installed the lock file (holds ``node_modules``)."""
    installed_now: bool
    """Whether this call ran ``npm ci`` (False: the stamp matched and it was reused)."""

    @property
    def claude(self) -> Path:
        """The ``claude`` executable (the native binary the package's postinstall put there)."""
        return self.root / "node_modules" / ".bin" / "claude"

    @property
    def codex(self) -> Path:
        """The ``codex`` executable (Codex CLI's wrapper of its native binary)."""
        return self.root / "node_modules" / ".bin" / "codex"

    @property
    def gemini(self) -> Path:
        """The ``gemini`` executable (Gemini CLI, a bundled Node program)."""
        return self.root / "node_modules" / ".bin" / "gemini"

    @property
    def version(self) -> str:
        """The installed version of Claude Code."""
        return self.version_of(CLAUDE_PACKAGE)

    def version_of(self, package: str) -> str:
        """The installed version of one of the pinned packages."""
        manifest = self.root / "node_modules" / package / "package.json"
        return str(json.loads(manifest.read_text(encoding="utf-8"))["version"])


def _check_runs(host: ClaudeCode, home: Path) -> None:
    for program, package in ((host.claude, CLAUDE_PACKAGE), (host.codex, CODEX_PACKAGE),
                             (host.gemini, GEMINI_PACKAGE)):
        done = subprocess.run(
            [str(program), "--version"], capture_output=True, text=True, check=False,
            env=host_environment(home, "http://127.0.0.1:9"), timeout=VERSION_TIMEOUT_S,
        )
        if done.returncode != 0 or host.version_of(package) not in done.stdout:
            raise InstallError(f"{program} --version answered {done.returncode}:\n"
                               f"{done.stdout}\n{done.stderr}")


def install(root: Path = INSTALL_DIR) -> ClaudeCode:
    """The lock file installed at ``root``: by ``npm ci`` unless the stamp says it already is
    (a fresh install is checked to run: ``claude --version``)."""
    root.mkdir(parents=True, exist_ok=True)
    with locked(root.parent / f"{root.name}.lock"):
        wanted = _digest()
        stamp = root / STAMP
        current = stamp.read_text(encoding="utf-8").strip() if stamp.exists() else None
        host = ClaudeCode(root, installed_now=current != wanted
                          or not (root / "node_modules").is_dir())
        if host.installed_now:
            npm_ci(root, HOST_PROJECT, timeout_s=INSTALL_TIMEOUT_S)
            home = root / ".check-home"
            try:
                _check_runs(host, home)
            finally:
                shutil.rmtree(home, ignore_errors=True)
            stamp.write_text(wanted + "\n", encoding="utf-8")
    return host


def host_environment(home: Path, base_url: str, *, path: str | None = None,
                     extra: dict[str, str] | None = None) -> dict[str, str]:
    """The whole environment of a headless host run: ``PATH`` (this process's unless given),
    ``HOME`` (created, the caller's throwaway directory), the model server at ``base_url``, a
    made-up key, and no telemetry, auto-update or other traffic. As root, ``IS_SANDBOX=1``
    (Claude Code refuses ``bypassPermissions`` to root otherwise); ``SESSIONLEDGER_HOOK_WRITER``
    as this process has it. ``extra`` is added last."""
    home.mkdir(parents=True, exist_ok=True)
    env = {
        "PATH": path if path is not None else os.environ.get("PATH", os.defpath),
        "HOME": str(home),
        "ANTHROPIC_BASE_URL": base_url,
        "ANTHROPIC_API_KEY": API_KEY,
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_AUTOUPDATER": "1",
    }
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        env["IS_SANDBOX"] = "1"
    if WRITER_ENV in os.environ:  # the tests' "off" (conftest): no hook's writer left running
        env[WRITER_ENV] = os.environ[WRITER_ENV]
    env.update(extra or {})
    return env


CLAUDE_MODEL = "claude-sonnet-4-6"
"""The model Claude Code runs with unless a test names another: Claude Code 2.1.337 offers its
task list (TaskCreate, …) only with some models, Sonnet 4.6 among them, and not with its
default, Opus 5.5 (``CLAUDE_CODE_ENABLE_TODO_TOOLS=1`` would turn it on there)."""


def with_model(args: Sequence[str], model: str | None = CLAUDE_MODEL) -> list[str]:
    """``args`` with ``--model MODEL`` unless they name a model; ``None``: Claude Code's own
    default."""
    return list(args) if "--model" in args or model is None else ["--model", model, *args]


def claude_headless(host: ClaudeCode, prompt: str, *args: str,
                    model: str | None = CLAUDE_MODEL) -> list[str]:
    """``claude -p PROMPT --output-format stream-json --verbose`` and ``args``
    (:func:`with_model`)."""
    return [str(host.claude), "-p", prompt, "--output-format", "stream-json", "--verbose",
            *with_model(args, model)]


# -- the hooks as docs/claude-code.md gives them -------------------------------------------------

DOC = ROOT / "docs" / "claude-code.md"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.MULTILINE | re.DOTALL)
DOC_DB, DOC_BASE = "sqlite:///path/to/ledger.db", "http://127.0.0.1:8765"


def documented_settings() -> dict[str, str]:
    """The settings snippets of docs/claude-code.md by hook type (``http``, ``command``)."""
    found: dict[str, list[str]] = {"http": [], "command": []}
    for language, body in FENCE.findall(DOC.read_text(encoding="utf-8")):
        if language != "json":
            continue
        value = json.loads(body)
        if not isinstance(value, dict) or "hooks" not in value:
            continue
        kinds = {hook["type"] for entries in value["hooks"].values() for entry in entries
                 for hook in entry["hooks"]}
        found["http" if "http" in kinds else "command"].append(body)
    for kind, bodies in found.items():
        if len(bodies) != 1:
            raise RuntimeError(f"docs/claude-code.md has {len(bodies)} {kind} settings snippets")
    return {kind: bodies[0] for kind, bodies in found.items()}


def settings_file(kind: str, base_url: str, db_url: str) -> str:
    """A project's ``.claude/settings.json`` with the page's ``kind`` snippet (``http`` or
    ``command``), only the places that name a machine changed: the server's address and its
    database."""
    return documented_settings()[kind].replace(DOC_BASE, base_url).replace(DOC_DB, db_url)


# -- the interactive TUI in a terminal --------------------------------------------------------


def interactive_home(home: Path, project: Path) -> None:
    """What the interactive TUI asks once, answered in ``home``'s ``.claude.json`` (as a user
    who has run it before has it): onboarding done, the made-up key approved (Claude Code
    keeps its last 20 characters) and ``project`` trusted."""
    home.mkdir(parents=True, exist_ok=True)
    (home / ".claude.json").write_text(json.dumps({
        "hasCompletedOnboarding": True,
        "customApiKeyResponses": {"approved": [API_KEY[-20:]], "rejected": []},
        "projects": {os.path.realpath(project): {"hasTrustDialogAccepted": True}},
    }), encoding="utf-8")


def _signal_group(group: int, sig: int) -> bool:
    """``sig`` sent to the process group ``group`` (0: only whether it still has a member);
    False when it has none left."""
    try:
        os.killpg(group, sig)
    except ProcessLookupError:
        return False
    except PermissionError:  # the id was reused by somebody else's group
        return False
    return True


class Terminal:
    """A program in a tmux pane (160 columns by 50 rows) of its own tmux server (``-L``), its
    environment exactly ``env``: what it shows (:meth:`screen`), keys typed to it. Closing
    kills that server and everything in it."""

    COLUMNS, ROWS = 160, 50

    def __init__(self, command: Sequence[str], *, cwd: Path, env: Mapping[str, str]) -> None:
        if shutil.which("tmux") is None:
            raise InstallError("tmux is not installed")
        self.socket = f"sessionledger-{uuid.uuid4().hex[:12]}"
        inner = " ".join(["env", "-i", *(shlex.quote(f"{k}={v}") for k, v in env.items()),
                          *map(shlex.quote, command)])
        self._tmux("new-session", "-d", "-s", "main", "-x", str(self.COLUMNS),
                   "-y", str(self.ROWS), "-c", str(cwd), inner)

    def _tmux(self, *args: str) -> str:
        done = subprocess.run(["tmux", "-L", self.socket, "-f", os.devnull, *args],
                              capture_output=True, text=True, timeout=30, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"tmux {args[0]}: {done.stderr.strip()}")
        return done.stdout

    def screen(self, *, history: int = 0) -> str:
        """The pane's text now (with ``history`` lines scrolled off above it)."""
        return self._tmux("capture-pane", "-p", "-t", "main", "-S", str(-history))

    def wait_for(self, shown: str | Callable[[str], bool], *, timeout_s: float = 60.0,
                 history: int = 500) -> str:
        """The screen once ``shown`` is on it (or ``shown(screen)`` holds); an
        AssertionError with the screen when that does not happen within ``timeout_s``. With
        ``history=0`` only what is visible now counts: a dialog open now, not one scrolled
        off earlier."""
        test = shown if callable(shown) else (lambda text: shown in text)
        deadline = time.monotonic() + timeout_s
        while True:
            text = self.screen(history=history)
            if test(text):
                return text
            if time.monotonic() > deadline:
                raise AssertionError(f"not shown within {timeout_s} s: {shown!r}\n{text}")
            time.sleep(0.2)

    def type(self, text: str) -> None:
        """``text`` typed literally (no key names)."""
        self._tmux("send-keys", "-t", "main", "-l", text)

    def press(self, *keys: str) -> None:
        """tmux key names: ``Enter``, ``Escape``, ``Down``, ``2``…"""
        self._tmux("send-keys", "-t", "main", *keys)

    def submit(self, text: str) -> None:
        """``text`` typed, then Enter once the input shows it."""
        self.type(text)
        self.wait_for(text, timeout_s=10)
        self.press("Enter")

    def close(self, *, grace_s: float = 10.0) -> None:
        """Hang up as a terminal's shell does when its window closes: SIGHUP to the pane's
        process group (the program and what it started), ``grace_s`` for them to stop, then
        the tmux server killed and anything left of the group with it (SIGKILL). tmux's own
        hangup reaches only the pane's first process (say ``make``), not its children."""
        try:
            group = int(self._tmux("display-message", "-p", "-t", "main", "#{pane_pid}"))
        except (RuntimeError, ValueError, subprocess.TimeoutExpired):
            group = None
        if group is not None and _signal_group(group, signal.SIGHUP):
            deadline = time.monotonic() + grace_s
            while _signal_group(group, 0) and time.monotonic() < deadline:
                time.sleep(0.05)
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True,
                       timeout=30, check=False)
        if group is not None:
            _signal_group(group, signal.SIGKILL)

    def __enter__(self) -> Terminal:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()
