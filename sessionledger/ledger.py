"""The ledger: the event store and its read models bound together, the one seam services use.

Every service (sessions, execution, turns, tools, timers, settings, models) takes a
:class:`Ledger`, not a store and projections. It answers four questions once:

* :meth:`Ledger.live` — the session's summary, or 404 ``session_not_found`` / 410
  ``session_deleted``: the live-session check, written here only;
* :meth:`Ledger.retry` — read → decide → append with the expected version, again on a fresh
  read while another writer overtook it (the policy below);
* :meth:`Ledger.append` — append a batch, then tell the after-append observers
  (:meth:`Ledger.after_append`: the execution runtime's memory, the executor's held todo
  lists) in the appending thread, once the append returned;
* :meth:`Ledger.on_commit` — the store's commit publication (every writer's batches).

It also holds the one translation of the log's errors into application errors
(:func:`from_eventlog`; :func:`eventlog_errors` around a service's entry point, and the
faces' last-resort handlers for what they read from the store directly, the streams).

The retry policy, for a decide-and-append that another writer overtook (ES-6, EG-6).
Every command that changes a session reads it, decides, and appends guarded by the version
it read; when another writer appended first the store raises ``ConcurrencyConflict`` and
nothing was appended. :func:`retry_overtaken` calls the attempt again on a fresh read after
a pause that doubles from :data:`FIRST_PAUSE_S` to :data:`LONGEST_PAUSE_S` with full jitter
(a random fraction of it, so writers that collided do not collide again in step). It is
bounded by time, not by a count: writers on one session take turns within milliseconds, so
a count small enough to be quick was also small enough to lose (0.6-0.8 % of messages with
two writers per session, issue 19).

* A conditional command (a mode change, an answer, a delete) gives up after
  :data:`PATIENCE_S` with 409 ``conflict`` "kept changing; try again".
* An unconditional one (``unconditional=True``: a whole-list ``TodoWrite`` and every other
  tool call, a message, a compaction, the reminders of a model request) does not depend on
  the state it read, so it never answers 409 (EG-6): it keeps trying for
  :data:`UNCONDITIONAL_PATIENCE_S`, and only a session that stayed overtaken all that time
  (no real workload does) is 503 ``unavailable``, which a client retries like a busy store.

These budgets and the clock they are measured on are one :class:`Patience`, which a
:class:`Ledger` takes: a test that counts retries gives it a clock of its own, so the
machine's speed never decides how many attempts it sees (issue 36).

Writers of one session in this process take turns: :meth:`Ledger.retry` runs each attempt
holding the session's writer lock (:class:`SessionWriters`, re-entrant, held only while an
attempt runs, dropped with its last user), so in-process writers never overtake each other
and only another process's writes are retried (issue 21: 30 concurrent TodoWrites through
one MCP connection).
"""

from __future__ import annotations

import contextvars
import random
import threading
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

import greenlet

from eventlog import (
    AppendBatch,
    AppendResult,
    ConcurrencyConflict,
    DescriptorsExhausted,
    EventLogError,
    EventStore,
    InvalidStoreUrl,
    JsonShapeError,
    NewEvent,
    RecordedEvent,
    StorageFault,
    StoreBusy,
    StoreClosed,
    UnknownEventType,
    UnknownSchemaVersion,
    UnreadableStore,
    WriterFailed,
    check_json,
)
from eventlog.appending import Subscribers
from projections import (
    Projections,
    SessionSummary,
    SummaryPage,
    TurnCounters,
    open_projected_store,
)
from projections.tables import Doc, TimerRow, TodoRow

from .errors import (
    ConfigurationError,
    Conflict,
    CorruptLog,
    InvalidInput,
    OutOfDescriptors,
    ServiceUnavailable,
    SessionDeleted,
    SessionLedgerError,
    SessionNotFound,
    StorageUnavailable,
)

__all__ = [
    "DEFAULT_PATIENCE",
    "FIRST_PAUSE_S",
    "LONGEST_PAUSE_S",
    "PATIENCE_S",
    "Patience",
    "UNCONDITIONAL_PATIENCE_S",
    "AfterAppend",
    "Ledger",
    "SessionWriters",
    "await_only",
    "awaiting",
    "checked_input",
    "eventlog_errors",
    "from_eventlog",
    "on_loop",
    "pause",
    "retry_overtaken",
    "shape_refused",
]

