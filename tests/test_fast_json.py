"""The Rust fast path of payload encoding writes exactly the canonical JSON (EL-4).

Hashes are computed over the stored payload text, so a single differing byte between the fast
path and ``canonical_json`` of the model's dump would make two stores disagree about a chain.
"""

from __future__ import annotations

import enum
import json
import math
import uuid
from collections.abc import Callable
from typing import Any, Literal

import pytest
from hostile_text import HOSTILE_LINES
from hypothesis import given
from hypothesis import strategies as st
from payload_strategies import RAW_JSON, nested, payload_strategy
from pydantic import BaseModel, ConfigDict

from eventlog import CATALOG, canonical_json, encoding, envelope, envelope_hash
from eventlog.encoding import (
    EVENT_MAX_DEPTH,
    GENESIS_HASH,
    INPUT_MAX_DEPTH,
    JsonShapeError,
    NotPlainJson,
    check_json,
    checked_canonical_json,
    loads_json,
    qualifies,
    sorted_tree,
    tree_encoder,
)
from eventlog.envelope import encode_event

NO_TYPE = frozenset({"type"})


def general(event: BaseModel) -> str:
    return canonical_json(event.model_dump(mode="json", by_alias=True, exclude={"type"}))


@pytest.mark.parametrize("event_type", sorted(CATALOG))
@given(data=st.data())
def test_el4_encoding_equals_canonical_json_for_every_type(
    event_type: str, data: st.DataObject
) -> None:
    """EL-4: whichever path encodes it, the stored text is canonical JSON of the payload, the
    bytes the encoder before orjson wrote."""
    event = data.draw(payload_strategy(CATALOG[event_type]))
    assert encode_event(event) == general(event)
    dumped = event.model_dump(mode="json", by_alias=True, exclude={"type"})
    assert encode_event(event) == REFERENCE(dumped)  # issue 24: the bytes before orjson


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


# -- orjson where its bytes and values are exactly the standard library's (issue 24) -----------
#
# ``canonical_json`` and ``loads_json`` take ``orjson`` for plain JSON and today's standard
# library code for everything else. Each test compares with that code as it was (``REFERENCE``,
# ``reference_loads``): the same text, the same value (``repr``: key order, ``-0.0``, int or
# float), or the same exception with the same message.

REFERENCE = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
).encode
"""``canonical_json`` before orjson, exactly."""


def reference_loads(text: bytes | str, *, max_depth: int = INPUT_MAX_DEPTH) -> Any:
    """``loads_json`` before orjson, exactly."""
    if not isinstance(text, str):
        try:
            text = bytes(text).decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise JsonShapeError((), f"the text is not UTF-8 ({exc.reason} at byte "
                                     f"{exc.start})") from None
    try:
        value = encoding._decode(text)
    except RecursionError:
        raise JsonShapeError(encoding._deep_path(text, max_depth),
                             f"nested deeper than {max_depth} levels") from None
    check_json(value, max_depth=max_depth)
    return value


def outcome(run: Callable[[], Any]) -> tuple[str, str]:
    """What ``run`` gives, comparably: its result's ``repr``, or its exception and message."""
    try:
        return "value", repr(run())
    except (ValueError, TypeError, RecursionError) as exc:
        return type(exc).__name__, str(exc)


class Colour(enum.Enum):
    RED = "red"


class Tagged(str):
    pass


EDGE_FLOATS = [
    0.0, -0.0, 5e-324, -5e-324, 2.2250738585072014e-308, 2.2250738585072014e-308 / 3, 1e-7,
    1e-05, 9.999999999999999e-05, 1e-4, 0.1, 1.0, 1e15, 9999999999999998.0, 1e16, 1e22,
    2.0**63, math.nextafter(2.0**63, 0), 2.0**64, 1.7976931348623157e308, -1e-7, -1e16,
    math.nan, math.inf, -math.inf,
]
ANY_TEXT = st.text(st.characters(codec=None, exclude_categories=()), max_size=12) | st.sampled_from(
    ["\ud800", "a\udfff", "\u2028", "\x7f", "\x00\x1f", '"\\/', "é中😀", "\ufeff"])
