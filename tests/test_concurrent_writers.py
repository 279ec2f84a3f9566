"""Unconditional commands never bounce (SPEC EG-6; issue 19 finding 10, acceptance 7).

Six writers (threads, each with its own HTTP client) on three sessions of the installed
``serve``, two per session, send whole-list ``TodoWrite`` calls, messages and compactions as
fast as they are answered: none is refused (no 409, nothing but 200/201), and the log holds
exactly what was acknowledged. A ~3 s run is in ``make test``, the 20 s run of acceptance 7 in
``make verify``. A message re-sent with its ``messageId`` appends nothing and answers the
original receipt — at once, from racing writers, and after a restart of ``serve``. The one
retry policy (:mod:`sessionledger.ledger`) is tested on its own at the end.
"""

from __future__ import annotations

import itertools
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import pytest
from server_support import ServerProcess, free_port, running_server
from server_support import create_session as create
from server_support import session_version as version

from eventlog import ConcurrencyConflict
from sessionledger.errors import Conflict, ServiceUnavailable
from sessionledger.ledger import FIRST_PAUSE_S, LONGEST_PAUSE_S, Patience, retry_overtaken

SESSIONS, WRITERS_PER_SESSION = 3, 2


def todos(writer: int, step: int) -> dict[str, Any]:
    return {"tool": "TodoWrite", "input": {"todos": [
        {"content": f"writer {writer} step {step}", "status": "in_progress", "priority": "high"},
        {"content": "the rest", "status": "pending", "priority": "low"},
    ]}}


def write_steps(
    server: ServerProcess, sid: str, writer: int, steps: int, tally: Counter[str],
    lock: threading.Lock, start: threading.Barrier,
) -> None:
    """``steps`` times TodoWrite, message, message, and every fifth step a compaction (a
    count, not a time window: how many steps fit in a second is the machine's, issue 36)."""
    seen: Counter[str] = Counter()
    with server.client(timeout=60.0) as http:
        start.wait(30)
        for step in range(1, steps + 1):
            done = http.post(f"/v1/sessions/{sid}/tool-calls", json=todos(writer, step))
            seen[f"todo {done.status_code}"] += 1
            for role in ("assistant", "user"):
                said = http.post(f"/v1/sessions/{sid}/messages",
                                 json={"role": role, "content": f"{writer}:{step}"})
                seen[f"message {said.status_code}"] += 1
            if step % 5 == 0:
                compacted = http.post(f"/v1/sessions/{sid}/compact")
                seen[f"compact {compacted.status_code}"] += 1
    with lock:
        tally.update(seen)


def event_types(http: httpx.Client, sid: str) -> Counter[str]:
    counted: Counter[str] = Counter()
    after = 0
    while True:
        page = http.get(f"/v1/sessions/{sid}/events", params={"after": after, "limit": 1000})
        assert page.status_code == 200, page.text
        events = page.json()["events"]
        if not events:
            return counted
        counted.update(e["type"] for e in events)
        after = events[-1]["seq"]


