"""Text into Markdown files, inert: the one escaping every Markdown table and caption uses.

The tables' cells and captions hold names from outside (the dataset's path or subset, a
judge's name and version, the paper reference's sources). A Markdown renderer passes raw
HTML through (``<script>``, ``<img onerror=...>``), a ``|`` or a line break in a cell ends
it, and ``[text](javascript:...)`` is a link. :func:`md_text` makes prose inert (HTML
characters as entities, links broken, one line); :func:`md_cell` also escapes the cell
separator; :func:`md_row` is the one way a table row is written, so every cell, whoever
adds the column, passes through :func:`md_cell`. Emphasis the tables add themselves
(``**best**``) is kept: ``*`` is not escaped.
"""

from __future__ import annotations

import html
from collections.abc import Iterable
from typing import Any


def md_text(text: Any) -> str:
    """``text`` as one line of Markdown that renders as that text and nothing else (a
    backslash escaped, so that it never escapes what follows it)."""
    one_line = " ".join(str(text).split()).replace("\\", "\\\\")
    return html.escape(one_line, quote=False).replace("](", "]\\(")


def md_cell(text: Any) -> str:
    """``text`` for a table cell: :func:`md_text`, with ``|`` escaped too."""
    return md_text(text).replace("|", "\\|")


def md_row(cells: Iterable[Any]) -> str:
    """One table row, ``| a | b |``, every cell through :func:`md_cell`."""
    return "| " + " | ".join(md_cell(cell) for cell in cells) + " |"
