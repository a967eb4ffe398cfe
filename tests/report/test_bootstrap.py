"""The vectorised case bootstrap against a slow reference: a plain loop that builds each
resampled dataset (copies of the drawn cases) and calls the real scorers on it.

Same seed -> same resample indices -> the same numbers, metric by metric and resample by
resample (not just the same CI).
"""

from __future__ import annotations

import io
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from novabench.report.bootstrap import (
    draw_cases,
    paired_p_value,
    percentile_interval,
    summarize,
    unit_weights,
)
from novabench.tasks.captioning.bootstrap import (
    bleu_from_statistics,
    bleu_statistics,
    captioning_replicates,
)
from novabench.tasks.captioning.metrics import bleu4, score_captioning
from novabench.tasks.diagnosis import table_labels
from novabench.tasks.diagnosis.bootstrap import diagnosis_replicates
from novabench.tasks.diagnosis.metrics import score_diagnosis
from novabench.tasks.localization.bootstrap import localization_replicates
from novabench.tasks.localization.metrics import coco_detection_matches, score_localization

N_RESAMPLES = 30


def csv_round_trip(frame: pd.DataFrame) -> pd.DataFrame:
    """The per-image table as the report reads it: through the CSV the scorer writes."""
    return pd.read_csv(io.StringIO(frame.to_csv(index=False, float_format="%.6g")))


def resampled(items: dict, case_of, resamples, b: int) -> list[tuple[str, str, object]]:
    """The b-th resample as (new name, new case, item): the k-th draw of a case gets
    suffix ~k on its images and case, so copies are distinct images (and cases)."""
    drawn: dict[str, int] = {}
    out = []
    for index in resamples.indices[b]:
        case = resamples.cases[index]
        copy = drawn.get(case, 0)
        drawn[case] = copy + 1
        for name in sorted(items):
            if case_of(name) == case:
                out.append((f"{name}~{copy:03d}", f"{case}~{copy:03d}", items[name]))
    return out


def assert_equal_metrics(vectorised: dict, reference: dict, b: int, tolerance=1e-9) -> None:
    for key, values in vectorised.items():
        ours, theirs = values[b], reference[key]
        theirs = np.nan if theirs is None else theirs
        if np.isnan(theirs):
            assert np.isnan(ours), (b, key, ours)
        else:
            assert ours == pytest.approx(theirs, abs=tolerance), (b, key)


# --- resampling ------------------------------------------------------------------------------


def test_resamples_draw_whole_cases_reproducibly():
    case_ids = ["c1", "c1", "c1", "c2", "c3", "c3"]
    first = draw_cases(case_ids, 50, seed=7)
    weights = first.weights(case_ids)
    assert weights.shape == (50, 6)
    # all images of a case share its weight; the weights of a resample count n_cases draws
    assert (weights[:, 0] == weights[:, 1]).all() and (weights[:, 1] == weights[:, 2]).all()
    assert (weights[:, 4] == weights[:, 5]).all()
    case_draws = weights[:, [0, 3, 4]]
    assert (case_draws.sum(axis=1) == 3).all()
    # same seed, same draws; another seed, other draws
    assert np.array_equal(draw_cases(case_ids, 50, seed=7).indices, first.indices)
    assert not np.array_equal(draw_cases(case_ids, 50, seed=8).indices, first.indices)
    # cases are indexed in sorted order, whatever the image order
    assert first.cases == ["c1", "c2", "c3"]


# --- localization ----------------------------------------------------------------------------


def make_localization(seed: int, n_cases: int, scored: bool):
    """Random gold and predicted boxes: overlaps, misses, normal images, empty answers,
    several boxes per image; ``scored`` gives boxes confidences with ties."""
    rng = np.random.default_rng(seed)
    gold, predictions = {}, {}
    for case in range(n_cases):
        for image in range(int(rng.integers(1, 5))):
            name = f"case{case:04d}_{image:03d}.png"
            boxes = [
                [*rng.uniform(0, 300, 2), *rng.uniform(10, 100, 2)]
                for _ in range(int(rng.integers(0, 3)))
            ]
            gold[name] = boxes
            preds = []
            for _ in range(int(rng.integers(0, 4))):
                if boxes and rng.random() < 0.6:
                    box = np.array(boxes[int(rng.integers(len(boxes)))]) + rng.normal(0, 15, 4)
                    box[2:] = np.abs(box[2:]) + 1
                else:
                    box = [*rng.uniform(0, 300, 2), *rng.uniform(10, 100, 2)]
                pred = dict(zip(("x", "y", "width", "height"), map(float, box), strict=True))
                if scored:
                    pred["score"] = float(rng.choice([0.2, 0.5, 0.9]))
                preds.append(pred)
            predictions[name] = preds
    return gold, predictions


def case_of(name: str) -> str:
    return name.split("_")[0]


LOCALIZATION_KEYS = (
    "mAP@30",
    "mAP@50",
    "mAP@[50:95]",
    "Hit@30",
    "Hit@50",
    "ACC50",
    "FNR",
    "TP30",
    "FP30",
    "FN30",
)


