"""Tests for novabench.tasks.localization.metrics against hand-worked cases and independent code."""

from __future__ import annotations

import contextlib
import copy
import io
import math

import numpy as np
import pandas as pd
import pytest
from faster_coco_eval import COCO as FasterCOCO
from faster_coco_eval import COCOeval_faster
from pycocotools import mask as coco_mask
from pycocotools.coco import COCO
from pycocotools.cocoeval import COCOeval

from novabench.errors import NovaError
from novabench.tasks.localization.metrics import (
    PER_IMAGE_COLUMNS,
    greedy_match,
    iou_matrix,
    score_localization,
    score_rater,
)

AP_KEYS = ("mAP@30", "mAP@50", "mAP@[50:95]")
# COCO's 101 recall thresholds 0.00, 0.01, ..., 1.00
N_RECALL = 101


def box(x: float, y: float, w: float = 10, h: float = 10, score: float | None = None) -> dict:
    pred = {"x": x, "y": y, "width": w, "height": h}
    if score is not None:
        pred["score"] = score
    return pred


# --- IoU -----------------------------------------------------------------------------------


def test_iou_hand_values():
    gold = [[0, 0, 10, 10]]
    preds = [
        [0, 0, 10, 10],  # identical: 1
        [3, 0, 10, 10],  # shifted by 3: 70 / 130
        [5, 5, 10, 10],  # 25 / 175
        [10, 0, 10, 10],  # touching edge: 0 (continuous coordinates, no +1)
        [2, 2, 4, 4],  # inside: 16 / 100
    ]
    expected = [1.0, 70 / 130, 25 / 175, 0.0, 16 / 100]
    assert iou_matrix(preds, gold)[:, 0] == pytest.approx(expected)


def test_iou_matches_pycocotools_including_boxes_outside_the_image():
    rng = np.random.default_rng(1)
    # corners from -100 to 600: many boxes are partly outside a 480x480 image
    preds = np.column_stack([rng.uniform(-100, 500, (40, 2)), rng.uniform(1, 150, (40, 2))])
    gold = np.column_stack([rng.uniform(-100, 500, (7, 2)), rng.uniform(1, 150, (7, 2))])
    expected = coco_mask.iou(preds.tolist(), gold.tolist(), [0] * len(gold))
    np.testing.assert_allclose(iou_matrix(preds, gold), expected, rtol=1e-12, atol=1e-12)


def test_iou_empty_shapes():
    assert iou_matrix([], [[0, 0, 1, 1]]).shape == (0, 1)
    assert iou_matrix([[0, 0, 1, 1]], []).shape == (1, 0)


# --- the hand-worked AP case ---------------------------------------------------------------

# Image A has gold G1 and G2, image B has gold G3; all are 10x10. Predictions, by score:
#   P1 (A, 0.9) shifted 3 px from G1: IoU 7/13 = 0.538
#   P2 (B, 0.8) shifted 4 px from G3: IoU 6/14 = 0.429
#   P3 (A, 0.7) overlaps nothing
#   P4 (A, 0.6) shifted 1 px from G2: IoU 9/11 = 0.818
HAND_GOLD = {"A.png": [[0, 0, 10, 10], [100, 0, 10, 10]], "B.png": [[200, 200, 10, 10]]}
HAND_PREDS = {
    "A.png": [box(3, 0, score=0.9), box(50, 50, score=0.7), box(101, 0, score=0.6)],
    "B.png": [box(204, 200, score=0.8)],
}


