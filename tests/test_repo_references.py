"""The repository explains itself: what it refers to is in the repository (issue 42).

A clone holds no contract outside it. Every tracked file outside ``tests/`` may point only at
paths that exist in the checkout, never at the external ``SPEC.md`` or the design article it
was written from, and may cite only the requirement ids that docs/spec.md defines. The tests
cite those ids as ``# ES-5`` comments; each of them must be defined there too.

Each failure lists ``file:line`` of every offender.
"""

from __future__ import annotations

import functools
import io
import re
import subprocess
import tokenize
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SPEC_PAGE = "docs/spec.md"

# The prefixes of the requirement ids (docs/spec.md): event log, execution state, todos,
# AskUserQuestion, hosts, Plan mode, models, other sessions, tool registry, edges, Claude Code.
PREFIXES = ("EL", "ES", "TD", "AQ", "HO", "PM", "LM", "RS", "TR", "EG", "CC")
REQUIREMENT = re.compile(r"(?<![\w-])(?:" + "|".join(PREFIXES) + r")-\d+(?![\w-])")
DEFINITION = re.compile(r"^#{2,6}\s+((?:" + "|".join(PREFIXES) + r")-\d+)\b", re.MULTILINE)

# What a clone does not have: the external contract, the article it restates, and the design
# notes, host notes and style guide the project was started from.
OUTSIDE = re.compile(
    r"(?:SPEC|DESIGN|STYLE|HOSTS)\.md|(?<![\w.])(?:SPEC|DESIGN|STYLE)(?![\w.])"
    r"|(?<![\w-])seed/|\b[Tt]he seed\b|\bseed's\b")

MARKDOWN_LINK = re.compile(r"\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
BACKTICKED = re.compile(r"`([^`\n]+)`")
# A bare path: a top-level directory of the repository, then a file name with an extension.
_EXTENSIONS = r"(?:py|md|js|css|html|json|jsonl|toml|txt|svg|lock|cfg|ini|yml|yaml|sh)"
# A bare path (not in quotes, not inside a URL or a home directory): directories, then a file
# name with an extension.
BARE_PATH = re.compile(
    r"(?<![\w./~$@:'\"-])((?:[A-Za-z_.][\w.-]*/)+[\w.-]*\." + _EXTENSIONS + r")\b")
# A backticked path: a file with an extension, or a directory written with its trailing slash
# (`sessionledger/sessionId`, a key, and `eventlog/encoding.check_json`, a name, are not paths).
PATH_TOKEN = re.compile(r"^\.?[\w.-]+(?:/[\w.*?\[\]-]*)*(?:/|\." + _EXTENSIONS + r")$")


@functools.cache
def tracked() -> tuple[str, ...]:
    out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True)
    return tuple(sorted(p for p in out.stdout.decode().split("\0") if p))


@functools.cache
def top_level() -> frozenset[str]:
    return frozenset(p.split("/", 1)[0] for p in tracked())


def checked_files() -> Iterator[tuple[str, list[str]]]:
    """Every tracked text file outside tests/, as its lines."""
    for rel in tracked():
        if rel.startswith("tests/"):
            continue
        path = ROOT / rel
        if not path.is_file():
            continue  # deleted in the working tree, not yet committed
        raw = path.read_bytes()
        if b"\0" in raw:
            continue
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            continue
        yield rel, text.splitlines()


def _exists(rel: str) -> bool:
    if any(ch in rel for ch in "*?["):
        return any(ROOT.glob(rel))
    return (ROOT / rel).exists()


def _clean(token: str) -> str:
    """The path part of a mention: no anchor, line number, test name or trailing punctuation."""
    token = token.split("#", 1)[0].split("::", 1)[0]
    token = re.sub(r"(?::\d+(?:[-\u2013]\d+)?)+$", "", token)
    return token.rstrip(".,;:)")


def repo_path(token: str) -> str | None:
    """The repository path a root-relative mention names, or None when it names none."""
    token = _clean(token)
    if "/" not in token or "…" in token or "<" in token or "{" in token or "$" in token:
        return None
    if token.startswith("./"):
        token = token[2:]
    if token.split("/", 1)[0] not in top_level():
        return None
    return token


def prose_lines(source: str) -> set[int] | None:
    """The lines of Python source that are comments or docstrings (None: every line).

    A path inside a string the code uses is data (a generated transcript's file names, a
    command), not a reference to this repository.
    """
    prose: set[int] = set()
    previous = tokenize.NEWLINE
    try:
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            if token.type == tokenize.COMMENT:
                prose.add(token.start[0])
            elif token.type == tokenize.STRING and previous in (
                    tokenize.NEWLINE, tokenize.NL, tokenize.INDENT, tokenize.DEDENT):
                prose.update(range(token.start[0], token.end[0] + 1))
            if token.type not in (tokenize.COMMENT, tokenize.NL):
                previous = token.type
    except (tokenize.TokenError, SyntaxError):
        return None
    return prose


