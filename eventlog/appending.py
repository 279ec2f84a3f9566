"""How a batch is appended: checks, chaining, group commit, publication to subscribers.

Every backend hands a group to :func:`write_group` inside its transaction, with its own
idempotency lookup and row write, so every store numbers, hashes and refuses batches the same
way; only reading and writing rows differs between them. All appends of a store go through one
:class:`GroupCommitter` (flat combining: many batches per transaction; docs/architecture.md,
"Writing"), and committed events are told to :class:`Subscribers` only once they are durable.

Two kinds of caller share one committer (issue 24):

- **Threads** (``append``, ``append_many``: the CLI, tests, worker threads) combine by flat
  combining: a caller queues its batch and the one that gets the writer lock commits everything
  queued; a lone caller commits on its own thread with no hand-off.
- **Coroutines** (``await append_async(...)``: the HTTP routes on the event loop) encode their
  payloads on the loop and wait on an :class:`asyncio.Future`. The batches a loop submits in one
  pass over its ready callbacks are gathered and handed on together when that pass is over. One
  *writer thread* per committer (started when first needed, a daemon, stopped by the store's
  ``close``, gone again after a few idle seconds) leads for them: it takes everything queued (up to
  ``max_group``), commits it through the same commit function, and settles the group's futures with
  a single ``loop.call_soon_threadsafe`` per event loop — one wake-up of the loop per group, where a
  thread caller costs one OS-thread wake each (~30 µs here, the cap of thread group commit);
  meanwhile the loop serves other requests. A *lone* batch — the only one its loop gathered, nothing
  queued, nobody committing, and the committer's last commit no slower than ``inline_budget_s``
  (timed by ``timer``) — is committed right there on the loop's thread instead, like a lone thread
  caller on its own: the two hand-offs to the writer thread and back cost more than the commit
  (D196). That commit never waits for another writer: the store's ``commit_now`` gives up at once
  when another connection or process holds the database's write lock, and the batch goes to the
  writer thread, which waits. A disk whose commits take longer than the budget sends every batch to
  the writer thread, so the loop is never held longer than about one such commit. A store without
  ``commit_now`` (PostgreSQL: every statement is a round trip) commits every coroutine's batch on
  the writer thread.

Both kinds queue in the same queue, so a group may hold batches of both: whoever holds the
writer lock (a thread caller, the writer thread, or ``exclusive()``: shutdown, purge,
rebuild) commits what is queued, wakes thread callers through their latches and settles
futures through their loops. Numbering, hashing, idempotency keys, expected-version checks,
inline projections and publication to subscribers (inside the commit, before any caller
hears back) are therefore one code path for every caller. A coroutine cancelled while its
batch is queued or being committed does not withdraw it: the batch may still commit (its
future is then skipped); a caller that must know retries with the same idempotency key. A
store closed with batches queued fails them with its ``StoreClosed`` (the commit function's
answer), and nothing waits forever.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, TypeVar, overload

from .catalog import CATALOG
from .encoding import session_hasher
from .envelope import (
    AppendBatch,
    AppendResult,
    NewEvent,
    RawRow,
    RecordedEvent,
    decode_row,
    encode_event,
)
from .errors import ConcurrencyConflict, EventLogError, UnknownEventType, WriterFailed
from .upcasting import UpcasterRegistry

if TYPE_CHECKING:  # imported where a loop submits: a process without one never loads it
    import asyncio

__all__ = [
    "GroupAppends",
    "GroupCommitter",
    "GroupWrite",
    "Head",
    "INLINE_BUDGET_S",
    "Listener",
    "PreparedBatch",
    "Subscribers",
    "check_expected",
    "plan_rows",
    "prepare",
    "result_from_rows",
    "typed_outcomes",
    "write_group",
]

Listener = Callable[[Sequence[RecordedEvent]], None]
"""Called after each commit with the committed events, in global order.

