"""The approved plan's file (SPEC PM-7, PM-10; issue 7 acceptance 2 and 3).

Path safety over arbitrary session ids and awkward workspaces (``/``, ``..``, NUL, spaces,
non-ASCII): whatever is asked, nothing is ever written outside ``<workspace>/.zcode/plans/``.
The write is atomic and leaves no temporary file; a cancellation (shutdown, deletion) between
writing and renaming leaves neither the file nor the temporary one and is raised, not reported.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sessionledger.tools import plan_files
from sessionledger.tools.plan_files import (
    READ_LIMIT,
    PlanFiles,
    PlanWriteCancelled,
    plan_file_name,
    plan_path,
    read_plan_file,
)

AWKWARD = st.sampled_from(["/", "..", "\x00", " ", "é", "中", "😀", ".", "-", "\\", "~"])
IDS = st.one_of(
    st.text(min_size=0, max_size=40),
    st.lists(st.one_of(AWKWARD, st.text(max_size=3)), max_size=12).map("".join),
)
WORKSPACES = st.lists(
    st.sampled_from(["a b", "..", "ws é", "中文", "x\x00y", ".", "plans", "sub"]),
    min_size=1, max_size=4,
).map("/".join)


def _files(root: Path) -> set[Path]:
    return {p for p in root.rglob("*") if p.is_file()}


@settings(max_examples=150, suppress_health_check=[HealthCheck.function_scoped_fixture],
          deadline=None)
@given(session_id=IDS, sub=WORKSPACES)
def test_pm7_no_session_id_or_workspace_writes_outside_the_plans_directory(
    tmp_path: Path, session_id: str, sub: str
) -> None:
    """Acceptance 2: ids and workspaces with ``/``, ``..``, NUL, spaces or non-ASCII."""
    root = tmp_path / "root"
    root.mkdir(exist_ok=True)
    before = _files(root)
    workspace = root / "a" / "b" / "c" / "d" / sub  # at most four ".." stay inside root
    result = PlanFiles().write(str(workspace), session_id, "plan")
    written = _files(root) - before
    if result.written:
        target = plan_path(workspace, session_id)
        assert written == {target}
        resolved_workspace = workspace.resolve()
        assert target.parent == resolved_workspace / ".zcode" / "plans"
        target.unlink()
    else:
        assert written == set()
    assert "/" not in plan_file_name(session_id)
    assert set(plan_file_name(session_id)[5:-3]) <= set(
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-"
    )


def test_pm7_id_characters_outside_the_safe_set_become_dashes() -> None:
    assert plan_file_name("sess_01/../é x\x00") == "plan-sess_01-..---x-.md"


def test_pm7_a_symlinked_plans_directory_outside_the_workspace_is_refused(
    tmp_path: Path,
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    workspace = tmp_path / "ws"
    (workspace / ".zcode").mkdir(parents=True)
    (workspace / ".zcode" / "plans").symlink_to(outside, target_is_directory=True)
    result = PlanFiles().write(str(workspace), "sess_1", "plan")
    assert not result.written and "leave" in (result.error or "")
    assert list(outside.iterdir()) == []


def test_pm7_write_is_atomic_and_creates_the_directories(tmp_path: Path) -> None:
    result = PlanFiles().write(str(tmp_path), "sess_1", "é\r\nplan\n")
    assert result.written and result.path == ".zcode/plans/plan-sess_1.md"
    plans = tmp_path / ".zcode" / "plans"
    assert (plans / "plan-sess_1.md").read_bytes() == "é\r\nplan\n".encode()
    assert [p.name for p in plans.iterdir()] == ["plan-sess_1.md"]


def test_pm7_cancellation_before_the_rename_leaves_nothing(tmp_path: Path) -> None:
    """Acceptance 3: a cancellation during the write (session deleted)."""
    checks = iter([False, True])  # not cancelled at the start, cancelled before the rename
    with pytest.raises(PlanWriteCancelled):
        PlanFiles().write(str(tmp_path), "sess_1", "plan", cancelled=lambda: next(checks))
    assert list((tmp_path / ".zcode" / "plans").iterdir()) == []


def test_pm7_shutdown_cancels_writes(tmp_path: Path) -> None:
    files = PlanFiles()
    files.close()
    with pytest.raises(PlanWriteCancelled):
        files.write(str(tmp_path), "sess_1", "plan")
    assert not (tmp_path / ".zcode").exists()


def test_pm7_other_errors_are_reported_not_raised(tmp_path: Path) -> None:
    (tmp_path / ".zcode").write_text("a file where the directory should be")
    result = PlanFiles().write(str(tmp_path), "sess_1", "plan")
    assert not result.written and result.error is not None


def test_pm10_read_back_is_capped_and_drops_a_trailing_partial_character(
    tmp_path: Path,
) -> None:
    target = plan_path(tmp_path, "s")
    target.parent.mkdir(parents=True)
    target.write_bytes(b"ab" + "😀".encode() * (READ_LIMIT // 4 + 1))
    found = read_plan_file(str(tmp_path), "s")
    assert found is not None
    text = found[1]
    assert len(text.encode()) <= READ_LIMIT and text == "ab" + "😀" * ((READ_LIMIT - 2) // 4)
    assert read_plan_file(str(tmp_path), "missing") is None


@pytest.mark.skipif(os.name != "posix", reason="POSIX permissions")
def test_pm10_unreadable_or_missing_workspace_gives_no_reference(tmp_path: Path) -> None:
    assert read_plan_file(str(tmp_path / "nowhere"), "s") is None
    assert read_plan_file("x\x00y", "s") is None


# -- EG-4: resolved when written, inside the server's root, no race --------------------------


def _outside_and_workspace(tmp_path: Path) -> tuple[Path, Path, Path]:
    root, outside = tmp_path / "root", tmp_path / "outside"
    workspace = root / "project"
    workspace.mkdir(parents=True)
    outside.mkdir()
    return root, workspace, outside


def test_eg4_a_workspace_swapped_for_a_symlink_out_of_the_root_is_refused(
    tmp_path: Path,
) -> None:  # EG-4
    root, workspace, outside = _outside_and_workspace(tmp_path)
    workspace.rename(root / "moved")
    workspace.symlink_to(outside, target_is_directory=True)
    result = PlanFiles(root).write(str(workspace), "sess_1", "plan")
    assert not result.written and "outside the server's workspace root" in (result.error or "")
    assert list(outside.iterdir()) == []
    # inside the root a swap is followed: the plan goes where the workspace now is
    workspace.unlink()
    workspace.symlink_to(root / "moved", target_is_directory=True)
    assert PlanFiles(root).write(str(workspace), "sess_1", "plan").written
    assert (root / "moved" / ".zcode" / "plans" / "plan-sess_1.md").read_text() == "plan"


@pytest.mark.parametrize("swapped", ["workspace", ".zcode", "plans"])
def test_eg4_a_swap_between_the_check_and_the_write_writes_nothing_outside(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, swapped: str
) -> None:  # EG-4: the directory is opened without following symlinks after the check
    root, workspace, outside = _outside_and_workspace(tmp_path)
    (workspace / ".zcode" / "plans").mkdir(parents=True)
    checked = plan_files.plan_path

    def check_then_swap(*args: Any, **kwargs: Any) -> Path:
        target = checked(*args, **kwargs)  # the path is fine when checked ...
        victim = {"workspace": workspace, ".zcode": workspace / ".zcode",
                  "plans": workspace / ".zcode" / "plans"}[swapped]
        victim.rename(victim.with_name(victim.name + "-moved"))  # ... then swapped for a link
        victim.symlink_to(outside, target_is_directory=True)
        (outside / ".zcode" / "plans").mkdir(parents=True, exist_ok=True)
        (outside / "plans").mkdir(exist_ok=True)
        return target

    monkeypatch.setattr(plan_files, "plan_path", check_then_swap)
    result = PlanFiles(root).write(str(workspace), "sess_1", "plan")
    assert not result.written and "Not a directory" in (result.error or "")
    assert [p for p in outside.rglob("*") if p.is_file()] == []  # no plan, no temp file


def test_eg4_a_plan_file_swapped_for_a_symlink_after_the_check_is_replaced_not_followed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:  # EG-4: the rename replaces the link itself
    root, workspace, outside = _outside_and_workspace(tmp_path)
    (outside / "victim.md").write_text("untouched")
    checked = plan_files.plan_path

    def check_then_link(*args: Any, **kwargs: Any) -> Path:
        target = checked(*args, **kwargs)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.symlink_to(outside / "victim.md")
        return target

    monkeypatch.setattr(plan_files, "plan_path", check_then_link)
    assert PlanFiles(root).write(str(workspace), "sess_1", "plan").written
    target = workspace / ".zcode" / "plans" / "plan-sess_1.md"
    assert not target.is_symlink() and target.read_text() == "plan"
    assert (outside / "victim.md").read_text() == "untouched"


# -- the plans folder is configurable (issue 42) ----------------------------------------------


def test_a_workspace_names_its_plans_folder(tmp_path: Path) -> None:
    from sessionledger import SessionService

    (tmp_path / ".sessionledger").mkdir()
    (tmp_path / ".sessionledger" / "config.toml").write_text('[plans]\nfolder = "docs/plans"\n')
    service = SessionService.open("memory://", workspace_root=tmp_path)
    try:
        session = service.create_session(mode="plan")["sessionId"]
        asked = service.tools.call(session, "ExitPlanMode", {"plan": "# Plan\n1. Do it.\n"})
        interaction = asked.document["interactionId"]
        service.tools.respond(session, interaction, "approve")
        approved = [e.data for e in service.store.read_session(session)
                    if e.type == "PlanApproved"]
    finally:
        service.close()
    written = tmp_path / "docs" / "plans" / f"plan-{session}.md"
    assert written.read_text(encoding="utf-8") == "# Plan\n1. Do it.\n"
    assert not (tmp_path / ".zcode").exists()
    assert [a.path for a in approved] == [f"docs/plans/plan-{session}.md"]  # type: ignore[attr-defined]
    found = read_plan_file(str(tmp_path), session)
    assert found is not None and found[0] == written


@pytest.mark.parametrize("folder", ["../outside", "/etc/plans", "", "a//b", "./x", "a\\b"])
def test_a_plans_folder_outside_the_workspace_is_refused(tmp_path: Path, folder: str) -> None:
    from sessionledger.config.workspace import parse_workspace_config
    from sessionledger.errors import InvalidWorkspaceConfig

    with pytest.raises(InvalidWorkspaceConfig) as refused:
        parse_workspace_config({"plans": {"folder": folder}}, source="config.toml")
    assert "plans.folder" in refused.value.message
