"""Worker for ``test_crash.py``: append through ``append_async`` until killed (issue 24.6).

Usage: ``crash_async_appender.py URL RUN_ID SEED``

Like ``crash_appender.py``, but the appends are awaited on an event loop: several coroutines
each append batches of 1-4 events to a session of their own (so the store's writer thread
commits them in groups), while a thread appends single events with ``append`` into the same
groups. Every event's workspace field is ``"<batch id>#<index>/<size>"``; once an append's
await (or call) returns, one JSON line ``{"batch", "session", "seqs", "positions"}`` is written
to stdout with a single ``write``, so a line on stdout is an acknowledgement.
"""

from __future__ import annotations

import asyncio
import random
import sys
import threading

from crash_appender import acknowledge, append_one, batch

from eventlog import EventStore, NewEvent, SessionCreated, open_store

COROUTINES = 8


def side_writer(store: EventStore, run_id: str) -> None:
    """Single-event sync appends to a session of its own, mixed into the writer's groups."""
    n = 0
    while True:
        batch_id = f"{run_id}-t{n}"
        append_one(store, batch(store, "sess_thread", batch_id, 1), batch_id)
        n += 1


async def appender(store: EventStore, run_id: str, w: int, rng: random.Random) -> None:
    session_id = f"sess_async{w}"
    version = store.version(session_id)
    n = 0
    while True:
        batch_id = f"{run_id}-c{w}-{n}"
        size = rng.randint(1, 4)
        events = [
            NewEvent(SessionCreated(workspace=f"{batch_id}#{i}/{size}"), actor="system")
            for i in range(size)
        ]
        result = await store.append_async(session_id, events, expected_version=version)
        acknowledge(batch_id, result)
        version += size
        n += 1


async def run(url: str, run_id: str, seed: int) -> None:
    store = open_store(url)
    threading.Thread(target=side_writer, args=(store, run_id), daemon=True).start()
    rng = random.Random(seed)
    await asyncio.gather(*(
        appender(store, run_id, w, random.Random(rng.randrange(2**32)))
        for w in range(COROUTINES)
    ))


def main(argv: list[str]) -> int:
    url, run_id, seed = argv
    asyncio.run(run(url, run_id, int(seed)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
