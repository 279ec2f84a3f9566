"""How a Bash command is read: bash's own grammar (tree-sitter-bash), allow-lists, fail closed.

The command is parsed by `tree-sitter-bash`_, so comments, every quoting form, here-documents,
arithmetic, ``[[ … ]]`` tests, parameter expansions, substitutions, redirections and compound
commands are what bash says they are, not what a hand-written scanner guesses. Then every node
of the tree is looked at:

**destructive** (``auto`` mode asks) when the tree has an error or a missing part (bash's
grammar cannot read it: nothing can be said about it), the line is longer than 65536
characters, scripts nest more than 8 deep, or any command anywhere in the tree — inside
substitutions, functions, loops, here-documents, behind a wrapper (``sudo``, ``doas``, ``env``
and ``env -S``, ``nohup``, ``exec``, ``xargs``, ``time``, ``nice``, ``timeout``, ``command``,
``busybox``, ``setsid``, ``stdbuf``, ``ionice``, ``chrt``, ``taskset``, ``watch``, ``flock``,
``nsenter``, ``chroot``: any later word naming a program below is read as the command), in the
script of ``sh``/``bash``/``zsh``/``dash``/``ksh``/``mksh``/``fish -c`` or ``eval`` — is:

- a command whose name is computed at run time (``$CMD``, ``$(echo rm)``, ``r?``);
- ``rm`` with ``-r``/``-R``/``-f`` (clustered, anywhere before ``--``, or a long option
  getopt would take for ``--recursive``/``--force``: ``--rec``), with a word bash computes
  that may expand to an option (``rm $x``, ``rm {-rf,x}``), or a target of ``/``, ``/*``,
  ``~``, ``~/``, ``.``, ``..``, ``*``, ``$HOME``;
- ``dd``, ``mkfs``/``mkfs.*``, ``mke2fs``, ``mkswap``, ``fdisk``, ``sfdisk``, ``cfdisk``,
  ``parted``, ``wipefs``, ``shred``, ``shutdown``, ``reboot``, ``halt``, ``poweroff``;
- ``chmod``, ``chown``, ``chgrp`` with ``-R``/``--recursive``; ``crontab -r``;
- a redirection into a block device (``> /dev/sda``);
- ``find`` with ``-delete``, or ``-exec``/``-execdir``/``-ok``/``-okdir`` running ``rm``,
  ``rmdir``, ``unlink``, ``shred``, a destructive command or one computed at run time;
  ``xargs`` running a removal;
- git (:mod:`.shell_git`; long options also abbreviated): ``push`` with ``-f``/``--force``/
  ``--force-with-lease``/``--force-if-includes``/``--mirror``/``-d``/``--delete``/``--prune``
  or a ``+ref``/``:ref`` refspec; ``reset --hard``; ``clean -f`` (not with ``-n``);
  ``checkout`` with ``-f``/``--force``, ``.`` or ``--``; ``restore`` of the working tree;
  ``branch -D`` or ``--delete --force``; ``stash drop|clear``; ``reflog expire|delete``;
  ``filter-branch``; ``filter-repo``; ``update-ref -d``;
- a function that pipes into itself (a fork bomb, ``:(){ :|:& };:``).

**read-only** only when the tree holds nothing but these: lists (``;``, ``&&``, ``||``, ``&``,
newlines), pipelines, ``{ …; }``, ``( … )``, ``!``, ``if``/``elif``/``else``, ``while``/
``until``, comments, ``[[ … ]]`` tests (no ``-v``/``-R``; arithmetic comparisons of literal
numbers only), ``(( … ))`` and ``$(( … ))`` of literal numbers, redirections that read (``<``,
here-documents and here-strings with nothing computed in them but plain ``$name``), output
redirections to ``/dev/null``, ``/dev/stdout``, ``/dev/stderr`` or a descriptor (``2>&1``), and
simple commands whose program, with every option and argument, is on :data:`PROGRAMS`:
options are matched exactly (no abbreviation of a long option; a cluster of short options
only when each letter is allowed; ``--`` ends the options); an argument bash computes (``$x``,
``${x}``, a glob, a brace expansion, ``$'…'``) is accepted only where no value it could take
would be a harmful option. The only expansions accepted are ``$name``, ``${name}`` and the
special parameters: ``${x@P}``, ``${!x}``, subscripts, defaults and every other form that
makes bash compute something is not read-only. Any other node (an unknown kind included), a
substitution, a variable assignment, a function definition, an unknown program or option is
**write**: not read-only, not destructive.

.. _tree-sitter-bash: https://github.com/tree-sitter/tree-sitter-bash
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Literal

import tree_sitter
import tree_sitter_bash

from .shell_git import GIT_DESTRUCTIVE_SUBCOMMANDS, git_destructive, split_git

__all__ = [
    "PROGRAMS",
    "CommandReading",
    "Program",
    "ShellClass",
    "ShellVerdict",
    "Word",
    "classify",
    "read",
    "simple_commands",
]

ShellClass = Literal["read_only", "write", "destructive"]

MAX_LENGTH = 65536
"""Longer commands are not read (destructive: nothing can be said about them)."""
MAX_PIPES = 1024
"""Lines with more ``|`` are not read (destructive): tree-sitter-bash takes time quadratic in
the stages of a pipeline (2,000 stages of ``(ls -la) |``: 0.16 s; 9,000: 1.5 s; 1,024: a few
hundredths), and no command an agent runs has that many."""
MAX_DEPTH = 8
"""How deep scripts in scripts (``bash -c``, ``eval``, ``find -exec``) are read."""

_LANGUAGE = tree_sitter.Language(tree_sitter_bash.language())
_local = threading.local()


def _parser() -> tree_sitter.Parser:
    parser: tree_sitter.Parser | None = getattr(_local, "parser", None)
    if parser is None:
        parser = _local.parser = tree_sitter.Parser(_LANGUAGE)
    return parser


@dataclass(frozen=True, slots=True)
class ShellVerdict:
    """What the classifier says about a command, and why (the reason is human-readable)."""

    kind: ShellClass
    reason: str

    @property
    def read_only(self) -> bool:
        return self.kind == "read_only"

    @property
    def destructive(self) -> bool:
        return self.kind == "destructive"


@dataclass(frozen=True, slots=True)
class Word:
    """One argument as bash will see it: ``value`` is ``None`` when bash computes it at run
    time (an expansion, a brace expansion, ``$'…'``); ``glob`` when unquoted pattern
    characters make it expand to file names."""

    text: str
    value: str | None
    glob: bool = False
    splits: bool = False
    """Holds an unquoted expansion: bash splits it into words, any of which may be ``-…``."""
    braces: bool = False
    """A brace expansion: several words, each starting as the word does."""

    @property
    def several(self) -> bool:
        """Whether bash may make several words of it."""
        return self.splits or self.braces or self.glob

    @property
    def known(self) -> bool:
        return self.value is not None and not self.glob

    @property
    def option_like(self) -> bool:
        """Whether bash may hand it to the program as an option (``-…``)."""
        if self.value is None:
            # Unless it starts with a plain character and is not split: ``a{1..3}``, "x$y".
            return self.splits or not self.text or self.text[0] in _MAY_START_OPTION
        if self.glob:
            return self.value[:1] in ("*", "?", "[", "-")
        return self.value.startswith("-")

    def __str__(self) -> str:
        return self.value if self.value is not None else self.text


_MAY_START_OPTION = frozenset("-{$`\"'*?[\\")
"""First characters of a computed word that may leave it starting with ``-``."""


# -- the programs that only read ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Program:
    """A read-only program and what it may be given.

    ``flags``: short options without a value; ``valued``: short options taking one (attached
    or the next word); ``long``/``long_valued``: long options, matched exactly (``--x=v`` or
    ``--x v`` for the valued ones); ``any_option``: every option the program has only reads,
    so words bash computes are fine anywhere; ``operands``: the most operands (``None``: any);
    ``options_first``: a shell builtin, whose options end at the first operand; ``digits``:
    ``-NUM`` is an option (``head -5``).
    """

    flags: str = ""
    valued: str = ""
    long: frozenset[str] = frozenset()
    long_valued: frozenset[str] = frozenset()
    any_option: bool = False
    operands: int | None = None
    options_first: bool = False
    digits: bool = False
    note: str = ""


def _p(flags: str = "", valued: str = "", long: str = "", long_valued: str = "",
       **options: object) -> Program:
    return Program(flags, valued, frozenset(long.split()), frozenset(long_valued.split()),
                   **options)  # type: ignore[arg-type]


_ANY = Program(any_option=True)
"""Programs none of whose options write or run anything (checked against their manuals)."""

PROGRAMS: dict[str, Program] = {
    # Every option only reads or formats: words bash computes are fine anywhere.
    **{name: _ANY for name in (
        "ls", "cat", "head", "tail", "wc", "grep", "egrep", "fgrep", "pwd", "echo", "which",
        "whoami", "id", "uname", "stat", "du", "df", "basename", "dirname", "realpath",
        "readlink", "diff", "cmp", "nl", "cut", "tr", "printenv", "true", "false", "seq",
        "rev", "paste", "tac", "expr", "comm", "join", "fold", "column", "numfmt", "md5sum",
        "sha1sum", "sha256sum", "sha512sum", "b2sum", "cksum", "ps", "pgrep", "free",
        "uptime", "nproc", "groups", "arch", "tty", "cd", "type", "jq", "od", "hexdump",
        "strings",
    )},
    "printf": _p(options_first=True, note="printf -v assigns a variable"),
    "uniq": _p("cdiuz", "fsw", "--count --repeated --unique --ignore-case --zero-terminated",
               "--skip-fields --skip-chars --check-chars", operands=1,
               note="a second operand is the file uniq writes"),
    "sort": _p("bdfgiMhnRrVcCsuz", "ktS",
               "--ignore-leading-blanks --dictionary-order --ignore-case --general-numeric-sort "
               "--ignore-nonprinting --month-sort --human-numeric-sort --numeric-sort "
               "--random-sort --reverse --version-sort --check --stable --unique "
               "--zero-terminated",
               "--key --field-separator --buffer-size --sort --parallel"),
    "tree": _p("adlfxLPIginpugshDFrtvUcCJQS", "",
               "--noreport --dirsfirst --prune --charset --du --si", "--filelimit --sort",
               note="tree -o writes a file"),
    "file": _p("bciklLNnrsSzZ0", "eFfmP",
               "--brief --mime --mime-type --mime-encoding --dereference --no-dereference "
               "--keep-going --uncompress --special-files --no-pad --print0 --raw --extension "
               "--apple", "--exclude --separator --files-from --magic-file --parameter",
               note="file -C compiles a magic file"),
    "date": _p("uRI", "dr", "--utc --universal --rfc-email --iso-8601 --rfc-3339 --debug",
               "--date --reference", note="date -s sets the clock"),
    "find": _p("HLP", "D", note="only tests (-name, -type, -newer, -maxdepth, …) and the "
               "actions -print, -print0, -printf, -ls, -prune, -quit"),
    "rg": _p("iIsSFwxvcClLnNoaUuz.0", "egtTABCmMjr",
             "--ignore-case --smart-case --case-sensitive --fixed-strings --word-regexp "
             "--line-regexp --invert-match --count --count-matches --files-with-matches "
             "--files-without-match --line-number --no-line-number --only-matching --hidden "
             "--no-ignore --files --json --vimgrep --no-heading --heading --with-filename "
             "--no-filename --follow --multiline --null --pretty --stats --sort-files "
             "--no-messages --unrestricted --text --trim --column",
             "--regexp --glob --iglob --type --type-not --after-context --before-context "
             "--context --max-count --max-depth --max-columns --threads --color --colors "
             "--sort --sortr --replace --type-add --max-filesize --encoding",
             note="rg --pre runs a program"),
    "test": _p(note="file and string tests; not -v or -R (they evaluate a subscript); a "
               "word bash computes only where it cannot become an operator"),
    "[": _p(note="as test, with its closing ]"),
    "command": _p(note="command -v/-V NAME looks a name up; command [-p] PROG as PROG"),
    "git": _p(note="the git subcommands below"),
    "python": _p(long="--version", flags="V", note="the version only"),
    "python3": _p(long="--version", flags="V", note="the version only"),
    "node": _p(long="--version", flags="v", note="the version only"),
    "npm": _p(note="npm --version, npm ls/list"),
    "pip": _p(note="pip --version, pip list/show/freeze"),
    "pip3": _p(note="pip --version, pip list/show/freeze"),
    "cargo": _p(long="--version", flags="V", note="the version only"),
    "rustc": _p(long="--version", flags="V", note="the version only"),
    "go": _p(note="go version"),
    "java": _p(long="--version -version", note="the version only"),
    "ruby": _p(long="--version", flags="v", note="the version only"),
    "gcc": _p(long="--version", note="the version only"),
    "make": _p(long="--version", note="the version only"),
    "docker": _p(long="--version", note="the version only"),
}
"""The read-only allow-list, by program name (the ``note`` says what is special)."""

_VERSION_ONLY = frozenset({"python", "python3", "node", "cargo", "rustc", "java", "ruby",
                           "gcc", "make", "docker"})

_FIND_TESTS_VALUED = frozenset({
    "-name", "-iname", "-path", "-ipath", "-wholename", "-iwholename", "-regex", "-iregex",
    "-type", "-xtype", "-maxdepth", "-mindepth", "-size", "-mtime", "-mmin", "-atime",
    "-amin", "-ctime", "-cmin", "-newer", "-user", "-group", "-perm", "-links", "-inum",
    "-samefile", "-uid", "-gid", "-lname", "-ilname", "-used", "-regextype", "-printf",
    "-fstype", "-anewer", "-cnewer", "-newermt", "-context",
})
_FIND_TESTS = frozenset({
    "-print", "-print0", "-ls", "-prune", "-quit", "-true", "-false", "-empty", "-readable",
    "-writable", "-executable", "-nouser", "-nogroup", "-depth", "-mount", "-xdev",
    "-follow", "-daystart", "-noleaf", "-not", "!", "(", ")", "-a", "-o", "-and", "-or", ",",
})


# -- reading a tree ---------------------------------------------------------------------------

_LEAVES = frozenset({"comment", "heredoc_body", "heredoc_content", "string_content",
                     "raw_string", "word", "ansi_c_string", "regex", "extglob_pattern"})
"""Nodes read as one piece of text (what is inside them is theirs, blanks included)."""
_SAFE_TARGETS = frozenset({"/dev/null", "/dev/stdout", "/dev/stderr"})
_BLOCK_DEVICE = re.compile(r"^/dev/(sd|hd|vd|xvd|nvme|mmcblk|disk|md|dm-|mapper/)")
_ARITHMETIC_COMPARE = frozenset({"-eq", "-ne", "-lt", "-le", "-gt", "-ge"})
_TEST_UNARY_EVALUATES = frozenset({"-v", "-R"})
_TEST_UNARY = frozenset({
    "-a", "-b", "-c", "-d", "-e", "-f", "-g", "-h", "-k", "-p", "-r", "-s", "-t", "-u", "-w",
    "-x", "-G", "-L", "-N", "-O", "-S", "-z", "-n", "-o",
})
_TEST_BINARY = frozenset({"=", "==", "!=", "<", ">", "-nt", "-ot", "-ef", *_ARITHMETIC_COMPARE})
_STRUCTURE = frozenset({
    "program", "list", "pipeline", "subshell", "negated_command",
    "if_statement", "elif_clause", "else_clause", "while_statement", "do_group", "comment",
})
"""Node kinds that only arrange commands: read-only when what they hold is."""
_STRUCTURE_TOKENS = frozenset({
    ";", "&", "&&", "||", "|", "|&", "\n", "(", ")", "{", "}", "!", "if", "then", "elif",
    "else", "fi", "while", "until", "do", "done",
})
_WORDS = frozenset({
    "word", "number", "string", "raw_string", "concatenation", "simple_expansion", "expansion",
    "ansi_c_string", "translated_string", "brace_expression", "command_substitution",
    "process_substitution", "arithmetic_expansion",
})
_READ_REDIRECTS = frozenset({"<", "<&"})
_WRITE_REDIRECTS = frozenset({">", ">>", ">|", "&>", "&>>", ">&", "<>"})
_ARITHMETIC_TOKENS = frozenset({
    "+", "-", "*", "/", "%", "**", "<<", ">>", "&", "|", "^", "~", "!", "<", ">", "<=", ">=",
    "==", "!=", "&&", "||", "(", ")", "?", ":", ",", "((", "))", "$((", "$[", "]",
})
_WRAPPERS = frozenset({"sudo", "doas", "env", "nohup", "exec", "xargs", "time", "nice",
                       "timeout", "command", "busybox", "setsid", "stdbuf", "ionice",
                       "chrt", "taskset", "watch", "flock", "unbuffer", "nsenter", "chroot",
                       "builtin", "unshare", "fakeroot", "strace", "ltrace", "runuser",
                       "parallel", "caffeinate", "systemd-run", "firejail"})
_SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "mksh", "fish", "su", "sg", "script",
                     "trap"})
"""Programs that run a script given as an argument (``-c SCRIPT``; ``trap SCRIPT``)."""
_ALWAYS_DESTRUCTIVE = frozenset({
    "dd", "mkfs", "mke2fs", "mkswap", "fdisk", "sfdisk", "cfdisk", "parted", "wipefs", "shred",
    "shutdown", "reboot", "halt", "poweroff",
})
_REMOVERS = frozenset({"rm", "unlink", "shred", "rmdir"})
_RM_TARGETS = frozenset({"/", "/*", "~", "~/", "~/*", ".", "..", "./", "*", "$HOME", "${HOME}"})


@dataclass(slots=True)
class _Reading:
    """What has been found so far in one command line (and the scripts inside it)."""

    depth: int = 0
    unparsed: bool = False
    destructive: str | None = None
    not_read_only: str | None = None
    commands: list[str] = field(default_factory=list)
    substitution: bool = False

    def write(self, reason: str) -> None:
        if self.not_read_only is None:
            self.not_read_only = reason

    def destroy(self, reason: str) -> None:
        if self.destructive is None:
            self.destructive = reason
        self.write(reason)

    def verdict(self) -> ShellVerdict:
        if self.destructive is not None:
            return ShellVerdict("destructive", self.destructive)
        if self.not_read_only is not None:
            return ShellVerdict("write", self.not_read_only)
        if not self.commands:
            return ShellVerdict("write", "an empty command is not on the read-only list")
        return ShellVerdict("read_only", "every command is read-only")


@dataclass(frozen=True, slots=True)
class CommandReading:
    """One read of a command line: the classifier's verdict, and the simple commands rule
    patterns match (each one's words unquoted, then its redirections; ``None`` when bash's
    grammar cannot read the line: rules then match it whole), and whether it substitutes."""

    verdict: ShellVerdict
    commands: tuple[str, ...] | None
    substitution: bool


def read(command: str) -> CommandReading:
    """Read ``command`` once, for both questions a permission check asks of it."""
    reading = _read(command, 0)
    verdict = reading.verdict()
    if len(command) > MAX_LENGTH:
        verdict = ShellVerdict("destructive", f"longer than {MAX_LENGTH} characters to classify")
    commands = None if reading.unparsed else tuple(reading.commands)
    return CommandReading(verdict, commands, reading.substitution)


def classify(command: str) -> ShellVerdict:
    """Classify a Bash command line by the rules of the module docstring."""
    if len(command) > MAX_LENGTH:
        return ShellVerdict("destructive", f"longer than {MAX_LENGTH} characters to classify")
    return _read(command, 0).verdict()


def simple_commands(command: str) -> tuple[tuple[str, ...], bool] | None:
    """The text of each simple command, and whether the line has a command or process
    substitution; ``None`` when bash's grammar cannot read it (rules match it whole)."""
    reading = read(command)
    return None if reading.commands is None else (reading.commands, reading.substitution)


