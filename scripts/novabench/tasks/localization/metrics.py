"""Task 1 (anomaly localization) scorer: COCO AP, per-image hit rate and greedy matching.

Plain functions over plain data, usable from a notebook::

    summary, per_image = score_localization(gold, predictions, statuses)

Conventions, decided once for every model and rater:

- Boxes are ``x, y, width, height`` in pixels of the original image; IoU uses continuous
  coordinates (no "+1" pixel), the same as pycocotools. The scorer does not clip: boxes are
  clipped to the image when answers are parsed (:mod:`.boxes`), and gold boxes are taken
  as they are.
- Predictions without a score get 1.0. Ties are broken by order, so order is fixed: within
  an image, the model's output order; across images (COCO ranks all detections together),
  the order of filenames, because pycocotools sorts image ids and ids are given in sorted
  filename order.
- An image without gold boxes is "normal": it is in the COCO image set and its predictions
  are false positives; it is left out of the Hit and mean-best-IoU denominators.
- An image missing from ``predictions`` has no prediction. A filename in ``predictions`` or
  ``statuses`` that is not in ``gold`` raises ``NovaError``.
- With no gold box at all, AP, Hit, mean best IoU and FNR are undefined and returned as NaN.

COCO AP comes from ``COCOeval.eval["precision"]`` (mean over the entries that are not -1),
not from ``summarize()``, which compares IoU thresholds as floats exactly and labels custom
thresholds wrongly. One evaluation covers IoU 0.3 and 0.50:0.05:0.95, area "all",
maxDets 100 (only COCO AP truncates to 100 boxes per image; hit and greedy counts use all).

Timing (2-core machine, ~2 gold and ~3 predicted boxes per image): about 0.25 s for
906 images and 2 s for 9,060 images.
"""

from __future__ import annotations

import contextlib
import io
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from pycocotools.coco import COCO
from pycocotools.cocoeval import COCOeval

from novabench.errors import NovaError
from novabench.metrics.status import status_summary
from novabench.records import STATUSES

MISSING_STATUS = "missing"  # an image with no answer (no status recorded, or none on file)
# A refusal is scored as an error: an image without boxes (novabench.metrics.status).
# What reading found of each image (a verdict record's status), as scores count them.
VERDICT_STATUSES = STATUSES
HIT_THRESHOLDS = (0.3, 0.5)
# Same construction as pycocotools' default, so 0.50:0.95 are the usual float values.
COCO_50_95 = np.linspace(0.5, 0.95, int(np.round((0.95 - 0.5) / 0.05)) + 1, endpoint=True)
_COCO_IOU_THRESHOLDS = np.concatenate([[0.3], COCO_50_95])
_CATEGORY_ID = 1
_MAX_DETS = 100
_AP_DECIMALS = 10
PER_IMAGE_COLUMNS = (
    "filename",
    "n_gold",
    "n_pred",
    "n_over_cap",
    "best_iou",
    "hit30",
    "hit50",
    "tp30",
    "fp30",
    "fn30",
    "tp50",
    "fp50",
    "fn50",
    "status",
)


def iou_matrix(pred_xywh: Any, gold_xywh: Any) -> np.ndarray:
    """IoU of every (prediction, gold) pair, shape ``(n_pred, n_gold)``.

    Continuous coordinates, no "+1": the same formula as pycocotools' ``bbIou``, except that
    areas are taken from the corners like the intersection, so a box compared with itself
    gives exactly 1 (``w * h`` and ``(x + w) - x`` can differ in the last bit).
    """
    pred = np.asarray(pred_xywh, dtype=float).reshape(-1, 4)
    gold = np.asarray(gold_xywh, dtype=float).reshape(-1, 4)
    px1, py1 = pred[:, 0:1], pred[:, 1:2]
    px2, py2 = px1 + pred[:, 2:3], py1 + pred[:, 3:4]
    gx1, gy1 = gold[:, 0], gold[:, 1]
    gx2, gy2 = gx1 + gold[:, 2], gy1 + gold[:, 3]
    inter_w = np.clip(np.minimum(px2, gx2) - np.maximum(px1, gx1), 0.0, None)
    inter_h = np.clip(np.minimum(py2, gy2) - np.maximum(py1, gy1), 0.0, None)
    inter = inter_w * inter_h
    union = (px2 - px1) * (py2 - py1) + (gx2 - gx1) * (gy2 - gy1) - inter
    with np.errstate(divide="ignore", invalid="ignore"):
        iou = np.where(union > 0, inter / union, 0.0)
    return np.clip(iou, 0.0, 1.0)


