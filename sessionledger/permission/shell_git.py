"""The git part of the shell classifier (rules listed in :mod:`.shell`'s docstring).

``git`` is split into its global options, its subcommand and the subcommand's arguments;
:func:`git_not_read_only` says why a git command is not read-only (``None`` when it is) and
:func:`git_destructive` why it is destructive (``None`` when it is not).
"""

from __future__ import annotations

__all__ = ["git_destructive", "git_not_read_only", "split_git"]

_GLOBAL_FLAGS = frozenset({"--no-pager", "-P", "--no-optional-locks", "--bare",
                           "--literal-pathspecs", "--no-replace-objects"})
_GLOBAL_WITH_VALUE = frozenset({"-C", "--git-dir", "--work-tree", "--namespace"})
_UNSAFE_WITH_VALUE = frozenset({"-c", "--config-env"})
_READ_ONLY = frozenset({"status", "log", "diff", "show", "blame", "shortlog", "describe",
                        "ls-files", "rev-parse"})
_BRANCH_MODIFY_SHORT = "dDmMcCfut"
_BRANCH_MODIFY_LONG = ("--delete", "--move", "--copy", "--force", "--set-upstream-to",
                       "--unset-upstream", "--edit-description", "--track", "--no-track",
                       "--create-reflog", "--recurse-submodules")
_BRANCH_WITH_VALUE = frozenset({"--contains", "--no-contains", "--merged", "--no-merged",
                                "--points-at", "--sort", "--format"})
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


def git_not_read_only(args: list[str]) -> str | None:
    """Why ``git args`` is not read-only, or ``None`` when it is."""
    unsafe, sub, rest = split_git(args)
    if unsafe is not None:
        return unsafe
    if sub in _READ_ONLY:
        if any(a == "--output" or a.startswith("--output=") for a in rest):
            return f"git {sub} --output writes a file"
        return None
    if sub == "grep":
        pager = any(a.startswith(("-O", "--open-files-in-pager")) for a in rest)
        return "git grep -O runs a pager command" if pager else None
    if sub == "remote":
        listing = all(a in ("-v", "--verbose") for a in rest)
        return None if listing else "git remote with a subcommand may change remotes"
    if sub == "branch":
        return _branch_not_listing(rest)
    return f"git {sub or '(no subcommand)'} is not a read-only git command"


def _branch_not_listing(args: list[str]) -> str | None:
    listing = "-l" in args or "--list" in args
    skip = False
    for arg in args:
        if skip:
            skip = False
        elif arg in _BRANCH_WITH_VALUE:
            skip = True
        elif arg.startswith("--"):
            if arg.split("=", 1)[0] in _BRANCH_MODIFY_LONG:
                return f"git branch {arg} changes branches"
        elif arg.startswith("-"):
            if any(flag in arg[1:] for flag in _BRANCH_MODIFY_SHORT):
                return f"git branch {arg} changes branches"
        elif not listing:
            return "git branch NAME creates a branch"
    return None


def git_destructive(args: list[str]) -> str | None:
    """Why ``git args`` is destructive, or ``None``."""
    _, sub, rest = split_git(args)
    check = _DESTRUCTIVE.get(sub)
    return None if check is None else check(rest)


def _short(args: list[str], flags: str) -> bool:
    return any(a.startswith("-") and not a.startswith("--") and any(f in a[1:] for f in flags)
               for a in args)


def _long(args: list[str], *names: str) -> bool:
    return any(a.split("=", 1)[0] in names for a in args)


def _push(args: list[str]) -> str | None:
    if _short(args, "fd") or _long(args, *_PUSH_FORCE):
        return "git push that forces, mirrors or deletes remote refs"
    positional = [a for a in args if not a.startswith("-")]
    if any(a.startswith(("+", ":")) for a in positional[1:]):
        return "git push of a forced (+ref) or deleting (:ref) refspec"
    return None


def _reset(args: list[str]) -> str | None:
    return "git reset --hard discards changes" if "--hard" in args else None


def _clean(args: list[str]) -> str | None:
    dry_run = _short(args, "n") or "--dry-run" in args
    forced = _short(args, "f") or "--force" in args
    return "git clean -f deletes untracked files" if forced and not dry_run else None


def _checkout(args: list[str]) -> str | None:
    if _short(args, "f") or "--force" in args or "." in args or "--" in args:
        return "git checkout that discards working-tree changes"
    return None


def _restore(args: list[str]) -> str | None:
    staged_only = (_short(args, "S") or "--staged" in args) and not (
        _short(args, "W") or "--worktree" in args
    )
    return None if staged_only else "git restore discards working-tree changes"


def _branch(args: list[str]) -> str | None:
    forced_delete = _short(args, "D") or (
        (_short(args, "d") or "--delete" in args) and (_short(args, "f") or "--force" in args)
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
