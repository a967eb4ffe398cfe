"""The caption judge's extraction snapshot: every caption validation pair, both sides.

One JSON line per pair of the caption validation set (``validation/captions.jsonl``), in
file order: the line and id, both texts, and for each side the keywords and the abnormal
flag the configured caption judge gives when it judges the pair (jointly, as scoring
does), the ids of the rules that fired on that caption and the one that decided its
flag. Like the diagnosis verdict snapshot (:mod:`novabench.judges.verdict_snapshot`) it
is a test's expected output, so a change to the judge or its lexicon shows exactly which
extractions it moves. Only the texts are read; the hand labels play no part.

    python scripts/tools/judge_snapshots.py captions           # rewrite the snapshot
    python scripts/tools/judge_snapshots.py captions --check   # list the moved extractions
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from novabench.judges import validation
from novabench.judges.verdict_snapshot import (
    CONFIG,
    EDITED,
    configured_judge,
    paired_rows,
    read_snapshot,
)

REWRITE = "python scripts/tools/judge_snapshots.py captions"
SIDES = ("reference", "prediction")
FIELDS = ("set", "line", "id", *SIDES, "extracted")

__all__ = ["read_snapshot"]


def configured_caption_judge(config_path: Path = CONFIG) -> Any:
    """The pipeline's caption judge (``tasks.captioning.judge`` of the config)."""
    return configured_judge("captioning", config_path)


def _side(verdict: Any, explanation: Any) -> dict[str, Any]:
    """Keywords and flag as the pair is judged; the rules that fired on the caption alone
    (each once, by id) and the one that decided its flag."""
    return {
        "keywords": sorted(verdict.keywords),
        "abnormal": bool(verdict.abnormal),
        "rules": sorted({f.rule for f in explanation.fired}),
        "decided": explanation.decided.rule,
    }


def snapshot_rows(judge: Any, folder: Path | None = None) -> list[dict[str, Any]]:
    """One row per pair of each caption validation set in ``folder``, in file order."""
    folder = validation.validation_folder(folder)
    rows = []
    for vset in validation.VALIDATION_SETS:
        if vset.task != "captioning" or not (folder / vset.filename).is_file():
            continue
        for line, pair in validation.read_numbered_pairs(folder / vset.filename, vset.fields):
            ref, pred = judge.judge_pair(pair["reference"], pair["prediction"])
            rows.append(
                {
                    "set": vset.key,
                    "line": line,
                    "id": pair["id"],
                    "reference": pair["reference"],
                    "prediction": pair["prediction"],
                    "extracted": {
                        "reference": _side(ref, judge.explain(pair["reference"])),
                        "prediction": _side(pred, judge.explain(pair["prediction"])),
                    },
                }
            )
    return rows


def render(rows: Iterable[Mapping[str, Any]]) -> str:
    return "".join(json.dumps({k: r[k] for k in FIELDS}, ensure_ascii=False) + "\n" for r in rows)


def _describe(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """What moved on one side: keywords gained and lost, the flag."""
    parts = []
    gained = sorted(set(new["keywords"]) - set(old["keywords"]))
    lost = sorted(set(old["keywords"]) - set(new["keywords"]))
    if gained:
        parts.append("+" + ", +".join(gained))
    if lost:
        parts.append("-" + ", -".join(lost))
    if old["abnormal"] != new["abnormal"]:
        flag = {True: "abnormal", False: "normal"}
        parts.append(f"{flag[old['abnormal']]} -> {flag[new['abnormal']]}")
    fired = sorted(set(new.get("rules", [])) - set(old.get("rules", [])))
    unfired = sorted(set(old.get("rules", [])) - set(new.get("rules", [])))
    if fired or unfired:
        parts.append("rules " + ", ".join([*(f"+{r}" for r in fired), *(f"-{r}" for r in unfired)]))
    if old.get("decided") != new.get("decided"):
        parts.append(f"decided by {old.get('decided')} -> {new.get('decided')}")
    return parts


def moved(expected: Sequence[Mapping[str, Any]], actual: Sequence[Mapping[str, Any]]) -> list[str]:
    """A readable line per caption whose extraction differs, or per pair one side lacks
    (the validation set was edited); empty when the two agree."""
    out = []
    for where, a, b in paired_rows(expected, actual, SIDES):
        if a is None or b is None:
            out.append(f"{where} {EDITED}")
            continue
        for side in SIDES:
            parts = _describe(a["extracted"][side], b["extracted"][side])
            if parts:
                out.append(f"{where} {b['id']} {side} {b[side]!r}: {'; '.join(parts)}")
    return out


def report(moves: Sequence[str]) -> str:
    """The message of a mismatch: how many moved, each of them, and the rewrite command."""
    return (
        f"{len(moves)} captions of the keyword snapshot moved:\n"
        + "\n".join(f"  {line}" for line in moves)
        + f"\nIf every move is intended, rewrite the snapshot: {REWRITE}"
    )
