"""How well the keyword caption judge's doubt separates the pairs it reads well, per set.

    python scripts/tools/caption_doubt_report.py SET.jsonl [SET.jsonl ...]
        [--second-rater FILE] [--half tune|heldout] [--thinned-lexicon N]

For each caption set (the format of ``validation/captions.jsonl``) it prints the share of
pairs the judge calls confident (keyword doubt at most ``CONFIDENT_DOUBT`` Clinical F1
points, :func:`novabench.caption_keywords.keyword_doubt`), the mean per-pair |Clinical F1
difference| to the hand labels on the confident pairs and on all pairs, and, with
``--second-rater`` (lines ``id``, ``reference_labels``, ``prediction_labels``: a second
person's labels of the same pairs), the second rater's mean per-pair difference from the
first. The numbers are the judge report's (``novabench.judges.validation``).

``--half`` keeps one half of each set (``captions.jsonl`` has both; tune only on ``tune``).
``--thinned-lexicon N`` reads each set N more times, each with a lexicon that has lost
some of its forms at random (seeded: 25% of the concepts named nowhere else, half of every
other concept's extra forms), the way a fresh set reads words the lexicon never saw: how
the confident threshold was chosen on the tuning half.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

from novabench.judges import validation  # noqa: E402
from novabench.judges.keywords import DEFAULT_LEXICON, KeywordJudge  # noqa: E402

# Groups whose words every caption needs to be read at all (sequence and plane).
KEPT_GROUPS = ("sequence", "plane")


def thinned_lexicon(seed: int, folder: Path) -> Path:
    """A copy of the built-in lexicon that has lost some forms at random (the docstring)."""
    text = DEFAULT_LEXICON.read_text(encoding="utf-8")
    lexicon = yaml.safe_load(text)
    rng = random.Random(seed)
    for name, group in lexicon["groups"].items():
        if name in KEPT_GROUPS:
            continue
        concepts = group["concepts"]
        for key in list(concepts):
            # A concept named nowhere else in the file can go whole; others keep their key.
            if text.count(key) == 1 and rng.random() < 0.25:
                del concepts[key]
            elif isinstance(concepts[key], list) and len(concepts[key]) > 1:
                first, *rest = concepts[key]
                concepts[key] = [first, *(f for f in rest if rng.random() >= 0.5)]
    path = folder / f"lexicon-thinned-{seed}.yaml"
    path.write_text(yaml.safe_dump(lexicon, allow_unicode=True), encoding="utf-8")
    return path


def doubt_line(name: str, stats: dict) -> str:
    confident, mad = stats["confident"], stats["clinical_f1_confident"]["mad"]
    line = (
        f"{name}: {stats['n']} pairs; confident {validation.percent(confident['rate'])} "
        f"({confident['k']}/{confident['n']}); Clinical F1 mean |difference| to the hand "
        f"labels: confident {validation._f1(mad)}, all {validation._f1(stats['clinical_f1_mad'])}"
    )
    second = stats.get("second_rater_clinical_f1")
    if second:
        line += f"; second rater to the first {validation._f1(second['mad'])} ({second['n']})"
    return line


def read_set(path: Path, half: str | None, second_rater: Path | None) -> list[dict]:
    pairs = validation.read_pairs(path, validation.CAPTION_FIELDS)
    if second_rater:
        validation._attach_second_rater(second_rater, pairs)
    return [p for p in pairs if half is None or p["split"] == half]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("sets", nargs="+", type=Path)
    parser.add_argument("--second-rater", type=Path, help="a second rater's labels of a set")
    parser.add_argument("--half", choices=validation.SPLITS)
    parser.add_argument("--thinned-lexicon", type=int, default=0, metavar="N")
    args = parser.parse_args(argv)
    judge = KeywordJudge()
    with tempfile.TemporaryDirectory() as folder:
        thinned = [
            KeywordJudge(thinned_lexicon(seed, Path(folder)))
            for seed in range(args.thinned_lexicon)
        ]
        for path in args.sets:
            pairs = read_set(path, args.half, args.second_rater)
            stats = validation.caption_split(validation.caption_rows(judge, pairs))
            print(doubt_line(path.name, stats))
            if thinned:
                rows = [row for j in thinned for row in validation.caption_rows(j, pairs)]
                label = f"{path.name}, thinned lexicon ({len(thinned)} seeds pooled)"
                print(doubt_line(label, validation.caption_split(rows)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