A store's own commits are told on the committing thread. On PostgreSQL a listener also hears
the commits of other processes (and other store instances) on the same database and schema,
from the store's listening thread, soon after they commit (D116): each event once, those of
one process in global order, though another process's events may come after a later commit
of this one. Listeners that only wake a reader of the log from its cursor need not care
where an event came from."""


@dataclass(frozen=True, slots=True)
class PreparedBatch:
    """A batch with its payloads already encoded (done before taking the writer lock)."""

    batch: AppendBatch
    data_json: tuple[str, ...]


def prepare(batch: AppendBatch) -> PreparedBatch:
    """Encode every payload of the batch to canonical JSON.

    Only catalog types may be written: anything else could never be read back.
    """
    encoded: list[str] = []
    for new in batch.events:
        event = new.event
        if CATALOG.get(event.type) is not type(event):
            raise UnknownEventType(event.type, session_id=batch.session_id)
        encoded.append(encode_event(event))
    return PreparedBatch(batch, tuple(encoded))


def _earlier_batch(
    prepared: PreparedBatch,
    keyed: dict[tuple[str, str], AppendResult],
    earlier_rows: Callable[[str, str], Sequence[RawRow]],
    upcasters: UpcasterRegistry,
) -> AppendResult | None:
    """The earlier batch with the same idempotency key (in this group or the log), if any."""
    batch = prepared.batch
    if batch.idempotency_key is None:
        return None
    earlier_here = keyed.get((batch.session_id, batch.idempotency_key))
    if earlier_here is not None:
        return AppendResult(batch.session_id, earlier_here.events, replayed=True)
    rows = earlier_rows(batch.session_id, batch.idempotency_key)
    if not rows:
        return None
    events = tuple(decode_row(r, upcasters=upcasters) for r in rows)
    return AppendResult(batch.session_id, events, replayed=True)


def check_expected(batch: AppendBatch, version: int) -> None:
    """Raise ConcurrencyConflict unless the session is at the version the caller expects."""
    if batch.expected_version is not None and batch.expected_version != version:
        raise ConcurrencyConflict(
            batch.session_id, expected=batch.expected_version, actual=version
        )


def plan_rows(
    prepared: PreparedBatch,
    *,
    version: int,
    prev_hash: str,
    next_position: int,
    recorded_at: str,
) -> list[RawRow]:
    """The rows that extend the session's chain from ``version``/``prev_hash``.

    :func:`eventlog.envelope.build_row` per event, unrolled: this loop runs for every event
    ever appended.
    """
    batch = prepared.batch
    session_id = batch.session_id
    key = batch.idempotency_key
    rows: list[RawRow] = []
    hasher = session_hasher(session_id, recorded_at)
    seq = version
    position = next_position
    for new, data_json in zip(batch.events, prepared.data_json, strict=True):
        seq += 1
        event = new.event
        event_type = event.type
        schema_version = event.schema_version
        actor, causation_id, correlation_id = new.actor, new.causation_id, new.correlation_id
        digest = hasher(
            prev_hash, seq, event_type, schema_version, data_json, actor, causation_id,
            correlation_id,
        )
        rows.append((
            position, session_id, seq, event_type, schema_version, data_json, recorded_at,
            actor, causation_id, correlation_id, key, prev_hash, digest,
        ))
        prev_hash = digest
        position += 1
    return rows


def result_from_rows(
    prepared: PreparedBatch, rows: Sequence[RawRow], *, replayed: bool = False
) -> AppendResult:
    """Envelopes for freshly written rows, reusing the caller's payload objects."""
    events = tuple(
        RecordedEvent(
            r[0], r[1], r[2], r[3], r[4], new.event, r[6], r[7], r[8], r[9], r[11], r[12]
        )
        for r, new in zip(rows, prepared.batch.events, strict=False)
    )
    return AppendResult(prepared.batch.session_id, events, replayed=replayed)


# -- the group write ---------------------------------------------------------------------------
#
# Every backend writes a group (docs/architecture.md, "Writing") the same way, inside its
# transaction: each batch is checked (idempotency key, expected version) and chained in Python
# against the session heads before anything is written, so a refused batch fails alone, with no
# savepoint; then the backend writes the group's new rows and heads, and folds its events into the
# inline projections, in one call. Only the idempotency lookup and that write differ per backend.

