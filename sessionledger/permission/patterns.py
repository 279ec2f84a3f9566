"""Rule patterns of the workspace configuration and how they match a tool call (SPEC TR-4).

A pattern is ``Tool`` or ``Tool(argument glob)``:

- ``Tool`` is a glob on the tool's name, matched case-sensitively: ``Write``,
  ``mcp__github__*`` (every tool of one MCP server), ``*`` (every tool).
- ``Tool(glob)`` additionally matches the call's *primary argument* (:func:`primary_argument`):
  ``Bash(git *)``, ``Read(src/**)``, ``WebFetch(https://docs.python.org/*)``. A tool without a
  primary argument never matches an argument pattern.

How the argument glob reads depends on what the argument is:

- **paths** (Read, Write, Edit, Grep, Glob; other tools' ``file_path``/``path``): ``*`` and
  ``?`` stay within one path segment, ``**`` crosses segments, and a trailing ``/**`` also
  matches the directory itself. The call's path is normalised lexically against the workspace
  (no filesystem access, symlinks are not followed). A relative pattern matches paths inside
  the workspace, by their workspace-relative form; a pattern starting with ``/`` or ``~``
  matches the normalised absolute form (``~`` paths are taken as given).
- **commands and other text** (Bash, WebFetch's URL): ``*`` matches any run of characters,
  ``/`` and spaces included; ``?`` one character; ``[...]`` a character class.

A Bash command is matched per simple command (see :mod:`.shell_parse`): a ``deny`` or ``ask``
pattern matches when the whole command *or any* of its simple commands matches, an ``allow``
pattern only when *every* simple command matches and the command has no command substitution
(``Bash(git *)`` does not allow ``git status && rm -rf build``). Patterns are parsed once, when
the configuration is loaded; :func:`parse_pattern` raises :class:`ValueError` on a malformed one.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from fnmatch import fnmatchcase, translate
from functools import lru_cache
from pathlib import Path, PurePosixPath
from typing import Any, Literal

from .descriptors import ToolDescriptor
from .shell_parse import ShellParseError, parse_command

__all__ = [
    "ArgumentKind",
    "CallSubjects",
    "RulePattern",
    "call_subjects",
    "normalise_path",
    "parse_pattern",
    "primary_argument",
]

ArgumentKind = Literal["path", "command", "text"]
_NAME = re.compile(r"^[A-Za-z0-9_.*?\[\]!-]+$")
_PATH_KEYS: dict[str, tuple[str, ...]] = {
    "Read": ("file_path", "path"),
    "Write": ("file_path", "path"),
    "Edit": ("file_path", "path"),
    "Grep": ("path", "pattern"),
    "Glob": ("path", "pattern"),
}
_FALLBACK_PATH_KEYS = ("file_path", "path")


@dataclass(frozen=True, slots=True)
class RulePattern:
    """A parsed ``Tool`` or ``Tool(argument)`` pattern; ``str()`` gives its source text."""

    tool: str
    argument: str | None = None

    def __str__(self) -> str:
        return self.tool if self.argument is None else f"{self.tool}({self.argument})"

    def matches_name(self, name: str) -> bool:
        """Whether the tool-name glob matches ``name`` (case-sensitive)."""
        return fnmatchcase(name, self.tool)

    def matches(self, subjects: CallSubjects, *, every: bool = False) -> bool:
        """Whether the pattern matches a call; ``every`` asks all simple commands to match.

        ``every=False`` is the reading of ``deny``/``ask`` rules (any subject matches),
        ``every=True`` that of ``allow`` rules (see the module docstring).
        """
        if not self.matches_name(subjects.tool):
            return False
        if self.argument is None:
            return True
        if subjects.kind == "path":
            return _path_matches(self.argument, subjects)
        texts = subjects.every if every else subjects.any
        if not texts:
            return False
        hits = map(_text_glob(self.argument), texts)
        return all(hits) if every else any(hits)


def parse_pattern(text: str) -> RulePattern:
    """Parse ``Tool`` or ``Tool(argument)``; a malformed pattern raises :class:`ValueError`."""
    if not isinstance(text, str):
        raise ValueError("a pattern must be a string")
    if not text:
        raise ValueError("empty pattern")
    if text != text.strip():
        raise ValueError(f"pattern {text!r} has leading or trailing whitespace")
    name, paren, rest = text.partition("(")
    if not _NAME.match(name):
        raise ValueError(
            f"pattern {text!r}: tool name must be a name or glob of letters, digits, "
            "'_', '-', '.', '*', '?', '[...]' (e.g. 'Write', 'mcp__github__*')"
        )
    if not paren:
        return RulePattern(name)
    if not rest.endswith(")"):
        raise ValueError(f"pattern {text!r}: missing closing ')' at the end")
    argument = rest[:-1]
    if not argument.strip():
        raise ValueError(f"pattern {text!r}: empty argument between '(' and ')'")
    if not _balanced(argument):
        raise ValueError(f"pattern {text!r}: unbalanced parentheses in the argument")
    return RulePattern(name, argument)


def _balanced(text: str) -> bool:
    depth = 0
    for char in text:
        depth += {"(": 1, ")": -1}.get(char, 0)
        if depth < 0:
            return False
    return depth == 0


@dataclass(frozen=True, slots=True)
class CallSubjects:
    """What argument patterns are matched against for one call.

    ``any`` holds the texts a ``deny``/``ask`` pattern may match (one is enough), ``every``
    the texts an ``allow`` pattern must all match (empty: an argument pattern cannot allow).
    A path has one text, its normalised absolute form, and ``relative``, its
    workspace-relative form (``None`` outside the workspace).
    """

    tool: str
    kind: ArgumentKind
    any: tuple[str, ...] = ()
    every: tuple[str, ...] = ()
    relative: str | None = None


def primary_argument(tool: ToolDescriptor, data: Mapping[str, Any]) -> tuple[ArgumentKind, str]:
    """The call's primary argument and how to read it, or ``("text", "")`` if none.

    Bash (any shell tool): ``command``. Read, Write, Edit: ``file_path``, else ``path``.
    Grep, Glob: ``path``, else ``pattern``. WebFetch: ``url``. Any other tool: ``file_path``,
    else ``path`` (read as a path), else nothing.
    """
    if tool.shell:
        return "command", _string(data, "command")
    if tool.name == "WebFetch":
        return "text", _string(data, "url")
    for key in _PATH_KEYS.get(tool.name, _FALLBACK_PATH_KEYS):
        value = _string(data, key)
        if value:
            return "path", value
    return "text", ""


def _string(data: Mapping[str, Any], key: str) -> str:
    value = data.get(key)
    return value if isinstance(value, str) else ""


def call_subjects(
    tool: ToolDescriptor, data: Mapping[str, Any], *, workspace: Path
) -> CallSubjects:
    """Compute the texts the rule patterns of :class:`RulePattern` match for this call."""
    kind, value = primary_argument(tool, data)
    if not value:
        return CallSubjects(tool.name, kind)
    if kind == "path":
        relative, absolute = normalise_path(value, workspace=workspace)
        return CallSubjects(tool.name, kind, (absolute,), (absolute,), relative)
    if kind == "command":
        return _command_subjects(tool.name, value)
    return CallSubjects(tool.name, kind, (value,), (value,))


def _command_subjects(name: str, command: str) -> CallSubjects:
    whole = command.strip()
    try:
        parsed = parse_command(command)
    except ShellParseError:
        return CallSubjects(name, "command", (whole,))
    simple = tuple(text for c in parsed.commands if (text := c.text))
    every = () if parsed.substitutions or not simple else simple
    return CallSubjects(name, "command", (whole, *simple), every)


def normalise_path(value: str, *, workspace: Path) -> tuple[str | None, str]:
    """``(workspace-relative form or None if outside, normalised absolute form)``, lexically.

    Paths starting with ``~`` are taken as outside the workspace and returned as given.
    """
    if value.startswith("~"):
        return None, os.path.normpath(value)
    root = os.path.normpath(os.path.abspath(workspace))
    absolute = os.path.normpath(os.path.join(root, value))
    try:
        common = os.path.commonpath([root, absolute])
    except ValueError:  # different drives on Windows
        return None, absolute
    if common != root:
        return None, absolute
    relative = os.path.relpath(absolute, root)
    return PurePosixPath(*Path(relative).parts).as_posix(), absolute


def _path_matches(glob: str, subjects: CallSubjects) -> bool:
    """A relative glob matches the workspace-relative form, an absolute one the absolute form."""
    if not subjects.any:
        return False
    text = subjects.any[0] if glob.startswith(("/", "~")) else subjects.relative
    return text is not None and _path_glob(glob).fullmatch(text)


_Step = Callable[[str], bool]
_States = frozenset[int]
_CACHE_LIMIT = 4096


class _PathGlob:
    """A path glob as a small automaton, run over the path once: linear in its length.

    ``**/`` is ``(?:.*/)?``, a trailing ``/**`` is ``(?:/.*)?``, any other ``**`` is ``.*``;
    ``*`` and ``?`` do not cross ``/``; ``[...]`` is a class (``!`` negates). A regular
    expression of the same meaning backtracks: ``*a*b*c`` against a long path segment costs
    the segment's length to the power of the stars. Here every path character takes one
    step between sets of states, and the steps are remembered (up to ``_CACHE_LIMIT``).
    """

    def __init__(self, glob: str) -> None:
        self._edges: list[list[tuple[_Step, int]]] = [[]]
        self._empty: list[list[int]] = [[]]
        self._at = 0
        self._compile(glob)
        self._accept = self._at
        self._start = self._closure({0})
        self._steps: dict[tuple[_States, str], _States] = {}

    def fullmatch(self, text: str) -> bool:
        states, steps = self._start, self._steps
        for char in text:
            key = (states, char)
            following = steps.get(key)
            if following is None:
                following = self._closure(
                    {target for state in states for step, target in self._edges[state]
                     if step(char)}
                )
                if len(steps) >= _CACHE_LIMIT:
                    steps.clear()
                steps[key] = following
            if not following:
                return False
            states = following
        return self._accept in states

    def _compile(self, glob: str) -> None:
        i = 0
        while i < len(glob):
            if glob.startswith("/**", i) and i + 3 == len(glob):
                self._any_below()
                i += 3
            elif glob.startswith("**/", i):
                self._any_dirs()
                i += 3
            elif glob.startswith("**", i):
                self._repeat(_anything)
                i += 2
            else:
                i = self._one(glob, i)

    def _one(self, glob: str, i: int) -> int:
        char = glob[i]
        if char == "*":
            self._repeat(_not_slash)
        elif char == "?":
            self._then(_not_slash)
        elif char == "[" and (end := glob.find("]", i + 2)) != -1:
            body = glob[i + 1:end]
            negate = body.startswith("!")
            body = re.escape(body[1:] if negate else body).replace(r"\-", "-")
            cls = re.compile(f"[{'^' if negate else ''}{body}]")
            self._then(lambda c: cls.match(c) is not None)
            return end + 1
        else:
            self._then(char.__eq__)
        return i + 1

    def _state(self) -> int:
        self._edges.append([])
        self._empty.append([])
        return len(self._edges) - 1

    def _then(self, step: _Step) -> None:
        state = self._state()
        self._edges[self._at].append((step, state))
        self._at = state

    def _repeat(self, step: _Step) -> None:
        state = self._state()
        self._empty[self._at].append(state)
        self._edges[state].append((step, state))
        self._at = state

    def _any_dirs(self) -> None:
        """``(?:.*/)?``: nothing, or anything ending in ``/``."""
        before, middle, after = self._at, self._state(), self._state()
        self._empty[before] += [middle, after]
        self._edges[middle] += [(_anything, middle), (_is_slash, after)]
        self._at = after

    def _any_below(self) -> None:
        """``(?:/.*)?``: nothing, or ``/`` and anything."""
        before, middle, after = self._at, self._state(), self._state()
        self._empty[before].append(after)
        self._edges[before].append((_is_slash, middle))
        self._edges[middle].append((_anything, middle))
        self._empty[middle].append(after)
        self._at = after

    def _closure(self, states: set[int]) -> _States:
        todo = list(states)
        while todo:
            for nxt in self._empty[todo.pop()]:
                if nxt not in states:
                    states.add(nxt)
                    todo.append(nxt)
        return frozenset(states)


def _is_slash(char: str) -> bool:
    return char == "/"


def _not_slash(char: str) -> bool:
    return char != "/"


def _anything(_char: str) -> bool:
    return True


@lru_cache(maxsize=512)
def _path_glob(glob: str) -> _PathGlob:
    return _PathGlob(glob)


@lru_cache(maxsize=512)
def _text_glob(glob: str) -> Callable[[str], re.Match[str] | None]:
    """``fnmatchcase(text, glob)`` is ``_text_glob(glob)(text) is not None``, compiled once."""
    return re.compile(translate(glob)).match
