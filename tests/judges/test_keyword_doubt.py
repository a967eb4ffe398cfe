"""The keyword judge's doubt: how far a pair's unread words could move its Clinical F1,
and the pairs it calls confident, in verdict records, score summaries and the judge
report (with a caption set's second rater)."""

import json
import subprocess
import sys

import pytest

from novabench.caption_keywords import CONFIDENT_DOUBT, is_confident, keyword_doubt, pair_doubt
from novabench.errors import NovaError
from novabench.judges.base import KeywordSet
from novabench.judges.keywords import KeywordJudge
from novabench.judges.validation import write_report
from novabench.tasks.captioning.metrics import PER_IMAGE_COLUMNS, score_captioning
from novabench.tasks.captioning.verdicts import caption_verdict
from support import DATA, ROOT

REFERENCE = "Axial FLAIR image shows a hyperintense lesion in the temporal lobe."


@pytest.fixture(scope="module")
def judge():
    return KeywordJudge()


def test_a_pair_read_fully_has_no_doubt():
    assert keyword_doubt({"edema", "pons"}, {"edema"}, (0, 0)) == 0.0


def test_one_unread_word_could_move_the_f1_down_or_up():
    # F1 50 (one of two keywords shared on each side). One unread reference word: a new
    # unmatched keyword makes it 40; one naming the prediction's "c" makes it 80.
    assert keyword_doubt({"a", "b"}, {"a", "c"}, (1, 0)) == pytest.approx(30.0)
    # F1 66.7; one unread word per side: the reference's could name the prediction's "c"
    # (F1 100, the prediction's word then no keyword) or both be new keywords (F1 40).
    assert keyword_doubt({"a"}, {"a", "c"}, (1, 1)) == pytest.approx(100 - 200 / 3)
    # With nothing unmatched to name, the two unread words could name one keyword together.
    assert keyword_doubt({"a"}, {"a"}, (1, 1)) == pytest.approx(100 - 200 / 4)


def test_many_keywords_dilute_an_unread_word():
    five = {"a", "b", "c", "d", "e"}
    # F1 100 cannot rise; one unmatched keyword more makes it 10/11.
    assert keyword_doubt(five, five, (1, 0)) == pytest.approx(100 - 1000 / 11)
    assert keyword_doubt(five, five, (1, 0)) < CONFIDENT_DOUBT < keyword_doubt({"a"}, {"a"}, (1, 0))


def test_unread_words_where_no_keyword_was_read_leave_the_f1_open():
    assert keyword_doubt(set(), set(), (2, 0)) == 100.0
    assert keyword_doubt(set(), set(), (0, 0)) == 0.0


def test_a_judge_that_does_not_count_unread_words_gives_no_doubt():
    llm_side = KeywordSet(frozenset({"edema"}), True, unread_share=None)
    assert pair_doubt(llm_side, llm_side) is None
    assert is_confident(None) is None


def test_the_keyword_judge_counts_unread_words_and_the_pair_record_carries_the_doubt(judge):
    read = judge.judge_pair(REFERENCE, "Axial FLAIR shows hyperintensity in the temporal lobe.")
    unread = judge.judge_pair(REFERENCE, "Axial FLAIR shows zorblax flibbertigibbet.")
    assert [side.unread_words for side in unread] == [0, 2]
    record = caption_verdict(read)
    assert (record["keyword_doubt"], record["confident"]) == (0.0, True)
    assert record["prediction"]["unread_words"] == 0
    record = caption_verdict(unread)
    # The prediction's two unread words could name both reference keywords it misses.
    assert record["keyword_doubt"] == 100.0
    assert record["confident"] is False
    assert caption_verdict(None) == {"judged": False, "reference": None, "prediction": None}


def test_the_score_summary_gives_the_confident_share_and_their_clinical_f1(judge, nltk_data):
    records = [
        {"filename": "a.png", "prediction": "Axial FLAIR hyperintense temporal lobe lesion."},
        {"filename": "b.png", "prediction": "Axial FLAIR shows zorblax flibbertigibbet."},
    ]
    records = [{**r, "reference": REFERENCE, "status": "ok"} for r in records]
    summary, table = score_captioning(records, judge, nltk_data)
    assert summary["Confident_share"] == 50.0 and summary["pairs_with_keyword_doubt"] == 2
    # The confident pair reads every keyword of the reference: F1 100; the other 0.
    assert summary["Clinical_F1_confident"] == 100.0 and summary["Clinical_F1"] == 50.0
    assert summary["Clinical_F1_confident_n"] == 1
    assert {"keyword_doubt", "confident"} <= set(PER_IMAGE_COLUMNS)
    assert table["confident"].tolist() == [True, False]
    assert table["keyword_doubt"].tolist() == [0.0, 100.0]


