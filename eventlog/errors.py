"""Errors raised by the event log.

Every error the log raises derives from one base class, so callers can catch the family::

    EventLogError
    ├── ConcurrencyConflict      expected version did not match; nothing was appended
    ├── UnknownEventType         a stored row names a type the catalog does not hold
    ├── UnknownSchemaVersion     a stored row has a version no upcaster chain reaches
    ├── InvalidStoreUrl          a store URL this build cannot open
    ├── StoreBusy                another process held the write lock past every retry
    ├── StoreClosed              append or read after ``close()``
    ├── StorageFault             the disk refused a read or write; nothing was appended
    ├── UnreadableStore          not a database, or a damaged file or table the driver refuses
    ├── DescriptorsExhausted     the process has no file descriptor left (not a disk fault)
    ├── EmptyBatch               an append with no events
    ├── BackupRefused            a backup that cannot be taken as asked; nothing was written
    └── BackupFailed             a backup that failed while copying; the destination is untouched
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator

__all__ = [
    "EXHAUSTION_ERRNOS",
    "descriptors_exhausted",
    "BackupFailed",
    "BackupRefused",
    "ConcurrencyConflict",
    "DescriptorsExhausted",
    "EmptyBatch",
    "EventLogError",
    "InvalidStoreUrl",
    "StorageFault",
    "StoreBusy",
    "StoreClosed",
    "WriterFailed",
    "UnknownEventType",
    "UnknownSchemaVersion",
    "UnreadableStore",
]


class EventLogError(Exception):
    """Base class of every error the event log raises."""


class ConcurrencyConflict(EventLogError):
    """The session's version was not the one the caller expected."""

    def __init__(self, session_id: str, *, expected: int, actual: int) -> None:
        super().__init__(
            f"session {session_id}: expected version {expected}, found {actual}"
        )
        self.session_id = session_id
        self.expected = expected
        self.actual = actual


class UnknownEventType(EventLogError):
    """A stored event names a type that is not in the closed catalog."""

    def __init__(self, event_type: str, *, session_id: str = "", seq: int = 0) -> None:
        where = f" (session {session_id} seq {seq})" if session_id else ""
        super().__init__(f"unknown event type {event_type!r}{where}")
        self.event_type = event_type


class UnknownSchemaVersion(EventLogError):
    """A stored event has a schema version that no registered upcaster reaches."""

    def __init__(
        self, event_type: str, version: int, *, session_id: str = "", seq: int = 0
    ) -> None:
        where = f" (session {session_id} seq {seq})" if session_id else ""
        super().__init__(
            f"unknown schema version {version} of event type {event_type!r}{where}"
        )
        self.event_type = event_type
        self.version = version


class InvalidStoreUrl(EventLogError):
    """The store URL names a scheme or option this build does not support."""


class StoreBusy(EventLogError):
    """Another process kept the database locked through every retry."""


class StoreClosed(EventLogError):
    """The store was closed; no more appends or reads are accepted."""


class WriterFailed(EventLogError):
    """The writer thread failed before it answered (an error of its own, not of a commit):
    whether the batch was committed is unknown — read it back, or retry it with its
    idempotency key. A new writer takes the next batches."""


class StorageFault(EventLogError):
    """The database file could not be read or written: an I/O error, a full disk or file
    size limit, a read-only file. The transaction was rolled back, so nothing was appended;
    the store works again once the fault clears.

    ``reason`` is the driver's text (``disk I/O error``), ``error_name`` the backend's own
    name for it (``SQLITE_IOERR_WRITE``) when it has one; ``medium`` what failed: ``disk``
    (a file's, or the database server's), ``database connection`` (a server that went away,
    restarted, could not be reached or had no connection left) or ``database server``
    (another fault of the server's).
    """

    def __init__(self, message: str, *, reason: str, error_name: str | None = None,
                 medium: str = "disk") -> None:
        super().__init__(message)
        self.reason = reason
        self.error_name = error_name
        self.medium = medium


class UnreadableStore(EventLogError):
    """The driver refused the store itself: the file is not a database or cannot be opened
    as one (a directory, a text file), its image is damaged, or a table is not of the shape
    the store or a view expects. Unlike a :class:`StorageFault` it does not pass: the file
    needs repair (or the URL another file). ``reason`` is the driver's text, also the message.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class DescriptorsExhausted(EventLogError):
    """The process (EMFILE) or the system (ENFILE) has no file descriptor left to open a
    connection or file: a shortage that passes, not a disk fault; nothing was appended."""


class EmptyBatch(EventLogError):
    """An append must carry at least one event."""


class BackupRefused(EventLogError):
    """A backup that cannot be taken as asked: not a SQLite store, no store at the path, or a
    destination that exists, is the store itself or lies in a missing directory."""


class BackupFailed(EventLogError):
    """Copying failed (an unreadable source, a full disk); the destination was not written."""


EXHAUSTION_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE})
"""``errno`` values of "no descriptor left": this process's limit, or the system's."""


def descriptors_exhausted(exc: BaseException | None = None) -> bool:
    """True when ``exc`` (or, without one, this moment) is out of file descriptors.

    An :class:`OSError` says so by its errno; a driver error that hides the errno (SQLite's
    ``SQLITE_CANTOPEN``) is judged by opening one descriptor now.
    """
    for cause in _chain(exc):
        if isinstance(cause, OSError) and cause.errno is not None:
            return cause.errno in EXHAUSTION_ERRNOS
    try:
        probe = os.open(os.devnull, os.O_RDONLY)
    except OSError as probe_error:
        return probe_error.errno in EXHAUSTION_ERRNOS
    os.close(probe)
    return False


def _chain(exc: BaseException | None) -> Iterator[BaseException]:
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or exc.__context__
