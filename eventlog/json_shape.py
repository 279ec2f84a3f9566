"""The shape of JSON that is accepted and stored, and the one strict decoder (SPEC EG-1).

Everything read back from the log goes through pydantic's JSON reader (jiter) or Python's
``json``; both refuse some values the writers would write (jiter: more than 200 levels of
nesting, integers of more than 4,300 digits, lone surrogates; Python: integers over
``sys.get_int_max_str_digits()`` digits, nesting deeper than its recursion limit). So one rule,
:func:`check_json`, decides what a JSON value may hold, and the edges and the writer both apply
it, with a nesting limit each:

* :data:`INPUT_MAX_DEPTH` (64) for every body and tool input from outside (HTTP, MCP, CLI);
* :data:`EVENT_MAX_DEPTH` (100) for a stored event's ``data``: an input at the edges' limit
  fits inside any event that carries it, and a tested margin below every reader's limit.

A value is refused (:class:`JsonShapeError`, naming the path) when it nests deeper than the
limit, holds a lone surrogate in a key or a string (not UTF-8, so it cannot be stored), a
float that is not finite (``NaN``, ``±Infinity``, or ``1e999`` which overflows), or an integer of
more than :data:`MAX_INT_DIGITS` digits (the least any interpreter can be set to parse, so no
reader's setting can refuse it later). Everything else round-trips exactly: read back, it is
equal to what was accepted.

:func:`loads_json` is the edges' decoder: UTF-8 only, ``NaN``/``Infinity`` tokens and huge
integers caught with their path rather than turned into floats or errors, nesting too deep for
the parser a refusal rather than a ``RecursionError``. A plain syntax error stays
:class:`json.JSONDecodeError`.
"""

from __future__ import annotations

import json
import math
import re
import sys
from typing import Any

from .errors import EventLogError

__all__ = [
    "EVENT_MAX_DEPTH",
    "INPUT_MAX_DEPTH",
    "MAX_INT_DIGITS",
    "JsonPath",
    "JsonShapeError",
    "check_json",
    "loads_json",
]

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


def _sound(value: Any, max_depth: int) -> bool:
    """Whether plain JSON ``value`` passes, checked fast: no paths kept, scalars checked where
    they sit rather than pushed. ``False`` (a fault, or a type it does not know) sends the
    value to the walk that finds the path."""
    stack = [(value, 1)]
    bound = _INT_BOUND
    isfinite = math.isfinite
    while stack:
        item, depth = stack.pop()
        kind = type(item)
        if kind is dict:
            for key in item:
                if type(key) is not str or (not key.isascii() and _unpaired(key)):
                    return False
            children: Any = item.values()
        elif kind is list or kind is tuple:
            children = item
        else:
            return _leaf_fault(item) is None if depth == 1 else False
        if depth > max_depth:
            return False
        inner = depth + 1
        for child in children:
            kind = type(child)
            if kind is str:
                if not child.isascii() and _unpaired(child):
                    return False
            elif kind is int:
                if not -bound < child < bound:
                    return False
            elif kind is dict or kind is list or kind is tuple:
                stack.append((child, inner))
            elif kind is float:
                if not isfinite(child):
                    return False
            elif child is not None and kind is not bool:
                return False
    return True


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
    :class:`json.JSONDecodeError`."""
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
