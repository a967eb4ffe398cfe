"""The statistics of one task: bootstrap CIs and paired tests for every scored entry.

Writes a long table, one row per (model, metric): the score file's value, the CI, the
paired test against the reference model. The point estimate is always the score file's
(so the tables equal the score files); the bootstrap recomputes it with unit weights
first and stops if it disagrees, which catches per-image or prediction files that no
longer belong to the score file.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from novabench.errors import NovaError
from novabench.report import bootstrap
from novabench.report.inputs import (
    Entry,
    bleu_inputs,
    gold_boxes,
    load_dataset,
    load_entries,
    predicted_boxes,
    reference_model,
)

STATISTICS_COLUMNS = (
    "task",
    "model",
    "group",
    "metric",
    "estimate",
    "ci_low",
    "ci_high",
    "confidence",
    "n_resamples",
    "n_defined",
    "reference",
    "difference",
    "p_value",
    "seed",
    "n_images",
    "n_cases",
)
# Largest |bootstrap point estimate - score file| accepted: AP and counts are recomputed
# exactly; per-image METEOR is read from a CSV written with 6 significant digits.
_TOLERANCE = {"METEOR": 1e-3}
_DEFAULT_TOLERANCE = 1e-6


def diagnosis_labeler(judge: Mapping[str, Any] | None) -> Callable[[str], str]:
    """The label function the diagnosis scorer counted Coverage and Entropy with: the
    judge's ``canonical_label`` where it has one, else case- and space-folded text.

    The diagnosis matcher's labels do not use its embedding model, so it is built
    without it (no model load for counting labels).
    """
    if judge and judge.get("kind") == "diagnosis-matcher":
        from novabench.judges.diagnosis_matcher import DiagnosisMatcher

        settings = {**(judge.get("settings") or {}), "embedding_fallback": False}
        return DiagnosisMatcher(**settings).canonical_label
    return lambda text: " ".join(text.casefold().split())


def diagnosis_labels(
    per_image: pd.DataFrame, labeler: Callable[[str], str]
) -> tuple[list[str | None], list[str]]:
    """Canonical top-1 labels (None without a prediction) and reference labels."""
    predicted = [
        labeler(text) if isinstance(text, str) and text else None
        for text in per_image["top1_prediction"]
    ]
    reference = [labeler(str(text)) for text in per_image["reference"]]
    return predicted, reference


def entry_replicates(
    task: str,
    entry: Entry,
    dataset: pd.DataFrame,
    weights: np.ndarray,
    labeler: Callable[[str], str] | None = None,
) -> dict[str, np.ndarray]:
    """Every table metric of one entry under each weight vector."""
    if task == "localization":
        from novabench.metrics.localization import coco_detection_matches

        matches = entry.extra.get("matches")
        if matches is None:
            matches = entry.extra["matches"] = coco_detection_matches(
                gold_boxes(dataset), predicted_boxes(dataset, entry.name, entry.predictions)
            )
        return bootstrap.localization_replicates(entry.per_image, matches, weights)
    if task == "captioning":
        stats = entry.extra.get("bleu")
        if stats is None:
            stats = entry.extra["bleu"] = bleu_inputs(dataset, entry)
        return bootstrap.captioning_replicates(entry.per_image, stats, weights)
    if task == "diagnosis":
        labels = entry.extra.get("labels")
        if labels is None:
            labels = entry.extra["labels"] = diagnosis_labels(entry.per_image, labeler)
        unit = entry.scores["metrics"].get("unit", "image")
        return bootstrap.diagnosis_replicates(entry.per_image, weights, *labels, unit=unit)
    raise NovaError(f"unknown task {task!r}", "use localization, captioning or diagnosis")


def check_point_estimates(entry: Entry, point: Mapping[str, np.ndarray], where: str) -> None:
    metrics = entry.metrics
    for metric, values in point.items():
        if metric not in metrics:
            continue
        ours, theirs = float(values[0]), metrics[metric]
        if math.isnan(ours) and math.isnan(theirs):
            continue
        tolerance = _TOLERANCE.get(metric, _DEFAULT_TOLERANCE) * max(1.0, abs(theirs))
        if not abs(ours - theirs) <= tolerance:
            raise NovaError(
                f"{where}: {metric} recomputed from the per-image data is {ours:.6g} but the "
                f"score file says {theirs:.6g}",
                "re-run `score` for this model (its inputs changed after it was scored)",
            )


def task_statistics(
    task: str,
    entries: Sequence[Entry],
    dataset: pd.DataFrame,
    *,
    n_resamples: int,
    seed: int,
    confidence: float,
    reference: str | None,
    judge: Mapping[str, Any] | None = None,
) -> pd.DataFrame:
    """Bootstrap every entry of a task on the same case resamples; one row per metric."""
    resamples = bootstrap.draw_cases(list(dataset["case_id"]), n_resamples, seed)
    weights = resamples.weights(list(dataset["case_id"]))
    ones = bootstrap.unit_weights(len(dataset))
    labeler = diagnosis_labeler(judge) if task == "diagnosis" else None
    replicates, estimates = {}, {}
    for entry in entries:
        point = entry_replicates(task, entry, dataset, ones, labeler)
        check_point_estimates(entry, point, f"{task}/{entry.name}")
        replicates[entry.name] = entry_replicates(task, entry, dataset, weights, labeler)
        estimates[entry.name] = {
            metric: entry.metrics.get(metric, float(values[0])) for metric, values in point.items()
        }
    table = bootstrap.summarize(replicates, estimates, reference, confidence)
    groups = {entry.name: entry.group for entry in entries}
    table.insert(0, "task", task)
    table.insert(2, "group", table["model"].map(groups))
    table["seed"] = seed
    table["n_images"] = len(dataset)
    table["n_cases"] = len(resamples.cases)
    return table.reindex(columns=list(STATISTICS_COLUMNS))


def write_task_statistics(
    *,
    task: str,
    dataset_path: Path,
    score_paths: Sequence[Path],
    predictions: Mapping[str, Path],
    models: Mapping[str, Any],
    reporting: Mapping[str, Any],
    out: Path,
    judge: Mapping[str, Any] | None = None,
) -> pd.DataFrame:
    """Rule `statistics`: read one task's score files, bootstrap them, write the table."""
    started = time.perf_counter()
    dataset = load_dataset(dataset_path)
    entries = load_entries(
        task, score_paths, dataset, models, reporting.get("controls"), predictions
    )
    names = [entry.name for entry in entries]
    groups = {entry.name: entry.group for entry in entries}
    boot = reporting["bootstrap"]
    table = task_statistics(
        task,
        entries,
        dataset,
        n_resamples=int(boot["resamples"]),
        seed=int(boot["seed"]),
        confidence=float(boot["confidence"]),
        reference=reference_model(task, names, groups, reporting.get("reference_model")),
        judge=judge,
    )
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    table.to_csv(out, index=False)  # full precision: the tables equal the score files
    table.attrs["seconds"] = time.perf_counter() - started
    return table
