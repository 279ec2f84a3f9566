"""schemathesis against ``/openapi.json``: no input gives a 5xx, every answer matches the schema.

One test per operation of the app's OpenAPI document (what ``GET /openapi.json`` serves),
run by schemathesis's pytest integration against the app served in process over a real
SQLite file. schemathesis generates valid and invalid path parameters, queries, headers and
bodies, sends each through the ASGI app and checks the answer: not a 5xx, a documented status
code, content type and headers, a body matching the documented schema (errors included: the
SPEC §11 error body), invalid input refused, unsupported methods answered 405 with ``Allow``.

Generated ids rarely name anything, so every operation runs against a fresh store seeded with
a live session (a question waiting, a finished TodoWrite), a session waiting on a plan
approval and a deleted session, and a valid case's path parameters are also drawn from those
ids (:func:`flatmap_case`) so the fuzz reaches the handlers instead of stopping at 404. Request
bodies document examples (a TodoWrite, an AskUserQuestion, answers), which schemathesis also
sends. ``make test`` runs :data:`BOUNDED_EXAMPLES` per operation; the ``slow`` variant runs
:data:`LONG_EXAMPLES` in ``make verify`` (decision D101).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import product
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from fastapi import FastAPI
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from schemathesis.python import asgi
from tool_support import CATALOG_TOML, write_config

from sessionledger import ServerSettings, SessionService
from sessionledger.http import create_app

BOUNDED_EXAMPLES = 25
"""Examples per operation in ``make test`` (27 operations: about 40 s on two workers)."""
LONG_EXAMPLES = 300
"""Examples per operation in ``make verify`` (about 4 minutes on one worker)."""
STREAM_TIMEOUT_S = 0.5
"""An event stream never ends by itself: schemathesis keeps what arrived by then."""
REQUEST_TIMEOUT_S = 30.0
FUZZ_HOST = asgi.HOST
"""The ``Host`` schemathesis sends (``testserver``): the app under test answers to it (EG-3), so
every case passes the Host check and reaches the routes."""

CONFIG = schemathesis.Config.from_dict({
    # A stream is cut after this many events (seeded sessions have more).
    "max-stream-events": 3,
    "checks": {
        # A body that fits the schema may still break a rule the schema cannot state (an
        # unknown tool, a model reference that does not resolve, `cycle: false`): such a
        # body is rightly 422, so "valid data is accepted" is not a property of this API.
        "positive_data_acceptance": {"enabled": False},
        # Invalid data must be refused with a 4xx; 413 (a body over the cap) is one, and so is
        # 410: a deleted session refuses every command before its parameters are looked at
        # (D17), and schemathesis may run a case it labels negative ("invalid component:
        # positive test case") on a seeded deleted session.
        "negative_data_rejection": {"expected-statuses": [
            400, 401, 403, 404, 405, 406, 409, 410, 413, 415, 422, 428, 429]},
    },
})


def _openapi_document() -> dict[str, Any]:
    """The app's OpenAPI document, built once at collection without serving anything."""
    root = Path.cwd()
    service = SessionService.open("memory://", workspace_root=root)
    try:
        return create_app(service=service, settings=ServerSettings(workspace_root=root)).openapi()
    finally:
        service.close()


schema = schemathesis.openapi.from_dict(_openapi_document(), config=CONFIG)


@dataclass
class Seeds:
    """Ids that exist in the store under test, by path parameter name."""

    values: dict[str, list[str]] = field(default_factory=dict)

    def choices(self, generated: dict[str, Any]) -> list[dict[str, Any]]:
        """The generated parameters, and every way of replacing some by seeded ids."""
        options = [[value, *self.values.get(name, [])] for name, value in generated.items()]
        return [dict(zip(generated, values, strict=True)) for values in product(*options)]


SEEDS = Seeds()
"""Filled by the ``app`` fixture for the operation under test (xdist workers are processes)."""