ANY_SCALAR = (
    st.none() | st.booleans() | st.integers() | st.integers(-(10**700), 10**700)
    | st.sampled_from([2**63 - 1, 2**63, 2**64 - 1, 2**64, -(2**63), -(2**63) - 1, 10**640 - 1])
    | st.floats() | st.sampled_from(EDGE_FLOATS) | ANY_TEXT
    | st.sampled_from([uuid.UUID(int=7), Colour.RED, Tagged("x"), enum.IntEnum("N", "A").A, b"x"])
)
ANY_JSON = st.recursive(
    ANY_SCALAR,
    lambda inner: st.lists(inner, max_size=4) | st.lists(inner, max_size=3).map(tuple)
    | st.dictionaries(ANY_TEXT, inner, max_size=4)
    | st.dictionaries(st.none() | st.integers(-3, 3) | st.booleans() | st.floats(0, 2), inner,
                      max_size=2),
    max_leaves=12,
)


def test_tree_paths_check_every_free_form_field() -> None:  # EG-1, issue 24
    """A tree encoder checks the free-form values in its own walk, so encode_event skips its
    separate check for them: that is sound only while they are all the free-form fields."""
    for name in TREE_TYPES:
        model = CATALOG[name]
        assert {wire for _name, wire in envelope._free_form(model)} == {
            f.alias or n for n, f in model.model_fields.items() if encoding._is_tree(f.annotation)
        }, name


def _checked_then_general(event: Any, wire: str, value: Any) -> tuple[str, str]:
    """What encode_event did before issue 24's single walk: the check, then the general path."""
    def run() -> str:
        encoding.check_json(value, max_depth=EVENT_MAX_DEPTH - 1, path=(wire,))
        return general(event)
    return outcome(run)


@given(value=st.dictionaries(ANY_TEXT, ANY_JSON, max_size=4),
       depth=st.sampled_from([0, 1, EVENT_MAX_DEPTH - 3, EVENT_MAX_DEPTH - 2, EVENT_MAX_DEPTH]))
def test_free_form_values_are_refused_or_written_as_before(  # EG-1, EL-4, issue 24
    value: dict[str, Any], depth: int
) -> None:
    """The tree path's one walk refuses (same path, same message) and writes exactly what the
    separate check and the general writer did, for hostile values at any depth."""
    for _ in range(depth):
        value = {"k": value}
    for model, wire, fields in (
        ("ToolCallRequested", "input", {"call_id": "call_1", "tool": "T", "host": "protocol"}),
        ("ToolCallCompleted", "result", {"call_id": "call_1", "tool": "T", "status": "completed",
                                         "success": True, "model_content": "x"}),
    ):
        event = CATALOG[model].model_construct(**fields, **{wire: value})
        assert outcome(lambda e=event: encode_event(e)) == _checked_then_general(
            event, wire, value)


@given(value=ANY_JSON)
def test_canonical_json_is_todays_text_for_every_value(value: Any) -> None:  # EL-4, issue 24
    """Big ints, lone surrogates, every float, non-str keys, tuples, other types: the same
    text as before, or the same error."""
    assert outcome(lambda: canonical_json(value)) == outcome(lambda: REFERENCE(value))
    assert outcome(lambda: checked_canonical_json(value, max_depth=EVENT_MAX_DEPTH)) == outcome(
        lambda: (check_json(value, max_depth=EVENT_MAX_DEPTH), REFERENCE(value))[1])


ODD = [uuid.UUID(int=7), Colour.RED, Tagged("x"), enum.IntEnum("N", "A").A, b"x", math.nan,
       -math.inf, 2**64, "\ud800", (1, 2.5)]


@pytest.mark.parametrize("value", [
    *ODD, *([v] for v in ODD), *({"k": v} for v in ODD), {1: "x", "1": "y"}, {None: 1, "b": 2},
    {True: 1}, {1.5: 2}, {"\udfff": 1}, {"a": 1, 2: "b"},
], ids=repr)
def test_what_orjson_writes_otherwise_is_written_as_before(value: Any) -> None:  # issue 24
    """UUIDs and enums (orjson writes them; the standard encoder refuses them), NaN (orjson
    writes ``null``), str subclasses, integers past 64 bits, lone surrogates, keys that are
    not text: the same text as before, or the same error."""
    assert outcome(lambda: canonical_json(value)) == outcome(lambda: REFERENCE(value))


@pytest.mark.parametrize("value", [v for v in EDGE_FLOATS if math.isfinite(v)], ids=repr)
def test_free_form_floats_are_stored_as_before(value: float) -> None:  # EL-4, issue 24
    """A tool input or result with a float: orjson writes it only where it spells it alike."""
    for event in (
        CATALOG["ToolCallRequested"](  # type: ignore[call-arg]
            call_id="call_1", tool="T", input={"f": value, "g": [1, value]}, host="protocol"),
        CATALOG["ToolCallCompleted"](  # type: ignore[call-arg]
            call_id="call_1", tool="T", status="completed", success=True,
            result={"f": {"x": value}}, model_content="x"),
    ):
        dumped = event.model_dump(mode="json", by_alias=True, exclude={"type"})
        assert encode_event(event) == REFERENCE(dumped)


