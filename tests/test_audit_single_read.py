"""``verify_and_read``: the audit's one read of a session (issue 24.4).

A sound chain gives the report of ``verify`` and the events of ``read_session`` from one read
of the rows; a damaged one gives the report of ``verify`` and no events (the audit then reads
as before, so ``tests/test_chain_tamper.py`` and the audit tests hold it to the old reports).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from eventlog import EventStore, MessageRecorded, NewEvent, SessionCreated

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