def _read(command: str, depth: int) -> _Reading:
    reading = _Reading(depth)
    if depth > MAX_DEPTH:
        reading.destroy("commands nested too deeply to classify")
        return reading
    try:
        source = command.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate (JSON can carry one): no text bash reads
        reading.unparsed = True
        reading.destroy("holds characters that are not Unicode text, so cannot be classified")
        return reading
    if source.count(b"|") > MAX_PIPES:
        reading.unparsed = True
        reading.destroy(f"more than {MAX_PIPES} '|' to classify")
        return reading
    if source[-1:] not in _BLANKS and b"\\" not in source and b"<<" not in source:
        source += _LINE_END
    root = _parser().parse(source).root_node
    if root.has_error or (_MAY_SKIP.search(source) and not _covered(root, source)):
        reading.unparsed = True
        reading.destroy("cannot be parsed by bash's grammar, so cannot be classified")
        return reading
    _Walker(reading, source).run(root)
    return reading


_LINE_END = b"\n"
"""Appended before parsing to a line that ends in a word, a quote or an operator: the same
script to bash, and a tree found without tree-sitter's error recovery. At the end of the input
a version of the parse left behind by the grammar's ambiguities (a pipeline of three or more
stages leaves one) is resumed and recovered after the tree is found, which costs 60-100 µs of
``a | b | c``'s 70-110; with a newline still to read it is dropped on the way (about 10 µs).
Not after a blank, nor in a line with a backslash or ``<<``: there the grammar reads a line
continuation or a here-document running to the end differently with a newline after it (a
differential run of 850,000 commands, the tests' and generated, found every reading the same
under these conditions)."""
_BLANKS = frozenset([b"", b" ", b"\t", b"\n", b"\r", b"\x0b", b"\x0c"])
_MAY_SKIP = re.compile(rb"[\\\r\x0b\x0c\x80-\xff#`]")
"""Where the grammar and bash may part: a backslash (``\\ `` skipped, ``\\⏎`` joining what
follows), carriage returns, vertical tabs, form feeds and Unicode spaces (blanks to the
grammar, not to bash), ``#`` (a comment only at the start of a word), a backquote (not a node
in a here-document). A line without any needs no look."""
_GAP = re.compile(rb"(?:[ \t\n]|\\\n)*")
"""What may lie between two tokens: blanks, newlines and line continuations."""
_BLANK = re.compile(rb"[ \t\n]")
_BEFORE_COMMENT = frozenset([b" ", b"\t", b"\n", b";", b"&", b"|", b"(", b")", b"<", b">"])
_QUOTED_TEXT = frozenset({"string_content", "heredoc_body", "heredoc_content"})
_ESCAPE = re.compile(r"\\.", re.DOTALL)
_SH_OPERATOR = re.compile(r"[;&|()<>\n]")
_SAME_TO_SH = frozenset({"string", "raw_string", "ansi_c_string", "translated_string",
                         "command_substitution", "simple_expansion", "expansion"})
