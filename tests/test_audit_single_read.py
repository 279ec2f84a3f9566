"""``verify_and_read``: the audit's one read of a session (issue 24.4).

A sound chain gives the report of ``verify`` and the events of ``read_session`` from one read
of the rows; a damaged one gives the report of ``verify`` and no events (the audit then reads
as before, so ``tests/test_chain_tamper.py`` and the audit tests hold it to the old reports).
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path
from typing import TYPE_CHECKING

from eventlog import EventStore, MessageRecorded, NewEvent, SessionCreated, open_store

if TYPE_CHECKING:
    from conftest import Tamper


def _session(store: EventStore, session_id: str, messages: int) -> None:
    store.append(session_id, [NewEvent(SessionCreated(workspace="/w"), actor="user")])
    store.append(session_id, [
        NewEvent(MessageRecorded(role="user", content=f"m{i}"), actor="user")
        for i in range(messages)
    ])


def test_a_sound_chain_is_verified_and_read_at_once(store: EventStore) -> None:  # issue 24.4
    _session(store, "sess_a", 5)
    _session(store, "sess_b", 3)  # interleaved positions
    report, events = store.verify_and_read("sess_a")
    assert report == store.verify("sess_a")[0] and report.ok and report.events == 6
    assert events == list(store.read_session("sess_a"))
    nothing, none = store.verify_and_read("sess_missing")
    assert nothing == store.verify("sess_missing")[0] and none == []


def test_a_damaged_chain_reports_as_verify_and_reads_nothing(  # issue 24.4
    store: EventStore, tamper: Tamper
) -> None:
    for session_id, (column, value) in {
        "sess_seq": ("seq", 0), "sess_hash": ("hash", "0" * 64), "sess_data": ("data", "{}"),
    }.items():
        _session(store, session_id, 4)
        tamper.update(session_id, 3, column, value)
        report, events = store.verify_and_read(session_id)
        assert report == store.verify(session_id)[0] and not report.ok
        assert events is None


def test_a_row_inserted_below_seq_1_is_found_by_the_paged_check(tmp_path: Path) -> None:
    """The audit reads a sound session by pages of ``seq`` 1 up; a row slipped in with seq 0
    (every real row intact) is no page's, and is still reported as ``verify`` reports it."""
    path = tmp_path / "ledger.db"
    with closing(open_store(f"sqlite:///{path}")) as store:
        _session(store, "sess_a", 4)
        assert store.verify_and_stream("sess_a")[0].ok
    with closing(sqlite3.connect(path)) as conn, conn:
        columns = [row[1] for row in conn.execute("PRAGMA table_info(events)")]
        chosen = ", ".join(
            "global_position + 1000" if c == "global_position" else "0" if c == "seq"
            else "NULL" if c == "idempotency_key" else c for c in columns)
        conn.execute(f"INSERT INTO events ({', '.join(columns)}) SELECT {chosen} FROM events "
                     "WHERE session_id = 'sess_a' AND seq = 1")
    with closing(open_store(f"sqlite:///{path}")) as store:
        report, events = store.verify_and_stream("sess_a")
        assert not report.ok and events is None
        assert report == store.verify("sess_a")[0]
