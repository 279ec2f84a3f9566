"""ListModels and the model routes (SPEC LM-1, LM-2 over HTTP, TR-4's ``[models]``).

Through the service on both backends: the exact description sentence, the strict empty input,
one line per model with ``[current]`` and ``[disabled: reason]``, the catalog read on every
call, error 31 without a catalog, the 24000-byte budget on a 500-model catalog (acceptance 2),
the 10 s timeout, and the user's choice of the session's model recorded on the session. Over
HTTP (in process): ``GET /v1/models``, ``GET /v1/models/resolve`` and ``PUT …/model``.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from server_support import in_process_client
from tool_support import CATALOG_TOML, FLAG_ONLY, open_service, tools_with, write_config

from eventlog import SessionModelSelected
from sessionledger import SessionService
from sessionledger.errors import InvalidInput
from sessionledger.permission.descriptors import SERVICE_TOOLS
from sessionledger.tools.handlers import ToolContext
from sessionledger.tools.models import (
    DESCRIPTION,
    NOT_A_SWITCH,
    OUTPUT_BUDGET,
    CatalogModel,
    ListModelsHandler,
    ModelCatalog,
    StaticModelCatalog,
    listing_text,
)

EXACT = (
    "This tool does NOT change the model you are running on. The session model is the user's "
    "choice and only the user changes it; `subagent_model` only moves the workflow's subagents."
)


@pytest.fixture
def service(backend: str, tmp_path: Path) -> Iterator[SessionService]:
    with open_service(backend, tmp_path) as opened:
        yield opened


def call(service: SessionService, session: str) -> dict[str, object]:
    answer = service.tools.call(session, "ListModels", {})
    assert answer.status_code == 200
    return answer.document


def test_lm1_description_has_the_exact_sentence_and_the_tool_its_flags() -> None:
    assert NOT_A_SWITCH == EXACT
    assert EXACT in DESCRIPTION
    descriptor = SERVICE_TOOLS["ListModels"]
    assert descriptor.read_only and not descriptor.needs_approval
    assert descriptor.timeout_s == 10.0


def test_lm1_input_is_empty_and_strict(service: SessionService) -> None:
    session = service.create_session()["sessionId"]
    before = service.store.version(session)
    with pytest.raises(InvalidInput) as refused:
        service.tools.call(session, "ListModels", {"provider": "anthropic"})
    assert refused.value.status == 422
    assert service.store.version(session) == before


def test_lm1_one_line_per_model_with_current_and_disabled(service: SessionService) -> None:
    session = service.create_session()["sessionId"]
    document = call(service, session)
    assert document["success"] is True
    lines = str(document["modelContent"]).splitlines()[1:]
    assert len(lines) == 4
    assert lines[0] == ("anthropic/sonnet — Anthropic (Claude Sonnet) · reasoning: low, medium, "
                        "high (default medium) · context 200000 tokens [current]")
    assert lines[1] == ("anthropic/opus — Anthropic · context 200000 tokens "
                        "[disabled: no API key configured]")
    assert lines[2] == "openrouter/sonnet — OpenRouter · context 100000 tokens"
    assert lines[3] == "openrouter/llama — OpenRouter"
    assert document["result"] == {"models": 4, "current": "anthropic/sonnet", "cutModels": 0}


def test_lm1_current_follows_the_users_choice_recorded_on_the_session(
    service: SessionService,
) -> None:
    session = service.create_session()["sessionId"]
    other = service.create_session()["sessionId"]
    chosen = service.models.select(session, "OpenRouter/Sonnet")
    assert chosen["model"] == "openrouter/sonnet" and chosen["level"] is None
    [event] = list(service.store.read_session(session, after=chosen["version"] - 1))
    assert event.data == SessionModelSelected(model="openrouter/sonnet", level=None)
    assert event.actor == "user"
    text = str(call(service, session)["modelContent"])
    assert "openrouter/sonnet — OpenRouter · context 100000 tokens [current]" in text
    assert text.count("[current]") == 1
    assert "anthropic/sonnet" in str(call(service, other)["modelContent"]).split("[current]")[0]
    # LM-2 prefers the session model's provider for a bare id under several providers
    assert service.models.resolve("sonnet", session).id == "openrouter/sonnet"
    assert service.models.resolve("sonnet", other).id == "anthropic/sonnet"
    assert service.audit(session)["ok"]


def test_lm1_the_catalog_is_read_on_every_call(service: SessionService) -> None:
    session = service.create_session()["sessionId"]
    assert "acme/new" not in str(call(service, session)["modelContent"])
    write_config(service.workspace_root, CATALOG_TOML + (
        '\n[[models.providers]]\nid = "acme"\n\n[[models.providers.models]]\nid = "new"\n'
    ))
    assert "acme/new — acme" in str(call(service, session)["modelContent"])


def test_lm1_no_catalog_is_error_31_model_catalog_unavailable(tmp_path: Path) -> None:
    with open_service("memory", tmp_path, config=FLAG_ONLY) as service:
        session = service.create_session()["sessionId"]
        document = call(service, session)
        assert document["status"] == "completed" and document["success"] is False
        error = document["result"]["error"]  # type: ignore[index]
        assert error["code"] == 31
        assert error["name"] == "model_catalog_unavailable"
        assert "missing host capability" in str(document["modelContent"])
        assert "not a lack of configured models" in str(document["modelContent"])


def catalog_of(count: int) -> ModelCatalog:
    return ModelCatalog(models=tuple(
        CatalogModel(
            provider_id=f"provider-{i % 9}", provider_name=f"Provider Number {i % 9}",
            model_id=f"model-with-a-long-identifier-{i:04d}", context_window=128000 + i,
            reasoning_levels=("minimal", "low", "medium", "high"), default_level="medium",
            disabled="no API key configured for this provider" if i % 5 == 0 else None,
        )
        for i in range(count)
    ), current="provider-1/model-with-a-long-identifier-0001")


def test_lm1_a_catalog_of_500_models_is_cut_at_24000_bytes_with_a_note() -> None:
    """Acceptance 2 (#8)."""
    catalog = catalog_of(500)
    text, cut = listing_text(catalog, current=catalog.current)
    assert OUTPUT_BUDGET == 24000
    assert len(text.encode("utf-8")) <= 24000
    lines = text.splitlines()
    shown = lines[1:-1]
    assert cut > 0 and len(shown) + cut == 500
    assert lines[-1].startswith(f"[… {cut} more model(s) not shown")
    assert "24000 bytes" in lines[-1]
    assert shown == [line for line in shown if line.split(" ")[0] in {m.id for m in catalog.models}]
    assert "[current]" in shown[1]  # the current model is among the first lines kept


def test_lm1_handler_cuts_a_500_model_catalog_too(service: SessionService) -> None:
    tools = tools_with(service, catalog=StaticModelCatalog(catalog_of(500)))
    session = service.create_session()["sessionId"]
    document = tools.call(session, "ListModels", {}).document
    assert len(str(document["modelContent"]).encode("utf-8")) <= 24000
    assert document["result"]["cutModels"] > 0


class HangingCatalog:
    def __init__(self) -> None:
        self.release = threading.Event()

    def read(self, workspace: Path) -> ModelCatalog | None:
        self.release.wait(5)
        return None


def test_lm1_a_catalog_that_does_not_answer_times_out(tmp_path: Path) -> None:
    with open_service("memory", tmp_path) as service:
        catalog = HangingCatalog()
        handler = ListModelsHandler(catalog, lambda _sid: None, timeout_s=0.05)
        summary = service.runtime.summary(service.create_session()["sessionId"])
        try:
            outcome = handler.run(ToolContext(session=summary, call_id="c"), {}, None)
        finally:
            catalog.release.set()
        assert outcome.success is False
        assert outcome.result["error"]["code"] == "timeout"
        assert "timed out" in outcome.model_content


# -- HTTP: GET /v1/models, GET /v1/models/resolve, PUT …/model -----------------------------


def test_lm1_lm2_model_routes_in_process(tmp_path: Path) -> None:
    write_config(tmp_path, CATALOG_TOML)
    with in_process_client(tmp_path) as (client, service):
        session = client.post("/v1/sessions", json={}).json()["sessionId"]
        listing = client.get("/v1/models").json()
        assert listing["current"] == "anthropic/sonnet"
        assert [m["id"] for m in listing["models"]] == [
            "anthropic/sonnet", "anthropic/opus", "openrouter/sonnet", "openrouter/llama"]
        assert listing["models"][1]["disabled"] == "no API key configured"
        assert listing["text"].splitlines()[1].endswith("[current]")
        resolved = client.get("/v1/models/resolve", params={"ref": "sonnet$HIGH",
                                                             "sessionId": session})
        assert resolved.status_code == 200
        assert resolved.json() == {"id": "anthropic/sonnet", "level": "high"}
        refused = client.get("/v1/models/resolve", params={"ref": "opus"})
        assert refused.status_code == 422
        error = refused.json()["error"]
        assert error["code"] == "invalid_model_reference"
        assert "no API key configured" in error["message"] and "ListModels" in error["message"]
        assert error["details"]["reason"] == "disabled"
        assert client.get("/v1/models/resolve").status_code == 422  # ref is required
        before = service.store.version(session)
        bad = client.put(f"/v1/sessions/{session}/model", json={"model": "gpt"})
        assert bad.status_code == 422 and service.store.version(session) == before
        assert client.put(f"/v1/sessions/{session}/model", json={"model": "x", "y": 1}
                          ).status_code == 422
        chosen = client.put(f"/v1/sessions/{session}/model", json={"model": "llama"})
        assert chosen.status_code == 200
        assert chosen.json()["model"] == "openrouter/llama"
        assert client.get("/v1/models", params={"sessionId": session}).json()["current"] == (
            "openrouter/llama")
        assert client.get("/v1/models", params={"sessionId": "sess_nope"}).status_code == 404


def test_lm1_model_routes_without_a_catalog_are_404(tmp_path: Path) -> None:
    with in_process_client(tmp_path) as (client, _service):
        for response in (client.get("/v1/models"),
                         client.get("/v1/models/resolve", params={"ref": "x"})):
            assert response.status_code == 404
            assert response.json()["error"]["code"] == "model_catalog_unavailable"
            assert response.json()["error"]["details"]["errorCode"] == 31
