"""How an event becomes text: the shape rule, the canonical form it is hashed in, fast encoding.

:func:`check_json` decides what a JSON value may hold, with :data:`INPUT_MAX_DEPTH` for input
from outside and :data:`EVENT_MAX_DEPTH` for a stored payload, and :func:`loads_json` is the
edges' strict decoder (EG-1). :func:`canonical_json` and :func:`envelope_hash` give the
per-session hash chain (EL-4); :func:`fast_encoder` and :func:`tree_encoder` write the same
canonical text straight from pydantic's Rust serializer where that is exact. ``orjson`` writes
and reads plain JSON where its bytes and values are exactly the standard library's (#24).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import sys
import types
import typing
from collections.abc import Callable
from typing import Any, Literal, get_args, get_origin

import orjson
from pydantic import BaseModel
from pydantic_core import to_json

from .errors import EventLogError

__all__ = [
    "EVENT_MAX_DEPTH",
    "GENESIS_HASH",
    "INPUT_MAX_DEPTH",
    "MAX_INT_DIGITS",
    "JsonPath",
    "JsonShapeError",
    "NotPlainJson",
    "canonical_json",
    "check_json",
    "checked_canonical_json",
    "envelope_hash",
    "fast_encoder",
    "loads_json",
    "plain_json_bytes",
    "qualifies",
    "session_hasher",
    "sorted_tree",
    "tree_encoder",
]


# Canonical JSON and the per-session hash chain (EL-4; docs/architecture.md).
#
# ``hash = sha256(prev_hash_hex + canonical(envelope without hash and global_position))``. The
# first event of a session chains from :data:`GENESIS_HASH`. The envelope's fields are hashed
# under their column names (EL-9) so anyone can recheck a chain from the table alone.

GENESIS_HASH = "0" * 64

_dumps = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
).encode


_text: Callable[[str], str] = json.encoder.encode_basestring
"""JSON string literal exactly as ``canonical_json`` writes it (``ensure_ascii=False``)."""


def _optional(value: str | None) -> str:
    return "null" if value is None else _text(value)


def canonical_json(value: Any) -> str:
    """Sorted keys, no spaces, UTF-8 text: equal values always give equal strings.

    Written by ``orjson`` when the value is plain JSON it writes byte for byte as the
    standard library's encoder does (see :data:`_PLAIN`), by that encoder otherwise (and it
    raises what it raises: ``ValueError`` for ``NaN``, ``TypeError`` for other types)."""
    if _sound(value, sys.maxsize) == _PLAIN:
        return _plain_canonical(value)
    return _dumps(value)


def checked_canonical_json(value: Any, *, max_depth: int) -> str:
    """:func:`check_json` then :func:`canonical_json` of ``value``, with one walk of it when
    it is sound (the general path of payload encoding)."""
    kind = _sound(value, max_depth)
    if kind == _PLAIN:
        return _plain_canonical(value)
    if not kind:
        check_json(value, max_depth=max_depth)  # raises at the fault, or passes a type the
    return _dumps(value)                        # fast walk does not know (the encoder decides)


_orjson_dumps = orjson.dumps
_orjson_loads = orjson.loads
_SORT_KEYS = orjson.OPT_SORT_KEYS


def _plain_canonical(value: Any) -> str:
    """Canonical JSON of a value :func:`_sound` found :data:`_PLAIN`: ``orjson`` writes it
    exactly as ``_dumps`` would, unless it refuses it (an integer past 64 bits, nesting past
    its 255 levels), and then ``_dumps`` does."""
    try:
        return _orjson_dumps(value, option=_SORT_KEYS).decode("utf-8")
    except TypeError:  # orjson.JSONEncodeError
        return _dumps(value)


_ORJSON_MAX_DEPTH = 254
"""Nesting ``orjson`` writes (it refuses past 255 levels)."""


def plain_json_bytes(value: Any) -> bytes | None:
    """``value`` as the standard library writes it with ``separators=(",", ":")`` and
    ``ensure_ascii=False`` (keys in their order), UTF-8 encoded — written by ``orjson`` — when
    it is plain (:data:`_PLAIN`: those bytes are then the same); ``None`` for anything else,
    which the caller writes its own way (an HTTP answer, issue 24)."""
    if _sound(value, _ORJSON_MAX_DEPTH) != _PLAIN:
        return None
    try:
        return _orjson_dumps(value)
    except TypeError:  # orjson.JSONEncodeError: an integer past 64 bits
        return None


_ENVELOPE = (
    '%s{"actor":%s,"causation_id":%s,"correlation_id":%s,"data":%s,"prev_hash":%s,'
    '"recorded_at":%s,"schema_version":%d,"seq":%d,"session_id":%s,"type":%s}'
)
"""``prev_hash`` followed by the envelope's canonical JSON, keys in sorted order."""

