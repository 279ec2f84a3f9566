"""bash is the oracle of the Plan wall (issue 37, acceptance 2; PM-4).

Hypothesis builds command strings from a grammar of the constructs a scanner once read
differently from bash — comments that swallow lines, every quoting form, here-documents,
arithmetic, subscripts bash evaluates, substitutions, redirections of every form, compound
commands, wrappers, options after the name, abbreviated and clustered options, line
continuations, carriage returns, look-alike characters — each around read-only commands and
write or exec primitives. Every string the classifier calls read-only is run by a real
``bash`` and ``sh`` in a sandbox (tests/bash_oracle.py: bubblewrap, ``strace -ff``): the run
must create, change or delete nothing and run no program outside the read-only allow-list.

``make test`` runs a few hundred strings; ``make verify`` at least 20,000. The bypasses the
old scanner let through stay as ``@example`` s.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator

import pytest
from bash_oracle import SHELLS, WRAPPERS, Sandbox, sandbox, unavailable
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from sessionledger.permission.shell import PROGRAMS, classify

VERIFY_STRINGS = 20_000
"""The strings ``make verify`` tries in one run (issue 37: at least 20,000)."""

READS = [
    "ls", "ls -la", "ls -la src", "ls -R", "cat notes.txt", "cat -n notes.txt",
    "head -n 2 notes.txt", "tail -n 1 notes.txt", "wc -l notes.txt", "grep -n alpha notes.txt",
    "grep -rn print src", "sort notes.txt", "sort -u -k1 notes.txt", "sort -t, -k2 notes.txt",
    "uniq notes.txt", "uniq -c notes.txt", "cut -c1-3 notes.txt", "tr a b", "rev notes.txt",
    "diff notes.txt other.txt", "cmp notes.txt other.txt", "comm notes.txt other.txt",
    "nl notes.txt", "echo hi", "echo", "printf '%s\\n' x y", "pwd", "true", "false", "date",
    "date -u +%s", "date -d @0", "tree", "tree -L 1 -a", "file notes.txt", "file -b src/main.py",
    "stat notes.txt", "du -sh .", "df -h .", "basename src/main.py", "dirname src/main.py",
    "realpath notes.txt", "readlink -f notes.txt", "seq 3", "expr 1 + 2", "echo $((1+2))",
    "[[ a < b ]]", "[[ -f notes.txt ]]", "[[ $HOME == /tmp/* ]]", "[ -d src ]",
    "test -e notes.txt", "test a = b", "command -v ls", "type ls", "which ls",
    "find . -name '*.txt'", "find src -type f -print", "find . -maxdepth 1 -newer notes.txt",
    "git status", "git status --short", "git log --oneline -3", "git log -1 --stat", "git diff",
    "git diff HEAD -- notes.txt", "git show --stat HEAD", "git branch", "git branch --list",
    "git tag", "git stash list", "git config --get user.name", "git rev-parse HEAD",
    "git ls-files", "git worktree list", "git blame notes.txt", "git --version",
    "python3 --version", "jq . data.json", "od -c notes.txt", "md5sum notes.txt",
    "sha256sum notes.txt", "id", "whoami", "uname -a", "cd src && ls", "ps", "ps aux",
    "cat notes.txt | sort | uniq -c", "ls | wc -l", "ls >/dev/null", "ls 2>/dev/null",
    "cat < notes.txt", "ls 2>&1", "echo $HOME", "echo \"$PWD\"", "echo ${HOME}", "echo ~",
    "echo *.txt", "echo {a,b}", "wc -c < notes.txt", "cat notes.txt other.txt | head -3",
    "time tree -L 1 -a", "time -p ls -a", "nice -n 5 ls -a", "timeout 5 ls -a",
]
"""Read-only commands an agent runs while planning (each is read-only alone: a test says so)."""

WRITES = [
    # files: create, change, remove
    "touch pwn", "touch notes.txt", "rm -rf victim", "rm -f notes.txt", "rm notes.txt",
    "rmdir victim", "unlink notes.txt", "mkdir pwn", "mkdir -p pwn/x", "ln -s notes.txt pwn",
    "chmod 777 notes.txt", "mv notes.txt pwn", "cp notes.txt pwn", "install notes.txt pwn",
    "truncate -s 0 notes.txt", "mkfifo pwn", "dd if=notes.txt of=pwn", "tar cf pwn notes.txt",
    "gzip notes.txt", "sed -i s/a/b/ notes.txt", "sed -n 'w pwn' notes.txt", "tee pwn",
    "echo x > pwn", "echo x >> notes.txt", ": > notes.txt", "> pwn", "exec 3>pwn",
    # read-only programs' writing options, spelled every way
    "sort -o pwn notes.txt", "sort -opwn notes.txt", "sort -uo pwn notes.txt",
    "sort --output=pwn notes.txt", "sort --out=pwn notes.txt", "sort --outp pwn notes.txt",
    "uniq notes.txt pwn", "uniq -c notes.txt pwn", "tree -o pwn", "tree -opwn",
    "date -s 2030-01-01", "date --set=2030-01-01", "date --se 2030-01-01",
    "file -C -m pwn", "find . -fprint pwn", "find . -fls pwn", "find . -fprintf pwn x",
    "find . -delete", "find victim -delete", "find . -exec touch pwn ';'",
    "find . -execdir touch pwn ';'", "find . -name x -o -exec touch pwn +",
    "rg --pre touch alpha", "rg --pre=touch alpha", "printf -v x y",
    # git writes, abbreviations and clusters among them
    "git tag pwn", "git tag -d v1", "git branch pwn", "git branch --unset-up",
    "git branch -u v1", "git stash", "git add -A", "git commit --allow-empty -qm x",
    "git config user.name pwn", "git config --add x.y z", "git checkout -qb pwn",
    "git switch -qc pwn", "git reset --hard", "git clean -fdx", "git gc -q",
    "git update-ref refs/heads/pwn HEAD", "git log --output=pwn", "git log --outp=pwn",
    "git diff --output=pwn", "git -C . tag pwn", "git --git-dir=.git tag pwn",
    "git grep --open-files-in-pager=touch alpha", "git grep --open=touch alpha",
    "git grep -Otouch alpha", "git grep -nOtouch alpha", "git -c core.pager=touch log -1",
    "git -c alias.x='!touch pwn' x", "GIT_PAGER='touch pwn' git -p log -1",
    "GIT_EXTERNAL_DIFF=touch git diff --ext-diff HEAD~0",
    # programs that run what they are given
    "python3 -c 'open(\"pwn\",\"w\")'", "node -e 'require(\"fs\").writeFileSync(\"pwn\",\"\")'",
    "awk 'BEGIN{system(\"touch pwn\")}'", "perl -e 'open F,\">pwn\"'",
    "sh -c 'touch pwn'", "bash -c 'touch pwn'", "eval 'touch pwn'", "eval touch pwn",
    "echo pwn | xargs touch", "xargs touch", "trap 'touch pwn' EXIT", "exec touch pwn",
    "command touch pwn", "command -p touch pwn", "command -- touch pwn", "env touch pwn",
    "env -i touch pwn", "env -S 'touch pwn'", "time touch pwn", "nice touch pwn",
    "nohup touch pwn", "timeout 5 touch pwn", "builtin eval touch pwn",
    ". /dev/stdin", "source /dev/stdin", "coproc touch pwn",
]
"""Commands that create, change or delete a file, or run a program they are given."""

NAMES: list[Callable[[str], str]] = [
    lambda w: w, lambda w: f"'{w}'", lambda w: f'"{w}"', lambda w: f"\\{w}",
    lambda w: f"{w}''", lambda w: f"$'{w}'", lambda w: f'$"{w}"', lambda w: f"${{x:-{w}}}",
    lambda w: f"$(echo {w})", lambda w: f"{w[:1]}\\\n{w[1:]}", lambda w: f"/usr/bin/{w}",
    lambda w: f"{w[:1]}*{w[2:]}" if len(w) > 2 else w,
]
"""Spellings of a command's name: quoted, escaped, computed, continued, globbed."""

