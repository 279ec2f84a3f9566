"""The approved plan's file: the one write outside the log (PM-7, PM-10).

On approval the plan is written to ``<workspace>/.zcode/plans/plan-<sanitised id>.md`` (the
folder is ``[plans] folder`` of the workspace's configuration file when it names one):
characters of the session id outside ``[A-Za-z0-9_.-]`` become ``-``, the directories are
created, and the text goes to a temporary file in the same directory that is renamed over the
target (atomic on POSIX). Whatever the id or the workspace holds (``/``, ``..``, NUL, spaces,
non-ASCII, a symlinked ``.zcode``), the resolved target must lie inside the resolved plans
directory, which must lie inside the resolved workspace, which must lie inside the server's
workspace root; otherwise nothing is written and the failure is reported like any other write
error (``PlanFileWriteFailed``).

The path is resolved when the plan is written, not when the session was created (EG-4):
a workspace, or a directory in it, swapped for a symlink after the session was created is
seen then. So that nothing can be swapped between that check and the write, the resolved
plans directory is then opened one component at a time from ``/`` without following a
symlink (missing ones created the same way), and the temporary file is created
(``O_EXCL | O_NOFOLLOW``) and renamed relative to that open directory: a component replaced
by a symlink meanwhile fails the write, and nothing outside the directory checked is created,
written or renamed (a plan file replaced by a symlink is replaced, its target untouched).

Only a cancellation — the service shutting down or the session being deleted while the file is
written — is not a write error: :class:`PlanWriteCancelled` is raised, the temporary file is
removed, and the caller appends no exit (Plan stays on). An approval abandoned after its file
was renamed in place (the service stopped before ``PlanApproved`` was appended) is put back as
the log says by :func:`put_back`. After a context compaction the file is
read back (at most :data:`READ_LIMIT` bytes, a trailing partial UTF-8 character dropped) for
the ``plan_file_reference`` reminder
(:func:`sessionledger.service.turns.plan_file_source`).
"""

from __future__ import annotations

import codecs
import contextlib
import os
import re
import secrets
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from eventlog import EventStore, PlanApproved, RecordedEvent
from projections import SessionSummary

from ..config.workspace import DEFAULT_PLANS_FOLDER

__all__ = [
    "PLANS_DIR",
    "READ_LIMIT",
    "PlanFileResult",
    "PlanFiles",
    "PlanWriteCancelled",
    "last_approved_plan",
    "plan_file_name",
    "plan_path",
    "plans_folder",
    "put_back",
    "read_plan_file",
    "restore_plan_files",
]

PLANS_DIR = Path(DEFAULT_PLANS_FOLDER)
"""The default plans folder of a workspace; ``[plans] folder`` in its configuration file
names another (:func:`plans_folder`)."""
READ_LIMIT = 20000 * 4 + 1024
"""PM-10: 81024 bytes — the longest plan in UTF-8 plus room for the heading."""

_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")

Cancelled = Callable[[], bool]


class PlanWriteCancelled(Exception):
    """The write was cancelled (shutdown or session deletion): the exit must not happen."""


@dataclass(frozen=True, slots=True)
class PlanFileResult:
    """Where the plan went: ``path`` relative to the workspace, and the error if any."""

    path: str
    error: str | None = None

    @property
    def written(self) -> bool:
        return self.error is None


def plan_file_name(session_id: str) -> str:
    """``plan-<id>.md`` with every character outside ``[A-Za-z0-9_.-]`` replaced by ``-``."""
    return f"plan-{_UNSAFE.sub('-', session_id)}.md"


def plans_folder(workspace: str | Path) -> Path:
    """The workspace's plans folder, relative to it: ``[plans] folder`` of its configuration
    file, else :data:`PLANS_DIR`. A configuration that cannot be read gives the default (the
    calls of such a workspace are refused before a plan could be approved), as does a
    workspace path no file can have."""
    from ..config.workspace import load_workspace_config
    from ..errors import SessionLedgerError

    try:
        return Path(load_workspace_config(Path(workspace)).plans.folder)
    except (SessionLedgerError, ValueError):  # ValueError: a path no file can have (NUL)
        return PLANS_DIR


def plan_path(workspace: str | Path, session_id: str, *, root: Path | None = None) -> Path:
    """The plan file's absolute path, checked after resolution (ValueError when unsafe):
    inside the workspace's plans folder and, with ``root``, inside the server's root."""
    resolved = Path(workspace).resolve()
    if root is not None and not resolved.is_relative_to(root.resolve()):
        raise ValueError(f"the workspace {str(workspace)!r} now resolves to {str(resolved)!r}, "
                         f"outside the server's workspace root {str(root)!r}")
    folder = plans_folder(resolved)
    plans = (resolved / folder).resolve()
    target = (plans / plan_file_name(session_id)).resolve()
    if not plans.is_relative_to(resolved) or target.parent != plans:
        raise ValueError(f"the plan file would leave {folder.as_posix()} of the workspace")
    return target


def _relative(workspace: str | Path, session_id: str) -> str:
    return (plans_folder(workspace) / plan_file_name(session_id)).as_posix()


