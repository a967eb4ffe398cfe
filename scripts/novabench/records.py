"""Prediction records: the JSONL files of ``results/<tag>/predictions/{task}/{model}.jsonl``.

One JSON object per image (the fields are documented in README.md and written by
:mod:`novabench.predict`). Reading and writing them lives here, below prediction,
scoring and the report, which all read them.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from novabench.errors import NovaError
from novabench.io import atomic_write_text

# ``no_finding``: a valid "nothing abnormal" answer; ``parse_error``: an answer that could
# not be read; ``refusal``: the model declined (novabench.refusals); ``error``: no answer
# (the request failed); ``missing``: no answer on file (an image a predictions file lacks).
STATUSES = ("ok", "no_finding", "parse_error", "refusal", "error", "missing")


def read_predictions(path: Path) -> list[dict[str, Any]]:
    """Read a prediction JSONL file written by :mod:`novabench.predict`."""
    path = Path(path)
    if not path.is_file():
        raise NovaError(f"prediction file {path} does not exist", "run the `predict` rule first")
    with open(path, encoding="utf-8") as handle:
        try:
            return [json.loads(line) for line in handle if line.strip()]
        except json.JSONDecodeError as exc:
            raise NovaError(
                f"prediction file {path} is corrupt ({exc})", f"delete {path} and re-run `predict`"
            ) from exc


def write_jsonl(records: Sequence[dict[str, Any]], path: Path) -> None:
    lines = (json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in records)
    atomic_write_text(path, "".join(lines))