PAIRS = [
    "{a}; {b}", "{a} && {b}", "{a} || {b}", "{a} | {b}", "{a} |& {b}", "{a} & {b}",
    "{a}\n{b}", "{a} \\\n{b}", "{a}\\\n;{b}", "{a} # it's\n{b} #'", "{a} #<<EOF\n{b}\nEOF",
    "{a} #\\\n{b}", "{a}\r{b}", "{a};\r\n{b}", "{a}\u037e{b}", "{a}\uff1b{b}",
    "{a}\u00a0;{b}", "if {a}; then {b}; fi", "if ! {a}; then :; else {b}; fi",
    "while false; do {a}; done; {b}", "{{ {a}; {b}; }}", "( {a}; {b} )", "! {a} && {b}",
    "case x in x) {a};; *) {b};; esac", "for i in 1; do {a}; {b}; done",
    "until true; do {b}; done; {a}", "f() {{ {b}; }}; {a}", "f() {{ {b}; }}; f; {a}",
    "{a} <<EOF\nEOF\n{b}", "{a} <<-EOF\n\tEOF\n{b}", "{a} <<'E'\n$({b})\nE",
    "{a} <<E\n$({b})\nE", "{a} <<E\n`{b}`\nE", "{a} <<< \"$({b})\"", "{a} <<< '$({b})'",
    "echo \"{a}\" '{b}'", "{a} '\n{b}'", "{a} \"\n{b}\"", "{a} $'\n'{b}",
]
"""Two commands together: lists, pipelines, compound commands, and what hides the second."""

