"""EG-1's shape check and the writer behind it (eventlog/encoding.py, encode_event).

The check refuses, naming the path, what would not read back as sent: nesting deeper than the
limit, lone surrogates in keys or strings, ``NaN``/``±Infinity`` tokens and overflowing floats,
integers of more than ``MAX_INT_DIGITS`` digits; any depth is refused without recursion. The
writer applies the same check at the stored limit, so what any store accepts its readers (the
typed read, the chain check, the wire form) read back equal, and what it refuses appends
nothing. The edges over HTTP, MCP and the CLI are in ``test_hostile_input.py``.
"""

from __future__ import annotations

import json
import unicodedata
from typing import Any, get_args

import pytest
from hypothesis import given
from payload_strategies import JSON_VALUES, nested
from pydantic import BaseModel

from eventlog import (
    EVENT_MAX_DEPTH,
    INPUT_MAX_DEPTH,
    MAX_INT_DIGITS,
    EventStore,
    JsonShapeError,
    MessageRecorded,
    NewEvent,
    SessionCreated,
    ToolCallRequested,
    check_json,
    loads_json,
)
from eventlog.catalog import CATALOG
from eventlog.envelope import _free_form


def refused(text: str | bytes) -> JsonShapeError:
    with pytest.raises(JsonShapeError) as caught:
        loads_json(text)
    return caught.value


# -- the gate -------------------------------------------------------------------------------


def test_nesting_up_to_the_limit_passes_and_one_more_is_refused_at_its_path() -> None:  # EG-1
    assert INPUT_MAX_DEPTH == 64
    assert loads_json(nested(INPUT_MAX_DEPTH)) is not None
    error = refused(nested(INPUT_MAX_DEPTH + 1))
    assert error.path == (0,) * INPUT_MAX_DEPTH
    assert "deeper than 64 levels" in error.reason
    objects = '{"a":' * INPUT_MAX_DEPTH + "{}" + "}" * INPUT_MAX_DEPTH
    assert refused(objects).path == ("a",) * INPUT_MAX_DEPTH
    check_json(json.loads(objects[5:-1]))  # the same value one level up passes


@pytest.mark.parametrize("levels", [1000, 100_000])
def test_any_depth_is_refused_without_recursion(levels: int) -> None:  # EG-1
    assert "deeper than 64" in refused(nested(levels)).reason
    assert "deeper than 64" in refused("[" * levels).reason  # never closed either
    value: list[Any] = []
    for _ in range(levels):  # the same depth as a Python value (MCP, in process)
        value = [value]
    with pytest.raises(JsonShapeError):
        check_json(value)


@pytest.mark.parametrize(
    ("text", "path"),
    [('{"a": "x\\ud800"}', ("a",)), ('["\\udfff"]', (0,)), ('{"b": ["ok", "\\udc00y"]}', ("b", 1)),
     ('{"\\ud800": 1}', ("\\ud800",)), ('{"k": {"\\udbff\\u0041": 1}}', ("k", "\\udbffA"))],
    ids=["value", "low", "nested", "key", "nested-key"],
)
def test_a_lone_surrogate_in_a_key_or_string_is_refused(
    text: str, path: tuple[Any, ...]
) -> None:  # EG-1
    error = refused(text)
    assert error.path == path and "surrogate" in error.reason
    str(error).encode("utf-8")  # the message itself can be written into an error body


@pytest.mark.parametrize("token", ["NaN", "Infinity", "-Infinity", "1e999", "-1E400"])
def test_non_finite_numbers_are_refused_not_stored_as_null(token: str) -> None:  # EG-1
    error = refused(f'{{"x": [1, {token}]}}')
    assert error.path == ("x", 1)
    with pytest.raises(JsonShapeError):
        check_json({"x": json.loads(token)})


def test_integers_up_to_the_digit_limit_pass_and_longer_are_refused() -> None:  # EG-1
    widest = "9" * MAX_INT_DIGITS
    assert loads_json(f"[{widest}, -{widest}]") == [int(widest), -int(widest)]
    for digits in (MAX_INT_DIGITS + 1, 4301, 100_000):  # 4301: Python's own limit, a ValueError
        error = refused(f'{{"n": -{"1" * digits}}}')
        assert error.path == ("n",) and f"{MAX_INT_DIGITS} digits" in error.reason
    with pytest.raises(JsonShapeError):
        check_json({"n": 10**MAX_INT_DIGITS})