def test_hand_worked_ap():
    summary, _ = score_localization(HAND_GOLD, HAND_PREDS)
    # IoU 0.3: ranked TP, TP, FP, TP -> precision 1, 1, 2/3, 3/4 at recall 1/3, 2/3, 2/3, 1.
    # Interpolated precision is 1 up to recall 2/3 (thresholds 0.00..0.66: 67 of them) and
    # 3/4 above (0.67..1.00: 34 of them).
    ap30 = (67 * 1 + 34 * 0.75) / N_RECALL
    # IoU 0.5: TP, FP, FP, TP -> recall 1/3 with precision 1, recall 2/3 with precision 1/2:
    # 1 for 0.00..0.33 (34), 1/2 for 0.34..0.66 (33), 0 above.
    ap50 = (34 * 1 + 33 * 0.5) / N_RECALL
    # IoU 0.55..0.80 (6 thresholds): only P4 matches -> FP, FP, FP, TP: precision 1/4 up to
    # recall 1/3 (34 thresholds). IoU 0.85..0.95 (3 thresholds): nothing matches.
    ap55_80 = 34 * 0.25 / N_RECALL
    ap50_95 = (ap50 + 6 * ap55_80 + 3 * 0) / 10
    assert summary["mAP@30"] == pytest.approx(100 * ap30)
    assert summary["mAP@50"] == pytest.approx(100 * ap50)
    assert summary["mAP@[50:95]"] == pytest.approx(100 * ap50_95)


def test_hand_worked_hits_and_greedy_counts():
    summary, per_image = score_localization(HAND_GOLD, HAND_PREDS)
    # best IoU: A 9/11 (hit at 0.3 and 0.5), B 6/14 (hit at 0.3 only)
    assert summary["Hit@30"] == 100
    assert summary["Hit@50"] == 50
    assert summary["mean_best_IoU"] == pytest.approx((9 / 11 + 6 / 14) / 2)
    # 0.3: P1->G1, P3 FP, P4->G2, P2->G3. 0.5: P1->G1, P4->G2; P2, P3 FP; G3 missed.
    expected = {"TP30": 3, "FP30": 1, "FN30": 0, "TP50": 2, "FP50": 2, "FN50": 1}
    assert {k: summary[k] for k in expected} == expected
    assert summary["ACC50"] == pytest.approx(100 * 2 / (2 + 2 + 1))
    assert summary["FNR"] == 0
    assert summary["n_images"] == 2
    assert summary["n_images_with_gold"] == 2
    assert summary["n_gold_boxes"] == 3
    assert summary["n_predicted_boxes"] == 4
    assert list(per_image.columns) == list(PER_IMAGE_COLUMNS)
    a = per_image.set_index("filename").loc["A.png"]
    assert a["best_iou"] == pytest.approx(9 / 11)
    assert (a["tp30"], a["fp30"], a["fn30"], a["tp50"], a["fp50"], a["fn50"]) == (2, 1, 0, 2, 1, 0)


# --- independent COCO implementation -------------------------------------------------------


def random_dataset(seed: int, n_images: int = 60, with_scores: bool = True):
    rng = np.random.default_rng(seed)

    def random_box():
        x, y = rng.uniform(-20, 460, 2)
        w, h = rng.uniform(4, 90, 2)
        return [float(x), float(y), float(w), float(h)]

    gold, preds = {}, {}
    for i in range(n_images):
        filename = f"case{rng.integers(0, 9999):04d}_{i:03d}.png"
        gold[filename] = [random_box() for _ in range(rng.integers(0, 4))]
        image_preds = []
        for _ in range(rng.integers(0, 5)):
            if gold[filename] and rng.random() < 0.7:  # a noisy copy of a gold box
                noisy = np.array(gold[filename][rng.integers(len(gold[filename]))])
                noisy = noisy + rng.normal(0, 4, 4)
                noisy[2:] = np.abs(noisy[2:]) + 1
                b = noisy.tolist()
            else:
                b = random_box()
            pred = box(*b)
            if with_scores:
                pred["score"] = float(rng.random())
            image_preds.append(pred)
        if image_preds or rng.random() < 0.5:  # some images are missing from predictions
            preds[filename] = image_preds
    return gold, preds


def coco_annotations(gold, preds, filenames) -> tuple[list[dict], list[dict]]:
    """Gold and predicted boxes as COCO annotation dicts, images numbered from 1."""
    gt_anns, dt_anns = [], []
    for image_id, filename in enumerate(filenames, start=1):
        for b in gold[filename]:
            gt_anns.append(
                {
                    "id": len(gt_anns) + 1,
                    "image_id": image_id,
                    "category_id": 1,
                    "bbox": b,
                    "area": b[2] * b[3],
                    "iscrowd": 0,
                }
            )
        for p in preds.get(filename, []):
            dt_anns.append(
                {
                    "image_id": image_id,
                    "category_id": 1,
                    "bbox": [p["x"], p["y"], p["width"], p["height"]],
                    "score": p.get("score", 1.0),
                }
            )
    return gt_anns, dt_anns


