"""The paper's tables from the score files: LaTeX (booktabs), CSV and Markdown.

One table per task, laid out like the paper's: one row per model, controls and the human
reference (raters) in their own groups, the best model per column in bold (controls and
raters excluded; only when at least two models compete), 95% case-bootstrap CIs beside
each value. After the metrics, the share of images answered and per failure status
(``novabench.report.failures``); a model past the configured limits is marked and never
bold. Point estimates are the score files' values; CIs and paired p-values come from
the task's statistics table (``novabench.report.statistics``).

The LaTeX is written by hand rather than with ``pandas.Styler.to_latex`` because the
layout (group rows, bold per column within a group only, CIs in a smaller font) would need
as much code around the Styler; the output needs only ``booktabs`` and ``graphicx``.

The package, by output: :mod:`.formatting` (escaping, numbers, cells), :mod:`.task` (one
task's table and caption note), :mod:`.writers` (its LaTeX, Markdown and CSV),
:mod:`.audits` (audited columns), :mod:`.reproduced` (reproduced vs reported),
:mod:`.summary` (across tasks); here the rule ``tables`` that writes them all.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from novabench.report.failures import Limits
from novabench.report.inputs import GROUP_MODEL
from novabench.report.labels import dataset_label, read_manifest
from novabench.report.tables.audits import audit_note, audit_results, with_audits
from novabench.report.tables.formatting import (
    cell_parts,
    failure_columns,
    latex_escape,
    latex_label,
    latex_share,
    latex_text,
)
from novabench.report.tables.reproduced import (
    load_paper_reference,
    reproduced_latex,
    reproduced_markdown,
    reproduced_vs_reported,
    write_reproduced,
)
from novabench.report.tables.summary import AGREEMENT_NOTES, BOUND_NOTE, summary_markdown
from novabench.report.tables.task import FEW_CASES, best_mask, table_note, task_table
from novabench.report.tables.writers import (
    csv_table,
    latex_table,
    markdown_table,
    write_task_tables,
)
from novabench.spreadsheet import read_csv
from novabench.tasks import get_task, task_names

# The names the leaderboard and the tests import from before these helpers were shared.
_cell_parts = cell_parts
_latex_share = latex_share

__all__ = [
    "AGREEMENT_NOTES",
    "BOUND_NOTE",
    "FEW_CASES",
    "_cell_parts",
    "_latex_share",
    "audit_note",
    "audit_results",
    "best_mask",
    "cell_parts",
    "csv_table",
    "failure_columns",
    "judge_line",
    "latex_escape",
    "latex_label",
    "latex_share",
    "latex_table",
    "latex_text",
    "load_paper_reference",
    "markdown_table",
    "reproduced_latex",
    "reproduced_markdown",
    "reproduced_vs_reported",
    "summary_markdown",
    "table_note",
    "task_table",
    "unavailable_notes",
    "with_audits",
    "write_all_tables",
    "write_reproduced",
    "write_task_tables",
]


# --- rule `tables` ---------------------------------------------------------------------------


def _judge_name(identity: Mapping[str, Any] | None) -> str | None:
    if not identity:
        return None
    name = identity.get("name", "?")
    if identity.get("code"):
        # The judge's code fingerprint names the exact judge; 8 hex digits tell two apart.
        return f"{name} (code {str(identity['code'])[:8]})"
    return f"{name} {identity['version']}" if identity.get("version") else str(name)


def judge_line(payload: Mapping[str, Any]) -> str | None:
    """A score file's judge and its held-out figures in one line ("judge not validated"
    where the record does not hold the judge; ``novabench.judge_figures``), then its live
    checks where it has any; None for a task scored without a judge."""
    from novabench.judge_figures import figures_line

    name = _judge_name(payload.get("judge"))
    if name is None:
        return None
    line = figures_line(name, payload.get("judge_validation"))
    # The LLM judges' live checks of this run, each in its own words (their plug-in's).
    checks = [c["line"] for c in payload.get("judge_live_check") or [] if c.get("line")]
    return "; ".join([line, *checks])


def unavailable_notes(scores: Sequence[Path]) -> list[str]:
    """Why a metric shows "–": the reason a score file records for a metric it could not
    compute (``{"status": "unavailable", "reason": ...}``, e.g. BERT F1 without its
    encoder), without the fix, once per distinct reason."""
    from novabench.report.inputs import read_scores
    from novabench.report.missing import unavailable_reason

    notes: dict[str, None] = {}
    for path in scores:
        for value in (read_scores(Path(path)).get("metrics") or {}).values():
            reason = unavailable_reason(value)
            if reason:
                notes[f"{reason} (the score files say how to fix it)."] = None
    return list(notes)


def _read_task(
    task: str, statistics: Path, scores: Sequence[Path]
) -> tuple[pd.DataFrame, dict[str, dict[str, float]], str | None]:
    """(statistics table, score-file values per entry, judge name) of one task."""
    from novabench.report.inputs import Entry, read_scores

    estimates, judge = {}, None
    for path in scores:
        payload = read_scores(Path(path))
        name = Path(path).name.removesuffix(".json")
        estimates[name] = Entry(name, GROUP_MODEL, payload, pd.DataFrame()).metrics
        if isinstance(payload.get("n_excluded"), int):  # images the dataset excludes
            estimates[name]["n_excluded"] = payload["n_excluded"]
        judge = judge or judge_line(payload)
    return read_csv(statistics), estimates, judge


def _task_context(
    task: str,
    stats: pd.DataFrame,
    estimates: Mapping[str, Mapping[str, float]],
    judge: str | None,
    scores: Sequence[Path],
) -> dict[str, Any]:
    """What the caption of one task's table says: sample sizes, CIs, judge, notes."""
    n_excluded = max((int(e.get("n_excluded") or 0) for e in estimates.values()), default=0)
    first = stats.iloc[0] if len(stats) else {}
    context = {
        "n_images": int(first["n_images"]) if len(stats) else "?",
        "n_cases": int(first["n_cases"]) if len(stats) else "?",
        "n_resamples": int(first["n_resamples"]) if len(stats) else "?",
        "confidence": float(first["confidence"]) if len(stats) else 0.95,
        "judge": judge,
        "n_excluded": n_excluded,
        "task_note": get_task(task).table_note(estimates),
    }
    unavailable = unavailable_notes(scores)
    notes = [context["task_note"], *map(latex_escape, unavailable), _controls(scores)]
    context["task_note"] = " ".join(n for n in notes if n)
    return context


