"""Plan is a wall: a red-team corpus through a real ``serve`` (issue 37, acceptance 1; PM-4).

Every command below that writes, deletes or runs a program is sent to the real server two
ways — ``POST /v1/sessions/{id}/permission-check`` and the Claude Code ``PreToolUse`` hook
(``POST /v1/hooks/claude-code``) — in three states: Plan over ``build``, Plan over ``yolo``
(``bypassPermissions``) and ``build``. None may be allowed in Plan, none silently allowed in
build, and no spelling of ``rm -r``/``rm -rf`` is allowed anywhere. The read-only commands an
agent uses while planning must be allowed in Plan. The corpus is built from families (each
the way a scanner once read a line differently from bash) crossed with write primitives.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from claude_hooks_support import hook_event, post_hook
from server_support import ServerProcess

PRIMITIVES = [
    "touch pwn", "rm -rf ~", "echo x > pwn", "cp /etc/hostname pwn", "mkdir pwn",
    "python3 -c 'open(\"pwn\",\"w\")'", "tee pwn", "sed -i s/a/b/ f", "git commit -am x",
    "curl -o pwn http://127.0.0.1:9/", "ln -s / pwn", "chmod 777 f", "mv f pwn",
    "dd if=/dev/zero of=pwn count=1", "npm install left-pad",
]
"""Commands that change the workspace or the world, or run what they are given."""

RM_SPELLINGS = [
    "rm -rf x", "rm -r x", "rm -fr x", "rm -Rf x", "rm -R x", "rm --recursive x",
    "rm --rec x", "rm --recu --for x", "rm x -rf", "rm x -r", "rm -rfv x",
    "rm -vrf x", "rm -f -r x", "rm -r -- x", "'rm' -rf x", '"rm" -rf x', "\\rm -rf x",
    "r''m -rf x", "r\\m -rf x", "rm '-rf' x", 'rm "-rf" x', "rm -r'f' x", "rm {-rf,x}",
    "rm $opt x", "rm ${opt} x", "command rm -rf x", "command rm -rf x -v", "env rm -rf x",
    "sudo rm -rf x", "nice rm -rf x", "nice -n 5 rm -rf x", "timeout 5 rm -rf x",
    "time rm -rf x", "xargs rm -rf", "find . -exec rm -rf {} +", "bash -c 'rm -rf x'",
    "sh -c \"rm -rf x\"", "eval 'rm -rf x'", "eval rm -rf x", "env -S 'rm -rf x'",
    "/bin/rm -rf x", "busybox rm -rf x", "exec rm -rf x", "nohup rm -rf x",
    "echo $(rm -rf x)", "echo `rm -rf x`", "cat <(rm -rf x)", "ls && rm -rf x",
    "ls; rm -rf x", "ls || rm -rf x", "ls | rm -rf x", "(rm -rf x)", "{ rm -rf x; }",
    "! rm -rf x", "if true; then rm -rf x; fi", "while false; do :; done; rm -rf x",
    "ls\nrm -rf x", "ls # it's\nrm -rf x #'", "rm -rf ~", "rm -rf /", "rm -rf .",
    "rm -rf *", "rm -rf ~/", "rm -rf $HOME", "$CMD -rf x", "$(echo rm) -rf x",
    "bash -O extglob -c 'rm -rf x'", "bash -o errexit -c 'rm -rf x'", "bash -c -- 'rm -rf x'",
    "bash -c -e 'rm -rf x'", "env -iS 'rm -rf x'", "builtin eval rm -rf x", "unshare rm -rf x",
    "script -qc 'rm -rf x' /dev/null", "su -c 'rm -rf x'", "sg root -c 'rm -rf x'",
    "runuser -u root -- rm -rf x", "trap 'rm -rf x' EXIT", "find . -name {a,-o,-exec,rm,-rf,x,\\;}",
]
"""Ways to say ``rm -r``/``rm -rf``: never allowed in any state tested here."""

FAMILIES = [
    # a comment whose quote or here-document marker swallows the next line
    "ls # it's\n{w} #'", "ls #'\n{w}", "ls # <<EOF\n{w}\nEOF", "ls # \"\n{w}", "#\n{w}",
    "ls # `\n{w}", "ls # $(\n{w}",
    # ANSI-C and translated quoting
    "echo $'\\'';{w};#'", "echo $'a\\'b' ; {w}", "echo $\"x\";{w}", "echo $'\\x27';{w}",
    # << inside arithmetic is a shift, not a here-document
    "(( 1 << 2 ))\n{w}", "echo $(( 1 << 2 ))\n{w}", "(( x <<= 1 ))\n{w}",
    # expansions bash computes: subscripts, prompt expansion, indirection
    "[[ 1 -eq 'a[$({w})]' ]]", "[[ -v 'a[$({w})]' ]]", "test -v 'a[$({w})]'",
    "[ -v 'a[$({w})]' ]", "printf -v 'a[$({w})]' x", "echo ${{x@P}}",
    "x='$({w})'; echo ${{x@P}}", "echo ${{!x}}", "(( a[$({w})] ))", ": $(( a[$({w})] ))",
    "echo ${{a[$({w})]}}", "echo ${{x:-$({w})}}", "echo ${{x:=$({w})}}",
    "declare -p 'a[$({w})]'", "read 'a[$({w})]' <<< x", "let 'a[$({w})]'",
    "[[ $x -eq 1 ]] && {w}", "[[ a -lt $x ]]; {w}",
    # options after the program's name, and programs that run others
    "command {w}", "command -p {w}", "time {w}", "nice {w}", "timeout 1 {w}",
    "env {w}", "env -i {w}", "sudo {w}", "xargs -I{{}} {w}", "bash -c '{w}'", "sh -c '{w}'",
    "eval '{w}'", "watch '{w}'", "nohup {w}", "exec {w}", "builtin eval '{w}'",
    # chains, groups, substitutions
    "ls && {w}", "ls; {w}", "ls || {w}", "ls | {w}", "ls & {w}", "({w})", "{{ {w}; }}",
    "! {w}", "if ls; then {w}; fi", "while false; do ls; done; {w}", "echo $({w})",
    "echo `{w}`", "echo \"$({w})\"", "cat <({w})", "x=$({w}) ls", "ls >({w})",
    "cat <<EOF\n$({w})\nEOF", "f() {{ {w}; }}; f", "ls\n{w}", "ls \\\n; {w}",
    # quoting of the name
    "'{w}'", "\"{w}\"",
]
"""Families of disguise; ``{w}`` is a write primitive."""

WRITES = [
    # options a scanner misread: abbreviated, clustered, after operands
    "sort --out=f x", "sort --outp=f x", "sort -o f x", "sort -uo f x", "sort x -o f",
    "sort --compress-prog=sh x", "sort -T /tmp --compress-program=sh x",
    "git grep --open-files='vi' x", "git grep --open=vi x", "git grep -nO'vi' x",
    "git grep -Ovi x", "git branch --unset-up", "git branch --set-upstream-to=o/m",
    "git branch new", "git branch -m a b", "git branch -c a b", "git tag v1",
    "git tag -d v1", "git stash", "git stash pop", "git stash drop", "git config user.name x",
    "git config --unset user.name", "git worktree add ../x", "git remote add o u",
    "git remote set-url origin u", "git log --output=f", "git diff --output=f",
    "git -c core.pager=sh log", "git -c alias.x=!sh x", "git --exec-path=. log",
    "git log --ext-diff", "git diff --ext-diff", "git show --textconv HEAD",
    "git -p log", "git --paginate log", "git commit -m x", "git add .", "git push",
    "git fetch", "git pull", "git checkout -b x", "git switch -c x", "git merge x",
    "git rebase main", "git reset HEAD~1", "git restore f", "git apply p.diff", "git am p",
    "git cherry-pick x", "git revert x", "git gc", "git prune", "git notes add -m x",
    "git update-index --assume-unchanged f", "git clean -f", "git init",
    "find . -delete", "find . -exec touch {} +", "find . -execdir sh -c x {} +",
    "find . -ok rm {} ;", "find . -fprint f", "find . -fls f", "find . -fprintf f %p",
    "rg --pre=sh x", "rg --pre sh x", "rg --hostname-bin=sh x", "rg -z --pre=sh x",
    "uniq a b", "uniq -c a b", "tree -o f", "tree -o=f", "file -C -m x", "date -s 12:00",
    "date --set=12:00", "printf -v x hi", "tee f", "tee -a f",
    "ls > f", "ls >> f", "ls >| f", "ls &> f", "ls &>> f", "ls 2> f", "ls 1> f",
    "ls >& f", "ls 3> f", "ls {fd}> f", "exec 3> f", "cat > f <<EOF\nx\nEOF",
    "cat <<EOF > f\nx\nEOF", "ls 2>f >/dev/null", "ls > /dev/null > f", "echo x > /dev/sda",
    "cp a b", "mv a b", "install a b", "ln a b", "touch f", "mkdir d", "rmdir d",
    "truncate -s 0 f", "patch < p", "tar xf a.tar", "unzip a.zip", "wget http://x",
    "curl -O http://x", "perl -i -pe s/a/b/ f", "awk -i inplace 1 f", "node -e 1",
    "python3 x.py", "python -c 1", "python3 -m http.server", "npm run build",
    "npm install", "pip install x", "make", "cargo build", "go build", "docker run x",
    "ssh host", "scp a host:", "rsync a b", "kill 1", "pkill x", "crontab f", "at now",
    "chmod +x f", "chown me f", "ln -sf a b", "dd if=a of=b", "shred f", "mkfifo p",
    "a=1", "export A=1", "declare x=1", "local x=1", "unset PATH", "alias ls=rm",
    "source x.sh", ". x.sh", "./x.sh", "/usr/bin/env touch f", "PATH=. ls", "IFS=x ls",
    "ls $(touch f)", "cd $(touch f)", "echo ${x@P}", "echo ${!x}", "echo ${x[$(touch f)]}",
    "sort $'-o' f", "sort $x", "sort \"$x\" f", "sort *", "sort {-o,f}",
    # look-alikes: fullwidth letters, a no-break space, a zero-width space, dashes
    "\uff54\uff4f\uff55\uff43\uff48 f", "touch\u00a0f", "to\u200buch f",
    "ls \u2014 touch f; touch g", "rm \u2013rf x",
    "x" * 5000 + "; touch f", "ls " + "a " * 3000 + "> f", "echo " + "'" * 3,
]
"""Single commands that write, delete or run programs (each also crossed with nothing)."""

WRITES += [
    # where tree-sitter-bash and bash part (a review found each creating pwn in real bash)
    "ls\r#; touch pwn", "echo a\\\n#; touch pwn", "echo a \\\r\ntouch pwn",
    "[[ -n ]]# ]]; touch pwn", "[[ a =~ ]]# ]] || touch pwn", "{ ls; }#; touch pwn; }",
    "cat <<EOF\n`touch pwn`\nEOF\n", "echo \"$\\\n(touch pwn)\"", "cat <<<\"$\\\n(touch pwn)\"",
    "cat <<EOF\n$\\\n(touch pwn)\nEOF\n",
    # an option whose value is optional does not take the next word; braces in value slots
    "git log --pretty --output=pwn", "git log --abbrev --output=pwn", "git diff -U --output=pwn",
    "git show --relative-date --output=pwn", "git diff --ignore-submodules --output=pwn",
    "git branch --abbrev -umain", "git grep --untracked --exclude -O'touch pwn' hello",
    "git log -n {1,--output=pwn}", "sort -k {1,-o,pwn} /dev/null", "find . -name {a,-fprint,pwn}",
    "uniq -f {1,in,pwn}", "git -C {.,-c,'core.fsmonitor=touch pwn;:'} status", "uniq ./*.txt",
    "uniq in{,2}", "test {-v,'a[$(touch pwn)]'}", "[ ! {-v,'a[$(touch pwn)]'} ]",
    "date 0101000030", "tree -Lo 1 pwn", "rg -e {x,--pre=sh} file",
    # what sh reads otherwise (found by tests/test_bash_oracle.py running each under sh)
    "[[ a > pwn ]]", "[[ 1 -gt 2 || a > pwn ]]", "(( 1 > 2 ))", "(( 1 >= 2 ))",
    "echo $[ 1 > 2 ]", "echo $'\\'';echo x;#'" + " " * 40 + "; touch pwn",
    "echo $'\\';touch pwn;#'", "(( 1 << 2 ))\necho '$(touch pwn)'", "[[ -f x || touch pwn ]]",
    "[[ a =~ x;touch pwn ]]", "[[ a == x&touch pwn ]]", "[[ a =~ x|touch pwn ]]",
]

READS = [
    "ls", "ls -la", "ls -la src", "ls *.py", "ls -R", "cat README.md", "cat *.md",
    "head -n 20 f", "head -5 f", "tail -n 50 log", "wc -l *.py", "grep -rn TODO .",
    "grep -rn 'def ' --include='*.py' .", "rg -n foo", "rg --files", "rg -l foo src",
    "find . -name '*.py'", "find . -type f -name '*.md' -maxdepth 2", "find . -newer f",
    "pwd", "echo hi", "echo $HOME", "echo \"$PWD\"", "printf '%s\\n' a b", "which python3",
    "type ls", "command -v git", "whoami", "id", "uname -a", "stat f", "du -sh .",
    "df -h", "diff a b", "cmp a b", "cut -d: -f1 /etc/passwd", "tr a-z A-Z < f",
    "sort f", "sort -n f", "sort -rn f | head", "uniq f", "uniq -c f", "ls | sort | uniq -c",
    "tree", "tree -L 2", "file f", "date", "date -u", "date +%s", "ps aux", "ps -ef",
    "python --version", "python3 --version", "node --version", "npm --version",
    "cargo --version", "rustc --version", "go version", "pip --version", "pip list",
    "pip freeze", "npm ls", "npm ls --depth=0", "git status", "git status --short",
    "git log --oneline -n 10", "git log -p -- f", "git diff", "git diff --stat",
    "git diff HEAD~1 -- src", "git show HEAD", "git show HEAD:README.md", "git blame f",
    "git branch", "git branch -a", "git branch --list 'feat/*'", "git tag", "git tag -l",
    "git stash list", "git config --get user.name", "git config --list",
    "git worktree list", "git remote -v", "git rev-parse HEAD",
    "git rev-parse --show-toplevel", "git ls-files", "git grep -n foo",
    "echo $((1+2))", "[[ a < b ]]", "[[ a == b* ]]", "[[ -f f ]] && cat f", "[ -d src ] && ls src",
    "test -f f", "if [ -f f ]; then cat f; fi", "ls 2>/dev/null", "ls 2>&1 | head",
    "grep x f > /dev/null 2>&1", "cat < f", "cat <<'EOF'\nhello\nEOF", "jq .name package.json",
    "seq 1 5", "nl f", "realpath f", "basename /a/b", "dirname /a/b",
    "cd src && ls", "time ls", "timeout 5 git status", "nice -n 5 ls",
    "ls # a comment", "{ ls; pwd; }", "(ls; pwd)", "md5sum f", "sha256sum f",
]
"""Commands a planning agent runs to look around: allowed in Plan."""


def corpus() -> list[str]:
    """The write corpus: each family with each primitive, the rm spellings, the single writes
    (deduplicated)."""
    seen: dict[str, None] = {}
    for family, primitive in itertools.product(FAMILIES, PRIMITIVES[:6]):
        seen.setdefault(family.format(w=primitive))
    for command in [*RM_SPELLINGS, *WRITES]:
        seen.setdefault(command)
    return list(seen)


WRITE_CORPUS = corpus()
RM = set(RM_SPELLINGS)


def test_the_corpus_is_large_enough() -> None:
    assert len(WRITE_CORPUS) >= 600 and len(READS) >= 80


@pytest.fixture(scope="module")
def http(server: ServerProcess) -> Iterator[httpx.Client]:
    with server.client(timeout=60.0) as client:
        yield client


STATES = {
    # state: (the session's mode, Plan on, the Claude Code permission_mode of the prompt)
    "plan over build": ("build", True, "default"),
    "plan over yolo": ("yolo", True, "bypassPermissions"),
    "build": ("build", False, "default"),
}


def session_in(http: httpx.Client, state: str) -> str:
    mode, plan, _ = STATES[state]
    created = http.post("/v1/sessions", json={"mode": mode})
    assert created.status_code == 201, created.text
    sid = str(created.json()["sessionId"])
    if plan:
        entered = http.post(f"/v1/sessions/{sid}/mode", json={"mode": "plan"})
        assert entered.status_code == 200, entered.text
    document = http.get(f"/v1/sessions/{sid}").json()["executionState"]
    assert (document["mode"], document["planEnabled"]) == (mode, plan)
    return sid


def checked(http: httpx.Client, sid: str, command: str) -> str:
    answer = http.post(f"/v1/sessions/{sid}/permission-check",
                       json={"tool": "Bash", "input": {"command": command}})
    assert answer.status_code == 200, (command, answer.text)
    return str(answer.json()["behavior"])


def hooked(http: httpx.Client, claude: str, cwd: Path, state: str, command: str,
           use: int) -> str:
    _, plan, permission_mode = STATES[state]
    event = hook_event("PreToolUse", claude, cwd, mode="plan" if plan else permission_mode,
                       tool_name="Bash", tool_input={"command": command},
                       tool_use_id=f"toolu_{use}")
    answer = post_hook(http, event)
    assert answer.code == 200, (command, answer)
    output: dict[str, Any] = answer.output
    return str(output["hookSpecificOutput"]["permissionDecision"])


def claude_session(http: httpx.Client, cwd: Path, state: str) -> str:
    """A Claude Code session in ``state``: its prompt sets the mode underneath, then Plan."""
    claude = str(uuid.uuid4())
    permission_mode = STATES[state][2]
    prompt = hook_event("UserPromptSubmit", claude, cwd, mode=permission_mode, prompt="plan")
    assert post_hook(http, prompt).code == 200
    return claude


def answers(server: ServerProcess, http: httpx.Client, state: str,
            commands: list[str]) -> Iterator[tuple[str, str, str]]:
    """``(way, command, behavior)`` for each command, asked both ways in a new session (and
    a new Claude Code session) in ``state``."""
    sid = session_in(http, state)
    cwd = server.workspace / f"{uuid.uuid4().hex[:8]}-{state.replace(' ', '-')}"
    cwd.mkdir()
    claude = claude_session(http, cwd, state)
    for use, command in enumerate(commands):
        yield "permission-check", command, checked(http, sid, command)
        yield "hook", command, hooked(http, claude, cwd, state, command, use)


@pytest.mark.parametrize("state", list(STATES))
def test_no_write_is_allowed_in_plan_or_silently_in_build(  # issue 37 acceptance 1, PM-4
    server: ServerProcess, http: httpx.Client, state: str
) -> None:
    allowed = [(way, command) for way, command, behavior
               in answers(server, http, state, WRITE_CORPUS) if behavior == "allow"]
    assert allowed == [], f"{len(allowed)} writes allowed in {state}: {allowed[:20]}"


@pytest.mark.parametrize("state", list(STATES))
def test_what_a_planning_agent_reads_is_allowed_in_plan(  # issue 37 acceptance 1
    server: ServerProcess, http: httpx.Client, state: str
) -> None:
    refused = [answer for answer in answers(server, http, state, READS) if answer[2] != "allow"]
    assert refused == [], f"{len(refused)} reads not allowed in {state}: {refused[:20]}"


def test_no_spelling_of_rm_r_is_allowed_in_auto(
    server: ServerProcess, http: httpx.Client,
) -> None:
    """``auto`` asks before a destructive command; every spelling above must be one."""
    created = http.post("/v1/sessions", json={"mode": "auto"})
    sid = str(created.json()["sessionId"])
    allowed = [c for c in RM_SPELLINGS if checked(http, sid, c) == "allow"]
    assert allowed == []
