"""Snakemake's job lines, kept short enough to read.

Snakemake prints every job with its input, output and log files and the reason it runs,
each on one line: a report job reading a hundred score files gets an ``input:`` line and a
``reason: Input files updated by another job: ...`` line of thousands of characters. The
filter below, installed on Snakemake's logger by the workflow, shortens those lists to
their first files and a count (``..., and 37 more``); the files themselves are in the
rule and on disk, so nothing is lost. Parameters are already short there
(novabench.job_params.DigestParam).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

# Characters of one list shown on a line (a line stays under 500 with its label).
LIST_LIMIT = 300
# Characters of the whole reason line (several parts, each shortened first).
REASON_LIMIT = 440
# The fields of a job's log record that hold lists of files.
FILE_FIELDS = ("input", "output", "log")


def short_list(items: Sequence[str], limit: int = LIST_LIMIT) -> list[str]:
    """``items`` cut to those fitting in ``limit`` characters (at least one), with a last
    item ``and N more`` when any were left out."""
    shown: list[str] = []
    length = 0
    for item in items:
        if shown and length + len(item) + 2 > limit:
            break
        shown.append(item)
        length += len(item) + 2
    left_out = len(items) - len(shown)
    return [*shown, f"and {left_out} more"] if left_out else shown


def short_text(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, saying how many were left out."""
    if len(text) <= limit:
        return text
    note = f"... ({len(text) - limit} more characters)"
    return text[: max(0, limit - len(note))] + note


def short_reason(reason: str, limit: int = REASON_LIMIT) -> str:
    """A job's reason (parts ``label: a, b, c`` joined by ``; ``) with each file list
    shortened, then the whole cut to ``limit`` characters."""
    parts = []
    for part in reason.split("; "):
        label, colon, listed = part.partition(": ")
        if colon and len(part) > LIST_LIMIT and ", " in listed:
            part = f"{label}: {', '.join(short_list(listed.split(', ')))}"
        parts.append(part)
    return short_text("; ".join(parts), limit)


class ShortJobLines(logging.Filter):
    """Shortens the file lists and the reason of Snakemake's job records in place."""

    def filter(self, record: logging.LogRecord) -> bool:
        fields: dict[str, Any] = record.__dict__
        for name in FILE_FIELDS:
            files = fields.get(name)
            if isinstance(files, list | tuple) and all(isinstance(f, str) for f in files):
                fields[name] = short_list(list(files))
        if isinstance(fields.get("reason"), str):
            fields["reason"] = short_reason(fields["reason"])
        return True


def install(logger: logging.Logger) -> None:
    """Shorten the job lines of ``logger`` (Snakemake's), once."""
    if not any(isinstance(f, ShortJobLines) for f in logger.filters):
        logger.addFilter(ShortJobLines())