def faster_coco_ap(gold, preds) -> dict[str, float]:
    """The same AP with faster-coco-eval, through its own loadRes path."""
    filenames = sorted(gold)
    images = [{"id": i + 1} for i in range(len(filenames))]
    gt_anns, dt_anns = coco_annotations(gold, preds, filenames)
    gt = FasterCOCO({"images": images, "annotations": gt_anns, "categories": [{"id": 1}]})
    evaluator = COCOeval_faster(gt, gt.loadRes(dt_anns), "bbox", print_function=lambda *a: None)
    evaluator.params.iouThrs = np.array([0.3, *np.linspace(0.5, 0.95, 10)])
    evaluator.params.maxDets = [100]
    evaluator.params.areaRng = [[0, 1e5**2]]
    evaluator.params.areaRngLbl = ["all"]
    evaluator.evaluate()
    evaluator.accumulate()
    precision = evaluator.eval["precision"][:, :, 0, 0, 0]
    return {
        "mAP@30": 100 * precision[0].mean(),
        "mAP@50": 100 * precision[1].mean(),
        "mAP@[50:95]": 100 * precision[1:].mean(),
    }


@pytest.mark.parametrize(("seed", "with_scores"), [(0, True), (1, True), (2, False), (3, False)])
def test_ap_matches_faster_coco_eval(seed, with_scores):
    gold, preds = random_dataset(seed, with_scores=with_scores)
    summary, _ = score_localization(gold, preds)
    expected = faster_coco_ap(gold, preds)
    assert 0 < expected["mAP@50"] < 100  # the data exercise the metric
    for key in AP_KEYS:
        assert summary[key] == pytest.approx(expected[key], abs=1e-9)


def coco_match_counts(gold, preds, threshold: float) -> tuple[int, int, int]:
    """TP, FP, FN from pycocotools' own per-image matching at one IoU threshold."""
    filenames = sorted(gold)
    gt_anns, dt_anns = coco_annotations(gold, preds, filenames)
    with contextlib.redirect_stdout(io.StringIO()):
        gt = COCO()
        gt.dataset = {
            "images": [{"id": i + 1} for i in range(len(filenames))],
            "categories": [{"id": 1}],
            "annotations": gt_anns,
        }
        gt.createIndex()
        evaluator = COCOeval(gt, gt.loadRes(dt_anns), "bbox")
        evaluator.params.iouThrs = np.array([threshold])
        evaluator.params.areaRng = [[0, 1e5**2]]
        evaluator.params.maxDets = [100]
        evaluator.evaluate()
    tp = sum(int((e["dtMatches"][0] > 0).sum()) for e in evaluator.evalImgs if e)
    n_pred = sum(len(p) for p in preds.values())
    n_gold = sum(len(g) for g in gold.values())
    return tp, n_pred - tp, n_gold - tp


@pytest.mark.parametrize("with_scores", [True, False])
def test_greedy_counts_match_pycocotools_matching(with_scores):
    gold, preds = random_dataset(5, with_scores=with_scores)
    summary, _ = score_localization(gold, preds)
    for tag, threshold in (("30", 0.3), ("50", 0.5)):
        got = (summary[f"TP{tag}"], summary[f"FP{tag}"], summary[f"FN{tag}"])
        assert got == coco_match_counts(gold, preds, threshold)


# --- greedy matching -----------------------------------------------------------------------

# G1 and G2 are side by side. P_mid (x=5) overlaps each by half: IoU 50/150 = 1/3 with both.
# P_right (x=11) overlaps G2 only: IoU 90/110.
GREEDY_GOLD = {"a.png": [[0, 0, 10, 10], [10, 0, 10, 10]]}


