"""Measure reading and judging end to end on a set of raw diagnosis answers.

    python scripts/tools/raw_answer_report.py validation/raw-diagnoses-1.jsonl
        [--second-rater FILE] [--embedding]

Each line of the set: ``id``, ``style`` (model family / answer shape), ``reference``,
``raw`` (the answer as a model wrote it), ``hand_read`` (``status`` and ``ranked`` as a
person reads the answer) and ``hand_label`` (``top1``, ``top5``). The answers go through
the pipeline's own reading (refusals in the text, then the diagnosis parser:
``novabench.answers.read_answer``) and the diagnosis matcher, exactly as a ``read`` job
reads a prediction file. Printed: how often the reading agrees with the person's
(status, and the top-1 name once case, spacing and end punctuation are folded), then the
judge's verdicts against the hand labels (decided accuracy, false matches, undecided),
once on the parser's reading and once on the hand reading, so the cost of the parse step
shows. ``--second-rater`` prints a second person's agreement with the first on the same
answers: the floor a reader and judge can be held to.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

from novabench.answers import read_answer  # noqa: E402
from novabench.judge_verdicts import judge_ranked  # noqa: E402
from novabench.judges import make_judge  # noqa: E402
from novabench.tasks import get_task  # noqa: E402


def load(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def folded(text: str) -> str:
    """A name as compared here: case, spacing and end punctuation folded."""
    return re.sub(r"\s+", " ", text.casefold()).strip(" .;,:*")


def pipeline_reading(row: dict) -> dict:
    """The answer as the pipeline's reading stage reads it: {status, ranked}."""
    record = {"filename": row["id"], "status": "ok", "raw": row["raw"]}
    read = read_answer(get_task("diagnosis"), record, None)
    ranked = (read["read"] or {}).get("ranked", []) if read["status"] == "ok" else []
    return {"status": read["status"], "ranked": list(ranked)}


def hand_reading(row: dict) -> dict:
    """The answer as the person read it: {status, ranked}."""
    return {"status": row["hand_read"]["status"], "ranked": row["hand_read"]["ranked"]}


def reading_agreement(rows: list[dict], readings: list[dict]) -> str:
    """Share of answers whose status and top-1 name the reading gives as the person did."""
    same_status = same_top1 = 0
    for row, read in zip(rows, readings, strict=True):
        hand = row["hand_read"]
        ok = hand["status"] == "ok"
        if (read["status"] == "ok") == ok:
            same_status += 1
            if not ok or folded(read["ranked"][0]) == folded(hand["ranked"][0]):
                same_top1 += 1
    n = len(rows)
    return (
        f"status agrees {same_status}/{n} = {same_status / n:.1%}; "
        f"status and top-1 name agree {same_top1}/{n} = {same_top1 / n:.1%}"
    )


def verdict_counts(rows: list[dict], readings: list[dict], judge, which: int) -> str:
    """Top-1 (``which`` 0) or Top-5 (1) verdicts of the judge against the hand labels; an
    answer without a ranking is a decided no-match, as the scores count it."""
    key = ("top1", "top5")[which]
    judged = [(r["ranked"][:5], row["reference"]) for row, r in zip(rows, readings, strict=True)]
    have = [i for i, (ranked, _) in enumerate(judged) if ranked]
    verdicts = ["no_match"] * len(rows)
    for i, verdict in zip(have, judge_ranked(judge, [judged[i] for i in have]), strict=True):
        verdicts[i] = (verdict.top1, verdict.top5)[which]
    pairs = zip(rows, verdicts, strict=True)
    decided = [(row["hand_label"][key], v == "match") for row, v in pairs if v != "undecided"]
    right = sum(hand == said for hand, said in decided)
    false = sum(said and not hand for hand, said in decided)
    negatives = sum(not hand for hand, _ in decided)
    scored = sum(v == "match" for v in verdicts) / len(rows)
    upper = sum(v != "no_match" for v in verdicts) / len(rows)
    hand_rate = sum(row["hand_label"][key] for row in rows) / len(rows)
    return (
        f"{key}: decided accuracy {right}/{len(decided)} = {right / max(len(decided), 1):.1%}, "
        f"false matches {false}/{negatives} = {false / max(negatives, 1):.1%}, undecided "
        f"{len(rows) - len(decided)}/{len(rows)}; hand rate {hand_rate:.1%} in "
        f"[{scored:.1%}, {upper:.1%}]: {'yes' if scored <= hand_rate <= upper else 'no'}"
    )


def second_rater(rows: list[dict], second: list[dict]) -> str:
    by_id = {row["id"]: row for row in second}
    paired = [(row, by_id[row["id"]]) for row in rows if row["id"] in by_id]
    readings = [hand_reading(b) for _, b in paired]
    first = [a for a, _ in paired]
    labels = [
        sum(a["hand_label"][k] == b["hand_label"][k] for a, b in paired) for k in ("top1", "top5")
    ]
    n = len(paired)
    return (
        f"second rater on {n}: {reading_agreement(first, readings)}; "
        f"top1 labels agree {labels[0]}/{n}, top5 labels agree {labels[1]}/{n}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("set", type=Path)
    parser.add_argument("--second-rater", type=Path)
    parser.add_argument("--embedding", action="store_true", help="the matcher's fallback on")
    args = parser.parse_args()
    rows = load(args.set)
    settings = {"embedding_fallback": args.embedding}
    judge = make_judge({"kind": "diagnosis-matcher", "settings": settings}, "diagnosis")
    readings = [pipeline_reading(row) for row in rows]
    hand = [hand_reading(row) for row in rows]
    print(f"{args.set.name}: {len(rows)} raw answers")
    print("reading vs the person:", reading_agreement(rows, readings))
    for label, source in (("parser + matcher", readings), ("hand reading + matcher", hand)):
        for which in (0, 1):
            print(f"{label}: {verdict_counts(rows, source, judge, which)}")
    if args.second_rater:
        print(second_rater(rows, load(args.second_rater)))


if __name__ == "__main__":
    main()
