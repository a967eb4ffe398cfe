"""Localization's bootstrap replicates: COCO AP, hits and counts under case resamples.

See :mod:`novabench.report.bootstrap` for how resamples are drawn and summarized.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from novabench.report.bootstrap import divide
from novabench.tasks.localization.metrics import COCO_IOU_THRESHOLDS, DetectionMatches

# pycocotools' recall thresholds for the 101-point interpolated precision.
RECALL_THRESHOLDS = np.linspace(0.0, 1.00, int(np.round((1.00 - 0.0) / 0.01)) + 1, endpoint=True)
_AP_DECIMALS = 10  # the scorer rounds AP to remove pycocotools' np.spacing(1) residue
# Expanded (resample, detection) entries processed at once by the AP bootstrap.
_AP_CHUNK = 2_000_000


def coco_ap_replicates(matches: DetectionMatches, weights: np.ndarray) -> dict[str, np.ndarray]:
    """mAP@30, mAP@50 and mAP@[50:95] (x100) under each weight vector over images.

    Equal to running pycocotools on the resampled images, with copies of an image next to
    each other in image order: COCO ranks detections by descending score with ties in
    image order, so a run of equal-score detections of one image (a "unit") is repeated
    ``w`` times in a row. Only points right after a true positive can carry the
    interpolated precision (a false positive keeps recall and lowers precision), so only
    those are evaluated; the 101-point interpolated precision at recall r is the largest
    precision among points with recall >= r, as in ``COCOeval.accumulate``.
    """
    n_resamples = weights.shape[0]
    n_thresholds = len(COCO_IOU_THRESHOLDS)
    n_gold = weights.astype(np.int64) @ matches.n_gold
    precision = np.zeros((n_resamples, n_thresholds, len(RECALL_THRESHOLDS)))

    order = np.argsort(-matches.score, kind="mergesort")  # COCO's global ranking
    image, score, tp = matches.image[order], matches.score[order], matches.tp[order]
    n_det = len(image)
    if n_det:
        starts = np.flatnonzero(np.r_[True, (image[1:] != image[:-1]) | (score[1:] != score[:-1])])
        lengths = np.diff(np.r_[starts, n_det])
        copies = weights[:, image[starts]]  # (n_resamples, n_units)
        per_resample = copies @ lengths
        chunk = max(1, _AP_CHUNK // max(1, int(per_resample.max(initial=1))))
        for first in range(0, n_resamples, chunk):
            rows = slice(first, min(first + chunk, n_resamples))
            precision[rows] = _interpolated_precision(
                copies[rows], starts, lengths, tp, n_gold[rows]
            )

    def mean_ap(selected: np.ndarray) -> np.ndarray:
        flat = selected.reshape(n_resamples, -1)
        ap = np.round(flat.mean(axis=1) * 100, _AP_DECIMALS)
        return np.where(n_gold > 0, ap, np.nan)

    return {
        "mAP@30": mean_ap(precision[:, 0]),
        "mAP@50": mean_ap(precision[:, 1]),
        "mAP@[50:95]": mean_ap(precision[:, 1:]),
    }


def _interpolated_precision(
    copies: np.ndarray,
    starts: np.ndarray,
    lengths: np.ndarray,
    tp: np.ndarray,
    n_gold: np.ndarray,
) -> np.ndarray:
    """(resamples, IoU thresholds, recall thresholds) precision of a chunk of resamples."""
    n_resamples, n_units = copies.shape
    n_recall = len(RECALL_THRESHOLDS)
    # Expand: resample b lists unit u copies[b, u] times, each copy its detections in order.
    unit_of_copy = np.repeat(np.tile(np.arange(n_units), n_resamples), copies.ravel())
    resample_of_copy = np.repeat(np.arange(n_resamples), copies.sum(axis=1))
    copy_length = lengths[unit_of_copy]
    total = int(copy_length.sum())
    copy_offset = np.cumsum(copy_length) - copy_length
    within = np.arange(total) - np.repeat(copy_offset, copy_length)
    detection = np.repeat(starts[unit_of_copy], copy_length) + within
    resample = np.repeat(resample_of_copy, copy_length)
    per_resample = np.bincount(resample, minlength=n_resamples)
    segment_start = np.cumsum(per_resample) - per_resample
    rank = np.arange(total) - segment_start[resample]  # 0-based position within resample

    out = np.zeros((n_resamples, tp.shape[1], n_recall))
    # Thresholds with the same matches (common: a perfect control) are computed once.
    columns, first_of = np.unique(tp, axis=1, return_inverse=True)
    for t in range(columns.shape[1]):
        keep = np.flatnonzero(columns[detection, t])
        if not len(keep):
            continue
        b = resample[keep]
        # Cumulative TP count at a true positive = its rank among the resample's TPs, + 1.
        first_tp = np.searchsorted(keep, segment_start)
        tp_sum = (np.arange(1, len(keep) + 1) - first_tp[b]).astype(float)
        fp_sum = (rank[keep] + 1).astype(float) - tp_sum
        with np.errstate(divide="ignore", invalid="ignore"):
            recall = tp_sum / n_gold[b]
        precision = tp_sum / (fp_sum + tp_sum + np.spacing(1))  # as pycocotools
        reached = np.searchsorted(RECALL_THRESHOLDS, recall, side="right")  # thresholds <= r
        # Largest precision per (resample, thresholds reached); keys are sorted already.
        key = b * (n_recall + 1) + reached
        group = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
        best = np.zeros(n_resamples * (n_recall + 1))
        best[key[group]] = np.maximum.reduceat(precision, group)
        best = best.reshape(n_resamples, n_recall + 1)
        # precision at recall threshold i: max over points that reached more than i thresholds
        envelope = np.maximum.accumulate(best[:, ::-1], axis=1)[:, ::-1]
        out[:, first_of.ravel() == t] = envelope[:, None, 1:]
    return out


def localization_replicates(
    per_image: pd.DataFrame, matches: DetectionMatches | None, weights: np.ndarray
) -> dict[str, np.ndarray]:
    """Every localization table metric under each weight vector (rows of ``per_image`` are
    the weights' images, in the same order)."""
    w = weights.astype(float)
    with_gold = (per_image["n_gold"].to_numpy() > 0).astype(float)
    sums = {
        col: w @ per_image[col].to_numpy(dtype=float)
        for col in ("tp30", "fp30", "fn30", "tp50", "fp50", "fn50")
    }
    out: dict[str, np.ndarray] = {}
    if matches is not None:
        out.update(coco_ap_replicates(matches, weights))
    for tag in ("30", "50"):
        hits = per_image[f"hit{tag}"].astype("Float64").fillna(0.0).to_numpy(dtype=float)
        out[f"Hit@{tag}"] = divide(w @ (hits * with_gold), w @ with_gold, 100.0)
    out["mean_best_IoU"] = divide(
        w @ np.nan_to_num(per_image["best_iou"].to_numpy(dtype=float) * with_gold),
        w @ with_gold,
    )
    answered = (per_image["n_pred"] + per_image.get("n_over_cap", 0)).to_numpy(dtype=float)
    out["mean_boxes"] = divide(w @ answered, w.sum(axis=-1), 1.0)
    out["TP30"], out["FP30"], out["FN30"] = sums["tp30"], sums["fp30"], sums["fn30"]
    out["ACC50"] = divide(sums["tp50"], sums["tp50"] + sums["fp50"] + sums["fn50"], 100.0)
    out["FNR"] = divide(sums["fn30"], sums["tp30"] + sums["fn30"], 100.0)
    return out