def greedy_match(ious: np.ndarray, threshold: float) -> tuple[int, int, int]:
    """Count (TP, FP, FN) of a one-to-one greedy matching at IoU >= ``threshold``.

    Rows of ``ious`` are predictions already in ranking order (descending score, ties in the
    model's order); each takes the still-unmatched gold box it overlaps most. Ties between
    gold boxes go to the later one, as in pycocotools' ``evaluateImg``, so the counts equal
    COCO's matches at the same threshold.
    """
    n_pred, n_gold = ious.shape
    if n_gold == 0:
        return 0, n_pred, 0
    taken = np.zeros(n_gold, dtype=bool)
    tp = 0
    for row in ious:
        candidates = np.where(taken, -1.0, row)
        # last index of the maximum: reverse, argmax, map back
        best = n_gold - 1 - int(np.argmax(candidates[::-1]))
        if candidates[best] >= threshold:
            taken[best] = True
            tp += 1
    return tp, n_pred - tp, n_gold - tp


def _box_array(boxes: Any, what: str) -> np.ndarray:
    try:
        array = np.asarray(boxes, dtype=float).reshape(-1, 4)
        if len(boxes) != len(array):
            raise ValueError("each box needs four numbers")
    except (TypeError, ValueError) as exc:
        raise NovaError(
            f"{what} is not a list of [x, y, width, height] boxes ({exc})",
            fix="give boxes as four numbers in pixels",
        ) from exc
    if not np.isfinite(array).all():
        raise NovaError(f"{what} has a non-finite coordinate", fix="drop or correct that box")
    return array


def _prediction_arrays(filename: str, preds: Sequence[Mapping]) -> tuple[np.ndarray, np.ndarray]:
    """Boxes and scores of one image's predictions, in the given (model's) order."""
    what = f"prediction for {filename}"
    try:
        rows = [[p["x"], p["y"], p["width"], p["height"]] for p in preds]
        scores = [1.0 if p.get("score") is None else p["score"] for p in preds]
    except (KeyError, TypeError, AttributeError) as exc:
        raise NovaError(
            f"{what} is not a box dict ({exc!r})",
            fix="give predictions as dicts with x, y, width, height and optional score",
        ) from exc
    boxes = _box_array(rows, what)
    if (boxes[:, 2:] < 0).any():
        raise NovaError(f"{what} has a negative width or height", fix="parse answers first")
    score_array = np.asarray(scores, dtype=float)
    if not np.isfinite(score_array).all():
        raise NovaError(f"{what} has a non-finite score", fix="give finite scores or none")
    return boxes, score_array


def _check_filenames(gold: Mapping, other: Mapping, what: str) -> None:
    unknown = sorted(set(other) - set(gold))
    if unknown:
        shown = ", ".join(unknown[:3]) + (" ..." if len(unknown) > 3 else "")
        raise NovaError(
            f"{what} for {len(unknown)} image(s) not in the gold set: {shown}",
            fix="score against the dataset (and subset) the predictions were made on",
        )


def _coco_annotation(ann_id: int, image_id: int, box: np.ndarray) -> dict[str, Any]:
    return {
        "id": ann_id,
        "image_id": image_id,
        "category_id": _CATEGORY_ID,
        "bbox": box.tolist(),
        "area": float(box[2] * box[3]),
        "iscrowd": 0,
    }


