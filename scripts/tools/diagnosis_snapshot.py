"""Write (or check) the diagnosis matcher's verdict snapshot.

    python scripts/tools/diagnosis_snapshot.py [--check] [--out PATH]

Every pair of every diagnosis validation set, judged by the configured matcher without
its embedding fallback: one JSON line each, with the verdict and the deciding rule
(novabench.judges.verdict_snapshot). ``--check`` rewrites nothing and lists the pairs
whose verdict or rule moved.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

from novabench.judges import verdict_snapshot as snap  # noqa: E402

# The test's expected output (tests/test_diagnosis_snapshot.py).
SNAPSHOT = ROOT / "tests" / "snapshots" / "diagnosis_verdicts.jsonl"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="compare, write nothing")
    parser.add_argument("--out", type=Path, default=SNAPSHOT)
    args = parser.parse_args(argv)
    rows = snap.snapshot_rows(snap.configured_matcher())
    if args.check:
        moves = snap.moved(snap.read_snapshot(args.out), rows)
        print(snap.report(moves) if moves else f"{len(rows)} pairs, none moved")
        return 1 if moves else 0
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(snap.render(rows), encoding="utf-8")
    print(f"wrote {len(rows)} pairs to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