"""Nodes sh reads as bash does inside ``[[ … ]]`` (their insides are judged as themselves)."""
_ANSI_C = re.compile(rb"\$'(?:[^'\\]|\\.)*'", re.DOTALL)
"""An ANSI-C string as bash ends it: at the first ``'`` no backslash escapes (the grammar
reads ``$'\\\\'`` on past its end)."""


def _covered(root: tree_sitter.Node, source: bytes) -> bool:
    """Whether bash reads the tokens the grammar read: every byte of ``source`` belongs to a
    token but blanks and line continuations (the grammar skips ``\\ `` before a word); no
    two tokens are joined by continuations alone (bash joins them: ``a\\⏎#``); a comment
    starts where bash starts one (``[[ -n ]]# ]]`` is no comment to bash); no continuation
    inside a string or here-document (bash removes it: ``"$\\⏎(cmd)"`` runs ``cmd``), no
    backquote in a here-document (the grammar makes no node of it), and each ANSI-C string
    ends where bash ends it."""
    cursor = root.walk()
    end = 0
    while True:
        node = cursor.node
        assert node is not None
        kind = node.type
        if node.child_count == 0 or kind in _LEAVES:
            start = node.start_byte
            if start > end:
                gap = source[end:start]
                if not _GAP.fullmatch(gap) or (
                    b"\\\n" in gap and not _BLANK.search(gap.replace(b"\\\n", b""))
                ):
                    return False
            if kind == "comment" and start > 0 and source[start - 1:start] not in _BEFORE_COMMENT:
                return False
            if kind == "ansi_c_string" and not _ANSI_C.fullmatch(source, start, node.end_byte):
                return False
            if kind in _QUOTED_TEXT:
                text = source[start:node.end_byte]
                if b"\\\n" in text or (kind != "string_content" and b"`" in text):
                    return False
            end = max(end, node.end_byte)
            descend = False
        else:
            descend = True
        if descend and cursor.goto_first_child():
            continue
        while not cursor.goto_next_sibling():
            if not cursor.goto_parent():
                return end == len(source) or bool(_GAP.fullmatch(source, end))


