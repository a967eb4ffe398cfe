"""Task 3 scores: Top-1, Top-5, Coverage, Label recall, Entropy, failure rates, case level."""

import math

import numpy as np
import pandas as pd
import pytest

from novabench.errors import ConfigError, NovaError
from novabench.judges.diagnosis_matcher import DiagnosisMatcher
from novabench.judges.vocabulary import load_vocabulary
from novabench.tasks.diagnosis.metrics import COLUMNS, label_recall_table, score_diagnosis


class ExactJudge:
    """Case- and space-insensitive string equality: keeps the hand-worked numbers simple."""

    @staticmethod
    def _key(text: str) -> str:
        return " ".join(text.casefold().split())

    def match_ranked(self, ranked, reference):
        hits = [self._key(item) == self._key(reference) for item in ranked[:5]]
        return bool(hits and hits[0]), any(hits)

    def identity(self):
        return {"name": "exact"}


def _record(filename, case_id, reference, predictions, status="ok"):
    return {
        "filename": filename,
        "case_id": case_id,
        "reference": reference,
        "predictions": predictions,
        "status": status,
    }


# 7 images in 4 cases. Per image (top-1, top-5):
#   case1: a (1, 1)  b (0, 1)  g (1, 1)       case2: c, d parse errors (0, 0)
#   case3: e (1, 1)                            case4: f API error (0, 0)
RECORDS = [
    _record("a.png", "case1", "Glioblastoma", ["Glioblastoma", "Metastasis"]),
    _record("b.png", "case1", "Glioblastoma", ["Metastasis", "Lymphoma", "glioblastoma"]),
    _record("g.png", "case1", "Glioblastoma", ["glioblastoma  "]),
    _record("c.png", "case2", "Meningioma", [], "parse_error"),
    _record("d.png", "case2", "Meningioma", ["Meningioma"], "parse_error"),  # ignored
    _record("e.png", "case3", "Arachnoid cyst", ["Arachnoid cyst", "Epidermoid cyst"]),
    _record("f.png", "case4", "Colloid cyst", [], "error"),
]


def _entropy(probabilities):
    return -sum(p * math.log2(p) for p in probabilities)


def test_hand_worked_image_scores() -> None:
    summary, table = score_diagnosis(RECORDS, ExactJudge())
    assert summary["unit"] == "image"
    assert summary["Top-1"] == pytest.approx(100 * 3 / 7)  # a, g, e
    assert summary["Top-5"] == pytest.approx(100 * 4 / 7)  # a, b, g, e
    # Case level: mean over cases of per-case accuracy: (2/3 + 0 + 1 + 0) / 4, (1 + 0 + 1 + 0) / 4
    assert summary["Top-1_case"] == pytest.approx(100 * (2 / 3 + 1) / 4)
    assert summary["Top-5_case"] == pytest.approx(50.0)
    assert summary["parse_error_rate"] == pytest.approx(100 * 2 / 7)
    assert summary["error_rate"] == pytest.approx(100 * 1 / 7)
    assert (summary["n_images"], summary["n_cases"]) == (7, 4)
    assert (summary["n_ok"], summary["n_parse_error"], summary["n_error"]) == (4, 2, 1)
    # Predicted top-1 labels: glioblastoma x2 (case and spaces folded), metastasis, arachnoid
    # cyst -> counts 2, 1, 1 -> 1.5 bits; 3 of 4 reference labels -> Coverage 75.
    assert summary["Entropy"] == pytest.approx(1.5)
    assert summary["Coverage"] == pytest.approx(75.0)
    assert summary["Entropy_reference"] == pytest.approx(_entropy([3 / 7, 2 / 7, 1 / 7, 1 / 7]))
    assert summary["n_distinct_predicted_labels"] == 3
    assert summary["n_distinct_reference_labels"] == 4
    assert summary["label_normalization"] == "casefold"
    assert summary["judge"] == {"name": "exact"}

    assert list(table.columns) == list(COLUMNS)
    assert table["top1_correct"].tolist() == [True, False, True, False, False, True, False]
    assert table["top5_correct"].tolist() == [True, True, True, False, False, True, False]
    assert table.loc[1, "predictions"] == "Metastasis | Lymphoma | glioblastoma"
    assert table.loc[1, "top1_prediction"] == "Metastasis"
    assert table.loc[4, "predictions"] == ""  # a parse error's leftovers are not scored