AROUND = [
    "echo $({c})", "echo `{c}`", "echo \"$({c})\"", "echo \"`{c}`\"", "echo '$({c})'",
    "cat <({c})", "cat >({c})", "x=$({c})", "echo ${{x:-$({c})}}", "echo ${{x:=`{c}`}}",
    "cat <<EOF\n$({c})\nEOF", "cat <<'EOF'\n$({c})\nEOF", "cat <<\\EOF\n`{c}`\nEOF",
    "cat <<EOF\nEOF\n{c}", "cat << \"EOF\"\n{c}\nEOF", "cat <<E; {c}\nE",
    "[[ 1 -eq 'a[$({c})]' ]]", "[[ -v 'a[$({c})]' ]]", "[[ 'a[$({c})]' -lt 1 ]]",
    "test -v 'a[$({c})]'", "[ -v 'a[$({c})]' ]", "test 'a[$({c})]' -eq 1",
    "printf -v 'a[$({c})]' x", "x='$({c})'; echo ${{x@P}}", "x='a[$({c})]'; echo ${{!x}}",
    "echo $(( a[$({c})] ))", "x='a[$({c})]'; echo $(( x ))", "x='a[$({c})]'; [[ x -eq 1 ]]",
    "(( a[$({c})] ))", "declare -n r='a[$({c})]'; echo $r", "echo $'\\'';{c};#'",
    "echo $'\\\\';{c};#'", "(( 1 << 2 ))\n{c}", "echo $(( 1 << 2 ))\n{c}",
    "(( ls << 2 ))\n{c}", "echo $[ 1 << 2 ]\n{c}", "command {c} -v", "command -v {c}",
    "command -V {c}", "env {c}", "env -- {c}", "time {c}", "time -p {c}", "nice {c}",
    "nohup {c}", "timeout 5 {c}", "exec {c}", "builtin {c}", "xargs {c} </dev/null",
    "trap '{c}' EXIT", "eval '{c}'", "sh -c '{c}'", "bash -c '{c}'",
    "shopt -s expand_aliases\nalias ls='{c}'\nls", "PS4='$({c})' bash -xc :",
    "GIT_PAGER='{c}' git log -1", "PAGER='{c}' git -p log -1", "LESSOPEN='|{c}' git log -1",
    "git -c core.pager='{c}' log -1", "git -c alias.x='!{c}' x", "BASH_ENV=<(echo '{c}') bash -c :",
    "{c} > pwn", "{c} >| pwn", "{c} &> pwn", "{c} &>> pwn", "{c} 2> pwn", "{c} >& pwn",
    "{c} <> notes.txt", "{c} 1<>pwn", "{c} >> notes.txt", "{c} 2>&1 >pwn", "{c} > /dev/null",
    "{c} 2>/dev/null", "{c} < notes.txt", "{c} > \"$HOME/x\"", "{c} >~/x",
    "{c} > ${{x:-pwn}}", "{c} 3>pwn", "{c} > /dev/stdout", "{c} >/dev/tty", "{c}>pwn",
    "{c} >'pwn'", "{c} > $'pwn'", "{c} > pw\\\nn", "{c} | tee pwn", "{c} | cat",
    "{c} | sort | uniq -c | head", "{c} " + " | cat" * 40, "{c}" + " " * 3000 + "; touch pwn",
    "X=1 {c}", "IFS=/ {c}", "LD_PRELOAD=/tmp/x.so {c}", "{c} & wait", "! {c}",
    "set -e; {c}", "{c} ;", "{c} &", "{c} #", "{c} # ; touch pwn", "({c})", "$({c})",
    "`{c}`", "{{ {c}; }} > pwn", "( {c} ) > pwn", "if true; then {c}; fi > pwn",
    "while read l; do {c}; done < notes.txt", "for f in *; do {c}; done",
]
"""One command inside something: substitutions, here-documents, subscripts bash evaluates,
wrappers, shells, pagers, aliases, and redirections of every form."""


