"""Split a shell command into simple commands, redirections and substitutions, without running it.

A small quote-aware scanner finds what the shell itself would treat as structure: the control
operators ``;``, ``&``, ``&&``, ``||``, ``|``, ``|&``, newlines and ``(`` ``)``; the
redirections ``<``, ``<<``, ``<<<``, ``<>``, ``<&``, ``>``, ``>>``, ``>|``, ``>&``, ``&>``,
``&>>`` (with their target word and an adjacent file-descriptor number); here-documents
(their bodies are data, not commands); and command or process substitutions ``$(…)``,
`` `…` ``, ``<(…)``, ``>(…)``, whose bodies are returned for classification of their own.
Operators inside single or double quotes, or escaped with ``\\``, are plain text. The words
of each simple command are then split and unquoted as :func:`shlex.split` does (POSIX rules,
``#`` is not a comment). Unterminated quotes or substitutions raise :class:`ShellParseError`.

Every step takes time linear in the command's length (SPEC EG-5): a run of plain characters
is taken by one regular expression match, not a character at a time, and the words are
split by :func:`split_words`, a linear equivalent of :func:`shlex.split` (which adds one
character at a time to a string, quadratic in the length of a word).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

__all__ = [
    "SUBSTITUTION",
    "ParsedCommand",
    "Redirect",
    "ShellParseError",
    "SimpleCommand",
    "parse_command",
    "split_words",
]

SUBSTITUTION = "$(subst)"
"""The word left in place of a command or process substitution."""

_OPERATORS = sorted(
    ["&>>", "<<<", "&&", "||", ";;", "|&", ">>", ">|", ">&", "&>", "<<", "<>", "<&",
     ";", "&", "|", ">", "<", "(", ")", "\n"],
    key=len, reverse=True,
)
_OP_CHARS = frozenset(";&|<>()\n")
_TOKEN = re.compile(
    r"([^\\'\"`$;&|<>()\n]*)("
    + "|".join(re.escape(op) + (r"(?!\()" if op in ("<", ">") else "") for op in _OPERATORS) + ")?"
)
"""A run the scanner copies as it is, then the longest operator there if there is one
(alternatives are tried longest first; ``<(`` and ``>(`` start process substitutions). When
both are empty, a quote, a backslash, a backquote or a ``$`` is next, for
:meth:`_Scanner._step`."""
_MAX_NESTING = 32
_REDIRECTS = frozenset({">", ">>", ">|", ">&", "&>", "&>>", "<", "<<", "<<<", "<>", "<&"})
_PLAIN_QUOTED = re.compile(r'[^\\"`$]+')
"""A run inside double quotes that needs no look."""
_SIMPLE_DOUBLE_QUOTED = re.compile(r'"(?:[^\\"`$]|\$(?!\())*"')
"""A double-quoted string with no backslash, backquote or ``$(`` in it."""
_BACKSLASH_OR_BACKQUOTE = re.compile(r"[\\`]")
_EXPANSION = re.compile(r"\\|`|\$\(")
_WORD_PIECE = re.compile(
    r"(?P<space>[ \t\r\n]+)|(?P<plain>[^ \t\r\n'\"\\]+)|'(?P<single>[^']*)'"
    r'|"(?P<double>[^"\\]*(?:\\.[^"\\]*)*)"|\\(?P<escaped>.)',
    re.DOTALL,
)
_QUOTED_ESCAPE = re.compile(r"\\(.)", re.DOTALL)
_BARE_WORD = re.compile(r"[^ \t\r\n]+")
"""Without quotes or backslashes, the words are the runs between blanks."""
_OPEN_DOUBLE_ENDING_IN_ESCAPE = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*\\\Z', re.DOTALL)


class ShellParseError(ValueError):
    """The command cannot be split safely (unterminated quote or substitution, bad syntax)."""


@dataclass(frozen=True, slots=True)
class Redirect:
    """One redirection: its operator (``>``, ``2>``-style fds are dropped) and target word."""

    op: str
    target: str

    @property
    def writes(self) -> bool:
        """Whether it opens something for writing (every operator with ``>``, and ``<>``)."""
        return ">" in self.op


@dataclass(frozen=True, slots=True)
class SimpleCommand:
    """The unquoted words of one simple command (assignments included) and its redirections."""

    argv: tuple[str, ...]
    redirects: tuple[Redirect, ...] = ()

    @property
    def text(self) -> str:
        """Words and redirections joined by single spaces, as rule patterns see them."""
        if not self.redirects:
            return " ".join(self.argv)
        return " ".join([*self.argv, *(f"{r.op}{r.target}" for r in self.redirects)])


@dataclass(frozen=True, slots=True)
class ParsedCommand:
    """A command line split into simple commands, plus what the scanner noticed on the way."""

    commands: tuple[SimpleCommand, ...]
    substitutions: tuple[str, ...] = ()
    """Bodies of ``$(…)``, backquotes, ``<(…)``, ``>(…)`` and unquoted here-doc expansions."""
    function_definition: bool = False


def parse_command(command: str) -> ParsedCommand:
    """Split ``command``; raise :class:`ShellParseError` when it cannot be split safely."""
    scanner = _Scanner(command)
    parts = scanner.run()
    commands, function_definition = _assemble(parts)
    return ParsedCommand(tuple(commands), tuple(scanner.substitutions), function_definition)


@dataclass
class _Scanner:
    text: str
    i: int = 0
    chunk: list[str] = field(default_factory=list)
    parts: list[str] = field(default_factory=list)
    """Text and operators taking turns, text first and last (it may be empty)."""
    substitutions: list[str] = field(default_factory=list)
    heredocs: list[tuple[str, bool, bool]] = field(default_factory=list)
    nested: bool = False
    """Scanning the body of ``$(…)``: stop at the unmatched ``)``."""
    depth: int = 0
    closed: bool = False
    level: int = 0
    """How many substitutions enclose this scan (bounded by ``_MAX_NESTING``)."""

    def run(self) -> list[str]:
        text, size = self.text, len(self.text)
        while self.i < size and not self.closed:
            token = _TOKEN.match(text, self.i)
            assert token is not None  # the expression matches the empty string
            plain, op = token.groups()
            if plain:
                self.chunk.append(plain)
                self.i += len(plain)
            if op:
                self._operator(op)
            elif not plain:
                self._step()
        if self.nested and not self.closed:
            raise ShellParseError("unterminated command substitution")
        self._flush()
        return self.parts

    def _step(self) -> None:
        text, i = self.text, self.i
        char, nxt = text[i], text[i + 1:i + 2]
        if char == "\\":
            self.chunk.append("" if nxt == "\n" else text[i:i + 2])
            self.i = i + 2
        elif char == "'":
            end = text.find("'", i + 1)
            if end == -1:
                raise ShellParseError("unterminated single quote")
            self.chunk.append(text[i:end + 1])
            self.i = end + 1
        elif char == '"':
            self._double_quoted()
        elif char == "`" or (char == "$" and nxt == "("):
            self._substitution()
        elif char in "<>" and nxt == "(":
            self.i += 1
            self._substitution()
        else:  # a ``$`` that starts no substitution
            self.chunk.append(char)
            self.i = i + 1

    def _double_quoted(self) -> None:
        simple = _SIMPLE_DOUBLE_QUOTED.match(self.text, self.i)
        if simple is not None:  # nothing inside to look at: copied as it is
            self.chunk.append(simple.group())
            self.i = simple.end()
            return
        out = ['"']
        self.i += 1
        while self.i < len(self.text):
            char, nxt = self.text[self.i], self.text[self.i + 1:self.i + 2]
            if char == "\\":
                out.append("" if nxt == "\n" else self.text[self.i:self.i + 2])
                self.i += 2
            elif char == '"':
                self.chunk.append("".join([*out, '"']))
                self.i += 1
                return
            elif char == "`" or (char == "$" and nxt == "("):
                self.chunk.append("".join(out))
                out = []
                self._substitution()
            else:
                plain = _PLAIN_QUOTED.match(self.text, self.i)
                end = self.i + 1 if plain is None else plain.end()
                out.append(self.text[self.i:end])
                self.i = end
        raise ShellParseError("unterminated double quote")

    def _substitution(self) -> None:
        body, self.i = _substitution_at(self.text, self.i, self.level + 1)
        self.substitutions.append(body)
        self.chunk.append(SUBSTITUTION)

    def _operator(self, op: str) -> None:
        if op == ")":
            if self.nested and self.depth == 0:
                self.closed = True
                return
            self.depth -= 1
        elif op == "(":
            self.depth += 1
        self._flush()
        self.parts.append(op)
        self.i += len(op)
        if op == "<<":
            self._heredoc_delimiter()
        elif op == "\n" and self.heredocs:
            self._heredoc_bodies()

    def _flush(self) -> None:
        self.parts.append("".join(self.chunk))
        self.chunk.clear()

    def _heredoc_delimiter(self) -> None:
        start = self.i
        while self.i < len(self.text) and self.text[self.i] in " \t":
            self.i += 1
        word_start = self.i
        while self.i < len(self.text) and self.text[self.i] not in " \t" + "".join(_OP_CHARS):
            quote = self.text[self.i]
            end = self.text.find(quote, self.i + 1) if quote in "'\"" else self.i
            if end == -1:
                raise ShellParseError("unterminated quote in a here-document delimiter")
            self.i = end + 1
        raw = self.text[word_start:self.i]
        self.chunk.append(self.text[start:self.i])
        strip_tabs = raw.startswith("-")
        words = _words(raw[1:] if strip_tabs else raw)
        if not words:
            raise ShellParseError("here-document without a delimiter")
        self.heredocs.append((words[0], strip_tabs, any(q in raw for q in "'\"\\")))

    def _heredoc_bodies(self) -> None:
        for delimiter, strip_tabs, quoted in self.heredocs:
            lines: list[str] = []
            while self.i < len(self.text):
                end = self.text.find("\n", self.i)
                end = len(self.text) if end == -1 else end
                line, self.i = self.text[self.i:end], end + 1
                if (line.lstrip("\t") if strip_tabs else line) == delimiter:
                    break
                lines.append(line)
            if not quoted:
                self.substitutions.extend(_expansions("\n".join(lines)))
        self.heredocs = []


def _substitution_at(text: str, i: int, level: int) -> tuple[str, int]:
    """The body of the substitution starting at ``i`` and the index just after it."""
    if level > _MAX_NESTING:
        raise ShellParseError("substitutions nested too deeply")
    if text[i] == "`":
        end = _closing_backquote(text, i + 1)
        return text[i + 1:end], end + 1
    start = i + 2 if text[i] == "$" else i + 1
    inner = _Scanner(text, start, nested=True, level=level)
    inner.run()
    return text[start:inner.i], inner.i + 1


def _expansions(body: str) -> list[str]:
    """Substitutions in an unquoted here-document body (quotes are plain text there)."""
    found: list[str] = []
    i = 0
    try:
        while (match := _EXPANSION.search(body, i)) is not None:
            if match.group() == "\\":
                i = match.start() + 2
            else:
                sub, i = _substitution_at(body, match.start(), 1)
                found.append(sub)
    except ShellParseError:
        found.append(body)
    return found


def _closing_backquote(text: str, start: int) -> int:
    i = start
    while (match := _BACKSLASH_OR_BACKQUOTE.search(text, i)) is not None:
        if match.group() == "`":
            return match.start()
        i = match.start() + 2
    raise ShellParseError("unterminated backquote substitution")


def _assemble(parts: list[str]) -> tuple[list[SimpleCommand], bool]:
    commands: list[SimpleCommand] = []
    argv: list[str] = []
    redirects: list[Redirect] = []
    function_definition = False
    pending: str | None = None
    for index, value in enumerate(parts):
        if not index % 2:  # text, at the even places
            words = _words(value)
            if pending is not None:
                if not words:
                    raise ShellParseError(f"redirection {pending!r} without a target")
                redirects.append(Redirect(pending, words.pop(0)))
                pending = None
            argv.extend(words)
        elif value in _REDIRECTS:
            if pending is not None:
                raise ShellParseError(f"redirection {pending!r} without a target")
            _drop_fd_number(parts[index - 1], argv)
            pending = value
        else:
            if value == "(" and argv and _empty_parens(parts, index):
                function_definition = True
            if argv or redirects:
                commands.append(SimpleCommand(tuple(argv), tuple(redirects)))
                argv, redirects = [], []
    if pending is not None:
        raise ShellParseError(f"redirection {pending!r} without a target")
    if argv or redirects:
        commands.append(SimpleCommand(tuple(argv), tuple(redirects)))
    return commands, function_definition


def _words(text: str) -> list[str]:
    try:
        return split_words(text)
    except ValueError as exc:
        raise ShellParseError(str(exc)) from exc


def split_words(text: str) -> list[str]:
    """``shlex.split(text)`` (POSIX, no comments), word for word and error for error, in
    time linear in ``len(text)``: each word is a list of pieces joined once."""
    if "'" not in text and '"' not in text and "\\" not in text:
        return _BARE_WORD.findall(text)
    words: list[str] = []
    pieces: list[str] = []
    quoted = False
    i = 0
    while i < len(text):
        match = _WORD_PIECE.match(text, i)
        if match is None:  # a quote never closed, or a backslash at the end
            escape = text[i] == "\\" or _OPEN_DOUBLE_ENDING_IN_ESCAPE.match(text, i)
            raise ValueError("No escaped character" if escape else "No closing quotation")
        kind = match.lastgroup or ""
        if kind == "space":
            if pieces or quoted:
                words.append("".join(pieces))
            pieces, quoted = [], False
        elif kind == "double":
            body = match.group(kind)
            pieces.append(_QUOTED_ESCAPE.sub(_unescape_quoted, body) if "\\" in body else body)
            quoted = True
        else:
            pieces.append(match.group(kind))
            quoted = quoted or kind == "single"
        i = match.end()
    if pieces or quoted:
        words.append("".join(pieces))
    return words


def _unescape_quoted(match: re.Match[str]) -> str:
    """Inside double quotes a backslash escapes only ``"`` and itself (as in shlex)."""
    return match.group(1) if match.group(1) in '"\\' else match.group()


def _drop_fd_number(before: str, argv: list[str]) -> None:
    """``2>file``: the digits glued to the operator name a file descriptor, not a word."""
    digits = before[len(before.rstrip("0123456789")):]
    if digits and before[:-len(digits)][-1:] in ("", " ", "\t") and argv and argv[-1] == digits:
        argv.pop()


def _empty_parens(parts: list[str], index: int) -> bool:
    rest = parts[index + 1:index + 3]
    return len(rest) == 2 and not rest[0].strip() and rest[1] == ")"