@schema.hook
def flatmap_case(
    _context: schemathesis.HookContext, case: schemathesis.Case
) -> st.SearchStrategy[schemathesis.Case]:
    """A valid case also runs with seeded ids; a negative case keeps its invalid parameter."""
    negative = case.meta is not None and case.meta.generation.mode.is_negative
    if negative or not case.path_parameters:
        return st.just(case)

    def with_parameters(parameters: dict[str, Any]) -> schemathesis.Case:
        case.path_parameters = parameters
        return case

    return st.sampled_from(SEEDS.choices(case.path_parameters)).map(with_parameters)


QUESTION: dict[str, Any] = {"questions": [{
    "question": "Which database?", "header": "Database", "multiSelect": False,
    "options": [{"label": "Postgres", "description": "<b>a server</b>"},
                {"label": "SQLite", "description": "one file", "preview": "<i>ledger.db</i>"}],
}]}
TODOS: dict[str, Any] = {"todos": [
    {"content": "fuzz <script>x</script>", "status": "pending", "priority": "high"}]}


def _seed(service: SessionService) -> dict[str, list[str]]:
    """A live session with a waiting question and a finished TodoWrite, one waiting on a plan
    approval, and a deleted one; their ids by path parameter name."""
    live = service.create_session()["sessionId"]
    asked = service.tools.call(live, "AskUserQuestion", QUESTION, call_id="call_ask")
    service.tools.call(live, "TodoWrite", TODOS, call_id="call_todo")
    planning = service.create_session(mode="plan")["sessionId"]
    plan = service.tools.call(planning, "ExitPlanMode", {"plan": "# Plan\n<i>step</i>"})
    gone = service.create_session()["sessionId"]
    service.delete_session(gone)
    return {
        "session_id": [live, planning, gone],
        "call_id": ["call_ask", "call_todo", plan.document["callId"]],
        "interaction_id": [asked.document["interactionId"], plan.document["interactionId"]],
    }


@pytest.fixture
def app(tmp_path: Path) -> Iterator[FastAPI]:
    """The app over a fresh seeded SQLite store; its lifespan (scheduler) stopped after."""
    root = tmp_path / "root"
    root.mkdir()
    write_config(root, CATALOG_TOML)  # a model catalog, so the model routes answer 200
    service = SessionService.open(f"sqlite:///{tmp_path / 'ledger.db'}", workspace_root=root)
    try:
        SEEDS.values = _seed(service)
        yield create_app(
            service=service, settings=ServerSettings(
                workspace_root=root, stream_poll_s=0.05, allowed_hosts=(FUZZ_HOST,)
            ),
        )
    finally:
        SEEDS.values = {}
        asgi.shutdown_lifespans()  # schemathesis started the app's lifespan on first call
        service.close()


def _call(case: schemathesis.Case, app: FastAPI) -> None:
    streaming = case.path.endswith("/stream")
    case.call_and_validate(app=app, timeout=STREAM_TIMEOUT_S if streaming else REQUEST_TIMEOUT_S)


FUZZ_SETTINGS: dict[str, Any] = {"deadline": None, "suppress_health_check": list(HealthCheck)}


@schema.parametrize()
@settings(max_examples=BOUNDED_EXAMPLES, **FUZZ_SETTINGS)
def test_no_5xx_and_answers_match_the_schema(case: schemathesis.Case, app: FastAPI) -> None:
    _call(case, app)


@pytest.mark.slow
@schema.parametrize()
@settings(max_examples=LONG_EXAMPLES, **FUZZ_SETTINGS)
def test_no_5xx_and_answers_match_the_schema_long(
    case: schemathesis.Case, app: FastAPI
) -> None:
    _call(case, app)


def test_the_fuzzed_document_is_the_served_one(tmp_path: Path) -> None:
    """The document fuzzed above is what ``GET /openapi.json`` serves."""
    service = SessionService.open("memory://", workspace_root=tmp_path)
    try:
        settings = ServerSettings(workspace_root=tmp_path, allowed_hosts=(FUZZ_HOST,))
        app = create_app(service=service, settings=settings)
        served = schemathesis.openapi.from_asgi("/openapi.json", app, config=CONFIG)
        assert served.raw_schema == schema.raw_schema
    finally:
        asgi.shutdown_lifespans()
        service.close()
