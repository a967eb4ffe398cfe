"""Parsing Task 3 model outputs into a ranked differential."""

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adversarial_text import SHAPES, assert_linear_time
from novabench.answer_formats import format_diagnosis
from novabench.tasks import get_task
from novabench.tasks.base import AnswerContext, Parsed
from novabench.tasks.diagnosis import parser as diagnosis
from novabench.tasks.diagnosis.parser import MAX_ITEMS, ParsedDiagnosis, parse_diagnosis

FIVE = ["Glioblastoma", "Metastasis", "Primary CNS lymphoma", "Brain abscess", "Tumefactive MS"]


def ok(*ranked: str) -> ParsedDiagnosis:
    return ParsedDiagnosis("ok", tuple(ranked), None)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # the requested format
        (
            json.dumps({"most_likely_diagnosis": FIVE[0], "other_possible_diagnoses": FIVE[1:]}),
            ok(*FIVE),
        ),
        # markdown fence and prose around it, trailing comma, fewer than five items
        (
            'Answer:\n```json\n{"most_likely_diagnosis": "Meningioma",\n'
            ' "other_possible_diagnoses": ["Schwannoma", "Metastasis",],}\n```\nThanks.',
            ok("Meningioma", "Schwannoma", "Metastasis"),
        ),
        # single quotes, with an apostrophe inside a value
        (
            "{'most_likely_diagnosis': 'Wilson's disease', 'other_possible_diagnoses': "
            "['Leigh syndrome', 'Wernicke encephalopathy']}",
            ok("Wilson's disease", "Leigh syndrome", "Wernicke encephalopathy"),
        ),
        # key name variants, keys in reverse order
        (
            '{"Differential diagnoses": ["Epidermoid cyst"], '
            '"Most Likely Diagnosis": "Arachnoid cyst"}',
            ok("Arachnoid cyst", "Epidermoid cyst"),
        ),
        (
            '{"primary_diagnosis": "GBM", "differentials": ["Lymphoma"]}',
            ok("GBM", "Lymphoma"),
        ),
        # differentials as one semicolon-separated string
        (
            '{"most_likely_diagnosis": "ADEM", "other_possible_diagnoses": "MS; NMOSD; PML"}',
            ok("ADEM", "MS", "NMOSD", "PML"),
        ),
        # wrapped one level deeper, item objects
        (
            '{"answer": {"most_likely_diagnosis": "CJD", "other_possible_diagnoses": '
            '[{"diagnosis": "Hypoxic injury"}, {"name": "MELAS"}]}}',
            ok("CJD", "Hypoxic injury", "MELAS"),
        ),
        # duplicates (case-insensitive), placeholders, markdown bold and numbering removed
        (
            '{"most_likely_diagnosis": "**Glioblastoma**", "other_possible_diagnoses": '
            '["glioblastoma", "1. Metastasis", "N/A", "None", "  Lymphoma. "]}',
            ok("Glioblastoma", "Metastasis", "Lymphoma"),
        ),
        # more than five: the first five count
        (
            '["A1", "B2", "C3", "D4", "E5", "F6", "G7"]',
            ok("A1", "B2", "C3", "D4", "E5"),
        ),
        # cut off at the token limit in the middle of the list
        (
            '{"most_likely_diagnosis": "Medulloblastoma", "other_possible_diagnoses": '
            '["Ependymoma", "Pilocytic astrocytoma", "ATR',
            ok("Medulloblastoma", "Ependymoma", "Pilocytic astrocytoma"),
        ),
        # a plain numbered list
        (
            "1. Colloid cyst\n2. Neurocysticercosis\n3) Pineal cyst",
            ok("Colloid cyst", "Neurocysticercosis", "Pineal cyst"),
        ),
        # labelled prose
        (
            "Most likely diagnosis: Pituitary macroadenoma\n"
            "Differential diagnoses:\n- Craniopharyngioma\n- Meningioma",
            ok("Pituitary macroadenoma", "Craniopharyngioma", "Meningioma"),
        ),
    ],
)
def test_tolerated_formats(text: str, expected: ParsedDiagnosis) -> None:
    assert parse_diagnosis(text) == expected


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("", "empty output"),
        ("   \n", "empty output"),
        ("I am unable to provide a diagnosis.", "no JSON object or numbered list found"),
        ('{"answer": 42}', "JSON found but no diagnosis keys in it"),
        (
            '{"most_likely_diagnosis": "", "other_possible_diagnoses": ["Meningioma"]}',
            "the JSON has no most likely diagnosis",
        ),
        ("{{{{[[[[", "no JSON object or numbered list found"),
    ],
)
def test_parse_errors_are_reported(text: str, error: str) -> None:
    parsed = parse_diagnosis(text)
    assert parsed == ParsedDiagnosis("parse_error", (), error)


