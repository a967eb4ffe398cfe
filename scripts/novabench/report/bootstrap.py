"""Case-level bootstrap: confidence intervals and paired tests for every table metric.

Images of one case are correlated (same patient, same lesion), so a resample draws
**cases** with replacement and keeps all images of each drawn case. A resample is then a
weight vector over images (how many times each image's case was drawn), and every metric
is recomputed from per-image (or per-detection) quantities that do not change under
resampling: per-image hits and counts, per-detection COCO matches, per-image n-gram
counts. All resamples are computed at once with numpy.

Reproducibility: the resample indices depend only on the seed, the number of resamples
and the sorted case ids (:func:`draw_cases`), so every model of a task sees the same
resamples (which makes the paired test paired) and a plain loop that calls the real
scorers on the resampled images (the reference in the tests) sees them too.

- CI: percentile interval of the resampled values (resamples where the metric is
  undefined, e.g. no gold box drawn, are left out and counted).
- Paired test of a model against a reference model, on the difference ``d`` of the metric
  in each resample: two-sided ``p = min(1, 2 (1 + min(#{d <= 0}, #{d >= 0})) / (n + 1))``,
  the smallest level at which the percentile interval of ``d`` excludes 0, with the usual
  +1 correction so that a finite bootstrap never reports p = 0.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from novabench.metrics.localization import COCO_IOU_THRESHOLDS, DetectionMatches

# pycocotools' recall thresholds for the 101-point interpolated precision.
RECALL_THRESHOLDS = np.linspace(0.0, 1.00, int(np.round((1.00 - 0.0) / 0.01)) + 1, endpoint=True)
_AP_DECIMALS = 10  # the scorer rounds AP to remove pycocotools' np.spacing(1) residue
# Expanded (resample, detection) entries processed at once by the AP bootstrap.
_AP_CHUNK = 2_000_000


@dataclass(frozen=True)
class Resamples:
    """Which cases each resample draws: ``indices[b]`` indexes into ``cases``."""

    cases: list[str]
    indices: np.ndarray  # (n_resamples, n_cases) int

    @property
    def n_resamples(self) -> int:
        return int(self.indices.shape[0])

    def weights(self, case_ids: Sequence[str]) -> np.ndarray:
        """Weights of images whose cases are ``case_ids``: (n_resamples, n_images) int."""
        n_cases = len(self.cases)
        position = pd.Index(self.cases).get_indexer(list(case_ids))
        if (position < 0).any():
            missing = sorted({c for c, p in zip(case_ids, position, strict=True) if p < 0})
            raise ValueError(f"cases not in the resampled set: {missing[:3]}")
        offsets = self.indices + n_cases * np.arange(self.n_resamples)[:, None]
        counts = np.bincount(offsets.ravel(), minlength=self.n_resamples * n_cases)
        return counts.reshape(self.n_resamples, n_cases)[:, position]


def draw_cases(case_ids: Sequence[str], n_resamples: int, seed: int) -> Resamples:
    """Draw ``n_resamples`` resamples of the distinct cases, with replacement."""
    cases = sorted(set(case_ids))
    rng = np.random.default_rng(seed)
    indices = rng.integers(0, len(cases), size=(n_resamples, len(cases)))
    return Resamples(cases=cases, indices=indices)


def unit_weights(n_images: int) -> np.ndarray:
    """The original sample as a single "resample" (point estimates)."""
    return np.ones((1, n_images), dtype=np.int64)


# --- generic weighted statistics ---------------------------------------------------------


def _divide(numerator: np.ndarray, denominator: np.ndarray, scale: float = 1.0) -> np.ndarray:
    """``scale * numerator / denominator``, NaN where the denominator is 0 (undefined)."""
    numerator = np.asarray(numerator, dtype=float)
    denominator = np.asarray(denominator, dtype=float)
    out = np.full(np.broadcast(numerator, denominator).shape, np.nan)
    np.divide(scale * numerator, denominator, out=out, where=denominator != 0)
    return out


def weighted_mean(weights: np.ndarray, values: Sequence[float], scale: float = 1.0) -> np.ndarray:
    """Mean of the defined (non-NaN) values under each weight vector; NaN if none drawn."""
    values = np.asarray(values, dtype=float)
    defined = ~np.isnan(values)
    w = weights.astype(float)
    return _divide(w @ np.where(defined, values, 0.0), w @ defined, scale)


# --- localization ------------------------------------------------------------------------


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
        out[f"Hit@{tag}"] = _divide(w @ (hits * with_gold), w @ with_gold, 100.0)
    out["mean_best_IoU"] = _divide(
        w @ np.nan_to_num(per_image["best_iou"].to_numpy(dtype=float) * with_gold),
        w @ with_gold,
    )
    out["TP30"], out["FP30"], out["FN30"] = sums["tp30"], sums["fp30"], sums["fn30"]
    out["ACC50"] = _divide(sums["tp50"], sums["tp50"] + sums["fp50"] + sums["fn50"], 100.0)
    out["FNR"] = _divide(sums["fn30"], sums["tp30"] + sums["fn30"], 100.0)
    return out


# --- captioning --------------------------------------------------------------------------

BLEU_STAT_COLUMNS = (
    *(f"match{n}" for n in range(1, 5)),
    *(f"total{n}" for n in range(1, 5)),
    "hyp_len",
    "ref_len",
)


def bleu_statistics(references: Sequence[str], hypotheses: Sequence[str]) -> np.ndarray:
    """Per-image sufficient statistics of corpus BLEU-4, shape (n_images, 10).

    Clipped n-gram matches and hypothesis n-gram counts (at least 1, as nltk's
    ``modified_precision``) for n = 1..4, hypothesis and reference lengths, on the
    scorer's tokens. Corpus BLEU only sums these over images.
    """
    from collections import Counter

    from novabench.metrics.captioning import tokenize

    stats = np.zeros((len(references), len(BLEU_STAT_COLUMNS)), dtype=np.int64)
    for row, (reference, hypothesis) in enumerate(zip(references, hypotheses, strict=True)):
        ref, hyp = tokenize(reference), tokenize(hypothesis)
        for n in range(1, 5):
            hyp_counts = Counter(tuple(hyp[i : i + n]) for i in range(len(hyp) - n + 1))
            ref_counts = Counter(tuple(ref[i : i + n]) for i in range(len(ref) - n + 1))
            stats[row, n - 1] = sum(min(c, ref_counts[g]) for g, c in hyp_counts.items())
            stats[row, 3 + n] = max(1, sum(hyp_counts.values()))
        stats[row, 8], stats[row, 9] = len(hyp), len(ref)
    return stats


def bleu_from_statistics(totals: np.ndarray) -> float:
    """Corpus BLEU-4 x100 from summed statistics, exactly as nltk's ``corpus_bleu`` with
    uniform weights and smoothing method 3 (plain floats and ``math`` on purpose: the same
    operations as nltk give the same numbers, not just close ones)."""
    matches = [int(v) for v in totals[0:4]]
    counts = [int(v) for v in totals[4:8]]
    hyp_len, ref_len = int(totals[8]), int(totals[9])
    if matches[0] == 0:
        return 0.0
    precisions, k = [], 1
    for numerator, denominator in zip(matches, counts, strict=True):
        if numerator == 0:  # NIST geometric smoothing: 1 / (2^k * denominator)
            precisions.append(1 / (2**k * denominator))
            k += 1
        else:
            precisions.append(numerator / denominator)
    if hyp_len > ref_len:
        brevity = 1.0
    elif hyp_len == 0:
        brevity = 0.0
    else:
        brevity = math.exp(1 - ref_len / hyp_len)
    log_sum = math.fsum(0.25 * math.log(p) for p in precisions if p > 0)
    return 100.0 * (brevity * math.exp(log_sum))


def _f1_from_keywords(reference: pd.Series, predicted: pd.Series) -> np.ndarray:
    """Per-image set F1 x100 from the per-image table's "; "-joined keyword columns."""

    def to_set(value) -> frozenset[str]:
        return frozenset(value.split("; ")) if isinstance(value, str) and value else frozenset()

    out = np.full(len(reference), np.nan)
    for i, (ref, pred) in enumerate(zip(reference, predicted, strict=True)):
        r, p = to_set(ref), to_set(pred)
        if r or p:
            out[i] = 100.0 * 2 * len(r & p) / (len(r) + len(p))
    return out