def test_case_unit_makes_cases_the_headline() -> None:
    summary, _ = score_diagnosis(RECORDS, ExactJudge(), unit="case")
    assert summary["unit"] == "case"
    assert summary["Top-1"] == pytest.approx(100 * (2 / 3 + 1) / 4)
    assert summary["Top-5"] == pytest.approx(50.0)
    assert summary["Top-1_image"] == pytest.approx(100 * 3 / 7)
    # Each image weighs 1 / images in its case: case1 gives glioblastoma 2/3, metastasis 1/3,
    # case3 arachnoid cyst 1 -> probabilities 1/3, 1/6, 1/2; references one per case -> 2 bits.
    assert summary["Entropy"] == pytest.approx(_entropy([1 / 3, 1 / 6, 1 / 2]))
    assert summary["Entropy_reference"] == pytest.approx(2.0)
    assert summary["Coverage"] == pytest.approx(75.0)


def test_label_recall_per_label_by_hand() -> None:
    # Reference labels of RECORDS and their top-1 hits: glioblastoma a, g (2 of 3 images);
    # meningioma none (parse errors); arachnoid cyst e; colloid cyst none (API error).
    summary, table = score_diagnosis(RECORDS, ExactJudge())
    per_label = label_recall_table(table, ExactJudge())
    assert per_label.to_dict("records") == [
        {"label": "arachnoid cyst", "n_images": 1, "n_top1_correct": 1, "recalled": True},
        {"label": "colloid cyst", "n_images": 1, "n_top1_correct": 0, "recalled": False},
        {"label": "glioblastoma", "n_images": 3, "n_top1_correct": 2, "recalled": True},
        {"label": "meningioma", "n_images": 2, "n_top1_correct": 0, "recalled": False},
    ]
    assert summary["Label_recall"] == 50.0 and summary["n_recalled_reference_labels"] == 2


def test_label_recall_cannot_be_gamed_by_varied_wrong_answers() -> None:
    # Always wrong, never the same twice: the paper's Coverage is 100, Label recall 0.
    references = ["Glioblastoma", "Meningioma", "Abscess"]
    wrong = ["Lymphoma", "Metastasis", "Ependymoma", "Medulloblastoma", "Schwannoma", "Cyst"]
    records = [
        _record(f"{i}.png", f"c{i}", references[i % 3], [wrong[i]]) for i in range(len(wrong))
    ]
    summary, _ = score_diagnosis(records, ExactJudge())
    assert summary["Coverage"] == 100.0 and summary["Label_recall"] == 0.0
    # One right answer for one of the three reference labels: 1/3, whatever else is said.
    records[0] = _record("0.png", "c0", "Glioblastoma", ["glioblastoma"])
    summary, _ = score_diagnosis(records, ExactJudge())
    assert summary["Label_recall"] == pytest.approx(100 / 3)


def test_a_refusal_is_scored_as_an_error_and_counted_apart() -> None:
    as_error, _ = score_diagnosis(RECORDS, ExactJudge())
    refused = [*RECORDS[:-1], {**RECORDS[-1], "status": "refusal"}]
    summary, table = score_diagnosis(refused, ExactJudge())
    assert table.iloc[-1]["status"] == "refusal" and not table.iloc[-1]["top5_correct"]
    (n_error, n_refusal) = (summary["n_error"], summary["n_refusal"])
    assert (n_error, n_refusal) == (0, 1) and summary["refusal_rate"] == pytest.approx(100 / 7)
    for key in ("Top-1", "Top-5", "Top-1_case", "Coverage", "Label_recall", "Entropy"):
        assert summary[key] == as_error[key], key


def test_coverage_is_capped_at_100() -> None:
    records = [
        _record("1.png", "c1", "Glioblastoma", ["Meningioma"]),
        _record("2.png", "c2", "Glioblastoma", ["Lymphoma"]),
    ]
    summary, _ = score_diagnosis(records, ExactJudge())
    assert summary["Coverage"] == 100.0 and summary["Top-1"] == 0.0
    assert summary["Entropy"] == pytest.approx(1.0) and summary["Entropy_reference"] == 0.0


