"""Canonical JSON of a payload straight from pydantic's Rust serializer, where that is exact.

:func:`encode_event` writes canonical JSON (sorted keys, no spaces, UTF-8) of an event's fields.
The general path builds a Python dict and runs the standard ``json`` encoder over it — about
two thirds of an append's CPU outside SQLite. pydantic-core can write the JSON itself several
times faster, but it writes fields in *declaration* order and has no ``sort_keys``. So a model
qualifies for the fast path only when its JSON cannot differ from the general path's:

* its fields are declared in sorted order of their wire names (recursively for nested models);
* every field is a ``str``, ``bool``, ``int``, ``None``, a ``Literal`` of those, a qualifying
  model, or a tuple/list of these — never ``dict``, ``Any`` or ``float``, whose key order or
  number formatting the Rust writer does differently.

Strings are escaped identically by both writers (only ``"``, ``\\`` and control characters,
lowercase ``\\u00XX``); ``tests/test_fast_json.py`` checks byte equality with hypothesis over
every catalog type, and the conformance suite's hash checks would catch any drift.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Callable
from typing import Any, Literal, get_args, get_origin

from pydantic import BaseModel

__all__ = ["fast_encoder", "qualifies"]

_SCALARS: frozenset[Any] = frozenset({str, bool, int, type(None)})
_SEQUENCES: frozenset[Any] = frozenset({tuple, list})


def _type_qualifies(annotation: Any, seen: set[type[BaseModel]]) -> bool:
    if annotation in _SCALARS:
        return True
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return qualifies(annotation, _seen=seen)
    origin = get_origin(annotation)
    args = get_args(annotation)
    if origin is Literal:
        return all(type(a) in _SCALARS for a in args)
    if origin in (typing.Union, types.UnionType):
        return all(_type_qualifies(a, seen) for a in args)
    if origin in _SEQUENCES:
        items = [a for a in args if a is not Ellipsis]
        return bool(items) and all(_type_qualifies(a, seen) for a in items)
    if origin is typing.Annotated:
        return _type_qualifies(args[0], seen)
    return False


def qualifies(
    model: type[BaseModel], *, exclude: frozenset[str] = frozenset(),
    _seen: set[type[BaseModel]] | None = None,
) -> bool:
    """Whether pydantic's own JSON of ``model`` (by alias) is already canonical JSON."""
    seen = set() if _seen is None else _seen
    if model in seen:
        return True
    seen.add(model)
    fields = [(n, f) for n, f in model.model_fields.items() if n not in exclude]
    names = [f.alias or n for n, f in fields]
    if names != sorted(names):
        return False
    decorators = model.__pydantic_decorators__
    if model.model_computed_fields or decorators.field_serializers or decorators.model_serializers:
        return False
    if any(f.exclude for _n, f in fields):
        return False
    return all(_type_qualifies(f.annotation, seen) for _n, f in fields)


def fast_encoder(model: type[BaseModel], *, exclude: frozenset[str]) -> Callable[[Any], str] | None:
    """A function writing an instance's canonical JSON, or ``None`` if ``model`` does not
    qualify (the caller then takes the general path)."""
    if not qualifies(model, exclude=exclude):
        return None
    to_json = model.__pydantic_serializer__.to_json
    excluded = set(exclude)

    def encode(instance: Any) -> str:
        return to_json(instance, by_alias=True, exclude=excluded).decode("utf-8")

    return encode
