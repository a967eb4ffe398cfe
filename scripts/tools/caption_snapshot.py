"""Write (or check) the caption judge's keyword snapshot.

    python scripts/tools/caption_snapshot.py [--check] [--out PATH]

Every pair of the caption validation set, judged by the configured caption judge: one
JSON line each, with both sides' keywords and abnormal flag
(novabench.judges.keyword_snapshot). ``--check`` rewrites nothing and lists the captions
whose extraction moved.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

from novabench.judges import keyword_snapshot as snap  # noqa: E402

# The test's expected output (tests/test_keyword_snapshot.py).
SNAPSHOT = ROOT / "tests" / "snapshots" / "caption_keywords.jsonl"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="compare, write nothing")
    parser.add_argument("--out", type=Path, default=SNAPSHOT)
    args = parser.parse_args(argv)
    rows = snap.snapshot_rows(snap.configured_caption_judge())
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
