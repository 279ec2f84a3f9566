"""Other processes' commits, heard through PostgreSQL's ``LISTEN/NOTIFY`` (D116, issue 11).

Every append transaction of :class:`~eventlog.postgres.PostgresEventStore` ends with one
``pg_notify(channel, '<high-water position> <token>')``, delivered to listening sessions when
(and only if) the transaction commits, in commit order. The channel is named after the
store's schema (:func:`channel_for`), so stores in different schemas of one database do not
hear each other; the token names the store instance that committed.

While a store has subscribers, a :class:`CommitFollower` daemon thread holds a connection of
its own with ``LISTEN`` on the channel. It keeps a cursor (the last global position it has
accounted for). A notification at or below the cursor is stale; one from this store whose
positions were all committed here (:meth:`CommitFollower.expect`, called inside the append
transaction) only moves the cursor, since the committing thread publishes those events
itself; any other reads the events after the cursor and publishes them in global order,
skipping those this store committed (matched by position *and* hash, so a position a failed
transaction had registered and another process then used is not mistaken for ours). Reading
from the cursor rather than trusting the payload means coalesced or missed notifications lose
nothing; after a lost connection the thread connects again, listens, and catches up the same
way. The thread stops with the last unsubscribe or when the store closes.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING

from .envelope import RecordedEvent

if TYPE_CHECKING:
    import psycopg

__all__ = ["CommitFollower", "channel_for", "notify_payload"]

_log = logging.getLogger("eventlog")

WAIT_S = 0.2
"""How long one wait for notifications lasts before the thread checks whether to stop."""
RETRY_S = (0.1, 0.5, 1.0, 2.0, 5.0)
"""Pauses before connecting again after a failure (the last one repeats)."""
PUBLISH_CHUNK = 500
"""At most this many events are handed to the listeners in one call."""
_SHORTCUT_SPAN = 10_000
"""A notification of our own covering more positions than this is checked by reading."""


def channel_for(schema: str) -> str:
    """The ``NOTIFY`` channel of the store whose tables are in ``schema`` (≤ 63 bytes)."""
    return f"sessionledger_{schema}"[:63]


def notify_payload(position: int, token: str) -> str:
    """What an append transaction sends: the new high-water position and the store's token."""
    return f"{position} {token}"


def _parse(payload: str) -> tuple[int | None, str]:
    text, _, token = payload.partition(" ")
    try:
        return int(text), token
    except ValueError:
        return None, token


class CommitFollower:
    """Publishes the commits of other processes to a store's listeners (see the module)."""

    def __init__(
        self,
        *,
        connect: Callable[[], psycopg.Connection],
        channel: str,
        token: str,
        read_after: Callable[[int], Iterator[RecordedEvent]],
        publish: Callable[[Sequence[RecordedEvent]], None],
        cursor: int,
    ) -> None:
        self._connect = connect
        self._channel = channel
        self._token = token
        self._read_after = read_after
        self._publish = publish
        self._cursor = cursor
        self._own: dict[int, str] = {}
        self._own_lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name=f"eventlog-listen-{channel}", daemon=True
        )

    @property
    def cursor(self) -> int:
        """The last global position accounted for (published, or committed here)."""
        return self._cursor

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Ask the thread to stop and wait for it (at most ``timeout`` seconds)."""
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    # -- the committing side ---------------------------------------------------------------

    def expect(self, events: Iterable[RecordedEvent]) -> None:
        """Note events this store is committing (called inside the transaction): the thread
        will not publish them, the committing thread does."""
        with self._own_lock:
            for event in events:
                self._own[event.global_position] = event.hash

    def forget(self, events: Iterable[RecordedEvent]) -> None:
        """The transaction that was to commit ``events`` did not (their positions may be
        handed out again, to another process)."""
        with self._own_lock:
            for event in events:
                if self._own.get(event.global_position) == event.hash:
                    del self._own[event.global_position]

    # -- the listening thread --------------------------------------------------------------

    def _run(self) -> None:
        failures = 0
        while not self._stop.is_set():
            try:
                conn = self._connect()
                try:
                    conn.execute(f'LISTEN "{self._channel}"')
                    self._catch_up()  # what committed while we were not listening
                    failures = 0
                    while not self._stop.is_set():
                        for note in conn.notifies(timeout=WAIT_S):
                            if self._stop.is_set():
                                break
                            self._heard(note.payload)
                finally:
                    conn.close()
            except Exception as exc:  # a lost connection, a closed store, a failed read
                if self._stop.is_set():
                    return
                pause = RETRY_S[min(failures, len(RETRY_S) - 1)]
                failures += 1
                _log.warning("listening for commits on %s failed (%s); again in %.1fs",
                             self._channel, exc, pause)
                self._stop.wait(pause)

    def _heard(self, payload: str) -> None:
        position, token = _parse(payload)
        if position is not None and position <= self._cursor:
            return
        if position is not None and token == self._token and self._all_own(position):
            self._cursor = position
            return
        self._catch_up()

    def _all_own(self, position: int) -> bool:
        """Whether every position after the cursor up to ``position`` was committed here; if
        so they are forgotten (the committing thread publishes them)."""
        span = range(self._cursor + 1, position + 1)
        if len(span) > _SHORTCUT_SPAN:
            return False
        with self._own_lock:
            if not all(p in self._own for p in span):
                return False
            for p in span:
                del self._own[p]
        return True

    def _catch_up(self) -> None:
        """Publish, in global order, every event after the cursor not committed here."""
        fresh: list[RecordedEvent] = []
        for event in self._read_after(self._cursor):
            with self._own_lock:
                mine = self._own.pop(event.global_position, None) == event.hash
            if not mine:
                fresh.append(event)
            self._cursor = event.global_position
            if len(fresh) >= PUBLISH_CHUNK:
                self._publish(fresh)
                fresh = []
        if fresh:
            self._publish(fresh)
        with self._own_lock:
            for p in [p for p in self._own if p <= self._cursor]:
                del self._own[p]
