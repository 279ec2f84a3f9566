"""Copying a SQLite store with SQLite's online backup API (docs/cli.md ``backup``).

The copy is taken in one step of ``sqlite3.Connection.backup``: one read transaction, so it
is the store as of one commit (every event, head record and projection row of that instant)
and, the file being in WAL mode, writers go on meanwhile. It is written to a temporary file
beside the destination, switched to a self-contained rollback journal, and only then
published under the destination's name, so a failed backup leaves no half-written file. The
source is opened read-write but only read; nothing is created or rebuilt in it.
"""

from __future__ import annotations

import os
import sqlite3
import stat
import tempfile
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from .errors import BackupFailed, BackupRefused
from .store import sqlite_path_from_url

__all__ = ["BackupReport", "backup_store"]

_SIDE_FILES = ("-wal", "-shm", "-journal")
_BUSY_TIMEOUT_S = 5.0


@dataclass(frozen=True, slots=True)
class BackupReport:
    """What a backup copied: counted in the copy, so it describes exactly the snapshot."""

    source: Path
    destination: Path
    events: int
    sessions: int
    head_position: int
    size_bytes: int


def backup_store(url: str, destination: str | Path, *, overwrite: bool = False) -> BackupReport:
    """Copy the SQLite store ``url`` names to ``destination`` while it may be in use.

    Refuses (:class:`BackupRefused`, nothing written) a store that is not SQLite or does not
    exist, a destination whose directory is missing, a destination that is the store or one
    of its ``-wal``/``-shm`` files, and an existing destination unless ``overwrite``. A copy
    that fails midway raises :class:`BackupFailed` and leaves the destination as it was.
    """
    source = _source_path(url)
    target = _target_path(Path(destination), source, overwrite=overwrite)
    with _temporary_beside(target) as temporary:
        try:
            _copy(source, temporary)
            report = _describe(source, target, temporary)
        except (OSError, sqlite3.Error) as exc:
            raise BackupFailed(f"backup of {source} to {target} failed: {exc}") from exc
        _publish(temporary, target, overwrite=overwrite)
    _sync_directory(target.parent)
    return report


def _source_path(url: str) -> Path:
    scheme = urlsplit(url).scheme
    if scheme == "memory":
        raise BackupRefused("a memory:// store lives in one process: there is nothing to copy")
    if scheme == "postgresql":
        raise BackupRefused("backup copies a SQLite store: back up PostgreSQL with pg_dump")
    if scheme != "sqlite":
        raise BackupRefused(f"backup copies a SQLite store (sqlite:///path), not {url!r}")
    path, _options = sqlite_path_from_url(url)
    if not path.is_file():
        raise BackupRefused(f"there is no event store at {path}")
    return path.resolve()


def _target_path(target: Path, source: Path, *, overwrite: bool) -> Path:
    target = target.expanduser().absolute()
    if not target.parent.is_dir():
        raise BackupRefused(f"the directory of {target} does not exist")
    store_files = [source, *(source.with_name(source.name + s) for s in _SIDE_FILES)]
    if target.resolve() in store_files or any(_same_file(target, f) for f in store_files):
        raise BackupRefused(f"{target} is the store itself: back up to another file")
    if target.is_dir():
        raise BackupRefused(f"{target} is a directory: name the backup file")
    kind = _not_a_file(target)
    if kind is not None:
        raise BackupRefused(f"{target} is {kind}, not a regular file: a backup replaces only "
                            "a file; name a new path or a file")
    if target.exists() and not overwrite:
        raise BackupRefused(f"{target} exists: choose another file or pass --overwrite")
    return target


def _not_a_file(target: Path) -> str | None:
    """What ``target`` is when it exists and is not a regular file (a symbolic link, a FIFO,
    a device, a socket): the rename that publishes a backup would put a file in its place."""
    try:
        mode = os.lstat(target).st_mode
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"unreadable ({exc.strerror})"
    if stat.S_ISREG(mode):
        return None
    for test, kind in ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISFIFO, "a FIFO"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return kind
    return "not a regular file"


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist
        return False


@contextmanager
def _temporary_beside(target: Path) -> Iterator[Path]:
    """An empty file in ``target``'s directory, removed unless it was published."""
    handle, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".partial",
                                    dir=target.parent)
    os.close(handle)
    temporary = Path(name)
    try:
        yield temporary
    finally:
        for path in (temporary, *(Path(name + s) for s in _SIDE_FILES)):
            path.unlink(missing_ok=True)


def _open_source(source: Path) -> sqlite3.Connection:
    """The existing store (``mode=rw`` never creates one), checked to hold an event log."""
    conn = sqlite3.connect(f"{source.as_uri()}?mode=rw", uri=True, timeout=_BUSY_TIMEOUT_S)
    try:
        found = conn.execute(
            "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'events'"
        ).fetchone()[0]
    except sqlite3.DatabaseError as exc:
        conn.close()
        raise BackupRefused(f"{source} is not a sessionledger store: {exc}") from exc
    if not found:
        conn.close()
        raise BackupRefused(f"{source} is not a sessionledger store: it has no events table")
    return conn


def _copy(source: Path, temporary: Path) -> None:
    with closing(_open_source(source)) as src, closing(sqlite3.connect(temporary)) as dst:
        # pages=-1: the whole file in one step, from one read snapshot. Stepwise copying
        # restarts whenever another connection writes, so under load it might never end.
        src.backup(dst, pages=-1)
        dst.execute("PRAGMA journal_mode = DELETE")  # one self-contained file
    os.chmod(temporary, stat.S_IMODE(source.stat().st_mode))  # as readable as the store


def _describe(source: Path, target: Path, copy: Path) -> BackupReport:
    with closing(sqlite3.connect(f"{copy.as_uri()}?mode=ro", uri=True)) as conn:
        events, head = conn.execute(
            "SELECT count(*), coalesce(max(global_position), 0) FROM events"
        ).fetchone()
        (sessions,) = conn.execute("SELECT count(*) FROM streams").fetchone()
    return BackupReport(source, target, events, sessions, head, copy.stat().st_size)


def _publish(temporary: Path, target: Path, *, overwrite: bool) -> None:
    """Give the finished copy ``target``'s name; without ``overwrite`` never replace a file."""
    if overwrite:
        os.replace(temporary, target)
        return
    try:
        os.link(temporary, target)  # fails if target appeared meanwhile: never clobbered
    except FileExistsError as exc:
        raise BackupRefused(f"{target} exists: choose another file or pass --overwrite") from exc
    except OSError:  # a file system without hard links
        if target.exists():
            raise BackupRefused(
                f"{target} exists: choose another file or pass --overwrite"
            ) from None
        os.replace(temporary, target)


def _sync_directory(directory: Path) -> None:
    """Make the new name durable too (POSIX; elsewhere the rename is left to the OS)."""
    if not hasattr(os, "O_DIRECTORY"):
        return
    handle = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(handle)
    finally:
        os.close(handle)
