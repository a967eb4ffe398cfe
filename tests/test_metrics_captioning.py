"""Captioning metrics: BLEU-4 against sacrebleu, METEOR with WordNet, keyword and binary F1."""

import pytest
import sacrebleu
from nltk.translate.meteor_score import meteor_score

from novabench.errors import NovaError
from novabench.judges import KeywordSet
from novabench.metrics.captioning import (
    binary_f1,
    bleu4,
    keyword_f1,
    meteor,
    score_captioning,
    sentence_bleu4,
    tokenize,
)


def verdict(modality, clinical, abnormal) -> KeywordSet:
    """A caption judge's verdict, written as the benchmark splits it (modality, clinical)."""
    return KeywordSet(frozenset(modality) | frozenset(clinical), abnormal)


REFERENCES = [
    "Axial FLAIR image shows a hyperintense lesion in the left frontal lobe (arrow).",
    "Coronal T1-weighted post-contrast image: ring-enhancing mass with central necrosis.",
    "Sagittal T2 image demonstrates a cystic lesion in the posterior fossa, no hemorrhage.",
    "Axial DWI shows restricted diffusion in the right thalamus, consistent with infarct.",
]
HYPOTHESES = [
    "Axial FLAIR image shows a hyperintense lesion in the right frontal lobe.",
    "Coronal T1 post-contrast image shows a ring-enhancing mass with necrosis.",
    "Sagittal T2-weighted image shows a cystic mass in the posterior fossa.",
    "Axial diffusion-weighted image shows restricted diffusion in the thalamus.",
]


def test_tokenize_lowercases_and_splits_punctuation_13a():
    assert tokenize("Axial T2-weighted image (2a): lesion, 1.5 cm.") == [
        "axial", "t2", "-", "weighted", "image", "(", "2a", ")", ":",
        "lesion", ",", "1.5", "cm", ".",
    ]  # fmt: skip


def _sacrebleu(refs, hyps, **kwargs) -> float:
    return sacrebleu.corpus_bleu(hyps, [refs], smooth_method="exp", force=True, **kwargs).score


def test_bleu4_equals_sacrebleu_on_the_same_tokens():
    refs = [" ".join(tokenize(t)) for t in REFERENCES]
    hyps = [" ".join(tokenize(t)) for t in HYPOTHESES]
    expected = _sacrebleu(refs, hyps, tokenize="none")
    assert 10 < expected < 90  # a real, partial match
    assert bleu4(REFERENCES, HYPOTHESES) == pytest.approx(expected, abs=1e-6)
    # And the recorded tokenizer is sacrebleu's own lower-cased 13a.
    raw = _sacrebleu(REFERENCES, HYPOTHESES, tokenize="13a", lowercase=True)
    assert bleu4(REFERENCES, HYPOTHESES) == pytest.approx(raw, abs=1e-6)


def test_bleu4_smoothing_matches_sacrebleu_exp_when_no_4gram_matches():
    refs = ["the lesion is in the left frontal lobe", "a small cyst in the pons is seen"]
    hyps = ["lesion of left frontal area here", "small pons cyst seen on image today"]
    expected = _sacrebleu(refs, hyps, tokenize="none")
    stats = sacrebleu.corpus_bleu(hyps, [refs], tokenize="none", force=True)
    assert stats.counts[3] == 0  # smoothing is what keeps the score above zero
    assert expected > 0
    assert bleu4(refs, hyps) == pytest.approx(expected, abs=1e-6)


def test_bleu4_identical_corpus_is_100():
    assert bleu4(REFERENCES, REFERENCES) == pytest.approx(100.0)
    assert sentence_bleu4(REFERENCES[0], REFERENCES[0]) == pytest.approx(100.0)


def test_bleu4_short_hypothesis_follows_nltk_convention():
    # Hand-worked: 3 of 3 unigrams, 2/2 bigrams, 1/1 trigram match; nltk counts one
    # (unmatched) 4-gram, smoothed to 1/2; brevity penalty exp(1 - 5/3).
    import math

    expected = 100 * math.exp(1 - 5 / 3) * 0.5**0.25
    assert bleu4(["a b c d e"], ["a b c"]) == pytest.approx(expected)


