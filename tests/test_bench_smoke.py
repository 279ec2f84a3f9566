"""The benchmark scripts run end to end (tiny sizes). Speed is never asserted here.

Slow-marked: ``make verify`` runs them, with the ``bench`` extra installed (D179)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"

pytest.importorskip("eventsourcing", reason="bench extra not installed")
pytest.importorskip("psutil", reason="bench extra not installed")


def _run(script: str, *args: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(BENCH / script), *args, "--tmp", str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=240, check=False,
    )


def test_eventlog_bench_quick_prints_the_table_and_ratios(tmp_path: Path) -> None:
    done = _run("eventlog.py", "--quick", tmp_path=tmp_path)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    for header in ("workload", "sessionledger", "raw sqlite3", "eventsourcing", "ratio",
                   "measured", "target", "result"):
        assert header in out
    for row in ("single append", "batches", "replay", "group commit, 1 writer",
                "group commit, 32 writers", "async group commit, 1 coroutine",
                "async group commit, 32 coroutines"):
        assert row in out
    assert out.count("PASS") + out.count("MISS") == 8
    assert not list(tmp_path.iterdir()), "scratch files left behind"


def test_replay_memory_bench_small_run(tmp_path: Path) -> None:
    done = _run("replay_memory.py", "--events", "20000", "--sessions", "200",
                tmp_path=tmp_path)
    assert done.returncode == 0, done.stderr + done.stdout
    out = done.stdout
    for header in ("events replayed", "events/s", "RSS before replay", "RSS after replay",
                   "RSS peak"):
        assert header in out
    assert "20,000" in out
    assert not list(tmp_path.iterdir()), "scratch files left behind"


def test_rebuild_bench_small_run(tmp_path: Path) -> None:
    # Issue 3's rebuild figure: the script runs and prints both rates and the ratio.
    done = _run("rebuild.py", "--events", "5000", "--sessions", "100", "--runs", "1",
                tmp_path=tmp_path)
    assert done.returncode == 0, done.stderr + done.stdout
    out = done.stdout
    for text in ("typed replay (read_all)", "rebuild execution-state projection",
                 "peak RSS MB", "rebuild / replay"):
        assert text in out
    assert out.count("5,000") >= 3
    assert not list(tmp_path.iterdir()), "scratch files left behind"


def test_group_floor_bench_quick_prints_every_row_and_the_ceiling(tmp_path: Path) -> None:
    # Issue 2's acceptance 7 (group commit): what the GIL leaves for 32 writers; shape only.
    done = _run("group_floor.py", "--quick", tmp_path=tmp_path)
    assert done.returncode == 0, done.stderr + done.stdout
    out = done.stdout
    for text in ("lock hand-off between two threads", "committer alone, 0 us Python per item",
                 "committer alone, 20 us Python per item", "the store (bench/eventlog.py 4a/4b)",
                 "one-event batches per append_many from one thread",
                 "best 32/1 ratio this store's work allows here"):
        assert text in out
    assert not list(tmp_path.iterdir()), "scratch files left behind"


def test_todos_bench_quick_prints_the_table_and_the_ratio(tmp_path: Path) -> None:
    # Issue 5's acceptance 5: TodoWrite end to end beside the single durable append.
    done = _run("todos.py", "--quick", tmp_path=tmp_path)
    assert done.returncode == 0, done.stderr + done.stdout
    out = done.stdout
    for text in ("single-event durable append", "TodoWrite, 20 items", "p50 ms", "p99 ms",
                 "ops/s", "TodoWrite writes/s / single appends/s", ">= 0.50",
                 "inside the store transaction, per operation", "txns/op",
                 "best ratio with nothing outside the transaction", "SQL ms",
                 "best ratio with nothing but the SQL statements"):
        assert text in out
    assert out.count("PASS") + out.count("MISS") == 1
    assert not list(tmp_path.iterdir()), "scratch files left behind"


def test_load_bench_quick_prints_both_tables_with_no_errors(tmp_path: Path) -> None:
    # Issue 10's load item: a real server, writers and SSE subscribers; shape and errors only.
    figures = tmp_path / "load.json"
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    done = _run("load.py", "--quick", "--json", str(figures), tmp_path=scratch)
    assert done.returncode == 0, done.stderr + done.stdout
    out = done.stdout
    for text in ("throughput sweep", "SSE delivery target", "req/s", "p50 ms", "p99 ms",
                 "errors", "undeliv.", "deliv p99", "commit→recv p99", "synchronous=FULL"):
        assert text in out
    assert out.count("PASS") + out.count("FAIL") == 1
    result = json.loads(figures.read_text())
    assert [step["clients"] for step in result["sweep"]] == [1, 2]
    for step in [*result["sweep"], result["target"]]:
        assert step["requests"] > 0 and step["deliveries"] > 0
        assert (step["errors"], step["undelivered"]) == (0, 0), step["error_samples"]
    assert not list(scratch.iterdir()), "scratch files left behind"


def test_permission_bench_quick_prints_every_shape_and_the_ratio(tmp_path: Path) -> None:
    # Issue 19's acceptance 5 (EG-5): permission-check time at two lengths; shape only.
    done = _run("permission.py", "--quick", tmp_path=tmp_path)
    assert done.returncode == 0, done.stderr + done.stdout
    out = done.stdout
    for text in ("echo aaaa… (one long word)", "(&&-joined)", "(pipes)", "(newlines)",
                 "(single quotes)", "(double quotes)", "git log --oneline", "(one token",
                 "(deny matches)", "(no match)", "Read(**/*a*b*c*d)", "ratio", "<= 12",
                 "worst ratio"):
        assert text in out
    assert out.count("PASS") + out.count("MISS") == 12
    assert "DIFFERS" not in out  # the decision does not depend on the length
    assert "config.deny[0]" in out
    assert not list(tmp_path.iterdir()), "scratch files left behind"


def test_claude_code_bench_quick_prints_both_tables_with_no_errors(tmp_path: Path) -> None:
    # Issue 22's acceptance 5: import throughput and the hook round trip; shape and errors only.
    done = _run("claude_code.py", "--quick", tmp_path=tmp_path)
    assert done.returncode == 0, done.stderr + done.stdout
    out = done.stdout
    for text in ("transcript: 2,000 lines", "(a) import", "lines/s", "events/s", "ratio",
                 "anchor: json.loads + sqlite3 row per line", "read_transcript only",
                 "import in process (read + Recorder)", "re-import in process (appends 0)",
                 "import via CLI subprocess", "(b) hook round trip", "p50 ms", "p99 ms",
                 "GET /healthz (anchor)", "POST /v1/hooks/claude-code PreToolUse",
                 "POST /v1/hooks/claude-code PostToolUse", "python -c pass (anchor",
                 "sessionledger hook claude-code PreToolUse",
                 "sessionledger hook claude-code PostToolUse",
                 "the same, forwarded to a serve, PreToolUse"):
        assert text in out, text
    hooks = out.split("(b) hook round trip", 1)[1]
    rows = [line for line in hooks.splitlines()
            if line[:1].isalpha() and not line.startswith("workload")]
    assert len(rows) == 9 and all(line.split()[-1] == "0" for line in rows), rows  # no errors
    reimport = next(line for line in out.splitlines() if line.startswith("re-import"))
    assert reimport.split()[-6] == "0", reimport  # appended nothing
    assert not list(tmp_path.iterdir()), "scratch files left behind"


def test_web_bench_smoke_prints_the_table_and_the_target(tmp_path: Path) -> None:
    # Issue 23's acceptance 2: the page in chromium on sessions of each size; shape only.
    pytest.importorskip("playwright", reason="browser extra not installed")
    if not Path("/usr/bin/chromium").is_file():
        pytest.skip("no chromium (apt-get install chromium)")
    done = _run("web.py", "--smoke", tmp_path=tmp_path)
    assert done.returncode == 0, done.stderr + done.stdout
    out = done.stdout
    for text in ("session", "blocked ms", "TBT ms", "long tasks", "TTI ms", "ratio",
                 "3 events", "30 events", "< 200, <= 5"):
        assert text in out, text
    assert out.count("PASS") + out.count("MISS") == 1
    assert not list(tmp_path.iterdir()), "scratch files left behind"


def test_scale_bench_pending_quick_prints_the_table_and_ratios(tmp_path: Path) -> None:
    # issue 24.3: a real serve at two sizes of pending sessions; only the table is checked
    done = _run("scale.py", "--quick", "--case", "pending", tmp_path=tmp_path)
    assert done.returncode == 0, done.stderr + done.stdout
    out = done.stdout
    for header in ("pending sessions", "CPU/question ms", "idle % of a core", "ratio",
                   "target", "result"):
        assert header in out
    assert out.count("PASS") + out.count("MISS") == 2
    assert not list(tmp_path.iterdir()), "scratch files left behind"


def test_http_bench_quick_prints_every_operation_and_both_ratios(tmp_path: Path) -> None:
    # Issue 24, acceptance 2: the HTTP stack beside the same calls in process; shape only.
    done = _run("http.py", "--quick", tmp_path=tmp_path)
    assert done.returncode == 0, done.stderr + done.stdout
    out = done.stdout
    for text in ("no-op GET /healthz", "TodoWrite(5)", "AskUserQuestion", "permission-check",
                 "HTTP TodoWrite(5) p50 - in-process p50 (ms)",
                 "32-client TodoWrite/s / no-op/s"):
        assert text in out
    assert out.count("PASS") + out.count("MISS") == 2
    assert not list(tmp_path.iterdir()), "scratch files left behind"


def test_scale_bench_audit_and_bulk_quick_print_their_ratios(tmp_path: Path) -> None:
    # issue 24.4: audit and rebuild beside typed replay, bulk append at two log sizes; shape only
    done = _run("scale.py", "--quick", "--case", "audit", "--case", "bulk", tmp_path=tmp_path)
    assert done.returncode == 0, done.stderr + done.stdout
    out = done.stdout
    for text in ("typed replay (read_all)", "audit (every session)", "rebuild every read model",
                 "audit / replay time", "bulk append at", "(anchor) plain sqlite3 rows",
                 "time added per event at"):
        assert text in out
    assert out.count("PASS") + out.count("MISS") == 2
    assert not list(tmp_path.iterdir()), "scratch files left behind"


def test_startup_bench_quick_prints_every_row_with_no_errors(tmp_path: Path) -> None:
    # Issue 38: the start-up table (anchors, --version, the hook three ways, mcp, serve), on a
    # user's install built from a copy (the checkout gains no build/ nor .egg-info); shape and
    # errors only.
    before = {p.name for p in ROOT.iterdir()}
    done = _run("startup.py", "--quick", tmp_path=tmp_path)
    assert done.returncode == 0, done.stderr + done.stdout
    out = done.stdout
    assert "installed a wheel of this checkout in a new virtual environment" in out
    added = [p.name for p in ROOT.iterdir() if p.name not in before]
    assert [n for n in added if n == "build" or n.endswith(".egg-info")] == [], added
    rows = [line for line in out.splitlines()[4:] if line[:1].isalpha()
            and not line.startswith(("workload", "targets"))]
    labels = ("python -c pass (anchor)", "python -S -c pass", "bash -c true",
              "sessionledger --version", "hook claude-code PreToolUse Read, forwarded",
              "hook claude-code PreToolUse Read, no server",
              "hook claude-code PreToolUse Read, --direct",
              "python -c 'import eventlog' (the catalog)", "sessionledger mcp: initialize",
              "sessionledger mcp: tools/list", "sessionledger serve: first /healthz 200")
    assert [next(label for label in labels if row.startswith(label)) for row in rows] == list(
        labels)
    assert all(row.split()[-1] == "0" for row in rows), rows  # no errors
    assert not list(tmp_path.iterdir()), "scratch files left behind"


def test_claude_code_session_bench_quick_runs_each_kind_with_no_errors(tmp_path: Path) -> None:
    # Issue 38, acceptance 5: a real Claude Code session against a scripted model, without
    # hooks, with the HTTP hooks and with the command hooks of docs/claude-code.md, and the
    # floors (hooks that start python or sh and do nothing); shape and errors only.
    import host_support

    reason = host_support.unavailable()
    if reason is not None:
        host_support.skip_or_fail(reason)
    done = _run("claude_code_session.py", "--quick", tmp_path=tmp_path)
    assert done.returncode == 0, done.stderr + done.stdout
    out = done.stdout
    for text in ("5 Read calls a session", "p50 s", "mean s", "p50 / HTTP",
                 "per call vs none ms", "errors", "(target <= 1.3)"):
        assert text in out, text
    labels = ("no hooks", "HTTP hooks (serve)", "command hooks (forwarded to serve)",
              "floor: python -c that reads, prints {}", "floor: sh that reads, prints {}")
    rows = [line for line in out.splitlines() if line.startswith(labels)]
    assert [next(label for label in labels if row.startswith(label)) for row in rows] == list(
        labels)
    assert all(row.split()[-1] == "0" for row in rows), rows  # no errors
    assert all(row.split()[len(label.split())] == "1" for row, label in zip(
        rows, labels, strict=True)), rows  # one timed session each
    assert out.count("PASS") + out.count("MISS") == 1
    assert not list(tmp_path.iterdir()), "scratch files left behind"


def test_big_reads_bench_quick_prints_every_step_and_the_targets(tmp_path: Path) -> None:
    # Issue 41, acceptance 4: the paged list and long audits over a real serve; shape only.
    done = _run("big_reads.py", "--quick", tmp_path=tmp_path)
    assert done.returncode == 0, done.stderr + done.stdout
    out = done.stdout
    for text in ("list every session, page by page", "list the waiting sessions",
                 "audit sess_big", "three audits of sess_big at once",
                 "CLI: sessionledger audit sess_big", "typed replay"):
        assert text in out
    assert out.count("PASS") + out.count("MISS") == 3
    assert not list(tmp_path.iterdir()), "scratch files left behind"