Head = tuple[int, str]
"""A session's version and head hash."""


@dataclass(slots=True)
class GroupWrite:
    """What a group did: per batch its result or the log error it alone failed with."""

    outcomes: list[AppendResult | BaseException]
    last_position: int


def _no_check(_prepared: PreparedBatch) -> None:
    return None


def write_group(
    group: Sequence[PreparedBatch],
    *,
    heads: dict[str, Head],
    position: int,
    now: str,
    earlier_rows: Callable[[str, str], Sequence[RawRow]],
    write: Callable[[list[RawRow], dict[str, Head], list[RecordedEvent]], None],
    upcasters: UpcasterRegistry,
    check: Callable[[PreparedBatch], None] = _no_check,
) -> GroupWrite:
    """Check, chain and write ``group`` after global ``position``, recorded at ``now``.

    ``heads`` holds the head of every session of the group (``(0, GENESIS_HASH)`` for a new
    one) and is updated in place. ``earlier_rows(session_id, key)`` are the stored rows of an
    earlier batch with that idempotency key, in ``seq`` order. ``check`` may refuse a batch
    before anything else (with a log error). ``write(rows, heads_written, events)`` writes
    the new rows and heads and folds the events into the projections; it is called once, and
    only when a batch was written. The caller owns the transaction.
    """
    outcomes: list[AppendResult | BaseException] = []
    rows: list[RawRow] = []
    written: dict[str, Head] = {}
    keyed: dict[tuple[str, str], AppendResult] = {}
    events: list[RecordedEvent] = []
    for prepared in group:
        batch = prepared.batch
        try:
            check(prepared)
            replayed = _earlier_batch(prepared, keyed, earlier_rows, upcasters)
            if replayed is not None:
                outcomes.append(replayed)
                continue
            version, prev_hash = heads[batch.session_id]
            check_expected(batch, version)
        except EventLogError as exc:
            outcomes.append(exc)
            continue
        batch_rows = plan_rows(
            prepared, version=version, prev_hash=prev_hash, next_position=position + 1,
            recorded_at=now,
        )
        result = result_from_rows(prepared, batch_rows)
        last = batch_rows[-1]
        position = last[0]
        heads[batch.session_id] = written[batch.session_id] = (last[2], last[12])
        if batch.idempotency_key is not None:
            keyed[(batch.session_id, batch.idempotency_key)] = result
        rows.extend(batch_rows)
        events.extend(result.events)
        outcomes.append(result)
    if rows:
        write(rows, written, events)
    return GroupWrite(outcomes, position)


def typed_outcomes(
    outcomes: Sequence[AppendResult | BaseException],
) -> list[AppendResult | EventLogError]:
    """Per-batch outcomes; anything but a log error (a broken disk, a bug) is raised."""
    typed: list[AppendResult | EventLogError] = []
    for outcome in outcomes:
        if isinstance(outcome, BaseException) and not isinstance(outcome, EventLogError):
            raise outcome
        typed.append(outcome)
    return typed


class GroupAppends:
    """``append`` and ``append_many`` of every backend: encode the payloads on the caller's
    thread, then hand the batches to the store's group committer (docs/architecture.md,
    "Writing")."""

    _committer: GroupCommitter[PreparedBatch, AppendResult]

    def append(
        self,
        session_id: str,
        events: Sequence[NewEvent],
        *,
        expected_version: int | None = None,
        idempotency_key: str | None = None,
    ) -> AppendResult:
        batch = AppendBatch(session_id, tuple(events), expected_version, idempotency_key)
        return self._committer.submit(prepare(batch))

    def append_many(self, batches: Sequence[AppendBatch]) -> list[AppendResult | EventLogError]:
        return typed_outcomes(self._committer.submit_many([prepare(b) for b in batches]))

    async def append_async(
        self,
        session_id: str,
        events: Sequence[NewEvent],
        *,
        expected_version: int | None = None,
        idempotency_key: str | None = None,
    ) -> AppendResult:
        """:meth:`append` awaited on an event loop: the payloads are encoded here; the commit
        runs on the committer's writer thread, or on the loop's thread for a lone batch on a
        quick disk (D196). A cancelled caller's batch may still commit (module docstring)."""
        batch = AppendBatch(session_id, tuple(events), expected_version, idempotency_key)
        return await self._committer.submit_async(prepare(batch))


