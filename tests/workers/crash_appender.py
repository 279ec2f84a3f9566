"""Worker for ``test_crash.py`` (SPEC EL-7): append until killed, acknowledging on stdout.

Usage: ``crash_appender.py URL RUN_ID SEED``

Loops forever over three kinds of append — a single event, one multi-event batch, and
``append_many`` of batches to several sessions — while a second thread appends single events
to its own session so group commit combines work. Every event's workspace field is
``"<batch id>#<index>/<size>"``, so a reader can tell a whole batch from a partial one. After
an append returns, one JSON line per batch ``{"batch", "session", "seqs", "positions"}`` is
written to stdout with a single ``write`` and flushed; a line on stdout is therefore an
acknowledgement. The parent SIGKILLs this process at random moments.
"""

from __future__ import annotations

import json
import os
import random
import sys
import threading

from eventlog import AppendBatch, AppendResult, EventStore, NewEvent, SessionCreated, open_store

_ack_lock = threading.Lock()


def acknowledge(batch_id: str, result: AppendResult) -> None:
    line = json.dumps({
        "batch": batch_id, "session": result.session_id,
        "seqs": [e.seq for e in result.events], "positions": list(result.positions),
    }) + "\n"
    with _ack_lock:
        os.write(sys.stdout.fileno(), line.encode("utf-8"))


def batch(store: EventStore, session_id: str, batch_id: str, size: int) -> AppendBatch:
    events = tuple(
        NewEvent(SessionCreated(workspace=f"{batch_id}#{i}/{size}"), actor="system")
        for i in range(size)
    )
    return AppendBatch(session_id, events, expected_version=store.version(session_id))


def append_one(store: EventStore, planned: AppendBatch, batch_id: str) -> None:
    result = store.append(
        planned.session_id, planned.events, expected_version=planned.expected_version
    )
    acknowledge(batch_id, result)


def side_writer(store: EventStore, run_id: str) -> None:
    """Single-event appends to a session of its own, concurrently with the main loop."""
    n = 0
    while True:
        batch_id = f"{run_id}-t{n}"
        append_one(store, batch(store, "sess_thread", batch_id, 1), batch_id)
        n += 1


def main(argv: list[str]) -> int:
    url, run_id, seed = argv
    rng = random.Random(int(seed))
    store = open_store(url)
    threading.Thread(target=side_writer, args=(store, run_id), daemon=True).start()
    n = 0
    while True:
        batch_id = f"{run_id}-{n}"
        kind = n % 3
        if kind == 0:
            append_one(store, batch(store, "sess_single", batch_id, 1), batch_id)
        elif kind == 1:
            append_one(store, batch(store, "sess_batch", batch_id, rng.randint(2, 6)), batch_id)
        else:
            sessions = rng.sample(["sess_m1", "sess_m2", "sess_m3", "sess_m4"], 3)
            planned = [
                batch(store, sid, f"{batch_id}.{i}", rng.randint(1, 4))
                for i, sid in enumerate(sessions)
            ]
            for i, outcome in enumerate(store.append_many(planned)):
                if not isinstance(outcome, AppendResult):
                    raise outcome
                acknowledge(f"{batch_id}.{i}", outcome)
        n += 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