T = TypeVar("T")

FIRST_PAUSE_S = 0.001
"""The longest pause after the first lost race (the pause is a random fraction of it)."""
LONGEST_PAUSE_S = 0.05
"""The bound the doubling pause stops at: a retry at least every 50 ms."""
PATIENCE_S = 2.0
"""How long a conditional command keeps deciding again before 409 ``conflict``."""
UNCONDITIONAL_PATIENCE_S = 30.0
"""How long an unconditional command keeps trying before 503."""



# -- the async face (issue 24) -----------------------------------------------------------------
#
# The services are written once, as plain functions: read, decide, append. The CLI, the MCP
# server's tools, the timers and the tests call them on a thread, where an append blocks until
# its group is durable. An async route calls the same function through :func:`on_loop`: it
# runs in a greenlet on the event loop's thread, and each point where it would block — the
# append (:meth:`Ledger.append`), the retry policy's pause, waiting for another writer's turn
# of the session — hands the loop an awaitable instead (:func:`await_only`) and resumes when
# it is done. So a request costs no hop to a worker thread, and while its group commits the
# loop serves other requests, whose appends join the same group (SQLAlchemy's asyncio
# extension bridges its sync core the same way). Reads stay synchronous on the loop: they are
# local SQLite or pooled PostgreSQL reads of a few rows.


class _OnLoop(greenlet.greenlet):
    """A service call run by :func:`on_loop` (the mark :func:`awaiting` looks for)."""


def awaiting() -> bool:
    """Whether the caller runs inside :func:`on_loop` (it must not block the loop's thread)."""
    return isinstance(greenlet.getcurrent(), _OnLoop)


def await_only(awaitable: Awaitable[T]) -> T:
    """From a function run by :func:`on_loop`: the result of ``awaitable``, awaited by the
    loop while this function is suspended (what it raises is raised here)."""
    current = greenlet.getcurrent()
    if not isinstance(current, _OnLoop):
        close = getattr(awaitable, "close", None)
        if callable(close):
            close()  # a coroutine never to be awaited
        raise RuntimeError("await_only outside on_loop")
    parent = current.parent
    assert parent is not None
    return parent.switch(awaitable)  # type: ignore[no-any-return]


