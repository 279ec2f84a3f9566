"""Trace one AskUserQuestion call and its answer through the in-process app (issue 20).

Run ``.venv/bin/python tests/trace_call.py`` (``--json`` for the numbers only). It builds the
HTTP app over a fresh SQLite file, creates a session, then records with ``sys.setprofile``
(and ``threading.setprofile`` for the worker threads a sync route hops to) every Python call
made while

1. ``POST /v1/sessions/{id}/tool-calls`` asks an AskUserQuestion (202, pending), and
2. ``POST /v1/sessions/{id}/interactions/{iid}/respond`` answers it (200, completed),

and prints, for each, the product files entered (``eventlog/``, ``statemachine/``,
``projections/``, ``sessionledger/``) with how many calls entered each, and the calls that
cross from one product file into another. ``tests/test_house_rules.py`` runs it and holds
the call to at most :data:`MOST_FILES` files; ``docs/architecture.md`` shows its figure.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("eventlog", "statemachine", "projections", "sessionledger")
MOST_FILES = 20
"""The most product files one AskUserQuestion call may enter (issue 20 acceptance 3)."""

QUESTION = "Which database?"
ASK = {"questions": [{
    "question": QUESTION, "header": "Database", "multiSelect": False,
    "options": [{"label": "Postgres", "description": "the server database"},
                {"label": "SQLite", "description": "one file"}],
}]}

__all__ = ["MOST_FILES", "Trace", "trace_question"]


@dataclass
class Trace:
    """What one request entered: product files with their call counts, cross-file calls."""

    files: Counter[str] = field(default_factory=Counter)
    crossings: Counter[tuple[str, str]] = field(default_factory=Counter)

    def document(self) -> dict[str, Any]:
        return {
            "files": len(self.files), "crossFileCalls": sum(self.crossings.values()),
            "entered": dict(sorted(self.files.items())),
        }


def _product(filename: str) -> str | None:
    try:
        relative = Path(filename).resolve().relative_to(ROOT)
    except ValueError:
        return None
    return relative.as_posix() if relative.parts[0] in PACKAGES else None


@contextmanager
def _recording(trace: Trace) -> Iterator[None]:
    cache: dict[str, str | None] = {}

    def product(frame: FrameType | None) -> str | None:
        if frame is None:
            return None
        name = frame.f_code.co_filename
        if name not in cache:
            cache[name] = _product(name)
        return cache[name]

    def profile(frame: FrameType, event: str, _arg: object) -> None:
        if event != "call":
            return
        here = product(frame)
        if here is None:
            return
        trace.files[here] += 1
        caller = frame.f_back
        while caller is not None and product(caller) is None:
            caller = caller.f_back  # through the framework, back to the product file
        there = product(caller)
        if there is not None and there != here:
            trace.crossings[(there, here)] += 1

    hook: Callable[..., Any] = profile
    threading.setprofile(hook)
    sys.setprofile(hook)
    try:
        yield
    finally:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]


def trace_question() -> tuple[Trace, Trace]:
    """The traces of one AskUserQuestion call and of its answer over the in-process app."""
    from fastapi.testclient import TestClient

    from sessionledger.config import ServerSettings
    from sessionledger.http.app import create_app
    from sessionledger.service.sessions import SessionService

    with tempfile.TemporaryDirectory(prefix="sessionledger-trace-") as directory:
        root = Path(directory)
        service = SessionService.open(f"sqlite:///{root / 'ledger.db'}",
                                      workspace_root=root)
        try:
            app = create_app(service=service, settings=ServerSettings())
            client = TestClient(app, base_url="http://127.0.0.1:8765")
            session = client.post("/v1/sessions", json={}).json()["sessionId"]
            call, answer = Trace(), Trace()
            with _recording(call):
                pending = client.post(f"/v1/sessions/{session}/tool-calls",
                                      json={"tool": "AskUserQuestion", "input": ASK})
            assert pending.status_code == 202, pending.text
            iid = pending.json()["interactionId"]
            body = {"decision": "modify", "input": {**ASK, "answers": {QUESTION: "SQLite"}}}
            with _recording(answer):
                done = client.post(f"/v1/sessions/{session}/interactions/{iid}/respond",
                                   json=body)
            assert done.status_code == 200, done.text
            assert done.json()["status"] == "completed", done.text
            client.close()
        finally:
            service.close()
    return call, answer


def _print(name: str, trace: Trace) -> None:
    print(f"{name}: {len(trace.files)} product files, "
          f"{sum(trace.crossings.values())} cross-file calls")
    for path, calls in sorted(trace.files.items()):
        print(f"  {calls:6d}  {path}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the counts as JSON")
    options = parser.parse_args(argv)
    call, answer = trace_question()
    if options.json:
        print(json.dumps({"call": call.document(), "answer": answer.document()}, indent=2))
    else:
        _print("AskUserQuestion call", call)
        _print("its answer", answer)
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    raise SystemExit(main())
