"""What every table shares: LaTeX escaping and its undoing, numbers, and the cells of
one entry (value, CI, best; failure shares) as the LaTeX and Markdown writers show them."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

import pandas as pd

from novabench.report import failures
from novabench.tasks import Metric


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


def format_number(value: float, decimals: int) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    return f"{value:.{decimals}f}"


def failure_columns(table: pd.DataFrame) -> list[str]:
    """The statuses shown after the metrics ("answered" first), in the table's order."""
    return [c.removesuffix("_pct") for c in table.columns if c.endswith("_pct")]


def flagged(row: pd.Series) -> bool:
    return bool(row.get("flag"))


def cell_parts(row: pd.Series, column: Metric) -> tuple[str, str | None, bool]:
    value = format_number(row[column.key], column.decimals)
    low, high = row.get(f"{column.key}_ci_low"), row.get(f"{column.key}_ci_high")
    has_ci = value != "–" and not (pd.isna(low) or pd.isna(high))
    decimals = column.decimals
    ci = f"[{format_number(low, decimals)}, {format_number(high, decimals)}]" if has_ci else None
    return value, ci, bool(row.get(f"{column.key}_best", False))


def status_cells(row: pd.Series, statuses: Sequence[str]) -> list[str]:
    """Shares per status, then the count of images excluded from scoring where known."""
    cells = [failures.share_text(row.get(f"{s}_pct", math.nan)) for s in statuses]
    if "n_excluded" in row.index:
        cells.append(format_number(row["n_excluded"], 0))
    return cells


def status_headers(table: pd.DataFrame) -> list[str]:
    headers = [
        "Answered" if s == failures.ANSWERED_KEY else failures.status_label(s)
        for s in failure_columns(table)
    ]
    return headers + (["Excluded"] if "n_excluded" in table else [])


def latex_share(text: str) -> str:
    """ "<1%" in any font encoding (text-mode "<" is "¡" in the default OT1)."""
    text = latex_escape(text).replace("–", "--")
    return text.replace("<", "$<$").replace(">", "$>$")
