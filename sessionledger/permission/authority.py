"""What the permission authority decides: may this tool call run, in this mode (PM-1 … PM-4).

A :class:`PermissionRequest` (one call in context) is decided by a :class:`PermissionService`
into a :class:`PermissionDecision` (``allow``, ``ask`` or ``deny``, a human reason and a stable
dotted rule id of :data:`RULE_IDS`), with the project rules of a :class:`PermissionConfig`,
walking the ordered checks of :data:`STEPS` (PM-3). Pure and I/O-free: the workspace
configuration is loaded beforehand (:mod:`sessionledger.config.workspace`) and paths are
compared lexically; the rule patterns (``Tool`` or ``Tool(argument glob)``) and how a call's
primary argument matches them are here too; the shell classifier is :mod:`.shell`.
"""

from __future__ import annotations

import gc
import os
import re
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from fnmatch import fnmatchcase, translate
from functools import lru_cache
from pathlib import Path, PurePosixPath
from typing import Annotated, Any, Literal, Protocol
from urllib.parse import urlsplit

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    PlainSerializer,
    PlainValidator,
    StrictStr,
)
from pydantic.alias_generators import to_camel

from eventlog import PermissionVerdict
from statemachine.execution import ExecutionState

from .descriptors import ToolDescriptor
from .shell import CommandReading, ShellVerdict, read

__all__ = [
    "ArgumentKind",
    "Behavior",
    "Call",
    "CallSubjects",
    "Domain",
    "ENTER_PLAN_REASON",
    "EXIT_PLAN_REASON",
    "HasPermissionConfig",
    "Pattern",
    "PermissionConfig",
    "PermissionDecision",
    "PermissionRequest",
    "PermissionService",
    "HOST_PLAN_FILE",
    "PLAN_FILE_TOOLS",
    "RULE_IDS",
    "RulePattern",
    "STEPS",
    "call_subjects",
    "decide",
    "host_plan_file",
    "normalise_path",
    "parse_pattern",
    "primary_argument",
    "validate_domain",
    "validate_pattern",
    "without_cyclic_gc",
]


# -- rule patterns and how they match a call (TR-4) --------------------------------------------
#
# Rule patterns of the workspace configuration and how they match a tool call (TR-4).
#
# A pattern is ``Tool`` or ``Tool(argument glob)``:
#
# - ``Tool`` is a glob on the tool's name, matched case-sensitively: ``Write``,
#   ``mcp__github__*`` (every tool of one MCP server), ``*`` (every tool).
# - ``Tool(glob)`` additionally matches the call's *primary argument* (:func:`primary_argument`):
#   ``Bash(git *)``, ``Read(src/**)``, ``WebFetch(https://docs.python.org/*)``. A tool without a
#   primary argument never matches an argument pattern.
#
# How the argument glob reads depends on what the argument is:
#
# - **paths** (Read, Write, Edit, Grep, Glob; other tools' ``file_path``/``path``): ``*`` and
#   ``?`` stay within one path segment, ``**`` crosses segments, and a trailing ``/**`` also
#   matches the directory itself. The call's path is normalised lexically against the workspace
#   (no filesystem access, symlinks are not followed). A relative pattern matches paths inside
#   the workspace, by their workspace-relative form; a pattern starting with ``/`` or ``~``
#   matches the normalised absolute form (``~`` paths are taken as given).
# - **commands and other text** (Bash, WebFetch's URL): ``*`` matches any run of characters,
#   ``/`` and spaces included; ``?`` one character; ``[...]`` a character class.
#
# A Bash command is matched per simple command (see :mod:`.shell`): a ``deny`` or ``ask``
# pattern matches when the whole command *or any* of its simple commands matches, an ``allow``
# pattern only when *every* simple command matches and the command has no command substitution
# (``Bash(git *)`` does not allow ``git status && rm -rf build``). Patterns are parsed once, when
# the configuration is loaded; :func:`parse_pattern` raises :class:`ValueError` on a malformed one.

