"""Agreement of the keyword caption judge with the hand-labelled caption pairs.

Reads ``tests/data/judge_validation/captions.jsonl`` (hand keywords of both captions of a
pair, standardized jointly; see that folder's README) and prints, for one split:

- Clinical and Modality F1: per pair, the judge's F1 (its keywords of the reference against
  its keywords of the prediction, split as ``novabench.metrics.captioning`` splits them)
  against the hand F1 (the set F1 of the two sides' hand keywords). F1 of two empty sets is
  undefined, as in ``metrics.captioning.set_f1`` (the scorer leaves such an image out). The
  error of a pair is ``|judge - hand|`` when both are defined, 0 when both are undefined
  (both leave the pair out) and 100 when only one is (a pair one of them scores and the
  other leaves out). Printed: the mean absolute error per pair, the share of pairs within 5
  points, and both dataset means (which can agree while pairs do not: errors cancel).
- Keyword precision and recall (micro, clinical keywords, both captions of every pair): a
  judge keyword counts as found when it equals a hand keyword after this mapping: ``neg:X``
  is written ``no X`` (the hand form of a negated finding), words are lower-cased, split on
  anything but letters and digits and Porter-stemmed ("hyperintense" = "hyperintensity").
  Judge and labeller name most concepts alike since the judge adopted the labelling
  protocol's canonical strings; a concept the two name differently counts as a miss.
- Normal/abnormal accuracy of the judge's labels (both captions of every pair).

The judge scores a pair as the scorer does (``judges.base.judge_caption_pairs``: with
``judge_pair`` when it has one, for joint standardization, else with ``extract``).

    python scripts/benchmarks/caption_judge_agreement.py --split tune --errors
    python scripts/benchmarks/caption_judge_agreement.py --split heldout

``--errors`` lists the pairs that disagree; it is refused on the held-out split, which is
for reporting only.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

from nltk.stem.porter import PorterStemmer  # noqa: E402

from novabench.judges.base import NEGATED_PREFIX, judge_caption_pairs  # noqa: E402
from novabench.judges.keywords import KeywordJudge  # noqa: E402
from novabench.metrics.captioning import set_f1, split_keywords  # noqa: E402

CAPTIONS = ROOT / "tests" / "data" / "judge_validation" / "captions.jsonl"
_STEMMER = PorterStemmer()


def _comparable(keyword: str) -> tuple[str, ...]:
    if keyword.startswith(NEGATED_PREFIX):
        keyword = "no " + keyword[len(NEGATED_PREFIX) :]
    return tuple(_STEMMER.stem(w) for w in re.findall(r"[a-z0-9]+", keyword.lower()))


def _error(judge_f1: float | None, hand_f1: float | None) -> float:
    if judge_f1 is None and hand_f1 is None:
        return 0.0
    if judge_f1 is None or hand_f1 is None:
        return 100.0
    return abs(judge_f1 - hand_f1)


def evaluate(judge, pairs: list[dict]) -> tuple[dict, list[dict]]:
    """Summary numbers and one row per pair."""
    rows = []
    found = hand_total = judge_total = correct_labels = 0
    # The scorer's own call path: judge_pairs, judge_pair or extract, whichever it has.
    judged = judge_caption_pairs(judge, [(p["reference"], p["prediction"]) for p in pairs])
    for pair, verdicts in zip(pairs, judged, strict=True):
        sides = [split_keywords(v.keywords) for v in verdicts]
        hand = [pair["reference_labels"], pair["prediction_labels"]]
        row = {"id": pair["id"], "phenomenon": pair["phenomenon"], "sides": sides}
        for index, part in ((0, "clinical"), (1, "modality")):
            judge_f1 = set_f1(sides[0][index], sides[1][index])
            hand_f1 = set_f1(set(hand[0][part]), set(hand[1][part]))
            row[part] = (judge_f1, hand_f1, _error(judge_f1, hand_f1))
        for verdict, (clinical, _), labels in zip(verdicts, sides, hand, strict=True):
            judge_keys = {_comparable(k) for k in clinical}
            hand_keys = {_comparable(k) for k in labels["clinical"]}
            found += len(judge_keys & hand_keys)
            judge_total += len(judge_keys)
            hand_total += len(hand_keys)
            correct_labels += verdict.abnormal == labels["abnormal"]
        row["labels"] = [v.abnormal for v in verdicts]
        row["hand"] = hand
        rows.append(row)
    summary = {"pairs": len(rows)}
    for part in ("clinical", "modality"):
        errors = [r[part][2] for r in rows]
        summary[f"{part} MAE"] = statistics.fmean(errors)
        summary[f"{part} within 5"] = 100 * sum(e <= 5 for e in errors) / len(errors)
        for who, at in (("judge", 0), ("hand", 1)):
            defined = [r[part][at] for r in rows if r[part][at] is not None]
            summary[f"{part} mean ({who})"] = statistics.fmean(defined)
    summary["keyword precision"] = 100 * found / judge_total
    summary["keyword recall"] = 100 * found / hand_total
    summary["label accuracy"] = 100 * correct_labels / (2 * len(rows))
    return summary, rows


def _fmt(value: float | None) -> str:
    return "undef" if value is None else f"{value:.1f}"


def print_errors(rows: list[dict]) -> None:
    for row in rows:
        clinical, modality = row["clinical"], row["modality"]
        labels_ok = row["labels"] == [h["abnormal"] for h in row["hand"]]
        if clinical[2] <= 5 and modality[2] <= 5 and labels_ok:
            continue
        print(
            f"\n{row['id']} {row['phenomenon']}: clinical judge {_fmt(clinical[0])} hand "
            f"{_fmt(clinical[1])}; modality judge {_fmt(modality[0])} hand {_fmt(modality[1])}"
        )
        for side, (clinical_keys, modality_keys), hand, label in zip(
            ("ref", "pred"), row["sides"], row["hand"], row["labels"], strict=True
        ):
            print(f"  {side} judge: {sorted(clinical_keys)} {sorted(modality_keys)} {label}")
            hand_keys = f"{sorted(hand['clinical'])} {hand['modality']} {hand['abnormal']}"
            print(f"  {side} hand:  {hand_keys}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", choices=("tune", "heldout"), default="tune")
    parser.add_argument("--errors", action="store_true", help="list disagreeing pairs (tune)")
    args = parser.parse_args(argv)
    if args.errors and args.split != "tune":
        parser.error("--errors is for the tune split only: the held-out pairs are for reporting")
    lines = CAPTIONS.read_text(encoding="utf-8").splitlines()
    pairs = [p for p in map(json.loads, lines) if p["split"] == args.split]
    summary, rows = evaluate(KeywordJudge(), pairs)
    if args.errors:
        print_errors(rows)
    print(f"\n| {args.split} | value |\n| --- | ---: |")
    for name, value in summary.items():
        print(f"| {name} | {value:.1f} |" if isinstance(value, float) else f"| {name} | {value} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
