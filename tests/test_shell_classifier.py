"""The documented shell classifier of PM-4 (read-only, write, destructive), used by TR-3's Bash.

Tables of commands each way, the quoting and splitting cases that decide safety, and cheap
hypothesis properties: adding output redirection, a write or a destructive command to a
read-only command can only make it less safe.
"""

from __future__ import annotations

import shlex

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sessionledger.permission import classify
from sessionledger.permission.shell_parse import ShellParseError, parse_command

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
    "ls; touch x", "cat <<EOF > out.txt\nhello\nEOF", "x <> f",
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


def test_pm4_parser_keeps_quoted_operators_as_words() -> None:
    parsed = parse_command("grep '|' a.txt > out 2>&1 && echo \"x;y\"")
    assert [c.argv for c in parsed.commands] == [("grep", "|", "a.txt"), ("echo", "x;y")]
    assert [(r.op, r.target) for r in parsed.commands[0].redirects] == [(">", "out"),
                                                                         (">&", "1")]


def test_pm4_parser_refuses_unterminated_input() -> None:
    with pytest.raises(ShellParseError):
        parse_command("echo \"$(ls")


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


shell_tokens = st.sampled_from([
    *"ab -f;&|<>()$`\"'\\\n{}*?=#!:/.~,", "EOF", "<<", "git ", "push ", "rm ", "-rf ", "$(",
    "find ", "-exec ", "xargs ", "bash -c ", "sudo ",
])


@given(st.lists(shell_tokens, max_size=30).map("".join))
def test_pm4_property_shell_like_noise_never_breaks_the_classifier(command: str) -> None:
    verdict = classify(command)
    assert verdict.kind in ("read_only", "write", "destructive") and verdict.reason