def captioning_replicates(
    per_image: pd.DataFrame, bleu_stats: np.ndarray | None, weights: np.ndarray
) -> dict[str, np.ndarray]:
    """Every captioning table metric under each weight vector.

    Images left out of scoring (status ``error`` with ``on_error: exclude``: no per-image
    values) get no weight. Keyword F1 is recomputed from the keyword columns (exact), the
    per-image METEOR and BERT F1 are read as written.
    """
    scored = per_image["meteor"].notna().to_numpy()
    w = weights * scored
    out: dict[str, np.ndarray] = {}
    if bleu_stats is not None:
        summed = w.astype(float) @ bleu_stats.astype(float)  # integer-valued: exact
        out["BLEU-4"] = np.array([bleu_from_statistics(row) for row in summed])
    out["METEOR"] = weighted_mean(w, per_image["meteor"].to_numpy(dtype=float))
    if "bert_f1" in per_image:  # per-image tables written before BERT F1 have none
        out["BERT_F1"] = weighted_mean(w, per_image["bert_f1"].to_numpy(dtype=float))
    for name, column in (("Clinical_F1", "clinical"), ("Modality_F1", "modality")):
        f1 = _f1_from_keywords(per_image[f"ref_{column}"], per_image[f"pred_{column}"])
        out[name] = weighted_mean(w, np.where(scored, f1, np.nan))
    ref = per_image["ref_abnormal"].astype("boolean").fillna(False).to_numpy(dtype=float)
    pred = per_image["pred_abnormal"].astype("boolean").fillna(False).to_numpy(dtype=float)
    wf = w.astype(float)
    tp, fp, fn = wf @ (ref * pred), wf @ ((1 - ref) * pred), wf @ (ref * (1 - pred))
    out["Binary_F1"] = _divide(2 * tp, 2 * tp + fp + fn, 100.0)
    return out