@pytest.mark.parametrize("steps", [
    pytest.param(5, id="5-steps"),
    pytest.param(60, id="60-steps", marks=pytest.mark.slow),
])
def test_six_writers_on_three_sessions_are_never_refused(  # EG-6, acceptance 7
    server: ServerProcess, http: httpx.Client, steps: int
) -> None:
    sids = [create(http) for _ in range(SESSIONS)]
    tally: Counter[str] = Counter()
    lock = threading.Lock()
    count = SESSIONS * WRITERS_PER_SESSION
    start = threading.Barrier(count)
    writers = [
        threading.Thread(target=write_steps,
                         args=(server, sids[n % SESSIONS], n, steps, tally, lock, start))
        for n in range(count)
    ]
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join(120)
    assert not any(writer.is_alive() for writer in writers)
    # Every request of every writer answered as a success: none refused, none lost.
    assert tally == Counter({"todo 200": count * steps, "message 201": 2 * count * steps,
                             "compact 200": count * (steps // 5)}), tally
    logged: Counter[str] = Counter()
    for sid in sids:
        logged += event_types(http, sid)
    assert logged["MessageRecorded"] == tally["message 201"]
    assert logged["TodosWritten"] == tally["todo 200"]
    assert logged["ContextCompacted"] == tally["compact 200"]


# -- messageId ------------------------------------------------------------------------------


def say(http: httpx.Client, sid: str, message_id: str, content: str = "hello") -> httpx.Response:
    return http.post(f"/v1/sessions/{sid}/messages",
                     json={"role": "assistant", "content": content, "messageId": message_id})


@pytest.mark.slow  # a server killed or restarted under load: make verify (D182)
def test_a_message_resent_with_its_message_id_appends_nothing_even_after_restart(  # EG-6
    tmp_path: Path,
) -> None:
    port = free_port()
    with running_server(tmp_path, port=port) as server, server.client() as http:
        sid = create(http)
        first = say(http, sid, "msg-1")
        assert first.status_code == 201, first.text
        recorded = version(http, sid)
        again = say(http, sid, "msg-1", content="a different text")  # a blind retry
        assert again.status_code == 200, again.text
        assert again.json() == first.json()
        assert version(http, sid) == recorded
        other = say(http, sid, "msg-2")
        assert other.status_code == 201 and other.json()["seq"] == recorded + 1
        recorded += 1
    with running_server(tmp_path, port=port) as server, server.client() as http:  # restarted
        after_restart = say(http, sid, "msg-1")
        assert after_restart.status_code == 200, after_restart.text
        assert after_restart.json() == first.json()
        assert version(http, sid) == recorded
        assert event_types(http, sid)["MessageRecorded"] == 2


def test_racing_writers_with_one_message_id_append_it_once(  # EG-6
    server: ServerProcess, http: httpx.Client
) -> None:
    sid = create(http)
    answers: list[httpx.Response] = []
    lock = threading.Lock()

    def send() -> None:
        with server.client() as own:
            response = say(own, sid, "msg-raced")
        with lock:
            answers.append(response)

    senders = [threading.Thread(target=send) for _ in range(6)]
    for sender in senders:
        sender.start()
    for sender in senders:
        sender.join()
    assert sorted(a.status_code for a in answers) == [200] * 5 + [201]
    assert len({a.text for a in answers}) == 1
    assert event_types(http, sid)["MessageRecorded"] == 1


@pytest.mark.parametrize("message_id", ["", "x" * 201, 7, None, ["msg"]])
def test_a_malformed_message_id_is_422_and_appends_nothing(  # EG-6
    http: httpx.Client, message_id: Any
) -> None:
    sid = create(http)
    before = version(http, sid)
    body: dict[str, Any] = {"role": "user", "content": "hi", "messageId": message_id}
    response = http.post(f"/v1/sessions/{sid}/messages", json=body)
    if message_id is None:  # null is absent: an ordinary message
        assert response.status_code == 201, response.text
        return
    assert response.status_code == 422, response.text
    assert response.json()["error"]["code"] == "invalid_input"
    assert version(http, sid) == before


# -- the policy ------------------------------------------------------------------------------


def overtaken(times: int) -> tuple[list[int], Any]:
    calls: list[int] = []

    def attempt() -> str:
        calls.append(1)
        if len(calls) <= times:
            raise ConcurrencyConflict("s", expected=1, actual=2)
        return "appended"

    return calls, attempt


def stepping(step_s: float, pauses: list[float]) -> Patience:
    """The default budgets on a clock that moves ``step_s`` each time it is read; pauses are
    noted, not slept (the count of attempts is the policy's, not the machine's: issue 36)."""
    reads = itertools.count()
    return Patience(clock=lambda: next(reads) * step_s, pause=pauses.append)


def test_the_policy_retries_far_past_the_old_five_attempts() -> None:  # EG-6
    pauses: list[float] = []
    calls, attempt = overtaken(40)
    assert retry_overtaken("s", attempt, unconditional=True, policy=stepping(0.0, pauses)) == (
        "appended")
    assert len(calls) == 41 and len(pauses) == 40
    # Each pause a random fraction of a bound that doubles from 1 ms and stops at 50 ms.
    bounds = [min(FIRST_PAUSE_S * 2**n, LONGEST_PAUSE_S) for n in range(40)]
    assert all(0 <= p <= b for p, b in zip(pauses, bounds, strict=True))
    calls, attempt = overtaken(40)
    # Conditional: 40 lost races within its patience (each read 1/32 s later: 1.25 s < 2 s).
    assert retry_overtaken("s", attempt, policy=stepping(1 / 32, [])) == "appended"
    assert len(calls) == 41


@pytest.mark.parametrize(("unconditional", "error", "attempts"), [
    # The deadline read at 0; after the n-th lost race the clock reads n s: the n-th attempt
    # that reaches the patience (30 s, 2 s) is the last.
    (True, ServiceUnavailable, 30),
    (False, Conflict, 2),
])
def test_patience_spent_is_503_for_unconditional_and_409_otherwise(  # EG-6, ES-6
    unconditional: bool, error: type[Exception], attempts: int
) -> None:
    calls, attempt = overtaken(10**9)
    with pytest.raises(error) as raised:
        retry_overtaken("s", attempt, unconditional=unconditional, policy=stepping(1.0, []))
    assert type(raised.value) is error and len(calls) == attempts
