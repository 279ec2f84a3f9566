"""The Rust fast path of payload encoding writes exactly the canonical JSON (EL-4).

Hashes are computed over the stored payload text, so a single differing byte between the fast
path and ``canonical_json`` of the model's dump would make two stores disagree about a chain.
"""

from __future__ import annotations

from typing import Any, Literal

import pytest
from hypothesis import given
from hypothesis import strategies as st
from payload_strategies import payload_strategy
from pydantic import BaseModel, ConfigDict

from eventlog import CATALOG, canonical_json
from eventlog.encoding import NotPlainJson, qualifies, sorted_tree, tree_encoder
from eventlog.envelope import encode_event

NO_TYPE = frozenset({"type"})


def general(event: BaseModel) -> str:
    return canonical_json(event.model_dump(mode="json", by_alias=True, exclude={"type"}))


@pytest.mark.parametrize("event_type", sorted(CATALOG))
@given(data=st.data())
def test_el4_encoding_equals_canonical_json_for_every_type(
    event_type: str, data: st.DataObject
) -> None:
    """EL-4: whichever path encodes it, the stored text is canonical JSON of the payload."""
    event = data.draw(payload_strategy(CATALOG[event_type]))
    assert encode_event(event) == general(event)


@pytest.mark.parametrize(
    "text", ['"quoted"', "back\\slash", "nl\ncr\rtab\t", "\x00\x01\x1f\x7f", "é中😀", "\u2028"]
)
def test_el4_fast_path_escapes_strings_like_json(text: str) -> None:
    """EL-4: control characters, quotes, backslashes and non-ASCII as ``json.dumps`` writes them."""
    event = CATALOG["MessageRecorded"](role="user", content=text)  # type: ignore[call-arg]
    assert encode_event(event) == general(event)


def test_el4_hot_event_types_take_the_fast_path() -> None:
    """The events every session writes stay on the fast path (a reordered field would not)."""
    for name in (
        "SessionCreated", "SessionModeChanged", "MessageRecorded", "PermissionDecided",
        "TodosWritten", "ReminderInjected", "GoalStarted", "SessionDeleted",
    ):
        assert qualifies(CATALOG[name], exclude=NO_TYPE), name


class _Base(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Unsorted(_Base):
    b: str
    a: str


class WithDict(_Base):
    a: dict[str, Any]


class WithFloat(_Base):
    a: float


class Nested(_Base):
    a: tuple[Unsorted, ...]


class Fine(_Base):
    a: Literal["x", "y"]
    b: int | None
    c: list[str]


def test_models_whose_rust_json_may_differ_do_not_qualify() -> None:
    assert not qualifies(Unsorted)
    assert not qualifies(WithDict)
    assert not qualifies(WithFloat)
    assert not qualifies(Nested)
    assert qualifies(Fine)
    assert qualifies(Unsorted, exclude=frozenset({"b"}))


# -- free-form JSON: key-sorted copies written by pydantic (D72) ------------------------------

TREE_TYPES = ("ToolCallRequested", "ToolCallCompleted", "InteractionRequested",
              "InteractionResolved")


def test_el4_payloads_with_free_form_json_take_the_tree_path() -> None:
    """Tool inputs and results, interaction payloads: every other field qualifies, so the
    free-form values alone are copied with sorted keys (a TodoWrite writes two of them)."""
    for name in TREE_TYPES:
        assert tree_encoder(CATALOG[name], exclude=NO_TYPE, fallback=general) is not None, name
    assert tree_encoder(CATALOG["TodosWritten"], exclude=NO_TYPE, fallback=general) is None


@pytest.mark.parametrize("value", [
    {"b": 1, "a": [{"z": None, "y": True, "x": "é\n"}], "c": -(2**70)},
    {"nested": {"k": {"j": {"i": []}}}, "": ""},
    {"todos": [{"content": "a", "status": "pending", "priority": "high"}] * 3},
])
def test_el4_plain_free_form_json_is_written_exactly(value: dict[str, Any]) -> None:
    event = CATALOG["ToolCallRequested"](  # type: ignore[call-arg]
        call_id="call_1", tool="T", input=value, host="protocol"
    )
    assert encode_event(event) == general(event)
    assert sorted_tree(value) == value and list(sorted_tree(value)) == sorted(value)


@pytest.mark.parametrize("value", [
    {"f": 1.5}, {"f": [1e16]}, {"t": (1, 2)}, {"n": {1: "int key"}}, {"s": {"a", "b"}},
])
def test_el4_anything_but_plain_json_takes_the_general_path(value: dict[str, Any]) -> None:
    with pytest.raises(NotPlainJson):
        sorted_tree(value)
    event = CATALOG["ToolCallCompleted"](  # type: ignore[call-arg]
        call_id="call_1", tool="T", status="completed", success=True, result=value,
        model_content="x",
    )
    assert encode_event(event) == general(event)