_sha256 = hashlib.sha256


def envelope_hash(
    prev_hash: str,
    session_id: str,
    seq: int,
    event_type: str,
    schema_version: int,
    data_json: str,
    recorded_at: str,
    actor: str,
    causation_id: str | None,
    correlation_id: str | None,
) -> str:
    """Hash of one envelope; ``data_json`` must already be canonical JSON of the payload.

    The string is assembled in sorted-key order, which equals ``canonical_json`` of the whole
    envelope dict (a property test checks this) without re-serialising the payload. The
    append loop calls it positionally, everything else by keyword.
    """
    body = _ENVELOPE % (
        prev_hash, _text(actor), _optional(causation_id), _optional(correlation_id), data_json,
        _text(prev_hash), _text(recorded_at), schema_version, seq, _text(session_id),
        _text(event_type),
    )
    return _sha256(body.encode("utf-8")).hexdigest()


_ESCAPED_TYPES: dict[str, str] = {}


def session_hasher(session_id: str, recorded_at: str) -> Callable[
    [str, int, str, int, str, str, str | None, str | None], str
]:
    """:func:`envelope_hash` for many events of one session recorded at one instant.

    ``hasher(prev_hash, seq, event_type, schema_version, data_json, actor, causation_id,
    correlation_id)`` gives the same digest as :func:`envelope_hash`, with the session id and
    the instant escaped once per batch instead of once per event (the append loop's hot spot).
    """
    template = (
        '%s{"actor":%s,"causation_id":%s,"correlation_id":%s,"data":%s,"prev_hash":"%s",'
        '"recorded_at":' + _text(recorded_at).replace("%", "%%")
        + ',"schema_version":%d,"seq":%d,"session_id":'
        + _text(session_id).replace("%", "%%") + ',"type":%s}'
    )
    types = _ESCAPED_TYPES
    actors: dict[str, str] = {}

    def hasher(
        prev_hash: str, seq: int, event_type: str, schema_version: int, data_json: str,
        actor: str, causation_id: str | None, correlation_id: str | None,
    ) -> str:
        type_text = types.get(event_type)
        if type_text is None:
            type_text = types[event_type] = _text(event_type)
        actor_text = actors.get(actor)
        if actor_text is None:
            actor_text = actors[actor] = _text(actor)
        body = template % (
            prev_hash, actor_text,
            "null" if causation_id is None else _text(causation_id),
            "null" if correlation_id is None else _text(correlation_id),
            data_json, prev_hash, schema_version, seq, type_text,
        )
        return _sha256(body.encode("utf-8")).hexdigest()

    return hasher


# The shape of JSON that is accepted and stored, and the one strict decoder (EG-1).
#
# Everything read back from the log goes through pydantic's JSON reader (jiter) or Python's
# ``json``; both refuse some values the writers would write (jiter: more than 200 levels of
# nesting, integers of more than 4,300 digits, lone surrogates; Python: integers over
# ``sys.get_int_max_str_digits()`` digits, nesting deeper than its recursion limit). So one rule,
# :func:`check_json`, decides what a JSON value may hold, and the edges and the writer both apply
# it, with a nesting limit each:
#
# * :data:`INPUT_MAX_DEPTH` (64) for every body and tool input from outside (HTTP, MCP, CLI);
# * :data:`EVENT_MAX_DEPTH` (100) for a stored event's ``data``: an input at the edges' limit
#   fits inside any event that carries it, and a tested margin below every reader's limit.
#
# A value is refused (:class:`JsonShapeError`, naming the path) when it nests deeper than the
# limit, holds a lone surrogate in a key or a string (not UTF-8, so it cannot be stored), a
# float that is not finite (``NaN``, ``±Infinity``, or ``1e999`` which overflows), or an integer of
# more than :data:`MAX_INT_DIGITS` digits (the least any interpreter can be set to parse, so no
# reader's setting can refuse it later). Everything else round-trips exactly: read back, it is
# equal to what was accepted.
#
# :func:`loads_json` is the edges' decoder: UTF-8 only, ``NaN``/``Infinity`` tokens and huge
# integers caught with their path rather than turned into floats or errors, nesting too deep for
# the parser a refusal rather than a ``RecursionError``. A plain syntax error stays
# :class:`json.JSONDecodeError`.

