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
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from novabench.errors import NovaError
from novabench.io import atomic_path
from novabench.report import bootstrap
from novabench.report.inputs import Entry, load_dataset, load_entries, reference_model
from novabench.spreadsheet import write_csv
from novabench.tasks import Task, get_task

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


def check_point_estimates(
    task: Task, entry: Entry, point: Mapping[str, np.ndarray], where: str
) -> None:
    metrics = entry.metrics
    for metric, values in point.items():
        if metric not in metrics:
            continue
        ours, theirs = float(values[0]), metrics[metric]
        if math.isnan(ours) and math.isnan(theirs):
            continue
        spec = task.metric(metric)
        tolerance = (spec.tolerance if spec else 1e-6) * max(1.0, abs(theirs))
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
) -> pd.DataFrame:
    """Bootstrap every entry of a task on the same case resamples; one row per metric."""
    resamples = bootstrap.draw_cases(list(dataset["case_id"]), n_resamples, seed)
    weights = resamples.weights(list(dataset["case_id"]))
    ones = bootstrap.unit_weights(len(dataset))
    spec = get_task(task)
    replicates, estimates = {}, {}
    for entry in entries:
        point = spec.replicates(entry, dataset, ones)
        check_point_estimates(spec, entry, point, f"{task}/{entry.name}")
        replicates[entry.name] = spec.replicates(entry, dataset, weights)
        estimates[entry.name] = {
            metric: entry.metrics.get(metric, float(values[0])) for metric, values in point.items()
        }
    no_interval = {m.key for m in spec.metrics if not m.interval}
    table = bootstrap.summarize(replicates, estimates, reference, confidence, no_interval)
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
    verdicts: Mapping[str, Path],
    models: Mapping[str, Any],
    reporting: Mapping[str, Any],
    out: Path,
    breakdown_out: Path | None = None,
    cases_out: Path | None = None,
) -> pd.DataFrame:
    """Rule `statistics`: read one task's score files, bootstrap them, write the table
    and (``breakdown_out``) the breakdowns on the same resamples, (``cases_out``) per case."""
    started = time.perf_counter()
    dataset = load_dataset(dataset_path, task=task)
    entries = load_entries(task, score_paths, dataset, models, reporting.get("controls"), verdicts)
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
    )
    with atomic_path(out) as tmp:
        write_csv(table, tmp, index=False)  # full precision: the tables equal the score files
    if breakdown_out is not None:
        case_ids = list(dataset["case_id"])
        weights = bootstrap.draw_cases(case_ids, int(boot["resamples"]), int(boot["seed"]))
        part = task_breakdown(
            get_task(task), entries, dataset, weights.weights(case_ids), float(boot["confidence"])
        )
        with atomic_path(breakdown_out) as tmp:
            write_csv(part, tmp, index=False, float_format="%.6g")
    if cases_out is not None:
        from novabench.report.breakdowns import case_table

        with atomic_path(cases_out) as tmp:
            cases = case_table(get_task(task), entries, dataset)
            write_csv(cases, tmp, index=False, float_format="%.6g")
    table.attrs["seconds"] = time.perf_counter() - started
    return table


BREAKDOWN_COLUMNS = ["breakdown", "model", "group", "category", "value", "ci_low", "ci_high"]
BREAKDOWN_COLUMNS += ["n_images", "label"]


def breakdown_table(
    task: Task,
    categories: pd.Series,
    entries: Sequence[Entry],
    weights: np.ndarray,
    confidence: float,
) -> pd.DataFrame:
    """Per entry and category: mean of the task's per-image breakdown metric, its
    case-bootstrap CI, the number of images it is defined on."""
    rows = []
    for entry in entries:
        label, values = task.breakdown_values(entry.per_image)
        for category in pd.unique(categories):
            selected = np.where((categories == category).to_numpy(), values, np.nan)
            n = int((~np.isnan(selected)).sum())
            if not n:
                continue
            replicates = bootstrap.weighted_mean(weights, selected)
            low, high, _ = bootstrap.percentile_interval(replicates, confidence)
            rows.append(
                {
                    "model": entry.name,
                    "group": entry.group,
                    "category": category,
                    "value": float(np.nanmean(selected)),
                    "ci_low": low,
                    "ci_high": high,
                    "n_images": n,
                    "label": label,
                }
            )
    return pd.DataFrame(rows, columns=BREAKDOWN_COLUMNS[1:])


def task_breakdown(
    task: Task,
    entries: Sequence[Entry],
    dataset: pd.DataFrame,
    weights: np.ndarray,
    confidence: float,
) -> pd.DataFrame:
    """The breakdown metric along every axis of ``report.breakdowns.AXES``."""
    from novabench.report.breakdowns import AXES

    if "breakdown" not in task.figures:
        return pd.DataFrame(columns=BREAKDOWN_COLUMNS)
    parts = []
    for name, categories in AXES.items():
        part = breakdown_table(task, categories(dataset), entries, weights, confidence)
        parts.append(part.assign(breakdown=name))
    return pd.concat(parts).reindex(columns=BREAKDOWN_COLUMNS)
