"""One task's table assembled: a wide row per entry (values, CIs, p-values, best per
column, failure shares and marks), and the caption's note."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from novabench.report import failures
from novabench.report.failures import Limits
from novabench.report.inputs import GROUP_MODEL, GROUPS
from novabench.report.tables.formatting import latex_escape
from novabench.tasks import Metric, get_task


def task_table(
    task: str,
    statistics: pd.DataFrame,
    estimates: Mapping[str, Mapping[str, float]],
    limits: Limits | None = None,
) -> pd.DataFrame:
    """One wide row per entry: group, model, and per metric the value, CI, p-value, best;
    then the share of images answered and per failure status (``<status>_pct``) and
    ``flag``, why the entry breaks ``limits`` ("" if it does not).

    ``estimates[model][metric]`` are the score files' values (the numbers shown, status
    counts included); ``statistics`` is the task's statistics table (CIs, p-values). Rows
    are ordered by group (models, controls, human reference), then as in ``statistics``.
    """
    names = list(dict.fromkeys(statistics["model"])) if len(statistics) else list(estimates)
    names += [n for n in estimates if n not in names]
    groups = statistics.drop_duplicates("model").set_index("model")["group"].to_dict()
    references = statistics["reference"].dropna() if "reference" in statistics else []
    reference = references.iloc[0] if len(references) else None
    by_key = statistics.set_index(["model", "metric"]) if len(statistics) else None
    status_columns = failures.failure_columns(estimates)
    limits, capped_by = limits or Limits(), get_task(task).capped_by
    rows = []
    for name in names:
        row: dict[str, Any] = {"group": groups.get(name, GROUP_MODEL), "model": name}
        for column in get_task(task).table_metrics:
            value = estimates.get(name, {}).get(column.key, math.nan)
            stat = (
                by_key.loc[(name, column.key)]
                if by_key is not None and (name, column.key) in by_key.index
                else None
            )
            row[column.key] = value
            row[f"{column.key}_ci_low"] = math.nan if stat is None else stat["ci_low"]
            row[f"{column.key}_ci_high"] = math.nan if stat is None else stat["ci_high"]
            row[f"{column.key}_p_value"] = math.nan if stat is None else stat["p_value"]
        row["reference"] = reference
        row.update(_failure_cells(estimates.get(name, {}), status_columns, limits, capped_by))
        rows.append(row)
    table = pd.DataFrame(rows)
    if table.empty:
        return pd.DataFrame(columns=["group", "model"])
    table["_order"] = table["group"].map({g: i for i, g in enumerate(GROUPS)})
    table = table.sort_values("_order", kind="stable").drop(columns="_order")
    for column in get_task(task).table_metrics:
        table[f"{column.key}_best"] = best_mask(table, column)
    return table.reset_index(drop=True)


def _failure_cells(
    metrics: Mapping[str, float], columns: Sequence[str], limits: Limits, capped_by: str | None
) -> dict[str, Any]:
    """``<status>_pct`` per failure column, ``n_<status>`` counts, ``n_excluded`` where the
    score file has it, and ``flag`` (``capped_by``: the task's cap, ``Task.capped_by``)."""
    values = failures.shares(metrics)
    cells: dict[str, Any] = {f"{s}_pct": values.get(s, math.nan) for s in columns}
    for status in columns[1:]:
        cells[f"n_{status}"] = metrics.get(f"n_{status}", math.nan)
    if "n_excluded" in metrics:
        cells["n_excluded"] = metrics["n_excluded"]
    reasons = (failures.flag_reason(values, limits), failures.cap_reason(metrics, capped_by))
    cells["flag"] = "; ".join(reason for reason in reasons if reason)
    return cells


def best_mask(table: pd.DataFrame, column: Metric) -> pd.Series:
    """True for the best model(s) of a column as shown (rounded); controls, raters and
    models marked for failures never count; no best when fewer than two models compete or
    all show the same value."""
    best = pd.Series(False, index=table.index)
    eligible = table["flag"].fillna("") == "" if "flag" in table else True
    candidates = table[(table["group"] == GROUP_MODEL) & table[column.key].notna() & eligible]
    if column.better is None or len(candidates) < 2:
        return best
    values = candidates[column.key].round(column.decimals)
    if values.nunique() == 1:  # all tied as shown: no best
        return best
    target = values.max() if column.better == "higher" else values.min()
    best[candidates.index[values == target]] = True
    return best


# Below this many cases a case bootstrap resamples too few distinct cases for its CIs to
# tell models apart (two cases give [0, 100] for most metrics): the caption says so.
FEW_CASES = 10


def table_note(task: str, context: Mapping[str, Any]) -> str:
    """The caption text after the title: sample size, CIs, what the metrics are."""
    n_cases = context.get("n_cases", "?")
    few = isinstance(n_cases, int) and n_cases < FEW_CASES
    parts = [
        f"{context.get('n_images', '?')} images from {n_cases} cases.",
        *_excluded_note(task, context.get("n_excluded", 0)),
        f"Values with {round(100 * context.get('confidence', 0.95))}\\% CIs from "
        f"{context.get('n_resamples', '?')} case-level bootstrap resamples.",
        *(
            [
                f"Warning: only {n_cases} cases, too few for the CIs to tell models apart "
                f"(use at least {FEW_CASES})."
            ]
            if few
            else []
        ),
        "Best model per column in bold (controls, human raters and marked models excluded).",
        get_task(task).caption,
        "Answered: share of images with a readable answer; then the share of images per "
        "failure status.",
    ]
    if context.get("judge"):
        parts.append(f"Judge: {latex_escape(context['judge'])}.")
    if context.get("task_note"):
        parts.append(context["task_note"])
    return " ".join(parts)


def _excluded_note(task: str, n_excluded: int) -> list[str]:
    """The images the task left out for lack of a reference (dataset.missing_reference)."""
    if not n_excluded:
        return []
    needed = " or ".join(c.replace("_", " ") for c in get_task(task).required_references)
    return [f"{n_excluded} image(s) without a reference {needed} excluded."]