def test_greedy_is_greedy_in_the_model_order():
    # P_mid first takes G2 (a tie between G1 and G2 goes to the later gold box, as in
    # pycocotools); P_right then finds G2 taken and G1 out of reach: 1 TP, 1 FP, 1 FN.
    mid_first = {"a.png": [box(5, 0), box(11, 0)]}
    summary, _ = score_localization(GREEDY_GOLD, mid_first)
    assert (summary["TP30"], summary["FP30"], summary["FN30"]) == (1, 1, 1)
    # P_right first takes G2, P_mid takes G1: 2 TP.
    right_first = {"a.png": [box(11, 0), box(5, 0)]}
    summary, _ = score_localization(GREEDY_GOLD, right_first)
    assert (summary["TP30"], summary["FP30"], summary["FN30"]) == (2, 0, 0)
    # a higher score overrides the written order
    scored = {"a.png": [box(5, 0, score=0.1), box(11, 0, score=0.9)]}
    summary, _ = score_localization(GREEDY_GOLD, scored)
    assert (summary["TP30"], summary["FP30"], summary["FN30"]) == (2, 0, 0)
    for preds in (mid_first, right_first, scored):
        summary, _ = score_localization(GREEDY_GOLD, preds)
        assert (summary["TP30"], summary["FP30"], summary["FN30"]) == coco_match_counts(
            GREEDY_GOLD, preds, 0.3
        )


def test_greedy_match_function():
    ious = np.array([[0.6, 0.2], [0.7, 0.0], [0.0, 0.29]])
    # row 0 takes gold 0; row 1 wants gold 0 (taken), gold 1 is 0.0; row 2 is below 0.3
    assert greedy_match(ious, 0.3) == (1, 2, 1)
    assert greedy_match(ious, 0.2) == (2, 1, 0)
    assert greedy_match(np.zeros((2, 0)), 0.5) == (0, 2, 0)
    assert greedy_match(np.zeros((0, 3)), 0.5) == (0, 0, 3)


# --- ties, order, special cases ------------------------------------------------------------


def test_ties_with_score_one_follow_the_model_order():
    gold = {"a.png": [[0, 0, 10, 10]]}
    miss, hit = box(100, 100), box(0, 0)
    # miss ranked first: precision 1/2 at recall 1 -> AP 50 at every threshold
    summary, _ = score_localization(gold, {"a.png": [miss, hit]})
    assert [summary[k] for k in AP_KEYS] == pytest.approx([50, 50, 50])
    summary, _ = score_localization(gold, {"a.png": [hit, miss]})
    assert [summary[k] for k in AP_KEYS] == pytest.approx([100, 100, 100])
    # the per-image hit and greedy counts do not depend on the order
    assert summary["Hit@50"] == 100
    assert (summary["TP50"], summary["FP50"]) == (1, 1)


def test_ties_across_images_follow_filename_order_not_dict_order():
    # the unscored false positive on "a.png" ranks before the true positive on "b.png"
    gold = {"b.png": [[0, 0, 10, 10]], "a.png": [[0, 0, 10, 10]]}
    preds = {"b.png": [box(0, 0)], "a.png": [box(200, 200)]}
    reordered = dict(reversed(list(gold.items())))
    for g in (gold, reordered):
        summary, _ = score_localization(g, preds)
        # FP, TP: recall 1/2 reached with precision 1/2 -> 0.5 for 51 thresholds 0..0.5
        assert summary["mAP@50"] == pytest.approx(100 * 51 * 0.5 / N_RECALL)


def test_perfect_predictions_score_100():
    gold, _ = random_dataset(7)
    gold = {k: v for k, v in gold.items() if v}
    gold["overlap.png"] = [[0, 0, 50, 50], [10, 10, 50, 50], [0, 0, 50, 50]]
    preds = {k: [box(*b) for b in v] for k, v in gold.items()}
    summary, per_image = score_localization(gold, preds)
    for key in (*AP_KEYS, "Hit@30", "Hit@50", "ACC50"):
        assert summary[key] == 100, key
    assert summary["mean_best_IoU"] == 1
    assert summary["FNR"] == 0
    assert summary["FP30"] == summary["FN30"] == summary["FP50"] == summary["FN50"] == 0
    assert (per_image["best_iou"] == 1).all()