INPUT_MAX_DEPTH = 64
"""Deepest nesting of a body or tool input from outside: ``{}`` and ``[]`` are one level."""
EVENT_MAX_DEPTH = 100
"""Deepest nesting of a stored event's ``data`` object (jiter reads up to 200 levels)."""
MAX_INT_DIGITS: int = sys.int_info.str_digits_check_threshold
"""Most digits in an integer (640): the lowest ``sys.set_int_max_str_digits`` accepts, so every
reader in every configuration parses it."""

_INT_BOUND = 10**MAX_INT_DIGITS

JsonPath = tuple[str | int, ...]
"""Where in a value: object keys and array indexes from the root."""


class JsonShapeError(EventLogError, ValueError):
    """A JSON value that would not read back as written; ``path`` says where, ``reason`` why."""

    def __init__(self, path: JsonPath, reason: str) -> None:
        where = "".join(f"[{p}]" if type(p) is int else f".{p}" for p in path) or "the value"
        super().__init__(f"{where.lstrip('.')}: {reason}")
        self.path = path
        self.reason = reason


class _Token:
    """A number token :func:`loads_json` does not turn into a value; :func:`check_json` refuses
    it with its path."""

    __slots__ = ("reason",)

    def __init__(self, reason: str) -> None:
        self.reason = reason


def _constant(name: str) -> _Token:
    return _Token(f"{name} is not a JSON number")


def _integer(text: str) -> int | _Token:
    if len(text) - text.startswith("-") > MAX_INT_DIGITS:
        return _Token(f"an integer of more than {MAX_INT_DIGITS} digits")
    return int(text)


_decode = json.JSONDecoder(parse_constant=_constant, parse_int=_integer).decode


def _unpaired(text: str) -> bool:
    """Whether ``text`` holds a lone surrogate (it cannot be written as UTF-8)."""
    if text.isascii():
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _printable(key: Any) -> str | int:
    """A path part that can be written into an error body: a lone surrogate in a key is
    spelled ``\\udXXX``."""
    if isinstance(key, int) and type(key) is not bool:
        return key
    text = str(key)
    return text.encode("utf-8", "backslashreplace").decode("utf-8") if _unpaired(text) else text


def _path(link: tuple[Any, ...] | None) -> JsonPath:
    """The path of a link chain ``(parent, key)``."""
    parts: list[str | int] = []
    while link is not None:
        link, key = link
        parts.append(_printable(key))
    return tuple(reversed(parts))


_TOKENS = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{},:]')


def _deep_path(text: str, max_depth: int) -> JsonPath:
    """Where text too deep for the parser first nests past ``max_depth``: a scan of its
    strings and punctuation up to that point (the parser's stack gave out, not the text)."""
    stack: list[list[Any]] = []  # [is an object, the current key or index]
    expect_key = False
    for match in _TOKENS.finditer(text):
        token = match.group()
        mark = token[0]
        if mark in "[{":
            if len(stack) == max_depth:
                return tuple(_printable(key) for _obj, key in stack)
            stack.append([mark == "{", None if mark == "{" else 0])
            expect_key = mark == "{"
        elif mark in "]}":
            if stack:
                stack.pop()
        elif mark == ",":
            if stack and stack[-1][0]:
                expect_key = True
            elif stack:
                stack[-1][1] += 1
        elif mark == ":":
            expect_key = False
        elif expect_key and stack:
            stack[-1][1] = json.loads(token)
            expect_key = False
    return ()


def _leaf_fault(value: Any) -> str | None:
    kind = type(value)
    if kind is str:
        return "a lone surrogate is not Unicode text" if _unpaired(value) else None
    if kind is int:
        ok = -_INT_BOUND < value < _INT_BOUND
        return None if ok else f"an integer of more than {MAX_INT_DIGITS} digits"
    if kind is float:
        return None if math.isfinite(value) else "a number must be finite (no NaN or Infinity)"
    if kind is _Token:
        reason: str = value.reason
        return reason
    return None


_SOUND = 1
""":func:`_sound`: the value passes, and holds a float ``orjson`` may spell or read otherwise."""
_PLAIN = 2
""":func:`_sound`: the value passes and ``orjson`` writes it, and reads its text, exactly as
the standard library does: only exact ``dict`` (``str`` keys), ``list``, ``tuple``, ``str``,
``int``, ``bool``, ``None`` and floats that are ``0`` or of magnitude in [1e-4, 2**63)."""

_ORJSON_FLOATS = (1e-4, 2.0**63)
"""Nonzero floats of magnitude in this range are spelled alike by ``orjson`` and ``repr``
(smaller ones differ: ``1e-07`` / ``1e-7``, ``1e-05`` / ``0.00001``), and ``orjson`` reads no
integer token as a float in it (it reads integers past 64 bits as floats of 2**63 or more)."""