def test_meteor_identical_sentence(nltk_data):
    sentence = "the lesion is in the left frontal lobe ."  # 9 tokens, one chunk
    mean, per_image = meteor([sentence], [sentence], nltk_data)
    assert mean == pytest.approx(100 * (1 - 0.5 * (1 / 9) ** 3))
    assert per_image == [pytest.approx(mean)]


class _NoSynonyms:
    """A WordNet stand-in without synonyms: METEOR reduces to exact + stem matching."""

    def synsets(self, word):
        return []


def test_meteor_uses_wordnet_synonyms(nltk_data):
    ref, hyp = "a large tumor in the pons", "a large tumour in the pons"
    mean, _ = meteor([ref], [hyp], nltk_data)
    # With WordNet, tumour ~ tumor: 6 of 6 words in one chunk.
    assert mean == pytest.approx(100 * (1 - 0.5 * (1 / 6) ** 3))
    # Without synonyms: 5 of 6 match (P = R = 5/6) in 2 chunks: penalty 0.5 * (2/5)^3.
    exact_only = (5 / 6) * (1 - 0.5 * (2 / 5) ** 3)
    stub = meteor_score([tokenize(ref)], tokenize(hyp), wordnet=_NoSynonyms())
    assert stub == pytest.approx(exact_only)
    assert mean > 100 * exact_only + 15


def test_meteor_empty_hypothesis_scores_zero(nltk_data):
    mean, per_image = meteor(["a lesion", "a cyst"], ["", "a cyst"], nltk_data)
    assert per_image[0] == 0.0
    assert mean == pytest.approx(per_image[1] / 2)


def test_keyword_f1_hand_worked():
    refs = [{"a", "b", "c"}, {"x"}, set(), set(), {"a"}]
    preds = [{"a", "b", "d"}, set(), set(), {"y"}, {"a"}]
    result = keyword_f1(refs, preds)
    # Per image: 2*2/(3+3), 0, undefined (both empty), 0, 1.
    assert result["per_image"] == [pytest.approx(200 / 3), 0.0, None, 0.0, 100.0]
    assert result["macro"] == pytest.approx((200 / 3 + 100) / 4)
    assert result["n"] == 4 and result["n_both_empty"] == 1
    # Pooled counts: TP 3, 5 reference and 5 predicted keywords.
    assert result["micro"] == pytest.approx(100 * 2 * 3 / 10)
    # Union sets {a,b,c,x} vs {a,b,d,y}: TP 2.
    assert result["global"] == pytest.approx(100 * 2 * 2 / 8)


def test_keyword_f1_nothing_defined():
    result = keyword_f1([set()], [set()])
    assert result["macro"] is None and result["n"] == 0 and result["global"] is None


def test_binary_f1_hand_worked():
    result = binary_f1([True, True, True, False, False], [True, False, True, True, False])
    assert (result["tp"], result["fn"], result["fp"], result["tn"]) == (2, 1, 1, 1)
    assert result["f1"] == pytest.approx(100 * 4 / 6)
    assert result["accuracy"] == pytest.approx(60.0)
    assert binary_f1([False], [False])["f1"] is None


class _TableJudge:
    """A judge that looks captions up in a table (independent of the lexicon judge)."""

    def __init__(self, table):
        self.table = table

    def extract(self, text):
        return self.table.get(text, verdict(frozenset(), frozenset(), False))

    def identity(self):
        return {"name": "table", "version": "test"}


def _judge():
    ks = verdict
    return _TableJudge(
        {
            "Axial FLAIR: hyperintense lesion in the pons.": ks(
                frozenset({"axial", "flair"}), frozenset({"hyperintense", "lesion", "pons"}), True
            ),
            "Axial T2: hyperintense lesion in the thalamus.": ks(
                frozenset({"axial", "t2"}), frozenset({"hyperintense", "lesion", "thalamus"}), True
            ),
            "Coronal T1: normal.": ks(frozenset({"coronal", "t1"}), frozenset(), False),
        }
    )