def _spelled(command: str, spelling: Callable[[str], str]) -> str:
    name, _, rest = command.partition(" ")
    return spelling(name) + (" " + rest if rest else "")


SOUP = st.text(alphabet=list("'\"\\$`(){}[]#;&|<> \n\t=!@*?~-:a1"), min_size=1,
               max_size=14).map(lambda text: f"echo {text}")
"""``echo`` and shell punctuation: where a grammar and bash may disagree about a word's end."""

PRIMITIVE = st.builds(_spelled, st.sampled_from(READS + READS + WRITES),
                      st.sampled_from(NAMES + [NAMES[0]] * 12)) | SOUP


def _commands() -> st.SearchStrategy[str]:
    def extend(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        pair = st.builds(lambda t, a, b: t.format(a=a, b=b), st.sampled_from(PAIRS), inner,
                         inner)
        around = st.builds(lambda t, c: t.format(c=c), st.sampled_from(AROUND), inner)
        return pair | around

    return st.recursive(PRIMITIVE, extend, max_leaves=3)


COMMANDS = _commands()

BYPASSES = [
    # the old scanner's bypasses (issue 37) and the families a review of the new one found
    "ls # it's\ntouch pwn #'", "echo $'\\'';touch pwn;#'", "(( ls << 2 ))\ntouch pwn",
    "[[ 1 -eq 'a[$(touch pwn)]' ]]", "test -v 'a[$(touch pwn)]'", "printf -v 'a[$(touch pwn)]' x",
    "x='$(touch pwn)'; echo ${x@P}", "x='a[$(touch pwn)]'; echo ${!x}",
    "command rm -rf victim -v", "sort --out=pwn notes.txt", "git grep --open=touch alpha",
    "git grep -nOtouch alpha", "git branch --unset-up", "ls #\\\ntouch pwn", "ls\rtouch pwn",
    "ls \\\n;touch pwn", "echo \"`touch pwn`\"", "uniq notes.txt pwn", "date -s 2030-01-01",
    "tree -o pwn", "find . -fprint pwn", "[ -v 'a[$(touch pwn)]' ]",
    # found by this oracle in the new reader: the grammar ends $'\\' at a later quote than
    # bash does; sh reads $'\'' otherwise, and >, <<, ;, &, | in [[ ]], (( )), $[ ] as its own
    "echo $'\\';touch pwn;#'", "echo $'\\'';echo [];#'" + " " * 900 + "; touch pwn",
    "[[ a > pwn ]]", "(( 1 > 2 ))", "echo $[ 1 >> 2 ]", "echo $[ 1 << 2 ]\necho '$(touch pwn)'",
    "(( 1 << 2 ))\necho '$(touch pwn)'", "[[ -f x || touch pwn ]]", "[[ a =~ x;touch pwn ]]",
    "[[ a == x&touch pwn ]]", "[[ a =~ x|touch pwn ]]",
    # the shrunk counterexamples this oracle found in the scanner before (4b5aea7; seeds 0-39)
    "[[ 1 -eq 'a[$(date -s 2030-01-01)]' ]]", "[[ 1 -eq 'a[$(sh -c 'ls')]' ]]",
    "[[ 1 -eq 'a[$(coproc touch pwn)]' ]]", "ls # it's\n$(find . -name '*.txt') #'",
    "[[ 1 -eq 'a[$($'echo' $HOME)]' ]]", "[[ 1 -eq 'a[$(echo >1)]' ]]",
    '(( ls << 2 ))\npython3 -c \'open("pwn","w")\'', "[[ 1 -eq 'a[$(eval touch pwn)]' ]]",
    'ls # it\'s\nperl -e \'open F,">pwn"\' #\'', "echo $'\\'';git config user.name pwn;#'",
    "ls # it's\ndate -s 2030-01-01 #'", "[[ 1 -eq 'a[$(git config user.name pwn)]' ]]",
]


@pytest.fixture(scope="module")
def oracle() -> Iterator[Sandbox]:
    """The sandbox (a new workspace for this module; removed after it)."""
    reason = unavailable()
    if reason is not None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"the bash oracle must run on CI: {reason}", pytrace=False)
        pytest.skip(f"the bash oracle is skipped: {reason}")
    with sandbox([*PROGRAMS, *WRAPPERS]) as box:
        yield box