def _coco_annotations(
    filenames: list[str],
    gold_boxes: dict[str, np.ndarray],
    pred_boxes: dict[str, np.ndarray],
    pred_scores: dict[str, np.ndarray],
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Gold and detection annotations, image ids in filename order."""
    gt_anns: list[dict[str, Any]] = []
    dt_anns: list[dict[str, Any]] = []
    # Ids start at 1: pycocotools stores matches as annotation ids, and 0 means unmatched.
    for image_id, filename in enumerate(filenames, start=1):
        for box in gold_boxes[filename]:
            gt_anns.append(_coco_annotation(len(gt_anns) + 1, image_id, box))
        for box, score in zip(pred_boxes[filename], pred_scores[filename], strict=True):
            dt_anns.append(
                {**_coco_annotation(len(dt_anns) + 1, image_id, box), "score": float(score)}
            )
    return gt_anns, dt_anns


def _coco_precision(n_images: int, gt_anns: list[dict], dt_anns: list[dict]) -> np.ndarray:
    """COCOeval's precision, shape (IoU threshold, recall), for one category and area."""
    images = [{"id": i} for i in range(1, n_images + 1)]
    categories = [{"id": _CATEGORY_ID, "name": "anomaly"}]
    # The detections' COCO object is built directly instead of with loadRes, which fails on
    # an empty list (IndexError) and writes into the caller's dicts; the fields set here are
    # the ones loadRes sets for boxes (area, id, iscrowd). pycocotools prints progress.
    with contextlib.redirect_stdout(io.StringIO()):
        coco_gt = COCO()
        coco_gt.dataset = {"images": images, "categories": categories, "annotations": gt_anns}
        coco_gt.createIndex()
        coco_dt = COCO()
        coco_dt.dataset = {"images": images, "categories": categories, "annotations": dt_anns}
        coco_dt.createIndex()
        evaluator = COCOeval(coco_gt, coco_dt, iouType="bbox")
        evaluator.params.imgIds = [image["id"] for image in images]
        evaluator.params.catIds = [_CATEGORY_ID]
        evaluator.params.iouThrs = _COCO_IOU_THRESHOLDS
        evaluator.params.areaRng = [[0.0, 1e5**2]]
        evaluator.params.areaRngLbl = ["all"]
        evaluator.params.maxDets = [_MAX_DETS]
        evaluator.evaluate()
        evaluator.accumulate()
    return evaluator.eval["precision"][:, :, 0, 0, 0]


def _mean_ap(rows: np.ndarray) -> float:
    valid = rows[rows > -1]
    # Rounded to remove the np.spacing(1) pycocotools adds to precision denominators,
    # so that perfect predictions give exactly 100 (a 1e-14 difference otherwise).
    return round(float(valid.mean() * 100), _AP_DECIMALS) if valid.size else math.nan


def _coco_ap(
    filenames: list[str],
    gold_boxes: dict[str, np.ndarray],
    pred_boxes: dict[str, np.ndarray],
    pred_scores: dict[str, np.ndarray],
) -> dict[str, float]:
    """mAP@30, mAP@50 and mAP@[50:95] (x100) with pycocotools, its traps avoided."""
    gt_anns, dt_anns = _coco_annotations(filenames, gold_boxes, pred_boxes, pred_scores)
    if not gt_anns:
        return {"mAP@30": math.nan, "mAP@50": math.nan, "mAP@[50:95]": math.nan}
    precision = _coco_precision(len(filenames), gt_anns, dt_anns)
    return {
        "mAP@30": _mean_ap(precision[0]),
        "mAP@50": _mean_ap(precision[1]),
        "mAP@[50:95]": _mean_ap(precision[1:]),
    }


def _check_statuses(gold: Mapping, statuses: Mapping[str, str] | None) -> None:
    if statuses is None:
        return
    _check_filenames(gold, statuses, "statuses")
    bad = sorted({s for s in statuses.values() if s not in VERDICT_STATUSES}, key=str)
    if bad:
        raise NovaError(
            f"unknown prediction status(es) {bad}",
            fix=f"use one of {', '.join(VERDICT_STATUSES)}",
        )


def _gold_array(gold: Mapping, filename: str) -> np.ndarray:
    gold_array = _box_array(gold[filename], f"gold box of {filename}")
    if (gold_array[:, 2:] <= 0).any():
        raise NovaError(
            f"gold box of {filename} has no area",
            fix="correct or drop that box in the dataset",
        )
    return gold_array


def _image_row(
    filename: str, gold_array: np.ndarray, boxes: np.ndarray, scores: np.ndarray, status: str
) -> dict[str, Any]:
    """One image's per-image row: best IoU, hits and greedy TP/FP/FN counts."""
    if len(boxes) and status in ("no_finding", "parse_error", "refusal", "error"):
        raise NovaError(
            f"{filename} has predicted boxes but status {status!r}",
            fix="keep the status that parsing the answer gave",
        )
    # Ranking order: descending score, ties in the model's order (stable sort, as COCO).
    order = np.argsort(-scores, kind="mergesort")
    ious = iou_matrix(boxes[order], gold_array)
    row: dict[str, Any] = {
        "filename": filename,
        "n_gold": len(gold_array),
        "n_pred": len(boxes),
        "status": status,
    }
    if len(gold_array):
        best = float(ious.max()) if ious.size else 0.0
        row.update(best_iou=best, hit30=best >= 0.3, hit50=best >= 0.5)
    else:
        row.update(best_iou=math.nan, hit30=pd.NA, hit50=pd.NA)
    for tag, threshold in zip(("30", "50"), HIT_THRESHOLDS, strict=True):
        tp, fp, fn = greedy_match(ious, threshold)
        row.update({f"tp{tag}": tp, f"fp{tag}": fp, f"fn{tag}": fn})
    return row


def _per_image_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    per_image = pd.DataFrame(rows, columns=list(PER_IMAGE_COLUMNS))
    # Fixed dtypes, also for an empty table; hit is <NA> on normal images.
    dtypes = {col: "int64" for col in PER_IMAGE_COLUMNS if col.startswith(("n_", "tp", "fp", "fn"))}
    dtypes |= {"filename": "str", "status": "str", "best_iou": "float64"}
    return per_image.astype(dtypes | {"hit30": "boolean", "hit50": "boolean"})


def _percent(part: float, whole: float) -> float:
    return 100.0 * part / whole if whole else math.nan


def _box_summary(per_image: pd.DataFrame) -> dict[str, float]:
    """Hit rates, mean best IoU, greedy-match totals and box counts of the per-image table."""
    with_gold = per_image[per_image["n_gold"] > 0]
    n_images = len(per_image)
    summary: dict[str, float] = {}
    summary["Hit@30"] = _percent(with_gold["hit30"].sum(), len(with_gold))
    summary["Hit@50"] = _percent(with_gold["hit50"].sum(), len(with_gold))
    summary["mean_best_IoU"] = float(with_gold["best_iou"].mean()) if len(with_gold) else math.nan
    counts = {col: int(per_image[col].sum()) for col in ("tp30", "fp30", "fn30")}
    counts |= {col: int(per_image[col].sum()) for col in ("tp50", "fp50", "fn50")}
    summary.update({col.upper(): value for col, value in counts.items()})
    summary["ACC50"] = _percent(counts["tp50"], counts["tp50"] + counts["fp50"] + counts["fn50"])
    summary["FNR"] = _percent(counts["fn30"], counts["tp30"] + counts["fn30"])
    summary["n_images"] = n_images
    summary["n_images_with_gold"] = len(with_gold)
    summary["n_normal_images"] = n_images - len(with_gold)
    summary["n_gold_boxes"] = int(per_image["n_gold"].sum())
    summary["n_predicted_boxes"] = int(per_image["n_pred"].sum())
    # Volume: boxes answered per image (those beyond the cap included) and the answers
    # the cap cut, which the tables mark.
    answered = per_image["n_pred"] + per_image["n_over_cap"]
    summary["mean_boxes"] = float(answered.mean()) if n_images else math.nan
    summary["n_capped"] = int((per_image["n_over_cap"] > 0).sum())
    summary["n_boxes_over_cap"] = int(per_image["n_over_cap"].sum())
    return summary


def score_localization(
    gold: Mapping[str, Sequence[Sequence[float]]],
    predictions: Mapping[str, Sequence[Mapping]],
    statuses: Mapping[str, str] | None = None,
    over_cap: Mapping[str, int] | None = None,
) -> tuple[dict[str, float], pd.DataFrame]:
    """Score one model's boxes against gold boxes; returns ``(summary, per_image)``.
    ``over_cap``: filename -> boxes the reading dropped beyond the cap (counted only).

    ``gold``: filename -> gold ``[x, y, width, height]`` boxes (``[]`` for a normal image).
    ``predictions``: filename -> box dicts with ``x, y, width, height`` and optional
    ``score``, in the model's output order. ``statuses``: filename -> one of
    ``VERDICT_STATUSES``; when None the status rates are NaN. Summary rates and AP
    values are percentages; status counts and rates use the keys of
    ``novabench.metrics.status``.
    """
    _check_filenames(gold, predictions, "predictions")
    _check_statuses(gold, statuses)

    filenames = sorted(gold)
    gold_boxes: dict[str, np.ndarray] = {}
    pred_boxes: dict[str, np.ndarray] = {}
    pred_scores: dict[str, np.ndarray] = {}
    rows = []
    for filename in filenames:
        gold_boxes[filename] = _gold_array(gold, filename)
        boxes, scores = _prediction_arrays(filename, predictions.get(filename) or ())
        pred_boxes[filename], pred_scores[filename] = boxes, scores
        status = MISSING_STATUS if statuses is None else statuses.get(filename, MISSING_STATUS)
        rows.append(_image_row(filename, gold_boxes[filename], boxes, scores, status))
        rows[-1]["n_over_cap"] = int((over_cap or {}).get(filename) or 0)

    per_image = _per_image_frame(rows)
    summary: dict[str, float] = dict(_coco_ap(filenames, gold_boxes, pred_boxes, pred_scores))
    summary.update(_box_summary(per_image))
    summary.update(
        status_summary(
            per_image["status"],
            VERDICT_STATUSES,
            ("parse_error", "no_finding", "refusal", "error", MISSING_STATUS),
            known=statuses is not None,
        )
    )
    return summary, per_image


def score_rater(
    gold: Mapping[str, Sequence[Sequence[float]]],
    rater_boxes: Mapping[str, Sequence[Sequence[float]]],
) -> tuple[dict[str, float], pd.DataFrame]:
    """Score one human rater's boxes against gold, as a model with score 1.0 in their order.

    An image of ``gold`` the rater drew no box on is the rater's "no finding" (status
    ``no_finding``); to score only the images a rater saw, pass ``gold`` restricted to them.
    """
    predictions = {
        filename: [
            {"x": b[0], "y": b[1], "width": b[2], "height": b[3]}
            for b in _box_array(boxes, f"rater box of {filename}")
        ]
        for filename, boxes in rater_boxes.items()
    }
    statuses = {name: "ok" if predictions.get(name) else "no_finding" for name in gold}
    return score_localization(gold, predictions, statuses)


# The IoU thresholds of one COCO evaluation here: 0.3, then 0.50:0.05:0.95.
COCO_IOU_THRESHOLDS = _COCO_IOU_THRESHOLDS


@dataclass(frozen=True)
class DetectionMatches:
    """COCO's per-detection matches of one model, in COCO's order.

    One entry per detection COCO evaluates (per image: descending score, ties in the
    model's order, the first ``maxDets`` kept), images in sorted-filename order.
    """

    filenames: list[str]  # sorted; ``image`` indexes into it
    image: np.ndarray  # (n_detections,) int
    score: np.ndarray  # (n_detections,) float
    tp: np.ndarray  # (n_detections, len(COCO_IOU_THRESHOLDS)) bool: matched a gold box
    n_gold: np.ndarray  # (n_images,) int: gold boxes per image


def coco_detection_matches(
    gold: Mapping[str, Sequence[Sequence[float]]],
    predictions: Mapping[str, Sequence[Mapping]],
) -> DetectionMatches:
    """Per-detection COCO matches, for recomputing AP on reweighted images (the bootstrap).

    The matching is pycocotools' ``evaluateImg`` for one category with nothing ignored (its
    IoU function, its greedy rule: each detection in score order takes the free gold box
    of highest IoU >= threshold, ties to the later box), so AP computed from these matches
    equals :func:`score_localization`'s.
    """
    from pycocotools import mask as mask_utils

    _check_filenames(gold, predictions, "predictions")
    filenames = sorted(gold)
    n_gold = np.zeros(len(filenames), dtype=np.int64)
    n_thresholds = len(COCO_IOU_THRESHOLDS)
    images, scores, flags = [], [], []
    for index, filename in enumerate(filenames):
        gold_array = _box_array(gold[filename], f"gold box of {filename}")
        boxes, box_scores = _prediction_arrays(filename, predictions.get(filename) or ())
        n_gold[index] = len(gold_array)
        order = np.argsort(-box_scores, kind="mergesort")[:_MAX_DETS]
        boxes, box_scores = boxes[order], box_scores[order]
        tp = np.zeros((len(boxes), n_thresholds), dtype=bool)
        if len(boxes) and len(gold_array):
            ious = np.asarray(
                mask_utils.iou(boxes.tolist(), gold_array.tolist(), [0] * len(gold_array))
            )
            for t_index, threshold in enumerate(COCO_IOU_THRESHOLDS):
                taken = np.zeros(len(gold_array), dtype=bool)
                for d_index in range(len(boxes)):
                    best, best_iou = -1, min(threshold, 1 - 1e-10)
                    for g_index in range(len(gold_array)):
                        if taken[g_index] or ious[d_index, g_index] < best_iou:
                            continue
                        best, best_iou = g_index, ious[d_index, g_index]
                    if best >= 0:
                        taken[best] = True
                        tp[d_index, t_index] = True
        images.append(np.full(len(boxes), index, dtype=np.int64))
        scores.append(box_scores)
        flags.append(tp)
    return DetectionMatches(
        filenames=filenames,
        image=np.concatenate([np.zeros(0, dtype=np.int64), *images]),
        score=np.concatenate([np.zeros(0), *scores]),
        tp=np.concatenate([np.zeros((0, n_thresholds), dtype=bool), *flags]),
        n_gold=n_gold,
    )