def test_every_float_is_spelled_as_before() -> None:  # EL-4, issue 24
    """orjson spells floats below 1e-4 otherwise (``1e-7``, ``0.00001``): a sweep over every
    exponent and the range limits' neighbours, each alone and inside an object."""
    values = [m * 10.0**e for e in range(-325, 309) for m in (1.0, 1.5, 9.999999999999999)]
    for edge in (1e-4, 2.0**63, 1e16, 5e-324):
        values += [math.nextafter(edge, 0), edge, math.nextafter(edge, math.inf)]
    for value in [v for x in values if math.isfinite(x) for v in (x, -x)]:
        assert canonical_json(value) == REFERENCE(value), value
        assert canonical_json({"f": [value]}) == REFERENCE({"f": [value]}), value


@pytest.mark.parametrize("levels", [100, 254, 255, 256, 900])
def test_deep_nesting_is_written_as_before(levels: int) -> None:  # EL-4, issue 24
    """orjson stops at 255 levels; the standard encoder writes deeper ones, as before."""
    value: Any = {"k": 1.5}
    for _ in range(levels):
        value = [value]
    assert canonical_json(value) == REFERENCE(value)


def test_deeper_than_the_recursion_limit_fails_as_before() -> None:  # EL-4, issue 24
    value: Any = []
    for _ in range(100_000):
        value = [value]
    assert outcome(lambda: canonical_json(value))[0] == outcome(lambda: REFERENCE(value))[0] == (
        "RecursionError")


