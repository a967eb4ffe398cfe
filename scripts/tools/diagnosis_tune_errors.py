"""Print the diagnosis matcher's errors on the *tuning* half of the validation pairs.

    python scripts/tools/diagnosis_tune_errors.py [--no-embedding] [--counts-only]

Only the tuning half's texts are ever printed: the held-out half is for reporting, so
its pairs and errors must stay unseen while the matcher or its tables change. For the
held-out half this prints counts only (and only with --counts-only, for the baseline).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

from novabench.judges.diagnosis_matcher import DiagnosisMatcher  # noqa: E402

PAIRS = ROOT / "tests" / "data" / "judge_validation" / "diagnoses.jsonl"


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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--no-embedding", action="store_true")
    parser.add_argument("--counts-only", action="store_true", help="also count held-out")
    args = parser.parse_args()
    matcher = DiagnosisMatcher(embedding_fallback=not args.no_embedding)
    rows = [json.loads(line) for line in PAIRS.read_text(encoding="utf-8").splitlines()]
    for split in ("tune", "heldout") if args.counts_only else ("tune",):
        part = [r for r in rows if r["split"] == split]
        decisions = [matcher.explain(r["prediction"], r["reference"]) for r in part]
        print(f"{split}: {counts(part, [d.matched for d in decisions])}")
        if split != "tune" or args.counts_only:
            continue
        for row, decision in zip(part, decisions, strict=True):
            if decision.matched != row["match"]:
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
