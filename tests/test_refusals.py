"""The refusal detector: measured on a held-out list, and how each task records a refusal."""

from __future__ import annotations

import json

import pytest

from novabench.answers import read_answer
from novabench.models.base import Response, Sample
from novabench.predict import _record
from novabench.refusals import clauses, refusal_reason
from novabench.tasks import get_task
from support import VALIDATION

HELD_OUT = VALIDATION / "refusals.jsonl"


def held_out() -> list[dict]:
    lines = [json.loads(line) for line in HELD_OUT.read_text(encoding="utf-8").splitlines()]
    assert "provenance" in lines[0]
    return lines[1:]


def test_precision_and_recall_on_the_held_out_answers(capsys):
    examples = held_out()
    assert sum(e["refusal"] for e in examples) >= 30
    assert sum(not e["refusal"] for e in examples) >= 30
    found = [refusal_reason(e["text"]) is not None for e in examples]
    tp = sum(f and e["refusal"] for f, e in zip(found, examples, strict=True))
    fp = sum(f and not e["refusal"] for f, e in zip(found, examples, strict=True))
    fn = sum(not f and e["refusal"] for f, e in zip(found, examples, strict=True))
    precision, recall = tp / (tp + fp), tp / (tp + fn)
    with capsys.disabled():
        print(f"\nrefusal detector on {HELD_OUT.name}: precision {precision:.2f} "
              f"({tp}/{tp + fp}), recall {recall:.2f} ({tp}/{tp + fn})")  # fmt: skip
    # A caption scored as a refusal loses its score: precision matters most.
    assert precision >= 0.95 and recall >= 0.9


@pytest.mark.parametrize(
    "text",
    [
        "I can't.",
        "Unfortunately, I cannot process this request.",
        "Sorry, I can't help with identifying or making assumptions about medical images.",
        # A sentence that says nothing about the image does not make it an answer.
        "This image appears to be a brain MRI. However, I can't provide a diagnosis or "
        "interpret it. Please consult a radiologist.",
        "Please have this scan reviewed by a neuroradiologist.",
    ],
)
def test_refusals(text):
    assert refusal_reason(text) is not None


@pytest.mark.parametrize(
    "text",
    [
        "",
        "I'm sorry.",  # an apology alone declines nothing
        "Grade I meningioma cannot be excluded.",
        "Chiari I malformation cannot be evaluated on this slice; there is tonsillar descent.",
        "I cannot provide a diagnosis based on this image alone. The MRI shows an area of "
        "increased signal in the right temporal lobe.",
        "No acute intracranial abnormality. Recommend follow-up with the referring physician.",
        "This image is a T2 FLAIR MRI.",
        "I cannot detect any lesion.",
    ],
)
def test_not_refusals(text):
    assert refusal_reason(text) is None


def test_the_reason_quotes_the_declining_clause():
    assert clauses("I'm sorry, but I can't help with that.") == [
        "I'm sorry",
        "I can't help with that",
    ]
    assert refusal_reason("I'm sorry, but I can't help with that.") == (
        'the model declined: "I can\'t help with that"'
    )
    assert refusal_reason("Consult a radiologist.") == (
        "the model only referred to a professional: 'Consult a radiologist'"
    )


def _status(task: str, raw: str, refusal: bool = False) -> tuple[str, str | None]:
    """The status of one answer as the reading stage reads its prediction record."""
    sample = Sample("case0001_001.png", "case0001", task, "", None, 480, 480)
    box_format = "pixel_xyxy" if task == "localization" else None
    record = _record(sample, Response(raw, refusal=refusal), "m", {"box_format": box_format})
    read = read_answer(get_task(task), record, (480, 480))
    return read["status"], read["error"]


@pytest.mark.parametrize(
    ("task", "raw", "status"),
    [
        ("localization", "Sorry, I can't help with locating lesions on medical scans.", "refusal"),
        ("localization", "I cannot identify any lesion: no abnormality.", "no_finding"),
        ("localization", '[{"bbox_2d": [10, 20, 110, 120]}] Please consult a radiologist.', "ok"),
        ("captioning", "As an AI, I'm not able to interpret medical images.", "refusal"),
        ("captioning", "Axial FLAIR: lesion in the pons; glioma cannot be excluded.", "ok"),
        ("diagnosis", "I cannot provide medical diagnoses. Please consult a doctor.", "refusal"),
        ("diagnosis", '{"most_likely_diagnosis": "Glioma", "other_possible_diagnoses": []}', "ok"),
    ],
)  # fmt: skip
def test_every_task_records_a_refusal_the_same_way(task, raw, status):
    assert _status(task, raw)[0] == status


def test_a_prediction_record_leaves_text_refusals_to_reading():
    sample = Sample("case0001_001.png", "case0001", "captioning", "", None, 480, 480)
    text = "As an AI, I'm not able to interpret medical images."
    record = _record(sample, Response(text), "m", {})
    assert (record["status"], record["error"], record["raw"]) == ("ok", None, text)
    assert "parsed" not in record


def test_the_api_flag_wins_over_the_text():
    assert _status("captioning", "Axial T2 image.", refusal=True) == (
        "refusal",
        "the API flagged the answer as a refusal",
    )