# --- diagnosis ---------------------------------------------------------------------------


def _label_codes(labels: Sequence[str | None]) -> tuple[np.ndarray, int]:
    """Integer codes of labels (None: no label -> -1) and the number of distinct labels."""
    present = [label for label in labels if label is not None]
    index = {label: i for i, label in enumerate(sorted(set(present)))}
    return np.array([index.get(label, -1) if label is not None else -1 for label in labels]), len(
        index
    )


def _label_counts(weights: np.ndarray, codes: np.ndarray, n_labels: int) -> np.ndarray:
    """(resamples, labels) summed weights per label; images without a label ignored."""
    from scipy.sparse import csr_matrix

    has = codes >= 0
    onehot = csr_matrix(
        (np.ones(int(has.sum())), (np.flatnonzero(has), codes[has])),
        shape=(len(codes), max(n_labels, 1)),
    )
    return np.asarray((onehot.T @ weights.T.astype(float)).T)


def _entropy_bits(counts: np.ndarray) -> np.ndarray:
    """Shannon entropy (bits) of each row's distribution; 0 for an empty row."""
    totals = counts.sum(axis=1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        p = np.where(totals > 0, counts / totals, 0.0)
        terms = np.where(p > 0, -p * np.log2(np.where(p > 0, p, 1.0)), 0.0)
    return terms.sum(axis=1)


def diagnosis_replicates(
    per_image: pd.DataFrame,
    weights: np.ndarray,
    predicted_labels: Sequence[str | None],
    reference_labels: Sequence[str],
    unit: str = "image",
) -> dict[str, np.ndarray]:
    """Every diagnosis table metric under each weight vector.

    Top-1/Top-5 at image level (every image counts; errors are wrong) and case level (the
    mean over drawn cases of the per-case accuracy); the headline ``Top-1``/``Top-5`` is
    the level ``unit`` names, as in the scorer. Coverage counts distinct labels among the
    drawn images; Label recall, the drawn reference labels with a drawn top-1 hit; Entropy
    weighs each image by its weight (with ``unit="case"`` divided by its case's size, as
    in the scorer). ``predicted_labels`` are the canonical top-1 labels
    (None: no prediction), ``reference_labels`` those of the references.
    """
    w = weights.astype(float)
    case_size = per_image.groupby("case_id")["case_id"].transform("size").to_numpy(dtype=float)
    per_case_weights = w / case_size
    out: dict[str, np.ndarray] = {}
    for k in ("1", "5"):
        correct = per_image[f"top{k}_correct"].astype("boolean").fillna(False)
        correct = correct.to_numpy(dtype=float)
        out[f"Top-{k}_image"] = weighted_mean(w, correct, 100.0)
        out[f"Top-{k}_case"] = weighted_mean(per_case_weights, correct, 100.0)
        out[f"Top-{k}"] = out[f"Top-{k}_{'case' if unit == 'case' else 'image'}"]
    predicted, n_predicted = _label_codes(predicted_labels)
    reference, n_reference = _label_codes(list(reference_labels))
    drawn = (weights > 0).astype(float)
    distinct_predicted = (_label_counts(drawn, predicted, n_predicted) > 0).sum(axis=1)
    distinct_reference = (_label_counts(drawn, reference, n_reference) > 0).sum(axis=1)
    out["Coverage"] = 100.0 * np.minimum(1.0, _divide(distinct_predicted, distinct_reference))
    top1 = per_image["top1_correct"].astype("boolean").fillna(False).to_numpy(dtype=bool)
    hit = _label_counts(drawn, np.where(top1, reference, -1), n_reference) > 0
    out["Label_recall"] = _divide(hit.sum(axis=1), distinct_reference, 100.0)
    label_weights = per_case_weights if unit == "case" else w
    out["Entropy"] = _entropy_bits(_label_counts(label_weights, predicted, n_predicted))
    out["Entropy_reference"] = _entropy_bits(_label_counts(label_weights, reference, n_reference))
    return out


# --- summaries ---------------------------------------------------------------------------


def percentile_interval(replicates: np.ndarray, confidence: float) -> tuple[float, float, int]:
    """(low, high, n defined) percentile interval of the defined replicates."""
    values = np.asarray(replicates, dtype=float)
    values = values[~np.isnan(values)]
    if not len(values):
        return math.nan, math.nan, 0
    alpha = (1 - confidence) / 2
    low, high = np.quantile(values, [alpha, 1 - alpha])
    return float(low), float(high), len(values)


def paired_p_value(model: np.ndarray, reference: np.ndarray) -> float:
    """Two-sided paired bootstrap p-value of the model-minus-reference difference."""
    difference = np.asarray(model, dtype=float) - np.asarray(reference, dtype=float)
    difference = difference[~np.isnan(difference)]
    if not len(difference):
        return math.nan
    tail = min(int((difference <= 0).sum()), int((difference >= 0).sum()))
    return min(1.0, 2 * (1 + tail) / (len(difference) + 1))


def summarize(
    replicates: Mapping[str, Mapping[str, np.ndarray]],
    estimates: Mapping[str, Mapping[str, float]],
    reference: str | None,
    confidence: float,
    no_interval: Iterable[str] = (),
) -> pd.DataFrame:
    """One row per (model, metric): estimate, CI, and the paired test against ``reference``.

    ``replicates[model][metric]`` are the resampled values, ``estimates[model][metric]``
    the point estimates (those of the score files). Metrics in ``no_interval`` (a task's
    metrics declared without an interval) get neither a CI nor a test.
    """
    no_interval = frozenset(no_interval)
    rows = []
    for model, metrics in replicates.items():
        for metric, values in metrics.items():
            low, high, n_defined = percentile_interval(values, confidence)
            if metric in no_interval:
                low = high = math.nan
            row = {
                "model": model,
                "metric": metric,
                "estimate": estimates.get(model, {}).get(metric, math.nan),
                "ci_low": low,
                "ci_high": high,
                "confidence": confidence,
                "n_resamples": len(values),
                "n_defined": n_defined,
                "reference": reference,
                "difference": math.nan,
                "p_value": math.nan,
            }
            ref_values = replicates.get(reference, {}).get(metric) if reference else None
            if (
                reference
                and model != reference
                and ref_values is not None
                and metric not in no_interval
            ):
                ref_estimate = estimates.get(reference, {}).get(metric, math.nan)
                row["difference"] = row["estimate"] - ref_estimate
                row["p_value"] = paired_p_value(values, ref_values)
            rows.append(row)
    return pd.DataFrame(rows)
