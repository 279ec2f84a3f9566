"""The third-party Node MCP clients the tests drive the server with (issue 21 acceptance 1).

``tests/node/package.json`` pins them exactly and ``tests/node/package-lock.json`` pins the
whole tree (with integrity hashes): the MCP Inspector (``@modelcontextprotocol/inspector``,
its ``--cli`` mode) and the TypeScript SDK v2 client (``@modelcontextprotocol/client``) that
``tests/node/host.mjs`` is a small host on. :func:`install` runs ``npm ci`` from the lock file
into :data:`INSTALL_DIR` (``.cache/node`` at the repository root, ignored by git) once and
reuses it while the lock file, the manifest and the node version are the same (their hash is
kept in :data:`STAMP`); an ``flock`` keeps the test workers from installing at once.

Without ``node``/``npm`` (or with a node older than the pinned client needs) the tests that
ask for the install are skipped with the reason — unless ``CI=true``, where they fail: CI
must run them (``.ci/run`` installs Debian's ``nodejs`` and ``npm``).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import queue
import re
import shutil
import subprocess
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

__all__ = [
    "INSTALL_DIR", "NODE_PROJECT", "InstallError", "NodeClients", "install", "locked", "npm_ci",
    "node_missing", "node_version", "npm_environment", "RunningHost", "run_json_lines",
    "running_host", "skip_or_fail", "unavailable", "which",
]

ROOT = Path(__file__).resolve().parents[1]
NODE_PROJECT = ROOT / "tests" / "node"
INSTALL_DIR = Path(os.environ.get("SESSIONLEDGER_NODE_DIR", ROOT / ".cache" / "node"))
STAMP = ".installed-sha256"
MIN_NODE = (20, 0)  # the engines of @modelcontextprotocol/client 2.x
INSTALL_TIMEOUT_S = 600
STOP_TIMEOUT_S = 20.0
PROJECT_FILES = ("package.json", "package-lock.json")
HOST_SCRIPT = "host.mjs"


def node_version() -> tuple[int, int] | None:
    """The ``node`` on the path as (major, minor), or None without one."""
    node = shutil.which("node")
    if node is None:
        return None
    out = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=30)
    match = re.match(r"v(\d+)\.(\d+)", out.stdout.strip())
    return (int(match.group(1)), int(match.group(2))) if match else None


def unavailable() -> str | None:
    """Why the Node clients cannot run here, or None when they can."""
    return node_missing(MIN_NODE, "the pinned @modelcontextprotocol/client")


def node_missing(least: tuple[int, int], needed_by: str) -> str | None:
    """Why ``node`` and ``npm`` cannot serve ``needed_by`` here (absent, or a node older than
    ``least``), or None when they can (also for tests/host_support.py)."""
    for tool in ("node", "npm"):
        if shutil.which(tool) is None:
            return f"no {tool} on the path (apt-get install nodejs npm)"
    version = node_version()
    if version is None:
        return "node --version answered nothing readable"
    if version < least:
        return (f"node {version[0]}.{version[1]} is older than the {least[0]}.{least[1]}"
                f" {needed_by} needs")
    return None


def skip_or_fail(reason: str, what: str = "Node MCP clients") -> None:
    """Skip locally; fail under ``CI=true``, where the third-party programs must run."""
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"the {what} must run on CI: {reason}", pytrace=False)
    pytest.skip(f"{what} skipped: {reason}")


def _digest() -> str:
    digest = hashlib.sha256()
    for name in PROJECT_FILES:
        digest.update((NODE_PROJECT / name).read_bytes())
    digest.update(repr(node_version()).encode())
    return digest.hexdigest()


def npm_environment() -> dict[str, str]:
    return {
        **os.environ, "npm_config_update_notifier": "false", "npm_config_fund": "false",
        "npm_config_audit": "false",
    }


@dataclass(frozen=True)
class NodeClients:
    """The installed clients: commands to run them with."""

    root: Path
    """Where ``npm ci`` installed the lock file (holds ``node_modules`` and the host)."""
    installed_now: bool
    """Whether this call ran ``npm ci`` (False: the stamp matched and it was reused)."""

    def version(self, package: str) -> str:
        """The installed version of an npm ``package``."""
        manifest = self.root / "node_modules" / package / "package.json"
        return str(json.loads(manifest.read_text(encoding="utf-8"))["version"])

    def inspector(self, *args: str) -> list[str]:
        """``mcp-inspector --cli`` with ``args``."""
        return [str(self.root / "node_modules" / ".bin" / "mcp-inspector"), "--cli", *args]

    def host(self, scenario: dict[str, Any]) -> list[str]:
        """``node host.mjs`` running ``scenario`` (see ``tests/node/host.mjs``)."""
        return [which("node"), str(self.root / HOST_SCRIPT), json.dumps(scenario)]


def which(tool: str) -> str:
    found = shutil.which(tool)
    assert found is not None, f"no {tool} on the path"
    return found


@contextmanager
def locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def npm_ci(root: Path, project: Path = NODE_PROJECT, *,
           timeout_s: float = INSTALL_TIMEOUT_S) -> None:
    """``npm ci`` of ``project``'s lock file into ``root`` (its stamp removed first, so a
    failed install is never taken for a finished one)."""
    for name in PROJECT_FILES:
        shutil.copyfile(project / name, root / name)
    (root / STAMP).unlink(missing_ok=True)
    done = subprocess.run(
        [which("npm"), "ci", "--no-audit", "--no-fund"], cwd=root, env=npm_environment(),
        capture_output=True, text=True, timeout=timeout_s, check=False,
    )
    if done.returncode != 0:
        raise InstallError(f"npm ci failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")


class InstallError(Exception):
    """``npm ci`` did not install the lock file (or what it installed does not run)."""


def install(root: Path = INSTALL_DIR) -> NodeClients:
    """The lock file installed at ``root``: by ``npm ci`` unless the stamp says it already is.

    The host script is copied in every time (it is small and may have changed)."""
    root.mkdir(parents=True, exist_ok=True)
    with locked(root.parent / f"{root.name}.lock"):
        wanted = _digest()
        stamp = root / STAMP
        current = stamp.read_text(encoding="utf-8").strip() if stamp.exists() else None
        installed_now = current != wanted or not (root / "node_modules").is_dir()
        if installed_now:
            npm_ci(root)
            stamp.write_text(wanted + "\n", encoding="utf-8")
        shutil.copyfile(NODE_PROJECT / HOST_SCRIPT, root / HOST_SCRIPT)
    return NodeClients(root, installed_now)


class RunningHost:
    """A ``host.mjs`` run in the background: its events as they come, and ``abort``.

    For scenarios a test steps through (answer a question elsewhere while the host waits,
    cancel a call): :meth:`next_event` returns the next JSON line the host printed,
    :meth:`wait_for` skips to the next one of a kind, :meth:`abort` writes ``abort`` to its
    stdin (the steps with ``"abortOnStdin": true`` abort their call with an AbortSignal)."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.process = process
        self.events: list[dict[str, Any]] = []
        self._queue: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            if line.startswith("{"):
                self._queue.put(json.loads(line))
        self._queue.put(None)

    def next_event(self, timeout: float = 30.0) -> dict[str, Any]:
        """The next event; fails when the host ends or prints nothing for ``timeout`` s."""
        try:
            event = self._queue.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"the host printed nothing for {timeout}s") from None
        assert event is not None, f"the host ended after {self.events}"
        self.events.append(event)
        return event

    def wait_for(self, kind: str, timeout: float = 30.0) -> dict[str, Any]:
        """The next event of ``kind`` (``connected``, ``progress``, ``result``, …)."""
        while (event := self.next_event(timeout))["event"] != kind:
            pass
        return event

    def join(self) -> None:
        """Wait for the reader to see the end of the host's output."""
        self._reader.join(timeout=STOP_TIMEOUT_S)

    def abort(self) -> None:
        """Abort the call in flight (its step must say ``"abortOnStdin": true``)."""
        assert self.process.stdin is not None
        self.process.stdin.write("abort\n")
        self.process.stdin.flush()


@contextmanager
def running_host(
    clients: NodeClients, scenario: dict[str, Any], *, stop_timeout: float = STOP_TIMEOUT_S
) -> Iterator[RunningHost]:
    """Start ``host.mjs`` over ``scenario``; on exit wait for it to end (killed after
    ``stop_timeout`` s, which fails the test)."""
    process = subprocess.Popen(
        clients.host(scenario), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    running = RunningHost(process)
    try:
        yield running
    finally:
        assert process.stdin is not None and process.stdout is not None
        process.stdin.close()
        try:
            process.wait(timeout=stop_timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            raise AssertionError(f"the host did not end within {stop_timeout}s") from None
        finally:
            running.join()
            process.stdout.close()


def run_json_lines(
    command: Sequence[str], *, timeout: float, env: dict[str, str] | None = None,
    cwd: Path | None = None,
) -> tuple[int, list[dict[str, Any]], str]:
    """Run ``command`` to its end; its exit code, the JSON objects it printed one a line on
    stdout, and its stderr."""
    done = subprocess.run(
        list(command), capture_output=True, text=True, timeout=timeout, env=env, cwd=cwd,
        check=False,
    )
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    return done.returncode, lines, done.stderr
