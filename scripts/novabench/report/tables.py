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
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from novabench.errors import ConfigError
from novabench.report import failures
from novabench.report.failures import MARK, Limits
from novabench.report.inputs import GROUP_MODEL, GROUP_TITLES, GROUPS
from novabench.report.labels import NOVA_IMAGES, dataset_label, not_comparable, read_manifest
from novabench.report.markdown import md_row, md_text
from novabench.spreadsheet import read_csv, write_csv
from novabench.tasks import Metric, get_task, task_names


def latex_label(metric: Metric) -> str:
    arrow = {"higher": r"$\uparrow$", "lower": r"$\downarrow$"}.get(metric.better or "", "")
    return latex_escape(metric.label) + arrow


_LATEX_ESCAPES = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
}


def latex_escape(text: str) -> str:
    """Escape LaTeX's special characters in plain text."""
    return "".join(_LATEX_ESCAPES.get(char, char) for char in str(text))


# latex_escape undone, and the math of the task captions (Hit@$\tau$).
_LATEX_TEXT = {escaped: char for char, escaped in _LATEX_ESCAPES.items()} | {r"$\tau$": "τ"}
_LATEX_TEXT_PATTERN = re.compile("|".join(re.escape(k) for k in _LATEX_TEXT))


def latex_text(latex: str) -> str:
    """A caption or note written for LaTeX as plain text (Markdown tables, the
    leaderboard): one pass, so an escaped backslash never unescapes what follows it."""
    return _LATEX_TEXT_PATTERN.sub(lambda m: _LATEX_TEXT[m.group(0)], latex)


def _number(value: float, decimals: int) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    return f"{value:.{decimals}f}"


# --- assembling ----------------------------------------------------------------------------


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
        row.update(_failure_cells(estimates.get(name, {}), status_columns, limits or Limits()))
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
    metrics: Mapping[str, float], columns: Sequence[str], limits: Limits
) -> dict[str, Any]:
    """``<status>_pct`` per failure column, ``n_<status>`` counts, ``n_excluded`` where the
    score file has it, and ``flag``."""
    values = failures.shares(metrics)
    cells: dict[str, Any] = {f"{s}_pct": values.get(s, math.nan) for s in columns}
    for status in columns[1:]:
        cells[f"n_{status}"] = metrics.get(f"n_{status}", math.nan)
    if "n_excluded" in metrics:
        cells["n_excluded"] = metrics["n_excluded"]
    cells["flag"] = failures.flag_reason(values, limits) or ""
    return cells


def failure_columns(table: pd.DataFrame) -> list[str]:
    """The statuses shown after the metrics ("answered" first), in the table's order."""
    return [c.removesuffix("_pct") for c in table.columns if c.endswith("_pct")]


def _flagged(row: pd.Series) -> bool:
    return bool(row.get("flag"))


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


# --- writing -------------------------------------------------------------------------------


def _cell_parts(row: pd.Series, column: Metric) -> tuple[str, str | None, bool]:
    value = _number(row[column.key], column.decimals)
    low, high = row.get(f"{column.key}_ci_low"), row.get(f"{column.key}_ci_high")
    has_ci = value != "–" and not (pd.isna(low) or pd.isna(high))
    ci = f"[{_number(low, column.decimals)}, {_number(high, column.decimals)}]" if has_ci else None
    return value, ci, bool(row.get(f"{column.key}_best", False))


def _status_cells(row: pd.Series, statuses: Sequence[str]) -> list[str]:
    """Shares per status, then the count of images excluded from scoring where known."""
    cells = [failures.share_text(row.get(f"{s}_pct", math.nan)) for s in statuses]
    if "n_excluded" in row.index:
        cells.append(_number(row["n_excluded"], 0))
    return cells


def _status_headers(table: pd.DataFrame) -> list[str]:
    headers = [
        "Answered" if s == failures.ANSWERED_KEY else failures.status_label(s)
        for s in failure_columns(table)
    ]
    return headers + (["Excluded"] if "n_excluded" in table else [])


def _latex_share(text: str) -> str:
    """ "<1%" in any font encoding (text-mode "<" is "¡" in the default OT1)."""
    text = latex_escape(text).replace("–", "--")
    return text.replace("<", "$<$").replace(">", "$>$")