@pytest.mark.parametrize("scored", [False, True], ids=["tied-scores", "confidences"])
def test_localization_bootstrap_equals_scorer_on_each_resample(scored):
    gold, predictions = make_localization(seed=1 if scored else 2, n_cases=12, scored=scored)
    summary, per_image = score_localization(gold, predictions)
    per_image = csv_round_trip(per_image)
    matches = coco_detection_matches(gold, predictions)
    names = sorted(gold)

    point = localization_replicates(per_image, matches, unit_weights(len(names)))
    for key in LOCALIZATION_KEYS:  # unit weights give the scorer's numbers exactly
        assert point[key][0] == summary[key], key

    cases = [case_of(n) for n in names]
    resamples = draw_cases(cases, N_RESAMPLES, seed=3)
    replicates = localization_replicates(per_image, matches, resamples.weights(cases))
    for b in range(N_RESAMPLES):
        copies = resampled(dict.fromkeys(names), case_of, resamples, b)
        gold_b = {new: gold[new.split("~")[0]] for new, _, _ in copies}
        preds_b = {new: predictions[new.split("~")[0]] for new, _, _ in copies}
        reference, _ = score_localization(gold_b, preds_b)
        assert_equal_metrics({k: replicates[k] for k in LOCALIZATION_KEYS}, reference, b)
    # the bootstrap actually varies (a constant would pass the loop above trivially)
    assert np.ptp(replicates["mAP@30"]) > 1 and np.ptp(replicates["Hit@30"]) > 1


def test_ap_bootstrap_undefined_without_gold_boxes():
    gold = {"a_1.png": [], "b_1.png": [[0, 0, 10, 10]]}
    predictions = {"a_1.png": [{"x": 0, "y": 0, "width": 5, "height": 5}], "b_1.png": []}
    _, per_image = score_localization(gold, predictions)
    matches = coco_detection_matches(gold, predictions)
    weights = np.array([[2, 0], [1, 1]])  # only the normal image, then both
    out = localization_replicates(per_image, matches, weights)
    assert np.isnan(out["mAP@50"][0]) and out["mAP@50"][1] == 0.0
    assert np.isnan(out["Hit@30"][0]) and out["FP30"].tolist() == [2.0, 1.0]


# --- captioning ------------------------------------------------------------------------------

REFERENCES = [
    "Axial FLAIR image shows a hyperintense lesion in the left frontal lobe.",
    "Coronal T1-weighted post-contrast image: ring-enhancing mass with central necrosis.",
    "Sagittal T2 image demonstrates a cystic lesion in the posterior fossa, no hemorrhage.",
    "Axial DWI shows restricted diffusion in the right thalamus, consistent with infarct.",
    "Axial T2-weighted image shows no abnormality.",
]
HYPOTHESES = [
    "Axial FLAIR image shows a hyperintense lesion in the right frontal lobe.",
    "Coronal T1 post-contrast image shows a ring-enhancing mass.",
    None,  # a parse error: scored as an empty caption
    "Axial image.",
    "Normal brain MRI.",
    "Sagittal T1 shows a mass in the cerebellum.",
]


def caption_records(seed: int, n_cases: int) -> list[dict]:
    rng = np.random.default_rng(seed)
    records = []
    for case in range(n_cases):
        for image in range(int(rng.integers(1, 4))):
            hypothesis = HYPOTHESES[int(rng.integers(len(HYPOTHESES)))]
            records.append(
                {
                    "filename": f"case{case:02d}_{image}.png",
                    "reference": REFERENCES[int(rng.integers(len(REFERENCES)))],
                    "prediction": hypothesis,
                    "status": "ok" if hypothesis else "parse_error",
                }
            )
    return records


def test_bleu_statistics_give_nltk_corpus_bleu():
    hyps = [h or "" for h in HYPOTHESES[:5]]
    totals = bleu_statistics(REFERENCES, hyps).sum(axis=0)
    assert bleu_from_statistics(totals) == bleu4(REFERENCES, hyps)
    # no unigram match at all: BLEU 0 (nltk's early return)
    assert bleu_from_statistics(bleu_statistics(["a b c"], ["x y"]).sum(axis=0)) == 0.0


def test_captioning_bootstrap_equals_scorer_on_each_resample(nltk_data):
    from novabench.judges.keywords import KeywordJudge

    judge = KeywordJudge()
    records = caption_records(seed=0, n_cases=7)
    summary, per_image = score_captioning(records, judge, nltk_data)
    per_image = csv_round_trip(per_image)
    stats = bleu_statistics(
        [r["reference"] for r in records],
        [r["prediction"] if r["status"] == "ok" else "" for r in records],
    )
    point = captioning_replicates(per_image, stats, unit_weights(len(records)))
    for key in ("BLEU-4", "Clinical_F1", "Modality_F1", "Binary_F1"):
        assert point[key][0] == pytest.approx(summary[key], abs=1e-12), key
    # per-image METEOR is read from the CSV (6 significant digits)
    assert point["METEOR"][0] == pytest.approx(summary["METEOR"], abs=1e-3)

    by_name = {r["filename"]: r for r in records}
    cases = [case_of(r["filename"]) for r in records]
    resamples = draw_cases(cases, 8, seed=5)
    replicates = captioning_replicates(per_image, stats, resamples.weights(cases))
    for b in range(8):
        copies = resampled(by_name, case_of, resamples, b)
        reference, _ = score_captioning(
            [dict(record, filename=new) for new, _, record in copies], judge, nltk_data
        )
        exact = {k: v for k, v in replicates.items() if k != "METEOR"}
        assert_equal_metrics(exact, reference, b)
        assert replicates["METEOR"][b] == pytest.approx(reference["METEOR"], abs=1e-3)


