"""Hypothesis strategies for catalog payloads, shared by the conformance and encoding tests.

Every field of a payload model is drawn (not only the required ones), recursing into nested
models, unions, literals, sequences and free-form JSON.
"""

from __future__ import annotations

import json
import types
from typing import Any, Literal, Union, get_args, get_origin

from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

__all__ = [
    "JSON_VALUES", "RAW_JSON", "RAW_TOKENS", "annotation_strategy", "nested", "payload_strategy",
]


def annotation_strategy(annotation: Any) -> st.SearchStrategy[Any]:
    """Values for one field annotation, recursing into nested payload models and unions."""
    origin = get_origin(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return payload_strategy(annotation)
    if origin in (Union, types.UnionType):
        return st.one_of(*(annotation_strategy(arg) for arg in get_args(annotation)))
    if origin is Literal:
        return st.sampled_from(get_args(annotation))
    if origin in (list, tuple, frozenset, set) and get_args(annotation):
        return st.lists(annotation_strategy(get_args(annotation)[0]), max_size=3).map(origin)
    if origin is dict:
        key, value = get_args(annotation)
        return st.dictionaries(annotation_strategy(key), annotation_strategy(value), max_size=3)
    if annotation is Any:  # free-form JSON payloads (tool inputs, results)
        return JSON_VALUES
    return st.from_type(annotation)


JSON_VALUES: st.SearchStrategy[Any] = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner,
                                                                max_size=3),
    max_leaves=8,
)


def _build(cls: type[BaseModel], fields: dict[str, Any]) -> BaseModel | None:
    try:
        return cls(**fields)
    except ValidationError:  # a constraint from_type cannot see, such as min_length
        return None


def payload_strategy(cls: type[BaseModel]) -> st.SearchStrategy[Any]:
    """Instances of a payload model with every field drawn (not only the required ones)."""
    fields = {
        name: annotation_strategy(info.annotation)
        for name, info in cls.model_fields.items() if name != "type"
    }
    return st.fixed_dictionaries(fields).map(lambda f: _build(cls, f)).filter(
        lambda m: m is not None
    )


def nested(levels: int) -> str:
    """JSON text of ``levels`` arrays, each inside the last: ``[[…]]``."""
    return "[" * levels + "]" * levels


# -- raw JSON text from outside (EG-1) ------------------------------------------------------

RAW_TOKENS = st.sampled_from([
    "NaN", "Infinity", "-Infinity", "1e999", "-1E400", "-0", "1E2", "0.1", "-0.0", "5e-324",
    '"\\ud800"', '"a\\udc00"', '"\\udbff\\u0041"', '"\\ud83d\\ude00"', '"\\u0000"', '"\\u202e"',
    '"e\\u0301"', '"\\uffff"', '"\\\\"', "9" * 640, "-" + "9" * 640, "9" * 641, "1" * 4301,
])
"""Number and string tokens JSON text can hold that a Python value cannot show: ``NaN`` and
``Infinity`` tokens, floats that overflow, lone surrogates as escapes, integers at and past
every digit limit; and some that are fine (a surrogate pair, ``-0``, ``5e-324``)."""


def _text_of(value: Any, ascii_only: bool) -> str:
    return json.dumps(value, ensure_ascii=ascii_only)


RAW_LEAVES: st.SearchStrategy[str] = st.one_of(
    RAW_TOKENS,
    st.tuples(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False,
                                                                    allow_infinity=False)
              | st.text(max_size=12), st.booleans()).map(lambda v: _text_of(*v)),
)
RAW_KEYS = st.one_of(
    st.text(max_size=6).map(json.dumps), st.sampled_from(['"\\ud800"', '"k\\udfff"', '"😀"']),
)


def _raw_object(pairs: list[tuple[str, str]]) -> str:
    return "{" + ",".join(f"{k}:{v}" for k, v in pairs) + "}"


RAW_TREES: st.SearchStrategy[str] = st.recursive(
    RAW_LEAVES,
    lambda inner: st.lists(inner, max_size=3).map(lambda items: "[" + ",".join(items) + "]")
    | st.lists(st.tuples(RAW_KEYS, inner), max_size=3).map(_raw_object),
    max_leaves=10,
)
RAW_JSON: st.SearchStrategy[str] = st.tuples(
    st.one_of(st.just(0), st.integers(0, 66), st.integers(0, 300)), RAW_TREES,
).map(lambda t: "[" * t[0] + t[1] + "]" * t[0])
"""JSON text of any shape from outside: a tree of hostile and plain tokens, wrapped in up to
300 arrays (most depths near the edges' limit of 64)."""