class PlanFiles:
    """Writes approved plans inside ``root`` (the server's workspace root; ``None``: only
    inside each workspace); :meth:`close` cancels writes in progress (service shutdown)."""

    def __init__(self, root: Path | None = None) -> None:
        self._closing = threading.Event()
        self._root = root

    @property
    def root(self) -> Path | None:
        return self._root

    def close(self) -> None:
        """The service is shutting down: a write in progress is cancelled."""
        self._closing.set()

    def write(
        self, workspace: str, session_id: str, plan: str, *, cancelled: Cancelled = bool,
    ) -> PlanFileResult:
        """Write ``plan`` atomically; a write error is returned, a cancellation raised."""
        relative = _relative(workspace, session_id)

        def stop() -> bool:
            return self._closing.is_set() or cancelled()

        if stop():
            raise PlanWriteCancelled(relative)
        try:
            target = plan_path(workspace, session_id, root=self._root)
            directory = _open_directory(target.parent)
            try:
                _atomic_write(directory, target.name, plan.encode("utf-8"), stop)
            finally:
                os.close(directory)
        except PlanWriteCancelled:
            raise
        except (OSError, ValueError) as exc:
            return PlanFileResult(relative, error=f"{type(exc).__name__}: {exc}")
        return PlanFileResult(relative)


_DIRECTORY = (os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
              | getattr(os, "O_PATH", os.O_RDONLY))  # O_PATH: search permission is enough
_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def _open_directory(path: Path) -> int:
    """Open the resolved absolute ``path`` from ``/`` one component at a time, creating the
    missing ones, never following a symlink (a component that is one now: ``ENOTDIR``)."""
    fd = os.open(path.anchor, _DIRECTORY)
    try:
        for part in path.parts[1:]:
            try:
                child = os.open(part, _DIRECTORY, dir_fd=fd)
            except FileNotFoundError:
                with contextlib.suppress(FileExistsError):  # made meanwhile: opened below
                    os.mkdir(part, dir_fd=fd)
                child = os.open(part, _DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


def _new_temp(directory: int) -> tuple[int, str]:
    """A new temporary file in the open ``directory``: its descriptor and name."""
    name = f".plan-{secrets.token_hex(8)}.tmp"
    return os.open(name, _NEW_FILE, 0o600, dir_fd=directory), name


def _atomic_write(directory: int, name: str, data: bytes, stop: Cancelled) -> None:
    """``data`` to a new temporary file in the open ``directory``, renamed over ``name``."""
    fd, temp = _new_temp(directory)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        if stop():
            raise PlanWriteCancelled(name)
        os.replace(temp, name, src_dir_fd=directory, dst_dir_fd=directory)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp, dir_fd=directory)
        raise


def read_plan_file(workspace: str, session_id: str) -> tuple[Path, str] | None:
    """The plan file's path and text (at most :data:`READ_LIMIT` bytes), or ``None``."""
    try:
        path = plan_path(workspace, session_id)
        with path.open("rb") as handle:
            data = handle.read(READ_LIMIT)
    except (OSError, ValueError):
        return None
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    return path, decoder.decode(data, final=False)  # a trailing partial character waits


def restore_plan_files(
    store: EventStore, sessions: Iterable[SessionSummary], files: PlanFiles | None = None
) -> list[str]:
    """``rebuild``: write again each live session's last approved plan whose file is missing
    or differs from the log; the absolute paths written. Unwritable ones are skipped."""
    writer = files if files is not None else PlanFiles()
    restored: list[str] = []
    for summary in sessions:
        if summary.deleted:
            continue
        approved = last_approved_plan(store.read_session(summary.session_id))
        if approved is None or _matches(summary, approved):
            continue
        result = writer.write(summary.workspace, summary.session_id, approved)
        if result.written:
            restored.append(str(plan_path(summary.workspace, summary.session_id,
                                          root=writer.root)))
    return restored


def last_approved_plan(events: Iterable[RecordedEvent]) -> str | None:
    """The plan of the last ``PlanApproved`` among ``events``, or ``None``."""
    approved = None
    for event in events:
        if isinstance(event.data, PlanApproved):
            approved = event.data.plan
    return approved


def put_back(
    files: PlanFiles, workspace: str, session_id: str, *, approved: str | None, abandoned: str
) -> None:
    """After the approval of ``abandoned`` was abandoned: the file holds the last ``approved``
    plan again, or is removed when no plan was approved and it holds ``abandoned`` (what the
    abandoned write left). Best effort: an error leaves the file (``rebuild`` restores it)."""
    try:
        target = plan_path(workspace, session_id)
        current = target.read_bytes() if target.is_file() else None
        if approved is None:
            if current == abandoned.encode("utf-8"):
                target.unlink()
        elif current != approved.encode("utf-8"):
            files.write(workspace, session_id, approved)
    except (OSError, ValueError, PlanWriteCancelled):
        return


def _matches(summary: SessionSummary, plan: str) -> bool:
    try:
        return plan_path(summary.workspace, summary.session_id).read_bytes() == plan.encode()
    except (OSError, ValueError):
        return False
