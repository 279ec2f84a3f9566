"""What the command hook and ``serve`` agree on: the hook routes, the header naming why an
answer is ``{}``, and the discovery file beside a database that says where its ``serve``
listens (issue 38). Only the standard library: the command hook's hot path reads it.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False  # as typing.TYPE_CHECKING, without importing typing
if TYPE_CHECKING:
    from pathlib import Path

__all__ = [
    "DISCOVERY_SUFFIX",
    "WRITER_LOCK_SUFFIX",
    "WRITER_LOG_SUFFIX",
    "HOOK_PATH",
    "HOOK_PATHS",
    "PROBLEM_HEADER",
    "WORKSPACE_HEADER",
    "discovery_path",
    "remove_discovery",
    "write_discovery",
]

HOOK_PATH = "/v1/hooks/claude-code"
"""The route of Claude Code's HTTP hook (``serve``), where its command hook forwards."""
HOOK_PATHS = {"claude-code": HOOK_PATH, "codex": "/v1/hooks/codex", "gemini": "/v1/hooks/gemini"}
"""Each host's hook route, by the name ``sessionledger hook HOST`` takes: Codex CLI and Gemini
CLI have command hooks only, which forward here."""
PROBLEM_HEADER = "Sessionledger-Problem"
"""The response header saying why the answer is ``{}`` (percent-encoded): the forwarding
command hook prints it on stderr, as it would have recording the event itself."""
WORKSPACE_HEADER = "Sessionledger-Workspace"
"""The request header in which a forwarding command hook names its own workspace root
(percent-encoded): the hook's writer creates the hook's sessions inside that root, as the hook
would have recording them itself, so one writer serves the hooks of every project on its
database. Any other ``serve`` ignores it: its own root is the one it was started with."""
DISCOVERY_SUFFIX = ".serve.json"
WRITER_LOCK_SUFFIX = ".writer.lock"
"""Beside the database: the lock the hook's writer holds while it runs (``serve
--hook-writer``), whose modification time is when a hook last started one."""
WRITER_LOG_SUFFIX = ".writer.log"
"""Beside the database: the hook's writers' warnings and errors, appended."""


def discovery_path(store_url: str) -> str | None:
    """Where ``serve`` on the SQLite store ``store_url`` says where it listens: beside the
    database, ``<database>.serve.json`` (``None`` for other stores). The path is read from the
    URL as ``eventlog.sqlite_path_from_url`` reads it (a test keeps the two the same); a string,
    since ``pathlib`` would cost the forwarding hook a tenth of its start."""
    if store_url.startswith("sqlite:///") and not any(c in store_url for c in "?#\t\r\n"):
        path = store_url[len("sqlite://"):]  # urlsplit's answer, without its import (~3 ms)
    else:
        from urllib.parse import urlsplit

        parts = urlsplit(store_url)
        if parts.scheme != "sqlite" or parts.netloc:
            return None
        path = parts.path
    raw = path[1:] if path.startswith("/") else path
    if not raw:
        return None
    return os.path.normpath(raw) + DISCOVERY_SUFFIX


def write_discovery(store_url: str, url: str, *, token: bool,
                    writer: tuple[str, str] | None = None) -> Path | None:
    """Record that this process serves ``store_url`` at ``url`` (atomically: a hook never
    reads half a file; readable by this user only); ``token``: whether requests need the bearer
    token. ``writer``: this is a hook's writer (``serve --hook-writer``), whose bearer token
    (its own, random) and workspace root the file holds; ``anyRoot`` says that the hooks of
    every workspace forward to it, naming their own root in :data:`WORKSPACE_HEADER` (a hook
    of an earlier version forwards only from inside ``root``)."""
    import json
    from pathlib import Path

    found = discovery_path(store_url)
    if found is None:
        return None
    path = Path(found)
    record: dict[str, object] = {"url": url, "pid": os.getpid(), "token": token}
    if writer is not None:
        record.update(secret=writer[0], root=writer[1], writer=True, anyRoot=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}")
    descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with open(descriptor, "w", encoding="utf-8") as file:
        file.write(json.dumps(record))
    os.replace(partial, path)
    return path


def remove_discovery(path: Path) -> None:
    """Remove the discovery file if it is still this process's (a newer ``serve`` on the same
    database may have replaced it)."""
    import json

    try:
        record = json.loads(path.read_text(encoding="utf-8"))
        if record.get("pid") == os.getpid():
            path.unlink()
    except (OSError, ValueError, AttributeError):
        pass
