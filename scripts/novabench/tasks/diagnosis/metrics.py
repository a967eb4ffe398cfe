"""Task 3 (diagnostic reasoning) scores: Top-1, Top-5, Coverage, Label recall, Entropy.

Definitions (NOVA paper, with this project's documented choices):

* **Top-1 / Top-5** (percent): share of units whose most likely diagnosis / any of the
  five ranked diagnoses matches the reference, as decided by the judge. Every image
  counts: parse failures, refusals, errors (rate limits, timeouts) and missing answers are
  wrong answers and are also reported separately (``parse_error_rate``, ``refusal_rate``,
  ``error_rate``, ``missing_rate``, percent of images, with the counts; see
  ``novabench.metrics.status``).
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
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol

import pandas as pd
from scipy.stats import entropy

from novabench.errors import ConfigError, NovaError
from novabench.metrics.status import RATE_STATUSES, STATUSES, status_summary

UNITS = ("image", "case")
_REQUIRED = ("filename", "case_id", "reference", "predictions", "status")
COLUMNS = (
    "filename",
    "case_id",
    "reference",
    "top1_prediction",
    "predictions",
    "top1_correct",
    "top5_correct",
    "status",
)


class DiagnosisJudge(Protocol):
    """What the scorer needs from a judge.

    A judge may also have ``match_ranked_many(pairs) -> list[(top1, top5)]`` for
    ``(ranked, reference)`` pairs; it is then given every image at once (an LLM judge
    sends its requests concurrently).
    """

    def match_ranked(self, ranked: Sequence[str], reference: str) -> tuple[bool, bool]: ...

    def identity(self) -> dict[str, Any]: ...


def _predictions(value: Any) -> list[str]:
    if value is None or (pd.api.types.is_scalar(value) and pd.isna(value)):
        return []
    if isinstance(value, str):  # the " | "-joined form this module writes
        value = value.split(" | ") if value else []
    return [str(item) for item in value if str(item).strip()]


def _records_frame(records: Iterable[Mapping[str, Any]] | pd.DataFrame) -> pd.DataFrame:
    frame = records.copy() if isinstance(records, pd.DataFrame) else pd.DataFrame(list(records))
    missing = [column for column in _REQUIRED if column not in frame.columns]
    if frame.empty:
        raise NovaError("no diagnosis records to score", "run Task 3 inference first")
    if missing:
        raise NovaError(
            f"diagnosis records lack the field(s) {', '.join(missing)}",
            f"give every record {', '.join(_REQUIRED)}",
        )
    bad = sorted(set(frame["status"]) - set(STATUSES), key=str)
    if bad:
        raise NovaError(
            f"unknown diagnosis record status {bad}", f"use one of {', '.join(STATUSES)}"
        )
    no_reference = frame["reference"].isna() | (frame["reference"].astype(str).str.strip() == "")
    if no_reference.any():
        first = frame.loc[no_reference, "filename"].iloc[0]
        raise NovaError(
            f"{int(no_reference.sum())} diagnosis record(s) have no reference diagnosis "
            f"(first: {first})",
            "check the final_diagnosis field of the dataset",
        )
    if frame["filename"].duplicated().any():
        raise NovaError(
            "diagnosis records repeat a filename", "give one record per image (filename)"
        )
    return frame


def _label_distribution(labels: Sequence[str], weights: Sequence[float]) -> Counter[str]:
    counts: Counter[str] = Counter()
    for label, weight in zip(labels, weights, strict=True):
        counts[label] += weight
    return counts


def _entropy_bits(counts: Counter[str]) -> float:
    return float(entropy(list(counts.values()), base=2)) if counts else 0.0


def _default_label(text: str) -> str:
    return " ".join(text.casefold().split())


def _ranked_lists(entries: list[dict[str, Any]]) -> list[list[str]]:
    """The top five of each image's ranking; nothing for a failed prediction."""
    return [
        _predictions(record["predictions"])[:5] if record["status"] == "ok" else []
        for record in entries
    ]


def _verdicts(
    judge: DiagnosisJudge, entries: list[dict[str, Any]], ranked_lists: list[list[str]]
) -> list[tuple[bool, bool]]:
    """The judge's (top1, top5) per image; (0, 0) for an image without a ranking."""
    judged = [
        (ranked, str(record["reference"]))
        for record, ranked in zip(entries, ranked_lists, strict=True)
        if ranked
    ]
    match_ranked_many = getattr(judge, "match_ranked_many", None)
    if match_ranked_many is not None:
        verdicts = iter(list(match_ranked_many(judged)))
    else:
        verdicts = iter([judge.match_ranked(ranked, reference) for ranked, reference in judged])
    return [next(verdicts) if ranked else (0, 0) for ranked in ranked_lists]


