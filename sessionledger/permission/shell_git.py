"""The destructive git commands of the shell classifier (rules listed in :mod:`.shell`).

``git`` is split into its global options, its subcommand and the subcommand's arguments;
:func:`git_destructive` says why a git command is destructive (``None`` when it is not). What
git may do in Plan (its read-only subcommands and their exact options) is in :mod:`.shell`.
"""

from __future__ import annotations

__all__ = ["GIT_DESTRUCTIVE_SUBCOMMANDS", "git_destructive", "split_git"]

_GLOBAL_FLAGS = frozenset({"--no-pager", "-P", "--no-optional-locks", "--bare",
                           "--literal-pathspecs", "--no-replace-objects"})
_GLOBAL_WITH_VALUE = frozenset({"-C", "--git-dir", "--work-tree", "--namespace"})
_UNSAFE_WITH_VALUE = frozenset({"-c", "--config-env"})
_PUSH_FORCE = ("--force", "--force-with-lease", "--force-if-includes", "--mirror",
               "--delete", "--prune")


def split_git(args: list[str]) -> tuple[str | None, str, list[str]]:
    """``(why the global options are unsafe or None, subcommand, its arguments)``."""
    index, unsafe = 0, None
    while index < len(args) and args[index].startswith("-"):
        arg = args[index]
        name = arg.split("=", 1)[0]
        if arg in _GLOBAL_WITH_VALUE or arg in _UNSAFE_WITH_VALUE:
            index += 2
        else:
            index += 1
        if arg not in _GLOBAL_FLAGS and name not in _GLOBAL_WITH_VALUE:
            unsafe = unsafe or f"git option {name} can change what git runs"
    if index >= len(args):
        return unsafe, "", []
    return unsafe, args[index], args[index + 1:]


def git_destructive(args: list[str]) -> str | None:
    """Why ``git args`` is destructive, or ``None``."""
    _, sub, rest = split_git(args)
    check = _DESTRUCTIVE.get(sub)
    return None if check is None else check(rest)


def _short(args: list[str], flags: str) -> bool:
    return any(a.startswith("-") and not a.startswith("--") and any(f in a[1:] for f in flags)
               for a in args)


def _long(args: list[str], *names: str) -> bool:
    """Whether a long option of ``names`` is given, also abbreviated as git's option parser
    takes it (``--forc`` is ``--force``; an ambiguous one git refuses counts too)."""
    for arg in args:
        if arg == "--":
            return False
        given = arg.split("=", 1)[0]
        if len(given) > 2 and given.startswith("--") and any(n.startswith(given) for n in names):
            return True
    return False


def _push(args: list[str]) -> str | None:
    if _short(args, "fd") or _long(args, *_PUSH_FORCE):
        return "git push that forces, mirrors or deletes remote refs"
    positional = [a for a in args if not a.startswith("-")]
    if any(a.startswith(("+", ":")) for a in positional[1:]):
        return "git push of a forced (+ref) or deleting (:ref) refspec"
    return None


def _reset(args: list[str]) -> str | None:
    return "git reset --hard discards changes" if _long(args, "--hard") else None


def _clean(args: list[str]) -> str | None:
    dry_run = _short(args, "n") or _long(args, "--dry-run")
    forced = _short(args, "f") or _long(args, "--force")
    return "git clean -f deletes untracked files" if forced and not dry_run else None


def _checkout(args: list[str]) -> str | None:
    if _short(args, "f") or _long(args, "--force") or "." in args or "--" in args:
        return "git checkout that discards working-tree changes"
    return None


def _restore(args: list[str]) -> str | None:
    staged_only = (_short(args, "S") or "--staged" in args) and not (
        _short(args, "W") or _long(args, "--worktree")
    )
    return None if staged_only else "git restore discards working-tree changes"


def _branch(args: list[str]) -> str | None:
    forced_delete = _short(args, "D") or (
        (_short(args, "d") or _long(args, "--delete"))
        and (_short(args, "f") or _long(args, "--force"))
    )
    return "git branch -D deletes an unmerged branch" if forced_delete else None


def _stash(args: list[str]) -> str | None:
    return "git stash drop/clear loses stashed work" if args[:1] in (["drop"], ["clear"]) else None


def _reflog(args: list[str]) -> str | None:
    losing = args[:1] in (["expire"], ["delete"])
    return "git reflog expire/delete loses history" if losing else None


def _update_ref(args: list[str]) -> str | None:
    return "git update-ref -d deletes a ref" if "-d" in args else None


def _rewrite(_: list[str]) -> str | None:
    return "rewrites repository history"


_DESTRUCTIVE = {
    "push": _push, "reset": _reset, "clean": _clean, "checkout": _checkout,
    "restore": _restore, "branch": _branch, "stash": _stash, "reflog": _reflog,
    "update-ref": _update_ref, "filter-branch": _rewrite, "filter-repo": _rewrite,
}
GIT_DESTRUCTIVE_SUBCOMMANDS = frozenset(_DESTRUCTIVE)
"""The subcommands some options or arguments make destructive."""
