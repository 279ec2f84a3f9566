"""Docs that cannot drift: generated pages are fresh, and the README shows the two commands."""

from __future__ import annotations

import re
from pathlib import Path

from sessionledger.docgen import GENERATED, stale_pages

ROOT = Path(__file__).resolve().parent.parent


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
