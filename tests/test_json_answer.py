"""The routes' own JSON answers (issue 24): ``orjson`` writes them only where its bytes are
Starlette's, and Starlette writes (or refuses) everything else as before."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.responses import JSONResponse

from eventlog.encoding import plain_json_bytes
from sessionledger.http.middleware import JSONAnswer

SAME = [
    {"callId": "call_1", "status": "completed", "result": {"todos": [
        {"content": "Step 1: write the part — and its test ✓", "status": "pending",
         "priority": "high"}]}, "ok": True, "none": None, "n": -12, "f": 0.5},
    {"control": "\x00\x1f\n\t\"\\\u2028\x7f", "emoji": "😀", "": []},
    [1, 2.0, 1e-4, 123456.789, -0.0, 0.0, 2**63 - 1, -(2**63) + 1, (1, 2)],
    {"nested": [[[[{"a": [{}]}]]]]},
    "text", 7, None, True,
]
"""Values Starlette writes, and orjson too (plain)."""

OTHERS = [
    {"tiny": 1e-7},  # orjson spells it 1e-7, Python 1e-07
    {"huge": 1.5e300},  # outside the range where the two are known to agree
    {"big": 2**64},  # past orjson's integers
    {"deep": 300 * [0]},  # a wide list is fine: a deep one follows
    {1: "a non-str key"},
]
"""Values Starlette writes and orjson would spell otherwise, or refuse."""


def starlette(value: Any) -> bytes:
    return JSONResponse(value).body


@pytest.mark.parametrize("value", SAME + OTHERS)
def test_an_answer_has_starlettes_bytes(value: Any) -> None:
    assert JSONAnswer(value).body == starlette(value)


@pytest.mark.parametrize("value", SAME)
def test_plain_values_are_written_by_orjson(value: Any) -> None:
    assert plain_json_bytes(value) == starlette(value)


def test_what_orjson_would_write_otherwise_is_left_to_starlette() -> None:
    assert plain_json_bytes({"tiny": 1e-7}) is None
    assert plain_json_bytes({"big": 2**64}) is None
    assert plain_json_bytes({1: "key"}) is None
    deep: Any = []
    for _ in range(300):
        deep = [deep]
    assert plain_json_bytes(deep) is None


@pytest.mark.parametrize("value", [{"nan": float("nan")}, {"s": "\ud800"}])
def test_what_starlette_refuses_is_refused_the_same_way(value: Any) -> None:
    with pytest.raises((ValueError, UnicodeEncodeError)) as expected:
        JSONResponse(value)
    with pytest.raises(expected.type):
        JSONAnswer(value)
