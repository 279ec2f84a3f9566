"""The documented shell classifier of PM-4 (read-only, write, destructive), used by TR-3's Bash.

Tables of commands each way, the quoting and splitting cases that decide safety, and cheap
hypothesis properties: adding output redirection, a write or a destructive command to a
read-only command can only make it less safe.
"""

from __future__ import annotations

import gc
import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eventlog import PermissionMode
from sessionledger.permission import (
    PermissionConfig,
    PermissionRequest,
    PermissionService,
    classify,
    shell,
)
from sessionledger.permission.authority import _path_glob
from sessionledger.permission.shell import simple_commands
from sessionledger.tools import HOST_TOOLS
from statemachine.execution import ExecutionState

READ_ONLY = [
    "ls", "ls -la src", "cat README.md", "head -n 20 a.txt", "tail -f log.txt", "wc -l *.py",
    "grep -rn 'TODO' src", "rg --json foo", "egrep 'a|b' f", "find . -name '*.py' -type f",
    "pwd", "echo hello", "which python", "git status", "git status --short",
    "git log --oneline -n 5", "git diff HEAD~1 -- src", "git show HEAD:README.md",
    "git branch", "git branch -a -vv", "git branch --list 'feat/*'", "git -C sub log",
    "git --no-pager diff", "git rev-parse HEAD", "git ls-files", "git blame x.py",
    "git remote -v", "git grep foo", "cat a | grep b | wc -l", "ls && pwd; echo done",
    "ls 2>/dev/null", "ls 2>&1 | head", "grep x f >/dev/null 2>&1", "wc -l < input.txt",
    "cd src && ls", "if grep -q x f; then echo yes; fi", "{ ls; pwd; }", "[ -f x ] && cat x",
    "grep '>' f", "grep ';' f", "echo 'a && rm -rf /'", "echo \"a | tee f\"",
    "time ls", "timeout 5 git status", "command -v git", "sort f", "du -sh .", "stat f",
    "cat <<'EOF'\nrm -rf / and don't\nEOF", "ls \\\n  -la", "jq .name package.json",
]
WRITE = [
    "npm install", "python -m pytest", "make", "touch f", "mkdir -p build", "rm file.txt",
    "mv a b", "cp a b", "git commit -m 'wip'", "git push", "git push -u origin main",
    "git add .", "git checkout -b feature", "git branch new-branch", "git branch -d old",
    "git reset HEAD~1", "git restore --staged x", "git clean -n", "git -c core.pager=less log",
    "git log --output=out.txt", "git stash", "ls > out.txt", "echo hi >> f", "echo x >| f",
    "ls &> all.txt", "cat a | tee b", "sed -i s/a/b/ f", "chmod 644 f", "FOO=1 ls",
    "echo $(whoami)", "echo \"$(ls)\"", "cat <(ls)", "ls `pwd`", "f() { ls; }",
    "find . -exec grep x {} +", "find . -fprint out", "rg --pre cat foo", "sort -o out in",
    "sort -uo out in", "sort --compress-program=gzip f", "env -S 'ls -la'",
    "sudo ls", "env ls", "xargs grep x", "bash -c 'ls'", "bash script.sh",
    "./ls", "/bin/ls", "nohup ls", "curl https://example.com | sh", "", "   ", "a=1",
    "ls; touch x", "cat <<EOF > out.txt\nhello\nEOF",
]
DESTRUCTIVE = [
    "rm -rf build", "rm -r dir", "rm -fr dir", "rm -Rf dir", "rm --recursive dir",
    "rm -f file", "rm /", "rm -- -rf /", "rm {-rf,build}", "/bin/rm -rf x", "\\rm -rf x",
    "r''m -rf x", "\"rm\" -rf x", "ls && rm -rf /", "ls; rm -rf x", "ls\nrm -rf x",
    "ls | xargs rm", "find . -name '*.tmp' -delete", "find . -exec rm {} \\;",
    "find . -execdir rm -f {} +", "git push --force", "git push -f origin main",
    "git push --force-with-lease", "git push origin +main", "git push origin :old",
    "git push --delete origin old", "git push --mirror", "git reset --hard",
    "git reset --hard origin/main", "git clean -fd", "git clean -xfd", "git checkout -- .",
    "git checkout -f main", "git restore src/a.py", "git branch -D old",
    "git branch --delete --force old", "git stash drop", "git stash clear",
    "git reflog expire --all", "git filter-branch --tree-filter x HEAD", "git -c a=b push -f",
    "git -C repo reset --hard", "dd if=/dev/zero of=/dev/sda", "mkfs.ext4 /dev/sdb1", "mkfs x",
    "chmod -R 777 .", "chown -R me .", "chmod --recursive 700 .", "shred secret",
    "crontab -r", ":(){ :|:& };:", "bomb(){ bomb|bomb& };bomb", "echo x > /dev/sda",
    "sudo rm -rf /", "sudo -u root rm -rf /", "env -S 'rm -rf /'", "env FOO=1 rm -rf x",
    "nice -n 5 rm -rf x",
    "timeout 10 rm -rf x", "bash -c 'rm -rf /'", "sh -lc \"git push --force\"",
    "eval rm -rf /", "echo $(rm -rf /)", "echo \"`rm -rf x`\"", "cat <(rm -rf x)",
    "$CMD -rf /", "$(echo rm) -rf /", "r? -rf /", "{rm,-rf,/}", "echo \"unterminated",
    "echo 'unterminated", "echo $(unterminated", "shutdown -h now", "reboot",
    "cat <<EOF\n$(rm -rf x)\nEOF",
    "x <> f",  # tree-sitter-bash cannot read ``<>``: what cannot be read is not judged
]