def test_non_text_input_is_a_parse_error() -> None:
    assert parse_diagnosis(None).status == "parse_error"  # type: ignore[arg-type]
    assert parse_diagnosis(b"{}").error == "expected text, got bytes"  # type: ignore[arg-type]


def test_pathological_input_is_fast_and_safe() -> None:
    assert parse_diagnosis("{" * 60_000 + "[" * 60_000).status == "parse_error"
    assert parse_diagnosis("{'a': " * 5_000).status == "parse_error"
    assert parse_diagnosis('"' * 100_000).status == "parse_error"


def test_values_too_deep_or_too_long_to_read_are_parse_errors() -> None:
    # Each once raised inside the parser: recursion on deep lists, a 4800-digit integer.
    deep_list = '{"diagnosis": ' + "[" * 600 + '"GBM"' + "]" * 600 + "}"
    assert parse_diagnosis(deep_list).status == "parse_error"
    assert parse_diagnosis("{'diagnosis': 0x" + "f" * 4000 + "}").status == "parse_error"
    assert parse_diagnosis("{0x" + "f" * 4000 + ": 'GBM'}").status == "parse_error"


def test_nested_objects_are_read_in_linear_time() -> None:
    # Reading each nested object twice made 24 levels take a minute.
    nested = '{"a": ' * 30 + '{"most_likely_diagnosis": "GBM"}' + "}" * 30
    assert parse_diagnosis(nested) == ok("GBM")
    assert parse_diagnosis('{"a": ' * 31 + "1" + "}" * 31).status == "parse_error"


def test_a_bug_in_the_parser_raises_instead_of_becoming_a_parse_error(monkeypatch) -> None:
    def broken(data):
        raise RuntimeError("bug in the parser")

    monkeypatch.setattr(diagnosis, "_from_mapping", broken)
    with pytest.raises(RuntimeError, match="bug in the parser"):
        parse_diagnosis('{"most_likely_diagnosis": "GBM"}')


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=400))
def test_garbage_never_raises(text: str) -> None:
    parsed = parse_diagnosis(text)
    assert parsed.status in {"ok", "parse_error"}
    assert (parsed.status == "ok") == bool(parsed.ranked)
    assert len(parsed.ranked) <= MAX_ITEMS
    keys = [item.casefold() for item in parsed.ranked]
    assert len(keys) == len(set(keys)) and all(item.strip() for item in parsed.ranked)


_JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=25), inner, max_size=4)
    ),
    max_leaves=12,
)


@settings(max_examples=200, deadline=None)
@given(_JSONISH, st.text(max_size=30), st.text(max_size=30))
def test_json_like_garbage_in_prose_never_raises(value, before: str, after: str) -> None:
    parsed = parse_diagnosis(f"{before}{json.dumps(value)}{after}")
    assert parsed.status in {"ok", "parse_error"}
    assert len(parsed.ranked) <= MAX_ITEMS


_NAME = st.from_regex(r"[A-Z][a-z]{2,12}( [a-z]{2,12}){0,3}", fullmatch=True).filter(
    lambda s: s.casefold() not in {"none", "null", "unknown", "nil"}
)


@settings(max_examples=100, deadline=None)
@given(st.lists(_NAME, min_size=1, max_size=5, unique_by=str.casefold))
def test_format_then_parse_round_trips(ranked: list[str]) -> None:
    parsed = parse_diagnosis(format_diagnosis(ranked))
    assert (parsed.status, parsed.ranked) == ("ok", tuple(ranked))


