"""Rewrite (or check) the judges' current held-out figures in docs/judges.md and
validation/README.md from the record, validation/judge_figures.json
(novabench.judge_figures_docs).

    python scripts/tools/docs_judge_figures.py [--check]

``--check`` rewrites nothing and exits 1 when the page's block is stale.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

from novabench.judge_figures_docs import PAGES, rewrite, with_fresh_block  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only check; exit 1 if stale")
    args = parser.parse_args()
    pages = [ROOT / page for page in PAGES]
    if args.check:
        stale = [
            p
            for p in pages
            if with_fresh_block(p.read_text(encoding="utf-8")) != p.read_text(encoding="utf-8")
        ]
        for page in stale:
            print(f"{page.relative_to(ROOT)}: the judge figures are stale; run {sys.argv[0]}")
        if not stale:
            print("judge figures up to date")
        return 1 if stale else 0
    for page in pages:
        changed = rewrite(page)
        print(f"{page.relative_to(ROOT)}: {'rewritten' if changed else 'already up to date'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
