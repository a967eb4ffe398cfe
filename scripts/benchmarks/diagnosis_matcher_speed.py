"""Speed of the offline diagnosis matcher: time per pair, in one table.

The scorer asks the matcher about 906 images x 5 candidates per model. This times the
rule-based matcher (``embedding_fallback: false``, the configured judge) on the
hand-labelled pairs it is tuned on (the first four diagnosis sets whole, the tuning half
of the fifth; the fifth's held-out half is left unread):

- construction (tables, vocabulary, alias index), once per scoring job;
- a cold pass (every text new to the matcher's caches) and a warm pass (all cached), per
  pair, and the cold pass projected onto one model's 906 x 5 judgements;
- the cold pass as a ratio of the projected budget of 1 ms per pair.

    python scripts/benchmarks/diagnosis_matcher_speed.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

from novabench import paths  # noqa: E402
from novabench.judges.diagnosis_matcher import DiagnosisMatcher  # noqa: E402

FOLDER = paths.VALIDATION
JUDGEMENTS_PER_MODEL = 906 * 5
BUDGET_S = 1e-3  # per pair: 906 x 5 judgements then take under 5 s per model


def tuning_pairs() -> list[tuple[str, str]]:
    pairs = []
    tuned = ("diagnoses.jsonl", "diagnoses-2.jsonl", "diagnoses-3.jsonl", "diagnoses-4.jsonl")
    for name, sealed in [*((n, False) for n in tuned), ("diagnoses-5.jsonl", True)]:
        for line in (FOLDER / name).read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            if not sealed or row["split"] == "tune":
                pairs.append((row["prediction"], row["reference"]))
    return pairs


def one_run(pairs: list[tuple[str, str]]) -> tuple[float, float, float]:
    """(construction s, cold s per pair, warm s per pair) of a fresh matcher."""
    start = time.perf_counter()
    matcher = DiagnosisMatcher(embedding_fallback=False)
    built = time.perf_counter() - start
    start = time.perf_counter()
    for predicted, reference in pairs:
        matcher.match(predicted, reference)
    cold = (time.perf_counter() - start) / len(pairs)
    start = time.perf_counter()
    for predicted, reference in pairs:
        matcher.match(predicted, reference)
    warm = (time.perf_counter() - start) / len(pairs)
    return built, cold, warm


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="fresh matchers; medians shown")
    args = parser.parse_args(argv)
    pairs = tuning_pairs()
    runs = [one_run(pairs) for _ in range(args.repeat)]
    built, cold, warm = (statistics.median(column) for column in zip(*runs, strict=True))
    print(f"{len(pairs)} pairs, median of {args.repeat} fresh matchers\n")
    print("| measure | value | ratio |\n| --- | ---: | ---: |")
    print(f"| construction | {built:.3f} s | |")
    print(f"| cold, per pair | {1e3 * cold:.3f} ms | {cold / BUDGET_S:.2f} of 1 ms |")
    print(f"| warm (cached), per pair | {1e3 * warm:.4f} ms | {warm / cold:.3f} of cold |")
    print(f"| one model, 906 x 5 cold | {JUDGEMENTS_PER_MODEL * cold:.2f} s | |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
