"""The keyword judge's unread share: the share of a caption's content words it could not
read, carried by every verdict and into the captioning score files."""

import math

import pytest

from novabench.judges.keywords import KeywordJudge
from novabench.tasks.captioning.metrics import PER_IMAGE_COLUMNS, unread_summary


@pytest.fixture(scope="module")
def judge():
    return KeywordJudge()


def test_a_caption_in_the_lexicons_words_is_read_fully(judge):
    caption = "Axial FLAIR image shows a hyperintense lesion in the left temporal lobe."
    explained = judge.explain(caption)
    assert explained.unread == ()
    assert judge.extract(caption).unread_share == 0.0


def test_invented_words_are_their_share_of_the_content_words(judge):
    # Content words: axial, t2, shows (a scope ender: read), flibbertigibbet, zorblax; "a"
    # is a stop word, "5", "mm" and the panel label "2a" are a number, a unit and a label.
    caption = "Axial T2 shows a 5 mm flibbertigibbet zorblax (2a)."
    assert judge.explain(caption).unread == ("flibbertigibbet", "zorblax")
    assert judge.extract(caption).unread_share == pytest.approx(2 / 5)


def test_numbers_units_punctuation_and_stop_words_are_no_content_words(judge):
    for word in ("1.5", "2a", "5mm", "3t", "mm", "years", "the", "between", "a", ",", "markedly"):
        assert not judge.is_content_word(word), word
    for word in ("t2", "zorblax", "lesion", "flair", "patient"):
        assert judge.is_content_word(word), word
    # Nothing but numbers, units and stop words: nothing is left unread.
    assert judge.extract("A 3 year, 1.5T, 12 mm (2a).").unread_share == 0.0
    assert judge.extract("").unread_share == 0.0


def test_an_open_name_reads_its_words(judge):
    # "Zorblax syndrome": an unknown word before a head word becomes a keyword.
    verdict = judge.extract("Zorblax syndrome.")
    assert "zorblax syndrome" in verdict.keywords
    assert verdict.unread_share == 0.0


def test_both_sides_of_a_pair_carry_their_share(judge):
    ref, pred = judge.judge_pair("Axial FLAIR zorblax.", "T2 flibber hyperintensity.")
    assert ref.unread_share == pytest.approx(1 / 3)
    assert pred.unread_share == pytest.approx(1 / 3)


def test_the_score_summary_averages_both_sides_and_counts_pairs_read_fully(judge):
    pairs = [
        judge.judge_pair("Axial FLAIR zorblax.", "Axial FLAIR."),  # 1/3 and 0
        judge.judge_pair("Axial FLAIR.", "Coronal T2."),  # read fully
    ]
    summary = unread_summary(pairs)
    assert summary["Unread_share"] == pytest.approx(100 * (1 / 3) / 4)
    assert summary["ref_unread_share_mean"] == pytest.approx(100 * (1 / 3) / 2)
    assert summary["pred_unread_share_mean"] == 0.0
    assert (summary["pairs_read_fully"], summary["pairs_with_unread_share"]) == (1, 2)
    assert {"ref_unread_share", "pred_unread_share"} <= set(PER_IMAGE_COLUMNS)


def test_a_judge_that_gives_no_share_gives_no_summary():
    from novabench.judges.base import KeywordSet

    blank = KeywordSet(frozenset({"t2"}), False)
    summary = unread_summary([(blank, blank)])
    assert summary["Unread_share"] is None and summary["pairs_read_fully"] is None
    assert summary["pairs_with_unread_share"] == 0
    assert not math.isnan(summary["pairs_with_unread_share"])


def test_images_without_an_answer_are_not_counted_as_read_fully(judge, nltk_data):
    from novabench.tasks.captioning.metrics import score_captioning

    def record(name, prediction):
        return {"filename": name, "reference": "Axial FLAIR zorblax.", "prediction": prediction}

    records = [
        {**record("a.png", "Axial FLAIR."), "status": "ok"},
        {**record("b.png", "Coronal T2 flibber."), "status": "ok"},
        {**record("c.png", None), "status": "error"},  # scored as an empty caption
    ]
    summary, _ = score_captioning(records, judge, nltk_data)
    # The two answered pairs only: unread shares 1/3 + 0 and 1/3 + 1/3 over four captions.
    assert summary["pairs_with_unread_share"] == 2
    assert summary["Unread_share"] == pytest.approx(100 * (1 / 3) * 3 / 4)
    assert summary["pairs_read_fully"] == 0
