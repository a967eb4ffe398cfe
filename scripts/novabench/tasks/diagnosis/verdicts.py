"""Task 3's reading stage: the judge's verdict on each image's ranked diagnoses.

Per image (``judge_diagnoses``): ``top1`` and ``top5`` ("match" | "no_match" |
"undecided"; None for an image without a ranking: nothing was judged, and scores count it
as wrong, never undecided), ``decided_by`` (the judge that decided; a cascade names its
stage), ``judge_failed`` (a judge request failed or its answer was unreadable: both
verdicts undecided), ``top1_label`` (the top-1 prediction's label as Coverage and Entropy
count it; None without a prediction) and ``reference_label``. Labels are the judge's
``canonical_label`` where it has one, else the case- and space-folded text
(``label_normalization``). Scoring (:mod:`.metrics`) counts these and runs no judge.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import pandas as pd

from novabench.errors import NovaError
from novabench.judge_verdicts import RankedVerdict, judge_ranked
from novabench.metrics.status import STATUSES

_REQUIRED = ("filename", "case_id", "reference", "predictions", "status")


def predictions_list(value: Any) -> list[str]:
    if value is None or (pd.api.types.is_scalar(value) and pd.isna(value)):
        return []
    if isinstance(value, str):  # the " | "-joined form the per-image table holds
        value = value.split(" | ") if value else []
    return [str(item) for item in value if str(item).strip()]


def records_frame(records: Iterable[Mapping[str, Any]] | pd.DataFrame) -> pd.DataFrame:
    """Per-image records as a frame, checked: fields, statuses, references, filenames."""
    frame = records.copy() if isinstance(records, pd.DataFrame) else pd.DataFrame(list(records))
    missing = [column for column in _REQUIRED if column not in frame.columns]
    if frame.empty:
        raise NovaError("no diagnosis records to score", "run Task 3 inference first")
    if missing:
        raise NovaError(
            f"diagnosis records lack the field(s) {', '.join(missing)}",
            f"give every record {', '.join(_REQUIRED)}",
        )
    bad = sorted(set(frame["status"]) - set(STATUSES), key=str)
    if bad:
        raise NovaError(
            f"unknown diagnosis record status {bad}", f"use one of {', '.join(STATUSES)}"
        )
    no_reference = frame["reference"].isna() | (frame["reference"].astype(str).str.strip() == "")
    if no_reference.any():
        first = frame.loc[no_reference, "filename"].iloc[0]
        raise NovaError(
            f"{int(no_reference.sum())} diagnosis record(s) have no reference diagnosis "
            f"(first: {first})",
            "check the final_diagnosis field of the dataset",
        )
    if frame["filename"].duplicated().any():
        raise NovaError(
            "diagnosis records repeat a filename", "give one record per image (filename)"
        )
    return frame


def ranked_lists(entries: list[dict[str, Any]]) -> list[list[str]]:
    """The top five of each image's ranking; nothing for a failed prediction."""
    return [
        predictions_list(record["predictions"])[:5] if record["status"] == "ok" else []
        for record in entries
    ]


def ranked_pairs(
    entries: list[dict[str, Any]], ranked: list[list[str]]
) -> list[tuple[list[str], str]]:
    """(top five, reference) of every image with a ranking: what the judge is asked."""
    return [
        (top, str(record["reference"])) for record, top in zip(entries, ranked, strict=True) if top
    ]


def casefold_label(text: str) -> str:
    return " ".join(text.casefold().split())


def label_function(judge: Any) -> Callable[[str], str]:
    """The judge's ``canonical_label``, else case- and space-folding."""
    return getattr(judge, "canonical_label", casefold_label)


def label_normalization(judge: Any) -> str:
    return "judge.canonical_label" if hasattr(judge, "canonical_label") else "casefold"


def _ranked_verdicts(
    judge: Any, entries: list[dict[str, Any]], ranked: list[list[str]]
) -> list[RankedVerdict | None]:
    """The judge's verdict per image; None for an image without a ranking."""
    judged = ranked_pairs(entries, ranked)
    identity = judge.identity() if hasattr(judge, "identity") else {}
    name = str((identity or {}).get("name", ""))
    verdicts = iter(judge_ranked(judge, judged, name))
    return [next(verdicts) if top else None for top in ranked]


def judge_diagnoses(
    records: Iterable[Mapping[str, Any]] | pd.DataFrame, judge: Any
) -> list[dict[str, Any]]:
    """Every record's verdict (the module docstring's fields), in order. ``records`` as
    :func:`novabench.tasks.diagnosis.metrics.score_diagnosis` takes them."""
    entries = records_frame(records).to_dict("records")
    ranked = ranked_lists(entries)
    label = label_function(judge)
    out = []
    for record, top, verdict in zip(
        entries, ranked, _ranked_verdicts(judge, entries, ranked), strict=True
    ):
        out.append(
            {
                "top1": verdict.top1 if verdict else None,
                "top5": verdict.top5 if verdict else None,
                "decided_by": verdict.judge if verdict else "",
                "judge_failed": bool(verdict and verdict.failed),
                "top1_label": label(top[0]) if top else None,
                "reference_label": label(str(record["reference"])),
            }
        )
    return out


def scored_labels(verdict: Mapping[str, Any] | None) -> dict[str, bool]:
    """The agreement labels as the scores count them: only a match is correct."""
    verdict = verdict or {}
    return {
        "top1_correct": verdict.get("top1") == "match",
        "top5_correct": verdict.get("top5") == "match",
    }