# Group commit by flat combining: one writer at a time, many batches per transaction.
#
# Callers queue their work and try to become the leader. The leader commits *everything*
# queued in one transaction (one fsync) and wakes each caller it answered; the others wait on
# their own event rather than on the writer lock, so a finished group releases all its callers
# at once and leadership passes straight to a caller that still has work. A lone caller commits
# on its own thread with no hand-off; 32 concurrent callers share a handful of fsyncs
# (docs/architecture.md, "Writing").
#
# Coroutines queue in the same queue, each entry with a future and its loop instead of a latch
# of its own: their entries share the writer thread's latch, so handing over to one of them
# wakes the writer thread, which leads like any caller (module docstring).

I = TypeVar("I")  # noqa: E741
R = TypeVar("R")

INLINE_BUDGET_S = 0.001
"""A lone coroutine's batch commits on its loop's thread while the committer's last commit
took no longer than this (D196); a slower disk's commits all go to the writer thread. Stores
take another (``inline_budget_s``): a test that checks which thread committed sets it, so that
the machine's speed never chooses the path it asserts (issue 36)."""

_IDLE_S = 5.0
"""How long the writer thread waits for work before it ends (the next async append starts
another): a store dropped without ``close`` does not keep a thread."""


class _Latch:
    """A wake-up signal: ``set`` may come any number of times from any thread; ``wait``
    returns once one has come since the last ``clear`` or ``wait``. A bare lock, because
    ``threading.Event`` (a Python-level condition) cost a fifth of the writer's CPU with 32
    callers waiting."""

    __slots__ = ("_lock",)

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._lock.acquire()

    def set(self) -> None:
        try:
            self._lock.release()
        except RuntimeError:  # already set
            pass

    def clear(self) -> None:
        self._lock.acquire(blocking=False)

    def wait(self, timeout: float = -1) -> bool:
        """Block until set (or ``timeout`` seconds); the signal is consumed (callers clear
        before looking anyway). False when the time ran out."""
        return self._lock.acquire(timeout=timeout)


class _Pending(Generic[I, R]):
    """A queued item: a thread caller's (``future`` None, woken by its own latch) or a
    coroutine's (settled through ``loop``; ``wake`` is the writer thread's latch)."""

    __slots__ = ("done", "future", "item", "loop", "outcome", "wake")

    def __init__(self, item: I, wake: _Latch) -> None:
        self.item = item
        self.wake = wake
        self.done = False
        self.outcome: R | BaseException | None = None
        self.future: asyncio.Future[R] | None = None
        self.loop: asyncio.AbstractEventLoop | None = None


def _resolve(settled: list[tuple[asyncio.Future[R], R | BaseException]]) -> None:
    """On the caller's loop: hand each future its outcome, skipping cancelled callers."""
    for future, outcome in settled:
        if future.done():  # cancelled while queued or committing: the batch stands
            continue
        if isinstance(outcome, BaseException):
            future.set_exception(outcome)
        else:
            future.set_result(outcome)