def test_failed_and_refused_answers_do_not_count_as_confident(judge, nltk_data):
    records = [
        {"filename": "a.png", "prediction": "Axial FLAIR hyperintense temporal lobe lesion."},
        {"filename": "b.png", "prediction": "Axial FLAIR shows zorblax flibbertigibbet."},
    ]
    records = [{**r, "reference": REFERENCE, "status": "ok"} for r in records]
    # Scored as empty captions: nothing to read, so no doubt, yet no answer to trust.
    records += [
        {"filename": "c.png", "reference": REFERENCE, "prediction": None, "status": "error"},
        {"filename": "d.png", "reference": REFERENCE, "prediction": None, "status": "refusal"},
    ]
    summary, _ = score_captioning(records, judge, nltk_data)
    assert summary["n_scored"] == 4
    assert summary["Confident_share"] == 50.0 and summary["pairs_with_keyword_doubt"] == 2
    assert summary["Clinical_F1_confident"] == 100.0
    assert summary["Clinical_F1_confident_n"] == 1


def second_rater_folder(tmp_path, lines):
    folder = tmp_path / "sets"
    folder.mkdir()
    (folder / "captions.jsonl").write_text((DATA / "judge_report" / "captions.jsonl").read_text())
    (folder / "captions-second-rater.jsonl").write_text(
        "".join(json.dumps(line) + "\n" for line in lines)
    )
    return folder


# A second rater of the fixture's c-01: the prediction gets a keyword the first did not
# give, so their Clinical F1 of the pair is 6/7 x100 where the first's is 100.
SECOND_C01 = {
    "id": "c-01",
    "reference_labels": {"clinical": ["hyperintense", "lesion", "temporal lobe"], "modality": []},
    "prediction_labels": {
        "clinical": ["hyperintense", "lesion", "temporal lobe", "mass"],
        "modality": [],
    },
}


def test_the_judge_report_gives_confident_pairs_and_a_caption_sets_second_rater(tmp_path):
    folder = second_rater_folder(tmp_path, [SECOND_C01])
    judges = {"keywords": {"kind": "keyword-lexicon"}}
    report = write_report(judges, folder, tmp_path / "r.json", tmp_path / "r.md")
    assert report["validation_sets"]["captioning"]["second_rater"]["n"] == 1
    held = report["judges"]["keywords"]["tasks"]["captioning"]["heldout"]
    # Every word of the three held-out pairs is read: all confident, all right.
    assert (held["confident"]["k"], held["confident"]["n"]) == (3, 3)
    assert held["clinical_f1_confident"] == {"mad": 0.0, "n": 3}
    assert held["second_rater_clinical_f1"]["mad"] == pytest.approx(100 - 600 / 7)
    md = (tmp_path / "r.md").read_text()
    assert "| pairs confident (keyword doubt <= 25 F1 points) | 100.0% | 3/3" in md
    assert "a second rater's labels to the first's | 14.3 | 1 pairs with F1 defined |" in md


def test_a_caption_second_rater_line_without_labels_names_the_line(tmp_path):
    folder = second_rater_folder(tmp_path, [{"id": "c-01", "reference_labels": {}}])
    with pytest.raises(NovaError, match=r"captions-second-rater.jsonl:1 lacks an id"):
        write_report({}, folder, tmp_path / "r.json", tmp_path / "r.md")


def test_the_doubt_tool_prints_each_sets_figures_and_the_second_rater(tmp_path):
    folder = second_rater_folder(tmp_path, [SECOND_C01])
    tool = ROOT / "scripts" / "tools" / "caption_doubt_report.py"
    argv = [sys.executable, str(tool), str(folder / "captions.jsonl"), "--half", "heldout"]
    argv += ["--second-rater", str(folder / "captions-second-rater.jsonl")]
    printed = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
    assert printed == (
        "captions.jsonl: 3 pairs; confident 100.0% (3/3); Clinical F1 mean |difference| to "
        "the hand labels: confident 0.0, all 0.0; second rater to the first 14.3 (1)\n"
    )
