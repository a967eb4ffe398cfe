"""Prediction and verdict records: the JSONL files of
``results/<tag>/predictions/{task}/{model}.jsonl`` and
``results/<tag>/verdicts/{task}/{judge}/{model}.jsonl``.

One JSON object per image (the fields are documented in docs/outputs.md; prediction records are
written by :mod:`novabench.predict`, verdict records by :mod:`novabench.reading`). Reading
and writing them lives here, below prediction, reading, scoring and the report.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from novabench.errors import NovaError
from novabench.io import atomic_write_text

# How a request went, in a prediction record: ``ok`` (an answer arrived), ``refusal`` (the
# API flagged the answer as one), ``error`` (no answer: the request failed) or ``missing``
# (no answer on file: an image a predictions file lacks). Nothing read from the text.
PREDICTION_STATUSES = ("ok", "refusal", "error", "missing")
# What reading the answer found, in a verdict record (and how scores count images):
# ``no_finding``: a valid "nothing abnormal" answer; ``parse_error``: an answer that could
# not be read; ``refusal``: the model declined (flagged by the API or recognized in the
# text by novabench.refusals); ``error`` and ``missing`` as above.
STATUSES = ("ok", "no_finding", "parse_error", "refusal", "error", "missing")


def read_predictions(path: Path) -> list[dict[str, Any]]:
    """Read a prediction JSONL file written by :mod:`novabench.predict`."""
    return _read_jsonl(Path(path), "prediction", "predict")


def read_verdicts(path: Path) -> list[dict[str, Any]]:
    """Read a verdict JSONL file written by :mod:`novabench.reading`."""
    return _read_jsonl(Path(path), "verdict", "read")


def _read_jsonl(path: Path, what: str, rule: str) -> list[dict[str, Any]]:
    if not path.is_file():
        raise NovaError(f"{what} file {path} does not exist", f"run the `{rule}` rule first")
    records = []
    for number, value, problem in json_lines(path):
        if problem is not None:
            raise NovaError(
                f"{what} file {path} is corrupt (line {number}: {problem})",
                f"delete {path} and re-run `{rule}`",
            )
        records.append(value)
    return records


def json_lines(path: Path) -> Iterator[tuple[int, Any, str | None]]:
    """Each non-blank line of a JSON Lines file as (line number, value, None), or as
    (line number, None, problem) when the line is not UTF-8, not JSON, nested too deeply
    or holds an integer too long to read: a reader names file and line instead of raising
    a traceback."""
    with open(path, "rb") as handle:
        for number, data in enumerate(handle, 1):
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError as exc:
                byte = data[exc.start]
                yield number, None, f"not UTF-8 (byte 0x{byte:02x} at column {exc.start + 1})"
                continue
            if not text.strip():
                continue
            try:
                yield number, json.loads(text), None
            except json.JSONDecodeError as exc:
                yield number, None, _json_problem(text.rstrip(), exc)
            except RecursionError:
                yield number, None, "nested too deeply to read"
            except ValueError:  # after JSONDecodeError, its subclass: Python's digit limit
                limit = sys.get_int_max_str_digits()
                yield number, None, f"an integer of over {limit} digits, too long to read"


def _json_problem(text: str, exc: json.JSONDecodeError) -> str:
    """Why a line is not JSON, in words."""
    if exc.pos >= len(text):  # the decoder wanted more: the line was cut short
        return "not valid JSON: the line ends inside its JSON value"
    return f"not valid JSON at column {exc.colno} ({exc.msg})"


def write_jsonl(records: Sequence[dict[str, Any]], path: Path) -> None:
    lines = (json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in records)
    atomic_write_text(path, "".join(lines))
