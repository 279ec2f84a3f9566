"""The whole service against its reference model, fast in ``make test``, long in ``make verify``.

Issue #10, acceptance 1. The fast run is 25 examples of up to 50 steps (about 15 s on two
vCPUs). The long run (marked ``slow``, run by ``make verify`` under
``HYPOTHESIS_PROFILE=long``) repeats rounds of the machine until a wall-clock budget is
spent: ``VERIFY_STATEFUL_BUDGET_S`` seconds (default 600, at most 1800 — issue #10 allows
30 minutes). Each round is a fresh ``run_state_machine_as_test`` with a fixed small number
of examples, so the budget is kept to within one round. How many examples and rounds ran is
printed and written to ``test-artifacts/verification/stateful.json``.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis.stateful import run_state_machine_as_test
from verification_machine import OnTheLoop, ServiceLedger

BUDGET_ENV = "VERIFY_STATEFUL_BUDGET_S"
DEFAULT_BUDGET_S = 600.0
MAX_BUDGET_S = 1800.0
FAST = {"max_examples": 25, "stateful_step_count": 50}
FAST_ON_THE_LOOP = {"max_examples": 8, "stateful_step_count": 50}
ROUND = {"max_examples": 10, "stateful_step_count": 100}
ARTIFACT = Path(__file__).resolve().parents[2] / "test-artifacts" / "verification"


def budget_s() -> float:
    """The long run's wall-clock budget in seconds, from the environment, capped at 30 min."""
    raw = os.environ.get(BUDGET_ENV, "")
    return min(float(raw), MAX_BUDGET_S) if raw.strip() else DEFAULT_BUDGET_S


def _settings(**overrides: Any) -> settings:
    return settings(settings.default, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow], **overrides)


def test_the_service_agrees_with_its_model_fast() -> None:
    """``make test``: a few short sequences of every command, restart and reconnect."""
    run_state_machine_as_test(ServiceLedger, settings=_settings(**FAST))


def test_the_service_on_the_loop_agrees_with_its_model_fast() -> None:  # issue 24.6
    """The same machine, every command run as an async route runs it (``on_loop``)."""
    run_state_machine_as_test(OnTheLoop, settings=_settings(**FAST_ON_THE_LOOP))


@pytest.mark.postgres
def test_the_service_agrees_with_its_model_on_postgresql(pg_database: str) -> None:
    """Issue #11: the same machine over the PostgreSQL store, each example in a schema of
    its own (fewer examples: ``make test``'s budget)."""

    class OnPostgres(ServiceLedger):
        def store_url(self) -> str:
            return f"{pg_database}?schema=stateful_{uuid.uuid4().hex[:16]}"

    run_state_machine_as_test(
        OnPostgres, settings=_settings(max_examples=8, stateful_step_count=50)
    )


def _report(
    capsys: pytest.CaptureFixture[str], budget: float, started: float, rounds: int,
    examples: int, passed: bool,
) -> None:
    """Print (past pytest's capture) and keep how much ran:
    ``test-artifacts/verification/stateful.json``."""
    elapsed = time.monotonic() - started
    report = {
        "passed": passed, "budgetSeconds": budget, "elapsedSeconds": round(elapsed, 1),
        "rounds": rounds, "examples": examples, "steps": ServiceLedger.steps,
        "maxStepsPerExample": ROUND["stateful_step_count"],
        "profile": os.environ.get("HYPOTHESIS_PROFILE", "ci"),
    }
    ARTIFACT.mkdir(parents=True, exist_ok=True)
    (ARTIFACT / "stateful.json").write_text(json.dumps(report, indent=2) + "\n",
                                            encoding="utf-8")
    with capsys.disabled():
        print(f"\nstateful verification: {examples} examples ({ServiceLedger.steps} steps) "
              f"in {rounds} rounds, {elapsed:.0f} s of a {budget:.0f} s budget"
              f"{'' if passed else ', then a failure'}")


@pytest.mark.slow
@pytest.mark.longest_first
@pytest.mark.timeout(int(budget_s() + 600))
def test_the_service_agrees_with_its_model_for_a_wall_clock_budget(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``make verify``: rounds of longer sequences until the budget is spent; a round that
    finds a failure stops the run with hypothesis's shrunk example (reported too)."""
    budget = budget_s()
    started = time.monotonic()
    runs_before, ServiceLedger.steps = ServiceLedger.runs, 0
    rounds = 0
    passed = False
    try:
        while rounds == 0 or time.monotonic() - started < budget:
            # every other round runs the commands as the async routes do (issue 24.6)
            machine = OnTheLoop if rounds % 2 else ServiceLedger
            run_state_machine_as_test(machine, settings=_settings(**ROUND))
            rounds += 1
        passed = True
    finally:
        _report(capsys, budget, started, rounds, ServiceLedger.runs - runs_before, passed)
