"""Text that is shown is text that is seen (SPEC EG-7; issue 19 finding 8).

AskUserQuestion's labels and question texts are compared as a person sees them: the disguises
of finding 8 (``Other`` with a zero-width space, fullwidth, with a Cyrillic e; labels and
questions made only of zero-width characters; the NFC and NFD spellings of one question) are
each a 422 ``invalid_input`` with nothing appended — over HTTP against the installed ``serve``
and in process — while what is accepted is recorded as it was given. A hypothesis property:
inserting characters that render as nothing, or changing the normalisation form, never makes
a refused text accepted.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError
from server_support import ServerProcess, TestClient, in_process_client
from server_support import create_session as create
from server_support import session_version as version

from sessionledger.tools.ask import blank, parse_model_input, text_key, visible
from sessionledger.tools.todo import parse_write_input

CAFE_NFC = unicodedata.normalize("NFC", "Café or tea?")
CAFE_NFD = unicodedata.normalize("NFD", "Café or tea?")
INVISIBLES = (
    "\u200b", "\u200c", "\u200d", "\u2060", "\ufeff", "\u00ad", "\u034f", "\ufe0f", "\u180e",
    "\u202e", "\u2066", "\U000e0041", "\u3164", "\u2800", "\x00", "\x1b",
)
"""Characters that render as nothing: format (Cf), control (Cc), default-ignorable, blank."""
FORMS: tuple[Literal["NFC", "NFD", "NFKC", "NFKD"], ...] = ("NFC", "NFD", "NFKC", "NFKD")


def question(text: str = "Which database?", labels: tuple[str, ...] = ("SQLite", "Postgres")
             ) -> dict[str, Any]:
    return {"question": text, "header": "Pick", "multiSelect": False,
            "options": [{"label": label, "description": "d"} for label in labels]}


def labelled(label: str) -> dict[str, Any]:
    return {"questions": [question(labels=("SQLite", label))]}


DISGUISED: dict[str, dict[str, Any]] = {
    "other_zero_width_space": labelled("Other\u200b"),
    "other_fullwidth": labelled("\uff2f\uff54\uff48\uff45\uff52"),
    "other_cyrillic_ie": labelled("Oth\u0435r"),
    "other_cyrillic_capitals": labelled("\u041e\u0422\u041d\u0415R"),
    "other_small_capitals": labelled("\u1d0f\u1d1b\u029c\u1d07\u0280"),
    "label_only_zero_width": labelled("\u200b\u200d"),
    "question_only_zero_width": {"questions": [question(text="\u200b\u2060\ufeff")]},
    "question_nfc_and_nfd": {"questions": [question(text=CAFE_NFC), question(text=CAFE_NFD)]},
    "labels_nfc_and_nfd": {"questions": [question(labels=(CAFE_NFC, CAFE_NFD))]},
}


@pytest.fixture(params=["serve", "in_process"])
def client(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[httpx.Client | TestClient]:
    """The installed ``serve`` of this module, or the app in process over a fresh store."""
    if request.param == "serve":
        server: ServerProcess = request.getfixturevalue("server")
        with server.client() as http:
            yield http
        return
    with in_process_client(tmp_path) as (in_process, _service):
        yield in_process


@pytest.mark.parametrize("case", sorted(DISGUISED))
def test_finding_8_disguises_are_422_and_append_nothing(  # EG-7
    client: httpx.Client | TestClient, case: str
) -> None:
    sid = create(client)
    before = version(client, sid)
    response = client.post(f"/v1/sessions/{sid}/tool-calls",
                           json={"tool": "AskUserQuestion", "input": DISGUISED[case]})
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["code"] == "invalid_input" and error["message"] and error["details"]
    assert version(client, sid) == before


def test_accepted_text_is_recorded_as_given(  # EG-7: store as given, compare normalised
    client: httpx.Client | TestClient,
) -> None:
    given_text = CAFE_NFD + "\u200b"
    raw = {"questions": [question(text=given_text, labels=("Oui\u00a0!", "Others"))]}
    sid = create(client)
    response = client.post(f"/v1/sessions/{sid}/tool-calls",
                           json={"tool": "AskUserQuestion", "input": raw})
    assert response.status_code == 202, response.text
    (interaction,) = client.get(f"/v1/sessions/{sid}").json()["interactions"]
    assert interaction["payload"] == raw  # the very code points, not their normal form


def test_todo_content_of_only_zero_width_characters_is_blank() -> None:  # EG-7
    with pytest.raises(ValidationError, match="blank"):
        parse_write_input({"todos": [
            {"content": "\u200b\u2060", "status": "pending", "priority": "low"}]})
    kept = parse_write_input({"todos": [
        {"content": "Ship\u200b", "status": "pending", "priority": "low"}]})
    assert kept.todos[0].content == "Ship\u200b"


# -- the property ----------------------------------------------------------------------------


@st.composite
def disguise(draw: st.DrawFn, text: str) -> str:
    """``text`` in another normalisation form with invisible characters put anywhere."""
    form = draw(st.sampled_from(FORMS))
    chars = list(unicodedata.normalize(form, text))
    for _ in range(draw(st.integers(0, 4))):
        chars.insert(draw(st.integers(0, len(chars))), draw(st.sampled_from(INVISIBLES)))
    return "".join(chars)


def refused(raw: dict[str, Any]) -> bool:
    try:
        parse_model_input(raw)
    except ValidationError:
        return True
    return False


texts = st.one_of(
    st.text(max_size=12),
    st.text(alphabet="OTHERother \u00a0\u0301\u00e9\u041e\u0422\u041d\u0415\u043e\u0442\u0435"
            + "".join(INVISIBLES), max_size=8),
    st.sampled_from(["Other", "other", " OTHER ", CAFE_NFC, CAFE_NFD, "Oth\u0435r", ""]),
)


@settings(max_examples=300, deadline=None)
@given(data=st.data(), label=texts, other=texts, asked=texts)
def test_property_disguise_never_turns_a_refusal_into_acceptance(  # EG-7
    data: st.DataObject, label: str, other: str, asked: str
) -> None:
    raw = {"questions": [question(text=asked, labels=(label, other)),
                         question(text="Second?", labels=("A", "B"))]}
    disguised = {"questions": [
        question(text=data.draw(disguise(asked)),
                 labels=(data.draw(disguise(label)), data.draw(disguise(other)))),
        question(text="Second?", labels=("A", "B")),
    ]}
    if refused(raw):
        assert refused(disguised), (raw, disguised)
    # what the rules compare is the same before and after the disguise
    for text in (label, other, asked):
        again = data.draw(disguise(text))
        assert visible(again) == visible(text) and text_key(again) == text_key(text)


def _visible_by_definition(text: str) -> str:
    """:func:`visible` as D145 defines it, one character at a time (the reference the
    ASCII fast path and :func:`blank` must agree with)."""
    from sessionledger.tools.ask import _INVISIBLE_RANGES

    def hidden(char: str) -> bool:
        if unicodedata.category(char) in ("Cf", "Cc") and not char.isspace():
            return True
        return any(low <= ord(char) <= high for low, high in _INVISIBLE_RANGES)

    while True:
        shown = unicodedata.normalize("NFKC", "".join(c for c in text if not hidden(c)))
        if shown == text:
            return " ".join(shown.split())
        text = shown


def test_fast_paths_see_what_the_definition_sees() -> None:  # EG-7, issue 24.5
    samples = [a + b for a in map(chr, range(128)) for b in ("", "x", " ", "\x00", "\u200b")]
    samples += [f" {t}\u0301 " for t in samples[:200]] + list(INVISIBLES)
    samples += [CAFE_NFD, "\u3164\u115f", "=\u0338", "\uff2f\u200b", "\x1c\x1f\t"]
    for text in samples:
        expected = _visible_by_definition(text)
        assert visible(text) == expected, repr(text)
        assert blank(text) == (expected == ""), repr(text)