def _sound(value: Any, max_depth: int) -> int:
    """Whether plain JSON ``value`` passes, checked fast: no paths kept, scalars checked where
    they sit rather than pushed. ``0`` (a fault, or a type it does not know) sends the
    value to the walk that finds the path; a pass is :data:`_PLAIN` or :data:`_SOUND`."""
    stack = [(value, 1)]
    bound = _INT_BOUND
    isfinite = math.isfinite
    low, high = _ORJSON_FLOATS
    result = _PLAIN
    if type(value) is float:
        if not isfinite(value):
            return 0
        return _PLAIN if not value or low <= abs(value) < high else _SOUND
    while stack:
        item, depth = stack.pop()
        kind = type(item)
        if kind is dict:
            for key in item:
                if type(key) is not str or (not key.isascii() and _unpaired(key)):
                    return 0
            children: Any = item.values()
        elif kind is list or kind is tuple:
            children = item
        else:
            if _leaf_fault(item) is not None:
                return 0
            return _PLAIN if kind in _LEAVES else _SOUND  # a scalar of its own (depth 1)
        if depth > max_depth:
            return 0
        inner = depth + 1
        for child in children:
            kind = type(child)
            if kind is str:
                if not child.isascii() and _unpaired(child):
                    return 0
            elif kind is int:
                if not -bound < child < bound:
                    return 0
            elif kind is dict or kind is list or kind is tuple:
                stack.append((child, inner))
            elif kind is float:
                if not isfinite(child):
                    return 0
                if child and not low <= abs(child) < high:
                    result = _SOUND
            elif child is not None and kind is not bool:
                return 0
    return result


def check_json(value: Any, *, max_depth: int = INPUT_MAX_DEPTH, path: JsonPath = ()) -> None:
    """Raise :class:`JsonShapeError` at the first part of ``value`` that would not read back
    as written: nesting deeper than ``max_depth`` levels, a lone surrogate in a key or a
    string, a float that is not finite, an integer of more than :data:`MAX_INT_DIGITS` digits.
    ``path`` is where ``value`` itself sits (prefixed to the error's path). Iterative: any depth
    is refused without recursion."""
    if _sound(value, max_depth):
        return
    link: tuple[Any, ...] | None = None
    for key in path:
        link = (link, key)
    stack: list[tuple[Any, int, tuple[Any, ...] | None]] = [(value, 1, link)]
    leaf_fault = _leaf_fault
    while stack:
        item, depth, here = stack.pop()
        if isinstance(item, dict | list | tuple):
            if depth > max_depth:
                raise JsonShapeError(_path(here), f"nested deeper than {max_depth} levels")
            if isinstance(item, dict):
                for key, child in item.items():
                    if type(key) is str and _unpaired(key):
                        raise JsonShapeError(_path((here, key)),
                                             "a lone surrogate is not Unicode text (in a key)")
                    stack.append((child, depth + 1, (here, key)))
            else:
                stack.extend((child, depth + 1, (here, i)) for i, child in enumerate(item))
            continue
        fault = leaf_fault(item)
        if fault is not None:
            raise JsonShapeError(_path(here), fault)


def loads_json(text: bytes | str, *, max_depth: int = INPUT_MAX_DEPTH) -> Any:
    """Decode JSON from outside and :func:`check_json` it: UTF-8 text only (a byte order mark
    is skipped); a refusal is :class:`JsonShapeError`, a syntax error
    :class:`json.JSONDecodeError`.

    ``orjson`` reads the text first; its value is the answer when :func:`_sound` finds it
    :data:`_PLAIN` within ``max_depth`` (then the standard library's reading is equal to it,
    key order included). Anything else (text ``orjson`` refuses: a syntax error, ``NaN``, a
    lone surrogate, a byte order mark, nesting past 1,024; or a value that is not plain:
    a fault, a float that may have been an integer past 64 bits) is read again below, exactly
    as before."""
    try:
        fast = _orjson_loads(text)
    except ValueError:  # orjson.JSONDecodeError, or a str it cannot encode as UTF-8
        pass
    else:
        if _sound(fast, max_depth) == _PLAIN:
            return fast
    if not isinstance(text, str):
        try:
            text = bytes(text).decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise JsonShapeError((), f"the text is not UTF-8 ({exc.reason} at byte "
                                     f"{exc.start})") from None
    try:
        value = _decode(text)
    except RecursionError:  # deeper than the parser's stack: far past any limit
        raise JsonShapeError(_deep_path(text, max_depth),
                             f"nested deeper than {max_depth} levels") from None
    check_json(value, max_depth=max_depth)
    return value


