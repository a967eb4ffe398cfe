"""Captioning metrics: BLEU-4 against sacrebleu, METEOR with WordNet, keyword and binary F1."""

import json

import pytest
import sacrebleu
from nltk.translate.meteor_score import meteor_score

from novabench.errors import NovaError
from novabench.judges import KeywordSet
from novabench.tasks.captioning.metrics import (
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


def test_a_refusal_is_scored_exactly_as_a_failed_request(nltk_data):
    failed, refused = _records(), _records()
    failed[0] = {**failed[0], "prediction": None, "status": "error"}
    refused[0] = {**refused[0], "prediction": None, "status": "refusal"}
    for on_error in ("empty", "exclude"):
        as_error, error_table = score_captioning(failed, _judge(), nltk_data, on_error=on_error)
        summary, table = score_captioning(refused, _judge(), nltk_data, on_error=on_error)
        assert (summary["n_refusal"], summary["n_error"]) == (1, 0)
        assert summary["refusal_rate"] == pytest.approx(100 / 3)
        for key in ("BLEU-4", "METEOR", "Clinical_F1", "Modality_F1", "Binary_F1", "n_scored"):
            assert summary[key] == as_error[key], key
        assert table.drop(columns="status").equals(error_table.drop(columns="status"))
    with pytest.raises(NovaError, match="status error or refusal"):
        score_captioning(refused, _judge(), nltk_data, on_error="raise")


# --- BERT F1 ---------------------------------------------------------------------------------
# Tiny encoders with random weights and tokenizers built offline, saved with save_pretrained:
# bert-score runs on them exactly as on roberta-large, and the values are checked against a
# direct greedy cosine matching of their token embeddings.

WORDS = [
    *("a", "an", "the", "axial", "coronal", "flair", "t2", "t1", "image", "shows"),
    *("hyperintense", "lesion", "in", "left", "right", "frontal", "lobe", "mass", "with"),
    *("necrosis", "pons", "thalamus", "normal", ":", "."),
]
LAYERS = 2


def _save_tiny_bert(folder):
    import torch
    import transformers

    folder.mkdir()
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS]
    (folder / "vocab.txt").write_text("\n".join(vocab) + "\n")
    tokenizer = transformers.BertTokenizer(str(folder / "vocab.txt"), model_max_length=64)
    config = transformers.BertConfig(
        vocab_size=len(vocab), hidden_size=16, num_hidden_layers=3, num_attention_heads=2,
        intermediate_size=32, max_position_embeddings=64,
    )  # fmt: skip
    torch.manual_seed(0)
    transformers.BertModel(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def _save_tiny_roberta(folder):
    import torch
    import transformers
    from tokenizers.pre_tokenizers import ByteLevel

    folder.mkdir()
    # Byte-level BPE: every byte is a token, plus two merges ("Ġl", "Ġle").
    tokens = ["<s>", "<pad>", "</s>", "<unk>", "<mask>", *sorted(ByteLevel.alphabet())]
    vocab = {token: i for i, token in enumerate([*tokens, "Ġl", "Ġle"])}
    (folder / "vocab.json").write_text(json.dumps(vocab))
    (folder / "merges.txt").write_text("#version: 0.2\nĠ l\nĠl e\n")
    tokenizer = transformers.RobertaTokenizer(
        str(folder / "vocab.json"), str(folder / "merges.txt"), model_max_length=256
    )
    config = transformers.RobertaConfig(
        vocab_size=len(vocab), hidden_size=16, num_hidden_layers=3, num_attention_heads=2,
        intermediate_size=32, max_position_embeddings=260, pad_token_id=1,
    )  # fmt: skip
    torch.manual_seed(1)
    transformers.RobertaModel(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def encoders(tmp_path_factory):
    root = tmp_path_factory.mktemp("encoders")
    return {
        "bert": _save_tiny_bert(root / "tiny-bert"),
        "roberta": _save_tiny_roberta(root / "tiny-roberta"),
    }


def _settings(folder, **more):
    return {"model": str(folder), "num_layers": LAYERS, **more}


def _greedy_f1(folder, reference: str, hypothesis: str) -> float:
    """BERTScore F1 x100 written out: cosine similarity of the layer-``LAYERS`` token
    embeddings, each word piece matched to its most similar piece of the other text (special
    tokens may be matched but are not averaged), F1 of the two averages."""
    import torch
    import transformers

    tokenizer = transformers.AutoTokenizer.from_pretrained(str(folder))
    model = transformers.AutoModel.from_pretrained(str(folder)).eval()
    prefix = " " if "roberta" in folder.name else ""  # RoBERTa sees a space before word one

    def embed(text):
        ids = tokenizer(prefix + text, return_tensors="pt")["input_ids"]
        with torch.no_grad():
            states = model(ids, output_hidden_states=True).hidden_states[LAYERS][0]
        return torch.nn.functional.normalize(states, dim=-1)

    ref, hyp = embed(reference), embed(hypothesis)
    similarity = hyp @ ref.T
    precision = similarity.max(dim=1).values[1:-1].mean().item()
    recall = similarity.max(dim=0).values[1:-1].mean().item()
    return 100 * 2 * precision * recall / (precision + recall)


@pytest.mark.parametrize("kind", ["bert", "roberta"])
def test_bert_f1_is_greedy_cosine_matching_of_the_encoder(encoders, kind):
    from novabench.tasks.captioning.bertscore import bert_f1

    folder = encoders[kind]
    result = bert_f1([*REFERENCES[:2], REFERENCES[0]], [*HYPOTHESES[:2], ""], _settings(folder))
    pairs = zip(REFERENCES[:2], HYPOTHESES[:2], strict=True)
    expected = [_greedy_f1(folder, r, h) for r, h in pairs]
    assert result.per_image[:2] == pytest.approx(expected, abs=1e-3)
    assert result.per_image[2] == 0.0  # an empty caption: bert-score's 0
    assert result.mean == pytest.approx(sum(expected) / 3, abs=1e-3)
    # Identical captions match themselves exactly.
    same = bert_f1(REFERENCES, REFERENCES, _settings(folder))
    assert same.per_image == pytest.approx([100.0] * 4, abs=1e-4)


def test_bert_f1_records_what_computed_it(encoders):
    from importlib.metadata import version

    from novabench.tasks.captioning.bertscore import bert_f1

    identity = bert_f1(REFERENCES, HYPOTHESES, _settings(encoders["bert"])).identity
    assert identity == {
        "status": "ok",
        "model": str(encoders["bert"]),
        "revision": None,
        "commit": None,
        "num_layers": LAYERS,
        "rescale_with_baseline": False,
        "baseline": None,
        "idf": False,
        "bert_score": version("bert-score"),
        "transformers": version("transformers"),
        "hash": f"{encoders['bert']}_L2_no-idf_version=0.3.12(hug_trans={version('transformers')})",
    }


def test_rescaling_with_a_baseline_file(encoders, tmp_path):
    from novabench.tasks.captioning.bertscore import bert_f1

    baseline = tmp_path / "baseline.tsv"  # bert-score's format: one row per layer
    baseline.write_text("LAYER,P,R,F\n" + "".join(f"{i},0.4,0.4,0.6\n" for i in range(4)))
    folder = encoders["bert"]
    raw = bert_f1(REFERENCES[:2], [HYPOTHESES[0], ""], _settings(folder))
    scaled = bert_f1(
        REFERENCES[:2],
        [HYPOTHESES[0], ""],
        _settings(folder, rescale_with_baseline=True, baseline=str(baseline)),
    )
    expected = [100 * (value / 100 - 0.6) / (1 - 0.6) for value in raw.per_image]
    assert scaled.per_image == pytest.approx(expected, abs=1e-3)
    assert scaled.per_image[1] == pytest.approx(-150.0)  # the empty caption, rescaled
    assert scaled.identity["hash"].endswith("-custom-rescaled")


def test_no_encoder_is_one_line_and_the_scoring_goes_on(nltk_data, monkeypatch, caplog):
    from novabench.tasks.captioning.bertscore import bert_f1

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    settings = {"model": "novabench-test/absent-encoder"}
    with caplog.at_level("WARNING"):
        summary, table = score_captioning(
            _records(), _judge(), nltk_data, bert_f1=lambda r, h: bert_f1(r, h, settings)
        )
    reason = (
        "BERT F1 not computed: the encoder novabench-test/absent-encoder is not in the Hugging "
        "Face cache and HF_HUB_OFFLINE is set; fix: download it once (`hf download "
        "novabench-test/absent-encoder`), point tasks.captioning.bertscore.model at a local "
        "folder, or set tasks.captioning.bertscore.enabled: false"
    )
    assert summary["BERT_F1"] is None
    assert summary["bertscore"]["status"] == "unavailable"
    assert summary["bertscore"]["reason"] == reason
    assert [r.getMessage() for r in caplog.records if r.levelname == "WARNING"] == [reason]
    assert table["bert_f1"].isna().all()
    assert summary["METEOR"] > 0 and summary["Clinical_F1"] is not None  # the rest is scored
    # The report's "–" for BERT F1 quotes this reason (the metric names where it is kept).
    from novabench.report.missing import metric_reason
    from novabench.tasks import get_task

    metric = get_task("captioning").metric("BERT_F1")
    assert metric_reason({"metrics": summary}, metric) == reason.split("; fix:")[0]


@pytest.mark.parametrize(
    ("settings", "reason"),
    [
        ({"num_layers": None}, "bert-score has no tuned layer for {folder}; fix: set "
         "tasks.captioning.bertscore.num_layers"),
        ({"num_layers": 7}, "cannot load the encoder {folder} from {folder} (AssertionError: "
         "Invalid num_layers: num_layers should be between 0 and 3 for {folder})"),
        ({"rescale_with_baseline": True}, "bert-score ships no rescaling baseline for {folder}"),
    ],
)  # fmt: skip
def test_a_local_encoder_that_cannot_be_used_is_reported(encoders, settings, reason):
    from novabench.tasks.captioning.bertscore import bert_f1

    folder = encoders["bert"]
    result = bert_f1(REFERENCES, HYPOTHESES, {**_settings(folder), **settings})
    assert result.mean is None and result.identity["status"] == "unavailable"
    assert result.identity["reason"].startswith(
        "BERT F1 not computed: " + reason.format(folder=folder)
    )


def test_a_folder_without_weights_is_reported(tmp_path):
    from novabench.tasks.captioning.bertscore import bert_f1

    result = bert_f1(["a"], ["a"], {"model": str(tmp_path)})
    assert result.identity["reason"] == (
        f"BERT F1 not computed: the encoder folder {tmp_path} holds no config.json and weights; "
        "fix: point it at a folder written by save_pretrained or `hf download --local-dir`"
    )


def test_bert_f1_per_image_feeds_the_summary_and_the_bootstrap(nltk_data, encoders):
    import numpy as np

    from novabench.tasks.captioning.bertscore import bert_f1
    from novabench.tasks.captioning.bootstrap import captioning_replicates

    settings = _settings(encoders["roberta"])
    records = _records()
    records[2] = {**records[2], "prediction": None, "status": "refusal"}
    summary, table = score_captioning(
        records, _judge(), nltk_data, bert_f1=lambda r, h: bert_f1(r, h, settings)
    )
    values = table["bert_f1"].tolist()
    assert values[1] == values[2] == 0.0  # parse error and refusal: empty captions
    assert values[0] == pytest.approx(_greedy_f1(encoders["roberta"], *_pair(records[0])), abs=1e-3)
    assert summary["BERT_F1"] == pytest.approx(sum(values) / 3)
    assert summary["bertscore"]["num_layers"] == LAYERS
    weights = np.array([[1, 1, 1], [2, 0, 1], [0, 3, 0]])
    replicates = captioning_replicates(table, None, weights)
    expected = [sum(values) / 3, (2 * values[0] + values[2]) / 3, values[1]]
    assert replicates["BERT_F1"] == pytest.approx(expected)


def _pair(record):
    return record["reference"], record["prediction"]


def test_captioning_options_default_to_the_schema_defaults():

    from novabench.tasks import get_task
    from novabench.tasks.captioning import BERTSCORE_DEFAULTS

    properties = get_task("captioning").config_schema()["properties"]
    defaults = {k: v["default"] for k, v in properties["bertscore"]["properties"].items()}
    assert defaults == BERTSCORE_DEFAULTS
    assert get_task("captioning").options({}) == {"bertscore": BERTSCORE_DEFAULTS}
    options = get_task("captioning").options({"bertscore": {"num_layers": 8}})
    assert options["bertscore"] == {**BERTSCORE_DEFAULTS, "num_layers": 8}
