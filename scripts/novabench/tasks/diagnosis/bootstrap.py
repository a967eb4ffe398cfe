"""Diagnosis' bootstrap replicates: Top-k, Coverage, Label recall and Entropy under case
resamples.

See :mod:`novabench.report.bootstrap` for how resamples are drawn and summarized.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from novabench.report.bootstrap import divide, weighted_mean


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

    Top-1/Top-5, their upper bounds (undecided verdicts as matches) and the undecided
    shares at image level (every image counts; errors are wrong) and case level (the
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
    level = "case" if unit == "case" else "image"
    for k in ("1", "5"):
        correct = per_image[f"top{k}_correct"].astype("boolean").fillna(False)
        correct = correct.to_numpy(dtype=float)
        values = {f"Top-{k}": correct}
        # The judge's undecided verdicts (score files written before there were three
        # values have no verdict column, and no bounds).
        if f"top{k}_verdict" in per_image:
            undecided = (per_image[f"top{k}_verdict"] == "undecided").to_numpy(dtype=float)
            values[f"Top-{k}_upper"] = correct + undecided
            values[f"Undecided_top{k}"] = undecided
        for key, per in values.items():
            out[f"{key}_image"] = weighted_mean(w, per, 100.0)
            out[f"{key}_case"] = weighted_mean(per_case_weights, per, 100.0)
            out[key] = out[f"{key}_{level}"]
    predicted, n_predicted = _label_codes(predicted_labels)
    reference, n_reference = _label_codes(list(reference_labels))
    drawn = (weights > 0).astype(float)
    distinct_predicted = (_label_counts(drawn, predicted, n_predicted) > 0).sum(axis=1)
    distinct_reference = (_label_counts(drawn, reference, n_reference) > 0).sum(axis=1)
    out["Coverage"] = 100.0 * np.minimum(1.0, divide(distinct_predicted, distinct_reference))
    top1 = per_image["top1_correct"].astype("boolean").fillna(False).to_numpy(dtype=bool)
    hit = _label_counts(drawn, np.where(top1, reference, -1), n_reference) > 0
    out["Label_recall"] = divide(hit.sum(axis=1), distinct_reference, 100.0)
    label_weights = per_case_weights if unit == "case" else w
    out["Entropy"] = _entropy_bits(_label_counts(label_weights, predicted, n_predicted))
    out["Entropy_reference"] = _entropy_bits(_label_counts(label_weights, reference, n_reference))
    return out