class _Walker:
    """Reads one tree with a stack of nodes still to read (no recursion: a command may nest
    thousands of levels deep)."""

    def __init__(self, reading: _Reading, source: bytes) -> None:
        self.reading = reading
        self.source = source
        self.stack: list[tree_sitter.Node] = []

    def text(self, node: tree_sitter.Node) -> str:
        return self.source[node.start_byte:node.end_byte].decode("utf-8", "surrogatepass")

    def run(self, root: tree_sitter.Node) -> None:
        stack = self.stack
        stack.append(root)
        while stack:
            self.node(stack.pop())

    def later(self, nodes: Sequence[tree_sitter.Node]) -> None:
        """Read ``nodes`` after the current one, in order."""
        self.stack.extend(reversed(nodes))

    # -- structure ------------------------------------------------------------------------------

    def node(self, node: tree_sitter.Node) -> None:
        kind = node.type
        if not node.is_named:
            if kind not in _STRUCTURE_TOKENS:
                self.reading.write(f"{kind!r} is not on the list of read-only shell syntax")
            return
        if kind == "redirected_statement":
            body = node.child_by_field_name("body")
            if body is not None and body.type == "command":
                redirects = [c for c in node.named_children if c != body]
                self.command(body, [self.redirect(c) for c in redirects])
                return
            self.later(node.children)
        elif kind in _STRUCTURE:
            self.later(node.children)
        elif kind == "command":
            self.command(node)
        elif kind == "compound_statement":
            self.compound(node)
        elif kind == "test_command":
            self.test_command(node)
        elif kind in ("file_redirect", "heredoc_redirect", "herestring_redirect"):
            self.redirect(node)
        elif kind == "function_definition":
            self.function(node)
        elif kind in _WORDS:
            self.word(node)
        elif kind in ("variable_assignment", "variable_assignments"):
            self.reading.write("sets shell variables")
            self.later(node.named_children)
        else:
            self.reading.write(f"{_named(kind)} is not on the list of read-only shell syntax")
            self.later(node.named_children)

    def compound(self, node: tree_sitter.Node) -> None:
        first = node.children[0].type if node.children else ""
        if first == "((":
            self.reading.commands.append(self.text(node))
            self.not_for_sh(node, "(( … ))")
            self.arithmetic(node)
            return
        self.later(node.children)

    def not_for_sh(self, node: tree_sitter.Node, what: str) -> None:
        """bash's ``[[ … ]]``, ``(( … ))`` and ``$[ … ]`` are plain words to sh, so what is an
        operator to sh in them is one: run by sh, ``[[ a > b ]]`` creates the file ``b``,
        ``(( 1 << 2 ))`` starts a here-document whose body (the next lines) sh expands,
        running the substitutions in it, and ``[[ -f x || touch ]]`` or ``[[ a =~ x;touch ]]``
        runs ``touch``. ``(( … ))`` and ``$[ … ]`` hold only numbers (the commands sh would
        run are numbers), so there only ``>`` and ``<<``; in ``[[ … ]]`` none of ``; & | ( )
        > <<`` nor a newline outside quotes and substitutions (a lone ``<`` reads a file)."""
        test = what == "[[ … ]]"
        stack = list(node.children)
        while stack:
            child = stack.pop()
            kind = child.type
            if kind in _SAME_TO_SH or (kind == "arithmetic_expansion" and child.children
                                       and child.children[0].type == "$(("):
                continue  # sh quotes, substitutes and computes these as bash does
            if child.child_count and kind not in _LEAVES:
                stack.extend(child.children)
                continue
            text = kind if not child.is_named else self.text(child)
            if test:
                bad = text not in ("[[", "]]", "<") and _SH_OPERATOR.search(text) is not None
            else:
                bad = ">" in text or "<<" in text
            if bad:
                self.reading.write(f"{what} with {text!r} in it: sh reads it as an operator "
                                   "(a command run, a file written or a here-document)")
                return

    def function(self, node: tree_sitter.Node) -> None:
        self.reading.write("defines a shell function")
        name_node = node.child_by_field_name("name")
        name = self.text(name_node) if name_node is not None else ""
        body = node.child_by_field_name("body")
        if body is not None and _calls_itself(body, name, self):
            self.reading.destroy("defines a fork bomb")
        if body is not None:
            self.later([body])

    # -- commands -------------------------------------------------------------------------------

    def command(self, node: tree_sitter.Node, redirects: Sequence[str] = ()) -> None:
        """A simple command (``redirects``: those of its redirected statement, as text)."""
        words: list[Word] = []
        name: Word | None = None
        assignments: list[str] = []
        redirected: list[str] = []
        end = -1
        for child in node.children:
            kind = child.type
            if not child.is_named:
                if kind != "$":
                    self.reading.write(f"{kind!r} is not on the list of read-only shell syntax")
                    continue
                kind = "word"  # a lone ``$`` is the word "$" to bash
            if kind in _WORDS and end >= 0 and _JOINED.fullmatch(self.source, end,
                                                                 child.start_byte):
                # Two words with nothing between them (or only a line continuation) are one
                # word to bash: the grammar and bash disagree about this line (``{\\a``).
                self.diverged()
            end = child.end_byte
            if not child.is_named:
                words.append(Word("$", "$"))
            elif kind == "command_name":
                (inner,) = child.named_children or (child,)
                name = self.word(inner)
            elif kind == "variable_assignment":
                self.reading.write("variable assignments before a command may change it")
                self.later(child.named_children)
                assignments.append(self.text(child))
            elif kind in ("file_redirect", "heredoc_redirect", "herestring_redirect"):
                redirected.append(self.redirect(child))
            elif kind in _WORDS:
                words.append(self.word(child))
            elif kind != "comment":
                self.reading.write(f"{_named(kind)} is not on the list of read-only shell syntax")
                self.later(child.named_children)
        # As rule patterns see it: assignments, the words unquoted, then the redirections.
        argv = [name, *words] if name is not None else words
        self.reading.commands.append(" ".join(
            [*assignments, *(str(w) for w in argv), *redirected, *redirects]))
        if name is None:
            self.reading.write("sets shell variables")
            return
        self.program([name, *words])

    def diverged(self) -> None:
        self.reading.unparsed = True
        self.reading.destroy("cannot be parsed by bash's grammar, so cannot be classified")

    def program(self, argv: Sequence[Word]) -> None:
        """Judge one simple command's words (a read-only wrapper's command comes back here,
        in the loop: ``time time … ls`` nests no calls)."""
        reading = self.reading
        for _ in range(MAX_DEPTH + 1):
            name = argv[0]
            if not name.known:
                reading.destroy(f"the command name {name.text!r} is computed at run time")
                return
            assert name.value is not None
            base = os.path.basename(name.value) or name.value
            args = list(argv[1:])
            reason = self.destructive(base, args, reading.depth)
            if reason is not None:
                reading.destroy(reason)
                return
            if "/" in name.value:
                reading.write(f"runs the program {name.value!r} by path")
                return
            if base in _SHELLS or base == "eval":
                self.script(base, args)
                return
            if base not in _WRAPPERS:
                not_read_only = _not_read_only(base, args)
                if not_read_only is not None:
                    reading.write(not_read_only)
                return
            inner = _wrapped_command(base, args)
            if inner is None:
                reading.write(f"{base!r} runs another command")
                return
            if not inner:
                if base not in ("command", "time"):  # ``command -v NAME`` looks a name up
                    reading.write(f"{base} without a command")
                return
            argv = inner
        reading.destroy("commands nested too deeply to classify")

    def script(self, base: str, args: list[Word]) -> None:
        """A shell's ``-c`` script or ``eval``'s words: never read-only (destructive when the
        script is: :meth:`destructive` read it)."""
        script = _shell_script(base, args)
        self.reading.write(f"{base} runs a script" if script is None
                           else f"{base!r} runs another command")

    def destructive(self, base: str, args: list[Word], depth: int) -> str | None:
        """Why ``base args`` is destructive, or ``None`` (a deny-list: best effort)."""
        if depth > MAX_DEPTH:
            return "commands nested too deeply to classify"
        if base in _ALWAYS_DESTRUCTIVE or base.startswith("mkfs."):
            return f"{base!r} can destroy data or stop the system"
        if base == "rm":
            return _rm(args)
        if base in ("chmod", "chown", "chgrp") and _has_option(args, "R", "--recursive"):
            return f"{base} -R changes a whole tree"
        if base == "crontab" and _has_option(args, "r", "--remove"):
            return "crontab -r deletes the crontab"
        if base == "find":
            return self.find_destructive(args, depth)
        if base == "git":
            reason = git_destructive([str(a) for a in args])
            if reason is None and any(not a.known and a.option_like for a in args):
                sub = split_git([str(a) for a in args])[1]
                if sub in GIT_DESTRUCTIVE_SUBCOMMANDS:
                    return f"git {sub}: a word bash computes may expand to a forcing option"
            return reason
        if base in ("su", "sg", "script"):
            # Their own arguments are not parsed here: every word may be the script.
            for word in args:
                if not word.known:
                    return f"{base} runs a script computed at run time"
                reason = _read(word.value or "", depth + 1).destructive
                if reason is not None:
                    return reason
            return None
        if base in _SHELLS or base == "eval":
            script = _shell_script(base, args)
            if script is None:
                return None
            if script.value is None:
                return f"{base} runs a script computed at run time"
            return _read(script.value, depth + 1).destructive
        if base == "env":
            reason = self.env_split(args, depth)
            if reason is not None:
                return reason
        if base in _WRAPPERS:
            # Any later word may be the command it runs (its own options are not parsed).
            for start, word in enumerate(args):
                if not word.known or word.option_like:
                    continue
                inner_base = os.path.basename(word.value or "")
                if base == "xargs" and inner_base in _REMOVERS:
                    return "xargs runs a removal on every input"
                if inner_base in _DANGEROUS_NAMES or inner_base.startswith("mkfs."):
                    reason = self.destructive(inner_base, args[start + 1:], depth + 1)
                    if reason is not None:
                        return reason
                    if inner_base in _WRAPPERS or inner_base in _SHELLS or inner_base == "eval":
                        break  # it read every later word itself: once is linear, not n ** 8
        return None

    def env_split(self, args: list[Word], depth: int) -> str | None:
        """``env -S STRING`` runs the command the string splits into."""
        split = next((i for i, a in enumerate(args) if str(a).startswith("--split-string")
                      or (str(a).startswith("-") and not str(a).startswith("--")
                          and "S" in str(a))), None)
        if split is None:
            return None
        value = str(args[split])
        attached = (value.partition("=")[2] if value.startswith("--")
                    else value[value.index("S") + 1:])
        script = Word(attached, attached) if attached else (
            args[split + 1] if split + 1 < len(args) else Word("", ""))
        if script.value is None:
            return "env -S runs a command computed at run time"
        return _read(script.value, depth + 1).destructive

    def find_destructive(self, args: list[Word], depth: int) -> str | None:
        values = [str(a) for a in args]
        if "-delete" in values:
            return "find -delete removes files"
        computed = next((a for a in args if not a.known and a.option_like), None)
        if computed is not None:
            return f"find {computed.text}: may expand to -delete or -exec rm"
        index = 0
        while index < len(values):
            arg = values[index]
            index += 1
            if arg in ("-exec", "-execdir", "-ok", "-okdir"):
                end = next((i for i in range(index, len(values)) if values[i] in (";", "+")),
                           len(values))
                inner = args[index:end]
                if inner and inner[0].known:
                    inner_base = os.path.basename(inner[0].value or "")
                    if inner_base in _REMOVERS:
                        return f"find {arg} removes files"
                    if inner_base in _DANGEROUS_NAMES:
                        reason = self.destructive(inner_base, list(inner[1:]), depth + 1)
                        if reason is not None:
                            return reason
                elif inner:
                    return f"find {arg} runs a command computed at run time"
                index = end + 1
        return None

    # -- words ----------------------------------------------------------------------------------

    def word(self, node: tree_sitter.Node) -> Word:
        """The word bash makes of ``node``; substitutions inside are read as commands."""
        kind = node.type
        text = self.text(node)
        if kind == "word":
            if _BLANK_IN_WORD.search(text):
                self.diverged()  # bash splits it: the grammar read two words as one
            return _plain_word(text)
        if kind == "number":
            return Word(text, text)
        if kind == "raw_string":
            return Word(text, text[1:-1])
        if kind in ("string", "translated_string"):
            return self.string(node, text)
        if kind == "concatenation":
            children = node.named_children
            parts = [self.word(child) for child in children]
            if len(children) != node.child_count:  # a ``$`` in it: ``a$"b"`` is ``ab``
                return Word(text, None)
            if any(p.splits for p in parts):
                return Word(text, None, splits=True)
            if any(p.braces for p in parts) or (any(
                c.type == "word" and "{" in p.text for c, p in zip(children, parts, strict=True)
            ) and _BRACES.search(text)):
                return Word(text, None, braces=True)  # a brace expansion: several words
            if any(p.value is None for p in parts):
                return Word(text, None)
            value = "".join(p.value or "" for p in parts)
            return Word(text, value, glob=any(p.glob for p in parts))
        if kind in ("simple_expansion", "expansion"):
            self.expansion(node)
            return Word(text, None, splits=True)
        if kind == "command_substitution":
            self.substitution(node)
            return Word(text, None, splits=True)
        if kind == "process_substitution":
            self.substitution(node)
        elif kind == "arithmetic_expansion":
            if node.children and node.children[0].type == "$[":
                self.not_for_sh(node, "$[ … ]")
            self.arithmetic(node)
        elif kind == "brace_expression":
            return Word(text, None, braces=True)
        elif kind == "ansi_c_string":
            if any(escape.group() == "\\'" for escape in _ESCAPE.finditer(text, 2)):
                # sh has no $'…': to it the string ends at that quote, and what bash reads
                # as quoted text after it, sh runs
                self.reading.write("a $'…' string with \\' in it is read otherwise by sh")
        else:
            self.reading.write(f"{_named(kind)} is not on the list of read-only shell syntax")
            self.later(node.named_children)
        return Word(text, None)

    def string(self, node: tree_sitter.Node, text: str) -> Word:
        """``"…"`` (or ``$"…"``): its text between the quotes, unescaped, unless something
        in it is computed (the grammar leaves blanks out of its ``string_content``)."""
        known = True
        for child in node.named_children:
            if child.type != "string_content":
                self.word(child)
                known = False
        if not known:
            return Word(text, None)
        inner = text[text.index('"') + 1:-1]
        return Word(text, _unescape_double(inner))

    def expansion(self, node: tree_sitter.Node) -> None:
        """Only ``$name``, ``${name}`` and the special parameters: anything else is computed
        by bash (``${x@P}`` runs the prompt expansion, ``${!x}`` reads another variable,
        subscripts and defaults evaluate)."""
        named = node.named_children
        tokens = [c.type for c in node.children if not c.is_named]
        plain = len(named) == 1 and named[0].type in ("variable_name", "special_variable_name")
        if plain and tokens == (["$"] if node.type == "simple_expansion" else ["${", "}"]):
            return
        self.reading.write(f"the expansion {self.text(node)!r} makes bash compute a value")
        self.later(named)

    def substitution(self, node: tree_sitter.Node) -> None:
        self.reading.substitution = True
        self.reading.write("uses command or process substitution")
        self.later(node.named_children)

    def arithmetic(self, node: tree_sitter.Node) -> None:
        """``(( … ))`` and ``$(( … ))``: read-only with literal numbers only (a name is
        evaluated, and its value evaluated again: ``a[$(cmd)]`` runs ``cmd``)."""
        for child in _descendants(node):
            kind = child.type
            if not child.is_named:
                if kind not in _ARITHMETIC_TOKENS:
                    self.reading.write(f"arithmetic with {kind!r} changes or computes values")
            elif kind in ("command_substitution", "process_substitution"):
                self.substitution(child)
            elif kind not in ("binary_expression", "unary_expression",
                              "parenthesized_expression", "ternary_expression", "number"):
                self.reading.write("arithmetic with names makes bash evaluate them")

    # -- redirections and tests -----------------------------------------------------------------

    def redirect(self, node: tree_sitter.Node) -> str:
        """Judge a redirection; its text as rule patterns see it (``>out``, ``<<EOF``)."""
        kind = node.type
        if kind == "heredoc_redirect":
            parts = ["<<" + "".join(self.text(c) for c in node.named_children
                                    if c.type == "heredoc_start")]
            for child in node.named_children:
                if child.type == "heredoc_body":
                    for part in child.named_children:
                        if part.type != "heredoc_content":
                            self.word(part)
                elif child.type in ("file_redirect", "herestring_redirect"):
                    parts.append(self.redirect(child))
                elif child.type not in ("heredoc_start", "heredoc_end"):
                    self.later([child])
            return " ".join(parts)
        if kind == "herestring_redirect":
            return "<<<" + " ".join(str(self.word(c)) for c in node.named_children)
        operator = next((c.type for c in node.children if not c.is_named), "")
        destination = node.child_by_field_name("destination")
        target = self.word(destination) if destination is not None else Word("", None)
        for child in node.named_children:
            if child != destination and child.type != "file_descriptor":
                self.word(child)
        shown = f"{operator}{target}"
        if operator in _READ_REDIRECTS:
            return shown
        if operator not in _WRITE_REDIRECTS:
            self.reading.write(f"the redirection {operator!r} is not on the read-only list")
            return shown
        value = target.value if target.known else None
        if value is not None and _BLOCK_DEVICE.match(value):
            self.reading.destroy(f"writes to the block device {value}")
        elif not (value in _SAFE_TARGETS or (
            operator == ">&" and value is not None and (value.isdigit() or value == "-")
        )):
            self.reading.write(f"redirects output to {target.text!r}")
        return shown

    def test_command(self, node: tree_sitter.Node) -> None:
        """``[[ … ]]``: string and file tests; ``-v``/``-R`` evaluate a subscript, and the
        arithmetic comparisons evaluate names, so those only with literal numbers. ``[ … ]``
        is the ``test`` builtin: its words, as bash makes them, judged as ``test``'s."""
        self.reading.commands.append(self.text(node))
        if node.children and node.children[0].type == "[[":
            self.not_for_sh(node, "[[ … ]]")
        if node.children and node.children[0].type == "[":
            words = self.flat_words(node)
            reason = _test_builtin("test", words)
            if reason is not None:
                self.reading.write(reason)
        for child in _descendants(node):
            kind = child.type
            if kind == "test_operator" and self.text(child) in _TEST_UNARY_EVALUATES:
                self.reading.write(f"[[ {self.text(child)} … ]] evaluates a subscript")
            elif kind == "binary_expression":
                self.test_binary(child)
            elif kind in ("command_substitution", "process_substitution"):
                self.substitution(child)
            elif kind in ("simple_expansion", "expansion"):
                self.expansion(child)
            elif kind == "arithmetic_expansion":
                self.arithmetic(child)
            elif child.is_named and kind not in _TEST_PARTS:
                self.reading.write(f"{_named(kind)} in a test is not on the read-only list")

    def flat_words(self, node: tree_sitter.Node) -> list[Word]:
        """The words of ``[ … ]`` in order, operators included (brackets left out)."""
        words: list[Word] = []
        stack = list(reversed(node.children[1:-1]))
        while stack:
            child = stack.pop()
            if child.type in _WORDS:
                words.append(self.word(child))
            elif child.child_count == 0 or child.type == "test_operator":
                text = self.text(child)
                words.append(Word(text, text))
            else:
                stack.extend(reversed(child.children))
        return words

    def test_binary(self, node: tree_sitter.Node) -> None:
        operator = next((self.text(c) for c in node.children
                         if not c.is_named or c.type == "test_operator"), "")
        if operator not in _ARITHMETIC_COMPARE:
            return
        for side in node.named_children:
            if side.type != "test_operator" and not _is_integer(self.text(side)):
                self.reading.write(
                    f"[[ … {operator} … ]] evaluates its operands as arithmetic")


