"""Print the diagnosis matcher's errors on the *tuning* half of a validation set.

    python scripts/tools/diagnosis_tune_errors.py [--set diagnoses-2] [--no-embedding]
        [--counts-only] [--phenomenon NAME]

Only the tuning half's texts are ever printed: the held-out half is for reporting, so
its pairs and errors must stay unseen while the matcher or its tables change. For the
first set (``diagnoses``, whose held-out half was reported in the first tuning round)
``--counts-only`` adds the held-out half's counts; the held-out half of the second set
(``diagnoses-2``) is refused outright, counts included: it is measured once, after
tuning, by ``novabench judge-report``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

from novabench.judges.diagnosis_matcher import DiagnosisMatcher  # noqa: E402

FOLDER = ROOT / "tests" / "data" / "judge_validation"
SETS = ("diagnoses", "diagnoses-2")
# Sets whose held-out half this tool never reads, not even for counts.
SEALED = {"diagnoses-2"}


def counts(rows: list[dict], verdicts: list[bool]) -> str:
    tp = sum(v and r["match"] for r, v in zip(rows, verdicts, strict=True))
    fp = sum(v and not r["match"] for r, v in zip(rows, verdicts, strict=True))
    pos = sum(r["match"] for r in rows)
    neg = len(rows) - pos
    fn = pos - tp
    acc = (len(rows) - fp - fn) / len(rows)
    return (
        f"n={len(rows)} accuracy={acc:.1%} false-match={fp}/{neg}={fp / neg:.1%} "
        f"missed={fn}/{pos}={fn / pos:.1%}"
    )


def tune_rows(name: str) -> list[dict]:
    """The set's pairs, without the held-out half of a sealed set (dropped unread)."""
    rows = []
    for line in (FOLDER / f"{name}.jsonl").read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        if name in SEALED and row["split"] != "tune":
            continue
        rows.append(row)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--set", choices=SETS, default="diagnoses", dest="name")
    parser.add_argument("--no-embedding", action="store_true")
    parser.add_argument("--counts-only", action="store_true", help="also count held-out")
    parser.add_argument("--phenomenon", help="list only the errors of this phenomenon")
    args = parser.parse_args()
    matcher = DiagnosisMatcher(embedding_fallback=not args.no_embedding)
    rows = tune_rows(args.name)
    splits = ("tune", "heldout") if args.counts_only and args.name not in SEALED else ("tune",)
    for split in splits:
        part = [r for r in rows if r["split"] == split]
        decisions = [matcher.explain(r["prediction"], r["reference"]) for r in part]
        print(f"{args.name} {split}: {counts(part, [d.matched for d in decisions])}")
        if split != "tune" or args.counts_only:
            continue
        for row, decision in zip(part, decisions, strict=True):
            if decision.matched == row["match"]:
                continue
            if args.phenomenon and row["phenomenon"] != args.phenomenon:
                continue
            kind = "FALSE MATCH" if decision.matched else "MISSED"
            print(
                f"{row['id']} {kind:11} [{row['phenomenon']}] {row['reference']!r} <- "
                f"{row['prediction']!r} ({decision.rule}"
                f"{'' if decision.similarity is None else f' {decision.similarity}'}); "
                f"label: {row['why']}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
