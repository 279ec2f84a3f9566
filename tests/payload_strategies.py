"""Hypothesis strategies for catalog payloads, shared by the conformance and encoding tests.

Every field of a payload model is drawn (not only the required ones), recursing into nested
models, unions, literals, sequences and free-form JSON.
"""

from __future__ import annotations

import types
from typing import Any, Literal, Union, get_args, get_origin

from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

__all__ = ["JSON_VALUES", "annotation_strategy", "payload_strategy"]


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