_TEST_PARTS = frozenset({
    "binary_expression", "unary_expression", "parenthesized_expression", "test_operator",
    "regex", "string_content", "variable_name", "special_variable_name", "extglob_pattern",
    "word", "number", "string", "raw_string", "concatenation", "ansi_c_string",
    "translated_string", "brace_expression",
})
_DANGEROUS_NAMES = frozenset({*_ALWAYS_DESTRUCTIVE, *_REMOVERS, *_WRAPPERS, *_SHELLS, "eval",
                              "chmod", "chown", "chgrp", "crontab", "find", "git"})
"""The programs :meth:`_Walker.destructive` has a rule for (a wrapper's later words are read
as a command only when they name one of these)."""


def _named(kind: str) -> str:
    return kind.replace("_", " ")


def _descendants(node: tree_sitter.Node) -> Iterator[tree_sitter.Node]:
    stack = list(reversed(node.children))
    while stack:
        child = stack.pop()
        yield child
        if child.type in ("command_substitution", "process_substitution"):
            continue  # read as commands by the caller
        stack.extend(reversed(child.children))


def _calls_itself(body: tree_sitter.Node, name: str, walker: _Walker) -> bool:
    """A function whose body pipes or backgrounds a call of itself (``:(){ :|:& };:``)."""
    for child in _descendants(body):
        if child.type == "pipeline":
            names = [walker.text(c.named_children[0]) for c in child.named_children
                     if c.type == "command" and c.named_children]
            if name in names:
                return True
    return False


