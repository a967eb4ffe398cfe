"""The diagnosis table's audited columns: a judge's rate corrected by a person's labels
(novabench.audit)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from novabench.report.tables.formatting import latex_escape
from novabench.tasks import Metric


def audit_results(
    task: str, scores: Sequence[Path], sheets: Mapping[str, Path]
) -> dict[str, dict[str, Any]]:
    """Per model of ``task`` that names a filled audit sheet, its audit (novabench.audit)."""
    from novabench.audit import AUDIT_TASK, audit_estimate
    from novabench.report.inputs import per_image_path

    if task != AUDIT_TASK:
        return {}
    found = {}
    for path in scores:
        name = Path(path).name.removesuffix(".json")
        if name in sheets:
            found[name] = audit_estimate(per_image_path(Path(path)), Path(sheets[name]))
    return found


def with_audits(
    table: pd.DataFrame, columns: Sequence[Metric], audits: Mapping[str, Mapping[str, Any]]
) -> tuple[pd.DataFrame, list[Metric]]:
    """The table with an audited column after each audited metric (its CI the audit's; no
    p-value, never bold: only some models are audited), and the columns to show."""
    from novabench.audit import METRICS

    table, shown = table.copy(), []
    for column in columns:
        shown.append(column)
        if column.key not in METRICS:
            continue
        key = f"{column.key}_audited"
        shown.append(Metric(key, f"{column.label} (audited)", None, column.decimals))
        for suffix, field in (("", "audited"), ("_ci_low", "ci_low"), ("_ci_high", "ci_high")):
            values = {name: a["metrics"][column.key][field] for name, a in audits.items()}
            table[key + suffix] = table["model"].map(values).astype(float)
        table[f"{key}_p_value"] = math.nan
        table[f"{key}_best"] = False
    return table, shown


def audit_note(audits: Mapping[str, Mapping[str, Any]]) -> str:
    """The caption's sentence on the audited columns."""
    labelled = "; ".join(
        f"{latex_escape(name)}: {a['n_labelled']} of {a['n_ok']} answered images labelled, "
        f"Top-1 judge agreement {a['metrics']['Top-1']['agreement']['k']}/{a['n_labelled']}"
        for name, a in audits.items()
    )
    return (
        "Audited: the judge's image-level rate corrected by a person's labels on a seeded, "
        "verdict-stratified sample of that model's answers (prediction-powered inference, "
        "Angelopoulos et al. 2023; see novabench audit), with the 95\\% CI of that sample "
        f"({labelled})."
    )
