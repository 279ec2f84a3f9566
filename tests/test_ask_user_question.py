"""AskUserQuestion contract: schema limits (AQ-2), answers (AQ-3), texts (AQ-1, AQ-4, HO-8).

Limits are checked at their edges; two properties cover the rest: any valid input survives a
dump and a parse, and any input with a forbidden tag injected into a preview is refused.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from sessionledger.tools import SERVICE_TOOLS
from sessionledger.tools import ask as aq
from sessionledger.tools.ask import (
    DESCRIPTION,
    MISSING_ANSWERS,
    TOOL_NAME,
    declined_text,
    error_text,
    forbidden_preview_tag,
    missing_answers,
    model_schema,
    parse_handler_input,
    parse_model_input,
    result,
    result_text,
    text_key,
    visible,
)

AQ1_FIRST = (
    "Use this tool only when you are blocked on a decision that is genuinely the user's to "
    "make: one you cannot resolve from the request, the code, or sensible defaults."
)


def option(label: str, **extra: Any) -> dict[str, Any]:
    return {"label": label, "description": f"about {label}", **extra}


def question(text: str = "Which database?", labels: int = 2, **extra: Any) -> dict[str, Any]:
    return {
        "question": text,
        "header": "Database",
        "options": [option(f"Choice {i}") for i in range(labels)],
        "multiSelect": False,
        **extra,
    }


def questions(count: int) -> dict[str, Any]:
    return {"questions": [question(f"Question {i}?") for i in range(count)]}


def with_options(*opts: dict[str, Any]) -> dict[str, Any]:
    return {"questions": [question() | {"options": list(opts)}]}


def rejected(raw: dict[str, Any]) -> str:
    with pytest.raises(ValidationError) as caught:
        parse_model_input(raw)
    return str(caught.value)


# --- AQ-2: limits ----------------------------------------------------------------------------


@pytest.mark.parametrize(("count", "valid"), [(0, False), (1, True), (4, True), (5, False)])
def test_aq2_question_count_edges(count: int, valid: bool) -> None:
    if valid:
        assert len(parse_model_input(questions(count)).questions) == count
    else:
        rejected(questions(count))


@pytest.mark.parametrize(("count", "valid"), [(1, False), (2, True), (4, True), (5, False)])
def test_aq2_option_count_edges(count: int, valid: bool) -> None:
    raw = {"questions": [question(labels=count)]}
    if valid:
        assert len(parse_model_input(raw).questions[0].options) == count
    else:
        rejected(raw)


@pytest.mark.parametrize("second", ["Which database?", " which DATABASE? "])
def test_aq2_question_texts_unique(second: str) -> None:
    assert "unique" in rejected({"questions": [question(), question(second)]})


@pytest.mark.parametrize("second", ["Yes", "yes ", "YES"])
def test_aq2_labels_unique(second: str) -> None:
    assert "unique" in rejected(with_options(option("Yes"), option(second)))


@pytest.mark.parametrize("label", ["Other", "other", " Other ", "OTHER", "\tother\n"])
def test_aq2_other_label_reserved(label: str) -> None:
    assert "Other" in rejected(with_options(option("Keep"), option(label)))


@pytest.mark.parametrize("label", ["Others", "Other option", "Another", "Other (Recommended)"])
def test_aq2_only_the_exact_word_other_is_reserved(label: str) -> None:
    parsed = parse_model_input(with_options(option("Keep"), option(label)))
    assert parsed.questions[0].options[1].label == label


@pytest.mark.parametrize("blank", ["", "   ", "\n"])
def test_aq2_blank_question_and_label_rejected(blank: str) -> None:
    rejected({"questions": [question(blank)]})
    rejected(with_options(option("Keep"), option(blank)))


def test_aq2_long_header_accepted_and_kept() -> None:
    header = "Deploy target"
    assert len(header) == aq.HEADER_CHIP_WIDTH + 1
    parsed = parse_model_input({"questions": [question(header=header)]})
    assert parsed.questions[0].header == header


def test_aq2_header_required() -> None:
    raw = question()
    del raw["header"]
    rejected({"questions": [raw]})


def test_aq2_multi_select_defaults_to_false_and_is_strict() -> None:
    raw = question()
    del raw["multiSelect"]
    assert parse_model_input({"questions": [raw]}).questions[0].multi_select is False
    assert parse_model_input({"questions": [question(multiSelect=True)]}).questions[0].multi_select
    rejected({"questions": [question(multiSelect="true")]})


@pytest.mark.parametrize(
    ("preview", "tag"),
    [
        ("<html>", "<html>"),
        ('<HTML lang="en">', "<html>"),
        ("</html>", "<html>"),
        ("<body>", "<body>"),
        ("<Body class='x'>", "<body>"),
        ("</BODY >", "<body>"),
        ("<!DOCTYPE html>", "<!doctype>"),
        ("<!doctype>", "<!doctype>"),
        ("<script>alert(1)</script>", "<script>"),
        ("<SCRIPT src=x.js>", "<script>"),
        ("<script\n  type='module'>", "<script>"),
        ("</script>", "<script>"),
        ("<style>p {}</style>", "<style>"),
        ('<Style type="text/css">', "<style>"),
        ("<style/>", "<style>"),
        ("text\n```html\n<body></body>\n```", "<body>"),
    ],
)
def test_aq2_forbidden_preview_tags_rejected(preview: str, tag: str) -> None:
    message = rejected(with_options(option("A", preview=preview), option("B")))
    assert f"the {tag} tag is not allowed" in message
    assert forbidden_preview_tag(preview) == tag


@pytest.mark.parametrize(
    "preview",
    [
        "<b>bold</b>",
        '<div class="box">x</div>',
        "<table><tr><td>1</td></tr></table>",
        "<details><summary>more</summary>…</details>",
        "<bodyguard>",
        "<style-guide>",
        "<scripts>",
        "while i < body.length and html > 0",
        "# Title\n\n```python\nprint('body')\n```",
        "",
    ],
)
def test_aq2_html_fragments_accepted(preview: str) -> None:
    parsed = parse_model_input(with_options(option("A", preview=preview), option("B")))
    assert parsed.questions[0].options[0].preview == preview


@pytest.mark.parametrize(
    "raw",
    [
        questions(1) | {"extra": 1},
        {"questions": [question(extra=1)]},
        {"questions": [question(multi_select=True)]},
        with_options(option("A", extra=1), option("B")),
        questions(1) | {"answers": {}},
    ],
    ids=["top", "question", "snake-case-alias", "option", "answers-from-the-model"],
)
def test_aq2_unknown_fields_rejected_at_every_level(raw: dict[str, Any]) -> None:
    assert "Extra inputs are not permitted" in rejected(raw)


def test_aq2_model_schema_requires_multi_select_and_forbids_extras() -> None:
    schema = model_schema()
    defs = schema["$defs"]
    question_schema = defs["AskQuestion"]
    assert question_schema["required"] == ["question", "header", "options", "multiSelect"]
    assert question_schema["properties"]["multiSelect"]["type"] == "boolean"
    assert defs["AskOption"]["required"] == ["label", "description"]
    assert defs["AskOption"]["properties"]["preview"] == {
        "type": "string",
        "title": "Preview",
        "description": defs["AskOption"]["properties"]["preview"]["description"],
    }
    for obj in (schema, question_schema, defs["AskOption"]):
        assert obj["additionalProperties"] is False
    listed = schema["properties"]["questions"]
    assert (listed["minItems"], listed["maxItems"]) == (1, 4)
    options = question_schema["properties"]["options"]
    assert (options["minItems"], options["maxItems"]) == (2, 4)
    assert "12 characters" in question_schema["properties"]["header"]["description"]
    assert "maxLength" not in question_schema["properties"]["header"]


def test_aq2_handler_schema_requires_answers() -> None:
    schema = aq.handler_schema()
    assert schema["required"] == ["questions", "answers"]
    assert schema["$defs"]["AnswerAnnotation"]["additionalProperties"] is False


# --- AQ-3: answers ---------------------------------------------------------------------------


def test_aq3_missing_answers_exact_message() -> None:
    raw = questions(2)
    assert missing_answers(raw)
    with pytest.raises(ValidationError) as caught:
        parse_handler_input(raw)
    assert MISSING_ANSWERS == "AskUserQuestion requires user answers before execution"
    assert MISSING_ANSWERS in str(caught.value)
    assert [e["msg"] for e in caught.value.errors()] == [MISSING_ANSWERS]
    assert error_text(caught.value) == MISSING_ANSWERS


def test_aq3_null_answers_count_as_missing() -> None:
    raw = questions(1) | {"answers": None}
    assert missing_answers(raw)
    with pytest.raises(ValidationError, match=MISSING_ANSWERS):
        parse_handler_input(raw)


def test_aq3_empty_answers_valid() -> None:
    raw = questions(2) | {"answers": {}}
    assert not missing_answers(raw)
    parsed = parse_handler_input(raw)
    assert parsed.answers == {}
    assert parsed.annotations == {}


@pytest.mark.parametrize("blank", ["", " ", "\t\n"])
def test_aq3_blank_answer_rejected(blank: str) -> None:
    with pytest.raises(ValidationError, match="must not be blank"):
        parse_handler_input(questions(1) | {"answers": {"Question 0?": blank}})


@pytest.mark.parametrize("key", ["Question 9?", "question 0?", " Question 0?"])
def test_aq3_answer_key_must_be_a_question_text(key: str) -> None:
    with pytest.raises(ValidationError) as caught:
        parse_handler_input(questions(1) | {"answers": {key: "Choice 0"}})
    assert "answers keys must be question texts" in error_text(caught.value)


def test_aq3_multi_select_labels_and_free_text_other_accepted() -> None:
    raw = {
        "questions": [question("Which features?", labels=3, multiSelect=True), question()],
        "answers": {
            "Which features?": "Choice 0, Choice 2",
            "Which database?": "DuckDB, because we already use it",
        },
    }
    parsed = parse_handler_input(raw)
    assert parsed.answers["Which features?"] == "Choice 0, Choice 2"


def test_aq3_annotations() -> None:
    raw = questions(2) | {
        "answers": {"Question 0?": "Choice 1"},
        "annotations": {
            "Question 0?": {"preview": "```\nx\n```", "notes": "keep it small"},
            "Question 1?": {"notes": "no idea yet"},
        },
    }
    parsed = parse_handler_input(raw)
    assert parsed.annotations["Question 1?"].notes == "no idea yet"
    bad_annotations: list[dict[str, Any]] = [
        {"Nope?": {}},
        {"Question 0?": {"notes": "x", "extra": 1}},
        {"Question 0?": {"notes": 3}},
    ]
    for bad in bad_annotations:
        with pytest.raises(ValidationError):
            parse_handler_input(raw | {"annotations": bad})


def test_aq3_handler_still_applies_model_limits() -> None:
    raw = with_options(option("A"), option("other")) | {"answers": {}}
    with pytest.raises(ValidationError, match="Other"):
        parse_handler_input(raw)
    assert not missing_answers(["not", "a", "mapping"])


# --- AQ-4, HO-8: texts -----------------------------------------------------------------------


def two_answered(answers: dict[str, str], **more: Any) -> aq.AskResult:
    raw = {"questions": [question("Which database?"), question("Which features?")]}
    return result(parse_handler_input(raw | {"answers": answers, **more}))


def test_aq4_all_answered_exact_text() -> None:
    done = two_answered({"Which database?": "Choice 1", "Which features?": "Choice 0, Choice 1"})
    assert done.text.startswith("User has answered your questions: ")
    assert done.text == (
        'User has answered your questions: "Which database?"="Choice 1", '
        '"Which features?"="Choice 0, Choice 1". '
        "You can now continue with the user's answers in mind."
    )
    assert done.answered == ("Which database?", "Which features?")
    assert done.skipped == ()


def test_aq4_annotations_follow_their_pair() -> None:
    done = two_answered(
        {"Which database?": "Choice 1", "Which features?": "Choice 0"},
        annotations={"Which database?": {"notes": "prod only", "preview": "SELECT 1"}},
    )
    assert '"Which database?"="Choice 1" (user notes: prod only; selected preview: SELECT 1), ' in (
        done.text
    )


def test_aq4_some_answered_counts_and_judgment() -> None:
    partial = two_answered({"Which features?": "Choice 0"})
    assert not partial.text.startswith("User has answered your questions: ")
    assert '"Which features?"="Choice 0"' in partial.text
    assert "skipped 1 of 2 questions" in partial.text
    assert '"Which database?"' in partial.text
    assert "use your own judgment" in partial.text
    assert partial.answered == ("Which features?",)
    assert partial.skipped == ("Which database?",)


def test_aq4_none_answered_is_not_a_rejection() -> None:
    none = two_answered({})
    assert none.text.startswith("The user did not answer any of your questions")
    assert "This is not a rejection" in none.text
    assert "Do not invent or assume user preferences" in none.text
    assert "sensible defaults" in none.text
    assert none.answered == ()


def test_aq4_result_is_frozen_and_result_text_checks_keys() -> None:
    done = two_answered({})
    with pytest.raises(ValidationError):
        done.text = "changed"  # type: ignore[misc]
    with pytest.raises(ValueError, match="unknown questions"):
        result_text(["Q?"], {"R?": "x"})


def test_ho8_declined_text() -> None:
    assert "declined to answer" in declined_text()
    assert "continue the task" in declined_text()
    assert declined_text("  not now ").endswith('The user said: "not now"')
    assert declined_text("   ") == declined_text()


# --- AQ-1: description, tool identity --------------------------------------------------------


def test_aq1_description_exact_beginning_and_mentions() -> None:
    assert DESCRIPTION.startswith(AQ1_FIRST)
    for phrase in (
        '"(Recommended)" at the end of its label',
        "recommended option first",
        "EnterPlanMode",
        "Is the plan OK?",
        "cannot see your plan before you call ExitPlanMode",
        "plan approval with ExitPlanMode",
        "at most 12 characters",
        "chip",
        '"Other" option',
        "single-select questions only",
    ):
        assert phrase in DESCRIPTION, phrase


def test_aq5_tool_identity_and_exports() -> None:
    assert TOOL_NAME == "AskUserQuestion"
    assert SERVICE_TOOLS[TOOL_NAME].requires_user_interaction
    assert all(hasattr(aq, name) for name in aq.__all__)


# --- properties ------------------------------------------------------------------------------

texts = st.text(min_size=1, max_size=20).filter(lambda t: visible(t) != "")
labels = texts.filter(lambda t: text_key(t) != "other")
previews = st.text(max_size=40).filter(lambda t: forbidden_preview_tag(t) is None)


@st.composite
def options_st(draw: st.DrawFn) -> list[dict[str, Any]]:
    names = draw(
        st.lists(labels, min_size=2, max_size=4, unique_by=text_key)
    )
    out = []
    for name in names:
        opt = {"label": name, "description": draw(st.text(max_size=20))}
        if draw(st.booleans()):
            opt["preview"] = draw(previews)
        out.append(opt)
    return out


@st.composite
def inputs_st(draw: st.DrawFn) -> dict[str, Any]:
    asked = draw(
        st.lists(texts, min_size=1, max_size=4, unique_by=text_key)
    )
    return {
        "questions": [
            {
                "question": text,
                "header": draw(st.text(max_size=20)),
                "options": draw(options_st()),
                "multiSelect": draw(st.booleans()),
            }
            for text in asked
        ]
    }


@given(raw=inputs_st(), data=st.data())
def test_property_valid_inputs_round_trip(raw: dict[str, Any], data: st.DataObject) -> None:
    parsed = parse_model_input(raw)
    assert parse_model_input(parsed.model_dump(by_alias=True)) == parsed
    asked = parsed.question_texts()
    chosen = data.draw(st.lists(st.sampled_from(asked), unique=True))
    answers = {text: data.draw(texts) for text in chosen}
    handled = parse_handler_input(raw | {"answers": answers})
    assert parse_handler_input(handled.model_dump(by_alias=True)) == handled
    done = result(handled)
    assert len(done.answered) + len(done.skipped) == len(asked)
    assert done.text.startswith("User has answered your questions: ") == (not done.skipped)


def _any_case(name: str) -> st.SearchStrategy[str]:
    return st.tuples(*(st.sampled_from([c.lower(), c.upper()]) for c in name)).map("".join)


@given(
    raw=inputs_st(),
    name=st.sampled_from(aq.FORBIDDEN_PREVIEW_TAGS),
    closing=st.booleans(),
    tail=st.sampled_from([">", " >", "/>", ' lang="en">', "\n  type='x'>", " "]),
    data=st.data(),
)
def test_property_injected_forbidden_tag_rejected(
    raw: dict[str, Any], name: str, closing: bool, tail: str, data: st.DataObject
) -> None:
    tag = f"<{'/' if closing else ''}{data.draw(_any_case(name))}{tail}"
    target = data.draw(st.sampled_from(raw["questions"]))
    opt = data.draw(st.sampled_from(target["options"]))
    text = opt.get("preview", "")
    at = data.draw(st.integers(0, len(text)))
    opt["preview"] = text[:at] + tag + text[at:]
    with pytest.raises(ValidationError, match=f"the <{name}> tag is not allowed"):
        parse_model_input(raw)
