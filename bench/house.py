"""The shape of the product code: modules, lines, import floors and loops (issue 20).

Run ``.venv/bin/python bench/house.py [ROOT]`` (``ROOT`` defaults to this checkout; give a
``git worktree`` of an older commit to compare). It reads the four product packages
(``eventlog``, ``statemachine``, ``projections``, ``sessionledger``) with :mod:`ast` and prints

* the number of modules, their lines (total, mean, how many under 100),
* the top of ``sessionledger/``: its flat modules and its subpackages,
* the import graph's floors — the longest chain of module-level imports from a module down
  to one that imports no product module (a loop is collapsed into one floor) — and
* the import loops (strongly connected groups of more than one module), and imports that run
  back up a floor of the lower packages' order (a lower package importing ``sessionledger``).

Imports inside functions count (they are dependencies all the same); ``TYPE_CHECKING``
imports count too. A name imported from a package is followed through its ``__init__`` to the
module that defines it (a package's ``__init__`` is its index, not a floor of its own).
Nothing is timed: docs/architecture.md quotes the output.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

PACKAGES = ("eventlog", "statemachine", "projections", "sessionledger")


def modules(root: Path) -> dict[str, Path]:
    found: dict[str, Path] = {}
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _absolute(package: str, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    parts = package.split(".")
    base = ".".join(parts[: len(parts) - (node.level - 1)])
    return f"{base}.{node.module}" if node.module else base


def _defined_in(module: str, name: str, known: dict[str, Path], seen: frozenset[str]) -> str:
    """The module that defines ``name`` imported from ``module``: a package's ``__init__``
    that re-exports it is looked through (``from eventlog import Event`` depends on the
    module defining ``Event``, not on every module the package re-exports)."""
    path = known.get(module)
    if path is None or path.name != "__init__.py" or module in seen:
        return module
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.ImportFrom) and any(
            (a.asname or a.name) == name for a in node.names
        ):
            source = _absolute(module, node)
            original = next(a.name for a in node.names if (a.asname or a.name) == name)
            if f"{source}.{original}" in known:
                return f"{source}.{original}"
            if source in known:
                return _defined_in(source, original, known, seen | {module})
    return module


def _targets(name: str, path: Path, known: dict[str, Path]) -> Iterator[str]:
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            target = _absolute(package, node)
            for a in node.names:
                full = f"{target}.{a.name}"
                found = full if full in known else _defined_in(target, a.name, known, frozenset())
                while found and found not in known:
                    found = found.rpartition(".")[0]
                if found and found != name:
                    yield found
            continue
        if isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - (node.level - 1)])
                target = f"{base}.{node.module}" if node.module else base
            else:
                target = node.module or ""
            candidates = [f"{target}.{a.name}" for a in node.names] + [target]
        elif isinstance(node, ast.Import):
            candidates = [a.name for a in node.names]
        else:
            continue
        for candidate in candidates:
            while candidate and candidate not in known:
                candidate = candidate.rpartition(".")[0]
            if candidate and candidate != name:
                yield candidate
                break


def graph(root: Path) -> dict[str, set[str]]:
    known = modules(root)
    return {name: set(_targets(name, path, known)) for name, path in known.items()}


def loops(edges: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components of more than one module. A package's
    ``__init__`` importing its own modules and they importing it back is a loop too."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def visit(node: str) -> None:
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on.add(node)
        for nxt in edges[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                top = stack.pop()
                on.discard(top)
                group.append(top)
                if top == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    sys.setrecursionlimit(10_000)
    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def floors(edges: dict[str, set[str]]) -> int:
    """The longest import chain, a loop counted as one floor."""
    group_of = {m: i for i, g in enumerate(loops(edges)) for m in g}

    def key(m: str) -> str:
        return f"loop{group_of[m]}" if m in group_of else m

    condensed: dict[str, set[str]] = {}
    for m, targets in edges.items():
        condensed.setdefault(key(m), set()).update(key(t) for t in targets if key(t) != key(m))
    depth: dict[str, int] = {}

    def height(node: str) -> int:
        if node not in depth:
            depth[node] = 1 + max((height(t) for t in condensed.get(node, ())), default=0)
        return depth[node]

    return max(height(n) for n in condensed)


def report(root: Path) -> dict[str, object]:
    known = modules(root)
    lines = {name: len(path.read_text(encoding="utf-8").splitlines())
             for name, path in known.items()}
    edges = graph(root)
    top = root / "sessionledger"
    flat = sorted(p.stem for p in top.glob("*.py"))
    packages = sorted(p.name for p in top.iterdir() if (p / "__init__.py").exists())
    order = {"eventlog": 0, "statemachine": 1, "projections": 2, "sessionledger": 3}
    upward = sorted(
        f"{m} → {t}" for m, targets in edges.items() for t in targets
        if order[t.split(".")[0]] > order[m.split(".")[0]]
    )
    return {
        "modules": len(known), "lines": sum(lines.values()),
        "mean": round(sum(lines.values()) / len(known)),
        "under100": sum(1 for n in lines.values() if n < 100),
        "flat": flat, "subpackages": packages, "floors": floors(edges),
        "loops": loops(edges), "upward": upward,
        "per_package": {p: sum(1 for m in known if m.split(".")[0] == p) for p in PACKAGES},
    }


def main(argv: list[str]) -> int:
    root = Path(argv[0]).resolve() if argv else Path(__file__).resolve().parent.parent
    found = report(root)
    print(f"product modules      {found['modules']}  {found['per_package']}")
    print(f"lines                {found['lines']} (mean {found['mean']}, "
          f"{found['under100']} modules under 100)")
    flat = found["flat"]
    assert isinstance(flat, list)
    print(f"sessionledger/ top   {len(flat)} modules, subpackages {found['subpackages']}")
    print(f"import floors        {found['floors']}")
    print(f"import loops         {found['loops'] or 'none'}")
    print(f"imports running up   {found['upward'] or 'none'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