_GLOB = re.compile(r"(?<!\\)[*?\[]")
_JOINED = re.compile(rb"(?:\\\n)*")
_BLANK_IN_WORD = re.compile(r"(?<!\\)[ \t\n]")
_BRACES = re.compile(r"\{[^{}]*(?:,|\.\.)[^{}]*\}")
"""``{a,b}`` or ``{1..3}`` (bash's brace expansion; one level is enough to say "unknown")."""


def _plain_word(text: str) -> Word:
    """An unquoted word: backslashes quote the next character, ``\\⏎`` joins lines;
    unquoted ``*``, ``?``, ``[`` make a glob, ``{`` may start a brace expansion."""
    if _BRACES.search(text):
        return Word(text, None, braces=True)  # a brace expansion: several words
    glob = bool(_GLOB.search(text))
    if "\\" not in text:
        return Word(text, text, glob=glob)
    out: list[str] = []
    index = 0
    while index < len(text):
        char = text[index]
        if char == "\\" and index + 1 < len(text):
            if text[index + 1] != "\n":
                out.append(text[index + 1])
            index += 2
            continue
        out.append(char)
        index += 1
    return Word(text, "".join(out), glob=glob)


def _unescape_double(text: str) -> str:
    """The value of a run inside double quotes: ``\\`` quotes only ``$ ` " \\`` and newline."""
    if "\\" not in text:
        return text
    return re.sub(r'\\([$`"\\\n])', lambda m: "" if m.group(1) == "\n" else m.group(1), text)


def _is_integer(text: str) -> bool:
    return bool(re.fullmatch(r"[+-]?[0-9]+", text))


# -- programs -----------------------------------------------------------------------------------


def _not_read_only(base: str, args: list[Word]) -> str | None:
    """``None`` when ``base args`` is read-only, else why not."""
    spec = PROGRAMS.get(base)
    if spec is None:
        return f"{base!r} is not on the read-only list"
    if base == "git":
        return _git(args)
    if base in ("test", "["):
        return _test_builtin(base, args)
    if base == "find":
        return _find(args)
    if base in _VERSION_ONLY:
        return _version_only(base, args, spec)
    if base in ("npm", "pip", "pip3", "go"):
        return _toolchain(base, args)
    if spec.any_option:
        return None
    if base == "printf":
        if args and args[0].option_like and str(args[0]) != "--":
            return "printf options (printf -v assigns a variable) are not read-only"
        return None
    return _options(base, args, spec)


