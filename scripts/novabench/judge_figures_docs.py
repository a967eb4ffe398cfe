"""The judges' current held-out figures as a Markdown table, written into the docs from the
record (``validation/judge_figures.json``), never typed by hand.

The block between :data:`BEGIN` and :data:`END` in each of :data:`PAGES` is generated:
``python scripts/tools/docs_judge_figures.py`` rewrites it, ``--check`` fails when it is
stale (so does ``tests/test_judge_figures_docs.py``). Only the score jobs' module
:mod:`novabench.judge_figures` reads the record for runs; this one is imported by nothing
the pipeline runs, so editing it re-runs no job.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from novabench.errors import NovaError
from novabench.judge_figures import RECORD, REMEASURE, figures_line, read_record
from novabench.judges.validation_stats import k_of_n, percent

BEGIN = "<!-- judge-figures: generated from validation/judge_figures.json; do not edit -->"
END = "<!-- /judge-figures -->"
#: The pages (from the repository root) that quote the judges' current figures.
PAGES = ("docs/judges.md", "validation/README.md")


def _share(p: Mapping[str, Any], ci: bool = False) -> str:
    text = f"{percent(p['rate'])} ({k_of_n(p)}"
    if ci and p.get("ci95"):
        low, high = p["ci95"]
        text += f", 95% CI {100 * low:.1f}-{100 * high:.1f}%"
    return text + ")"


def _diagnosis_cell(figures: Mapping[str, Any]) -> str:
    decided = figures["decided_accuracy"]
    return (
        f"undecided {_share(figures['undecided'])}; on the {decided['n']} decided: accuracy "
        f"{_share(decided, ci=True)}, false matches {_share(figures['decided_false_match'])}, "
        f"missed {_share(figures['decided_missed'])}"
    )


def _caption_cell(figures: Mapping[str, Any]) -> str:
    fully, rest = figures["clinical_f1_read_fully"], figures["clinical_f1_not_read_fully"]
    text = (
        f"Clinical F1 within {figures['clinical_f1']['mad']:.1f} points per pair "
        f"({fully['mad']:.1f} on the {fully['n']} pairs it reads fully, {rest['mad']:.1f} on "
        f"the {rest['n']} with unread words)"
    )
    confident, on_those = figures.get("confident"), figures.get("clinical_f1_confident")
    if confident and on_those:
        text += f"; confident on {_share(confident)}, {on_those['mad']:.1f} points off on those"
    return text


def _raw_answers_cell(figures: Mapping[str, Any]) -> str:
    reading, top1 = figures["reading"], figures["top1"]
    cell = (
        f"the reading agrees with a person's on {_share(reading['status_and_top1'])} of "
        f"answers (status and top-1 name); decided Top-1 accuracy "
        f"{_share(top1['decided_accuracy'])}, false matches "
        f"{_share(top1['decided_false_match'])}"
    )
    if "top5" in figures:
        cell += f"; decided Top-5 accuracy {_share(figures['top5']['decided_accuracy'])}"
    return cell


def _rows(entry: Mapping[str, Any]) -> list[str]:
    """One row per held-out set and one pooled row of a record entry."""
    name = f"{entry['identity'].get('name', entry['task'])} (code {entry['identity']['code']})"
    cell = _diagnosis_cell if entry["task"] == "diagnosis" else _caption_cell
    sets = entry.get("sets", [])
    rows = [f"| {name} | {s['set']} ({s['half']}) | {s['n']} | {cell(s)} |" for s in sets]
    pooled = entry["pooled"]
    rows.append(f"| {name} | all of them, pooled | {pooled['n']} | {cell(pooled)} |")
    for measured in (entry.get("end_to_end") or {}).get("sets", []):
        rows.append(
            f"| {name}, end to end on raw answers | {measured['set']} ({measured['half']}) | "
            f"{measured['n']} | {_raw_answers_cell(measured)} |"
        )
    return rows


def _line(entry: Mapping[str, Any]) -> str:
    """The one line a task table prints for this judge (novabench.judge_figures)."""
    name = f"{entry['identity'].get('name', entry['task'])} (code {entry['identity']['code']})"
    figures = {"task": entry["task"], "pooled": entry["pooled"], "sets": entry.get("sets", [])}
    validation = {"validated": True, "figures": figures}
    if entry.get("end_to_end"):
        validation["end_to_end"] = entry["end_to_end"]
    return f'- {entry["task"]}: "Judge: {figures_line(name, validation)}"'


def figures_block(record: Path = RECORD) -> str:
    """The generated block, markers included."""
    entries = read_record(record)
    table = ["| judge | held-out set | pairs | agreement with the hand labels |"]
    table.append("| --- | --- | ---: | --- |")
    for entry in entries:
        table += _rows(entry)
    lines = [_line(entry) for entry in entries]
    intro = f"What the task tables print for each judge of the record (`{REMEASURE}` re-measures):"
    return "\n".join([BEGIN, "", *table, "", intro, "", *lines, "", END])


def with_fresh_block(text: str, record: Path = RECORD) -> str:
    """``text`` with its marked block replaced by the record's figures."""
    start, end = text.find(BEGIN), text.find(END)
    if start < 0 or end < start:
        raise NovaError("the page has no judge-figures block", f"put {BEGIN} and {END} in it")
    return text[:start] + figures_block(record) + text[end + len(END) :]


def rewrite(page: Path, record: Path = RECORD) -> bool:
    """Replace the marked block of ``page`` with the record's figures; True if it changed."""
    text = page.read_text(encoding="utf-8")
    fresh = with_fresh_block(text, record)
    if fresh != text:
        page.write_text(fresh, encoding="utf-8")
    return fresh != text