def broken_paths(rel: str, lines: list[str]) -> Iterator[tuple[int, str]]:
    base = (ROOT / rel).parent
    prose = prose_lines("\n".join(lines) + "\n") if rel.endswith(".py") else None
    for number, line in enumerate(lines, 1):
        if prose is not None and number not in prose:
            continue
        if rel.endswith(".md"):
            for target in MARKDOWN_LINK.findall(line):
                if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
                    continue  # a URL, a mail address, an anchor on the same page
                path = _clean(target)
                if not path:
                    continue
                resolved = (base / path).resolve()
                if not resolved.is_relative_to(ROOT) or not resolved.exists():
                    yield number, target
            line = MARKDOWN_LINK.sub("]()", line)  # link targets are relative to the page
        seen: set[str] = set()
        for span in BACKTICKED.findall(line):
            for word in span.split():
                found = repo_path(word.strip("'\"()[],"))
                if found and PATH_TOKEN.match(found) and not _exists(found):
                    seen.add(found)
                    yield number, found
        for word in BARE_PATH.findall(line):
            found = repo_path(word)
            if found and found not in seen and not _exists(found):
                yield number, found


@functools.cache
def anchors(path: Path) -> frozenset[str]:
    """The anchors a Markdown page has, spelled as GitHub spells a heading's (and ``<a id>``)."""
    text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.DOTALL)
    found: set[str] = set()
    seen: dict[str, int] = {}
    for heading in re.findall(r"^#{1,6}\s+(.*?)\s*#*\s*$", text, flags=re.MULTILINE):
        heading = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        found.add(slug if count == 0 else f"{slug}-{count}")
    found.update(re.findall(r'<a (?:id|name)="([^"]+)"', text))
    return frozenset(found)


def broken_anchors(rel: str, lines: list[str]) -> Iterator[tuple[int, str]]:
    """Links into a Markdown page whose anchor names no heading there."""
    base = (ROOT / rel).parent
    for number, line in enumerate(lines, 1):
        for target in MARKDOWN_LINK.findall(line):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target) or "#" not in target:
                continue
            path, anchor = target.split("#", 1)
            page = (base / path).resolve() if path else ROOT / rel
            if page.suffix == ".md" and page.is_file() and anchor not in anchors(page):
                yield number, target


def _report(offenders: list[str]) -> str:
    return f"{len(offenders)} offender(s):\n" + "\n".join(offenders)


@functools.cache
def defined_ids() -> frozenset[str]:
    page = ROOT / SPEC_PAGE
    if not page.is_file():
        return frozenset()
    return frozenset(DEFINITION.findall(page.read_text(encoding="utf-8")))


def test_the_contract_page_defines_every_requirement_once() -> None:
    page = ROOT / SPEC_PAGE
    assert page.is_file(), f"{SPEC_PAGE} is missing"
    found = DEFINITION.findall(page.read_text(encoding="utf-8"))
    twice = sorted({rid for rid in found if found.count(rid) > 1})
    assert not twice, f"{SPEC_PAGE} defines these ids more than once: {twice}"
    for prefix in PREFIXES:
        numbers = sorted(int(rid.split("-")[1]) for rid in found if rid.split("-")[0] == prefix)
        assert numbers == list(range(1, len(numbers) + 1)), (
            f"{SPEC_PAGE}: the {prefix} ids are not numbered 1..n without gaps: {numbers}")


def test_nothing_points_at_the_contract_outside_the_repository() -> None:
    offenders = [
        f"{rel}:{number}: {match.group(0)!r}"
        for rel, lines in checked_files()
        for number, line in enumerate(lines, 1)
        for match in OUTSIDE.finditer(line)
    ]
    assert not offenders, (
        "Files cite the contract, design notes or style guide the project was started from, or the "
        "article it restates, which a clone does not have; point at "
        f"{SPEC_PAGE} or the page that explains it instead.\n" + _report(offenders))


def test_every_repository_path_mentioned_exists() -> None:
    offenders = [
        f"{rel}:{number}: {target}"
        for rel, lines in checked_files()
        for number, target in broken_paths(rel, lines)
    ]
    assert not offenders, "Files name repository paths that do not exist.\n" + _report(offenders)


def test_every_requirement_id_outside_the_tests_is_defined() -> None:
    ids = defined_ids()
    offenders = [
        f"{rel}:{number}: {rid}"
        for rel, lines in checked_files()
        for number, line in enumerate(lines, 1)
        for rid in REQUIREMENT.findall(line)
        if rid not in ids
    ]
    assert not offenders, (
        f"Requirement ids that {SPEC_PAGE} does not define.\n" + _report(offenders))


