"""Captioning's bootstrap replicates: corpus BLEU-4 from per-image n-gram counts, keyword
F1, METEOR, BERT F1 and Binary F1 under case resamples.

See :mod:`novabench.report.bootstrap` for how resamples are drawn and summarized.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from novabench.report.bootstrap import divide, weighted_mean

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

    from novabench.tasks.captioning.metrics import tokenize

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
    out["Binary_F1"] = divide(2 * tp, 2 * tp + fp + fn, 100.0)
    return out


def captions(frame: pd.DataFrame, verdicts: Path) -> list[str]:
    """Each image's hypothesis as the scorer counts it, from the reading stage's verdict
    file: the caption if ``ok``, else "" (a parse error, refusal or failed request)."""
    from novabench.records import read_verdicts
    from novabench.tasks import Answers

    answers = Answers(read_verdicts(verdicts))
    out = []
    for filename in frame["filename"]:
        caption, status = answers.get(filename, "caption")
        out.append(caption if status == "ok" and caption else "")
    return out