class GroupCommitter(Generic[I, R]):
    """Serialises commits and combines the queued work of concurrent callers.

    ``commit`` receives the items in arrival order and returns, per item, its result or the
    exception that item alone failed with; if it raises, every item of that group fails.
    ``commit_now`` is the same commit for a lone coroutine's batch on its loop's thread, which
    returns ``None`` (having done nothing) where it would have to wait for another writer.
    Thread callers use :meth:`submit`/:meth:`submit_many`, coroutines :meth:`submit_async`;
    both may be mixed, in one group or not. ``inline_budget_s`` and ``timer`` (seconds, any
    monotonic origin) decide when a lone coroutine's batch may commit on its loop's thread
    (:data:`INLINE_BUDGET_S`).
    """

    def __init__(
        self,
        commit: Callable[[Sequence[I]], Sequence[R | BaseException]],
        *,
        max_group: int = 512,
        commit_now: Callable[[Sequence[I]], Sequence[R | BaseException] | None] | None = None,
        inline_budget_s: float = INLINE_BUDGET_S,
        timer: Callable[[], float] = time.perf_counter,
    ) -> None:
        self._commit = commit
        self._commit_now = commit_now
        self._max_group = max_group
        self._inline_budget_s = inline_budget_s
        self._timer = timer
        self._last_commit_s = 0.0
        # The batches each event loop submitted in its current pass over its ready
        # callbacks, handed on by _flush when that pass is over (touched only on that
        # loop's thread).
        self._gathering: dict[asyncio.AbstractEventLoop, list[_Pending[I, R]]] = {}
        self._queue: list[_Pending[I, R]] = []
        self._queue_lock = threading.Lock()
        self._writer = threading.Lock()
        self._last_group = 0
        # The async writer thread: its latch (shared by every coroutine's entry), whether
        # one runs (guarded by _queue_lock: it only ends with the queue empty, so a queued
        # coroutine always has a thread), and whether the committer was stopped.
        self._thread_wake = _Latch()
        self._thread: threading.Thread | None = None
        self._running = False
        self._stopping = False
        self._in_flight: list[_Pending[I, R]] = []  # the group the writer thread is committing

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        """Wait for the group in flight and hold the writer (shutdown uses this)."""
        self._writer.acquire()
        try:
            yield
        finally:
            self._writer.release()
            # Whatever queued meanwhile (a thread, a coroutine) gets a leader again, also
            # when the block raised.
            self._hand_over()

    def submit(self, item: I) -> R:
        """Commit ``item`` (possibly together with others) and return its result."""
        (outcome,) = self.submit_many((item,))
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    def submit_many(self, items: Sequence[I]) -> list[R | BaseException]:
        """Commit several items (in one group when nothing else is queued); outcome each."""
        if self._writer.acquire(blocking=False):
            # Nobody is committing: lead at once with our items and whatever is queued,
            # without allocating a wait object (the lone caller's fast path).
            try:
                if self._last_group > 1:
                    # The last group had company: let the callers it just answered queue
                    # their next items before we collect, rather than committing alone.
                    time.sleep(0)
                return self._lead_with(items)
            finally:
                self._writer.release()
                if self._queue:
                    self._hand_over()
        wake = _Latch()
        pending: list[_Pending[I, R]] = [_Pending(item, wake) for item in items]
        with self._queue_lock:
            self._queue.extend(pending)
        while True:
            # Clear first, then look: a wake-up sent after this point is never lost.
            wake.clear()
            if all(p.done for p in pending):
                break
            if self._writer.acquire(blocking=False):
                try:
                    while not all(p.done for p in pending):
                        self._run_group()
                finally:
                    self._writer.release()
                self._hand_over()
                break
            wake.wait()
        return [p.outcome for p in pending]  # type: ignore[misc]

    def submit_async(self, item: I) -> asyncio.Future[R]:
        """Gather ``item`` with the other batches the running loop submits in this pass over
        its callbacks; the future gets its result or the exception it failed with once
        committed (on the loop's thread if it stays alone, else by the writer thread: module
        docstring). Call on the loop's thread."""
        import asyncio

        loop = asyncio.get_running_loop()
        future: asyncio.Future[R] = loop.create_future()
        entry: _Pending[I, R] = _Pending(item, self._thread_wake)
        entry.future = future
        entry.loop = loop
        gathering = self._gathering.get(loop)
        if gathering is None:
            self._gathering[loop] = [entry]
            loop.call_soon(self._flush, loop)
        else:
            gathering.append(entry)
        return future

    def _flush(self, loop: asyncio.AbstractEventLoop) -> None:
        """On ``loop``, after the pass that gathered its batches: commit a lone batch right
        here when the committer is free and its commits are quick; queue the rest."""
        entries = self._gathering.pop(loop)
        commit_now = self._commit_now
        if (
            len(entries) == 1
            and commit_now is not None
            and not self._queue
            and self._last_commit_s <= self._inline_budget_s
            and self._writer.acquire(blocking=False)
        ):
            (entry,) = entries
            try:
                outcomes = self._commit_all((entry.item,), 1, commit_now)
            finally:
                self._writer.release()
                if self._queue:
                    self._hand_over()
            if outcomes is not None:
                assert entry.future is not None
                _resolve([(entry.future, outcomes[0])])
                return
            # Another writer holds the database: the writer thread waits for it instead.
        self._enqueue(entries)

    def _enqueue(self, entries: Sequence[_Pending[I, R]]) -> None:
        """Queue coroutines' entries for the writer thread (started when none runs)."""
        with self._queue_lock:
            first = not self._queue
            self._queue.extend(entries)
            start = not self._running
            if start:
                # Started under the lock, so stop() never finds a thread not yet started.
                self._running = True
                self._thread = threading.Thread(
                    target=self._write_loop, name="eventlog-writer", daemon=True
                )
                self._thread.start()
        if not start and first:
            # A queue that was not empty already has a leader coming: the one in flight
            # hands over when it is done (a woken writer thread only clears and looks).
            self._thread_wake.set()

    def stop(self) -> None:
        """End the writer thread once the queue is empty (the store's ``close``: whatever is
        still queued is committed first, and fails with the store's ``StoreClosed``). An
        async submit afterwards starts a thread that ends again when it has answered."""
        with self._queue_lock:
            self._stopping = True
            thread = self._thread
        self._thread_wake.set()
        if thread is not None and thread is not threading.current_thread():
            thread.join()

    def _write_loop(self) -> None:
        """The writer thread, which survives its own faults: an exception of its own (not of
        a commit, which is its items' outcome) fails every batch still waiting with
        :class:`~.errors.WriterFailed` and ends the thread as if idle, so the next submit
        starts a new one; a thread that died silently would leave every later async append
        waiting for a writer that never comes (issue 41)."""
        try:
            self._lead_while_queued()
        except BaseException as exc:
            _log.exception("the event log's writer thread failed; a new one takes the next "
                           "batches")
            failure = WriterFailed(
                f"the event log's writer failed ({exc.__class__.__name__}: {exc}) before it "
                "answered: whether this batch was committed is unknown; read it back or retry "
                "it with its idempotency key")
            with self._queue_lock:
                stranded, self._queue = list(self._in_flight) + self._queue, []
                self._in_flight = []
                self._running = False
            self._settle([p for p in stranded if not p.done],
                         [failure] * sum(1 for p in stranded if not p.done))

    def _lead_while_queued(self) -> None:
        """Lead whenever something is queued, until stopped or idle."""
        wake = self._thread_wake
        idle = False
        while True:
            wake.clear()
            if self._queue:
                idle = False
                if self._writer.acquire(blocking=False):
                    try:
                        if self._last_group > 1:
                            # As in submit_many: let the coroutines just answered (and any
                            # thread callers) queue their next batches first.
                            time.sleep(0)
                        self._run_group()
                    finally:
                        # Released after every group, so exclusive() (close, purge,
                        # rebuild) gets its turn under a steady stream of appends.
                        self._writer.release()
                    self._hand_over()  # a thread caller that queued meanwhile
                    continue
                # Someone else leads; they hand over when done.
            else:
                with self._queue_lock:
                    if not self._queue and (idle or self._stopping):
                        self._running = False
                        return
            idle = not wake.wait(_IDLE_S) and not self._queue

    def _lead_with(self, items: Sequence[I]) -> list[R | BaseException]:
        if not self._queue:
            # A caller queueing now finds the writer taken and waits for _hand_over.
            return list(self._commit_all(items, len(items)))
        with self._queue_lock:
            group = self._queue[: self._max_group]
            del self._queue[: self._max_group]
        outcomes = self._commit_all([*(p.item for p in group), *items], len(group) + len(items))
        self._settle(group, outcomes[: len(group)])
        return list(outcomes[len(group) :])

    def _hand_over(self) -> None:
        """Wake the oldest caller still queued so it can lead the next group."""
        with self._queue_lock:
            if self._queue:
                self._queue[0].wake.set()

    def _run_group(self) -> None:
        with self._queue_lock:
            group = self._queue[: self._max_group]
            del self._queue[: self._max_group]
            self._in_flight = group  # failed, not lost, if the writer thread fails here
        self._settle(group, self._commit_all([p.item for p in group], len(group)))
        self._in_flight = []

    @overload
    def _commit_all(self, items: Sequence[I], count: int) -> Sequence[R | BaseException]: ...

    @overload
    def _commit_all(
        self, items: Sequence[I], count: int,
        commit: Callable[[Sequence[I]], Sequence[R | BaseException] | None],
    ) -> Sequence[R | BaseException] | None: ...

    def _commit_all(
        self, items: Sequence[I], count: int,
        commit: Callable[[Sequence[I]], Sequence[R | BaseException] | None] | None = None,
    ) -> Sequence[R | BaseException] | None:
        """Run one commit (``commit``, else the committer's own) and time it; an exception it
        raises is every item's outcome."""
        self._last_group = count
        started = self._timer()
        try:
            return (commit or self._commit)(items)
        except BaseException as exc:  # every caller of the group gets it
            return [exc] * count
        finally:
            self._last_commit_s = self._timer() - started

    @staticmethod
    def _settle(group: Sequence[_Pending[I, R]], outcomes: Sequence[R | BaseException]) -> None:
        """Answer every caller of a group: thread callers by their latch, coroutines by one
        ``call_soon_threadsafe`` per event loop (one wake-up of the loop per group)."""
        by_loop: dict[asyncio.AbstractEventLoop, list[tuple[asyncio.Future[R], R | BaseException]]]
        by_loop = {}
        for waiting, outcome in zip(group, outcomes, strict=True):
            waiting.outcome = outcome
            waiting.done = True
            future, loop = waiting.future, waiting.loop
            if future is not None and loop is not None:
                by_loop.setdefault(loop, []).append((future, outcome))
        for waiting in group:
            if waiting.future is None:
                waiting.wake.set()
        for loop, settled in by_loop.items():
            try:
                loop.call_soon_threadsafe(_resolve, settled)
            except RuntimeError:  # the loop is closed: nobody is left to answer
                pass


# A thread-safe list of callbacks told about something that already happened.
#
# Stores tell listeners about committed events and the runtime tells its subscribers about
# state changes; in both cases the fact is durable before anyone hears of it, so a failing
# callback is logged and never raised into the code that made the change.

T = TypeVar("T")
_log = logging.getLogger("eventlog")


class Subscribers(Generic[T]):
    """Callbacks taking one value; ``add`` returns the function that removes it again."""

    def __init__(self) -> None:
        self._callbacks: list[Callable[[T], None]] = []
        self._lock = threading.Lock()

    def add(self, callback: Callable[[T], None]) -> Callable[[], None]:
        with self._lock:
            self._callbacks.append(callback)

        def remove() -> None:
            with self._lock:
                if callback in self._callbacks:
                    self._callbacks.remove(callback)

        return remove

    def __bool__(self) -> bool:
        """Whether anyone listens (publishers skip building values nobody reads)."""
        return bool(self._callbacks)

    def publish(self, value: T) -> None:
        """Call every callback with ``value``, in the order they were added."""
        with self._lock:
            callbacks = list(self._callbacks)
        for callback in callbacks:
            try:
                callback(value)
            except Exception:
                _log.exception("subscriber %r failed", callback)