def latex_table(
    task: str,
    table: pd.DataFrame,
    caption: str,
    label: str,
    columns: Sequence[Metric],
    legend: str | None = None,
) -> str:
    """A ``table*`` float with a booktabs tabular, shrunk to the text width if wider; the
    metrics, then the shares of images answered and per failure status."""
    statuses = failure_columns(table)
    header = [latex_label(c) for c in columns] + [latex_escape(h) for h in _status_headers(table)]
    n_cols = len(header) + 1
    lines = [
        "% Generated by the NOVA benchmark pipeline; needs \\usepackage{booktabs,graphicx}.",
        "\\begin{table*}[t]",
        "\\centering",
        f"\\caption{{{caption}}}",
        f"\\label{{{label}}}",
        # shrink to the text width when wider, never enlarge a narrow table
        "\\resizebox{\\ifdim\\width>\\textwidth\\textwidth\\else\\width\\fi}{!}{%",
        f"\\begin{{tabular}}{{l{'c' * (n_cols - 1)}}}",
        "\\toprule",
        "Model & " + " & ".join(header) + " \\\\",
    ]
    if table.empty:
        lines += ["\\midrule", f"\\multicolumn{{{n_cols}}}{{c}}{{\\textit{{No scores.}}}} \\\\"]
    for group in GROUPS:
        rows = table[table["group"] == group]
        if rows.empty:
            continue
        title = f"\\multicolumn{{{n_cols}}}{{l}}{{\\textit{{{GROUP_TITLES[group]}}}}} \\\\"
        lines += ["\\midrule", title]
        for _, row in rows.iterrows():
            mark = "$^\\dagger$" if _flagged(row) else ""
            cells = [latex_escape(row["model"]) + mark]
            for column in columns:
                value, ci, best = _cell_parts(row, column)
                value = "--" if value == "–" else value
                text = f"\\textbf{{{value}}}" if best else value
                if ci:  # the CI under the value: half the width of a table
                    text = (
                        f"\\begin{{tabular}}[c]{{@{{}}c@{{}}}}{text}\\\\"
                        f"{{\\scriptsize {ci.replace('–', '--')}}}\\end{{tabular}}"
                    )
                cells.append(text)
            cells += [_latex_share(c) for c in _status_cells(row, statuses)]
            lines.append(" & ".join(cells) + " \\\\")
    lines += ["\\bottomrule", "\\end{tabular}}"]
    if legend and "flag" in table and table["flag"].fillna("").astype(bool).any():
        text = latex_escape(legend).replace(MARK, "$^\\dagger$")
        lines.append(f"\\par\\smallskip{{\\footnotesize {text}}}")
    lines += ["\\end{table*}", ""]
    return "\n".join(lines)


def markdown_table(
    table: pd.DataFrame,
    columns: Sequence[Metric],
    title: str,
    note: str,
    legend: str | None = None,
) -> str:
    """The same content as the LaTeX table, as a GitHub-flavoured Markdown table."""
    statuses = failure_columns(table)
    header = [
        "Group",
        "Model",
        *(f"{c.label} {c.arrow}".strip() for c in columns),
        *_status_headers(table),
    ]
    lines = [f"## {md_text(title)}", "", md_row(header)]
    lines.append(md_row(["---", "---", *("---:" for _ in header[2:])]))
    for _, row in table.iterrows():
        name = str(row["model"]) + (f" {MARK}" if _flagged(row) else "")
        cells = [GROUP_TITLES[row["group"]], name]
        for column in columns:
            value, ci, best = _cell_parts(row, column)
            text = f"**{value}**" if best else value
            cells.append(f"{text} {ci}" if ci else text)
        cells += _status_cells(row, statuses)
        lines.append(md_row(cells))
    if table.empty:
        lines.append(md_row(["–"] * len(header)))
    if legend and "flag" in table and table["flag"].fillna("").astype(bool).any():
        lines += ["", md_text(legend)]
    return "\n".join([*lines, "", md_text(note), ""])


def csv_table(table: pd.DataFrame, columns: Sequence[Metric]) -> pd.DataFrame:
    """Every number behind the table: value, CI, paired p-value and best flag per metric;
    then the shares (percent) and counts per status, and why the entry is marked."""
    ordered = ["group", "model", "reference"]
    for column in columns:
        ordered += [
            column.key,
            f"{column.key}_ci_low",
            f"{column.key}_ci_high",
            f"{column.key}_p_value",
            f"{column.key}_best",
        ]
    statuses = failure_columns(table)
    ordered += [f"{s}_pct" for s in statuses]
    ordered += [f"n_{s}" for s in statuses[1:]]
    ordered += [c for c in ("n_excluded", "flag") if c in table]
    return table.reindex(columns=ordered)


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