def test_every_requirement_id_the_tests_cite_is_defined() -> None:
    ids = defined_ids()
    offenders: list[str] = []
    for rel in tracked():
        if not rel.startswith("tests/") or not rel.endswith(".py") or not (ROOT / rel).is_file():
            continue
        for number, line in enumerate((ROOT / rel).read_text(encoding="utf-8").splitlines(), 1):
            offenders.extend(f"{rel}:{number}: {rid}" for rid in REQUIREMENT.findall(line)
                             if rid not in ids)
    assert not offenders, (
        f"Tests cite requirement ids that {SPEC_PAGE} does not define.\n" + _report(offenders))


def test_every_markdown_anchor_exists() -> None:
    offenders = [
        f"{rel}:{number}: {target}"
        for rel, lines in checked_files() if rel.endswith(".md")
        for number, target in broken_anchors(rel, lines)
    ]
    assert not offenders, "Links name an anchor the page does not have.\n" + _report(offenders)


def test_the_anchor_check_finds_what_it_should() -> None:
    lines = ["[ES-5](spec.md#es-5), [wire](spec.md#wire-shapes), [x](spec.md#es-99), [y](#nowhere)"]
    assert [target for _, target in broken_anchors("docs/tools.md", lines)] == [
        "spec.md#es-99", "#nowhere"]


@pytest.mark.parametrize(("text", "expected"), [
    ("see [the CLI](docs/nowhere.md#x)", ["docs/nowhere.md#x"]),
    ("see `docs/nowhere.md` and `bench/none.py --quick`", ["docs/nowhere.md", "bench/none.py"]),
    ("see eventlog/nowhere.py for it", ["eventlog/nowhere.py"]),
    ("fine: `docs/cli.md#serve`, `tests/test_docs.py::test_x`, `eventlog/sqlite.py:12`", []),
    ("fine: `~/.claude/settings.json`, `$CODEX_HOME/config.toml`, `src/app.py`", []),
    ("fine: https://example.com/docs/x.md and `tests/test_*.py` and `sessionledger/…py`", []),
    ("fine: `sessionledger/sessionId`, `eventlog/encoding.check_json`, \"tests/test_app.py\"", []),
    ("see `sessionledger/gone/` and `eventlog/gone.py:12`",
     ["sessionledger/gone/", "eventlog/gone.py"]),
])
def test_the_path_check_finds_what_it_should(text: str, expected: list[str]) -> None:
    assert [target for _, target in broken_paths("README.md", [text])] == expected


def test_the_id_and_outside_patterns() -> None:
    assert REQUIREMENT.findall("ES-5, PM-10 and (CC-9); not UTF-8, TEST-NET-1 or BSD-3") == [
        "ES-5", "PM-10", "CC-9"]
    assert [m.group(0) for m in OUTSIDE.finditer("SPEC.md §2, SPEC EG-5, seed/x, the seed")] == [
        "SPEC.md", "SPEC", "seed/", "the seed"]
    assert [m.group(0) for m in OUTSIDE.finditer('DESIGN.md "Time", STYLE 3, HOSTS.md')] == [
        "DESIGN.md", "STYLE", "HOSTS.md"]
    assert not OUTSIDE.search("_SPEC = 1; --seed 3; a seed of the rotation; spec.md; HOSTS = ()")


def test_what_users_read_from_the_programs_cites_no_requirement_id(tmp_path: Path) -> None:
    """The OpenAPI description (``/openapi.json``, ``/docs``), the MCP handshake's tool
    descriptions and schemas, and every command's ``--help`` speak without requirement ids:
    a user cannot look them up (issue 42)."""
    import json

    import click

    from sessionledger import ServerSettings, SessionService
    from sessionledger.cli import main as cli
    from sessionledger.docgen import render_mcp_handshake
    from sessionledger.http import create_app

    service = SessionService.open("memory://", workspace_root=tmp_path)
    try:
        app = create_app(service=service, settings=ServerSettings(workspace_root=tmp_path))
        said = {"/openapi.json": json.dumps(app.openapi(), ensure_ascii=False),
                "the MCP handshake": render_mcp_handshake()}
    finally:
        service.close()
    root = click.Context(cli, info_name="sessionledger")
    stack: list[tuple[click.Command, click.Context]] = [(cli, root)]
    while stack:
        command, ctx = stack.pop()
        said[f"{ctx.command_path} --help"] = command.get_help(ctx)
        if isinstance(command, click.Group):
            for name in command.list_commands(ctx):
                sub = command.get_command(ctx, name)
                if sub is not None:
                    stack.append((sub, click.Context(sub, info_name=name, parent=ctx)))
    offenders = {where: sorted(set(REQUIREMENT.findall(text))) for where, text in said.items()}
    assert {where: ids for where, ids in offenders.items() if ids} == {}