def _read_only_commands_only_read(oracle: Sandbox, command: str) -> bool:
    """Run ``command`` in both shells when the classifier calls it read-only."""
    if not classify(command).read_only:
        return False
    for shell in SHELLS:
        findings = oracle.run(command, shell)
        assert not findings, (
            f"called read-only, but {shell} did more: {command!r}\n"
            + "\n".join(str(f) for f in findings[:8]))
    return True


def test_the_grammar_reads_and_writes_are_what_they_say() -> None:
    """The grammar's read-only commands are read-only alone (else the oracle would run few),
    and its writes are not (else the corpus would be mislabelled)."""
    assert [c for c in READS if not classify(c).read_only] == []
    assert [c for c in WRITES if classify(c).read_only] == []


@pytest.mark.parametrize("command", [
    "touch pwn", "echo x > pwn", "sort -o pwn notes.txt", "git tag pwn", "rm -rf victim",
    "date -s 2030-01-01", "mkdir pwn", "ln -s x pwn", "git status; touch pwn",
    "cat notes.txt | tee pwn", "x=$(touch pwn)", "ls >/nonexistent/pwn",
    "python3 -c pass", "npm ls; touch ~/.npm/pwn", "git -c alias.x=\"!echo hi\" x",
    "\\time -o /dev/null ls", "\\time -p -a -o /dev/null ls", "python3 -V; python3 -c pass",
])
def test_the_oracle_sees_what_a_command_does(oracle: Sandbox, command: str) -> None:
    """The oracle is not blind: a write, a removal, a clock change or an unlisted program is
    a finding in both shells, and the workspace is rebuilt after a change."""
    for shell in SHELLS:
        assert oracle.run(command, shell), (shell, command)
    assert oracle.snapshot() == oracle._before


@pytest.mark.parametrize("command", [
    *READS, "npm ls", "npm --version", "pip list", "node --version", "git status --porcelain",
])
def test_each_read_only_command_only_reads(oracle: Sandbox, command: str) -> None:
    """Each read-only command of the grammar, and the slow toolchain listings, run clean."""
    assert classify(command).read_only, command
    for shell in SHELLS:
        assert oracle.run(command, shell) == [], (shell, command)


@pytest.mark.timeout(1800)  # 20,000 strings: about 4 minutes idle, more beside other tests
def test_bash_never_sees_a_read_only_command_write(oracle: Sandbox, depth: str) -> None:
    """Every generated string the classifier calls read-only does nothing but read, in bash
    and in sh (``make verify``: at least 20,000 strings; ``make test``: a few hundred)."""
    tried: list[str] = []
    ran: list[str] = []
    strings = 300 if depth == "fast" else VERIFY_STRINGS

    @settings(max_examples=strings, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                     HealthCheck.filter_too_much])
    @given(command=COMMANDS)
    def check(command: str) -> None:
        tried.append(command)
        if _read_only_commands_only_read(oracle, command):
            ran.append(command)

    for bypass in BYPASSES:
        check = example(command=bypass)(check)
    check()
    assert len(tried) >= strings
    # the grammar reaches read-only strings often enough for the oracle to judge many
    assert len(ran) >= strings // 20, (len(ran), len(tried))
