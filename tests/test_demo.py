"""``sessionledger demo`` (SPEC §11, issue 9 acceptance 4): every feature, then the audit.

The installed console script runs in a subprocess on its own temporary database, and on a
given one (``--db``), which the CLI then audits. In process, a failing step is named and the
command exits 1.
"""

from __future__ import annotations

import io
import os
import re
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner
from rich.console import Console
from server_support import sessionledger_command

from sessionledger import demo
from sessionledger.cli import main
from sessionledger.demo_script import STEPS, DemoContext, DemoFailure

FEATURES = (
    "Permission modes",
    "Shift+Tab",
    "Plan and Goal cannot be active at the same time.",
    "Plan mode: a Write is denied",
    "deny (mode.plan.denyWrites)",
    "Question answered",
    "User has answered your questions: ",
    "Question auto-continued",
    "countdown",
    "autoContinued: Unanswered — auto-continued",
    "todo reminder",
    "The TodoWrite tool hasn't been used recently.",
    "unfinished items dropped: Document the export format (pending)",
    "dropped-todo warning",
    "Plan feedback, then approval",
    "The plan was not approved by the user.",
    "User has approved your plan.",
    "plan file",
    "Compaction and the plan-file reference",
    "plan_file_reference",
    "A plan file exists from plan mode at: ",
    "ListModels",
    "[current]",
    "[disabled: no API key configured]",
    "ReadSessionContext",
    "## Approved plan",
    "Deletion and purge",
    "Audit",
)


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if k != "SESSIONLEDGER_DB"}
    return subprocess.run(
        [*sessionledger_command(), *args], cwd=cwd, env=environment, capture_output=True,
        text=True, timeout=120, check=False,
    )


def test_demo_walks_through_every_feature_and_ends_with_the_audit_verdict(
    tmp_path: Path,
) -> None:
    done = run_cli("demo", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    for feature in FEATURES:
        assert feature in done.stdout, feature
    for number, (title, _step) in enumerate(STEPS, start=1):
        assert f"{number}/{len(STEPS)}  {title}" in done.stdout
    assert done.stdout.rstrip().splitlines()[-1].startswith("Audit verdict: OK — sess_")
    assert "FAILED" not in done.stdout and done.stderr == ""
    # words for people: no Python reprs (a dict, a list of dicts, None)
    assert not re.search(r"\{'|\[\{|\bNone\b", done.stdout), done.stdout
    assert not (tmp_path / ".sessionledger").exists(), "the default store was touched"


def test_demo_on_a_given_database_leaves_deleted_sessions_that_audit_clean(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'demo.db'}"
    done = run_cli("demo", "--db", url, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"store        {url}" in done.stdout
    audited = run_cli("audit", "--db", url, cwd=tmp_path)
    assert audited.returncode == 0, audited.stdout + audited.stderr
    assert audited.stdout.startswith("OK: 1 session,")  # the reader session was purged
    assert run_cli("sessions", "--db", url, cwd=tmp_path).stdout.strip() == "no sessions"
    listed = run_cli("sessions", "--all", "--db", url, cwd=tmp_path).stdout
    assert "(deleted)" in listed


def _broken(_context: DemoContext) -> None:
    raise DemoFailure("the step saw something else")


def _crashing(_context: DemoContext) -> None:
    raise KeyError("interactions")


@pytest.mark.parametrize(
    ("step", "reason"),
    [(_broken, "the step saw something else"), (_crashing, "KeyError: 'interactions'")],
)
def test_a_failing_step_is_named_with_its_reason(
    step: Callable[[DemoContext], None], reason: str, tmp_path: Path
) -> None:
    console = Console(record=True, width=200, file=io.StringIO())
    outcome = demo.run_demo(
        console, db=f"sqlite:///{tmp_path / 'x.db'}",
        steps=[STEPS[0], ("Broken feature", step), STEPS[1]],
    )
    assert not outcome.ok
    assert outcome.failed == "2/3 Broken feature" and outcome.reason == reason
    text = console.export_text()
    assert f"demo FAILED at step 2/3 Broken feature: {reason}" in text
    assert "3/3" not in text  # nothing runs after a failed step


def test_the_command_exits_1_when_a_step_fails(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(demo, "STEPS", (STEPS[0], ("Broken feature", _broken)))
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["demo"])
    assert result.exit_code == 1
    assert "demo FAILED at step 2/2 Broken feature: the step saw something else" in result.output


def test_demo_help_names_what_it_shows() -> None:
    result = CliRunner().invoke(main, ["demo", "--help"])
    assert result.exit_code == 0
    for words in ("every feature", "--db URL", "temporary"):
        assert words in result.output
