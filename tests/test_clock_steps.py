"""Question timers when the wall clock steps (issue 41 finding 2, acceptance 1 and 5).

A real ``sessionledger serve`` runs under Debian's libfaketime with the wall clock (and only
it: ``DONT_FAKE_MONOTONIC``) read from a file the test rewrites, so the test steps the server's
wall clock back an hour or ahead a day while a question waits, as ``date -s`` or an NTP step
would. The uvicorn ``date`` header (the wall clock the process sees) shows each step took hold.

What a person experiences is measured on this process's monotonic clock: no question
auto-continues before its configured countdown has passed (every poll answered earlier saw it
pending) and none stays pending past it (the first poll sent later sees it completed). The
property run (``make verify``) steps the clock back and forth between questions, waits and
answers chosen by hypothesis.

libfaketime 0.9.10's ``clock_nanosleep`` refuses Python's absolute monotonic sleeps with EINVAL
once an offset is set (every ``time.sleep``), so the server gets a ``sitecustomize`` that
sleeps on an event instead; nothing of ours is changed by it.
"""

from __future__ import annotations

import glob
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from server_support import ServerProcess, create_session, running_server

LIBFAKETIME = next(iter(sorted(glob.glob("/usr/lib/*/faketime/libfaketimeMT.so.1"))), None)

GRACE_S, DEADLINE_S = 0.5, 3.0
LATE_S = 1.5
"""How long after its deadline a question may still read pending (the scheduler's latency on
a busy machine); early is never allowed."""
POLL_S = 0.05
HOUR, DAY = 3600, 86_400
QUESTION = {"questions": [{
    "question": "Which database?", "header": "DB", "multiSelect": False,
    "options": [{"label": "SQLite", "description": "embedded"},
                {"label": "PostgreSQL", "description": "a server"}],
}]}
SLEEP_SHIM = '''\
import threading
import time

_event = threading.Event()


def _sleep(seconds):  # libfaketime's clock_nanosleep fails Python's sleeps with EINVAL
    if seconds < 0:
        raise ValueError("sleep length must be non-negative")
    _event.wait(seconds)


time.sleep = _sleep
'''


@dataclass
class SteppedServer:
    """``serve`` whose wall clock is the real one moved by :attr:`offset` seconds."""

    server: ServerProcess
    offset_file: Path
    offset: int = 0

    def step_to(self, offset: int, http: httpx.Client) -> None:
        """Set the server's wall clock ``offset`` seconds from the real one and wait until the
        server process reads it."""
        self.offset_file.write_text(f"{offset:+d}\n")
        self.offset = offset
        deadline = time.monotonic() + 10
        while True:
            told = parsedate_to_datetime(http.get("/healthz").headers["date"]).timestamp()
            if abs(told - time.time() - offset) < 3:
                return
            assert time.monotonic() < deadline, f"the step to {offset:+d} s never took hold"
            time.sleep(POLL_S)


@pytest.fixture(scope="module")
def stepped(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SteppedServer]:
    if LIBFAKETIME is None:
        reason = "libfaketime is not installed (Debian package faketime)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"the clock-step tests must run on CI: {reason}", pytrace=False)
        pytest.skip(reason)
    directory = tmp_path_factory.mktemp("clock-steps")
    shim = directory / "shim"
    shim.mkdir()
    (shim / "sitecustomize.py").write_text(SLEEP_SHIM)
    offset_file = directory / "wall-offset"
    offset_file.write_text("+0\n")
    env = {
        "LD_PRELOAD": str(LIBFAKETIME), "FAKETIME_TIMESTAMP_FILE": str(offset_file),
        "FAKETIME_NO_CACHE": "1", "DONT_FAKE_MONOTONIC": "1", "PYTHONPATH": str(shim),
    }
    args = ("--question-grace-s", str(GRACE_S), "--question-deadline-s", str(DEADLINE_S))
    (directory / "serve").mkdir()
    with running_server(directory / "serve", args=args, env=env) as server:
        yield SteppedServer(server, offset_file)


@dataclass
class Asked:
    """One question, alone in its session (a session's questions wait in a queue, each
    counting down once it is first): when it was sent and answered (this process's monotonic
    clock), and what each poll of its call saw."""

    sid: str
    call_id: str
    sent: float
    registered: float
    polls: list[tuple[float, float, str]] = field(default_factory=list)
    """(sent, answered, status) of each poll."""
    answered_by_person: bool = False

    def pending(self) -> bool:
        return not self.polls or self.polls[-1][2] == "pending"