# Canonical JSON of a payload straight from pydantic's Rust serializer, where that is exact.
#
# :func:`encode_event` writes canonical JSON (sorted keys, no spaces, UTF-8) of an event's fields.
# The general path builds a Python dict and runs the standard ``json`` encoder over it — about
# two thirds of an append's CPU outside SQLite. pydantic-core can write the JSON itself several
# times faster, but it writes fields in *declaration* order and has no ``sort_keys``. So a model
# qualifies for the fast path only when its JSON cannot differ from the general path's:
#
# * its fields are declared in sorted order of their wire names (recursively for nested models);
# * every field is a ``str``, ``bool``, ``int``, ``None``, a ``Literal`` of those, a qualifying
#   model, or a tuple/list of these — never ``dict``, ``Any`` or ``float``, whose key order or
#   number formatting the Rust writer does differently.
#
# Strings are escaped identically by both writers (only ``"``, ``\`` and control characters,
# lowercase ``\u00XX``); ``tests/test_fast_json.py`` checks byte equality with hypothesis over
# every catalog type, and the conformance suite's hash checks would catch any drift.
#
# A model whose only disqualifying fields are free-form JSON (``dict[str, Any]``, optionally
# ``None``: a tool call's input, its result, an interaction's payload) takes a second fast path,
# :func:`tree_encoder`: its fields go into a dict in sorted order of their wire names, each
# free-form value as a copy with its keys sorted (:func:`sorted_tree`), and pydantic writes that
# dict. The copy is exact only for plain JSON — ``str`` keys; ``str``, ``int``, ``bool`` and
# ``None`` leaves; lists and dicts — so anything else (a float, whose digits the two writers may
# spell differently; a tuple; a subclass) sends that one payload down the general path.
#
# ``orjson`` (issue 24) goes first on both paths where it is exact: the tree path hands it the
# fields as they are when every one is an exact ``str``/``int``/``bool``/``None`` and every
# free-form value is :data:`_PLAIN` (it sorts the keys itself, floats included); the general path
# and :func:`canonical_json` hand it any value :func:`_sound` finds :data:`_PLAIN`. Whatever it
# refuses (integers past 64 bits, lone surrogates, 255 levels) takes the path above, as before.

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
    model: type[BaseModel], *, exclude: frozenset[str], fallback: Callable[[Any], str],
    check_depth: int | None = None,
) -> Callable[[Any], str] | None:
    """A function writing an instance's canonical JSON when ``model``'s fields all qualify
    except free-form JSON ones; ``None`` when it does not have that shape. An instance whose
    free-form values are not plain JSON is written by ``fallback``.

    ``check_depth``: each free-form value is also :func:`check_json`-ed at that depth, its
    wire name the path (raising :class:`JsonShapeError`), in the same walk that tells
    whether it is plain."""
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
    plan = sorted(((f.alias or n), n, n in trees, f.exclude_if) for n, f in fields)

    leaves = _LEAVES
    sound = _sound
    no_limit = sys.maxsize

    depth = no_limit if check_depth is None else check_depth

    def encode(instance: Any) -> str:
        raw = {}
        plain = True
        for wire, name, tree, left_out in plan:
            value = getattr(instance, name)
            if tree and value is not None and (check_depth is not None or plain):
                kind = sound(value, depth)
                if not kind:
                    if check_depth is not None:  # raises at the fault (or passes a type the
                        check_json(value, max_depth=check_depth, path=(wire,))  # walk skips)
                    plain = False
                elif kind != _PLAIN:
                    plain = False  # free-form JSON orjson may write otherwise
            if left_out is not None and left_out(value):
                continue  # what pydantic's own writer leaves out (``exclude_if``)
            raw[wire] = value
            if plain and not tree and type(value) not in leaves:
                plain = False  # a nested model
        if plain:  # exact str/int/bool/None fields and plain free-form JSON: orjson is exact
            try:
                return _orjson_dumps(raw, option=_SORT_KEYS).decode("utf-8")
            except TypeError:  # an integer past 64 bits, a lone surrogate, 255 levels
                pass
        try:
            data = {wire: sorted_tree(raw[wire]) if tree else raw[wire]
                    for wire, _name, tree, _left_out in plan if wire in raw}
        except NotPlainJson:
            return fallback(instance)
        return to_json(data, by_alias=True).decode("utf-8")

    return encode
