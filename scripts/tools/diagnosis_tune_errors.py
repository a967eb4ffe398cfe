"""Print the diagnosis matcher's errors on the validation sets it may be tuned on.

    python scripts/tools/diagnosis_tune_errors.py [--set diagnoses-2] [--embedding]
        [--counts-only] [--phenomenon NAME]

The first four sets (``diagnoses`` ... ``diagnoses-4``) and the sixth were each measured
once and then used whole for tuning: every pair of theirs may be listed. Of a set in ``SEALED`` (the
fifth) only the tuning half is read; its held-out half is dropped unread, counts
included. It is measured once, after tuning, by ``novabench judge-report``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

from novabench import paths  # noqa: E402
from novabench.judges.diagnosis_matcher import DiagnosisMatcher  # noqa: E402

FOLDER = paths.VALIDATION
TUNING_SETS = (
    "diagnoses",
    "diagnoses-2",
    "diagnoses-3",
    "diagnoses-4",
    "diagnoses-5",
    "diagnoses-6",
)
# Sets whose held-out half is never read here.
SEALED = {"diagnoses-5"}


def counts(rows: list[dict], verdicts: list[str]) -> str:
    """Undecided pairs apart; accuracy, false matches and misses over the decided ones."""
    pairs = list(zip(rows, verdicts, strict=True))
    undecided = sum(v == "undecided" for _, v in pairs)
    decided = [(r, v == "match") for r, v in pairs if v != "undecided"]
    fp = sum(v and not r["match"] for r, v in decided)
    fn = sum(not v and r["match"] for r, v in decided)
    pos = sum(r["match"] for r, _ in decided)
    neg = len(decided) - pos
    acc = (len(decided) - fp - fn) / max(len(decided), 1)
    return (
        f"n={len(rows)} undecided={undecided}/{len(rows)}={undecided / len(rows):.1%} "
        f"decided accuracy={acc:.1%} false-match={fp}/{neg}={fp / max(neg, 1):.1%} "
        f"missed={fn}/{pos}={fn / max(pos, 1):.1%}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--set", choices=TUNING_SETS, default="diagnoses", dest="name")
    parser.add_argument("--embedding", action="store_true", help="with the embedding fallback")
    parser.add_argument("--counts-only", action="store_true", help="no pairs, only counts")
    parser.add_argument("--phenomenon", help="list only the errors of this phenomenon")
    args = parser.parse_args()
    matcher = DiagnosisMatcher(embedding_fallback=args.embedding)
    lines = (FOLDER / f"{args.name}.jsonl").read_text(encoding="utf-8").splitlines()
    rows = [json.loads(line) for line in lines if line.strip()]
    if args.name in SEALED:
        rows = [r for r in rows if r["split"] == "tune"]
    decisions = [matcher.explain(r["prediction"], r["reference"]) for r in rows]
    print(f"{args.name}: {counts(rows, [d.verdict for d in decisions])}")
    for row, decision in zip(rows, decisions, strict=True):
        if args.counts_only or (
            decision.verdict != "undecided" and decision.matched == row["match"]
        ):
            continue
        if args.phenomenon and row["phenomenon"] != args.phenomenon:
            continue
        kind = "FALSE MATCH" if decision.matched else "MISSED"
        kind = "UNDECIDED" if decision.verdict == "undecided" else kind
        print(
            f"{row['id']} {kind:11} [{row['phenomenon']}] {row['reference']!r} <- "
            f"{row['prediction']!r} ({decision.rule}"
            f"{'' if decision.similarity is None else f' {decision.similarity}'}); "
            f"label: {row['why']}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
