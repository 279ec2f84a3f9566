"""The documented shell classifier of SPEC PM-4: read-only, write, or destructive.

A Bash command is split by :mod:`.shell_parse` (quote-aware, ``shlex`` for the words) into
simple commands joined by ``;``, ``&``, ``&&``, ``||``, ``|``, newlines or parentheses, and
classified as a whole:

**destructive** (``auto`` mode asks) when any simple command, any command or process
substitution body, or the line itself is destructive:

- it cannot be parsed (unterminated quote or substitution, substitutions nested more than 32
  deep, commands nested more than 8 deep, longer than 65536 characters) — nothing can be said
  about it;
- a fork bomb (a function that pipes into itself, ``:(){ :|:& };:``);
- the command name is computed at run time: contains ``$``, a backquote, a substitution, a
  glob or a brace (``$CMD``, ``$(echo rm)``, ``r?``, ``{rm,-rf,/}``);
- ``rm`` with ``-r``/``-R``/``-f`` (also combined, ``--recursive``, ``--force``) or a
  target of ``/``, ``/*``, ``~``, ``~/``, ``.``, ``..``, ``*``, ``$HOME``; plain ``rm file`` is
  a write;
- ``dd``, ``mkfs``/``mkfs.*``, ``mke2fs``, ``mkswap``, ``fdisk``, ``sfdisk``, ``cfdisk``,
  ``parted``, ``wipefs``, ``shred``, ``shutdown``, ``reboot``, ``halt``, ``poweroff``;
- ``chmod``, ``chown``, ``chgrp`` with ``-R``/``--recursive``; ``crontab -r``;
- a redirection into a block device (``> /dev/sda``);
- ``find`` with ``-delete``, or ``-exec``/``-execdir``/``-ok``/``-okdir`` running ``rm``,
  ``unlink``, ``shred`` or a destructive command; ``xargs`` running one of those;
- git: ``push`` with ``-f``/``--force``/``--force-with-lease``/``--force-if-includes``/
  ``--mirror``/``-d``/``--delete``/``--prune`` or a ``+ref``/``:ref`` refspec; ``reset --hard``;
  ``clean -f`` (not with ``-n``); ``checkout`` with ``-f``/``--force``, ``.`` or ``--``;
  ``restore`` of the working tree (anything but ``--staged`` alone); ``branch -D`` or
  ``--delete --force``; ``stash drop|clear``; ``reflog expire|delete``; ``filter-branch``;
  ``filter-repo``; ``update-ref -d``;
- a wrapper (``sudo``, ``doas``, ``env``, ``nohup``, ``exec``, ``xargs``, ``time``, ``nice``,
  ``timeout``, ``command``) or ``sh``/``bash``/``zsh``/``dash``/``ksh -c STRING`` or ``eval``
  whose inner command is destructive.

**read-only** (allowed by every mode default and passing the Plan check) when it is not
destructive and *every* simple command is read-only, with no command or process substitution,
no function definition, no variable assignment before a command, and no output redirection
other than to ``/dev/null``, ``/dev/stdout``, ``/dev/stderr`` or a file-descriptor copy
(``2>&1``); input redirections and here-documents are fine. Command names must be bare (no
``/``). Read-only commands:

- always: ``ls``, ``cat``, ``head``, ``tail``, ``wc``, ``grep``, ``egrep``, ``fgrep``, ``pwd``,
  ``echo``, ``printf``, ``which``, ``type``, ``whoami``, ``id``, ``uname``, ``stat``, ``du``,
  ``df``, ``basename``, ``dirname``, ``realpath``, ``readlink``, ``diff``, ``cmp``, ``nl``,
  ``cut``, ``tr``, ``jq``, ``printenv``, ``true``, ``false``, ``test``, ``[``, ``[[``, ``cd``;
- ``rg`` without ``--pre``; ``find`` without ``-delete``, ``-exec``, ``-execdir``, ``-ok``,
  ``-okdir``, ``-fprint``, ``-fprint0``, ``-fprintf``, ``-fls``; ``sort`` without ``-o``/
  ``--output``/``--compress-program``;
- ``time``, ``nice``, ``timeout`` or ``command`` running a read-only command (``command -v``);
- ``git`` (global options ``-C``, ``--no-pager``, ``-P``, ``--git-dir``, ``--work-tree``,
  ``--no-optional-locks`` allowed; ``-c`` and others not) with ``status``, ``log``, ``diff``,
  ``show``, ``blame``, ``shortlog``, ``describe``, ``ls-files``, ``rev-parse`` (none with
  ``--output``), ``grep`` (not ``-O``), ``remote`` (no arguments or ``-v``), ``branch``
  listing only (no positional name unless ``-l``/``--list``, none of ``-d``, ``-D``, ``-m``,
  ``-M``, ``-c``, ``-C``, ``-f``, ``-u``, ``-t``, ``--set-upstream-to``, …).

Everything else is a **write** (not read-only, not destructive). Shell keywords (``if``,
``then``, ``do``, ``{``, ``!``, …) in front of a command are skipped; ``fi``, ``done``, ``}``
alone are neutral. The read-only side is an allow-list, so an unknown command is never
read-only; the destructive side is a deny-list and best effort.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Literal

from .shell_git import git_destructive, git_not_read_only
from .shell_parse import SUBSTITUTION, ShellParseError, SimpleCommand, parse_command

__all__ = ["ShellClass", "ShellVerdict", "classify"]

ShellClass = Literal["read_only", "write", "destructive"]

_FUNCTION = re.compile(r"\(\)\s*\{")
_NAME_BEFORE = re.compile(r"([^\s(){};|&]+)\s*$")
_BLOCK_DEVICE = re.compile(r"^/dev/(sd|hd|vd|xvd|nvme|mmcblk|disk|md|dm-|mapper/)")
_SAFE_TARGETS = frozenset({"/dev/null", "/dev/stdout", "/dev/stderr"})
_BRACES = re.compile(r"\{([^{},]*,[^{}]*)\}")
"""``{a,b}``: the first comma is fixed, so a failed search never backtracks over the rest."""
_DYNAMIC = re.compile(r"[$`*?\[{]")
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\+?=")
_KEYWORDS = frozenset({"!", "{", "if", "then", "else", "elif", "do", "while", "until"})
_CLOSERS = frozenset({"}", "fi", "done"})
_ALWAYS_READ_ONLY = frozenset({
    "ls", "cat", "head", "tail", "wc", "grep", "egrep", "fgrep", "pwd", "echo", "printf",
    "which", "type", "whoami", "id", "uname", "stat", "du", "df", "basename", "dirname",
    "realpath", "readlink", "diff", "cmp", "nl", "cut", "tr", "jq", "printenv", "true",
    "false", "test", "[", "[[", "cd",
})
_FIND_WRITES = frozenset({
    "-delete", "-exec", "-execdir", "-ok", "-okdir", "-fprint", "-fprint0", "-fprintf", "-fls",
})
_FIND_EXEC = frozenset({"-exec", "-execdir", "-ok", "-okdir"})
_ALWAYS_DESTRUCTIVE = frozenset({
    "dd", "mkfs", "mke2fs", "mkswap", "fdisk", "sfdisk", "cfdisk", "parted", "wipefs", "shred",
    "shutdown", "reboot", "halt", "poweroff",
})
_REMOVERS = frozenset({"rm", "unlink", "shred"})
_RM_TARGETS = frozenset({"/", "/*", "~", "~/", "~/*", ".", "..", "./", "*", "$HOME"})
_SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh"})
_TRANSPARENT: dict[str, frozenset[str]] = {
    "time": frozenset(), "nice": frozenset({"-n"}),
    "timeout": frozenset({"-s", "-k"}), "command": frozenset(),
}
_OPAQUE: dict[str, frozenset[str]] = {
    "sudo": frozenset({"-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-U", "-T"}),
    "doas": frozenset({"-u", "-C"}), "env": frozenset({"-u", "-C", "-S"}),
    "nohup": frozenset(), "exec": frozenset({"-a"}),
    "xargs": frozenset({"-a", "-d", "-E", "-I", "-L", "-n", "-P", "-s"}),
}
_MAX_DEPTH = 8
_MAX_LENGTH = 65536


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


def classify(command: str) -> ShellVerdict:
    """Classify a shell command line by the rules of the module docstring."""
    return _classify(command, 0)


def _classify(command: str, depth: int) -> ShellVerdict:
    if depth > _MAX_DEPTH:
        return ShellVerdict("destructive", "commands nested too deeply to classify")
    if len(command) > _MAX_LENGTH:
        return ShellVerdict("destructive", f"longer than {_MAX_LENGTH} characters to classify")
    if _fork_bomb(command):
        return ShellVerdict("destructive", "defines a fork bomb")
    try:
        parsed = parse_command(command)
    except ShellParseError as exc:
        return ShellVerdict("destructive", f"cannot be parsed ({exc}), so cannot be classified")
    verdicts = [_classify(body, depth + 1) for body in parsed.substitutions]
    verdicts += [_simple(c, depth) for c in parsed.commands]
    worst = next((v for v in verdicts if v.destructive), None)
    if worst is not None:
        return worst
    if not parsed.commands:
        return ShellVerdict("write", "an empty command is not on the read-only list")
    if parsed.substitutions:
        return ShellVerdict("write", "uses command or process substitution")
    if parsed.function_definition:
        return ShellVerdict("write", "defines a shell function")
    return next((v for v in verdicts if not v.read_only), None) or ShellVerdict(
        "read_only", "every command is read-only"
    )


def _fork_bomb(command: str) -> bool:
    """A function whose body pipes the function into itself: ``:(){ :|:& };:``."""
    for match in _FUNCTION.finditer(command):
        name = _NAME_BEFORE.search(command, max(0, match.start() - 64), match.start())
        if name is None:
            continue
        body = command[match.end():match.end() + 256].split("}", 1)[0]
        word = name.group(1)
        pipe = body.find("|")
        while pipe != -1:  # ``word\s*\|\s*word``, with no regular expression built per name
            if body[:pipe].rstrip().endswith(word) and body[pipe + 1:].lstrip().startswith(word):
                return True
            pipe = body.find("|", pipe + 1)
    return False


def _simple(command: SimpleCommand, depth: int) -> ShellVerdict:
    start = 0
    while start < len(command.argv) and command.argv[start] in _KEYWORDS:
        start += 1
    argv = list(command.argv[start:])
    for redirect in command.redirects:
        if redirect.writes and _BLOCK_DEVICE.match(redirect.target):
            return ShellVerdict("destructive", f"writes to the block device {redirect.target}")
    if not argv or (len(argv) == 1 and argv[0] in _CLOSERS):
        return _redirect_verdict(command) or ShellVerdict("read_only", "no command")
    assigns = 0
    while assigns < len(argv) and _ASSIGNMENT.match(argv[assigns]):
        assigns += 1
    if assigns == len(argv):
        return ShellVerdict("write", "sets shell variables")
    return _command_verdict(argv[assigns:], command, depth, assigned=assigns > 0)


def _command_verdict(
    argv: list[str], command: SimpleCommand, depth: int, *, assigned: bool
) -> ShellVerdict:
    if depth > _MAX_DEPTH:
        return ShellVerdict("destructive", "commands nested too deeply to classify")
    name = argv[0]
    if name == SUBSTITUTION or (name not in ("[", "[[") and _DYNAMIC.search(name)):
        return ShellVerdict("destructive", f"the command name {name!r} is computed at run time")
    base = os.path.basename(name) or name
    reason = _destructive(base, argv[1:], depth)
    if reason is not None:
        return ShellVerdict("destructive", reason)
    if base in _TRANSPARENT or base in _OPAQUE or base in _SHELLS or base == "eval":
        inner = _wrapped(base, argv[1:], command, depth)
        if inner.destructive:
            return inner
        if base in _TRANSPARENT and inner.read_only and not assigned:
            return _redirect_verdict(command) or inner
        return ShellVerdict("write", f"{base!r} runs another command ({inner.reason})")
    if assigned:
        return ShellVerdict("write", "variable assignments before a command may change it")
    if "/" in name:
        return ShellVerdict("write", f"runs the program {name!r} by path")
    not_read_only = _not_read_only(base, argv[1:])
    if not_read_only is not None:
        return ShellVerdict("write", not_read_only)
    return _redirect_verdict(command) or ShellVerdict("read_only", f"{base!r} is read-only")


def _redirect_verdict(command: SimpleCommand) -> ShellVerdict | None:
    for redirect in command.redirects:
        if not redirect.writes or redirect.target in _SAFE_TARGETS:
            continue
        if redirect.op in (">&", "<&") and (redirect.target.isdigit() or redirect.target == "-"):
            continue
        return ShellVerdict("write", f"redirects output to {redirect.target!r}")
    return None


def _not_read_only(base: str, args: list[str]) -> str | None:
    """``None`` when ``base args`` is read-only, else why not."""
    if base in _ALWAYS_READ_ONLY:
        return None
    if base == "find":
        bad = next((a for a in args if a in _FIND_WRITES), None)
        return None if bad is None else f"find {bad} changes files or runs commands"
    if base == "rg":
        pre = any(a == "--pre" or a.startswith("--pre=") for a in args)
        return "rg --pre runs a preprocessor command" if pre else None
    if base == "sort":
        if _has_option(args, "", "--compress-program"):
            return "sort --compress-program runs a program"
        return "sort -o writes a file" if _has_option(args, "o", "--output") else None
    if base == "git":
        return git_not_read_only(args)
    return f"{base!r} is not on the read-only list"


def _destructive(base: str, args: list[str], depth: int) -> str | None:
    """Why ``base args`` is destructive, or ``None``."""
    args = _expand_braces(args)
    if base in _ALWAYS_DESTRUCTIVE or base.startswith("mkfs."):
        return f"{base!r} can destroy data or stop the system"
    if base == "rm":
        if _has_option(args, "rRf", "--recursive", "--force"):
            return "rm deletes recursively or forcibly"
        target = next((a for a in args if a in _RM_TARGETS), None)
        return None if target is None else f"rm of {target!r}"
    if base in ("chmod", "chown", "chgrp") and _has_option(args, "R", "--recursive"):
        return f"{base} -R changes a whole tree"
    if base == "crontab" and _has_option(args, "r"):
        return "crontab -r deletes the crontab"
    if base == "find":
        return _find_destructive(args, depth)
    if base == "git":
        return git_destructive(args)
    return None


def _find_destructive(args: list[str], depth: int) -> str | None:
    if "-delete" in args:
        return "find -delete removes files"
    index = 0
    while index < len(args):  # as find reads them: an action's command runs to its ; or +
        arg = args[index]
        index += 1
        if arg in _FIND_EXEC:
            end = next((i for i in range(index, len(args)) if args[i] in (";", "+")), len(args))
            if _runs_removal(args[index:end], depth):
                return f"find {arg} removes files"
            index = end + 1
    return None


def _runs_removal(argv: list[str], depth: int) -> bool:
    if not argv:
        return False
    if os.path.basename(argv[0]) in _REMOVERS:
        return True
    return _command_verdict(argv, SimpleCommand(tuple(argv)), depth + 1, assigned=False).destructive


def _wrapped(base: str, args: list[str], command: SimpleCommand, depth: int) -> ShellVerdict:
    """The verdict on what a wrapper, a shell ``-c`` or ``eval`` runs."""
    if base in _SHELLS or base == "eval":
        script = _shell_script(base, args)
        if script is None:
            return ShellVerdict("write", f"{base} runs a script")
        return _classify(script, depth + 1)
    if base == "command" and _has_option(args, "vV"):
        return ShellVerdict("read_only", "command -v only looks a name up")
    if base == "env" and "-S" in args[:-1]:
        index = args.index("-S")
        return _classify(" ".join(args[index + 1:]), depth + 1)
    inner = _strip_options(args, {**_TRANSPARENT, **_OPAQUE}[base])
    if base == "timeout" and inner:
        inner = inner[1:]
    if base in ("env", "sudo", "doas"):
        assigns = 0
        while assigns < len(inner) and _ASSIGNMENT.match(inner[assigns]):
            assigns += 1
        inner = inner[assigns:]
    if not inner:
        return ShellVerdict("write", f"{base} without a command")
    if base == "xargs" and _runs_removal(inner, depth):
        return ShellVerdict("destructive", "xargs runs a removal on every input")
    return _command_verdict(inner, SimpleCommand(tuple(inner), command.redirects), depth + 1,
                            assigned=False)


def _shell_script(base: str, args: list[str]) -> str | None:
    if base == "eval":
        return " ".join(args)
    for index, arg in enumerate(args):
        if arg.startswith("-") and not arg.startswith("--") and "c" in arg:
            return args[index + 1] if index + 1 < len(args) else ""
    return None


def _strip_options(args: list[str], with_value: frozenset[str]) -> list[str]:
    index = 0
    while index < len(args) and args[index].startswith("-") and args[index] != "-":
        if args[index] == "--":
            return args[index + 1:]
        index += 2 if args[index] in with_value else 1
    return args[index:]


def _has_option(args: list[str], short: str, *long: str) -> bool:
    """Whether any short flag in ``short`` (also in clusters like ``-rf``) or long one is set."""
    for arg in args:
        if arg == "--":
            return False
        if arg.startswith("--"):
            if any(arg == name or arg.startswith(name + "=") for name in long):
                return True
        elif arg.startswith("-") and any(flag in arg[1:] for flag in short):
            return True
    return False


def _expand_braces(args: list[str]) -> list[str]:
    """One level of ``a{b,c}d`` brace expansion, enough to see ``rm {-rf,/}``-style tricks."""
    out: list[str] = []
    for arg in args:
        match = _BRACES.search(arg)
        if match is None:
            out.append(arg)
            continue
        head, tail = arg[:match.start()], arg[match.end():]
        out.extend(head + item + tail for item in match.group(1).split(","))
    return out