ArgumentKind = Literal["path", "command", "text"]
_NAME = re.compile(r"^[A-Za-z0-9_.*?\[\]!-]+$")
_PATH_KEYS: dict[str, tuple[str, ...]] = {
    "Read": ("file_path", "path"),
    "Write": ("file_path", "path"),
    "Edit": ("file_path", "path"),
    "Grep": ("path", "pattern"),
    "Glob": ("path", "pattern"),
    "NotebookEdit": ("notebook_path",),
    "NotebookRead": ("notebook_path",),
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
        if any(data.get(key) is not None for key in _SHELL_ACTIONS.get(tool.name, ())):
            return "command", ""  # it does more than its command: read as no command at all
        return "command", _string(data, "command")
    if tool.name == "WebFetch":
        return "text", _string(data, "url")
    for key in _PATH_KEYS.get(tool.name, _FALLBACK_PATH_KEYS):
        value = _string(data, key)
        if value:
            return "path", value
    return "text", ""


_SHELL_ACTIONS: dict[str, tuple[str, ...]] = {"Monitor": ("ws",)}
"""What a shell tool does besides running its command (Claude Code's ``Monitor`` opens a
WebSocket given in ``ws``): a call with any of these is not read by its command, and so is
not read-only, whatever the command."""


def _string(data: Mapping[str, Any], key: str) -> str:
    value = data.get(key)
    return value if isinstance(value, str) else ""


def call_subjects(
    tool: ToolDescriptor, data: Mapping[str, Any], *, workspace: Path,
    reading: CommandReading | None = None,
) -> CallSubjects:
    """Compute the texts the rule patterns of :class:`RulePattern` match for this call
    (``reading``: the shell command already read, when the caller has it)."""
    kind, value = primary_argument(tool, data)
    if not value:
        return CallSubjects(tool.name, kind)
    if kind == "path":
        relative, absolute = normalise_path(value, workspace=workspace)
        return CallSubjects(tool.name, kind, (absolute,), (absolute,), relative)
    if kind == "command":
        return _command_subjects(tool.name, value, reading or read(value))
    return CallSubjects(tool.name, kind, (value,), (value,))


def _command_subjects(name: str, command: str, reading: CommandReading) -> CallSubjects:
    whole = command.strip()
    if reading.commands is None:  # bash's grammar cannot read it: rules match it whole
        return CallSubjects(name, "command", (whole,))
    simple = tuple(text for c in reading.commands if (text := c.strip()))
    every = () if reading.substitution or not simple else simple
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


# -- authority -----------------------------------------------------------------------------------

# -- what the authority is asked and what it answers (PM-3, TR-3, docs/spec.md) -------------

Behavior = Literal["allow", "ask", "deny"]


@dataclass(frozen=True, slots=True, kw_only=True)
class PermissionRequest:
    """A tool call to decide on: the tool's flags, its input, the session state, the workspace."""

    tool: ToolDescriptor
    input: Mapping[str, Any]
    state: ExecutionState
    workspace: Path
    plan_files: Path | None = None
    """Where the host keeps its own plan files (Claude Code: ``plans`` in its config
    directory), when it has one: in Plan, the host's plan may be written there."""


@dataclass(frozen=True, slots=True)
class PermissionDecision:
    """``allow``, ``ask`` or ``deny``, why (for humans and the model), and which rule decided."""

    behavior: Behavior
    reason: str
    rule_id: str

    def to_wire(self) -> dict[str, str]:
        """The JSON shape of docs/spec.md: ``{"behavior", "reason", "ruleId"}``."""
        return {"behavior": self.behavior, "reason": self.reason, "ruleId": self.rule_id}

    def to_verdict(self) -> PermissionVerdict:
        """The decision as recorded in a ``PermissionDecided`` event."""
        return PermissionVerdict(behavior=self.behavior, reason=self.reason, rule_id=self.rule_id)

# -- the rules: the ``[permission]`` table of the workspace configuration (TR-4) -------------
#
# Validated at load time. Keys are camelCase exactly as in ``config.toml``; unknown keys are
# refused. Pattern lists (``disallowedTools``, ``allowedTools``, ``allow``, ``ask``, ``deny``)
# hold strings parsed by :func:`parse_pattern`; ``webFetchPreapproved`` holds bare
# domain names (lower-cased, a trailing dot dropped), each also admitting its subdomains.
# Build one from a mapping with ``PermissionConfig.model_validate``; ``PermissionConfig()`` is
# the empty default.

_LABEL = r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?"
_DOMAIN = re.compile(rf"^(?=.{{1,253}}$){_LABEL}(?:\.{_LABEL})*$")


def validate_pattern(value: Any) -> RulePattern:
    """Pydantic validator: a :class:`RulePattern` as is, or a string parsed into one."""
    if isinstance(value, RulePattern):
        return value
    if not isinstance(value, str):
        raise ValueError(f"a pattern must be a string, not {type(value).__name__}")
    return parse_pattern(value)


def validate_domain(value: str) -> str:
    """Pydantic validator: a bare domain name such as ``docs.python.org``, lower-cased."""
    domain = value.strip().lower().removesuffix(".")
    if not _DOMAIN.match(domain):
        raise ValueError(
            f"{value!r} is not a domain name like 'docs.python.org' "
            "(no scheme, port, path or wildcard; subdomains are included anyway)"
        )
    return domain


Pattern = Annotated[
    RulePattern, PlainValidator(validate_pattern), PlainSerializer(str, return_type=str)
]
"""A rule pattern as a configuration value: parsed from its string, serialised back to it."""

Domain = Annotated[StrictStr, AfterValidator(validate_domain)]
"""A WebFetch pre-approved domain."""


class PermissionConfig(BaseModel):
    """Project rules the permission service applies in the order of PM-3."""

    model_config = ConfigDict(
        frozen=True, extra="forbid", alias_generator=to_camel, validate_by_alias=True,
        validate_by_name=False,
    )

    disallowed_tools: tuple[Pattern, ...] = ()
    """Denied before anything else, EnterPlanMode and questions included."""
    allowed_tools: tuple[Pattern, ...] = ()
    """Allowed just before the mode default (after Plan, allow rules and WebFetch)."""
    allow: tuple[Pattern, ...] = ()
    ask: tuple[Pattern, ...] = ()
    deny: tuple[Pattern, ...] = ()
    web_fetch_preapproved: tuple[Domain, ...] = ()

# -- the ordered checks of PM-3, one small function each; the first that decides wins --------
#
# Order (STEPS): ``disallowedTools`` deny → plan transition policy (PM-1, PM-2) →
# requiresUserInteraction ask (AQ-5) → project ``deny`` rules → project ``ask`` rules → the
# host's plan file in Plan → Plan check → project ``allow`` rules → WebFetch pre-approval →
# ``allowedTools`` → mode default (PM-4). Every decision names its rule (RULE_IDS, ``<i>``
# is the index in the list).
#
# A call is *read-only* when its tool declares read-only and not destructive; for a shell tool
# the classifier of :mod:`.shell` decides both flags instead of the descriptor. In Plan the
# check passes read-only calls and session controls declared ``allowed_in_plan_mode``, and
# denies everything else, whatever the mode underneath.
#
# A read-only tool whose side-effect scope is ``network`` (WebFetch) passes the Plan check but
# is not allowed by the read-only mode default: ``build`` and ``edit`` ask unless a domain is
# pre-approved, ``auto`` and ``yolo`` allow it. Otherwise the WebFetch pre-approval of PM-3
# would never change an outcome, and a fetch can carry workspace data out.

ENTER_PLAN_REASON = "EnterPlanMode switches to plan mode without a permission prompt"
EXIT_PLAN_REASON = "ExitPlanMode can only be used while plan mode is active"

RULE_IDS: dict[str, str] = {
    "config.disallowedTools": "deny: the tool matches permission.disallowedTools",
    "tool.plan.enter": "allow: EnterPlanMode never needs a prompt (PM-1)",
    "mode.plan.exitOnly": "deny: ExitPlanMode outside Plan (PM-2)",
    "mode.plan.hostPlanFile": "allow: in Plan, a write of the host's own plan file",
    "tool.requiresUserInteraction": "ask: the tool always needs the user, yolo too (AQ-5)",
    "config.deny[<i>]": "deny: project rule permission.deny[i]",
    "config.ask[<i>]": "ask: project rule permission.ask[i]",
    "mode.plan.denyWrites": "deny: Plan is on and the call is not read-only (PM-3)",
    "config.allow[<i>]": "allow: project rule permission.allow[i]",
    "webfetch.preapproved": "allow: WebFetch of a pre-approved domain or its subdomain",
    "config.allowedTools": "allow: the tool matches permission.allowedTools",
    "tool.readOnly": "allow: read-only calls without network access, every mode (PM-4)",
    "mode.yolo.allowAll": "allow: yolo allows everything else",
    "mode.build.askWrites": "ask: build asks for anything not read-only",
    "mode.build.askNetwork": "ask: build asks for network reads (WebFetch) not pre-approved",
    "mode.edit.askNetwork": "ask: edit asks for network reads (WebFetch) not pre-approved",
    "mode.edit.allowWorkspaceEdits": "allow: edit allows file edits inside the workspace",
    "mode.edit.askOutsideWorkspace": "ask: edit asks for file edits outside the workspace",
    "mode.edit.askShell": "ask: edit asks for shell commands that are not read-only",
    "mode.edit.askWrites": "ask: edit asks for other tools that are not read-only",
    "mode.auto.allowWorkspaceEdits": "allow: auto allows file edits inside the workspace",
    "mode.auto.askOutsideWorkspace": "ask: auto asks for file edits outside the workspace",
    "mode.auto.askDestructive": "ask: auto asks for destructive commands and tools",
    "mode.auto.allowNonDestructive": "allow: auto allows non-destructive commands and tools",
}
"""Every rule id the service can answer with, and what it means (for docs)."""


@contextmanager
def without_cyclic_gc() -> Iterator[None]:
    """Hold the cyclic garbage collector off while commands are parsed and looked at.

    A parse makes an object or two per simple command and no reference cycles. A command of a
    megabyte makes hundreds of thousands of them, and each full pass of the collector walks
    them all: the passes come more often as they pile up, so the time would grow faster
    than the length (EG-5, D148). Dropped inside the block, they are freed by reference
    counting and nothing is left for the collector. Another thread's block may turn the
    collector back on early; that costs only time.
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


@dataclass(frozen=True, slots=True)
class Call:
    """A request plus the facts the checks share, computed once."""

    request: PermissionRequest
    subjects: CallSubjects
    shell: ShellVerdict | None
    read_only: bool
    destructive: bool
    inside_workspace: bool

    @property
    def tool(self) -> ToolDescriptor:
        return self.request.tool

    @property
    def network(self) -> bool:
        return self.tool.side_effect_scope == "network"

    @classmethod
    def of(cls, request: PermissionRequest) -> Call:
        tool = request.tool
        kind, value = primary_argument(tool, request.input)
        with without_cyclic_gc():  # the parses are dropped inside: nothing left to collect
            reading = read(value) if tool.shell else None
            verdict = reading.verdict if reading is not None else None
            subjects = call_subjects(tool, request.input, workspace=request.workspace,
                                     reading=reading)
        read_only = verdict.read_only if verdict else tool.read_only and not tool.destructive
        destructive = verdict.destructive if verdict else tool.destructive
        inside = kind == "path" and bool(value) and normalise_path(
            value, workspace=request.workspace
        )[0] is not None
        return cls(request, subjects, verdict, read_only, destructive, inside)

    def why_not_read_only(self) -> str:
        if self.shell is not None:
            return self.shell.reason
        if self.read_only and self.network:
            return "it reaches the network and the host is not pre-approved"
        return "it is declared destructive" if self.tool.destructive else "it is not read-only"


Step = Callable[[PermissionConfig, Call], PermissionDecision | None]


def _decision(behavior: Behavior, rule_id: str, reason: str) -> PermissionDecision:
    return PermissionDecision(behavior, reason, rule_id)


def _first_match(patterns: tuple[RulePattern, ...], call: Call, *, every: bool) -> int | None:
    return next(
        (i for i, p in enumerate(patterns) if p.matches(call.subjects, every=every)), None
    )


def disallowed_tools(config: PermissionConfig, call: Call) -> PermissionDecision | None:
    index = _first_match(config.disallowed_tools, call, every=False)
    if index is None:
        return None
    pattern = config.disallowed_tools[index]
    return _decision("deny", "config.disallowedTools",
                     f"{call.tool.name} is disallowed by permission.disallowedTools ({pattern})")


def plan_transition(_: PermissionConfig, call: Call) -> PermissionDecision | None:
    if call.tool.name == "EnterPlanMode":
        return _decision("allow", "tool.plan.enter", ENTER_PLAN_REASON)
    if call.tool.name == "ExitPlanMode" and not call.request.state.plan_enabled:
        return _decision("deny", "mode.plan.exitOnly", EXIT_PLAN_REASON)
    return None


def user_interaction(_: PermissionConfig, call: Call) -> PermissionDecision | None:
    if not call.tool.requires_user_interaction:
        return None
    return _decision("ask", "tool.requiresUserInteraction",
                     f"{call.tool.name} always needs the user's answer or approval")


def _project_rule(behavior: Behavior, key: str, *, every: bool = False) -> Step:
    def step(config: PermissionConfig, call: Call) -> PermissionDecision | None:
        patterns: tuple[RulePattern, ...] = getattr(config, key)
        index = _first_match(patterns, call, every=every)
        if index is None:
            return None
        verb = {"allow": "allowed", "ask": "needs the user's approval", "deny": "denied"}
        return _decision(behavior, f"config.{key}[{index}]",
                         f"{call.tool.name} {verb[behavior]} by the project rule "
                         f"permission.{key}[{index}] ({patterns[index]})")

    step.__name__ = f"{key}_rules"
    return step


def plan_check(_: PermissionConfig, call: Call) -> PermissionDecision | None:
    if not call.request.state.plan_enabled:
        return None
    if call.read_only or call.tool.allowed_in_plan_mode:
        return None
    return _decision(
        "deny", "mode.plan.denyWrites",
        f"Plan mode is active: only read-only tools may run until the plan is approved; "
        f"{call.tool.name} is denied because {call.why_not_read_only()}",
    )


PLAN_FILE_TOOLS = frozenset({"Write", "Edit", "MultiEdit"})
HOST_PLAN_FILE = "mode.plan.hostPlanFile"


def host_plan_file(path: object, plan_files: Path | None) -> bool:
    """Whether ``path`` names a plan file of the host: a ``.md`` file directly in
    ``plan_files`` (lexically, ``..`` resolved); with no ``plan_files``, directly in a
    ``.claude/plans`` folder, Claude Code's default (an audit of an imported transcript)."""
    if not isinstance(path, str) or not path.endswith(".md") or "\0" in path:
        return False
    file = PurePosixPath(os.path.normpath(path))
    if not file.is_absolute() or file.name.startswith("."):
        return False
    if plan_files is None:
        return file.parent.name == "plans" and file.parent.parent.name == ".claude"
    return str(file.parent) == os.path.normpath(str(plan_files))


def plan_file(_: PermissionConfig, call: Call) -> PermissionDecision | None:
    request = call.request
    if (not request.state.plan_enabled or request.plan_files is None
            or call.tool.name not in PLAN_FILE_TOOLS
            or not host_plan_file(request.input.get("file_path"), request.plan_files)):
        return None
    return _decision("allow", HOST_PLAN_FILE,
                     f"Plan mode: {call.tool.name} of the host's own plan file is allowed "
                     f"(it is the plan being written)")


def webfetch_preapproved(config: PermissionConfig, call: Call) -> PermissionDecision | None:
    if call.tool.name != "WebFetch" or not config.web_fetch_preapproved:
        return None
    host = _host(call.request.input.get("url"))
    if host is None:
        return None
    domain = next((d for d in config.web_fetch_preapproved
                   if host == d or host.endswith("." + d)), None)
    if domain is None:
        return None
    return _decision("allow", "webfetch.preapproved",
                     f"WebFetch of {host} is pre-approved (permission.webFetchPreapproved: "
                     f"{domain})")


def _host(url: object) -> str | None:
    if not isinstance(url, str):
        return None
    try:
        parts = urlsplit(url.strip())
        host = parts.hostname
    except ValueError:
        return None
    if parts.scheme.lower() not in ("http", "https") or not host:
        return None
    return host.lower().removesuffix(".")


def allowed_tools(config: PermissionConfig, call: Call) -> PermissionDecision | None:
    index = _first_match(config.allowed_tools, call, every=True)
    if index is None:
        return None
    pattern = config.allowed_tools[index]
    return _decision("allow", "config.allowedTools",
                     f"{call.tool.name} is allowed by permission.allowedTools ({pattern})")


def mode_default(_: PermissionConfig, call: Call) -> PermissionDecision:
    name, mode = call.tool.name, call.request.state.mode
    if call.read_only and not call.network:
        return _decision("allow", "tool.readOnly", f"{name} is read-only")
    if mode == "yolo":
        return _decision("allow", "mode.yolo.allowAll", "yolo mode allows every tool")
    if mode in ("build", "edit") and call.read_only:
        return _decision("ask", f"mode.{mode}.askNetwork",
                         f"{mode} mode asks before {name}: {call.why_not_read_only()}")
    if mode == "build":
        return _decision("ask", "mode.build.askWrites",
                         f"build mode asks before {name}: {call.why_not_read_only()}")
    if call.tool.file_edit:
        if call.inside_workspace:
            return _decision("allow", f"mode.{mode}.allowWorkspaceEdits",
                             f"{mode} mode allows file edits inside the workspace")
        return _decision("ask", f"mode.{mode}.askOutsideWorkspace",
                         f"{mode} mode asks before editing a file outside the workspace")
    if mode == "edit":
        rule = "mode.edit.askShell" if call.tool.shell else "mode.edit.askWrites"
        return _decision("ask", rule, f"edit mode asks before {name}: {call.why_not_read_only()}")
    if call.destructive:
        return _decision("ask", "mode.auto.askDestructive",
                         f"auto mode asks before destructive {name}: {call.why_not_read_only()}")
    return _decision("allow", "mode.auto.allowNonDestructive",
                     f"auto mode allows {name}: it is not destructive")


STEPS: tuple[Step, ...] = (
    disallowed_tools,
    plan_transition,
    user_interaction,
    _project_rule("deny", "deny"),
    _project_rule("ask", "ask"),
    plan_file,
    plan_check,
    _project_rule("allow", "allow", every=True),
    webfetch_preapproved,
    allowed_tools,
)
"""The checks before the mode default, in the PM-3 order."""


def decide(config: PermissionConfig, request: PermissionRequest) -> PermissionDecision:
    """Run :data:`STEPS` in order; the mode default decides when none of them did."""
    call = Call.of(request)
    for step in STEPS:
        decision = step(config, call)
        if decision is not None:
            return decision
    return mode_default(config, call)

# -- the service: one pure decision per tool call (PM-1 … PM-4, AQ-5, TR-3) ------------------

class HasPermissionConfig(Protocol):
    """Anything carrying a ``permission`` table, such as a loaded ``WorkspaceConfig``."""

    @property
    def permission(self) -> PermissionConfig: ...


class PermissionService:
    """Decides tool calls by the project rules of one workspace configuration."""

    def __init__(self, config: PermissionConfig | HasPermissionConfig | None = None) -> None:
        if config is None:
            config = PermissionConfig()
        self._config = config if isinstance(config, PermissionConfig) else config.permission

    @property
    def config(self) -> PermissionConfig:
        """The ``[permission]`` rules this service applies."""
        return self._config

    def check(self, request: PermissionRequest) -> PermissionDecision:
        """The decision for one call: the first check of the PM-3 order that decides."""
        return decide(self._config, request)
