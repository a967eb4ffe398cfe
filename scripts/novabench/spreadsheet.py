"""CSV files for people: no cell a spreadsheet would run as a formula.

Every CSV the pipeline writes for people to open (per-image scores, statistics, tables,
judge agreement, audit sheets) holds text from outside: model answers, dataset names and
diagnoses. Excel, LibreOffice and Google Sheets run a cell that starts with ``=``, ``+``,
``-``, ``@``, a tab or a carriage return as a formula (``=cmd|' /C calc'!A0``), so such a
text cell is written with a leading single quote, the spreadsheets' own "this is text"
mark (OWASP's advice on CSV injection). Numbers, including negative ones, are left as
they are. :func:`read_csv` removes the quote again, so the pipeline reads back exactly
the text it wrote.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
QUOTE = "'"


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def escape_cell(value: Any) -> Any:
    """``value`` with a leading quote when a spreadsheet would read it as a formula; a text
    that already starts with quotes before such a character gets one more, so that
    :func:`unescape_cell` gives back exactly the text."""
    if not isinstance(value, str):
        return value
    if value.lstrip(QUOTE).startswith(FORMULA_START) and not _is_number(value):
        return QUOTE + value
    return value


def unescape_cell(value: Any) -> Any:
    """The text :func:`escape_cell` was given."""
    if isinstance(value, str) and value.startswith(QUOTE):
        rest = value.lstrip(QUOTE)
        if rest.startswith(FORMULA_START) and not _is_number(rest):
            return value[1:]
    return value


def spreadsheet_safe(frame: pd.DataFrame) -> pd.DataFrame:
    """A copy of ``frame`` whose text cells and column names cannot run as formulas."""
    safe = frame.copy()
    for column in safe.columns:
        if not pd.api.types.is_numeric_dtype(safe[column]):
            safe[column] = safe[column].map(escape_cell)
    safe.columns = [escape_cell(c) for c in safe.columns]
    return safe


def write_csv(frame: pd.DataFrame, path: Path | str, **options: Any) -> None:
    """``frame.to_csv(path, **options)`` with every text cell made safe."""
    spreadsheet_safe(frame).to_csv(path, **options)


def read_csv(path: Path | str, **options: Any) -> pd.DataFrame:
    """``pd.read_csv(path, **options)`` of a file :func:`write_csv` wrote, its text as given."""
    frame = pd.read_csv(path, **options)
    for column in frame.columns:
        if not pd.api.types.is_numeric_dtype(frame[column]):
            frame[column] = frame[column].map(unescape_cell)
    frame.columns = [unescape_cell(c) for c in frame.columns]
    return frame
