"""Docs that cannot drift: generated pages are fresh, every CLI command is documented, links
resolve, and the README shows the two commands and the demo (issue 9, acceptance 5)."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import click
import pytest

from sessionledger.cli import main as cli
from sessionledger.docgen import GENERATED, stale_pages

ROOT = Path(__file__).resolve().parent.parent
PAGES = ("docs/event-catalog.md", "docs/state-machines.md", "docs/http-api.md", "docs/cli.md")


def test_every_generated_page_is_checked() -> None:
    assert set(PAGES) <= set(GENERATED)


@pytest.mark.parametrize("page", sorted(GENERATED))
def test_generated_page_is_fresh(page: str) -> None:
    assert (ROOT / page).read_text(encoding="utf-8") == GENERATED[page](), (
        f"{page} is stale: run `make docs` and commit the result"
    )


def test_generated_pages_are_fresh() -> None:
    assert stale_pages(ROOT) == [], "run `make docs` and commit the result"


def test_stale_page_is_detected(tmp_path: Path) -> None:
    for rel, render in GENERATED.items():
        page = tmp_path / rel
        page.parent.mkdir(parents=True, exist_ok=True)
        page.write_text(render() + "edited by hand\n", encoding="utf-8")
    assert sorted(stale_pages(tmp_path)) == sorted(GENERATED)


def test_event_catalog_lists_every_event_type() -> None:
    from eventlog import CATALOG

    page = (ROOT / "docs" / "event-catalog.md").read_text(encoding="utf-8")
    assert set(re.findall(r"^## (\w+)$", page, re.M)) == set(CATALOG)


def test_readme_starts_with_the_product_and_the_two_commands() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    head = readme[:3000]
    assert "event-sourced" in head.lower()
    assert "make run" in head and "make test" in head
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    for target in ("run", "test", "lint", "verify", "bench", "docs"):
        assert re.search(rf"^{target}:", makefile, re.M), target


def _commands(
    command: click.Command, path: str = "sessionledger"
) -> Iterator[tuple[str, click.Command]]:
    """Every command under the click group, subcommands of subcommands included."""
    yield path, command
    if isinstance(command, click.Group):
        for name, sub in command.commands.items():
            yield from _commands(sub, f"{path} {name}")


def test_the_walk_sees_every_command_including_later_ones() -> None:
    names = {path for path, _command in _commands(cli)}
    assert {"sessionledger demo", "sessionledger serve", "sessionledger audit"} <= names


@pytest.mark.parametrize("path", [path for path, _command in _commands(cli)])
def test_every_cli_command_has_help_text_and_a_docs_entry(path: str) -> None:
    command = dict(_commands(cli))[path]
    assert (command.help or "").strip(), f"`{path}` has no help text"
    page = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    assert f"\n## `{path}`\n" in page, f"docs/cli.md has no entry for `{path}`: run `make docs`"


def test_every_cli_option_is_in_the_reference() -> None:
    page = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    for path, command in _commands(cli):
        section = page.split(f"\n## `{path}`\n", 1)[-1].split("\n## ", 1)[0]
        for param in command.params:
            if isinstance(param, click.Option):
                assert f"`{param.opts[0]}" in section, f"{path} {param.opts[0]}"


_LINK = re.compile(r"\]\(([^)#\s]+\.md)(?:#[^)]*)?\)")


def test_relative_links_between_docs_resolve() -> None:
    sources = [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").glob("*.md"))]
    for source in sources:
        for target in _LINK.findall(source.read_text(encoding="utf-8")):
            if "://" not in target:
                assert (source.parent / target).exists(), f"{source.name} links to {target}"


def test_readme_quick_start_shows_the_demo() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert ".venv/bin/sessionledger demo" in readme
    assert "docs/cli.md" in readme and "docs/differences.md" in readme


LAYERS = {
    "eventlog": set(),
    "statemachine": {"eventlog"},
    "projections": {"eventlog", "statemachine"},
}
"""What each lower package may import of the others (docs/architecture.md, SPEC §1)."""
FIRST_PARTY = {*LAYERS, "sessionledger"}


def _imported_packages(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found & FIRST_PARTY


@pytest.mark.parametrize("package", sorted(LAYERS))
def test_data_flows_one_way_between_the_packages(package: str) -> None:
    for module in sorted((ROOT / package).rglob("*.py")):
        wrong = _imported_packages(module) - LAYERS[package] - {package}
        assert not wrong, f"{module.relative_to(ROOT)} imports {sorted(wrong)}"


def test_every_test_the_mcp_page_names_exists() -> None:  # issue 21 acceptance 6
    """The feature and client tables of docs/mcp.md cite tests by name; each must be a test
    function (or a test file) of the suite, so a renamed or removed test breaks the page."""
    page = (ROOT / "docs" / "mcp.md").read_text(encoding="utf-8")
    defined = {
        node.name
        for path in (ROOT / "tests").rglob("test_*.py")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and node.name.startswith("test_")
    }
    files = {str(p.relative_to(ROOT)) for p in (ROOT / "tests").rglob("test_*.py")}
    files |= {p.name for p in (ROOT / "tests").rglob("test_*.py")}
    cited = re.findall(r"`((?:tests/)?test_[A-Za-z0-9_]+(?:\.py)?)(?:\[[^\]`]*\])?`", page)
    assert len(cited) >= 30, cited
    missing = [name for name in cited if name not in defined and name not in files]
    assert missing == [], f"docs/mcp.md names tests that do not exist: {missing}"


_SHOT_ROW = re.compile(
    r"^\| [^|]+ \| `(?P<test>test_\w+)/\d\d-(?P<step>[\w-]+)\.png` \| `(?P<file>test_\w+\.py)` \|$"
)


def test_the_screenshots_listed_are_the_ones_the_tests_take() -> None:  # issue 23 acceptance 4
    # Each row of docs/web-client.md's Screenshots table names a browser test that exists and
    # takes that step's screenshot, so the list cannot drift from what the tests write.
    text = (ROOT / "docs" / "web-client.md").read_text(encoding="utf-8")
    rows = [m for line in text.splitlines() if (m := _SHOT_ROW.match(line))]
    assert len(rows) == 8, "the Screenshots table of docs/web-client.md is missing"
    for row in rows:
        source = (ROOT / "tests" / "browser" / row["file"]).read_text(encoding="utf-8")
        tree = ast.parse(source)
        tests = {node.name: node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)}
        assert row["test"] in tests, f"{row['file']} has no {row['test']}"
        body = ast.get_source_segment(source, tests[row["test"]]) or ""
        assert f'shots.take(page, "{row["step"]}")' in body, (row["test"], row["step"])