def test_megabyte_strings_are_written_as_before() -> None:  # EL-4, issue 24
    hostile = "\n".join(HOSTILE_LINES) + "\x00\x1f\x7f\u2028é😀\"\\"
    big = hostile * (1_000_000 // len(hostile))
    for value in ({"plan": big, "n": 0.5}, [big, {"z": big}], {"s": big + "\ud800"}):
        assert canonical_json(value) == REFERENCE(value)


GOLDEN = [  # written by the encoder before orjson (the encoding of 2ec7e04), with their hashes
    ('{"allowedPrompts":[{"n":1180591620717411303424,"prompt":"run tests","tool":"Bash"}],'
     '"callId":"call_1","plan":"# Plan\\n\u2028é\x7f\\u0000 😀"}',
     "7a790c4d70b4ef862ea8e282112bdacd3ab9c1154c74080d419ed16884c380b3"),
    ('{"callId":"call_1","followUpUserInput":null,"modelContent":"x","permission":null,'
     '"result":{"durationMs":12.5,"floats":[0.1,-0.0,1e+16,1e-07,5e-324,7.41691286169067e-309,'
     '1e-05,9.223372036854776e+18,1.5e+300,123.456],"z":{"a":[true,-18446744073709551616],'
     '"b":null}},"status":"completed","success":true,"tool":"WebFetch","turnControl":null}',
     "99754c07ea3816c821ee236155510562a37709a855cdb565c427895e2bac8453"),
    ('{"callId":"call_2","host":"protocol","input":{"m":"\u2028","n":0.5},"tool":"T"}',
     "f22a33b38404d690a507afc6454aefc63c18035ec1e394ae344568ba47fc8242"),
    ('{"callId":"call_3","host":"protocol","input":{"ok":[0.5,1e+16,9.223372036854776e+18,'
     '18446744073709551615],"small":[1e-07,1e-05,5e-324,9.999999999999999e-05]},"tool":"T"}',
     "ddcdf1aabe6dc0c56a00bfc4aef79de818b3803955a327bba51f37da23dc62d3"),
]


def test_stored_bytes_and_hashes_are_those_written_before() -> None:  # EL-4, issue 24
    """The general path (a plan's prompts, float-bearing results) writes the bytes and chain
    hashes the encoder before orjson wrote, and canonical JSON of their decoded text is itself."""
    floats = [0.1, -0.0, 1e16, 1e-07, 5e-324, 2.2250738585072014e-308 / 3, 1e-05, 2.0**63,
              1.5e300, 123.456]
    events = [
        CATALOG["PlanSubmitted"](  # type: ignore[call-arg]
            call_id="call_1", plan="# Plan\n\u2028é\x7f\x00 😀",
            allowed_prompts=({"tool": "Bash", "prompt": "run tests", "n": 2**70},)),
        CATALOG["ToolCallCompleted"](  # type: ignore[call-arg]
            call_id="call_1", tool="WebFetch", status="completed", success=True,
            model_content="x", result={"floats": floats, "durationMs": 12.5,
                                       "z": {"b": None, "a": [True, -(2**64)]}}),
        CATALOG["ToolCallRequested"](  # type: ignore[call-arg]
            call_id="call_2", tool="T", host="protocol", input={"n": 0.5, "m": "\u2028"}),
        CATALOG["ToolCallRequested"](  # type: ignore[call-arg]
            call_id="call_3", tool="T", host="protocol",
            input={"small": [1e-07, 1e-05, 5e-324, 9.999999999999999e-05],
                   "ok": [0.5, 1e16, 2.0**63, 2**64 - 1]}),
    ]
    prev = GENESIS_HASH
    for seq, (event, (text, digest)) in enumerate(zip(events, GOLDEN, strict=True), 1):
        assert encode_event(event) == text == canonical_json(json.loads(text))
        prev = envelope_hash(
            prev_hash=prev, session_id="sess_golden", seq=seq, event_type=event.type,
            schema_version=1, data_json=text, recorded_at="2026-01-01T00:00:00.000000Z",
            actor="user", causation_id=None, correlation_id=None)
        assert prev == digest


# The edges' decoder: orjson's value is taken only when it is plain (no fault, no float that
# may have been an integer past 64 bits); otherwise the text is read again as before.

FLOAT_TEXT = st.from_regex(r"-?(0|[1-9][0-9]{0,24})(\.[0-9]{1,30})?([eE][+-]?[0-9]{1,3})?",
                           fullmatch=True)
INT_TEXT = st.integers(-(2**70), 2**70).map(str) | st.integers(10**17, 10**21).map(str)
JSONISH = st.text(alphabet='[]{}",:0123456789.eE+- \t\n\r\x0c\\u/truefalsnNIiy\x00\x7fé',
                  max_size=30)
DUPLICATES = st.lists(st.tuples(st.sampled_from(['"a"', '"b"', '""', '"\\u0061"']),
                                FLOAT_TEXT | INT_TEXT), max_size=5).map(
    lambda pairs: "{" + ",".join(f"{k}:{v}" for k, v in pairs) + "}")
ANY_INPUT = st.one_of(RAW_JSON, FLOAT_TEXT, INT_TEXT, JSONISH, DUPLICATES,
                      FLOAT_TEXT.map(lambda t: f"[{t},{{\"k\":{t}}}]"))


@given(text=ANY_INPUT, as_bytes=st.sampled_from(["str", "utf-8", "utf-8-sig", "surrogatepass"]),
       max_depth=st.sampled_from([INPUT_MAX_DEPTH, EVENT_MAX_DEPTH]))
def test_loads_json_reads_every_text_as_before(
    text: str, as_bytes: str, max_depth: int
) -> None:  # EG-1, issue 24
    """NaN and Infinity tokens, huge and 64-bit-edge integers, long mantissas, lone
    surrogates, duplicate keys, deep nesting, byte order marks, invalid UTF-8: the same value,
    key order included, or the same refusal with the same message."""
    raw: bytes | str = text if as_bytes == "str" else text.encode(
        as_bytes.replace("surrogatepass", "utf-8"), "surrogatepass")
    assert outcome(lambda: loads_json(raw, max_depth=max_depth)) == outcome(
        lambda: reference_loads(raw, max_depth=max_depth))


@given(raw=st.binary(max_size=24) | st.text(st.characters(codec=None, exclude_categories=()),
                                            max_size=12))
def test_loads_json_reads_any_bytes_as_before(raw: bytes | str) -> None:  # EG-1, issue 24
    assert outcome(lambda: loads_json(raw)) == outcome(lambda: reference_loads(raw))


@pytest.mark.parametrize("levels", [64, 65, 100, 101, 1023, 1024, 1025, 100_000])
def test_deep_input_gets_todays_refusal(levels: int) -> None:  # EG-1, issue 24
    """orjson stops at 1,024 levels; every depth past the limit is refused as before, with
    its path."""
    for text in (nested(levels), '{"a":' * levels + "1" + "}" * levels):
        for depth in (INPUT_MAX_DEPTH, EVENT_MAX_DEPTH):
            assert outcome(lambda t=text, d=depth: loads_json(t, max_depth=d)) == outcome(
                lambda t=text, d=depth: reference_loads(t, max_depth=d))