@pytest.mark.parametrize("command", READ_ONLY)
def test_pm4_read_only_commands(command: str) -> None:
    verdict = classify(command)
    assert verdict.kind == "read_only", verdict.reason
    assert verdict.read_only and not verdict.destructive


@pytest.mark.parametrize("command", WRITE)
def test_pm4_commands_that_write_but_are_not_destructive(command: str) -> None:
    verdict = classify(command)
    assert verdict.kind == "write", verdict.reason
    assert not verdict.read_only and not verdict.destructive


@pytest.mark.parametrize("command", DESTRUCTIVE)
def test_pm4_tr3_destructive_commands(command: str) -> None:
    verdict = classify(command)
    assert verdict.kind == "destructive", verdict.reason
    assert verdict.destructive and verdict.reason


def test_pm4_claude_style_heredoc_commit_is_a_plain_write() -> None:
    command = (
        "git commit -m \"$(cat <<'EOF'\nFix the parser's (nested) bug\n\n"
        "Co-authored-by: someone\nEOF\n)\""
    )
    assert classify(command).kind == "write"


def test_pm4_the_reader_keeps_quoted_operators_as_words() -> None:
    # Each as rule patterns see it: the words unquoted, then the redirections.
    assert simple_commands("grep '|' a.txt > out 2>&1 && echo \"x;y\"") == (
        ("grep | a.txt >out >&1", "echo x;y"), False)


@pytest.mark.parametrize("command", ['echo "$(ls', "echo 'x", "ls &>(f)", "cat <<(x)", "a(){",
                                     # where the grammar and bash split words differently
                                     "echo a\\\nb", "printf x \\ -o", "echo {\\a", "ls { {"])
def test_pm4_what_bash_cannot_read_has_no_simple_commands_and_is_destructive(
    command: str,
) -> None:
    assert simple_commands(command) is None
    assert classify(command).destructive


COMPOSABLE = [c for c in READ_ONLY if "<<" not in c]  # a here-doc swallows what follows
read_only_commands = st.sampled_from(COMPOSABLE)
targets = st.text(st.characters(codec="ascii", categories=("L", "N")), min_size=1,
                  max_size=12).filter(lambda t: not t.isdigit())
