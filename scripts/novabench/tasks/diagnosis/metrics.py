"""Task 3 (diagnostic reasoning) scores: Top-1, Top-5, Coverage, Label recall, Entropy.

Definitions (NOVA paper, with this project's documented choices):

* **Top-1 / Top-5** (percent): share of units whose most likely diagnosis / any of the
  five ranked diagnoses matches the reference, as decided by the judge. Every image
  counts: parse failures, refusals, errors (rate limits, timeouts) and missing answers are
  wrong answers and are also reported separately (``parse_error_rate``, ``refusal_rate``,
  ``error_rate``, ``missing_rate``, percent of images, with the counts; see
  ``novabench.metrics.status``).
* **Undecided**: a judge answers match, no match or undecided (novabench.judges.base
  ``RankedVerdict``); ``Top-1``/``Top-5`` count an undecided verdict as no match, so they
  stay comparable with earlier runs, and ``Top-1_upper``/``Top-5_upper`` count it as a
  match: the judge's own uncertainty is the gap between the two (``Undecided_top1``,
  ``Undecided_top5``: percent of images, with the counts). An image without an answer is
  a wrong answer, never undecided. Judge failures (a request that failed, an unreadable
  judge answer) are undecided and counted (``n_judge_failed``); ``decided_by`` counts the
  images each judge decided (a cascade names its stages).
* **Case level**: ``Top-1_case`` is the mean over cases of the per-case image accuracy,
  so a case with 17 images weighs as much as a case with one. ``unit="case"`` makes the
  case-level numbers the headline ``Top-1``/``Top-5``; both levels are always reported.
* **Coverage** = min(1, distinct predicted top-1 labels / distinct reference labels) x100,
  as the paper defines it. It does not look at correctness: a model that is always wrong
  but names many different diagnoses reaches 100.
* **Label recall** = share (x100) of the distinct reference labels that the model got
  right (top-1 correct, as the judge decided) on at least one image. It cannot be raised
  by naming wrong diagnoses. ``label_recall_table`` gives it per reference label.
* **Entropy**: Shannon entropy in bits of the predicted top-1 label distribution, and
  ``Entropy_reference`` of the reference labels. Labels are counted after the judge's
  ``canonical_label`` (synonyms and spelling variants collapse: "GBM" and "glioblastoma
  multiforme" are one label); a judge without it gets case- and space-folded strings.
  Only images with a prediction enter the predicted distribution. With ``unit="case"``
  each image weighs 1 / (images in its case), so every case weighs 1.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

import pandas as pd
from scipy.stats import entropy

from novabench.errors import ConfigError
from novabench.metrics.status import RATE_STATUSES, STATUSES, status_summary
from novabench.tasks.diagnosis.verdicts import (
    casefold_label,
    judge_diagnoses,
    label_normalization,
    ranked_lists,
    records_frame,
)

UNITS = ("image", "case")
COLUMNS = (
    "filename",
    "case_id",
    "reference",
    "top1_prediction",
    "predictions",
    "top1_correct",
    "top5_correct",
    "top1_verdict",
    "top5_verdict",
    "decided_by",
    "judge_failed",
    "status",
    # The labels Coverage, Label recall and Entropy counted (novabench.tasks.diagnosis.verdicts).
    "top1_label",
    "reference_label",
)
# The verdict columns: match / no_match / undecided; empty for an image without an answer.
VERDICT_COLUMNS = {"1": "top1_verdict", "5": "top5_verdict"}


class DiagnosisJudge(Protocol):
    """What the scorer needs from a judge (read by novabench.judges.base.judge_ranked).

    ``judge_ranked(ranked, reference) -> RankedVerdict``, or ``judge_ranked_many(pairs)``
    for every ``(ranked, reference)`` pair at once (an LLM judge sends its requests
    concurrently); a two-valued judge's ``match_ranked`` / ``match_ranked_many`` is read
    too, every verdict of it decided.
    """

    def identity(self) -> dict[str, Any]: ...


def _label_distribution(labels: Sequence[str], weights: Sequence[float]) -> Counter[str]:
    counts: Counter[str] = Counter()
    for label, weight in zip(labels, weights, strict=True):
        counts[label] += weight
    return counts


def _entropy_bits(counts: Counter[str]) -> float:
    return float(entropy(list(counts.values()), base=2)) if counts else 0.0


def _per_image_table(
    entries: list[dict[str, Any]],
    ranked: list[list[str]],
    verdicts: Sequence[Mapping[str, Any] | None],
) -> pd.DataFrame:
    rows = []
    for record, top, verdict in zip(entries, ranked, verdicts, strict=True):
        verdict = verdict or {}
        rows.append(
            {
                "filename": record["filename"],
                "case_id": record["case_id"],
                "reference": record["reference"],
                "top1_prediction": top[0] if top else "",
                "predictions": " | ".join(top),
                # The scored values: an undecided verdict counts as no match.
                "top1_correct": verdict.get("top1") == "match",
                "top5_correct": verdict.get("top5") == "match",
                "top1_verdict": verdict.get("top1") or "",
                "top5_verdict": verdict.get("top5") or "",
                "decided_by": verdict.get("decided_by") or "",
                "judge_failed": bool(verdict.get("judge_failed")),
                "status": record["status"],
                "top1_label": verdict.get("top1_label") if top else None,
                "reference_label": verdict.get("reference_label")
                or casefold_label(str(record["reference"])),
            }
        )
    return pd.DataFrame(rows, columns=list(COLUMNS))


def _levels(values: pd.DataFrame, cases: pd.Series, unit: str, key: str) -> dict[str, float]:
    """``key`` (percent) at image and case level and as the headline at ``unit`` level,
    for each column of ``values`` (named by its k: "1", "5")."""
    out: dict[str, float] = {}
    per_case = values.groupby(cases, sort=True).mean()
    for k in values.columns:
        image, case = 100.0 * values[k].mean(), 100.0 * per_case[k].mean()
        name = key.format(k=k)
        out[name] = float(case if unit == "case" else image)
        out[f"{name}_image"], out[f"{name}_case"] = float(image), float(case)
    return out


def _accuracy(table: pd.DataFrame, unit: str) -> tuple[dict[str, float], int]:
    """Top-1/Top-5 (undecided as no match), their upper bounds (undecided as match) and
    the undecided shares, at image and case level (the headline at ``unit`` level), and
    the number of cases."""
    cases = table["case_id"]
    correct = pd.DataFrame({k: table[f"top{k}_correct"].astype(float) for k in ("1", "5")})
    undecided = pd.DataFrame(
        {k: (table[c] == "undecided").astype(float) for k, c in VERDICT_COLUMNS.items()}
    )
    out = _levels(correct, cases, unit, "Top-{k}")
    # Ordered so that a summary reads Top-1, Top-5, then the bounds.
    out.update(_levels(correct + undecided, cases, unit, "Top-{k}_upper"))
    out.update(_levels(undecided, cases, unit, "Undecided_top{k}"))
    return out, int(cases.nunique())


def _judge_counts(table: pd.DataFrame) -> dict[str, Any]:
    """Undecided verdicts and judge failures (counts of images), and per judge the images
    it decided (both verdicts decided; a cascade's stages apart)."""
    judged = table["decided_by"] != ""
    decided = judged & (table["top1_verdict"] != "undecided")
    decided &= table["top5_verdict"] != "undecided"
    return {
        "n_judged": int(judged.sum()),
        "n_undecided_top1": int((table["top1_verdict"] == "undecided").sum()),
        "n_undecided_top5": int((table["top5_verdict"] == "undecided").sum()),
        "n_judge_failed": int(table["judge_failed"].sum()),
        "decided_by": {
            str(name): int(n) for name, n in table.loc[decided, "decided_by"].value_counts().items()
        },
    }


def _label_counts(table: pd.DataFrame, unit: str) -> tuple[Counter[str], Counter[str]]:
    """Weighted distributions of the predicted top-1 and of the reference labels."""
    case_size = table["case_id"].map(table["case_id"].value_counts())
    weights = (1.0 / case_size) if unit == "case" else pd.Series(1.0, index=table.index)
    predicted = table["top1_prediction"] != ""
    predicted_counts = _label_distribution(
        list(table.loc[predicted, "top1_label"]), list(weights[predicted])
    )
    reference_counts = _label_distribution(list(table["reference_label"]), list(weights))
    return predicted_counts, reference_counts


def label_recall_table(table: pd.DataFrame, judge: Any = None) -> pd.DataFrame:
    """Per distinct reference label: its images, how many were top-1 correct, and
    ``recalled`` (at least one was). Labels as Coverage counts them: the table's
    ``reference_label``, or ``judge``'s labels of a table without that column."""
    if "reference_label" in table.columns:
        labels = list(table["reference_label"])
    else:
        label = getattr(judge, "canonical_label", casefold_label)
        labels = [label(str(text)) for text in table["reference"]]
    per_image = pd.DataFrame(
        {"label": labels, "top1_correct": table["top1_correct"].astype(bool).to_numpy()}
    )
    per_label = per_image.groupby("label", sort=True)["top1_correct"].agg(["size", "sum"])
    per_label = per_label.rename(columns={"size": "n_images", "sum": "n_top1_correct"})
    per_label["recalled"] = per_label["n_top1_correct"] > 0
    return per_label.reset_index()


def score_diagnosis(
    records: Iterable[Mapping[str, Any]] | pd.DataFrame,
    judge: DiagnosisJudge,
    unit: str = "image",
) -> tuple[dict[str, Any], pd.DataFrame]:
    """Judge and score ranked diagnoses in one call (a notebook, the tests): the reading
    stage's :func:`judge_diagnoses`, then :func:`aggregate_diagnosis`.

    ``records``: one per image with ``filename``, ``case_id``, ``reference`` (the final
    diagnosis), ``predictions`` (ranked list, most likely first; empty when none) and
    ``status`` (one of ``novabench.metrics.status.STATUSES``).
    """
    if unit not in UNITS:
        raise ConfigError(f"unknown diagnosis scoring unit {unit!r}", f"use one of {UNITS}")
    verdicts = judge_diagnoses(records, judge)
    return aggregate_diagnosis(
        records, verdicts, unit, judge.identity(), label_normalization(judge)
    )


def aggregate_diagnosis(
    records: Iterable[Mapping[str, Any]] | pd.DataFrame,
    verdicts: Sequence[Mapping[str, Any] | None],
    unit: str,
    judge: Mapping[str, Any] | None,
    normalization: str,
) -> tuple[dict[str, Any], pd.DataFrame]:
    """(summary, per-image table) of ``records`` from their stored verdicts (in the same
    order; :mod:`.verdicts`); ``judge`` is the identity of the judge that gave them and
    ``normalization`` how its labels were made."""
    if unit not in UNITS:
        raise ConfigError(f"unknown diagnosis scoring unit {unit!r}", f"use one of {UNITS}")
    entries = records_frame(records).to_dict("records")
    table = _per_image_table(entries, ranked_lists(entries), verdicts)
    accuracy, n_cases = _accuracy(table, unit)
    predicted_counts, reference_counts = _label_counts(table, unit)
    coverage = 100.0 * min(1.0, len(predicted_counts) / len(reference_counts))
    recall = label_recall_table(table)

    summary: dict[str, Any] = {
        "unit": unit,
        **accuracy,
        "Coverage": coverage,
        "Label_recall": 100.0 * float(recall["recalled"].mean()),
        "Entropy": _entropy_bits(predicted_counts),
        "Entropy_reference": _entropy_bits(reference_counts),
        "n_images": len(table),
        "n_cases": n_cases,
    }
    summary.update(_judge_counts(table))
    summary.update(status_summary(table["status"], STATUSES, RATE_STATUSES))
    summary.update(
        {
            "n_distinct_predicted_labels": len(predicted_counts),
            "n_distinct_reference_labels": len(reference_counts),
            "n_recalled_reference_labels": int(recall["recalled"].sum()),
            "label_normalization": normalization,
            "judge": judge,
        }
    )
    return summary, table
