"""The summary across tasks: per task its headline metrics and the share of images
answered, in one Markdown table."""

from __future__ import annotations

import math
from collections.abc import Mapping

import pandas as pd

from novabench.report import failures
from novabench.report.failures import MARK, Limits
from novabench.report.inputs import GROUP_TITLES, GROUPS
from novabench.report.markdown import md_row, md_text
from novabench.report.tables.formatting import cell_parts, failure_columns, flagged, format_number
from novabench.tasks import Metric, get_task, task_names

AGREEMENT_NOTES = {
    False: (
        "Judge agreement (Cohen's kappa) is not computed: each task's predictions are judged "
        "by one judge (`tasks.<task>.judge`). List further judges under "
        "`reporting.agreement_judges` to compare them."
    ),
    True: "Judge agreement (Cohen's kappa between judges on the same predictions): "
    "`judge_agreement.md`.",
}


def _summary_cell(table: pd.DataFrame, name: str, column: Metric | None) -> str:
    """A headline value with its CI, or (``column`` None) the answered share and failures."""
    match = table[table["model"] == name]
    if match.empty:
        return "–"
    row = match.iloc[0]
    if column is None:
        statuses = failure_columns(table)
        values = {s: row.get(f"{s}_pct", math.nan) for s in statuses}
        return failures.failure_summary(values, statuses) + (f" {MARK}" if flagged(row) else "")
    value, ci, best = cell_parts(row, column)
    text = f"**{value}**" if best else value
    text = f"{text} {ci}" if ci else text
    # A score the judge's undecided verdicts leave open shows its upper bound beside it.
    upper = row.get(f"{column.key}_upper", math.nan)
    if not pd.isna(upper) and not pd.isna(row[column.key]):
        text += f" (≤ {format_number(upper, column.decimals)})"
    return text


BOUND_NOTE = (
    " (≤ x): the upper bound of a judged score, the judge's undecided verdicts counted as "
    "matches (the score counts them as no match); Undecided: their share of the images."
)


def _bounded(task: str, column: Metric | None) -> bool:
    """The column is a score with an upper bound (``<key>_upper``) in its task."""
    return column is not None and get_task(task).metric(f"{column.key}_upper") is not None


def summary_markdown(
    tables: Mapping[str, pd.DataFrame],
    agreement: bool = False,
    limits: Limits | None = None,
    dataset: str = "an unnamed dataset",
) -> str:
    """One Markdown table across tasks: per configured task its headline metrics and the
    share of images answered, with the failures that make up the rest."""
    tasks = [t for t in task_names() if t in tables]
    columns: list[tuple[str, Metric | None]] = []
    for task in tasks:
        columns += [(task, m) for m in get_task(task).headline_metrics if m.table]
        columns.append((task, None))
    entries: dict[str, str] = {}
    for task in tasks:
        for row in tables[task].itertuples(index=False):
            entries.setdefault(row.model, row.group)
    order = sorted(entries, key=lambda n: GROUPS.index(entries[n]))
    header = [
        "Model",
        "Group",
        *(f"{get_task(t).title}: {c.label if c else 'answered'}" for t, c in columns),
    ]
    lines = [
        f"# Summary across tasks on {md_text(dataset)}",
        "",
        "Values with 95% case-bootstrap CIs; per-task tables hold every metric. Answered: "
        "share of images with a readable answer, then the failures that make up the rest."
        + BOUND_NOTE
        * any(_bounded(task, column) for task, column in columns),
        "",
        md_row(header),
        md_row(["---", "---", *("---:" for _ in columns)]),
    ]
    for name in order:
        cells = [name, GROUP_TITLES[entries[name]]]
        cells += [_summary_cell(tables[task], name, column) for task, column in columns]
        lines.append(md_row(cells))
    marked = any(t["flag"].fillna("").astype(bool).any() for t in tables.values() if "flag" in t)
    legend = ["", md_text((limits or Limits()).legend())] if marked else []
    return "\n".join([*lines, *legend, "", AGREEMENT_NOTES[bool(agreement)], ""])