def alternatives(n: int, *ranked: str) -> ParsedDiagnosis:
    return ParsedDiagnosis("ok", tuple(ranked), None, n)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # GPT-4o style: terse JSON on one line
        (
            '{"most_likely_diagnosis":"Vestibular schwannoma","other_possible_diagnoses":'
            '["Meningioma","Epidermoid cyst","Arachnoid cyst","Facial nerve schwannoma"]}',
            ok(
                "Vestibular schwannoma",
                "Meningioma",
                "Epidermoid cyst",
                "Arachnoid cyst",
                "Facial nerve schwannoma",
            ),
        ),
        # Claude style: prose with the differential in a sentence
        (
            "The most likely diagnosis is glioblastoma. Differential includes metastasis "
            "and primary CNS lymphoma.",
            ok("glioblastoma", "metastasis", "primary CNS lymphoma"),
        ),
        (
            "The findings suggest Rosai-Dorfman disease. Other considerations include "
            "meningioma, T-cell lymphoma and Creutzfeldt-Jakob disease.",
            ok(
                "Rosai-Dorfman disease",
                "meningioma",
                "T-cell lymphoma",
                "Creutzfeldt-Jakob disease",
            ),
        ),
        (
            "Based on the imaging, this is most likely a pilocytic astrocytoma, given the "
            "cyst with a mural nodule. The differential diagnosis includes hemangioblastoma, "
            "ependymoma, or medulloblastoma.",
            ok("pilocytic astrocytoma", "hemangioblastoma", "ependymoma", "medulloblastoma"),
        ),
        # LLaVA-Med style: a short free-text sentence
        (
            "The imaging findings are consistent with a cerebral abscess.",
            ok("cerebral abscess"),
        ),
        # Gemini style: bold label, then a bulleted differential under a bold heading
        (
            "**Most likely diagnosis:** Glioblastoma\n\n**Differential diagnoses:**\n"
            "* Metastasis\n* Primary CNS lymphoma\n* Brain abscess\n\n"
            "**Key findings:**\n* Ring enhancement",
            ok("Glioblastoma", "Metastasis", "Primary CNS lymphoma", "Brain abscess"),
        ),
        # MedGemma style: headings, the top-1 on the line below, a numbered list with reasons
        (
            "## Most Likely Diagnosis\nLikely Glioblastoma (given central necrosis)\n\n"
            "## Other Possible Diagnoses\n1. Metastasis - most likely given the history\n"
            "   - several lesions would favour it\n2. Lymphoma (periventricular)\n"
            "3. Abscess: because of restricted diffusion\n4. Tumefactive demyelination, "
            "which can ring-enhance\n\nRecommendation: MR spectroscopy.",
            ok("Glioblastoma", "Metastasis", "Lymphoma", "Abscess", "Tumefactive demyelination"),
        ),
        # labels inside list items, a dash as the label separator
        (
            "- **Diagnosis** - Neurocysticercosis\n- **Differentials**: tuberculoma; toxoplasmosis",
            ok("Neurocysticercosis", "tuberculoma", "toxoplasmosis"),
        ),
        # Qwen style: a bare numbered list with hedges and reasons (en dash, comma clause)
        (
            "1. Most likely Creutzfeldt-Jakob disease – cortical ribboning\n"
            "2. Consistent with hypoxic-ischemic injury\n3. MELAS, given the young age\n"
            "4. Suggestive of Wernicke encephalopathy due to the thalamic signal",
            ok(
                "Creutzfeldt-Jakob disease",
                "hypoxic-ischemic injury",
                "MELAS",
                "Wernicke encephalopathy",
            ),
        ),
        # a label whose value is a sentence; a label over a ranked list
        (
            "Impression: The findings are consistent with a meningioma.",
            ok("meningioma"),
        ),
        (
            "**Answer:**\n1. A glioma\n2. Metastasis\n\nThese are ranked by likelihood.",
            ok("glioma", "Metastasis"),
        ),
        # a list of findings is no differential when a sentence names the diagnosis
        (
            "Findings:\n1. T2 hyperintense lesion\n2. Restricted diffusion\n\n"
            "The findings are consistent with acute infarct.",
            ok("acute infarct"),
        ),
    ],
)
def test_answers_without_json(text: str, expected: ParsedDiagnosis) -> None:
    assert parse_diagnosis(text) == expected


