"""Model reference resolution, a pure function (SPEC LM-2).

A table of references against one catalog — exact ids, bare unique ids, bare ids under
several providers with and without a matching session provider, mixed case, a disabled only
match, valid / invalid / absent ``$level`` — then the failure message (at most 40 enabled ids
in catalog order, naming ListModels) and a hypothesis property over random catalogs:
resolution never returns a disabled model, and the case of the reference never matters.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sessionledger.tools.models import (
    MAX_LISTED,
    AmbiguousModel,
    CatalogModel,
    DisabledModel,
    InvalidLevel,
    MalformedReference,
    ModelCatalog,
    ModelReferenceError,
    UnknownModel,
    resolve_model_reference,
)


def model(provider: str, model_id: str, **fields: object) -> CatalogModel:
    return CatalogModel(provider_id=provider, provider_name=provider.title(), model_id=model_id,
                        **fields)  # type: ignore[arg-type]


CATALOG = ModelCatalog(models=(
    model("anthropic", "sonnet", reasoning_levels=("low", "medium", "high"),
          default_level="medium"),
    model("anthropic", "haiku"),
    model("openrouter", "sonnet", reasoning_levels=("low",), default_level="low"),
    model("openrouter", "llama"),
    model("bedrock", "llama", disabled="no AWS credentials"),
    model("bedrock", "titan", disabled="region unsupported"),
    model("openai", "gpt", reasoning_levels=("minimal", "High")),
    model("openai", "o-mini", disabled="quota exhausted"),
    model("azure", "o-mini"),
))

# ref, session provider, expected id and level, or the error type
TABLE: list[tuple[str, str | None, tuple[str, str | None] | type[ModelReferenceError]]] = [
    # exact providerId/modelId
    ("anthropic/sonnet", None, ("anthropic/sonnet", "medium")),
    ("openrouter/sonnet", "anthropic", ("openrouter/sonnet", "low")),
    ("anthropic/nope", None, UnknownModel),
    ("nope/sonnet", None, UnknownModel),
    # bare, unique
    ("haiku", None, ("anthropic/haiku", None)),
    ("gpt", None, ("openai/gpt", None)),
    # bare under several providers: the session's provider, else ambiguous
    ("sonnet", "anthropic", ("anthropic/sonnet", "medium")),
    ("sonnet", "OpenRouter", ("openrouter/sonnet", "low")),
    ("sonnet", None, AmbiguousModel),
    ("sonnet", "openai", AmbiguousModel),
    # a disabled entry does not count toward uniqueness
    ("llama", None, ("openrouter/llama", None)),
    ("o-mini", None, ("azure/o-mini", None)),
    # mixed case
    ("ANTHROPIC/Sonnet", None, ("anthropic/sonnet", "medium")),
    ("HaIkU", None, ("anthropic/haiku", None)),
    ("LLAMA", "BEDROCK", ("openrouter/llama", None)),
    # disabled only-match, bare or exact
    ("titan", None, DisabledModel),
    ("bedrock/titan", None, DisabledModel),
    ("bedrock/llama", None, DisabledModel),
    # $level: valid (any case, answered in the catalog's spelling), invalid, absent
    ("anthropic/sonnet$high", None, ("anthropic/sonnet", "high")),
    ("sonnet$LOW", "anthropic", ("anthropic/sonnet", "low")),
    ("gpt$high", None, ("openai/gpt", "High")),
    ("anthropic/sonnet$turbo", None, InvalidLevel),
    ("haiku$low", None, InvalidLevel),  # a model without levels takes none
    ("anthropic/sonnet$", None, InvalidLevel),
    ("anthropic/sonnet", None, ("anthropic/sonnet", "medium")),  # absent: the default
    # malformed
    ("", None, MalformedReference),
    ("   ", None, MalformedReference),
    ("/sonnet", None, MalformedReference),
    ("anthropic/", None, MalformedReference),
    ("a/b/c", None, MalformedReference),
    ("$high", None, MalformedReference),
    ("anthropic sonnet", None, MalformedReference),
]


@pytest.mark.parametrize(("ref", "provider", "expected"), TABLE)
def test_lm2_reference_table(
    ref: str, provider: str | None,
    expected: tuple[str, str | None] | type[ModelReferenceError],
) -> None:
    if isinstance(expected, tuple):
        resolved = resolve_model_reference(ref, CATALOG, session_provider=provider)
        assert (resolved.id, resolved.level) == expected
        assert resolved.model.enabled
        assert resolved.to_wire() == {"id": expected[0], "level": expected[1]}
    else:
        with pytest.raises(expected) as failed:
            resolve_model_reference(ref, CATALOG, session_provider=provider)
        assert "ListModels" in failed.value.message
        assert failed.value.reason == expected.reason


def test_lm2_disabled_only_match_names_it_with_its_reason() -> None:
    with pytest.raises(DisabledModel) as failed:
        resolve_model_reference("titan", CATALOG)
    assert "bedrock/titan" in failed.value.message
    assert "region unsupported" in failed.value.message


def test_lm2_ambiguity_names_the_candidates_and_skips_disabled_ones() -> None:
    with pytest.raises(AmbiguousModel) as failed:
        resolve_model_reference("sonnet", CATALOG)
    assert "anthropic/sonnet" in failed.value.problem
    assert "openrouter/sonnet" in failed.value.problem


def test_lm2_invalid_level_lists_the_models_levels() -> None:
    with pytest.raises(InvalidLevel) as failed:
        resolve_model_reference("anthropic/sonnet$turbo", CATALOG)
    assert "low, medium, high" in failed.value.message


def big_catalog(count: int, disabled_every: int = 3) -> ModelCatalog:
    return ModelCatalog(models=tuple(
        model(f"p{i % 7}", f"m{i}", disabled="off" if i % disabled_every == 0 else None)
        for i in range(count)
    ))


def test_lm2_failure_lists_at_most_40_enabled_ids_in_catalog_order_and_names_list_models() -> None:
    catalog = big_catalog(200)
    with pytest.raises(UnknownModel) as failed:
        resolve_model_reference("nothing-like-it", catalog)
    enabled = catalog.enabled_ids()
    assert failed.value.available == enabled[:MAX_LISTED]
    assert len(failed.value.available) == MAX_LISTED == 40
    listed = failed.value.message.split("Available models: ", 1)[1].split(" … and ", 1)[0]
    assert listed.split(", ") == enabled[:40]
    assert f"… and {len(enabled) - 40} more." in failed.value.message
    assert "ListModels" in failed.value.message
    assert not any(m.id in failed.value.available for m in catalog.models if not m.enabled)


def test_lm2_failure_with_few_models_lists_them_all() -> None:
    with pytest.raises(UnknownModel) as failed:
        resolve_model_reference("nope", CATALOG)
    assert failed.value.available == CATALOG.enabled_ids()
    assert "more" not in failed.value.message


# -- the property: never a disabled model, case never matters -------------------------------

names = st.sampled_from(["alpha", "Beta", "gamma", "delta-1", "e.2"])
providers = st.sampled_from(["acme", "Globex", "initech"])
levels = st.lists(st.sampled_from(["low", "Mid", "high"]), unique=True, max_size=3)


@st.composite
def catalogs(draw: st.DrawFn) -> ModelCatalog:
    entries: dict[tuple[str, str], CatalogModel] = {}
    for _ in range(draw(st.integers(0, 10))):
        provider, name = draw(providers), draw(names)
        reasoning = tuple(draw(levels))
        entries.setdefault((provider.lower(), name.lower()), model(
            provider, name, reasoning_levels=reasoning,
            default_level=draw(st.sampled_from(reasoning)) if reasoning else None,
            disabled=draw(st.none() | st.just("unavailable")),
        ))
    return ModelCatalog(models=tuple(entries.values()))


@st.composite
def references(draw: st.DrawFn) -> str:
    ref = draw(names)
    if draw(st.booleans()):
        ref = f"{draw(providers)}/{ref}"
    if draw(st.booleans()):
        ref += "$" + draw(st.sampled_from(["low", "mid", "HIGH", "none"]))
    return ref


def _outcome(ref: str, catalog: ModelCatalog, provider: str | None) -> object:
    try:
        resolved = resolve_model_reference(ref, catalog, session_provider=provider)
    except ModelReferenceError as exc:
        return type(exc)
    return resolved


def _check(catalog: ModelCatalog, ref: str, provider: str | None) -> None:
    outcome = _outcome(ref, catalog, provider)
    if not isinstance(outcome, type):
        assert outcome.model.enabled  # type: ignore[attr-defined]
        assert outcome.model in catalog.models  # type: ignore[attr-defined]
    for variant in (ref.upper(), ref.lower(), ref.swapcase()):
        other_provider = provider.swapcase() if provider else None
        assert _outcome(variant, catalog, other_provider) == outcome


def test_lm2_property_never_disabled_and_case_insensitive(depth: str) -> None:
    """Fast: the profile's examples; slow (``make verify``): five times as many."""
    examples = settings.default.max_examples * (1 if depth == "fast" else 5)
    check = settings(settings.default, max_examples=examples)(
        given(catalog=catalogs(), ref=references(), provider=st.none() | providers)(_check)
    )
    check()