def test_no_predictions_at_all() -> None:
    records = [_record("1.png", "c1", "Glioblastoma", [], "error")]
    summary, _ = score_diagnosis(records, ExactJudge())
    assert (summary["Top-1"], summary["Top-5"], summary["Coverage"], summary["Entropy"]) == (
        0.0,
        0.0,
        0.0,
        0.0,
    )
    assert summary["error_rate"] == 100.0


def test_dataframe_and_serialized_predictions_are_accepted() -> None:
    frame = pd.DataFrame(RECORDS)
    frame.loc[0, "predictions"] = "Glioblastoma | Metastasis"  # the joined form
    frame.at[1, "predictions"] = np.array(["Metastasis", "Lymphoma", "glioblastoma"])
    frame.at[3, "predictions"] = None  # parse error rows may hold nulls
    frame.at[6, "predictions"] = pd.NA
    summary, _ = score_diagnosis(frame, ExactJudge())
    assert summary["Top-1"] == pytest.approx(100 * 3 / 7)
    assert summary["Top-5"] == pytest.approx(100 * 4 / 7)


def test_gold_versus_gold_is_100(matcher: DiagnosisMatcher) -> None:
    kb = load_vocabulary()
    records = []
    for i, entry in enumerate(kb.entries):
        for j, name in enumerate(entry.names[:3]):
            # Names the judge's tables declare entities of their own have their own label.
            if j == 0 or matcher.canonical_label(name) == entry.name:
                records.append(_record(f"{i}_{j}.png", f"case{i}", name, [name]))
    summary, table = score_diagnosis(records, matcher)
    assert summary["Top-1"] == summary["Top-5"] == 100.0
    assert summary["Top-1_case"] == summary["Top-5_case"] == 100.0
    assert summary["Coverage"] == 100.0
    assert summary["Entropy"] == pytest.approx(summary["Entropy_reference"])
    # Synonyms collapse to one label per condition.
    assert summary["n_distinct_reference_labels"] == len(kb)
    assert summary["label_normalization"] == "judge.canonical_label"
    assert summary["judge"] == matcher.identity()
    assert table["top1_correct"].all()


def test_matcher_labels_merge_synonyms(matcher: DiagnosisMatcher) -> None:
    records = [
        _record("1.png", "c1", "Glioblastoma multiforme", ["GBM", "Metastasis"]),
        _record("2.png", "c1", "Glioblastoma multiforme", ["glioblastoma", "Lymphoma"]),
        _record("3.png", "c2", "Arachnoid cyst", ["Epidermoid cyst", "Arachnoid cyst"]),
        _record("4.png", "c3", "Meningioma", ["Glioblastoma"]),
    ]
    summary, table = score_diagnosis(records, matcher)
    assert table["top1_correct"].tolist() == [True, True, False, False]
    assert table["top5_correct"].tolist() == [True, True, True, False]
    # Predicted labels: Glioblastoma x3 (GBM, glioblastoma, Glioblastoma), Epidermoid cyst.
    assert summary["n_distinct_predicted_labels"] == 2
    assert summary["Entropy"] == pytest.approx(_entropy([3 / 4, 1 / 4]))
    assert summary["Coverage"] == pytest.approx(100 * 2 / 3)


@pytest.mark.parametrize(
    ("records", "error", "message"),
    [
        ([], NovaError, "no diagnosis records"),
        ([{"filename": "a.png", "case_id": "c"}], NovaError, "reference, predictions, status"),
        ([_record("a.png", "c", "X", [], "timeout")], NovaError, "unknown diagnosis record status"),
        ([_record("a.png", "c", "X", []), _record("a.png", "c", "X", [])], NovaError, "repeat"),
        ([_record("a.png", "c", None, ["X"])], NovaError, "no reference diagnosis"),
        ([_record("a.png", "c", "  ", ["X"])], NovaError, r"no reference .*first: a\.png"),
    ],
)
def test_invalid_records_raise(records, error, message) -> None:
    with pytest.raises(error, match=message):
        score_diagnosis(records, ExactJudge())


def test_unknown_unit_raises() -> None:
    with pytest.raises(ConfigError, match="unit"):
        score_diagnosis(RECORDS, ExactJudge(), unit="patient")
