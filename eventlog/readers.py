"""Reader connections: a small bounded pool shared by every thread (SPEC EG-5).

A store reads through at most :data:`READERS` connections, whatever the number of threads
asking: a thread borrows an idle connection (or opens one while fewer are open), runs its
query and gives it back. A thread that already holds one (a query run inside another) gets
the same connection again, so nesting cannot wait for itself. When every connection is
borrowed a reader waits up to ``wait_s`` and then gets :class:`~eventlog.errors.StoreBusy`.
Connections stay open until the store closes, so a burst of clients served by new worker
threads opens no new files (a connection per thread, closed only at shutdown, grew by every
thread the pool ever started, issue 19).

:func:`descriptors_exhausted` tells "the process has no file descriptor left" (EMFILE, ENFILE)
from a disk fault: SQLite reports both as "unable to open database file".
"""

from __future__ import annotations

import errno
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Generic, TypeVar

from .errors import DescriptorsExhausted, StoreBusy, StoreClosed

__all__ = ["EXHAUSTION_ERRNOS", "READERS", "ReaderPool", "descriptors_exhausted"]

C = TypeVar("C")

READERS = 8
"""Reader connections a store keeps open at most (each is two or three descriptors on SQLite:
the file, its WAL and the shared-memory index)."""
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


class ReaderPool(Generic[C]):
    """At most ``size`` connections made by ``connect``, lent one per thread at a time.

    ``usable(conn)`` says whether an idle connection may be lent again (a PostgreSQL
    connection the server dropped is closed and replaced); ``close(conn)`` closes one.
    ``connect`` failing for want of descriptors raises :class:`DescriptorsExhausted`.
    """

    def __init__(
        self,
        connect: Callable[[], C],
        *,
        close: Callable[[C], None],
        usable: Callable[[C], bool] = lambda _conn: True,
        size: int = READERS,
        wait_s: float = 5.0,
    ) -> None:
        self._connect = connect
        self._close = close
        self._usable = usable
        self.size = size
        self._wait_s = wait_s
        self._lock = threading.Condition()
        self._idle: list[C] = []
        self._open = 0
        self._closed = False
        self._held: dict[int, C] = {}
        """The connection each thread holds, by thread id at the time it borrowed."""

    @property
    def open_count(self) -> int:
        """Connections open now, idle or lent (never more than ``size``)."""
        return self._open

    @contextmanager
    def connection(self) -> Iterator[C]:
        """A connection for this thread for the duration of the block."""
        thread = threading.get_ident()
        held = self._held.get(thread)
        if held is not None:  # a query inside a query: the same connection
            yield held
            return
        conn = self._borrow()
        self._held[thread] = conn
        try:
            yield conn
        finally:
            # By the id it was borrowed under: a generator may be finished on another thread.
            del self._held[thread]
            self._give_back(conn)

    def _borrow(self) -> C:
        with self._lock:
            while True:
                if self._closed:
                    raise StoreClosed("the store is closed")
                while self._idle:
                    conn = self._idle.pop()
                    if self._usable(conn):
                        return conn
                    self._open -= 1
                    self._close_quietly(conn)
                if self._open < self.size:
                    self._open += 1  # reserved: opened below, outside the lock
                    break
                if not self._lock.wait(self._wait_s):
                    raise StoreBusy(
                        f"all {self.size} reader connections stayed busy for {self._wait_s}s"
                    )
        try:
            return self._connect()
        except BaseException as exc:
            with self._lock:
                self._open -= 1
                self._lock.notify()
            if (isinstance(exc, Exception) and not isinstance(exc, DescriptorsExhausted)
                    and descriptors_exhausted(exc)):
                raise DescriptorsExhausted(
                    f"no file descriptor left to open a reader connection: {exc}"
                ) from exc
            raise

    def _give_back(self, conn: C) -> None:
        with self._lock:
            if self._closed:
                self._open -= 1
                self._close_quietly(conn)
            else:
                self._idle.append(conn)
            self._lock.notify()

    def _close_quietly(self, conn: C) -> None:
        try:
            self._close(conn)
        except Exception:  # a connection that cannot close is gone anyway
            pass

    def close(self) -> None:
        """Close the idle connections now and each lent one when it comes back."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
            self._open -= len(idle)
            for conn in idle:
                self._close_quietly(conn)
            self._lock.notify_all()