@pytest.mark.parametrize("preds_of", [lambda gold: {}, lambda gold: {k: [] for k in gold}])
def test_a_model_that_outputs_nothing_scores_zero(preds_of):
    gold, _ = random_dataset(8)
    summary, per_image = score_localization(gold, preds_of(gold))
    n_gold = sum(len(v) for v in gold.values())
    for key in (*AP_KEYS, "Hit@30", "Hit@50", "mean_best_IoU", "ACC50"):
        assert summary[key] == 0, key
    assert summary["FNR"] == 100
    assert (summary["TP30"], summary["FP30"], summary["FN30"]) == (0, 0, n_gold)
    assert summary["n_predicted_boxes"] == 0
    assert (per_image["n_pred"] == 0).all()


def test_normal_images_only_add_false_positives():
    gold = {"lesion.png": [[0, 0, 10, 10]], "normal.png": []}
    preds = {
        "lesion.png": [box(0, 0, score=0.5)],
        "normal.png": [box(0, 0, score=0.9)],
    }
    summary, per_image = score_localization(gold, preds)
    # the FP on the normal image outranks the TP: precision 1/2 at recall 1 -> AP 50
    assert [summary[k] for k in AP_KEYS] == pytest.approx([50, 50, 50])
    # but Hit and mean best IoU ignore the normal image
    assert summary["Hit@30"] == summary["Hit@50"] == 100
    assert summary["mean_best_IoU"] == 1
    assert (summary["TP30"], summary["FP30"], summary["FN30"]) == (1, 1, 0)
    assert summary["n_normal_images"] == 1
    assert summary["n_images_with_gold"] == 1
    normal = per_image.set_index("filename").loc["normal.png"]
    assert math.isnan(normal["best_iou"])
    assert normal["hit30"] is pd.NA
    # a silent model on the normal image gets the full score back
    summary, _ = score_localization(gold, {"lesion.png": [box(0, 0)]})
    assert summary["mAP@50"] == 100


def test_without_any_gold_box_ap_is_nan():
    gold = {"a.png": [], "b.png": []}
    summary, _ = score_localization(gold, {"a.png": [box(0, 0)]})
    for key in (*AP_KEYS, "Hit@30", "Hit@50", "mean_best_IoU", "FNR"):
        assert math.isnan(summary[key]), key
    assert summary["FP30"] == 1
    assert summary["ACC50"] == 0
    summary, _ = score_localization(gold, {})
    assert math.isnan(summary["ACC50"])


def test_boxes_partly_outside_the_image_are_not_clipped():
    # gold at the right border of a 480 px image; the prediction runs 10 px past it.
    # Unclipped IoU = 100 / 200 = 0.5 (clipping would make it 1.0)
    gold = {"a.png": [[470, 0, 10, 10]]}
    summary, per_image = score_localization(gold, {"a.png": [box(470, 0, w=20)]})
    assert per_image["best_iou"].iloc[0] == 0.5
    assert summary["Hit@50"] == 100  # IoU >= tau counts, as in pycocotools
    assert summary["mAP@50"] == 100
    assert summary["mAP@30"] == 100
    # negative coordinates: 25 / 175
    _, per_image = score_localization({"a.png": [[0, 0, 10, 10]]}, {"a.png": [box(-5, -5)]})
    assert per_image["best_iou"].iloc[0] == pytest.approx(1 / 7)