def test_valid_unicode_passes_unchanged() -> None:  # EG-1
    texts = ["😀", "é", "e\u0301", "\u202e", "\u200b", "\x00", "\uffff", "\U0010ffff",
             "\uff2f\uff54\uff48\uff45\uff52", unicodedata.normalize("NFD", "\u00c5str\u00f6m")]
    assert loads_json('"\\ud83d\\ude00"') == "😀"  # a surrogate pair is one character
    for text in texts:
        raw = json.dumps({text: [text]}, ensure_ascii=False)
        assert loads_json(raw) == json.loads(raw)
        assert loads_json(raw.encode("utf-8")) == json.loads(raw)


def test_bytes_must_be_utf8_and_syntax_errors_stay_syntax_errors() -> None:  # EG-1
    for body in (b"\xff\xfe{\x00}\x00", b'{"a": "\xc3"}', '{"a": 1}'.encode("utf-16")):
        assert "not UTF-8" in refused(body).reason
    assert loads_json(b"\xef\xbb\xbf{}") == {}  # a byte order mark is skipped
    with pytest.raises(json.JSONDecodeError):
        loads_json("{not json")


@given(value=JSON_VALUES)
def test_plain_json_passes_and_decodes_equal(value: Any) -> None:  # EG-1
    check_json(value)
    assert loads_json(json.dumps(value)) == value


# -- the writer: what it accepts reads back, what it refuses appends nothing ----------------


def call(input: dict[str, Any]) -> NewEvent:
    return NewEvent(ToolCallRequested(call_id="call_1", tool="ExitPlanMode", input=input,
                                      host="protocol"), actor="model")


def deepest(levels: int) -> dict[str, Any]:
    """A tool input whose event ``data`` nests ``levels`` deep ({"input": {"x": [[…]]}})."""
    value: Any = []
    for _ in range(levels - 3):
        value = [value]
    return {"x": value}


def test_the_writer_takes_events_at_the_stored_limit_and_every_reader_reads_them(
    store: EventStore,
) -> None:  # EG-1
    store.append("sess_a", [NewEvent(SessionCreated(workspace="w"), actor="host"),
                            call(deepest(EVENT_MAX_DEPTH))])
    (_created, recorded) = store.read_session("sess_a")
    assert recorded.data == call(deepest(EVENT_MAX_DEPTH)).event
    wire = recorded.to_wire()
    assert json.loads(json.dumps(wire))["data"]["input"] == deepest(EVENT_MAX_DEPTH)
    assert [r.ok for r in store.verify("sess_a")] == [True]
    assert INPUT_MAX_DEPTH + 4 < EVENT_MAX_DEPTH < 200  # an edge input fits; jiter reads 200


@pytest.mark.parametrize(
    ("event", "where"),
    [(call(deepest(EVENT_MAX_DEPTH + 1)).event, "input"),
     (call({"x": float("nan")}).event, "input"),
     (call({"x": [float("-inf")]}).event, "input"),
     (call({"x": 10**MAX_INT_DIGITS}).event, "input"),
     (call({"\ud800": 1}).event, "input"),
     (MessageRecorded(role="user", content="a\udfffb"), "")],
    ids=["too-deep", "nan", "infinity", "huge-int", "surrogate-key", "surrogate-text"],
)
def test_the_writer_refuses_what_its_readers_could_not_read_and_appends_nothing(
    store: EventStore, event: Any, where: str
) -> None:  # EG-1
    store.append("sess_a", [NewEvent(SessionCreated(workspace="w"), actor="host")])
    with pytest.raises(JsonShapeError) as caught:
        store.append("sess_a", [NewEvent(event, actor="model")])
    assert caught.value.path[:1] == ((where,) if where else ())
    assert store.version("sess_a") == 1 and store.head_position() == 1


def test_free_form_json_sits_only_in_the_fields_the_writer_checks() -> None:  # EG-1
    def nested_models(annotation: Any) -> list[type[BaseModel]]:
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            return [annotation]
        return [m for arg in get_args(annotation) for m in nested_models(arg)]

    free = {name for name, cls in CATALOG.items() if _free_form(cls)}
    assert free == {"ToolCallRequested", "InteractionRequested", "InteractionResolved",
                    "ToolCallCompleted", "PlanSubmitted"}
    for cls in CATALOG.values():  # a nested model never holds free-form JSON of its own
        for field in cls.model_fields.values():
            assert not any(_free_form(m) for m in nested_models(field.annotation)), cls
