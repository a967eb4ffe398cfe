"""The paper's tables from the score files: LaTeX (booktabs), CSV and Markdown.

One table per task, laid out like the paper's: one row per model, controls and the human
reference (raters) in their own groups, the best model per column in bold (controls and
raters excluded; only when at least two models compete), 95% case-bootstrap CIs beside
each value. Point estimates are the score files' values; CIs and paired p-values come from
the task's statistics table (``novabench.report.statistics``).

The LaTeX is written by hand rather than with ``pandas.Styler.to_latex`` because the
layout (group rows, bold per column within a group only, CIs in a smaller font) would need
as much code around the Styler; the output needs only ``booktabs`` and ``graphicx``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from novabench.errors import ConfigError
from novabench.report.inputs import GROUP_MODEL, GROUP_TITLES, GROUPS
from novabench.tasks import Metric, get_task, task_names


def latex_label(metric: Metric) -> str:
    arrow = {"higher": r"$\uparrow$", "lower": r"$\downarrow$"}.get(metric.better or "", "")
    return latex_escape(metric.label) + arrow


def latex_escape(text: str) -> str:
    """Escape LaTeX's special characters in plain text."""
    replacements = {
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
    return "".join(replacements.get(char, char) for char in str(text))


def _number(value: float, decimals: int) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    return f"{value:.{decimals}f}"


# --- assembling ----------------------------------------------------------------------------


def task_table(
    task: str,
    statistics: pd.DataFrame,
    estimates: Mapping[str, Mapping[str, float]],
) -> pd.DataFrame:
    """One wide row per entry: group, model, and per metric the value, CI, p-value, best.

    ``estimates[model][metric]`` are the score files' values (the numbers shown);
    ``statistics`` is the task's statistics table (CIs, p-values). Rows are ordered by
    group (models, controls, human reference), then as in ``statistics``.
    """
    names = list(dict.fromkeys(statistics["model"])) if len(statistics) else list(estimates)
    names += [n for n in estimates if n not in names]
    groups = statistics.drop_duplicates("model").set_index("model")["group"].to_dict()
    references = statistics["reference"].dropna() if "reference" in statistics else []
    reference = references.iloc[0] if len(references) else None
    by_key = statistics.set_index(["model", "metric"]) if len(statistics) else None
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
        rows.append(row)
    table = pd.DataFrame(rows)
    if table.empty:
        return pd.DataFrame(columns=["group", "model"])
    table["_order"] = table["group"].map({g: i for i, g in enumerate(GROUPS)})
    table = table.sort_values("_order", kind="stable").drop(columns="_order")
    for column in get_task(task).table_metrics:
        table[f"{column.key}_best"] = best_mask(table, column)
    return table.reset_index(drop=True)


def best_mask(table: pd.DataFrame, column: Metric) -> pd.Series:
    """True for the best model(s) of a column as shown (rounded); controls and raters never
    count; no best when fewer than two models compete or all show the same value."""
    best = pd.Series(False, index=table.index)
    candidates = table[(table["group"] == GROUP_MODEL) & table[column.key].notna()]
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


def latex_table(
    task: str, table: pd.DataFrame, caption: str, label: str, columns: Sequence[Metric]
) -> str:
    """A ``table*`` float with a booktabs tabular, shrunk to the text width if wider."""
    n_cols = len(columns) + 1
    lines = [
        "% Generated by the NOVA benchmark pipeline; needs \\usepackage{booktabs,graphicx}.",
        "\\begin{table*}[t]",
        "\\centering",
        f"\\caption{{{caption}}}",
        f"\\label{{{label}}}",
        # shrink to the text width when wider, never enlarge a narrow table
        "\\resizebox{\\ifdim\\width>\\textwidth\\textwidth\\else\\width\\fi}{!}{%",
        f"\\begin{{tabular}}{{l{'c' * len(columns)}}}",
        "\\toprule",
        "Model & " + " & ".join(latex_label(c) for c in columns) + " \\\\",
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
            cells = [latex_escape(row["model"])]
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
            lines.append(" & ".join(cells) + " \\\\")
    lines += ["\\bottomrule", "\\end{tabular}}", "\\end{table*}", ""]
    return "\n".join(lines)


def markdown_table(table: pd.DataFrame, columns: Sequence[Metric], title: str, note: str) -> str:
    """The same content as the LaTeX table, as a GitHub-flavoured Markdown table."""
    header = ["Group", "Model", *(f"{c.label} {c.arrow}".strip() for c in columns)]
    lines = [f"## {title}", "", "| " + " | ".join(header) + " |"]
    lines.append("| " + " | ".join(["---", "---", *("---:" for _ in columns)]) + " |")
    for _, row in table.iterrows():
        cells = [GROUP_TITLES[row["group"]], str(row["model"]).replace("|", "\\|")]
        for column in columns:
            value, ci, best = _cell_parts(row, column)
            text = f"**{value}**" if best else value
            cells.append(f"{text} {ci}" if ci else text)
        lines.append("| " + " | ".join(cells) + " |")
    if table.empty:
        lines.append("| " + " | ".join(["–"] * len(header)) + " |")
    return "\n".join([*lines, "", note, ""])


def csv_table(table: pd.DataFrame, columns: Sequence[Metric]) -> pd.DataFrame:
    """Every number behind the table: value, CI, paired p-value and best flag per metric."""
    ordered = ["group", "model", "reference"]
    for column in columns:
        ordered += [
            column.key,
            f"{column.key}_ci_low",
            f"{column.key}_ci_high",
            f"{column.key}_p_value",
            f"{column.key}_best",
        ]
    return table.reindex(columns=ordered)


def table_note(task: str, context: Mapping[str, Any]) -> str:
    """The caption text after the title: sample size, CIs, what the metrics are."""
    parts = [
        f"{context.get('n_images', '?')} images from {context.get('n_cases', '?')} cases.",
        *_excluded_note(task, context.get("n_excluded", 0)),
        f"Values with {round(100 * context.get('confidence', 0.95))}\\% CIs from "
        f"{context.get('n_resamples', '?')} case-level bootstrap resamples.",
        "Best model per column in bold (controls and human raters excluded).",
        get_task(task).caption,
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
    task: str, table: pd.DataFrame, context: Mapping[str, Any], out_dir: Path
) -> dict[str, Path]:
    """Write ``{task}.tex``, ``{task}.csv`` and ``{task}.md`` into ``out_dir``."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    spec = get_task(task)
    columns = spec.table_metrics
    note = table_note(task, context)
    caption = f"{spec.title} on NOVA. {note}"
    paths = {ext: out_dir / f"{task}.{ext}" for ext in ("tex", "csv", "md")}
    paths["tex"].write_text(latex_table(task, table, caption, f"tab:nova-{task}", columns))
    csv_table(table, columns).to_csv(paths["csv"], index=False)
    md_note = note.replace("\\%", "%").replace("$\\tau$", "τ")
    paths["md"].write_text(markdown_table(table, columns, spec.title, md_note))
    return paths


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
                "use a task and a metric key of results/tables/<task>.csv",
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


def reproduced_latex(frame: pd.DataFrame, sources: Mapping[str, str]) -> str:
    lines = [
        "% Generated by the NOVA benchmark pipeline; needs \\usepackage{booktabs}.",
        "\\begin{table}[t]",
        "\\centering",
        "\\caption{Reproduced vs reported. Ours: point estimate and 95\\% case-bootstrap CI; "
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


AGREEMENT_NOTES = {
    False: (
        "Judge agreement (Cohen's kappa) is not computed: each task's predictions are judged "
        "by one judge (`tasks.<task>.judge`). List further judges under "
        "`reporting.agreement_judges` to compare them."
    ),
    True: "Judge agreement (Cohen's kappa between judges on the same predictions): "
    "`judge_agreement.md`.",
}


def summary_markdown(tables: Mapping[str, pd.DataFrame], agreement: bool = False) -> str:
    """One Markdown table across tasks: two headline metrics per configured task."""
    tasks = [t for t in task_names() if t in tables]
    columns = [(t, m) for t in tasks for m in get_task(t).table_metrics if m.headline]
    entries: dict[str, str] = {}
    for task in tasks:
        for row in tables[task].itertuples(index=False):
            entries.setdefault(row.model, row.group)
    order = sorted(entries, key=lambda n: GROUPS.index(entries[n]))
    header = ["Model", "Group", *(f"{get_task(t).title}: {c.label}" for t, c in columns)]
    lines = [
        "# NOVA: summary across tasks",
        "",
        "Values with 95% case-bootstrap CIs; per-task tables hold every metric.",
        "",
        "| " + " | ".join(header) + " |",
        "| " + " | ".join(["---", "---", *("---:" for _ in columns)]) + " |",
    ]
    for name in order:
        cells = [name, GROUP_TITLES[entries[name]]]
        for task, column in columns:
            table = tables[task]
            match = table[table["model"] == name]
            if match.empty:
                cells.append("–")
                continue
            value, ci, best = _cell_parts(match.iloc[0], column)
            text = f"**{value}**" if best else value
            cells.append(f"{text} {ci}" if ci else text)
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join([*lines, "", AGREEMENT_NOTES[bool(agreement)], ""])


# --- rule `tables` ---------------------------------------------------------------------------


def _judge_name(identity: Mapping[str, Any] | None) -> str | None:
    if not identity:
        return None
    name = identity.get("name", "?")
    return f"{name} {identity['version']}" if identity.get("version") else str(name)


def write_all_tables(
    *,
    statistics: Mapping[str, Path],
    scores: Mapping[str, Sequence[Path]],
    paper_reference: Path,
    out_dir: Path,
    agreement: bool = False,
) -> dict[str, pd.DataFrame]:
    """Every table of ``results/tables/``: per task, reproduced vs reported, summary.

    ``statistics[task]`` is the task's statistics table and ``scores[task]`` its score
    files; tasks that are absent are simply not in the tables.
    """
    from novabench.report.inputs import Entry, read_scores

    out_dir = Path(out_dir)
    tables: dict[str, pd.DataFrame] = {}
    for task in task_names():
        if task not in statistics:
            continue
        stats = pd.read_csv(statistics[task])
        estimates, judge, n_excluded = {}, None, 0
        for path in scores.get(task, []):
            payload = read_scores(Path(path))
            name = Path(path).name.removesuffix(".json")
            estimates[name] = Entry(name, GROUP_MODEL, payload, pd.DataFrame()).metrics
            judge = judge or _judge_name(payload.get("judge"))
            n_excluded = max(n_excluded, int(payload.get("n_excluded") or 0))
        table = task_table(task, stats, estimates)
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
        write_task_tables(task, table, context, out_dir)
        tables[task] = table
    reference = load_paper_reference(Path(paper_reference))
    compared = reproduced_vs_reported(reference, tables)
    compared.to_csv(out_dir / "reproduced_vs_reported.csv", index=False)
    (out_dir / "reproduced_vs_reported.tex").write_text(
        reproduced_latex(compared, reference.get("sources") or {})
    )
    (out_dir / "summary.md").write_text(summary_markdown(tables, agreement))
    return tables
