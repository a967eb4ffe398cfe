"""Reading and judging measured end to end on raw answers (a validation set's ``raw-answers``
measure, see ``resources/validation_sets.yaml``).

A diagnosis score rests not on a clean pair of names but on what a model wrote: the reading
stage reads the raw answer (refusals in the text, then the task's parser:
:func:`novabench.answers.read_answer`, as a ``read`` job does) and the judge decides on what
was read. Each line of such a set holds ``id``, ``split``, ``style`` (model family / answer
shape), ``reference``, ``raw`` (the answer as a model wrote it), ``hand_read`` (``status``
ok / parse_error / refusal and ``ranked``, as a person reads the answer) and ``hand_label``
(``top1``, ``top5``: does the person's reading name the reference's disease).

Measured per half: how often the reading agrees with the person's (status; status and the
top-1 name once case, spacing and end punctuation are folded), then for Top-1 and Top-5 the
judge's verdicts on the pipeline's reading against the hand labels (decided accuracy,
false-match and missed rates, undecided share, accuracy as scored, the bracket check) and,
beside them, the same judge on the hand reading, so that what the parse step costs shows.
An answer the reading leaves without a ranking (parse error, refusal) is a decided
no-match, as the score counts it. A second rater's reading and labels of the same answers
(``<set>-second-rater.jsonl``: ``id``, ``hand_read``, ``hand_label``) give the floor.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from novabench.answers import read_answer, reader_fingerprint
from novabench.errors import NovaError
from novabench.judges.base import judge_ranked
from novabench.judges.validation_stats import (
    SPLITS,
    json_lines,
    k_of_n,
    markdown_table,
    proportion,
    share,
    three_valued,
)
from novabench.tasks import get_task

RAW_FIELDS = ("id", "split", "style", "reference", "raw", "hand_read", "hand_label")
LABELS = ("top1", "top5")
#: The figures the record keeps per label (as the name-pair sets keep for Top-1).
LABEL_FIGURES = ("decided_accuracy", "decided_false_match", "decided_missed", "undecided")
MAX_EXAMPLES = 25
TASK = "diagnosis"


def folded(text: str) -> str:
    """A name as compared here: case, spacing and end punctuation folded."""
    return re.sub(r"\s+", " ", text.casefold()).strip(" .;,:*")


def pipeline_reading(pair: Mapping[str, Any]) -> dict[str, Any]:
    """The answer as the pipeline's reading stage reads it: ``{status, ranked}``."""
    record = {"filename": pair["id"], "status": "ok", "raw": pair["raw"]}
    read = read_answer(get_task(TASK), record, None)
    ranked = (read["read"] or {}).get("ranked", []) if read["status"] == "ok" else []
    return {"status": read["status"], "ranked": list(ranked)}


def hand_reading(hand_read: Mapping[str, Any]) -> dict[str, Any]:
    return {"status": hand_read["status"], "ranked": list(hand_read.get("ranked") or [])}


def same_reading(hand: Mapping[str, Any], read: Mapping[str, Any]) -> tuple[bool, bool]:
    """(the statuses agree on whether there is an answer, and the top-1 names agree too)."""
    ok = hand["status"] == "ok"
    if (read["status"] == "ok") != ok:
        return False, False
    return True, not ok or folded(read["ranked"][0]) == folded(hand["ranked"][0])