def test_alternatives_in_one_slot_stay_whole_and_are_counted() -> None:
    json_answer = (
        '{"most_likely_diagnosis": "Glioblastoma vs. metastasis", '
        '"other_possible_diagnoses": ["Abscess or tumefactive MS", "Lymphoma"]}'
    )
    assert parse_diagnosis(json_answer) == alternatives(
        2, "Glioblastoma vs. metastasis", "Abscess or tumefactive MS", "Lymphoma"
    )
    markdown = "## Most likely diagnosis\nMeningioma versus hemangiopericytoma\n"
    assert parse_diagnosis(markdown) == alternatives(1, "Meningioma versus hemangiopericytoma")
    # a prose series splits on its commas; a lone "A or B" is one slot
    assert parse_diagnosis(
        "The most likely diagnosis is ADEM. Differential includes MS or NMOSD."
    ) == alternatives(1, "ADEM", "MS or NMOSD")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # only the closing brace missing: the top-1 stays, the differential stays second
        (
            '{"most_likely_diagnosis": "Meningioma", "other_possible_diagnoses": ["Plasmacytoma"]',
            ok("Meningioma", "Plasmacytoma"),
        ),
        # cut in the second item: the complete first item stays, the cut one goes
        (
            "```json\n{'most_likely_diagnosis': 'Wilson's disease', "
            "'other_possible_diagnoses': ['Leigh syndrome', 'Wernicke enceph",
            ok("Wilson's disease", "Leigh syndrome"),
        ),
        # item objects in a cut-off list: their keys are no diagnoses, no item is top-1
        (
            '{"most_likely_diagnosis": "CJD", "other_possible_diagnoses": '
            '[{"diagnosis": "MELAS"}, {"diagnosis": "Hypoxic inj',
            ok("CJD", "MELAS"),
        ),
        # cut before the differential: the top-1 alone
        ('{"most_likely_diagnosis": "Ependymoma", "other_possible', ok("Ependymoma")),
    ],
)
def test_a_cut_off_answer_keeps_its_top_1_and_complete_items(
    text: str, expected: ParsedDiagnosis
) -> None:
    assert parse_diagnosis(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        '{"most_likely_diagnosis": "Menin',
        '{"most_likely_diagnosis": ',
        '{"most_likely_diagnosis": "", "other_possible_diagnoses": ["Plasmacytoma"]',
    ],
)
def test_a_cut_off_top_1_is_a_parse_error_never_a_promoted_differential(text: str) -> None:
    assert parse_diagnosis(text) == ParsedDiagnosis(
        "parse_error", (), "a cut-off answer without a complete top-1"
    )


@pytest.mark.parametrize(
    "text",
    [
        "Other possible diagnoses:\n- Meningioma\n- Schwannoma",
        "Alternatives include meningioma and schwannoma.",
        '{"other_possible_diagnoses": ["Meningioma"]',
    ],
)
def test_other_diagnoses_without_a_top_1_are_a_parse_error(text: str) -> None:
    assert parse_diagnosis(text).status == "parse_error"


def test_a_ranked_differential_list_without_a_separate_top_1_is_a_ranking() -> None:
    # "Differential diagnosis" over a ranked list names the top-1 first, as a bare list does
    text = (
        "Differential diagnosis (most to least likely):\n1. Meningioma - dural tail\n2. Schwannoma"
    )
    assert parse_diagnosis(text) == ok("Meningioma", "Schwannoma")


@pytest.mark.parametrize("shape", SHAPES)
def test_a_megabyte_of_adversarial_text_is_read_in_linear_time(shape: str, monkeypatch) -> None:
    # Without the cut at MAX_TEXT_CHARS, so that a quadratic step would show.
    monkeypatch.setattr(diagnosis, "MAX_TEXT_CHARS", 2_000_000)
    assert_linear_time(parse_diagnosis, shape)


def test_the_reading_stage_records_alternatives_only_where_there_are_some() -> None:
    task = get_task("diagnosis")
    context = AnswerContext(width=256, height=256)
    plain = task.parse('{"most_likely_diagnosis": "GBM"}', context)
    assert plain == Parsed("ok", {"ranked": ["GBM"]})  # clean answers' records do not change
    hedged = task.parse('{"most_likely_diagnosis": "GBM vs lymphoma"}', context)
    assert hedged == Parsed("ok", {"ranked": ["GBM vs lymphoma"], "n_alternatives": 1})