def _controls(scores: Sequence[Path]) -> str:
    """The controls checked among the task's score files, in one sentence (LaTeX)."""
    from novabench.controls import controls_note
    from novabench.report.inputs import read_scores

    payloads = {Path(p).name: read_scores(Path(p)) for p in scores}
    return latex_escape(controls_note(payloads))


def write_all_tables(
    *,
    statistics: Mapping[str, Path],
    scores: Mapping[str, Sequence[Path]],
    paper_reference: Path,
    dataset_manifest: Path | None,
    out_dir: Path,
    agreement: bool = False,
    limits: Limits | None = None,
    audits: Mapping[str, Path] | None = None,
    left_out: str | None = None,
) -> dict[str, pd.DataFrame]:
    """Every table of ``results/<tag>/tables/``: per task, reproduced vs reported, summary.

    ``statistics[task]`` is the task's statistics table and ``scores[task]`` its score
    files; tasks that are absent are simply not in the tables. ``dataset_manifest`` names
    the dataset in every caption and decides whether the paper's numbers are compared.
    ``limits``: when a model is marked for failures (``reporting.min_answered``,
    ``reporting.max_error_rate``). ``audits``: per model the filled sheet that audits its
    diagnosis judge (``models.<name>.audit``), shown as audited Top-1/Top-5 columns.
    ``left_out``: the line naming score files of the results folder that are not shown
    (novabench.report.scored), at the end of the summary.
    """
    limits = limits or Limits()
    manifest = read_manifest(dataset_manifest)
    label = dataset_label(manifest)
    out_dir = Path(out_dir)
    tables: dict[str, pd.DataFrame] = {}
    for task in (t for t in task_names() if t in statistics):
        stats, estimates, judge = _read_task(task, statistics[task], scores.get(task, []))
        table = task_table(task, stats, estimates, limits)
        context = _task_context(task, stats, estimates, judge, scores.get(task, []))
        context.update(limits=limits, dataset=label)
        columns = get_task(task).table_metrics
        audited = audit_results(task, scores.get(task, []), audits or {})
        if audited:
            table, columns = with_audits(table, columns, audited)
            notes = [context["task_note"], audit_note(audited)]
            context["task_note"] = " ".join(n for n in notes if n)
        write_task_tables(task, table, context, out_dir, columns)
        tables[task] = table
    reference = load_paper_reference(Path(paper_reference))
    write_reproduced(reference, tables, manifest, out_dir)
    summary = summary_markdown(tables, agreement, limits, label)
    if left_out:
        summary += f"\n{left_out}\n"
    (out_dir / "summary.md").write_text(summary)
    return tables