def _records():
    return [
        {
            "filename": "case0001_001.png",
            "reference": "Axial FLAIR: hyperintense lesion in the pons.",
            "prediction": "Axial T2: hyperintense lesion in the thalamus.",
            "status": "ok",
        },
        {
            "filename": "case0001_002.png",
            "reference": "Axial FLAIR: hyperintense lesion in the pons.",
            "prediction": None,
            "status": "parse_error",
        },
        {
            "filename": "case0002_001.png",
            "reference": "Coronal T1: normal.",
            "prediction": "Coronal T1: normal.",
            "status": "ok",
        },
    ]


def test_score_captioning_summary_and_table(nltk_data):
    summary, table = score_captioning(_records(), _judge(), nltk_data)
    # Clinical per image: 2*2/(3+3); 0 (parse error -> empty caption); both empty -> left out.
    assert summary["Clinical_F1"] == pytest.approx((200 / 3 + 0) / 2)
    assert summary["Clinical_F1_n"] == 2 and summary["Clinical_F1_n_both_empty"] == 1
    # Modality per image: {axial,flair} vs {axial,t2} = 50; 0; 100.
    assert summary["Modality_F1"] == pytest.approx(50.0)
    # Binary: ref (T, T, F), pred (T, F, F): TP 1, FN 1, TN 1.
    assert summary["Binary_F1"] == pytest.approx(100 * 2 / 3)
    assert summary["Binary_accuracy"] == pytest.approx(100 * 2 / 3)
    assert summary["n_images"] == 3 and summary["n_parse_error"] == 1
    assert summary["parse_error_rate"] == pytest.approx(100 / 3)
    hyps = [
        "Axial T2: hyperintense lesion in the thalamus.",
        "",
        "Coronal T1: normal.",
    ]
    refs = [r["reference"] for r in _records()]
    assert summary["BLEU-4"] == pytest.approx(bleu4(refs, hyps))
    assert summary["METEOR"] == pytest.approx(meteor(refs, hyps, nltk_data)[0])
    assert summary["wordnet"]["wordnet_version"] == "3.0"
    assert summary["judge"] == {"name": "table", "version": "test"}
    assert summary["tokenizer"] == "lowercase+sacrebleu-13a"

    assert list(table["filename"]) == [r["filename"] for r in _records()]
    parse_error = table.iloc[1]
    assert parse_error["status"] == "parse_error"
    assert parse_error["meteor"] == 0.0 and parse_error["pred_clinical"] == ""
    assert table.iloc[0]["ref_clinical"] == "hyperintense; lesion; pons"
    assert table["clinical_f1"].isna().tolist() == [False, False, True]


def test_score_captioning_failed_requests(nltk_data):
    records = _records()
    records[0] = {**records[0], "prediction": None, "status": "error"}
    # Default: scored as an empty caption, like an image without boxes in localization.
    summary, table = score_captioning(records, _judge(), nltk_data)
    assert summary["n_error"] == 1 and summary["n_scored"] == 3
    assert summary["error_rate"] == pytest.approx(100 / 3)
    assert table.iloc[0]["meteor"] == 0.0 and summary["Clinical_F1"] == 0.0
    # Excluded: left out of every metric, still counted.
    summary, table = score_captioning(records, _judge(), nltk_data, on_error="exclude")
    assert summary["n_error"] == 1 and summary["n_scored"] == 2
    assert summary["Modality_F1"] == pytest.approx(50.0)  # images 2 and 3: 0 and 100
    assert table.iloc[0]["status"] == "error" and table["meteor"].isna().tolist()[0]
    with pytest.raises(NovaError, match="request failed"):
        score_captioning(records, _judge(), nltk_data, on_error="raise")


def test_score_captioning_rejects_bad_records(nltk_data):
    records = _records()
    with pytest.raises(NovaError, match="appears twice"):
        score_captioning([*records, records[0]], _judge(), nltk_data)
    with pytest.raises(NovaError, match="no caption text"):
        score_captioning([{**records[0], "prediction": None}], _judge(), nltk_data)
