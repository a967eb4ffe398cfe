"""Case-level bootstrap: confidence intervals and paired tests for every table metric.

The machinery every task shares; a task's own replicates (``Task.replicates``) live in
its folder (``novabench.tasks.<name>.bootstrap``) and build on these.

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


def divide(numerator: np.ndarray, denominator: np.ndarray, scale: float = 1.0) -> np.ndarray:
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
    return divide(w @ np.where(defined, values, 0.0), w @ defined, scale)


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
