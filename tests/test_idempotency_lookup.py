"""A keyed append finds an earlier batch through the idempotency index (EL-3, CC-8).

Found by ``bench/claude_code.py`` (issue 22): the SQLite store's lookup of an earlier batch
under the same key was ordered by ``seq``, so SQLite walked the session's whole
``(session_id, seq)`` index for every keyed append. Claude Code's hooks and imports append
every batch under a key, so importing one long transcript grew with the square of its length
(20,000 lines: 187 s; now 6 s).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from eventlog import MessageRecorded, NewEvent, open_store
from eventlog.sqlite import _REPLAY


def test_the_replay_lookup_reads_the_idempotency_index(tmp_path: Path) -> None:  # EL-3
    open_store(f"sqlite:///{tmp_path / 'ledger.db'}").close()
    conn = sqlite3.connect(tmp_path / "ledger.db")
    try:
        plan = [row[3] for row in conn.execute(f"EXPLAIN QUERY PLAN {_REPLAY}", ("s", "k"))]
    finally:
        conn.close()
    assert plan == [
        "SEARCH events USING INDEX events_idempotency (session_id=? AND idempotency_key=?)"
    ]


def test_a_batch_sent_again_returns_its_events_in_order(tmp_path: Path) -> None:  # EL-3
    store = open_store(f"sqlite:///{tmp_path / 'ledger.db'}")
    try:
        def batch(*texts: str) -> list[NewEvent]:
            return [NewEvent(MessageRecorded(role="user", content=t), actor="user")
                    for t in texts]

        for n in range(30):
            store.append("sess_a", batch(f"before {n}"), idempotency_key=f"k{n}")
        first = store.append("sess_a", batch("one", "two", "three"), idempotency_key="kept")
        store.append("sess_a", batch("after"), idempotency_key="later")
        again = store.append("sess_a", batch("other"), idempotency_key="kept")
    finally:
        store.close()
    assert again.replayed and not first.replayed
    assert [e.seq for e in again.events] == [e.seq for e in first.events] == [31, 32, 33]
    assert [e.data.content for e in again.events] == ["one", "two", "three"]
