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

A model whose only disqualifying fields are free-form JSON (``dict[str, Any]``, optionally
``None``: a tool call's input, its result, an interaction's payload) takes a second fast path,
:func:`tree_encoder`: its fields go into a dict in sorted order of their wire names, each
free-form value as a copy with its keys sorted (:func:`sorted_tree`), and pydantic writes that
dict. The copy is exact only for plain JSON — ``str`` keys; ``str``, ``int``, ``bool`` and
``None`` leaves; lists and dicts — so anything else (a float, whose digits the two writers may
spell differently; a tuple; a subclass) sends that one payload down the general path.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Callable
from typing import Any, Literal, get_args, get_origin

from pydantic import BaseModel
from pydantic_core import to_json

__all__ = ["NotPlainJson", "fast_encoder", "qualifies", "sorted_tree", "tree_encoder"]

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


class NotPlainJson(ValueError):
    """A free-form value holds something :func:`sorted_tree` cannot copy exactly."""


_LEAVES: frozenset[Any] = frozenset({str, int, bool, type(None)})


def sorted_tree(value: Any) -> Any:
    """A copy of a plain JSON value with every object's keys in sorted order: what
    ``json.dumps(sort_keys=True)`` would write, in the order pydantic writes a dict.
    Raises :class:`NotPlainJson` for anything but ``str`` keys, ``str``/``int``/``bool``/
    ``None`` leaves, lists and dicts (exact types)."""
    kind = type(value)
    leaves = _LEAVES
    if kind is dict:
        try:
            keys = sorted(value)
        except TypeError:
            raise NotPlainJson("keys of mixed types") from None
        copy = {}
        for key in keys:
            if type(key) is not str:
                raise NotPlainJson("a key that is not a str")
            item = value[key]
            copy[key] = item if type(item) in leaves else sorted_tree(item)
        return copy
    if kind is list:
        return [item if type(item) in leaves else sorted_tree(item) for item in value]
    if kind in leaves:
        return value
    raise NotPlainJson(kind.__name__)


def _is_tree(annotation: Any) -> bool:
    """``dict[str, Any]``, alone or with ``None``."""
    origin, args = get_origin(annotation), get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        rest = [a for a in args if a is not type(None)]
        return len(rest) == 1 and _is_tree(rest[0])
    return origin is dict and args == (str, Any)


def tree_encoder(
    model: type[BaseModel], *, exclude: frozenset[str], fallback: Callable[[Any], str]
) -> Callable[[Any], str] | None:
    """A function writing an instance's canonical JSON when ``model``'s fields all qualify
    except free-form JSON ones; ``None`` when it does not have that shape. An instance whose
    free-form values are not plain JSON is written by ``fallback``."""
    fields = [(n, f) for n, f in model.model_fields.items() if n not in exclude]
    trees = {n for n, f in fields if _is_tree(f.annotation)}
    if not trees:
        return None
    decorators = model.__pydantic_decorators__
    if model.model_computed_fields or decorators.field_serializers or decorators.model_serializers:
        return None
    if any(f.exclude for _n, f in fields):
        return None
    seen: set[type[BaseModel]] = {model}
    if not all(_type_qualifies(f.annotation, seen) for n, f in fields if n not in trees):
        return None
    plan = sorted(((f.alias or n), n, n in trees) for n, f in fields)

    def encode(instance: Any) -> str:
        try:
            data = {}
            for wire, name, tree in plan:
                value = getattr(instance, name)
                data[wire] = sorted_tree(value) if tree else value
        except NotPlainJson:
            return fallback(instance)
        return to_json(data, by_alias=True).decode("utf-8")

    return encode
