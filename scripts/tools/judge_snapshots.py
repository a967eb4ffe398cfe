"""Write (or check) the offline judges' snapshots on the validation sets.

    python scripts/tools/judge_snapshots.py [diagnosis] [captions] [--check]

diagnosis: every pair of every diagnosis validation set, judged by the configured matcher
without its embedding fallback, with the verdict and the deciding rule
(novabench.judges.verdict_snapshot). captions: every pair of the caption set, both sides'
keywords, abnormal flag and rules (novabench.judges.keyword_snapshot). Both when none is
named. ``--check`` rewrites nothing and lists what moved.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

from novabench.judges import keyword_snapshot, verdict_snapshot  # noqa: E402

# Each snapshot's module, the judge it runs and its file: the expected output of
# tests/judges/test_verdict_snapshot.py and tests/judges/test_keyword_snapshot.py.
SNAPSHOTS = {
    "diagnosis": (
        verdict_snapshot,
        verdict_snapshot.configured_matcher,
        ROOT / "tests" / "snapshots" / "diagnosis_verdicts.jsonl",
    ),
    "captions": (
        keyword_snapshot,
        keyword_snapshot.configured_caption_judge,
        ROOT / "tests" / "snapshots" / "caption_keywords.jsonl",
    ),
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("snapshots", nargs="*", help=f"of {', '.join(SNAPSHOTS)} (default: all)")
    parser.add_argument("--check", action="store_true", help="compare, write nothing")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.snapshots) - set(SNAPSHOTS))
    if unknown:
        parser.error(f"no snapshot {', '.join(unknown)}; name one of {', '.join(SNAPSHOTS)}")
    status = 0
    for name in args.snapshots or SNAPSHOTS:
        snap, judge, path = SNAPSHOTS[name]
        rows = snap.snapshot_rows(judge())
        if args.check:
            moves = snap.moved(snap.read_snapshot(path), rows)
            print(f"{name}: " + (snap.report(moves) if moves else f"{len(rows)} pairs, none moved"))
            status = status or int(bool(moves))
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(snap.render(rows), encoding="utf-8")
        print(f"{name}: wrote {len(rows)} pairs to {path}")
    return status


if __name__ == "__main__":
    sys.exit(main())