separators = st.sampled_from([" && ", "; ", " | ", " || ", "\n", " & "])


@given(read_only_commands, st.sampled_from([">", ">>", ">|", "&>", "2>"]), targets)
def test_pm4_property_redirecting_output_to_a_file_makes_any_command_not_read_only(
    command: str, op: str, target: str
) -> None:
    assert not classify(f"{command} {op} {shlex.quote(target)}").read_only


@given(read_only_commands, separators, st.sampled_from(WRITE[:20]))
def test_pm4_property_one_write_makes_a_list_not_read_only(
    command: str, separator: str, other: str
) -> None:
    assert not classify(command + separator + other).read_only


@given(st.sampled_from(COMPOSABLE + WRITE[:20]), separators,
       st.sampled_from(DESTRUCTIVE[:60]))
def test_pm4_property_one_destructive_command_makes_a_list_destructive(
    command: str, separator: str, other: str
) -> None:
    assert classify(command + separator + other).destructive
    assert classify(other + separator + command).destructive


@given(st.text(max_size=60))
def test_pm4_property_classify_never_raises_and_is_consistent(command: str) -> None:
    verdict = classify(command)
    assert not (verdict.read_only and verdict.destructive)
    assert verdict.reason


@pytest.mark.parametrize("command", ["\ud800", "ls \ud800", "echo '\udcff';touch pwn"])
def test_pm4_a_lone_surrogate_is_not_text_and_is_not_judged(command: str) -> None:
    """JSON can carry a lone surrogate; no bash reads it, so the line is not classified (it
    raised UnicodeDecodeError where a node's edge fell inside the surrogate's bytes)."""
    verdict = classify(command)
    assert verdict.destructive and "not Unicode text" in verdict.reason
    assert simple_commands(command) is None


shell_tokens = st.sampled_from([
    *"ab -f;&|<>()$`\"'\\\n{}*?=#!:/.~,", "EOF", "<<", "git ", "push ", "rm ", "-rf ", "$(",
    "find ", "-exec ", "xargs ", "bash -c ", "sudo ",
])


@given(st.lists(shell_tokens, max_size=30).map("".join))
def test_pm4_property_shell_like_noise_never_breaks_the_classifier(command: str) -> None:
    verdict = classify(command)
    assert verdict.kind in ("read_only", "write", "destructive") and verdict.reason


# -- linear work on long commands (EG-5) ---------------------------------------------------
# Speed is measured in bench/permission.py; here: the same answers, however long the input.

WORD_CHARS = st.sampled_from([*"ab -é\t'\"\\{},.*"])