async def on_loop(fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """``fn(*args, **kwargs)`` run on the event loop's thread, each :func:`await_only` in it
    awaited here; its context variables are a copy of the caller's."""
    call = _OnLoop(fn, greenlet.getcurrent())
    call.gr_context = contextvars.copy_context()
    step: Any = call.switch(*args, **kwargs)
    while not call.dead:
        try:
            value = await step
        except BaseException as exc:  # raised inside the call, where it awaited
            step = call.throw(exc)
        else:
            step = call.switch(value)
    return step  # type: ignore[no-any-return]


def pause(seconds: float) -> None:
    """Sleep ``seconds``: on the loop (awaited) inside :func:`on_loop`, else on this thread."""
    if awaiting():
        import asyncio  # loaded already: the loop runs (a process without one never needs it)

        await_only(asyncio.sleep(seconds))
    else:
        time.sleep(seconds)


@dataclass(frozen=True)
class Patience:
    """The retry policy's budgets (seconds) and the clock they are measured on: ``clock``
    answers the seconds since any fixed origin (``time.monotonic``), ``pause`` waits
    (:func:`pause`: on the loop inside :func:`on_loop`)."""

    conditional_s: float = PATIENCE_S
    unconditional_s: float = UNCONDITIONAL_PATIENCE_S
    first_pause_s: float = FIRST_PAUSE_S
    longest_pause_s: float = LONGEST_PAUSE_S
    clock: Callable[[], float] = time.monotonic
    pause: Callable[[float], None] = pause


DEFAULT_PATIENCE = Patience()


def retry_overtaken(
    session_id: str, attempt: Callable[[], T], *, unconditional: bool = False,
    policy: Patience = DEFAULT_PATIENCE,
) -> T:
    """``attempt()``'s result, calling it again while it raises ``ConcurrencyConflict``.

    ``attempt`` reads the session afresh, decides and appends guarded by the version it read;
    anything else it raises (a refusal, bad input, 404, another error of the log) is raised
    at once, as it is.
    """
    patience = policy.unconditional_s if unconditional else policy.conditional_s
    deadline = policy.clock() + patience
    longest = policy.first_pause_s
    while True:
        try:
            return attempt()
        except ConcurrencyConflict:
            if policy.clock() >= deadline:
                break
        policy.pause(random.uniform(0, longest))
        longest = min(longest * 2, policy.longest_pause_s)
    if unconditional:
        raise ServiceUnavailable(
            f"session {session_id!r} is too busy: other writers overtook this write for "
            f"{patience:g} s; nothing was appended, try again",
            details={"sessionId": session_id},
        )
    raise Conflict(f"session {session_id!r} kept changing; try again",
                   details={"sessionId": session_id})


def from_eventlog(exc: EventLogError, *, opening: str | None = None) -> SessionLedgerError:
    """Translate an event log error into the application error that answers for it.

    ``opening`` is the URL of a store being opened: then a URL this build cannot open or a
    file the driver cannot read is a :class:`ConfigurationError` that names it (exit 2).
    """
    message = str(exc)
    if opening is not None and isinstance(exc, InvalidStoreUrl):
        return ConfigurationError(f"invalid store URL {opening!r}: {message}")
    if opening is not None and isinstance(exc, UnreadableStore):
        return ConfigurationError(f"cannot open the event store {opening!r}: {message}")
    if isinstance(exc, ConcurrencyConflict):
        return Conflict(
            message,
            details={"sessionId": exc.session_id, "expected": exc.expected, "actual": exc.actual},
        )
    if isinstance(exc, StoreBusy):
        return ServiceUnavailable(f"the event store is busy: {message}")
    if isinstance(exc, StoreClosed):
        return ServiceUnavailable("the event store is closed: the service is stopping")
    if isinstance(exc, WriterFailed):
        return ServiceUnavailable(message)
    if isinstance(exc, DescriptorsExhausted):
        return OutOfDescriptors(message)
    if isinstance(exc, StorageFault):
        return StorageUnavailable(exc)
    if isinstance(exc, InvalidStoreUrl):
        return ConfigurationError(message)
    if isinstance(exc, UnknownEventType | UnknownSchemaVersion):
        return CorruptLog(message)
    if isinstance(exc, UnreadableStore):  # a damaged file or table under the store
        return CorruptLog(f"the database cannot be read: {message}")
    if isinstance(exc, JsonShapeError):  # the writer's last line behind the edges' check
        return shape_refused(exc, loc="data")
    return SessionLedgerError(message)


def shape_refused(exc: JsonShapeError, *, loc: str) -> InvalidInput:
    """EG-1's refusal of a JSON value that would not read back as sent: 422 ``invalid_input``
    whose one detail names the path under ``loc`` (``body``, ``input``, ``data``), like a
    validation error's."""
    return InvalidInput(
        f"the {loc} cannot be accepted: {exc}",
        details=[{"loc": [loc, *exc.path], "message": exc.reason, "type": "json_shape"}],
    )


def checked_input(value: Any, *, loc: str = "input") -> None:
    """The shape check of EG-1 on a JSON value from outside (a tool input, an answer's
    ``modify`` input), refused as :func:`shape_refused`."""
    try:
        check_json(value)
    except JsonShapeError as exc:
        raise shape_refused(exc, loc=loc) from None


@contextmanager
def eventlog_errors(*, payloads: bool = False) -> Iterator[None]:
    """Raise what reading or appending raises as the application error answering for it.

    ``payloads``: the block reads stored payloads into their models, so a ``ValueError`` or
    ``TypeError`` it raises is a stored event its model rejects (``CorruptLog``).
    """
    try:
        yield
    except EventLogError as exc:
        raise from_eventlog(exc) from exc
    except (ValueError, TypeError) as exc:
        if not payloads:
            raise
        raise CorruptLog(f"a stored event cannot be read: {exc.__class__.__name__}") from exc


class _Turn:
    """One session's writer turn: who holds it (a thread's or an :func:`on_loop` call's
    greenlet), how deep, and how many hold or wait for it."""

    __slots__ = ("depth", "owner", "users")

    def __init__(self) -> None:
        self.owner: greenlet.greenlet | None = None
        self.depth = 0
        self.users = 0


TURN_POLL_S = (0.0002, 0.005)
"""How an :func:`on_loop` call waiting for another writer's turn of its session looks
again: after a pause doubling from the first to the second (it cannot block the loop on the
lock; such waits are rare: one process's writers of one session, at once)."""


class SessionWriters:
    """One re-entrant turn per session with a writer in this process, dropped when its last
    holder (or waiter) is done, so the map holds only the sessions being written now.

    A turn belongs to a greenlet — a thread's own, or an :func:`on_loop` call's — so the
    calls sharing the event loop's thread take turns like threads do."""

    def __init__(self) -> None:
        self._guard = threading.Condition(threading.Lock())
        self._turns: dict[str, _Turn] = {}

    def __len__(self) -> int:
        """How many sessions have a writer holding or waiting for their lock."""
        return len(self._turns)

    @contextmanager
    def held(self, session_id: str) -> Iterator[None]:
        """Hold ``session_id``'s writer turn (waiting for another writer's)."""
        me = greenlet.getcurrent()
        with self._guard:
            turn = self._turns.get(session_id)
            if turn is None:
                turn = self._turns[session_id] = _Turn()
            turn.users += 1
        try:
            self._take(turn, me)
            try:
                yield
            finally:
                with self._guard:
                    turn.depth -= 1
                    if not turn.depth:
                        turn.owner = None
                        self._guard.notify_all()
        finally:
            with self._guard:
                turn.users -= 1
                if not turn.users:
                    del self._turns[session_id]

    def _take(self, turn: _Turn, me: greenlet.greenlet) -> None:
        wait = TURN_POLL_S[0]
        on_loop_call = isinstance(me, _OnLoop)
        while True:
            with self._guard:
                if turn.owner is None or turn.owner is me:
                    turn.owner = me
                    turn.depth += 1
                    return
                if not on_loop_call:
                    self._guard.wait()
                    continue
            pause(wait)
            wait = min(wait * 2, TURN_POLL_S[1])


AfterAppend = Callable[[str, Sequence[RecordedEvent]], None]
"""Told, in the appending thread, a session's batch once :meth:`Ledger.append` returned."""


class Ledger:
    """The event store and its inline projections, as the services see them."""

    def __init__(
        self, store: EventStore, projections: Projections, *,
        patience: Patience = DEFAULT_PATIENCE,
    ) -> None:
        self.store = store
        self.projections = projections
        self.patience = patience
        """The retry policy's budgets and clock (:meth:`retry`)."""
        self._after: Subscribers[tuple[str, Sequence[RecordedEvent]]] = Subscribers()
        self._quiet: contextvars.ContextVar[str | None] = contextvars.ContextVar(
            "quiet_session", default=None)
        self.writers = SessionWriters()
        """This process's writers of each session, taking turns (:meth:`retry`)."""

    @classmethod
    def open(cls, url: str) -> Ledger:
        """The ledger over the store ``url`` names, every inline projection attached.

        A URL or file that cannot be opened is a clear :class:`ConfigurationError`. Opening
        rebuilds a projection whose schema version changed (EL-9).
        """
        try:
            return cls(*open_projected_store(url))
        except EventLogError as exc:
            raise from_eventlog(exc, opening=url) from exc
        except OSError as exc:
            raise ConfigurationError(f"cannot open the event store {url!r}: {exc}") from exc

    # -- reading ---------------------------------------------------------------------------

    def find(self, session_id: str) -> SessionSummary | None:
        """The session's projected summary, deleted or not; ``None`` if it has none."""
        with eventlog_errors():
            return self.projections.summary(self.store, session_id)

    def known(self, session_id: str) -> None:
        """404 ``session_not_found`` unless the log holds the session (deleted or not)."""
        with eventlog_errors():
            head = self.store.session_head(session_id)
        if head is None:
            raise SessionNotFound(session_id)

    def live(
        self, session_id: str, *, field: str | None = None, allow_deleted: bool = False
    ) -> SessionSummary:
        """The session's summary; 404 if unknown, 410 if deleted (unless ``allow_deleted``).

        ``field`` names the input that named the session (``parentSessionId``) in the 404.
        """
        found = self.find(session_id)
        if found is None:
            raise SessionNotFound(session_id, field=field)
        if found.deleted and not allow_deleted:
            raise SessionDeleted(session_id)
        return found

    # The views a service reads, on this ledger's store (what the log raises passes through).

    def call(self, session_id: str, call_id: str) -> Doc | None:
        return self.projections.call(self.store, session_id, call_id)

    def interaction(self, interaction_id: str) -> Doc | None:
        return self.projections.interaction(self.store, interaction_id)

    def pending_interactions(self, session_id: str) -> list[Doc]:
        return self.projections.pending_interactions(self.store, session_id)

    def summaries(self) -> list[SessionSummary]:
        return self.projections.summaries(self.store)

    def summary_page(self, query: SummaryPage) -> list[SessionSummary]:
        return self.projections.summary_page(self.store, query)

    def turn_counters(self, session_id: str) -> TurnCounters | None:
        return self.projections.turn_counters(self.store, session_id)

    def todo_rows(self, session_id: str) -> tuple[TodoRow, ...]:
        return self.projections.todo_rows(self.store, session_id)

    def timer_row(self, key: str) -> TimerRow | None:
        return self.projections.timer_row(self.store, key)

    def timer_rows(self, keys: list[str]) -> dict[str, TimerRow]:
        return self.projections.timer_rows(self.store, keys)

    def watched_timers(self) -> list[TimerRow]:
        return self.projections.watched_timers(self.store)

    # -- writing ---------------------------------------------------------------------------

    def append(
        self, session_id: str, events: Sequence[NewEvent], *, expected_version: int | None = None,
        idempotency_key: str | None = None,
    ) -> AppendResult:
        """Append ``events`` to the session (guarded by ``expected_version``, deduplicated by
        ``idempotency_key``, when given), then tell the after-append observers. What the log
        raises passes through as it is (a ``ConcurrencyConflict`` is what :meth:`retry`
        decides again on; the service's entry point translates the rest with
        :func:`eventlog_errors`)."""
        if awaiting():  # the loop awaits the commit; other requests join its group meanwhile
            appended = await_only(self.store.append_async(
                session_id, events, expected_version=expected_version,
                idempotency_key=idempotency_key))
        else:
            appended = self.store.append(
                session_id, events, expected_version=expected_version,
                idempotency_key=idempotency_key)
        if self._quiet.get() != session_id:
            self._after.publish((session_id, appended.events))
        return appended

    def append_many(self, batches: Sequence[AppendBatch]) -> list[AppendResult | EventLogError]:
        """Append ``batches`` in one transaction, each checked and failing alone (the store's
        :meth:`~eventlog.EventStore.append_many`), then tell the after-append observers of
        each batch that was appended."""
        results = self.store.append_many(batches)
        for result in results:
            if isinstance(result, AppendResult) and not result.replayed:
                self._after.publish((result.session_id, result.events))
        return results

    def retry(
        self, session_id: str, attempt: Callable[[], T], *, unconditional: bool = False
    ) -> T:
        """``attempt()`` under the one retry policy (:func:`retry_overtaken`), each attempt
        holding the session's writer lock: this process's writers of one session take turns,
        so only another process's write can overtake one."""
        def in_turn() -> T:
            with self.writers.held(session_id):
                return attempt()

        return retry_overtaken(
            session_id, in_turn, unconditional=unconditional, policy=self.patience
        )

    @contextmanager
    def telling_itself(self, session_id: str) -> Iterator[None]:
        """Appends of ``session_id`` in this thread (or :func:`on_loop` call) skip the
        after-append observers: their appender publishes its own result (the execution
        runtime's commands)."""
        token = self._quiet.set(session_id)
        try:
            yield
        finally:
            self._quiet.reset(token)

    # -- observers -------------------------------------------------------------------------

    def after_append(
        self, observer: AfterAppend, *, types: frozenset[str] | None = None,
    ) -> Callable[[], None]:
        """Tell ``observer`` each batch appended through :meth:`append` (only those holding an
        event of ``types`` when given); returns the unsubscribe function. An observer that
        raises is logged and skipped."""
        def told(batch: tuple[str, Sequence[RecordedEvent]]) -> None:
            if types is None or any(event.type in types for event in batch[1]):
                observer(*batch)

        return self._after.add(told)

    def on_commit(self, observer: Callable[[Sequence[RecordedEvent]], None]) -> Callable[[], None]:
        """Tell ``observer`` every committed batch of every writer (the store's publication);
        returns the unsubscribe function."""
        return self.store.subscribe(observer)