# --- diagnosis -------------------------------------------------------------------------------


class ExactJudge:
    """A transparent judge: case-insensitive equality; "GBM" is a synonym label."""

    def match_ranked(self, ranked, reference):
        ref = reference.lower()
        return ranked[0].lower() == ref, any(item.lower() == ref for item in ranked)

    def canonical_label(self, text):
        return text.lower().replace("gbm", "glioblastoma")

    def identity(self):
        return {"name": "exact"}


def diagnosis_records(seed: int, n_cases: int) -> list[dict]:
    rng = np.random.default_rng(seed)
    labels = ["Glioblastoma", "GBM", "Meningioma", "Abscess", "Lymphoma", "Cyst"]
    records = []
    for case in range(n_cases):
        reference = labels[int(rng.integers(len(labels)))]
        for image in range(int(rng.integers(1, 5))):
            status = str(rng.choice(["ok", "ok", "ok", "parse_error", "error"]))
            ranked = (
                list(rng.choice(labels, size=int(rng.integers(1, 5)), replace=False))
                if status == "ok"
                else []
            )
            records.append(
                {
                    "filename": f"case{case:02d}_{image}.png",
                    "case_id": f"case{case:02d}",
                    "reference": reference,
                    "predictions": ranked,
                    "status": status,
                }
            )
    return records


@pytest.mark.parametrize("unit", ["image", "case"])
def test_diagnosis_bootstrap_equals_scorer_on_each_resample(unit):
    judge = ExactJudge()
    records = diagnosis_records(seed=4, n_cases=10)
    summary, per_image = score_diagnosis(records, judge, unit=unit)
    per_image = csv_round_trip(per_image)  # with the labels the reading stage gave
    labels = table_labels(SimpleNamespace(name="m", per_image=per_image))
    point = diagnosis_replicates(per_image, unit_weights(len(records)), *labels, unit=unit)
    for key, values in point.items():
        assert values[0] == pytest.approx(summary[key], abs=1e-12), key

    by_name = {r["filename"]: r for r in records}
    cases = list(per_image["case_id"])
    resamples = draw_cases(cases, N_RESAMPLES, seed=6)
    replicates = diagnosis_replicates(per_image, resamples.weights(cases), *labels, unit=unit)
    for b in range(N_RESAMPLES):
        copies = resampled(by_name, case_of, resamples, b)
        reference, _ = score_diagnosis(
            [dict(r, filename=new, case_id=case) for new, case, r in copies], judge, unit=unit
        )
        assert_equal_metrics(replicates, reference, b)
    assert np.ptp(replicates["Top-5"]) > 1 and np.ptp(replicates["Entropy"]) > 0.1


# --- intervals and tests ---------------------------------------------------------------------


def test_percentile_interval_by_hand():
    values = np.arange(1.0, 102.0)  # 1..101: 2.5% and 97.5% quantiles are 3.5 and 98.5
    low, high, n = percentile_interval(np.r_[values, np.nan], 0.95)
    assert (low, high, n) == (pytest.approx(3.5), pytest.approx(98.5), 101)
    assert np.isnan(percentile_interval(np.array([np.nan]), 0.95)[0])


def test_paired_p_value_by_hand():
    # model better in 97 of 100 resamples, worse in 3: p = 2 * (1 + 3) / 101
    model = np.r_[np.full(97, 2.0), np.zeros(3)]
    reference = np.ones(100)
    assert paired_p_value(model, reference) == pytest.approx(8 / 101)
    # identical: no evidence either way
    assert paired_p_value(reference, reference) == 1.0


def test_summarize_pairs_models_with_the_reference():
    reps = {"a": {"m": np.array([1.0, 2.0, 3.0])}, "b": {"m": np.array([2.0, 3.0, 4.0])}}
    table = summarize(reps, {"a": {"m": 2.0}, "b": {"m": 3.5}}, reference="a", confidence=0.5)
    row = table.set_index("model").loc["b"]
    assert row["estimate"] == 3.5 and row["difference"] == 1.5
    assert row["p_value"] == pytest.approx(2 / 4)  # d = 1 everywhere: 2 (1 + 0) / (3 + 1)
    assert (row["ci_low"], row["ci_high"]) == (2.5, 3.5)
    assert np.isnan(table.set_index("model").loc["a", "p_value"])