def write_task_tables(
    task: str,
    table: pd.DataFrame,
    context: Mapping[str, Any],
    out_dir: Path,
    columns: Sequence[Metric] | None = None,
) -> dict[str, Path]:
    """Write ``{task}.tex``, ``{task}.csv`` and ``{task}.md`` into ``out_dir``; ``columns``:
    the metric columns (default: the task's table metrics)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    spec = get_task(task)
    columns = spec.table_metrics if columns is None else list(columns)
    note = table_note(task, context)
    legend = context.get("limits", Limits()).legend()
    label = context.get("dataset", "an unnamed dataset")
    caption = f"{spec.title} on {latex_escape(label)}. {note}"
    paths = {ext: out_dir / f"{task}.{ext}" for ext in ("tex", "csv", "md")}
    latex = latex_table(task, table, caption, f"tab:nova-{task}", columns, legend)
    paths["tex"].write_text(latex)
    write_csv(csv_table(table, columns), paths["csv"], index=False)
    title = f"{spec.title} on {label}"
    paths["md"].write_text(markdown_table(table, columns, title, latex_text(note), legend))
    return paths


# --- judge audits ------------------------------------------------------------------------


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


# --- reproduced vs reported ---------------------------------------------------------------


def load_paper_reference(path: Path) -> dict[str, Any]:
    """Read and check ``config/paper_reference.yaml``."""
    import yaml

    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"cannot read {path} ({exc})", "fix the YAML syntax") from exc
    models, sources = data.get("models") or {}, data.get("sources") or {}
    known = {task: {m.key for m in get_task(task).table_metrics} for task in task_names()}
    for i, item in enumerate(data.get("reported") or []):
        where = f"{path} reported[{i}]"
        missing = {"model", "task", "metric", "value", "source"} - set(item)
        if missing:
            raise ConfigError(
                f"{where} lacks {sorted(missing)}", "give model, task, metric, value, source"
            )
        if item["model"] not in models:
            raise ConfigError(
                f"{where}: model {item['model']!r} is not under models:", "add it to models:"
            )
        if item["task"] not in known or item["metric"] not in known[item["task"]]:
            raise ConfigError(
                f"{where}: {item['task']}/{item['metric']} is not a table metric",
                "use a task and a metric key of results/<tag>/tables/<task>.csv",
            )
        if item["source"] not in sources:
            raise ConfigError(f"{where}: source {item['source']!r} is not under sources:", "add it")
    return data


def reproduced_vs_reported(
    reference: Mapping[str, Any], tables: Mapping[str, pd.DataFrame]
) -> pd.DataFrame:
    """Ours beside the published value, for every published number of a scored model."""
    rows = []
    for item in reference.get("reported") or []:
        config_name = reference["models"][item["model"]]
        table = tables.get(item["task"])
        if table is None or table.empty or config_name not in set(table["model"]):
            continue
        row = table[table["model"] == config_name].iloc[0]
        ours = row[item["metric"]]
        low, high = row[f"{item['metric']}_ci_low"], row[f"{item['metric']}_ci_high"]
        inside = None if pd.isna(low) or pd.isna(high) else bool(low <= item["value"] <= high)
        rows.append(
            {
                "paper_model": item["model"],
                "model": config_name,
                "task": item["task"],
                "metric": item["metric"],
                "reported": float(item["value"]),
                "ours": ours,
                "ci_low": low,
                "ci_high": high,
                "difference": ours - float(item["value"]) if not pd.isna(ours) else math.nan,
                "reported_in_ci": inside,
                "source": item["source"],
            }
        )
    columns = [
        "paper_model",
        "model",
        "task",
        "metric",
        "reported",
        "ours",
        "ci_low",
        "ci_high",
        "difference",
        "reported_in_ci",
        "source",
    ]
    return pd.DataFrame(rows, columns=columns)


def reproduced_latex(frame: pd.DataFrame, sources: Mapping[str, str], dataset: str) -> str:
    lines = [
        "% Generated by the NOVA benchmark pipeline; needs \\usepackage{booktabs}.",
        "\\begin{table}[t]",
        "\\centering",
        f"\\caption{{Reproduced on {latex_escape(dataset)} vs reported. "
        "Ours: point estimate and 95\\% case-bootstrap CI; "
        "$\\Delta$ = ours $-$ reported; In CI: the reported value lies inside our CI. "
        "Sources: "
        + "; ".join(f"{latex_escape(k)}: {latex_escape(v)}" for k, v in sources.items())
        + ".}",
        "\\label{tab:nova-reproduced}",
        "\\small",
        "\\begin{tabular}{lllrrrcl}",
        "\\toprule",
        "Model & Task & Metric & Reported & Ours & $\\Delta$ & In CI & Source \\\\",
        "\\midrule",
    ]
    if frame.empty:
        lines.append(
            "\\multicolumn{8}{c}{\\textit{No configured model has published numbers.}} \\\\"
        )
    for row in frame.itertuples(index=False):
        ci = (
            f"{row.ours:.1f}\\,{{\\scriptsize[{row.ci_low:.1f}, {row.ci_high:.1f}]}}"
            if not pd.isna(row.ci_low)
            else _number(row.ours, 1).replace("–", "--")
        )
        inside = {True: "yes", False: "no"}.get(row.reported_in_ci, "--")
        lines.append(
            " & ".join(
                [
                    latex_escape(row.paper_model),
                    latex_escape(row.task),
                    latex_escape(row.metric),
                    f"{row.reported:g}",
                    ci,
                    _number(row.difference, 1).replace("–", "--"),
                    inside,
                    latex_escape(row.source),
                ]
            )
            + " \\\\"
        )
    lines += ["\\bottomrule", "\\end{tabular}", "\\end{table}", ""]
    return "\n".join(lines)


def reproduced_markdown(frame: pd.DataFrame, sources: Mapping[str, str], dataset: str) -> str:
    """The comparison as a Markdown table (the same rows as the LaTeX)."""
    lines = [
        f"## Reproduced on {md_text(dataset)} vs reported",
        "",
        "| Model | Task | Metric | Reported | Ours [95% CI] | Δ | In CI | Source |",
        "| --- | --- | --- | ---: | ---: | ---: | :---: | --- |",
    ]
    for row in frame.itertuples(index=False):
        ours = _number(row.ours, 1)
        if not pd.isna(row.ci_low):
            ours += f" [{row.ci_low:.1f}, {row.ci_high:.1f}]"
        inside = {True: "yes", False: "no"}.get(row.reported_in_ci, "–")
        cells = [row.paper_model, row.task, row.metric, f"{row.reported:g}", ours]
        cells += [_number(row.difference, 1), inside, row.source]
        lines.append(md_row(cells))
    if frame.empty:
        lines.append(md_row(["No configured model has published numbers.", *[""] * 7]))
    lines += ["", md_text("Sources: " + "; ".join(f"{k}: {v}" for k, v in sources.items()) + ".")]
    return "\n".join([*lines, ""])


def write_reproduced(
    reference: Mapping[str, Any],
    tables: Mapping[str, pd.DataFrame],
    manifest: Mapping[str, Any] | None,
    out_dir: Path,
) -> None:
    """``reproduced_vs_reported.{csv,tex,md}``: the comparison on the full NOVA release;
    on any other dataset each file holds one line saying why there is none."""
    import csv
    import io

    paths = {ext: Path(out_dir) / f"reproduced_vs_reported.{ext}" for ext in ("csv", "tex", "md")}
    reason = not_comparable(manifest)
    if reason is not None:
        line = (
            f"Not compared with the published numbers: {reason}; they are for the full "
            f"NOVA release ({NOVA_IMAGES} images)."
        )
        cell = io.StringIO()
        csv.writer(cell, lineterminator="\n").writerow([line])
        paths["csv"].write_text(cell.getvalue())
        paths["tex"].write_text(latex_escape(line) + "\n")
        paths["md"].write_text(md_text(line) + "\n")
        return
    compared = reproduced_vs_reported(reference, tables)
    sources, label = reference.get("sources") or {}, dataset_label(manifest)
    write_csv(compared, paths["csv"], index=False)
    paths["tex"].write_text(reproduced_latex(compared, sources, label))
    paths["md"].write_text(reproduced_markdown(compared, sources, label))


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
        return failures.failure_summary(values, statuses) + (f" {MARK}" if _flagged(row) else "")
    value, ci, best = _cell_parts(row, column)
    text = f"**{value}**" if best else value
    text = f"{text} {ci}" if ci else text
    # A score the judge's undecided verdicts leave open shows its upper bound beside it.
    upper = row.get(f"{column.key}_upper", math.nan)
    if not pd.isna(upper) and not pd.isna(row[column.key]):
        text += f" (≤ {_number(upper, column.decimals)})"
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
    where the record does not hold the judge; ``novabench.judges.figures``); None for a
    task scored without a judge."""
    from novabench.judges.figures import figures_line

    name = _judge_name(payload.get("judge"))
    return None if name is None else figures_line(name, payload.get("judge_validation"))


def unavailable_notes(scores: Sequence[Path]) -> list[str]:
    """Why a metric shows "–": the reason a score file records for a metric it could not
    compute (``{"status": "unavailable", "reason": ...}``, e.g. BERT F1 without its
    encoder), without the fix, once per distinct reason."""
    from novabench.report.inputs import read_scores

    notes: dict[str, None] = {}
    for path in scores:
        for value in (read_scores(Path(path)).get("metrics") or {}).values():
            if isinstance(value, dict) and value.get("status") == "unavailable":
                reason = str(value.get("reason") or "").split("; fix:")[0].strip().rstrip(".")
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
            "limits": limits,
            "dataset": label,
        }
        unavailable = unavailable_notes(scores.get(task, []))
        if unavailable:
            notes = [context["task_note"], *map(latex_escape, unavailable)]
            context["task_note"] = " ".join(n for n in notes if n)
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
