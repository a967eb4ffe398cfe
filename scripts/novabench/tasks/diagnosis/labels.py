"""Canonical diagnosis labels: what Coverage, Label recall and Entropy count.

The reading stage labels each top-1 prediction and reference with the judge's labeller
and writes the labels into the verdicts and the per-image score table (``top1_label``,
``reference_label``); statistics and figures read them from there and build no judge.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping
from typing import Any


def casefold_label(text: str) -> str:
    """The label of a judge without a labeller: case- and space-folded text."""
    return " ".join(text.casefold().split())


def diagnosis_labeler(judge: Mapping[str, Any] | None) -> Callable[[str], str]:
    """The label function of a written-out judge config (``Plan.judge``): the judge's
    ``canonical_label`` where its kind has one, else :func:`casefold_label`."""
    if judge:
        labeler = _judge_labeler(judge["kind"], json.dumps(judge.get("settings") or {}))
        if labeler is not None:
            return labeler
    return casefold_label


@functools.lru_cache(maxsize=8)
def _judge_labeler(kind: str, settings_json: str):
    # Built once per judge configuration, not once per model (it loads its tables).
    from novabench.judges import judge_kind

    return judge_kind(kind).labeler(json.loads(settings_json))
