"""Reading and judging measured end to end on raw answers (novabench.judges.raw_validation):
five answers written here, read by the pipeline's reader and judged by the real matcher,
with figures counted by hand below."""

import json

import pytest

from novabench.answers import reader_fingerprint
from novabench.errors import NovaError
from novabench.judges import make_judge, raw_validation, validation

OTHERS = ["Schwannoma", "Hemangiopericytoma", "Metastasis", "Lymphoma"]


def answer(id_, raw, status, ranked, top1, top5):
    return {
        "id": id_,
        "split": "heldout",
        "style": "test/json",
        "reference": "Meningioma",
        "raw": raw,
        "hand_read": {"status": status, "ranked": ranked, "note": ""},
        "hand_label": {"top1": top1, "top5": top5},
    }


def json_answer(top1, others):
    return json.dumps({"most_likely_diagnosis": top1, "other_possible_diagnoses": others})


ANSWERS = [
    # Right at the top.
    answer("a1", json_answer("Meningioma", OTHERS), "ok", ["Meningioma", *OTHERS], True, True),
    # Wrong at the top, right second.
    answer(
        "a2",
        json_answer("Glioblastoma", ["Meningioma", *OTHERS[:3]]),
        "ok",
        ["Glioblastoma", "Meningioma", *OTHERS[:3]],
        False,
        True,
    ),
    answer("a3", "I'm sorry, but I can't help with that.", "refusal", [], False, False),
    # Cut at the token limit inside the top-1 name.
    answer("a4", '{"most_likely_diagnosis": "Menin', "parse_error", [], False, False),
    # A person who says no where the judge says yes: one false match of each label.
    answer("a5", json_answer("Meningioma", OTHERS), "ok", ["Meningioma", *OTHERS], False, False),
]


@pytest.fixture(scope="module")
def figures():
    judge = make_judge(
        {"kind": "diagnosis-matcher", "settings": {"embedding_fallback": False}}, "diagnosis"
    )
    return raw_validation.raw_agreement(judge, [dict(a) for a in ANSWERS])["heldout"]


def counts(p):
    return (p["k"], p["n"])


def test_the_reading_agrees_with_the_person_on_every_answer(figures):
    assert figures["n"] == 5
    assert figures["statuses"] == {"ok": 3, "refusal": 1, "parse_error": 1}
    assert counts(figures["reading"]["status"]) == (5, 5)
    assert counts(figures["reading"]["status_and_top1"]) == (5, 5)


def test_verdicts_are_counted_against_the_hand_labels(figures):
    top1, top5 = figures["top1"], figures["top5"]
    # Top-1: a1 right, a2 to a4 right no-matches (no ranking is a decided no-match), a5
    # false. Top-5: a1 and a2 right matches, a3 and a4 right, a5 false.
    assert counts(top1["decided_accuracy"]) == (4, 5)
    assert counts(top1["decided_false_match"]) == (1, 4)
    assert counts(top1["decided_missed"]) == (0, 1)
    assert counts(top1["undecided"]) == (0, 5)
    assert counts(top5["decided_accuracy"]) == (4, 5)
    assert counts(top5["decided_false_match"]) == (1, 3)
    assert counts(top5["decided_missed"]) == (0, 2)
    # The reading agrees everywhere, so the judge alone on the person's reading is the same.
    assert figures["judge_alone"] == {"top1": top1, "top5": top5}
    assert [e["id"] for e in figures["errors"]] == ["a5"]
    assert figures["errors"][0]["wrong"] == "top1, top5"


def test_a_second_rater_is_compared_with_the_first(tmp_path):
    second = tmp_path / "set-second-rater.jsonl"
    lines = [
        {"id": a["id"], "hand_read": a["hand_read"], "hand_label": a["hand_label"]} for a in ANSWERS
    ]
    lines[4] = {**lines[4], "hand_label": {"top1": True, "top5": True}}  # a5 read as a match
    second.write_text("".join(json.dumps(line) + "\n" for line in lines))
    pairs = [dict(a) for a in ANSWERS]
    assert raw_validation.attach_second_rater(second, pairs)["n"] == 5
    found = raw_validation._second_rater(pairs)["second_rater"]
    assert counts(found["top1"]) == (4, 5) and counts(found["top5"]) == (4, 5)
    assert counts(found["reading"]["status_and_top1"]) == (5, 5)
    assert raw_validation.second_rater_line(found) == (
        "A second rater on 5 answers: status agrees 100.0%, status and top-1 name 100.0%; "
        "Top-1 labels agree 80.0%, Top-5 labels 80.0%."
    )


def test_a_second_rater_line_without_labels_is_refused_in_one_line(tmp_path):
    second = tmp_path / "set-second-rater.jsonl"
    second.write_text('{"id": "a1", "hand_read": {"status": "ok"}}\n')
    with pytest.raises(NovaError, match=r"set-second-rater.jsonl:1 is not a second reading"):
        raw_validation.attach_second_rater(second, [dict(a) for a in ANSWERS])


def test_the_record_keeps_the_figures_apart_with_the_reader(figures):
    results = {"raw-diagnoses-1": {"heldout": figures}, "diagnosis-8": {"heldout": {}}}
    files = {"raw-diagnoses-1": {"sha256": "abc"}}
    # Without a set of the judge's own there is no entry to put them in.
    assert validation.heldout_figures("diagnosis", results, files) is None
    own = {"n": 2, **{key: {"k": 1, "n": 2} for key in validation.DIAGNOSIS_FIGURES}}
    results["diagnosis-8"] = {"heldout": own}
    files["diagnosis-8"] = {"sha256": "def"}
    entry = validation.heldout_figures("diagnosis", results, files)
    assert [s["set"] for s in entry["sets"]] == ["diagnosis-8"]
    end_to_end = entry["end_to_end"]
    assert [s["set"] for s in end_to_end["sets"]] == ["raw-diagnoses-1"]
    assert end_to_end["pooled"]["reader"] == reader_fingerprint("diagnosis")
    assert counts(end_to_end["pooled"]["top1"]["decided_accuracy"]) == (4, 5)
    assert end_to_end["pooled"]["n"] == 5


def test_the_report_prints_both_readings_side_by_side(figures):
    vset = validation.SETS_BY_KEY["raw-diagnoses-1"]
    text = "\n".join(raw_validation.raw_markdown("heldout", figures, vset))
    assert "| Top-1 decided accuracy | 80.0% | 4/5 | 80.0% | 4/5 |" in text
    assert "The reading's statuses: ok 3, parse_error 1, refusal 1." in text
    assert raw_validation.raw_summary(figures) == (
        "reading agrees 5/5 (status), 5/5 (status and top-1 name); top1 decided accuracy "
        "4/5, false matches 1/4, undecided 0/5; top5 decided accuracy 4/5, false matches "
        "1/3, undecided 0/5"
    )
