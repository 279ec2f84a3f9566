"""Worker for ``test_pg_concurrency.py`` (issue 11): one of many processes appending to one
PostgreSQL database.

Usage: ``pg_writer.py URL WORKER_NAME APPENDS ACK_FILE READY_FILE GO_FILE``

Opens the store, creates ``READY_FILE``, waits for ``GO_FILE``, then makes ``APPENDS`` appends
of 1 to 3 ``SessionCreated`` events, each carrying a unique marker: most to the worker's own
four sessions, every tenth to one session all workers share, at the version just read and
retried on ``ConcurrencyConflict``. Every acknowledged event is written to ``ACK_FILE`` as
``global_position marker``. Prints a one-line JSON summary; any error is a traceback on
stderr and a non-zero exit.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from eventlog import ConcurrencyConflict, NewEvent, SessionCreated, open_store

SHARED = "sess_shared"


def wait_for(path: Path, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path} never appeared")
        time.sleep(0.005)


def main(argv: list[str]) -> int:
    url, name, count, ack_file, ready_file, go_file = argv
    store = open_store(url)
    Path(ready_file).touch()
    wait_for(Path(go_file))
    conflicts = 0
    with open(ack_file, "w", encoding="utf-8") as acks:
        for n in range(int(count)):
            markers = [f"{name}-{n}-{i}" for i in range(n % 3 + 1)]
            events = [NewEvent(SessionCreated(workspace=m), actor="system") for m in markers]
            if n % 10 == 9:
                while True:
                    try:
                        version = store.version(SHARED)
                        result = store.append(SHARED, events, expected_version=version)
                        break
                    except ConcurrencyConflict:
                        conflicts += 1
            else:
                result = store.append(f"sess_{name}_{n % 4}", events)
            acks.writelines(
                f"{e.global_position} {m}\n" for e, m in zip(result.events, markers, strict=True)
            )
    store.close()
    print(json.dumps({"worker": name, "appends": int(count), "conflicts": conflicts}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
