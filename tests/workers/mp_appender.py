"""Worker for ``test_multiprocess.py`` (SPEC EL-2): append to one shared session for a while.

Usage: ``mp_appender.py URL SESSION_ID WORKER_NAME SECONDS ACK_FILE READY_FILE GO_FILE``

Opens the store, creates ``READY_FILE``, waits for ``GO_FILE`` (so every worker starts at once),
then appends batches of 1 to 3 ``SessionCreated`` events — each carrying a unique marker in its
workspace field — with the version it just read as the expected version, retrying on
``ConcurrencyConflict``. Every acknowledged event is written to ``ACK_FILE`` as
``seq global_position marker``. Prints a one-line JSON summary; any other error is a
traceback on stderr and a non-zero exit.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from eventlog import (
    AppendResult,
    ConcurrencyConflict,
    EventStore,
    NewEvent,
    SessionCreated,
    open_store,
)


def wait_for(path: Path, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path} never appeared")
        time.sleep(0.002)


def append_with_retry(
    store: EventStore, session_id: str, markers: list[str]
) -> tuple[AppendResult, int]:
    """Append at the version just read; on a conflict re-read and retry. → (result, conflicts)."""
    events = [NewEvent(SessionCreated(workspace=m), actor="system") for m in markers]
    conflicts = 0
    while True:
        version = store.version(session_id)
        try:
            return store.append(session_id, events, expected_version=version), conflicts
        except ConcurrencyConflict:
            conflicts += 1


def main(argv: list[str]) -> int:
    url, session_id, name, seconds, ack_file, ready_file, go_file = argv
    store = open_store(url)
    Path(ready_file).touch()
    wait_for(Path(go_file))
    deadline = time.monotonic() + float(seconds)
    appends = conflicts = 0
    with open(ack_file, "w", encoding="utf-8") as acks:
        while time.monotonic() < deadline:
            size = appends % 3 + 1
            markers = [f"{name}-{appends}-{i}" for i in range(size)]
            result, retried = append_with_retry(store, session_id, markers)
            conflicts += retried
            for event, marker in zip(result.events, markers, strict=True):
                acks.write(f"{event.seq} {event.global_position} {marker}\n")
            acks.flush()
            appends += 1
    store.close()
    print(json.dumps({"worker": name, "appends": appends, "conflicts": conflicts}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
