"""The leaderboard: one HTML page with every task's results, readable offline.

One sortable table per task: the task's table metrics as its registry entry declares them
(label, direction, decimals), the same numbers, CIs and bold best as the paper tables
(``novabench.report.tables``), then the failure rates of each entry's score file. Models
come first; controls and human raters follow in their own row groups, and sorting a
column reorders the rows within each group, so a control never ranks among the models.

The page is one file with no external resource: CSS and a small vanilla script are
inline, a Content-Security-Policy with their hashes forbids loading anything else, and it
opens from ``file://``. Figures show as thumbnails embedded as ``data:`` URIs
(``novabench.report.thumbnails``; the CSP allows images from ``data:`` only), each linking
the full figure by relative path (``figures/``, next to the page): one figure is a few MB,
and the page stays small enough to diff. Every "–" says why on hover and in a numbered
footnote under its table (``novabench.report.missing``), and each value tested against the
reference model shows its paired test's p-value under its CI. Every text from config or
score files is HTML-escaped.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from html import escape
from pathlib import Path
from typing import Any

import pandas as pd

from novabench.controls import controls_note
from novabench.errors import NovaError
from novabench.io import atomic_write_text
from novabench.report.failures import MARK, Limits
from novabench.report.inputs import GROUP_MODEL, GROUP_TITLES, GROUPS, Entry, read_scores
from novabench.report.missing import UNDEFINED, metric_reason, share_reason
from novabench.report.tables import _cell_parts, judge_line, latex_text, task_table
from novabench.report.thumbnails import thumbnail
from novabench.spreadsheet import read_csv
from novabench.tasks import Metric, get_task, task_names


@dataclass(frozen=True)
class Column:
    """One sortable column: its key in a row, header text, tooltip, and how it sorts."""

    key: str
    label: str
    title: str
    numeric: bool = True


@dataclass
class Board:
    """What the page shows of one task."""

    task: str
    table: pd.DataFrame  # task_table's rows, with the failure-rate columns added
    rates: list[Column]
    judge: str | None
    context: dict[str, Any]
    figures: list[Path] = field(default_factory=list)
    # Each entry's score file as read (None: no score file), for why a value is missing.
    payloads: dict[str, dict[str, Any]] = field(default_factory=dict)


def dataset_line(manifest: Mapping[str, Any]) -> str:
    """What the results were computed on (the report's shared label) and its size."""
    from novabench.report.labels import dataset_label

    counts = [
        f"{manifest[key]} {noun}"
        for key, noun in (("n_images", "images"), ("n_cases", "cases"))
        if manifest.get(key) is not None
    ]
    return dataset_label(manifest) + (f" ({', '.join(counts)})" if counts else "")


# --- failure rates --------------------------------------------------------------------------


def rate_columns(table: pd.DataFrame) -> list[Column]:
    """The failure columns of a task as the paper tables have them (``report.failures``):
    the share of images answered, then the share per failure status, in %."""
    from novabench.report import failures
    from novabench.report.tables import failure_columns

    columns = []
    for status in failure_columns(table):
        if status == failures.ANSWERED_KEY:
            title = "Share of images with a readable answer (ok or an explicit no finding), %"
            columns.append(Column(f"{status}_pct", "Answered %", title))
        else:
            label = failures.status_label(status)
            title = f"Share of images with status {status.replace('_', ' ')}, %"
            columns.append(Column(f"{status}_pct", f"{label} %", title))
    return columns


# --- assembling -----------------------------------------------------------------------------


def task_board(
    task: str,
    statistics: pd.DataFrame,
    score_files: Sequence[Path],
    limits: Limits | None = None,
) -> Board:
    """One task's rows as the paper table has them (failure shares and marks included,
    under ``limits``), and its judge."""
    payloads = {Path(p).name.removesuffix(".json"): read_scores(Path(p)) for p in score_files}
    estimates = {
        name: Entry(name, GROUP_MODEL, payload, pd.DataFrame()).metrics
        for name, payload in payloads.items()
    }
    table = task_table(task, statistics, estimates, limits)
    rates = rate_columns(table)
    judges = [judge_line(p) for p in payloads.values()]
    first = statistics.iloc[0] if len(statistics) else {}
    context = {
        key: first[key]
        for key in ("n_images", "n_cases", "n_resamples", "confidence")
        if len(statistics) and key in statistics
    }
    # The controls checked as live checks of the judge (or that none was in the run).
    notes = [get_task(task).table_note(estimates), controls_note(payloads)]
    context["note"] = " ".join(n for n in notes if n)
    judge = next((j for j in judges if j), None)
    return Board(task, table, rates, judge, context, payloads=payloads)


def task_figures(task: str, figures: Sequence[Path]) -> list[Path]:
    """The figures of ``task`` (``<task>_<family>.png``), in the order given."""
    return [f for f in figures if Path(f).name.startswith(f"{task}_")]


# --- rendering ------------------------------------------------------------------------------


def metric_column(metric: Metric) -> Column:
    direction = {"higher": "higher is better", "lower": "lower is better"}.get(
        metric.better or "", "no better direction"
    )
    scale = "0-100" if metric.percent else "count or raw value"
    label = f"{metric.label} {metric.arrow}".strip()
    return Column(metric.key, label, f"{metric.label}: {direction}; {scale}")


def _header(column: Column, first_rate: bool = False) -> str:
    kind = "number" if column.numeric else "text"
    css = ' class="first-rate"' if first_rate else ""
    return (
        f'<th scope="col"{css} aria-sort="none" data-type="{kind}" '
        f'title="{escape(column.title)}"><button type="button">{escape(column.label)}</button></th>'
    )


def _metric_cell(row: pd.Series, metric: Metric, board: Board, notes: Footnotes) -> str:
    value, ci, best = _cell_parts(row, metric)
    point = row[metric.key]
    if pd.isna(point):
        reason = metric_reason(board.payloads.get(str(row["model"])), metric)
        return missing_cell(reason or UNDEFINED, metric.label, notes)
    text = f"<strong>{escape(value)}</strong>" if best else escape(value)
    if ci:
        text += f' <span class="ci">{escape(ci)}</span>'
    p_text = p_value_text(row, metric)
    title = ""
    if p_text:
        text += f' <span class="p">{escape(p_text)}</span>'
        title = f' title="{escape(p_text)} vs {escape(str(row["reference"]))}"'
    return f'<td data-value="{float(point)!r}"{title}>{text}</td>'


def _rate_cell(row: pd.Series, column: Column, notes: Footnotes, first_rate: bool) -> str:
    css = ' class="first-rate"' if first_rate else ""
    value = row[column.key]
    if pd.isna(value):
        return missing_cell(share_reason(str(row["group"])), column.label, notes, css)
    return f'<td{css} data-value="{float(value)!r}">{value:.1f}</td>'


# --- why a cell is "–", and the paired tests --------------------------------------------------


@dataclass
class Footnotes:
    """The reasons behind one table's "–" cells, numbered in order of first use, with the
    columns each one empties."""

    task: str
    columns: dict[str, list[str]] = field(default_factory=dict)  # reason -> column labels

    def number(self, reason: str, column: str) -> int:
        labels = self.columns.setdefault(reason, [])
        if column not in labels:
            labels.append(column)
        return list(self.columns).index(reason) + 1

    def anchor(self, number: int) -> str:
        return f"note-{escape(self.task)}-{number}"

    def html(self) -> str:
        """The footnotes under the table ("" when no cell is "–")."""
        items = [
            f'<li id="{self.anchor(i)}">“–” in {escape(", ".join(labels))}: {escape(reason)}.</li>'
            for i, (reason, labels) in enumerate(self.columns.items(), start=1)
        ]
        return f'<ol class="notes">{"".join(items)}</ol>' if items else ""


def missing_cell(reason: str, column: str, notes: Footnotes, css: str = "") -> str:
    """A "–" cell: its reason on hover and as a numbered footnote under the table."""
    number = notes.number(reason, column)
    link = f'<sup class="note"><a href="#{notes.anchor(number)}">{number}</a></sup>'
    return f'<td{css} data-value="" title="{escape(reason)}">–{link}</td>'


def p_value_text(row: pd.Series, metric: Metric) -> str | None:
    """The paired test's p-value of an entry's metric against the reference model; None
    for the reference itself and where no test was run (no CI, no reference)."""
    p_value, reference = row.get(f"{metric.key}_p_value"), row.get("reference")
    if pd.isna(p_value) or pd.isna(reference) or reference == row["model"]:
        return None
    return "p < 0.001" if p_value < 0.001 else f"p = {p_value:.3f}"


def p_value_note(board: Board) -> str | None:
    """The caption's line on the p-values, where the table shows any."""
    references = board.table["reference"].dropna() if "reference" in board.table else []
    keys = [f"{m.key}_p_value" for m in get_task(board.task).table_metrics]
    shown = [k for k in keys if k in board.table and board.table[k].notna().any()]
    if not len(references) or not shown:
        return None
    return (
        f"p: two-sided paired case-bootstrap test of each entry's difference to "
        f"{references.iloc[0]} (the reference model), on the same resamples as the CIs; "
        "not corrected for multiple comparisons."
    )


def table_html(board: Board, notes: Footnotes | None = None) -> str:
    """The task's table: one ``tbody`` per group, a group title row, then its entries;
    the reasons of its "–" cells go to ``notes``."""
    notes = notes if notes is not None else Footnotes(board.task)
    metrics = list(get_task(board.task).table_metrics)
    columns = [Column("model", "Model", "Model or rater name", numeric=False)]
    columns += [metric_column(m) for m in metrics]
    headers = [_header(c) for c in columns]
    headers += [_header(c, i == 0) for i, c in enumerate(board.rates)]
    columns += board.rates
    lines = [
        f'<table class="board" id="table-{escape(board.task)}">',
        f"<caption>{escape(caption_text(board))}</caption>",
        "<thead><tr>" + "".join(headers) + "</tr></thead>",
    ]
    if board.table.empty:
        lines.append(f'<tbody><tr><td colspan="{len(columns)}">No scores.</td></tr></tbody>')
    for group in GROUPS:
        rows = board.table[board.table["group"] == group]
        if rows.empty:
            continue
        lines.append(f'<tbody data-group="{group}">')
        lines.append(
            f'<tr class="group"><th scope="rowgroup" colspan="{len(columns)}">'
            f"{escape(GROUP_TITLES[group])}</th></tr>"
        )
        for _, row in rows.iterrows():
            name = escape(str(row["model"]))
            flag = str(row.get("flag") or "")
            mark = f' <span class="flag" title="{escape(flag)}">{MARK}</span>' if flag else ""
            cells = [f'<th scope="row" data-value="{name}">{name}{mark}</th>']
            cells += [_metric_cell(row, m, board, notes) for m in metrics]
            cells += [_rate_cell(row, c, notes, i == 0) for i, c in enumerate(board.rates)]
            lines.append('<tr class="entry">' + "".join(cells) + "</tr>")
        lines.append("</tbody>")
    lines.append("</table>")
    return "\n".join(lines)


def caption_text(board: Board) -> str:
    """Sample size, CIs and what the metrics are, as plain text."""
    context = board.context
    parts = [f"{get_task(board.task).title}."]
    if "n_images" in context and "n_cases" in context:
        parts.append(f"{int(context['n_images'])} images from {int(context['n_cases'])} cases.")
    if "n_resamples" in context:
        parts.append(
            f"Values with {round(100 * float(context['confidence']))}% CIs from "
            f"{int(context['n_resamples'])} case-level bootstrap resamples."
        )
    parts.append(
        "Best model per column in bold (controls, human raters and models marked "
        f"{MARK} excluded). {MARK}: fewer images answered than reporting.min_answered, or "
        "more without an answer than reporting.max_error_rate (hover the mark for which)."
    )
    parts.append(latex_text(get_task(board.task).caption))
    if context.get("note"):
        parts.append(latex_text(context["note"]))
    p_note = p_value_note(board)
    if p_note:
        parts.append(p_note)
    return " ".join(parts)


def section_html(board: Board, page_dir: Path) -> str:
    judge = board.judge or "none (scored without a judge)"
    notes = Footnotes(board.task)
    lines = [
        f'<section id="task-{escape(board.task)}">',
        f"<h2>{escape(get_task(board.task).title)}</h2>",
        f'<p class="judge">Judge: {escape(judge)}</p>',
        '<div class="scroll">',
        table_html(board, notes),
        "</div>",
        notes.html(),
    ]
    if board.figures:
        lines += ['<p class="figures">Figures:</p>']
        lines.append(figures_html(board.figures, page_dir, f"{board.task}_"))
    lines.append("</section>")
    return "\n".join(lines)


def figures_html(figures: Sequence[Path], page_dir: Path, prefix: str = "") -> str:
    """Each figure as a thumbnail (embedded: the page stays one file) linking to the
    figure itself, by relative path; a link alone where the file is no readable image."""
    items = []
    for figure in figures:
        name = escape(Path(figure).stem.removeprefix(prefix).replace("_", " "))
        preview = thumbnail(Path(figure))
        image = (
            f'<img src="{preview.uri}" width="{preview.width}" height="{preview.height}" '
            f'alt="{name}">'
            if preview
            else ""
        )
        items.append(
            f'<li><a href="{escape(_relative(figure, page_dir))}">{image}'
            f"<span>{name}</span></a></li>"
        )
    return '<ul class="figures">' + "".join(items) + "</ul>"


def _relative(path: Path, page_dir: Path) -> str:
    """``path`` relative to the page, with forward slashes (a URL, also on Windows)."""
    return Path(os.path.relpath(Path(path).resolve(), Path(page_dir).resolve())).as_posix()


def _csp_hash(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


def provenance_html(dataset: str, git: Mapping[str, Any], generated: datetime) -> str:
    commit = git.get("commit")
    if commit:
        code = f'<code title="{escape(commit)}">{escape(commit[:12])}</code>'
        code += " (with uncommitted changes)" if git.get("dirty") else ""
    else:
        code = "not a git checkout"
    stamp = generated.astimezone(UTC)
    return (
        '<dl class="provenance">'
        f"<dt>Dataset</dt><dd>{escape(dataset)}</dd>"
        f'<dt>Generated</dt><dd><time datetime="{stamp.isoformat(timespec="seconds")}">'
        f"{stamp:%Y-%m-%d %H:%M} UTC</time></dd>"
        f"<dt>Git commit</dt><dd>{code}</dd>"
        "</dl>"
    )


def page_html(
    boards: Sequence[Board],
    *,
    dataset: str,
    git: Mapping[str, Any],
    generated: datetime,
    page_dir: Path,
    other_figures: Sequence[Path] = (),
    left_out: str | None = None,
) -> str:
    """The whole page; nothing in it loads from anywhere else."""
    csp = (
        f"default-src 'none'; style-src {_csp_hash(STYLE)}; script-src {_csp_hash(SCRIPT)}; "
        "img-src data:"
    )
    nav = " · ".join(
        f'<a href="#task-{escape(b.task)}">{escape(get_task(b.task).title)}</a>' for b in boards
    )
    body = [section_html(b, page_dir) for b in boards] or ["<p>No task has scores.</p>"]
    if other_figures:
        body.append('<section id="other-figures"><h2>Other figures</h2>')
        body += [figures_html(other_figures, page_dir), "</section>"]
    return "\n".join(
        [
            "<!DOCTYPE html>",
            '<html lang="en">',
            "<head>",
            '<meta charset="utf-8">',
            f'<meta http-equiv="Content-Security-Policy" content="{csp}">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            "<title>NOVA leaderboard</title>",
            f"<style>{STYLE}</style>",
            "</head>",
            "<body>",
            "<header><h1>NOVA leaderboard</h1>",
            provenance_html(dataset, git, generated),
            f"<nav>{nav}</nav>",
            '<p class="help">Click a column header to sort; rows are sorted within each '
            "group (models, controls, human reference). Values with CIs sort by the point "
            "estimate.</p>",
            *([f'<p class="left-out">{escape(left_out)}</p>'] if left_out else []),
            "</header>",
            "<main>",
            *body,
            "</main>",
            f"<script>{SCRIPT}</script>",
            "</body>",
            "</html>",
            "",
        ]
    )


# --- rule `leaderboard` ---------------------------------------------------------------------


def write_leaderboard(
    *,
    statistics: Mapping[str, Path],
    scores: Mapping[str, Sequence[Path]],
    dataset_manifest: Path,
    figures: Sequence[Path],
    out: Path,
    git: Mapping[str, Any],
    generated: datetime | None = None,
    limits: Limits | None = None,
    left_out: str | None = None,
) -> list[Board]:
    """Write the page to ``out``; ``statistics[task]`` and ``scores[task]`` as for the
    tables, ``figures`` the figure files to show (with a preview where one is a readable
    image), ``limits`` when a model is marked for failures (as in the tables),
    ``left_out`` the line naming score files of the results folder that are not shown."""
    try:
        manifest = json.loads(Path(dataset_manifest).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise NovaError(
            f"cannot read the dataset manifest {dataset_manifest} ({exc})",
            "re-run the `dataset` rule",
        ) from exc
    boards = []
    for task in task_names():
        if task in statistics:
            board = task_board(task, read_csv(statistics[task]), scores.get(task, []), limits)
            board.figures = task_figures(task, figures)
            boards.append(board)
    shown = {f for b in boards for f in b.figures}
    html = page_html(
        boards,
        dataset=dataset_line(manifest),
        git=git,
        generated=generated or datetime.now(UTC),
        page_dir=Path(out).parent,
        other_figures=[f for f in figures if f not in shown],
        left_out=left_out,
    )
    atomic_write_text(Path(out), html)
    return boards


# --- the page's own style and script --------------------------------------------------------

STYLE = """
body { font: 15px/1.45 system-ui, sans-serif; margin: 1.5rem auto; max-width: 90rem;
  padding: 0 1rem; color: #1b1b1b; background: #fff; }
h1 { margin-bottom: .3rem; }
dl.provenance { display: grid; grid-template-columns: max-content 1fr; gap: .1rem 1rem; }
dl.provenance dt { font-weight: 600; }
dl.provenance dd { margin: 0; }
.help, .judge, caption { color: #444; }
caption { caption-side: bottom; text-align: left; padding-top: .4rem; font-size: .9em; }
.scroll { overflow-x: auto; }
table.board { border-collapse: collapse; font-variant-numeric: tabular-nums; font-size: .9em; }
table.board th, table.board td { padding: .25rem .4rem; border-bottom: 1px solid #ddd;
  text-align: right; white-space: nowrap; }
table.board th[scope=row], table.board th[scope=col]:first-child { text-align: left; }
table.board th[scope=rowgroup] { text-align: left; font-style: italic; background: #f3f3f3; }
table.board thead th { position: sticky; top: 0; background: #fff; white-space: normal; }
table.board thead button { font: inherit; font-weight: 600; border: 0; background: none;
  cursor: pointer; padding: 0; color: inherit; }
table.board thead th[aria-sort=ascending] button::after { content: " \\25B2"; }
table.board thead th[aria-sort=descending] button::after { content: " \\25BC"; }
table.board button:focus-visible { outline: 2px solid #1a5fb4; }
table.board .first-rate { border-left: 2px solid #bbb; }
.ci { display: block; color: #555; font-size: .85em; }
.p { display: block; color: #555; font-size: .8em; }
sup.note { font-size: .7em; }
ol.notes { font-size: .85em; color: #444; margin: .4rem 0 0; }
ul.figures { list-style: none; display: flex; flex-wrap: wrap; gap: .8rem; padding: 0; }
ul.figures a { display: block; text-align: center; }
ul.figures img { display: block; width: 240px; height: auto; border: 1px solid #ddd; }
"""

# Sorts the entry rows of each tbody (group) by the clicked column: numbers by their
# data-value (the point estimate), text case-insensitively; empty values last both ways.
SCRIPT = """
(function () {
  "use strict";
  function sortKey(cell, numeric) {
    var raw = cell.getAttribute("data-value");
    if (raw === null || raw === "") { return null; }
    return numeric ? parseFloat(raw) : raw.toLowerCase();
  }
  function compare(a, b, ascending) {
    if (a === null || b === null) { return (a === null) - (b === null); }
    var order = a < b ? -1 : (a > b ? 1 : 0);
    return ascending ? order : -order;
  }
  function sortBy(table, header) {
    var index = Array.prototype.indexOf.call(header.parentNode.children, header);
    var ascending = header.getAttribute("aria-sort") !== "ascending";
    var numeric = header.getAttribute("data-type") === "number";
    table.querySelectorAll("thead th").forEach(function (th) {
      th.setAttribute("aria-sort", "none");
    });
    header.setAttribute("aria-sort", ascending ? "ascending" : "descending");
    table.querySelectorAll("tbody").forEach(function (body) {
      var rows = Array.prototype.slice.call(body.querySelectorAll("tr.entry"));
      rows.sort(function (x, y) {
        return compare(sortKey(x.children[index], numeric),
                       sortKey(y.children[index], numeric), ascending);
      });
      rows.forEach(function (row) { body.appendChild(row); });
    });
  }
  document.querySelectorAll("table.board").forEach(function (table) {
    table.querySelectorAll("thead th").forEach(function (header) {
      header.querySelector("button").addEventListener("click", function () {
        sortBy(table, header);
      });
    });
  });
})();
"""
