"""The cron and off-peak tools behind their ports (SPEC TR-5, TR-1), on both backends.

Schedules are event-sourced records: each tool appends its one event in the call's batch, the
records projection answers the lists, a rebuild gives the same answer and the audit compares
the view with the log. Expressions are five-field cron, validated by the cron port (a bad
one is a 422 that appends nothing), and the service answers next-due times from a manual
clock; it never runs a prompt. Off-peak prompts are due in the host's next window.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, time
from pathlib import Path
from typing import Any

import pytest
from tool_support import open_service, tools_with

from eventlog import (
    CronScheduleCreated,
    CronScheduleDeleted,
    CronScheduleUpdated,
    ManualClock,
    OffPeakPromptCreated,
)
from sessionledger import SessionService
from sessionledger.config.workspace import parse_workspace_config
from sessionledger.errors import ConfigurationError, InvalidInput
from sessionledger.tools.schedule import (
    SCHEDULE_TOOLS,
    CroniterCron,
    InvalidCronExpression,
    WindowOffPeak,
    schema_of,
)
from sessionledger.tools.service import ToolService

START = datetime(2026, 11, 29, 21, 7, 30, tzinfo=UTC)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(START)


@pytest.fixture
def service(backend: str, tmp_path: Path, clock: ManualClock) -> Iterator[SessionService]:
    with open_service(backend, tmp_path, clock=clock) as opened:
        yield opened


@pytest.fixture
def tools(service: SessionService, clock: ManualClock) -> ToolService:
    return tools_with(service, clock=clock)


def call(tools: ToolService, session: str, tool: str, **raw: Any) -> dict[str, Any]:
    answer = tools.call(session, tool, raw)
    assert answer.status_code == 200, answer.document
    return answer.document


def test_tr5_descriptors_and_schemas() -> None:
    assert set(SCHEDULE_TOOLS) == {"CronCreate", "CronList", "CronUpdate", "CronDelete",
                                   "OffPeakCreate", "OffPeakList"}
    assert SCHEDULE_TOOLS["CronList"].read_only and SCHEDULE_TOOLS["OffPeakList"].read_only
    for name in ("CronCreate", "CronUpdate", "CronDelete", "OffPeakCreate"):
        descriptor = SCHEDULE_TOOLS[name]
        assert not descriptor.read_only and descriptor.side_effect_scope == "session"
    create = schema_of("CronCreate")
    assert set(create["properties"]) == {"cron", "prompt", "recurring"}
    assert create["required"] == ["cron", "prompt"]
    assert create["properties"]["recurring"]["default"] is True
    assert set(schema_of("CronUpdate")["properties"]) == {"id", "cron", "prompt", "enabled"}
    assert schema_of("CronUpdate")["required"] == ["id"]
    assert schema_of("OffPeakCreate")["required"] == ["prompt"]
    assert schema_of("CronList")["properties"] == {} == schema_of("OffPeakList")["properties"]


def test_tr5_cron_create_records_an_event_and_answers_the_id_and_next_due(
    service: SessionService, tools: ToolService
) -> None:
    session = service.create_session(mode="auto")["sessionId"]
    document = call(tools, session, "CronCreate", cron="*/15  9-17 * * 1-5", prompt="check CI")
    result = document["result"]
    assert result["id"].startswith("cron_")
    assert result["cron"] == "*/15 9-17 * * 1-5"  # normalised
    assert result["recurring"] is True and result["enabled"] is True
    assert result["nextDueAt"] == "2026-11-30T09:00:00.000Z"  # Sunday evening → Monday 09:00
    assert "host runs the prompt" in document["modelContent"]
    *_, created, completed = list(service.store.read_session(session))
    assert created.data == CronScheduleCreated(
        cron="*/15 9-17 * * 1-5", prompt="check CI", recurring=True, schedule_id=result["id"])
    assert created.causation_id == completed.causation_id == document["callId"]


BAD_CREATES: list[dict[str, Any]] = [
    {"cron": "* * * *", "prompt": "p"},
    {"cron": "0 * * * * *", "prompt": "p"},
    {"cron": "@daily", "prompt": "p"},
    {"cron": "61 * * * *", "prompt": "p"},
    {"cron": "0 0 31 2 *", "prompt": "p"},
    {"cron": "* * * * *", "prompt": "   "},
    {"cron": "* * * * *", "prompt": "p", "recurring": "yes"},
    {"cron": "* * * * *", "prompt": "p", "timezone": "UTC"},
    {"prompt": "p"},
]


@pytest.mark.parametrize("raw", BAD_CREATES)
def test_tr5_invalid_input_is_422_and_appends_nothing(
    service: SessionService, tools: ToolService, raw: dict[str, Any]
) -> None:
    session = service.create_session(mode="auto")["sessionId"]
    before = service.store.version(session)
    with pytest.raises(InvalidInput) as refused:
        tools.call(session, "CronCreate", raw)
    assert refused.value.status == 422 and refused.value.details
    assert service.store.version(session) == before


def test_tr5_list_update_delete_and_next_due(
    service: SessionService, tools: ToolService, clock: ManualClock
) -> None:
    session = service.create_session(mode="auto")["sessionId"]
    hourly = call(tools, session, "CronCreate", cron="0 * * * *", prompt="hourly")["result"]
    once = call(tools, session, "CronCreate", cron="30 6 * * *", prompt="once",
                recurring=False)["result"]
    assert call(tools, session, "CronList")["result"]["schedules"] == [
        {**hourly, "nextDueAt": "2026-11-29T22:00:00.000Z"},
        {**once, "nextDueAt": "2026-11-30T06:30:00.000Z"},
    ]
    clock.advance(3 * 3600)  # 00:07:30 next day
    listed = {s["id"]: s for s in call(tools, session, "CronList")["result"]["schedules"]}
    assert listed[hourly["id"]]["nextDueAt"] == "2026-11-30T01:00:00.000Z"
    assert listed[once["id"]]["nextDueAt"] == "2026-11-30T06:30:00.000Z"  # fixed: runs once
    paused = call(tools, session, "CronUpdate", id=hourly["id"], enabled=False)["result"]
    assert paused["enabled"] is False and paused["nextDueAt"] is None
    changed = call(tools, session, "CronUpdate", id=hourly["id"], enabled=True,
                   cron="15 3 * * *", prompt="nightly")["result"]
    assert (changed["cron"], changed["prompt"], changed["nextDueAt"]) == (
        "15 3 * * *", "nightly", "2026-11-30T03:15:00.000Z")
    text = call(tools, session, "CronList")["modelContent"]
    assert "'15 3 * * *' (recurring, next due 2026-11-30T03:15:00.000Z): nightly" in text
    assert call(tools, session, "CronDelete", id=once["id"])["result"] == {
        "id": once["id"], "deleted": True}
    assert [s["id"] for s in call(tools, session, "CronList")["result"]["schedules"]] == [
        hourly["id"]]
    types = [e.data for e in service.store.read_session(session)]
    assert any(isinstance(d, CronScheduleUpdated) for d in types)
    assert CronScheduleDeleted(schedule_id=once["id"]) in types
    assert service.audit(session)["ok"]
    service.rebuild_projections()
    assert [s["id"] for s in call(tools, session, "CronList")["result"]["schedules"]] == [
        hourly["id"]]


def test_tr5_unknown_or_deleted_schedules_are_refused(
    service: SessionService, tools: ToolService
) -> None:
    session = service.create_session(mode="auto")["sessionId"]
    other = service.create_session(mode="auto")["sessionId"]
    made = call(tools, session, "CronCreate", cron="0 0 * * *", prompt="p")["result"]
    for tool, raw in (("CronUpdate", {"id": "cron_nope", "prompt": "x"}),
                      ("CronDelete", {"id": "cron_nope"}),
                      ("CronDelete", {"id": made["id"]})):  # another session's schedule
        document = call(tools, other, tool, **raw)
        assert document["success"] is False
        assert document["result"]["error"]["code"] == "cron_not_found"
    call(tools, session, "CronDelete", id=made["id"])
    assert call(tools, session, "CronDelete", id=made["id"])["success"] is False
    with pytest.raises(InvalidInput):
        tools.call(session, "CronUpdate", {"id": made["id"]})  # no change given
    assert call(tools, session, "CronList")["modelContent"] == "No cron schedules."


def test_tr5_recording_tools_ask_in_build_deny_in_plan_and_list_freely(
    service: SessionService, tools: ToolService
) -> None:
    build = service.create_session()["sessionId"]
    pending = tools.call(build, "CronCreate", {"cron": "0 9 * * *", "prompt": "standup"})
    assert pending.status_code == 202
    assert call(tools, build, "CronList")["result"]["schedules"] == []
    done = tools.respond(build, pending.document["interactionId"], "approve")
    assert done["success"] is True and done["result"]["id"].startswith("cron_")
    assert len(call(tools, build, "CronList")["result"]["schedules"]) == 1
    planning = service.create_session(mode="plan")["sessionId"]
    denied = tools.call(planning, "CronCreate", {"cron": "0 9 * * *", "prompt": "p"})
    assert denied.document["status"] == "denied"
    assert call(tools, planning, "CronList")["success"] is True


def test_tr5_off_peak_prompts_are_due_in_the_hosts_next_window(
    service: SessionService, tools: ToolService, clock: ManualClock
) -> None:
    session = service.create_session(mode="auto")["sessionId"]  # the config opens 22:00-06:00
    later = call(tools, session, "OffPeakCreate", prompt="run the long benchmark")["result"]
    assert (later["dueAt"], later["windowEndAt"]) == (
        "2026-11-29T22:00:00.000Z", "2026-11-30T06:00:00.000Z")
    clock.advance(3600)  # 22:07:30, inside the window: due at once
    now = call(tools, session, "OffPeakCreate", prompt="reindex")["result"]
    assert now["dueAt"] == "2026-11-29T22:07:30.000Z"
    listed = call(tools, session, "OffPeakList")["result"]["prompts"]
    assert [p["id"] for p in listed] == [later["id"], now["id"]]
    assert listed[0]["prompt"] == "run the long benchmark"
    events = [e.data for e in service.store.read_session(session)]
    assert OffPeakPromptCreated(due_at=now["dueAt"], off_peak_id=now["id"], prompt="reindex",
                                window_end_at="2026-11-30T06:00:00.000Z") in events
    assert service.audit(session)["ok"]


# -- the ports on their own ---------------------------------------------------------------


def test_tr5_croniter_port_validates_five_fields_and_answers_the_next_match() -> None:
    port = CroniterCron()
    assert port.validate("  0   9 * *   1-5 ") == "0 9 * * 1-5"
    for bad in ("", "* * * *", "* * * * * *", "@hourly", "0 25 * * *", "0 0 30 2 *"):
        with pytest.raises(InvalidCronExpression):
            port.validate(bad)
    at = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
    assert port.next_due("0 12 * * *", at) == datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
    assert port.next_due("*/5 * * * *", at) == datetime(2026, 3, 1, 12, 5, tzinfo=UTC)


def test_tr5_off_peak_windows_wrap_midnight_and_follow_the_time_zone() -> None:
    port = WindowOffPeak([(time(1, 0), time(5, 0)), (time(13, 0), time(14, 0))])
    noon = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
    assert port.next_window(noon) == (datetime(2026, 6, 1, 13, tzinfo=UTC),
                                      datetime(2026, 6, 1, 14, tzinfo=UTC))
    late = datetime(2026, 6, 1, 20, 0, tzinfo=UTC)
    assert port.next_window(late)[0] == datetime(2026, 6, 2, 1, tzinfo=UTC)
    berlin = WindowOffPeak([(time(22, 0), time(6, 0))], "Europe/Berlin")
    summer = datetime(2026, 7, 1, 12, 0, tzinfo=UTC)  # CEST, UTC+2
    assert berlin.next_window(summer) == (datetime(2026, 7, 1, 20, tzinfo=UTC),
                                          datetime(2026, 7, 2, 4, tzinfo=UTC))
    winter_night = datetime(2026, 1, 10, 2, 0, tzinfo=UTC)  # 03:00 CET, inside
    assert berlin.next_window(winter_night) == (winter_night,
                                                datetime(2026, 1, 10, 5, tzinfo=UTC))


@pytest.mark.parametrize(("table", "key"), [
    ({"windows": []}, "offPeak.windows"),
    ({"windows": ["22:00-6:00"]}, "offPeak.windows[0]"),
    ({"windows": ["08:00-08:00"]}, "offPeak.windows[0]"),
    ({"windows": ["22:00-06:00"], "timezone": "Mars/Olympus"}, "offPeak.timezone"),
    ({"windows": ["22:00-06:00"], "days": ["mon"]}, "offPeak.days"),
    ({"windows": "22:00-06:00"}, "offPeak.windows"),
])
def test_tr4_tr5_invalid_off_peak_configuration_names_the_key(
    table: dict[str, Any], key: str
) -> None:
    with pytest.raises(ConfigurationError) as invalid:
        parse_workspace_config({"offPeak": table})
    assert f"{key}:" in invalid.value.message