def _options(base: str, args: Sequence[Word], spec: Program) -> str | None:
    """Why an option or operand of ``base`` is not on its allow-list, or ``None``."""
    operands = 0
    index = 0
    options_over = False
    while index < len(args):
        arg = args[index]
        index += 1
        value = arg.value
        if options_over or not arg.option_like or value == "-":
            operands += 1
            if base == "date" and not (value or "").startswith("+"):
                return "date with an operand other than +FORMAT sets the clock"
            if spec.options_first:
                options_over = True
            continue
        if not arg.known:
            return f"{base}: {arg.text!r} may expand to an option"
        assert value is not None
        if value == "--":
            options_over = True
            continue
        if value.startswith("--"):
            name, has_value, _ = value.partition("=")
            if name in spec.long and not has_value:
                continue
            if name in spec.long_valued:
                if not has_value and _plain_value(args, index):
                    index += 1  # else the next word is judged as itself
                continue
            return f"{base} {name} is not on the read-only list (options are matched exactly)"
        letters = value[1:]
        if spec.digits and letters.isdigit():
            continue
        position = 0
        while position < len(letters):
            letter = letters[position]
            position += 1
            if letter in spec.valued:
                if position == len(letters) and _plain_value(args, index):
                    index += 1
                break
            if letter not in spec.flags:
                return f"{base} -{letter} is not on the read-only list"
    if spec.operands is not None and (operands > spec.operands or any(w.several for w in args)):
        return f"{base} with more than {spec.operands} operand(s): {spec.note}"
    return None


_LOG_FLAGS = (
    "--oneline --graph --decorate --no-decorate --all --branches --tags --remotes --stat "
    "--shortstat --numstat --name-only --name-status --patch --no-patch --reverse --merges "
    "--no-merges --first-parent --abbrev-commit --no-abbrev-commit --full-history --follow "
    "--date-order --topo-order --author-date-order --summary --raw --cached --staged "
    "--ignore-all-space --ignore-space-change --word-diff --color --no-color --exit-code "
    "--quiet --check --minimal --histogram --patience --full-index --binary --no-renames "
    "--find-renames --relative --source --left-right --cherry-pick --boundary --show-signature "
    "--no-ext-diff --no-textconv --ignore-blank-lines --compact-summary --dirstat --long "
    "--short --porcelain --branch --show-stash --ignored --untracked-files --ahead-behind "
    "--no-ahead-behind --verbose --null --show-current --list --remotes --all --contains "
    "--no-column --column --tags --always --dirty --exact-match --first-parent --cached "
    "--deleted --modified --others --exclude-standard --directory --stage --unmerged "
    "--killed --full-name --error-unmatch --show-toplevel --show-prefix --show-cdup "
    "--git-dir --absolute-git-dir --is-inside-work-tree --is-bare-repository --verify "
    "--symbolic-full-name --abbrev-ref --short --count --line-number --ignore-case "
    "--word-regexp --files-with-matches --files-without-match --extended-regexp "
    "--fixed-strings --perl-regexp --untracked --no-index --heading --break --function-context "
    "--numbered --summary --email --committer --show-email --porcelain --line-porcelain "
    "--incremental --root --show-name --show-number --no-merged --merged --ignore-other "
    "--name-only --sort-ref"
)
_LOG_VALUED = (
    "--max-count --skip --since --after --until --before --author --committer --grep "
    "--format --pretty --date --diff-filter --abbrev --unified --stat-width --color-moved "
    "--word-diff-regex --relative-date --since-as-filter --dirstat-by-file --format "
    "--sort --points-at --merged --no-merged --contains --no-contains --exclude --max-depth "
    "--abbrev --match --candidates --threshold --encoding --color --word-diff "
    "--find-renames --untracked-files --ignored --column --dirstat --decorate --stat "
    "--submodule --ignore-submodules --format"
)
_LOG = _p("pusqcmrtiEFMCBDRabwWzN", "nSGLl", _LOG_FLAGS, _LOG_VALUED, digits=True)
_DIFF = _p("pusqRabwWzMCBDN", "ULlSG", _LOG_FLAGS, _LOG_VALUED)
_GIT_SUBCOMMANDS: dict[str, Program] = {
    **{name: _LOG for name in ("log", "show", "whatchanged", "shortlog", "rev-list",
                               "reflog", "cherry")},
    **{name: _DIFF for name in ("diff", "diff-tree")},
    "status": _p("sbuvz", "", _LOG_FLAGS, _LOG_VALUED),
    "grep": _p("nivwlLcEFPhHrazIGqW", "eABCmf", _LOG_FLAGS, _LOG_VALUED, digits=True),
    "blame": _p("lstfnpcwMCe", "LS", _LOG_FLAGS, _LOG_VALUED),
    "ls-files": _p("cdmoiskuztvf", "xX", _LOG_FLAGS, _LOG_VALUED),
    "ls-tree": _p("dtrz", "", "--name-only --name-status --full-tree --full-name "
                  "--long --abbrev", "--format --abbrev"),
    **{name: _p("q", "", _LOG_FLAGS, _LOG_VALUED)
       for name in ("rev-parse", "describe", "merge-base", "show-ref", "for-each-ref",
                    "name-rev", "count-objects", "check-ignore")},
    "cat-file": _p("tsep"),
}
"""git subcommands that only read, with the options they may be given (matched exactly: no
``--output``, ``--ext-diff``, ``--textconv``, ``-O``/``--open-files-in-pager``)."""
_GIT_GLOBAL_FLAGS = frozenset({"--no-pager", "-P", "--no-optional-locks", "--bare",
                               "--literal-pathspecs", "--no-replace-objects", "--version"})
_GIT_GLOBAL_VALUED = frozenset({"-C", "--git-dir", "--work-tree", "--namespace"})


def _git(args: list[Word]) -> str | None:
    """``git`` with read-only global options and a subcommand that only reads."""
    index = 0
    while index < len(args) and args[index].option_like:
        arg = args[index]
        if not arg.known:
            return f"git: {arg.text!r} may expand to an option"
        value = arg.value or ""
        name, has_value, _ = value.partition("=")
        if value in _GIT_GLOBAL_FLAGS:
            index += 1
        elif name in _GIT_GLOBAL_VALUED:
            if not has_value and not _plain_value(args, index + 1):
                return f"git {name}: its value may expand to options"
            index += 1 if has_value else 2
        else:
            return f"git option {name} can change what git runs"
    rest = args[index + 1:]
    if index >= len(args):
        return None if args and str(args[-1]) == "--version" else "git without a subcommand"
    sub = args[index]
    if not sub.known:
        return f"git: the subcommand {sub.text!r} is computed at run time"
    name = sub.value or ""
    values = [a.value if a.known else None for a in rest]
    if name == "reflog" and values[:1] and values[0] not in ("show",) and not (
        (values[0] or "-").startswith("-")
    ):
        return f"git reflog {values[0]} is not read-only"
    if name in _GIT_SUBCOMMANDS:
        return _options(f"git {name}", rest, _GIT_SUBCOMMANDS[name])
    if name == "version":
        return None if not rest else "git version takes no arguments here"
    if name == "remote":
        return None if all(v in ("-v", "--verbose") for v in values) else (
            "git remote with a subcommand may change remotes")
    if name == "branch":
        return _git_listing("branch", rest, "-l", "--list",
                            _p("avrl", "", "--all --remotes --verbose --list --show-current "
                               "--no-color --color --no-column --column --ignore-case",
                               "--contains --no-contains --merged --no-merged --points-at "
                               "--sort --format --abbrev"))
    if name == "tag":
        return _git_listing("tag", rest, "-l", "--list",
                            _p("ln", "", "--list --no-column --column --ignore-case",
                               "--contains --no-contains --merged --no-merged --points-at "
                               "--sort --format", digits=True))
    if name == "stash":
        if values[:1] in (["list"], ["show"]):
            return _options("git stash", rest[1:], _p("p", "", "--stat --patch --name-only",
                                                       "--format --pretty"))
        return "git stash without list or show changes the stash"
    if name == "worktree":
        if values[:1] == ["list"]:
            return _options("git worktree list", rest[1:],
                            _p("v", "", "--porcelain --verbose -z", "--expire"))
        return "git worktree without list changes worktrees"
    if name == "config":
        reading = {"--get", "--get-all", "--get-regexp", "--list", "-l", "--show-origin",
                   "--show-scope", "--global", "--local", "--system", "--name-only",
                   "--null", "-z", "--type", "--bool", "--int", "--path", "--default",
                   "get", "list"}
        if (values and values[0] in ("--get", "--get-all", "--get-regexp", "--list", "-l",
                                    "get", "list")) or (
            any(v in ("--get", "--get-all", "--get-regexp", "--list", "-l") for v in values)
        ):
            options = [v for v in values if (v or "-").startswith("-")]
            if all(v in reading for v in options) and None not in values:
                return None
        return "git config without --get or --list may change the configuration"
    return f"git {name} is not a read-only git command"