def _ask(http: httpx.Client) -> Asked:
    sid = create_session(http)
    sent = time.monotonic()
    response = http.post(f"/v1/sessions/{sid}/tool-calls",
                         json={"tool": "AskUserQuestion", "input": QUESTION})
    assert response.status_code == 202, response.text
    return Asked(sid, response.json()["callId"], sent, time.monotonic())


def _poll(http: httpx.Client, asked: Asked) -> None:
    sent = time.monotonic()
    document = http.get(f"/v1/sessions/{asked.sid}/tool-calls/{asked.call_id}").json()
    asked.polls.append((sent, time.monotonic(), document["status"]))


def _wait(http: httpx.Client, questions: list[Asked], seconds: float) -> None:
    until = time.monotonic() + seconds
    while True:
        for asked in questions:
            if asked.pending():
                _poll(http, asked)
        if time.monotonic() >= until:
            return
        time.sleep(POLL_S)


def _check(asked: Asked) -> None:
    """Not auto-continued before its countdown of monotonic time, not pending past it."""
    if asked.answered_by_person:
        return
    earliest = asked.sent + DEADLINE_S - 0.005  # the recorded instants are in milliseconds
    latest = asked.registered + DEADLINE_S + LATE_S
    for sent, answered, status in asked.polls:
        if answered < earliest:
            assert status == "pending", (
                f"auto-continued {earliest + 0.005 - answered:.2f} s before its deadline"
                f" (polls: {asked.polls})")
        if sent > latest:
            assert status == "completed", (
                f"still {status} {sent - asked.registered - DEADLINE_S:.2f} s past its deadline"
                f" (polls: {asked.polls})")
    assert asked.polls[-1][2] == "completed"


def _settle(http: httpx.Client, questions: list[Asked]) -> None:
    until = max(q.registered for q in questions) + DEADLINE_S + LATE_S + 0.5
    _wait(http, questions, max(0.0, until - time.monotonic()))
    for asked in questions:
        _check(asked)


@pytest.mark.parametrize("step", [-HOUR, DAY], ids=["hour-back", "day-ahead"])
def test_a_wall_clock_step_while_a_question_waits_moves_nothing(  # issue 41 finding 2
    stepped: SteppedServer, step: int,
) -> None:
    with stepped.server.client() as http:
        stepped.step_to(0, http)
        before = _ask(http)
        stepped.step_to(step, http)  # a step while it counts down
        after = _ask(http)  # and one asked after the step
        _settle(http, [before, after])
        for asked in (before, after):
            events = http.get(f"/v1/sessions/{asked.sid}/events").json()["events"]
            recorded = [e["recordedAt"] for e in events]
            assert recorded == sorted(recorded), "recordedAt ran backwards inside the session"
        stepped.step_to(0, http)


ACTIONS = st.lists(st.one_of(
    st.tuples(st.just("ask"), st.just(0.0)),
    st.tuples(st.just("step"), st.sampled_from([-DAY, -HOUR, -30, -2, 0, 2, 30, HOUR, DAY])),
    st.tuples(st.just("wait"), st.sampled_from([0.2, 0.7, 1.5, 2.6])),
    st.tuples(st.just("answer"), st.just(0.0)),
), min_size=2, max_size=8)


@pytest.mark.slow
@settings(max_examples=12, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(actions=ACTIONS)
def test_property_the_wall_clock_stepping_between_commands_moves_no_countdown(  # issue 41 acc. 5
    stepped: SteppedServer, actions: list[tuple[str, Any]],
) -> None:
    """Questions asked, waited on, answered by a person, with the wall clock stepped back and
    forth between the commands: none auto-continues early or stays pending late."""
    with stepped.server.client() as http:
        questions: list[Asked] = []
        for kind, value in actions:
            if kind == "ask":
                questions.append(_ask(http))
            elif kind == "step":
                stepped.step_to(int(value), http)
            elif kind == "wait":
                _wait(http, questions, float(value))
            else:
                waiting = [q for q in questions if q.pending() and not q.answered_by_person]
                if waiting:
                    _answer(http, waiting[0])
        if questions:
            _settle(http, questions)
        stepped.step_to(0, http)


def _answer(http: httpx.Client, asked: Asked) -> None:
    """A person answers, if the question still waits (it may have just auto-continued)."""
    sid = asked.sid
    interactions = http.get(f"/v1/sessions/{sid}").json()["interactions"]
    (interaction,) = [i for i in interactions if i["callId"] == asked.call_id] or [None]
    if interaction is None:
        return
    response = http.post(
        f"/v1/sessions/{sid}/interactions/{interaction['interactionId']}/respond",
        json={"decision": "modify", "input": {**QUESTION, "answers": {
            "Which database?": "SQLite"}}},
    )
    if response.status_code == 200:
        asked.answered_by_person = True
    else:
        assert response.status_code == 409, response.text
