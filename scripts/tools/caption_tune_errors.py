"""Print the keyword caption judge's disagreements on the *tuning* half of the caption set.

    python scripts/tools/caption_tune_errors.py

The numbers are the judge report's (``novabench.judges.validation.caption_agreement``,
one definition for both); this tool adds the list of tuning pairs where the judge's
Clinical or Modality F1 is more than 5 points from the hand F1, or a normal/abnormal
label differs, with both sides' keywords. Only the tuning half is ever read: the held-out
half is for reporting, through ``novabench judge-report``.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

from novabench import paths  # noqa: E402
from novabench.judges import validation  # noqa: E402
from novabench.judges.keywords import KeywordJudge  # noqa: E402

CAPTIONS = paths.VALIDATION / "captions.jsonl"


def _f1(value: float | None) -> str:
    return "undefined" if value is None else f"{value:.1f}"


def print_errors(rows: list[dict]) -> None:
    for row in rows:
        (hand_c, judge_c), (hand_m, judge_m) = row["f1"]["clinical"], row["f1"]["modality"]
        labels_ok = all(hand == judge for hand, judge in row["labels"])
        if labels_ok and validation.pair_badness(row) <= 5:
            continue
        pair = row["pair"]
        print(
            f"\n{pair['id']} {pair['phenomenon']}: clinical hand {_f1(hand_c)} judge "
            f"{_f1(judge_c)}; modality hand {_f1(hand_m)} judge {_f1(judge_m)}"
        )
        sides = ("ref", "pred"), row["hand_keywords"], row["judge_keywords"], row["labels"]
        for side, hand, judge, (hand_label, judge_label) in zip(*sides, strict=True):
            print(f"  {side} hand:  {sorted(hand)} abnormal={hand_label}")
            print(f"  {side} judge: {sorted(judge)} abnormal={judge_label}")


def main() -> int:
    pairs = validation.read_pairs(CAPTIONS, validation.CAPTION_FIELDS)
    tune = [p for p in pairs if p["split"] == "tune"]
    rows = validation.caption_rows(KeywordJudge(), tune)
    print_errors(rows)
    stats = validation.caption_split(rows)
    print()
    print(
        "\n".join(
            validation.caption_markdown(
                "tune", {**stats, "worst": []}, validation.SETS_BY_KEY["captioning"]
            )
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