def _git_listing(name: str, rest: list[Word], short: str, long: str, spec: Program) -> str | None:
    """``git branch``/``git tag`` listing: no name unless ``-l``/``--list``."""
    listing = any(str(a) in (short, long) for a in rest)
    reason = _options(f"git {name}", rest, spec)
    if reason is not None:
        return reason
    if not listing and any(not a.option_like for a in rest):
        return f"git {name} NAME creates a {name}"
    return None


def _plain_value(args: Sequence[Word], index: int) -> bool:
    """Whether ``args[index]`` may be skipped as an option's value: known, one word, not
    option-like (a brace ``{1,--output=f}`` or a word after an option whose value is optional
    — git's ``--pretty`` — is judged as itself instead)."""
    return index < len(args) and args[index].known and not args[index].option_like


def _version_only(base: str, args: list[Word], spec: Program) -> str | None:
    if len(args) == 1 and args[0].known and (
        args[0].value in spec.long or ((args[0].value or "")[1:] in spec.flags
        and len(args[0].value or "") == 2)
    ):
        return None
    return f"{base} is read-only only as {base} --version"


def _toolchain(base: str, args: list[Word]) -> str | None:
    values = [a.value if a.known else None for a in args]
    if None in values:
        return f"{base}: an argument is computed at run time"
    if base == "go":
        return None if values in (["version"], ["env"]) else "go is read-only only as go version"
    if values in (["--version"], ["-v"] if base == "npm" else ["-V"]):
        return None
    if base == "npm":
        if values[:1] in (["ls"], ["list"]) and all(
            v in ("--all", "-a", "--depth=0", "--json", "--long", "-l", "--prod", "--dev",
                  "--omit=dev", "--parseable", "-p", "--global", "-g")
            or not (v or "-").startswith("-") for v in values[1:]
        ):
            return None
        return "npm is read-only only as npm --version or npm ls"
    if values[:1] in (["list"], ["freeze"], ["show"]) and all(
        v in ("--outdated", "-o", "--uptodate", "-u", "--format=json", "--format=columns",
              "--format=freeze", "--not-required", "--user", "--local", "-l", "--verbose",
              "-v", "--files", "-f", "--all")
        or not (v or "-").startswith("-") for v in values[1:]
    ):
        return None
    return f"{base} is read-only only as {base} --version, list, freeze or show"


def _find(args: list[Word]) -> str | None:
    index = 0
    while index < len(args):
        arg = args[index]
        index += 1
        if not arg.known:
            if arg.option_like:
                return f"find: {arg.text!r} may expand to an action"
            continue
        value = arg.value or ""
        if value in ("-H", "-L", "-P") and index == 1:
            continue
        if value in _FIND_TESTS:
            continue
        if value in _FIND_TESTS_VALUED:
            if not _plain_value(args, index):
                return f"find: the value of {value} may expand to an action"
            index += 1
            continue
        if value.startswith("-") and value != "-":
            return f"find {value} is not on the read-only list"
    return None


def _test_builtin(base: str, args: list[Word]) -> str | None:
    """``test`` and ``[``: their operands are not evaluated as arithmetic, but ``-v``/``-R``
    evaluate a subscript, and a word bash computes may become an operator."""
    words = list(args)
    if base == "[":
        if not words or str(words[-1]) != "]":
            return "[ without its closing ]"
        words = words[:-1]
    for word in words:
        if word.known and word.value in _TEST_UNARY_EVALUATES:
            return f"{base} {word.value} evaluates a subscript"
    if any(w.several for w in words):
        return f"{base}: a word bash makes several of could become an operator"
    unknown = [i for i, w in enumerate(words) if not w.known]
    if not unknown:
        return None
    if len(words) == 1:
        return None
    if len(words) == 2 and 0 not in unknown and str(words[0]) in _TEST_UNARY | {"!"}:
        return None
    if len(words) == 3 and 1 not in unknown and str(words[1]) in _TEST_BINARY:
        return None
    return f"{base}: a word computed at run time could become an operator"


def _wrapped_command(base: str, args: list[Word]) -> list[Word] | None:
    """The command a read-only wrapper runs (``None``: a form this reader does not allow)."""
    index = 0
    values = [a.value if a.known else None for a in args]

    def option(i: int) -> str | None:
        return values[i] if i < len(values) else None

    if base == "time":
        while option(index) in ("-p",):
            index += 1
        return args[index:]
    if base == "command":
        if option(0) in ("-v", "-V") and all(v is not None for v in values[1:]):
            return []
        while option(index) == "-p":
            index += 1
        return args[index:]
    if base == "nice":
        if option(0) == "-n" and option(1) is not None and _is_integer(option(1) or ""):
            index = 2
        elif option(0) is not None and re.fullmatch(r"-[0-9]+", option(0) or ""):
            index = 1
        return args[index:]
    if base == "timeout":
        while option(index) in ("--preserve-status", "--foreground", "-v", "--verbose"):
            index += 1
        if option(index) is None or not re.fullmatch(r"[0-9.]+[smhd]?", option(index) or ""):
            return None
        return args[index + 1:]
    return None


def _shell_script(base: str, args: list[Word]) -> Word | None:
    """The script ``sh [options] -c SCRIPT``, ``su -c SCRIPT``, ``eval WORDS`` or
    ``trap SCRIPT …`` runs (``None``: it runs a file, or reads its input). As bash reads its
    arguments: options in any order (``-o``/``-O`` take a value), ``--`` ends them, the first
    other word is the script when ``c`` was among the options."""
    if base in ("eval", "trap"):
        words = args if base == "eval" else args[:1]
        if not all(a.known for a in words):
            return Word(" ".join(a.text for a in words), None)
        return Word("", " ".join(a.value or "" for a in words))
    script_follows = False
    index = 0
    while index < len(args):
        arg = args[index]
        index += 1
        if arg.value is None:
            return Word(arg.text, None)
        value = arg.value
        if value == "--":
            break
        if len(value) > 1 and value[0] in "-+" and not value.startswith("--"):
            script_follows |= "c" in value[1:]
            if value[-1] in "oO" or (base == "su" and value[-1] in "lsg"):
                index += 1  # the option's value
            continue
        if value.startswith("--"):
            continue
        return arg if script_follows else None
    if not script_follows:
        return None
    if index < len(args):
        return args[index]
    return Word("", "")


def _rm(args: list[Word]) -> str | None:
    for arg in args:
        if not arg.known and arg.option_like:
            return f"rm {arg.text}: may expand to -r or -f"
    if _has_option(args, "rRf", "--recursive", "--force"):
        return "rm deletes recursively or forcibly"
    target = next((str(a) for a in args if str(a) in _RM_TARGETS or a.text in _RM_TARGETS),
                  None)
    return None if target is None else f"rm of {target!r}"


def _has_option(args: Sequence[Word], short: str, *long: str) -> bool:
    """Whether a short flag in ``short`` (also in clusters like ``-rf``) or a long one, or an
    abbreviation getopt would take for it (``--rec``), is set before ``--``."""
    for arg in args:
        value = str(arg)
        if value == "--":
            return False
        if value.startswith("--"):
            name = value.split("=", 1)[0]
            if len(name) > 2 and any(full.startswith(name) for full in long):
                return True
        elif value.startswith("-") and any(flag in value[1:] for flag in short):
            return True
    return False
