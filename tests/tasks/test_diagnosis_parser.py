"""Parsing Task 3 model outputs into a ranked differential."""

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from novabench.answer_formats import format_diagnosis
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
    assert parse_diagnosis(format_diagnosis(ranked)) == ok(*ranked)