def test_status_counts_and_rates():
    gold = {f"{i}.png": [[0, 0, 10, 10]] for i in range(5)}
    preds = {"0.png": [box(0, 0)], "1.png": []}
    statuses = {"0.png": "ok", "1.png": "no_finding", "2.png": "parse_error", "3.png": "error"}
    summary, per_image = score_localization(gold, preds, statuses)
    assert summary["parse_error_rate"] == 20
    assert summary["no_finding_rate"] == 20
    assert summary["error_rate"] == 20
    counts = {k: summary[k] for k in ("n_ok", "n_no_finding", "n_parse_error", "n_error")}
    assert counts == {"n_ok": 1, "n_no_finding": 1, "n_parse_error": 1, "n_error": 1}
    assert summary["n_missing"] == 1
    assert per_image.set_index("filename").loc["4.png", "status"] == "missing"
    assert summary["n_images"] == 5
    summary, _ = score_localization(gold, preds)
    rates = ("parse_error_rate", "no_finding_rate", "error_rate")
    assert all(math.isnan(summary[key]) for key in rates)
    assert summary["n_missing"] == 5


@pytest.mark.parametrize(
    ("preds", "statuses", "match"),
    [
        ({"x.png": [box(0, 0)]}, None, "not in the gold set"),
        ({}, {"x.png": "ok"}, "not in the gold set"),
        ({}, {"a.png": "timeout"}, "unknown prediction status"),
        ({"a.png": [box(0, 0)]}, {"a.png": "no_finding"}, "status 'no_finding'"),
        ({"a.png": [{"x": 0, "y": 0}]}, None, "not a box dict"),
        ({"a.png": [box(0, 0, w=-1)]}, None, "negative"),
        ({"a.png": [box(0, 0, score=math.nan)]}, None, "non-finite score"),
    ],
)
def test_bad_input_raises_clear_errors(preds, statuses, match):
    with pytest.raises(NovaError, match=match):
        score_localization({"a.png": [[0, 0, 10, 10]]}, preds, statuses)


@pytest.mark.parametrize("gold_boxes", [[[0, 0, 0, 10]], [[0, 0, 10]], [[0, math.inf, 1, 1]]])
def test_bad_gold_boxes_raise(gold_boxes):
    with pytest.raises(NovaError):
        score_localization({"a.png": gold_boxes}, {})


def test_inputs_are_not_mutated_and_nothing_is_printed(capsys):
    gold, preds = random_dataset(9)
    gold_before, preds_before = copy.deepcopy(gold), copy.deepcopy(preds)
    score_localization(gold, preds)
    assert gold == gold_before and preds == preds_before
    assert capsys.readouterr().out == ""


def test_score_rater_is_score_localization_with_unscored_boxes():
    gold, _ = random_dataset(10)
    rater = {k: [[b[0] + 2, b[1], b[2], b[3]] for b in v] for k, v in gold.items() if v}
    rater[next(iter(gold))] = [[300, 300, 20, 20], *rater.get(next(iter(gold)), [])]
    summary, per_image = score_rater(gold, rater)
    as_model = {k: [box(*b) for b in v] for k, v in rater.items()}
    # An image the rater drew nothing on is the rater's "no finding".
    blank = [k for k in gold if not rater.get(k)]
    statuses = {k: "no_finding" if k in blank else "ok" for k in gold}
    expected_summary, expected_per_image = score_localization(gold, as_model, statuses)
    assert summary["n_no_finding"] == len(blank) and summary["n_ok"] == len(gold) - len(blank)
    assert summary.keys() == expected_summary.keys()
    for key, value in expected_summary.items():
        assert summary[key] == pytest.approx(value, nan_ok=True), key
    assert per_image.equals(expected_per_image)
    perfect, _ = score_rater(gold, gold)
    assert perfect["mAP@[50:95]"] == 100 and perfect["Hit@50"] == 100


def test_empty_inputs_and_none_predictions_do_not_crash():
    summary, per_image = score_localization({}, {})
    assert summary["n_images"] == 0 and math.isnan(summary["mAP@50"])
    assert list(per_image.columns) == list(PER_IMAGE_COLUMNS)
    assert per_image["tp30"].dtype == "int64"
    # a None entry (e.g. a failed answer stored as null) is no prediction
    summary, per_image = score_localization({"a.png": [[0, 0, 10, 10]]}, {"a.png": None})
    assert summary["mAP@50"] == 0 and summary["FN50"] == 1
    assert per_image["n_pred"].iloc[0] == 0
