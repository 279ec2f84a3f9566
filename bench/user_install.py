"""A user's install of this checkout, for the benches that time process start-up (D203).

The development ``.venv`` installs the checkout *editable*: a ``.pth`` file runs setuptools'
path finder in every interpreter that starts there, ~15 ms of imports (``pathlib``, ``re``,
``urllib.parse``…) that a user's ``pip install sessionledger`` does not have, and which both
flatter and blur what a command hook imports itself. :func:`run_installed` runs a bench under
what users install instead: this checkout built as a wheel (``pip wheel``), installed with
``--no-deps`` into a new virtual environment in a temporary directory, its dependencies read
from the running environment's ``site-packages`` through a plain path line in a ``.pth`` file
(no code run at start, and the same versions the tests use). The bench script is then run
again with that interpreter; the directory is removed afterwards.

Not a benchmark itself: ``bench/startup.py`` and ``bench/claude_code_session.py`` call it
unless given ``--install this`` (the interpreter running them, as it is).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("eventlog", "statemachine", "projections", "sessionledger")
"""The packages ``pyproject.toml`` ships (its ``packages.find``)."""
INSTALLED_ENV = "SESSIONLEDGER_BENCH_INSTALL"
"""Set, in the re-run bench's environment, to the install's description: the bench prints it."""


def build(directory: Path) -> Path:
    """Build the wheel and the environment under ``directory``; its interpreter."""
    # Built from a copy of what the wheel holds: setuptools writes ``build/`` and the
    # ``.egg-info`` into the tree it builds, and the checkout stays as it was.
    source = directory / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, source / name)
    for package in PACKAGES:
        shutil.copytree(ROOT / package, source / package,
                        ignore=shutil.ignore_patterns("__pycache__"))
    wheels = directory / "wheel"
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--quiet"]
    subprocess.run([*pip, "wheel", "--no-deps", "--wheel-dir", str(wheels), str(source)],
                   check=True, stdout=subprocess.DEVNULL)
    (wheel,) = wheels.glob("sessionledger-*.whl")
    venv = directory / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    subprocess.run([*pip, "--python", str(python), "install", "--no-deps", str(wheel)],
                   check=True, stdout=subprocess.DEVNULL)
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True, capture_output=True, text=True).stdout.strip()
    (Path(purelib) / "zz_dependencies.pth").write_text(
        sysconfig.get_paths()["purelib"] + "\n", encoding="utf-8")
    return python


def run_installed(script: str, argv: list[str]) -> int:
    """Run ``script`` with ``argv`` under a fresh user's install, in its directory (paths in
    ``argv`` absolute, then); its exit status."""
    with tempfile.TemporaryDirectory(prefix="sl-bench-install-") as name:
        python = build(Path(name))
        found = subprocess.run(
            [str(python), "-c", "import sessionledger; print(sessionledger.__file__)"],
            check=True, capture_output=True, text=True, cwd=name).stdout.strip()
        if not found.startswith(name):
            raise SystemExit(f"the install imports sessionledger from {found}, not the wheel")
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        env[INSTALLED_ENV] = "a wheel of this checkout in a new virtual environment"
        # Run from the temporary directory: ``python -c`` puts the working directory first on
        # the path, and in the checkout that would be the checkout's modules, not the wheel's.
        return subprocess.run([str(python), str(Path(script).resolve()), *argv], env=env,
                              cwd=name, check=False).returncode


def description() -> str:
    """How the running bench's ``sessionledger`` is installed, for its header."""
    return os.environ.get(INSTALLED_ENV) or f"as {sys.executable} has it (--install this)"