def reading_agreement(
    hands: Sequence[Mapping[str, Any]], reads: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
    same = [same_reading(h, r) for h, r in zip(hands, reads, strict=True)]
    return {
        "status": proportion(sum(s for s, _ in same), len(same)),
        "status_and_top1": proportion(sum(t for _, t in same), len(same)),
    }


def verdicts(judge: Any, pairs: Sequence[Mapping[str, Any]], reads: Sequence[Mapping]) -> list:
    """(Top-1, Top-5) verdict of each answer on its reading; no ranking: no match."""
    asked = [(r["ranked"][:5], p["reference"]) for p, r in zip(pairs, reads, strict=True)]
    have = [i for i, (ranked, _) in enumerate(asked) if ranked]
    out = [("no_match", "no_match")] * len(pairs)
    for i, verdict in zip(have, judge_ranked(judge, [asked[i] for i in have]), strict=True):
        out[i] = (verdict.top1, verdict.top5)
    return out


def label_figures(pairs: Sequence[Mapping[str, Any]], said: Sequence[str], key: str) -> dict:
    """One label's figures: the three-valued ones and the accuracy as scored."""
    rows = [({"match": bool(p["hand_label"][key])}, v) for p, v in zip(pairs, said, strict=True)]
    right = sum((v == "match") == row["match"] for row, v in rows)
    return {**three_valued(rows), "accuracy": proportion(right, len(rows))}


def _errors(pairs: Sequence[Mapping], reads: Sequence[Mapping], said: Sequence) -> list[dict]:
    """The answers whose reading or verdict differs from the person's, first ones."""
    out = []
    for pair, read, (top1, top5) in zip(pairs, reads, said, strict=True):
        hand = hand_reading(pair["hand_read"])
        wrong = [
            k
            for k, v in zip(LABELS, (top1, top5), strict=True)
            if (v == "match") != pair["hand_label"][k]
        ]
        if not same_reading(hand, read)[1] or wrong:
            out.append(
                {
                    "id": pair["id"],
                    "style": pair["style"],
                    "hand": f"{hand['status']}: {(hand['ranked'] or [''])[0]}",
                    "read": f"{read['status']}: {(read['ranked'] or [''])[0]}",
                    "labels": ", ".join(
                        f"{k} {v}" for k, v in zip(LABELS, (top1, top5), strict=True)
                    ),
                    "wrong": ", ".join(wrong),
                }
            )
    return out


def _second_rater(pairs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    rated = [p for p in pairs if "second_read" in p]
    if not rated:
        return {}
    hands = [hand_reading(p["hand_read"]) for p in rated]
    seconds = [hand_reading(p["second_read"]["hand_read"]) for p in rated]
    figures = {"n": len(rated), "reading": reading_agreement(hands, seconds)}
    for key in LABELS:
        agree = sum(p["hand_label"][key] == p["second_read"]["hand_label"][key] for p in rated)
        figures[key] = proportion(agree, len(rated))
    return {"second_rater": figures}


def split_figures(judge: Any, pairs: list[dict[str, Any]]) -> dict[str, Any]:
    """The figures of one half (see the module docstring)."""
    reads = [pipeline_reading(p) for p in pairs]
    hands = [hand_reading(p["hand_read"]) for p in pairs]
    said, alone = verdicts(judge, pairs, reads), verdicts(judge, pairs, hands)
    errors = _errors(pairs, reads, said)
    return {
        "n": len(pairs),
        "statuses": dict(Counter(r["status"] for r in reads)),
        "reading": reading_agreement(hands, reads),
        **{key: label_figures(pairs, [s[i] for s in said], key) for i, key in enumerate(LABELS)},
        "judge_alone": {
            key: label_figures(pairs, [s[i] for s in alone], key) for i, key in enumerate(LABELS)
        },
        **_second_rater(pairs),
        "errors_total": len(errors),
        "errors": errors[:MAX_EXAMPLES],
    }


def raw_agreement(judge: Any, pairs: list[dict[str, Any]]) -> dict[str, Any]:
    """Per half: the figures of reading and judging the raw answers end to end."""
    return {s: split_figures(judge, [p for p in pairs if p["split"] == s]) for s in SPLITS}


def attach_second_rater(path: Path, pairs: list[dict[str, Any]]) -> dict[str, Any]:
    """A second person's reading and labels of the same answers, given blind to the first:
    how often two people agree is the floor a reader and judge can be held to."""
    seconds = {}
    for number, row in json_lines(path):
        labels = row.get("hand_label") if isinstance(row, dict) else None
        read = row.get("hand_read") if isinstance(row, dict) else None
        if not (
            isinstance(labels, dict)
            and all(isinstance(labels.get(k), bool) for k in LABELS)
            and isinstance(read, dict)
            and "id" in row
        ):
            fix = "give every line id, hand_read {status, ranked} and hand_label {top1, top5}"
            raise NovaError(f"{path}:{number} is not a second reading of a raw answer", fix)
        seconds[row["id"]] = {"hand_read": read, "hand_label": labels}
    for pair in pairs:
        if pair["id"] in seconds:
            pair["second_read"] = seconds[pair["id"]]
    return {"path": str(path), "n": sum("second_read" in p for p in pairs)}


# --- Markdown and the one-line summary ----------------------------------------------------------


def _row(name: str, key: str, figure: str, stats: Mapping[str, Any]) -> list[str]:
    pipeline, alone = stats[key][figure], stats["judge_alone"][key][figure]
    return [name, *share(pipeline)[:2], *share(alone)[:2]]


def raw_markdown(split: str, stats: dict[str, Any], vset: Any) -> list[str]:
    lines = [f"#### {vset.title}, {vset.split_title(split)} (n = {stats['n']})", ""]
    statuses = ", ".join(f"{k} {v}" for k, v in sorted(stats["statuses"].items()))
    lines += [f"The reading's statuses: {statuses}.", ""]
    reading = stats["reading"]
    rows = [
        ["reading agrees: status", *share(reading["status"])[:2], "100%", "by definition"],
        ["reading agrees: status and top-1 name", *share(reading["status_and_top1"])[:2], "", ""],
    ]
    for key in LABELS:
        label = "Top-1" if key == "top1" else "Top-5"
        rows += [
            _row(f"{label} decided accuracy", key, "decided_accuracy", stats),
            _row(
                f"{label} false matches (of decided non-matches)", key, "decided_false_match", stats
            ),
            _row(f"{label} missed (of decided matches)", key, "decided_missed", stats),
            _row(f"{label} undecided", key, "undecided", stats),
            _row(f"{label} accuracy as scored", key, "accuracy", stats),
        ]
    header = ["figure", "reading + judge", "count", "hand reading + judge", "count"]
    lines += markdown_table(header, rows)
    if "second_rater" in stats:
        lines += ["", second_rater_line(stats["second_rater"])]
    if stats["errors"]:
        shown = f"{len(stats['errors'])} of {stats['errors_total']}"
        fields = ("id", "style", "hand", "read", "labels", "wrong")
        header = ["id", "style", "person", "reading", "verdicts", "wrong"]
        lines += ["", f"Answers read or judged otherwise than by the person ({shown}):", ""]
        lines += markdown_table(header, [[e[k] for k in fields] for e in stats["errors"]])
    return [*lines, ""]


def second_rater_line(second: Mapping[str, Any]) -> str:
    reading = second["reading"]
    return (
        f"A second rater on {second['n']} answers: status agrees "
        f"{share(reading['status'])[0]}, status and top-1 name "
        f"{share(reading['status_and_top1'])[0]}; Top-1 labels agree "
        f"{share(second['top1'])[0]}, Top-5 labels {share(second['top5'])[0]}."
    )


def raw_summary(held: Mapping[str, Any]) -> str:
    reading = held["reading"]
    parts = [
        f"reading agrees {k_of_n(reading['status'])} (status), "
        f"{k_of_n(reading['status_and_top1'])} (status and top-1 name)"
    ]
    for key in LABELS:
        figures = held[key]
        parts.append(
            f"{key} decided accuracy {k_of_n(figures['decided_accuracy'])}, false matches "
            f"{k_of_n(figures['decided_false_match'])}, undecided {k_of_n(figures['undecided'])}"
        )
    return "; ".join(parts)


# --- the record ------------------------------------------------------------------------------


def raw_set_figures(held: Mapping[str, Any]) -> dict[str, Any]:
    """What the judge record keeps of one held-out half."""
    figures = {"reading": dict(held["reading"])}
    for key in LABELS:
        figures[key] = {name: held[key][name] for name in (*LABEL_FIGURES, "accuracy")}
    return figures


def raw_pooled(sets: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The figures of several sets' held-out halves, pooled by summing their counts, with
    the fingerprint of the reader they were measured with."""

    def pooled(parts: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        return proportion(sum(p["k"] for p in parts), sum(p["n"] for p in parts))

    out: dict[str, Any] = {
        "reading": {
            k: pooled([s["reading"][k] for s in sets]) for k in ("status", "status_and_top1")
        }
    }
    for key in LABELS:
        names = (*LABEL_FIGURES, "accuracy")
        out[key] = {name: pooled([s[key][name] for s in sets]) for name in names}
    out["reader"] = reader_fingerprint(TASK)
    return out