def _per_image_table(
    entries: list[dict[str, Any]],
    ranked_lists: list[list[str]],
    verdicts: list[tuple[bool, bool]],
) -> pd.DataFrame:
    rows = []
    for record, ranked, (top1, top5) in zip(entries, ranked_lists, verdicts, strict=True):
        rows.append(
            {
                "filename": record["filename"],
                "case_id": record["case_id"],
                "reference": record["reference"],
                "top1_prediction": ranked[0] if ranked else "",
                "predictions": " | ".join(ranked),
                "top1_correct": bool(top1),
                "top5_correct": bool(top5),
                "status": record["status"],
            }
        )
    return pd.DataFrame(rows, columns=list(COLUMNS))


def _accuracy(table: pd.DataFrame, unit: str) -> tuple[dict[str, float], int]:
    """Top-1/Top-5 at image and case level (the headline pair at ``unit`` level), and the
    number of cases."""
    per_case = table.groupby("case_id", sort=True)[["top1_correct", "top5_correct"]].mean()
    image_top1 = 100.0 * table["top1_correct"].mean()
    image_top5 = 100.0 * table["top5_correct"].mean()
    case_top1 = 100.0 * per_case["top1_correct"].mean()
    case_top5 = 100.0 * per_case["top5_correct"].mean()
    return {
        "Top-1": float(case_top1 if unit == "case" else image_top1),
        "Top-5": float(case_top5 if unit == "case" else image_top5),
        "Top-1_image": float(image_top1),
        "Top-5_image": float(image_top5),
        "Top-1_case": float(case_top1),
        "Top-5_case": float(case_top5),
    }, len(per_case)


def _label_counts(
    table: pd.DataFrame, judge: DiagnosisJudge, unit: str
) -> tuple[Counter[str], Counter[str]]:
    """Weighted distributions of the predicted top-1 and of the reference labels."""
    label: Callable[[str], str] = getattr(judge, "canonical_label", _default_label)
    case_size = table["case_id"].map(table["case_id"].value_counts())
    weights = (1.0 / case_size) if unit == "case" else pd.Series(1.0, index=table.index)
    predicted = table["top1_prediction"] != ""
    predicted_counts = _label_distribution(
        [label(text) for text in table.loc[predicted, "top1_prediction"]],
        list(weights[predicted]),
    )
    reference_counts = _label_distribution(
        [label(str(text)) for text in table["reference"]], list(weights)
    )
    return predicted_counts, reference_counts


def label_recall_table(table: pd.DataFrame, judge: DiagnosisJudge) -> pd.DataFrame:
    """Per distinct reference label: its images, how many were top-1 correct, and
    ``recalled`` (at least one was). Labels as Coverage counts them."""
    label: Callable[[str], str] = getattr(judge, "canonical_label", _default_label)
    per_image = pd.DataFrame(
        {
            "label": [label(str(text)) for text in table["reference"]],
            "top1_correct": table["top1_correct"].astype(bool).to_numpy(),
        }
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
    """Score ranked diagnoses against references; return (summary, per-image table).

    ``records``: one per image with ``filename``, ``case_id``, ``reference`` (the final
    diagnosis), ``predictions`` (ranked list, most likely first; empty when none) and
    ``status`` (one of ``novabench.metrics.status.STATUSES``).
    """
    if unit not in UNITS:
        raise ConfigError(f"unknown diagnosis scoring unit {unit!r}", f"use one of {UNITS}")
    frame = _records_frame(records)

    entries = frame.to_dict("records")
    ranked_lists = _ranked_lists(entries)
    table = _per_image_table(entries, ranked_lists, _verdicts(judge, entries, ranked_lists))
    accuracy, n_cases = _accuracy(table, unit)
    predicted_counts, reference_counts = _label_counts(table, judge, unit)
    coverage = 100.0 * min(1.0, len(predicted_counts) / len(reference_counts))
    recall = label_recall_table(table, judge)

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
    summary.update(status_summary(table["status"], STATUSES, RATE_STATUSES))
    summary.update(
        {
            "n_distinct_predicted_labels": len(predicted_counts),
            "n_distinct_reference_labels": len(reference_counts),
            "n_recalled_reference_labels": int(recall["recalled"].sum()),
            "label_normalization": (
                "judge.canonical_label" if hasattr(judge, "canonical_label") else "casefold"
            ),
            "judge": judge.identity(),
        }
    )
    return summary, table
