"""The plan story on the command line (issue 7): ``replay``, ``audit`` and ``rebuild``.

``replay`` tells who approved or rejected which plan, when, in which mode, and the exact text
the model received; ``audit`` reports a plan file that could not be written without calling it
a fault (acceptance 3); ``rebuild`` recreates a missing approved plan file from the log (PM-7).
Sessions are written in process; the commands run as the installed console script.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from test_cli import run_cli

from sessionledger import SessionService
from sessionledger.tools import plan_files
from sessionledger.tools.plan_files import plan_path

PLAN = "# Plan\n\n1. Migrate the table\n2. Backfill\n"
APPROVED = (
    "User has approved your plan. You can now start coding. Start with updating your todo "
    "list if applicable.\n\n## Approved Plan:\n"
)


@dataclass
class Story:
    path: Path
    approved: str
    failed: str

    @property
    def url(self) -> str:
        return f"sqlite:///{self.path}"

    def run(self, *args: str) -> Any:
        return run_cli(*args, "--db", self.url, cwd=self.path.parent)


def _plan_session(service: SessionService) -> str:
    sid: str = service.create_session(mode="yolo")["sessionId"]
    service.tools.call(sid, "EnterPlanMode", {})
    return sid


def _submit(service: SessionService, sid: str, plan: str) -> str:
    return str(service.tools.call(sid, "ExitPlanMode", {"plan": plan}).document["interactionId"])


def _unwritable(*_args: Any, **_kwargs: Any) -> tuple[int, str]:
    raise PermissionError(13, "Permission denied")


@pytest.fixture
def story(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Story]:
    path = tmp_path / "ledger.db"
    service = SessionService.open(f"sqlite:///{path}", workspace_root=tmp_path)
    try:
        approved = _plan_session(service)
        service.tools.respond(approved, _submit(service, approved, "first"), "feedback",
                              feedback="Say how to roll back.")
        service.tools.respond(approved, _submit(service, approved, "second"), "deny")
        service.tools.respond(approved, _submit(service, approved, PLAN), "approve")
        failed = _plan_session(service)
        with monkeypatch.context() as patched:
            patched.setattr(plan_files, "_new_temp", _unwritable)
            service.tools.respond(failed, _submit(service, failed, PLAN), "approve")
    finally:
        service.close()
    yield Story(path, approved, failed)


def _kind(line: str) -> str:
    """The event type column of a timeline line (``""`` for other lines)."""
    words = line.split()
    return words[3] if len(words) > 3 and words[0].isdigit() else ""


def test_replay_tells_the_plan_story(story: Story) -> None:
    result = story.run("replay", story.approved)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    story_lines = [line for line in lines if _kind(line).startswith("Plan")]
    kinds = [line.split()[3] for line in story_lines]
    assert kinds == [
        "PlanSubmitted", "PlanFeedbackGiven", "PlanSubmitted", "PlanRejected",
        "PlanSubmitted", "PlanApproved",
    ]
    feedback, rejected, approved = story_lines[1], story_lines[3], story_lines[5]
    assert feedback.split()[2] == "user" and '"Say how to roll back."' in feedback
    assert "user rejected the plan of call_" in rejected and '"second"' in rejected
    assert "in plan mode (mode yolo underneath)" in approved
    assert "user approved the plan of call_" in approved and "written" in approved
    assert approved.split()[1].endswith("Z")  # when
    completions = [line for line in lines
                   if _kind(line) == "ToolCallCompleted" and "ExitPlanMode call_" in line]
    assert json.dumps(APPROVED + PLAN, ensure_ascii=False) in completions[-1]
    assert "the turn stops" in completions[1]


def test_audit_reports_the_plan_file_that_could_not_be_written(story: Story) -> None:
    result = story.run("audit", story.failed)
    assert result.returncode == 0, result.stderr  # recorded, not a fault
    [note] = [line for line in result.stdout.splitlines() if line.startswith("NOTE")]
    assert story.failed in note and "not written" in note and "Permission denied" in note


def test_pm7_rebuild_recreates_the_approved_plan_file(story: Story) -> None:
    target = plan_path(story.path.parent, story.approved)
    assert target.read_bytes() == PLAN.encode()
    target.unlink()
    result = story.run("rebuild")
    assert result.returncode == 0, result.stderr
    assert target.read_bytes() == PLAN.encode()
    assert plan_path(story.path.parent, story.failed).read_bytes() == PLAN.encode()
    again = story.run("rebuild")
    assert "restored" not in again.stdout  # the files equal the log now
