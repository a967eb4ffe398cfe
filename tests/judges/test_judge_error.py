"""The judges' own error: the judge report's three-valued diagnosis figures and bracket
check, the caption judge's error apart for pairs it read fully, on tiny sets written here."""

import pytest

from novabench.judges.base import KeywordSet
from novabench.judges.validation import (
    SETS_BY_KEY,
    bracket_line,
    caption_agreement,
    diagnosis_agreement,
    diagnosis_markdown,
)


def pair(i, match, split="heldout"):
    return {
        "id": f"t-{i}",
        "split": split,
        "phenomenon": "test",
        "reference": f"reference {i}",
        "prediction": f"prediction {i}",
        "match": match,
    }


class ThreeValuedJudge:
    """Answers each pair's verdict from a table (by prediction)."""

    def __init__(self, verdicts):
        self.verdicts = verdicts

    def judge_ranked(self, ranked, reference):
        from novabench.judges.base import RankedVerdict

        verdict = self.verdicts[ranked[0]]
        return RankedVerdict(verdict, verdict, "table")


# Ten held-out pairs, six true matches. The judge: 3 right matches, 1 false match, 2
# undecided true matches, 1 undecided true non-match, 1 missed, 2 right non-matches.
LABELS = [True, True, True, False, True, True, False, True, False, False]
VERDICTS = [
    "match",
    "match",
    "match",
    "match",
    "undecided",
    "undecided",
    "undecided",
    "no_match",
    "no_match",
    "no_match",
]


def tiny_set():
    pairs = [pair(i, m) for i, m in enumerate(LABELS)]
    judge = ThreeValuedJudge({p["prediction"]: v for p, v in zip(pairs, VERDICTS, strict=True)})
    return judge, pairs


def test_undecided_share_and_decided_rates():
    judge, pairs = tiny_set()
    held = diagnosis_agreement(judge, pairs)["heldout"]
    assert (held["undecided"]["k"], held["undecided"]["n"]) == (3, 10)
    # Decided: 7 pairs, 5 right (3 matches, 2 non-matches).
    assert (held["decided_accuracy"]["k"], held["decided_accuracy"]["n"]) == (5, 7)
    # Decided true non-matches: pairs 3, 8, 9; pair 3 matched.
    assert (held["decided_false_match"]["k"], held["decided_false_match"]["n"]) == (1, 3)
    # Decided true matches: pairs 0, 1, 2, 7; pair 7 missed.
    assert (held["decided_missed"]["k"], held["decided_missed"]["n"]) == (1, 4)
    # As scored (undecided = no match): 6 right of 10; the two undecided true matches
    # are missed matches, the undecided non-match is right.
    assert (held["accuracy"]["k"], held["missed"]["k"], held["missed"]["n"]) == (6, 3, 6)
    assert {e["id"]: e["verdict"] for e in held["errors"]}["t-4"] == "undecided"


def test_the_hand_share_lies_in_the_bracket_or_the_report_says_not():
    judge, pairs = tiny_set()
    bracket = diagnosis_agreement(judge, pairs)["heldout"]["bracket"]
    # Scored 4/10 matches, upper bound 7/10, hand 6/10: inside.
    assert bracket == {"hand": 0.6, "scored": 0.4, "upper": 0.7, "inside": True}
    assert bracket_line(bracket) == (
        "Bracket check: the hand-labelled share of true matches, 60.0%, lies between the "
        "share scored as matches (undecided = no match), 40.0%, and the upper bound "
        "(undecided = match), 70.0%: yes."
    )
    # Relabel two decided non-matches as true matches: hand 8/10 is above the bound.
    relabelled = [{**p, "match": True} if p["id"] in ("t-8", "t-9") else p for p in pairs]
    outside = diagnosis_agreement(judge, relabelled)["heldout"]["bracket"]
    assert (outside["hand"], outside["inside"]) == (0.8, False)
    assert bracket_line(outside).endswith("70.0%: no.")


def test_the_report_table_names_decided_figures_and_the_bracket():
    judge, pairs = tiny_set()
    held = diagnosis_agreement(judge, pairs)["heldout"]
    md = "\n".join(diagnosis_markdown("heldout", held, SETS_BY_KEY["diagnosis-5"]))
    assert "| undecided share (the judge said neither) | 30.0% | 3/10 |" in md
    assert "| decided accuracy (of decided pairs) | 71.4% | 5/7 |" in md
    false_match = "false-match rate among decided pairs (of decided true non-matches)"
    assert f"| {false_match} | 33.3% | 1/3 |" in md
    assert "Bracket check:" in md and "70.0%: yes." in md


def test_a_two_valued_judge_decides_every_pair():
    class TwoValued:
        def match_ranked(self, ranked, reference):
            return True, True

    held = diagnosis_agreement(TwoValued(), [pair(0, True), pair(1, False)])["heldout"]
    assert held["undecided"]["k"] == 0
    assert held["bracket"] == {"hand": 0.5, "scored": 1.0, "upper": 1.0, "inside": False}


class UnreadJudge:
    """Keywords from a table; the unread share of each caption too."""

    def __init__(self, verdicts):
        self.verdicts = verdicts

    def extract(self, text):
        return self.verdicts[text]


def caption_pair(i, hand_ref, hand_pred):
    return {
        "id": f"c-{i}",
        "split": "heldout",
        "phenomenon": "test",
        "reference": f"ref {i}",
        "prediction": f"pred {i}",
        "reference_labels": {"clinical": hand_ref, "modality": [], "abnormal": True},
        "prediction_labels": {"clinical": hand_pred, "modality": [], "abnormal": True},
    }


def test_caption_error_apart_for_pairs_read_fully_and_the_rest():
    pairs = [
        caption_pair(0, ["edema"], ["edema"]),  # hand 100; judge 100, read fully
        caption_pair(1, ["edema"], ["edema", "mass"]),  # hand 66.7; judge 100, read fully
        caption_pair(2, ["edema"], ["edema"]),  # hand 100; judge 0, a word unread
    ]

    def kws(words, share):
        return KeywordSet(frozenset(words), True, share)

    verdicts = {
        "ref 0": kws(["edema"], 0.0),
        "pred 0": kws(["edema"], 0.0),
        "ref 1": kws(["edema"], 0.0),
        "pred 1": kws(["edema"], 0.0),
        "ref 2": kws(["edema"], 0.0),
        "pred 2": kws(["mass"], 0.25),
    }
    held = caption_agreement(UnreadJudge(verdicts), pairs)["heldout"]
    assert (held["unread_known"], held["read_fully"]) == (3, 2)
    fully = held["clinical_f1_read_fully"]
    assert fully["n"] == 2
    assert fully["mad"] == pytest.approx((0 + (100 - 200 / 3)) / 2)
    assert held["clinical_f1_not_read_fully"] == {"mad": pytest.approx(100.0), "n": 1}


def test_a_caption_judge_without_unread_shares_has_no_split():
    pairs = [caption_pair(0, ["edema"], ["edema"])]
    verdicts = {"ref 0": KeywordSet(frozenset({"edema"}), True)}
    verdicts["pred 0"] = verdicts["ref 0"]
    held = caption_agreement(UnreadJudge(verdicts), pairs)["heldout"]
    assert (held["unread_known"], held["read_fully"]) == (0, 0)
    assert held["clinical_f1_read_fully"] == {"mad": None, "n": 0}