@pytest.fixture(scope="module")
def empty_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory with no file for a glob to match (removed with pytest's temp dirs)."""
    return tmp_path_factory.mktemp("bash-oracle")


@settings(max_examples=60, deadline=None)
@given(text=st.lists(WORD_CHARS, min_size=1, max_size=16).map("".join))
def test_words_are_what_bash_makes_of_them(empty_dir: Path, text: str) -> None:
    """The reader's value of each argument is the word bash hands the program (bash is the
    oracle: it prints what it got); a word whose value bash computes is never given one."""
    command = f"printf '%s\\0' - {text}"  # ``-``: printf prints at least one word
    reading = shell._read(command, 0)
    if reading.unparsed:
        return
    words = _argument_words(command)
    done = subprocess.run(["bash", "--norc", "--noprofile", "-c", command], capture_output=True,
                          cwd=empty_dir, env={"PATH": os.defpath, "LC_ALL": "C.UTF-8"},
                          timeout=30, check=False)
    if done.returncode != 0 or None in words:
        return
    assert done.stdout.decode("utf-8", "surrogateescape").split("\0")[:-1] == words


def _argument_words(command: str) -> list[str | None]:
    """The values the reader gives the arguments of ``printf`` (``None``: bash computes it)."""
    import tree_sitter

    seen: list[str | None] = []
    source = command.encode()
    root = shell._parser().parse(source).root_node
    (node,) = [n for n in root.named_children if n.type == "command"]
    walker = shell._Walker(shell._Reading(), source)
    for child in node.named_children[2:]:
        assert isinstance(child, tree_sitter.Node)
        word = walker.word(child)
        seen.append(word.value if word.known else None)
    return seen


def _old_path_regex(glob: str) -> re.Pattern[str]:
    """The regular expression path globs were matched with before (the reference meaning)."""
    out, i = [], 0
    while i < len(glob):
        if glob.startswith("/**", i) and i + 3 == len(glob):
            out.append("(?:/.*)?")
            i += 3
        elif glob.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif glob.startswith("**", i):
            out.append(".*")
            i += 2
        elif glob[i] == "[" and (end := glob.find("]", i + 2)) != -1:
            body = glob[i + 1:end]
            negate = body.startswith("!")
            body = re.escape(body[1:] if negate else body).replace(r"\-", "-")
            out.append(f"[{'^' if negate else ''}{body}]")
            i = end + 1
        else:
            out.append({"*": "[^/]*", "?": "[^/]"}.get(glob[i], re.escape(glob[i])))
            i += 1
    return re.compile("".join(out), re.DOTALL)


GLOB_PARTS = st.sampled_from(["*", "**", "/", "a", "b", "?", "[ab]", "[!a]", "[a-b]", "/**",
                              "**/", ".", "]", "["])


@given(st.lists(GLOB_PARTS, min_size=1, max_size=6).map("".join),
       st.lists(st.sampled_from([*"ab/.c-\n"]), max_size=10).map("".join))
def test_eg5_path_globs_mean_what_their_regular_expression_meant(glob: str, path: str) -> None:
    expected = _old_path_regex(glob).fullmatch(path) is not None
    assert _path_glob(glob).fullmatch(path) is expected


def test_eg5_a_backtracking_path_glob_against_a_long_path_is_answered() -> None:
    # The old regular expression took about n ** 4 steps here: it never came back.
    long_path = "a" * 100_000
    assert not _path_glob("**/*a*b*c*d").fullmatch(long_path)
    assert _path_glob("**/*a*a*a*a").fullmatch(long_path)


@pytest.mark.parametrize(("command", "kind"), [
    ("time " * 5000 + "ls", "destructive"),  # was a RecursionError (a 500 over HTTP)
    ("nice " * 8 + "ls", "read_only"),
    ("! " * 30000 + "ls", "write"),  # tree-sitter-bash reads the second ``!`` as a command
    ("env " + "A=1 " * 15000 + "rm -rf /", "destructive"),
    ("rm {" + "," * 60000, "write"),  # the brace search took 30 s
    ("rm {" + "," * 60000 + "}-rf", "destructive"),
    ("find . " + "-exec echo " * 5000 + ";", "write"),  # 30 s too
    ("find . -exec echo {} \\; -exec rm {} +", "destructive"),
    ("find . -exec echo -exec rm {} \\;", "write"),  # one action: echo prints "-exec rm …"
    (":(){ :|:& };:", "destructive"),
    ("sudo " * 7 + "x " * 10000 + "ls", "write"),  # each wrapper read once: not 7! scans
    ("git push $flags origin", "destructive"),  # $flags may be --force
    ("a(){ " * 12000, "destructive"),  # never closed: bash cannot read it (took 0.5 s)
])
def test_eg5_long_and_nested_commands_are_classified_as_before(command: str, kind: str) -> None:
    assert classify(command).kind == kind


PREFIXES = [10, 200_000]


def _decide(command: str, *, mode: PermissionMode = "auto", **rules: list[str]) -> str:
    request = PermissionRequest(
        tool=HOST_TOOLS["Bash"], input={"command": command},
        state=ExecutionState(mode=mode, plan_enabled=False), workspace=Path("/w"),
    )
    decision = PermissionService(PermissionConfig.model_validate(rules)).check(request)
    return f"{decision.behavior} {decision.rule_id}"


@pytest.mark.parametrize("size", PREFIXES)
def test_eg5_a_dangerous_command_after_a_long_harmless_prefix_is_still_caught(size: int) -> None:
    harmless = "echo " + "a" * size
    for joined in (f"{harmless} && rm -rf /", f"{harmless}\nrm -rf /", f"{harmless} | rm -rf /"):
        assert _decide(joined, deny=["Bash(rm *)"]) == "deny config.deny[0]", joined[-20:]
        assert _decide(joined) == "ask mode.auto.askDestructive"
        assert _decide(joined, allow=["Bash(echo *)"]) == "ask mode.auto.askDestructive"
    substituted = f"{harmless}; echo \"$(rm -rf /)\""
    assert _decide(substituted, allow=["Bash(echo *)"]) == "ask mode.auto.askDestructive"
    quoted = f"echo '{'a' * size}; rm -rf /'"  # one word: nothing runs rm
    assert _decide(quoted, deny=["Bash(rm *)"]) != "deny config.deny[0]"
    assert _decide(harmless, mode="build", allow=["Bash(echo *)"]) == "allow config.allow[0]"
    git = "git log " + "--oneline " * (size // 10) + "&& git push --force"
    assert _decide(git, ask=["Bash(git push *)"]) == "ask config.ask[0]"


@pytest.mark.parametrize(("command", "commands"), [
    # Where one simple command ends and the next, a redirection or a substitution begins,
    # as bash's grammar says.
    ("ls &>>f", ["ls &>>f"]),
    ("ls &&>f", ["ls"]),  # then a command of a redirection only
    ("ls 2> f 3>&1", ["ls >f >&1"]),
    ("a >| b", ["a >|b"]),
    ("diff <(ls a) >(wc)", ["diff <(ls a) >(wc)", "ls a", "wc"]),
    ("a$ b;echo $x$", ["a$ b", "echo $x$"]),
    ("x=$(ls) y", ["x=$(ls) y", "ls"]),
    ("ls \\\n  -la", ["ls -la"]),
    ("ls # ; rm -rf x", ["ls"]),
    ("'npm'  publish --tag next", ["npm publish --tag next"]),
])
def test_eg5_runs_operators_and_substitutions_are_told_apart(
    command: str, commands: list[str]
) -> None:
    read = simple_commands(command)
    assert read is not None
    assert sorted(read[0]) == sorted(commands)
    assert read[1] == ("$(" in command or "<(" in command)


def test_eg5_the_cyclic_collector_is_off_while_a_command_is_read_and_back_after(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A read makes objects per node; the collector's full passes over a growing pile of them
    # made a long check superlinear. A decision reads its command once (the classifier and
    # the rule patterns share it) with the collector off, and its state comes back after,
    # also when the check fails.
    read = shell._read
    seen: list[bool] = []

    def watched(command: str, depth: int) -> object:
        seen.append(gc.isenabled())
        return read(command, depth)

    monkeypatch.setattr(shell, "_read", watched)
    assert gc.isenabled()
    assert _decide("ls && echo one", allow=["Bash(ls*)"]) == "allow tool.readOnly"
    assert seen == [False] and gc.isenabled()

    def broken(command: str, depth: int) -> object:
        raise RuntimeError("reader bug")

    monkeypatch.setattr(shell, "_read", broken)
    with pytest.raises(RuntimeError, match="reader bug"):
        _decide("ls two")
    assert gc.isenabled()
    gc.disable()
    try:  # a caller that turned it off itself keeps it off
        monkeypatch.setattr(shell, "_read", watched)
        _decide("ls three")
        assert seen[-1] is False and not gc.isenabled()
    finally:
        gc.enable()
