"""The LLM judge (captioning keywords, paired or per caption; diagnosis Top-k) against a
scripted chat server.

Each test starts ``openai_server.FakeOpenAI`` with a script that answers the judge's prompts
the way an LLM might (fenced JSON, single quotes, strings for lists, variant spellings) and
asserts what the judge made of them, what the server received, and what scoring wrote.
Expected keyword sets and scores are worked out by hand in the comments.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import json
import re
import threading
import time

import pandas as pd
import pytest
import yaml

from adversarial_text import SHAPES, assert_linear_time
from novabench.catalog import expand_models
from novabench.code_fingerprint import code_fingerprint
from novabench.config import read_config
from novabench.errors import ConfigError, NovaError
from novabench.judges import KeywordSet, judge_caption_pairs, judge_kind, make_judge
from novabench.judges.llm import (
    NO_DESCRIPTION,
    LLMDiagnosisJudge,
    LLMKeywordJudge,
    LLMPairedCaptionJudge,
    UnreadableAnswer,
    check_settings,
    prompt_paths,
    read_first_match,
    read_keywords,
    read_paired,
)
from novabench.predict import run_predictions
from novabench.score import score_predictions
from novabench.tasks.captioning.metrics import score_captioning
from novabench.tasks.diagnosis.metrics import score_diagnosis
from openai_server import Fail, FakeOpenAI, Reply
from support import NO_LIVE_CHECK, ROOT, diagnosis_of, free_port, judge_backend, pair_of, snakemake
from upstream import CASES, IMAGES


def verdict(modality, clinical, abnormal) -> KeywordSet:
    """A caption judge's verdict, written as the benchmark splits it (modality, clinical)."""
    return KeywordSet(frozenset(modality) | frozenset(clinical), abnormal)


PROMPTS = ROOT / "config" / "prompts"
JUDGE_PROMPTS = ROOT / "scripts" / "novabench" / "resources" / "prompts"
KEYWORDS_PROMPT = JUDGE_PROMPTS / "judge-keywords-v1.txt"
PAIRED_PROMPT = JUDGE_PROMPTS / "judge-caption-paired-v1.txt"
DIAGNOSIS_PROMPT = JUDGE_PROMPTS / "judge-diagnosis-v1.txt"


def judge_settings(
    server: FakeOpenAI, max_failure_rate: float = 0, protocol: str | None = None, **backend_settings
) -> dict:
    settings = {
        "backend": judge_backend(server, **backend_settings),
        "max_failure_rate": max_failure_rate,
        **NO_LIVE_CHECK,
    }
    return settings if protocol is None else {**settings, "protocol": protocol}


def caption_of(prompt: str) -> str:
    """The caption the keyword prompt carries (between its two fixed headings)."""
    return prompt.split("Description:\n", 1)[1].split("\n\nAnswer with", 1)[0]


def paired_answer(gt: dict, pred: dict, gt_label: str, pred_label: str, **extra) -> str:
    """A paired judge's answer in the prompt's form (raw keywords as the standardized)."""
    answer = {
        "raw_keywords": {"gt": gt, "pred": pred},
        "standardized_keywords": {"gt": gt, "pred": pred},
        "gt_label": gt_label,
        "pred_label": pred_label,
        "labels_agree": gt_label.lower() == pred_label.lower(),
        **extra,
    }
    return json.dumps(answer)


# --- captioning: keywords -----------------------------------------------------------------

FLAIR = "Axial FLAIR image shows a hyperintense mass in the right frontal lobe."
T1C = "Coronal T1-weighted post-gadolinium image: ring-enhancing lesion without hemorrhage."
NORMAL = "Sagittal T2 image without abnormality."
# What an LLM might answer: a fence around JSON; Python-style quotes, a trailing
# comma and a string for a list; abbreviations and capitals.
ANSWERS = {
    FLAIR: '```json\n{"sequence": ["FLAIR"], "plane": ["Axial"], '
    '"anatomy": ["Right", "Frontal lobe"], "characteristics": ["Hyperintense"], '
    '"findings": ["Mass"], "negated_findings": [], "label": "abnormal"}\n```',
    T1C: "{'sequence': 'T1-weighted post-gadolinium', 'plane': ['coronal'], "
    "'characteristics': ['Ring-enhancing'], 'findings': ['lesion', 'no hemorrhage'], "
    "'label': 'Abnormal',}",
    NORMAL: '{"sequence": ["T2WI"], "plane": ["sagittal"], "anatomy": [], '
    '"negated_findings": ["abnormality"], "label": "normal"}',
}
EXPECTED = {
    FLAIR: verdict(
        frozenset({"flair", "axial"}),
        frozenset({"right", "frontal lobe", "hyperintense", "mass"}),
        True,
    ),
    # the sequence string splits into t1 (modality) and post-contrast (clinical); "no
    # hemorrhage" in the findings list is a negated finding
    T1C: verdict(
        frozenset({"t1", "coronal"}),
        frozenset({"post-contrast", "ring enhancing", "lesion", "neg:hemorrhage"}),
        True,
    ),
    NORMAL: verdict(frozenset({"t2", "sagittal"}), frozenset({"neg:abnormality"}), False),
}


def test_keyword_answers_are_read_tolerantly_and_normalized(tmp_path):
    with FakeOpenAI(lambda seen: Reply(ANSWERS[caption_of(seen.prompt)])) as server:
        judge = LLMKeywordJudge("judge", judge_settings(server), cache_dir=tmp_path)
        got = judge.extract_many([FLAIR, T1C, "", NORMAL, FLAIR])
        assert got[:3] == [
            EXPECTED[FLAIR],
            EXPECTED[T1C],
            verdict(frozenset(), frozenset(), False),
        ]
        assert got[3:] == [EXPECTED[NORMAL], EXPECTED[FLAIR]]
        # one request per distinct non-empty caption, greedy and short by default
        assert sorted(caption_of(s.prompt) for s in server.requests) == sorted(ANSWERS)
        body = server.requests[0].body
        assert body["temperature"] == 0 and body["max_tokens"] == 2048
        assert body["model"] == "judge-llm"
    identity = judge.identity()
    assert identity["name"] == "llm/judge-llm" and identity["task"] == "captioning"
    assert identity["protocol"] == "per-caption"
    assert identity["prompt"] == "judge-keywords-v1.txt"
    assert identity["prompt_sha256"] == hashlib.sha256(KEYWORDS_PROMPT.read_bytes()).hexdigest()
    assert identity["backend"]["temperature"] == 0 and "api_key_env" not in identity["backend"]
    assert judge.usage()["sent"] == 3 and judge.usage()["unreadable"] == 0


@pytest.mark.parametrize(
    "raw, expected",
    [
        ('{"sequence": ["T2-FLAIR", "DWI/ADC"], "plane": "transverse", "label": "abnormal"}',
         ({"flair", "dwi", "axial"}, {"adc"}, True)),  # adc is not a modality word
        ('{"Sequences": ["t1 C+"], "Imaging characteristics": ["High-signal"], '
         '"is_abnormal": false, "label": "Normal."}',
         ({"t1"}, {"post-contrast", "high signal"}, False)),
        # a string for a list; "no" negates, "absent septum pellucidum" is a finding
        ('{"findings": "edema, no midline shift; absent septum pellucidum", "label": "abnormal"}',
         (set(), {"edema", "neg:midline shift", "absent septum pellucidum"}, True)),
    ],
)  # fmt: skip
def test_keyword_normalization_cases(raw, expected):
    modality, clinical, abnormal = expected
    assert read_keywords(raw) == verdict(frozenset(modality), frozenset(clinical), abnormal)


@pytest.mark.parametrize(
    "raw",
    [
        "I cannot assess this description.",
        '{"sequence": ["t1"]}',  # no label
        '{"sequence": [], "label": "normal or abnormal"}',  # the template copied
        '{"label": "abnormal"}',  # no keyword list at all
    ],
)
def test_unreadable_keyword_answers_are_refused(raw):
    with pytest.raises(ValueError):
        read_keywords(raw)


def test_a_keyword_answer_over_the_cap_is_unreadable():
    def answer(n):
        return json.dumps({"findings": [f"finding {i}" for i in range(n)], "label": "abnormal"})

    assert len(read_keywords(answer(100)).keywords) == 100
    with pytest.raises(UnreadableAnswer, match="101 keywords for one caption, more than 100"):
        read_keywords(answer(101))
    paired = {
        "standardized_keywords": {"gt": {"findings": ["mass"]}, "pred": {"findings": ["mass"]}},
        "raw_keywords": {"gt": {"findings": "a, " * 100 + "b"}, "pred": {}},
        "gt_label": "abnormal",
        "pred_label": "abnormal",
    }
    with pytest.raises(UnreadableAnswer, match="101 keywords"):
        read_paired(json.dumps(paired))


# --- captioning: one request per (reference, prediction) pair ---------------------------------

# Three pairs whose standardized keywords are worked out by hand below. The raw keywords
# differ between the two sides ("lateral ventricles" / "ventricular system", "oedema" /
# "edema around the ventricles"); the judge standardizes them jointly.
HYDRO_REF = "Axial FLAIR: enlarged lateral ventricles with periventricular oedema."
HYDRO_PRED = "Axial T2 image shows a dilated ventricular system and edema around the ventricles."
CLEAN_REF = "Coronal T1 image: no abnormality."
CLEAN_PRED = "Coronal T1 image shows a small meningioma."
CHIARI_REF = "Sagittal T2: cerebellar tonsillar herniation."
CHIARI_PRED = "Sagittal T2 image without abnormality."
STANDARDIZED = {
    (HYDRO_REF, HYDRO_PRED): (
        {"anatomy": ["ventricles"], "imaging_characteristics": ["dilatation"],
         "findings": ["periventricular edema"], "sequence_and_plane": ["axial FLAIR"]},
        {"anatomy": ["ventricles"], "imaging_characteristics": ["dilatation"],
         "findings": ["edema"], "sequence_and_plane": ["axial", "T2-weighted"]},
        "abnormal", "abnormal", {},
    ),
    (CLEAN_REF, CLEAN_PRED): (
        {"negated_findings": ["no abnormality"], "sequence_and_plane": ["coronal", "t1"]},
        {"findings": ["meningioma"], "imaging_characteristics": ["small"],
         "sequence_and_plane": ["coronal", "t1"]},
        "normal", "abnormal", {},
    ),
    (CHIARI_REF, CHIARI_PRED): (
        {"anatomy": ["cerebellar tonsils"], "findings": ["tonsillar herniation"],
         "sequence_and_plane": ["sagittal", "t2"]},
        {"negated_findings": ["no abnormality"], "sequence_and_plane": ["sagittal", "t2"]},
        # the judge says the labels agree although they differ: the labels count
        "abnormal", "normal", {"labels_agree": True},
    ),
}  # fmt: skip
RAW_HYDRO = {
    "gt": {"anatomy": ["lateral ventricles"], "imaging_characteristics": ["enlarged"],
           "findings": ["periventricular oedema"], "sequence_and_plane": ["Axial", "FLAIR"]},
    "pred": {"anatomy": ["ventricular system"], "imaging_characteristics": ["dilated"],
             "findings": ["edema around the ventricles"],
             "sequence_and_plane": ["axial", "T2"]},
}  # fmt: skip


def paired_server_answer(pair: tuple[str, str]) -> str:
    gt, pred, gt_label, pred_label, extra = STANDARDIZED[pair]
    answer = json.loads(paired_answer(gt, pred, gt_label, pred_label))
    if pair == (HYDRO_REF, HYDRO_PRED):
        answer["raw_keywords"] = RAW_HYDRO
    return json.dumps({**answer, **extra})


def test_the_paired_judge_sends_one_request_per_pair_with_both_captions(tmp_path):
    no_prediction = (CHIARI_REF, "")
    answers = {
        **{pair: paired_server_answer(pair) for pair in STANDARDIZED},
        # the judge lists a keyword for a missing prediction: it must not count
        (CHIARI_REF, NO_DESCRIPTION): paired_server_answer((CHIARI_REF, CHIARI_PRED)),
    }
    with FakeOpenAI(lambda seen: Reply(answers[pair_of(seen.prompt)])) as server:
        judge = make_judge(
            {"name": "judge", "kind": "llm", "settings": judge_settings(server)},
            "captioning",
            cache_dir=tmp_path,
        )
        assert isinstance(judge, LLMPairedCaptionJudge) and not hasattr(judge, "extract")
        pairs = [(HYDRO_REF, HYDRO_PRED), (CLEAN_REF, CLEAN_PRED), no_prediction, ("", "")]
        got = judge.judge_pairs([*pairs, (HYDRO_REF, HYDRO_PRED)])
        # one request per distinct pair with any text, each carrying both captions
        assert sorted(pair_of(s.prompt) for s in server.requests) == sorted(
            [(HYDRO_REF, HYDRO_PRED), (CLEAN_REF, CLEAN_PRED), (CHIARI_REF, NO_DESCRIPTION)]
        )
        assert server.requests[0].body["max_tokens"] == 2048
        # the public single-pair call (as a validation report would make) is the same
        # request: answered from the cache
        assert judge.judge_pair(CLEAN_REF, CLEAN_PRED) == got[1]
        assert len(server.requests) == 3
    hydro_ref = verdict(
        {"axial", "flair"}, {"ventricles", "dilatation", "periventricular edema"}, True
    )
    hydro_pred = verdict({"axial", "t2"}, {"ventricles", "dilatation", "edema"}, True)
    chiari_ref = verdict({"sagittal", "t2"}, {"cerebellar tonsils", "tonsillar herniation"}, True)
    empty = verdict(set(), set(), False)
    assert got == [
        (hydro_ref, hydro_pred),
        (verdict({"coronal", "t1"}, {"neg:abnormality"}, False),
         verdict({"coronal", "t1"}, {"meningioma", "small"}, True)),
        (chiari_ref, empty),  # no prediction: no keywords, normal
        (empty, empty),  # nothing to judge: no request
        (hydro_ref, hydro_pred),
    ]  # fmt: skip
    # the whole answer: raw keywords as written, and the stated agreement
    whole = judge.paired_verdicts([(HYDRO_REF, HYDRO_PRED)])[0]
    assert whole.raw["reference"]["anatomy"] == ("lateral ventricles",)
    assert whole.raw["prediction"]["findings"] == ("edema around the ventricles",)
    assert whole.labels_agree is True
    identity = judge.identity()
    assert identity["protocol"] == "paired" and identity["prompt_id"] == "judge-caption-paired-v1"
    assert identity["prompt_sha256"] == hashlib.sha256(PAIRED_PROMPT.read_bytes()).hexdigest()
    assert identity["served"]["model"] == ["judge-llm"]  # the server echoes the model
    assert identity["served"]["system_fingerprint"] == []  # it sent none


def test_joint_standardization_gives_equal_strings_that_f1_counts(tmp_path, nltk_data):
    with FakeOpenAI(lambda seen: Reply(paired_server_answer(pair_of(seen.prompt)))) as server:
        judge = LLMPairedCaptionJudge("judge", judge_settings(server), cache_dir=tmp_path)
        rows = [
            {"filename": name, "reference": ref, "prediction": pred, "status": "ok"}
            for name, (ref, pred) in zip("abc", STANDARDIZED, strict=True)
        ]
        summary, table = score_captioning(rows, judge, nltk_data)
        assert len(server.requests) == 3
    # a: clinical {ventricles, dilatation, periventricular edema} vs {ventricles, dilatation,
    #    edema}: 2*2/6 = 66.67; modality {axial, flair} vs {axial, t2}: 50
    # b: {neg:abnormality} vs {meningioma, small}: 0 | {coronal, t1} both: 100
    # c: {cerebellar tonsils, tonsillar herniation} vs {neg:abnormality}: 0 | 100
    assert list(table["clinical_f1"]) == pytest.approx([200 / 3, 0, 0])
    assert summary["Clinical_F1"] == pytest.approx((200 / 3) / 3)
    assert summary["Modality_F1"] == pytest.approx((50 + 100 + 100) / 3)
    assert table.loc[0, "ref_clinical"] == "dilatation; periventricular edema; ventricles"
    assert table.loc[0, "pred_clinical"] == "dilatation; edema; ventricles"
    # labels: reference A N A, prediction A A N -> tp 1, fp 1, fn 1: F1 2/4, accuracy 1/3
    assert list(table["pred_abnormal"]) == [True, True, False]
    assert summary["Binary_F1"] == pytest.approx(50.0)
    assert summary["Binary_accuracy"] == pytest.approx(100 / 3)
    assert summary["judge_failures"] == 0 and list(table["judged"]) == [True] * 3
    # c's stated agreement contradicts its labels: counted, the labels used
    assert judge.usage()["label_conflicts"] == 1


def test_an_unreadable_paired_answer_is_counted_and_its_image_left_out(scored_inputs, tmp_path):
    dataset, predictions, nltk_data = scored_inputs
    unreadable = (REFERENCES["case0001_002.png"], PREDICTED_CAPTIONS["case0001_002.png"])

    def script(seen):
        pair = pair_of(seen.prompt)
        return Reply("I cannot compare these." if pair == unreadable else PAIRED_ANSWERS[pair])

    def score(max_failure_rate: float) -> dict:
        settings = judge_settings(server, max_failure_rate=max_failure_rate)
        score_predictions(
            task="captioning",
            dataset=dataset,
            predictions=predictions["captioning"],
            out_json=tmp_path / "cap.json",
            out_csv=tmp_path / "cap.csv",
            judge_cfg={"name": "judge", "kind": "llm", "settings": settings},
            nltk_data=nltk_data,
            cache_dir=tmp_path / "cache",
        )
        return json.loads((tmp_path / "cap.json").read_text())

    with FakeOpenAI(script) as server:
        # 1 of 4 answers unreadable: above the default rate of 0, scoring stops, one line
        with pytest.raises(NovaError) as failure:
            score(0)
        assert "\n" not in str(failure.value)
        assert "judges.judge (captioning): 1 of 4 answers could not be read" in str(failure.value)
        assert not (tmp_path / "cap.json").exists()
        scores = score(25)  # within the rate: scored, the failure counted
    metrics = scores["metrics"]
    assert (metrics["judge_failures"], metrics["judge_failure_rate"]) == (1, 25.0)
    assert scores["judge_usage"]["unreadable"] == 1
    # case0001_002 is left out of the judge's metrics (not scored as an empty caption):
    # clinical 75, 0, 0 and modality 50, 100, 0 over the other three images
    assert metrics["Clinical_F1"] == pytest.approx(75 / 3)
    assert metrics["Modality_F1"] == pytest.approx(150 / 3)
    # labels: reference A N A, prediction A N N -> tp 1, fn 1, tn 1
    assert metrics["Binary_F1"] == pytest.approx(200 / 3)
    assert metrics["Binary_accuracy"] == pytest.approx(200 / 3)
    assert metrics["n_scored"] == 4  # BLEU and METEOR still see every image
    table = pd.read_csv(tmp_path / "cap.csv").set_index("filename")
    assert not table.loc["case0001_002.png", "judged"]
    assert table.loc[["case0001_001.png", "case0002_001.png", "case0003_001.png"], "judged"].all()
    assert pd.isna(table.loc["case0001_002.png", ["clinical_f1", "ref_abnormal"]]).all()
    assert not pd.isna(table.loc["case0001_002.png", "meteor"])


@pytest.mark.parametrize(
    "raw, agree",
    [
        (
            # the prompt's form, in a fence
            "```json\n"
            + paired_answer(
                {"findings": ["Mass"], "sequence_and_plane": ["axial FLAIR"]},
                {"findings": ["mass"], "negated_findings": ["no hemorrhage"]},
                "abnormal",
                "Abnormal",
            )
            + "\n```",
            True,
        ),
        (
            # sides first, each with its own label; Python quoting, a trailing comma
            "{'GT': {'raw_keywords': {}, 'standardized_keywords': {'findings': ['mass'], "
            "'sequence_and_plane': ['FLAIR', 'Axial']}, 'label': 'abnormal'}, "
            "'Pred': {'standardized_keywords': {'findings': 'mass', "
            "'negated_findings': 'no hemorrhage'}, 'label': 'abnormal'},}",
            None,  # no agreement stated
        ),
        (
            # flattened sections, labels in one block, the agreement as a word
            json.dumps(
                {
                    "gt_standardized_keywords": {
                        "findings": ["mass"],
                        "sequence": ["flair"],
                        "plane": ["axial"],
                    },
                    "pred_standardized_keywords": {
                        "findings": ["mass"],
                        "negated_findings": ["hemorrhage"],
                    },
                    "labels": {"gt": "abnormal", "pred": "abnormal", "agreement": "yes"},
                }
            ),
            True,
        ),
    ],
)
def test_paired_answers_are_read_tolerantly(raw, agree):
    got = read_paired(raw)
    assert got.reference == verdict({"flair", "axial"}, {"mass"}, True)
    assert got.prediction == verdict(set(), {"mass", "neg:hemorrhage"}, True)
    assert got.labels_agree is agree


@pytest.mark.parametrize(
    "raw, why",
    [
        ("I cannot compare these descriptions.", "no JSON object"),
        # raw keywords only: scoring them would hide that nothing was standardized
        ('{"raw_keywords": {"gt": {"findings": ["mass"]}, "pred": {"findings": ["mass"]}}, '
         '"gt_label": "abnormal", "pred_label": "normal"}',
         "no standardized keywords of the reference"),
        ('{"standardized_keywords": {"gt": {"findings": ["mass"]}, "pred": {}}, '
         '"gt_label": "abnormal"}', "no normal/abnormal label of the prediction"),
        ('{"standardized_keywords": {"gt": {}, "pred": {}}, '
         '"gt_label": "normal or abnormal", "pred_label": "normal"}', "neither normal nor"),
        ('{"standardized_keywords": {"gt": {"terms": ["mass"]}, "pred": {}}, '
         '"gt_label": "abnormal", "pred_label": "normal"}', "no keyword category in the ref"),
    ],
)  # fmt: skip
def test_unreadable_paired_answers_are_refused(raw, why):
    with pytest.raises(ValueError, match=why):
        read_paired(raw)


def test_a_judge_of_single_captions_is_asked_per_caption():
    keywords = make_judge({"kind": "keyword-lexicon"}, "captioning")
    pair = (HYDRO_REF, HYDRO_PRED)
    # The keyword judge reads a pair together (judge_pair: joint anatomy standardization)...
    assert judge_caption_pairs(keywords, [pair]) == [keywords.judge_pair(*pair)]

    # ...a judge that only reads single captions is asked caption by caption.
    class SingleCaptions:
        def extract(self, text):
            return keywords.extract(text)

    single = judge_caption_pairs(SingleCaptions(), [pair])
    assert single == [tuple(keywords.extract(t) for t in pair)]


# --- diagnosis: Top-1 / Top-5 ----------------------------------------------------------------


def test_diagnosis_decisions_give_top1_and_top5(tmp_path):
    # The judge's decision per reference, as an LLM would write it.
    decisions = {
        "Glioblastoma": '{"first_match": 1}',
        "Acute ischemic infarct": '```json\n{"first_match": "3"}\n```',
        "Normal study": '{"first_match": null}',
    }
    with FakeOpenAI(lambda seen: Reply(decisions[diagnosis_of(seen.prompt)[0]])) as server:
        judge = LLMDiagnosisJudge("judge", judge_settings(server), cache_dir=tmp_path)
        stroke = ["Meningioma", "Lymphoma", "Acute ischemic stroke", "Abscess"]
        pairs = [
            (["Glioblastoma multiforme", "Metastasis"], "Glioblastoma"),
            (stroke, "Acute ischemic infarct"),
            (["Migraine"], "Normal study"),
            ([], "Glioblastoma"),  # nothing to judge: no request
            (["Glioblastoma multiforme", "Metastasis"], "Glioblastoma"),  # sent once
        ]
        assert judge.match_ranked_many(pairs) == [
            (True, True),
            (False, True),
            (False, False),
            (False, False),
            (True, True),
        ]
        assert judge.match_ranked(["Migraine"], "Normal study") == (False, False)  # cached
        assert len(server.requests) == 3
        first = next(s for s in server.requests if "Glioblastoma" in s.prompt)
        assert diagnosis_of(first.prompt) == (
            "Glioblastoma",
            ["Glioblastoma multiforme", "Metastasis"],
        )
    assert judge.identity()["prompt"] == "judge-diagnosis-v1.txt"


def test_first_match_reading():
    assert read_first_match('{"first_match": 2}', 5) == 2
    assert read_first_match("  4.", 5) == 4  # a bare rank
    assert read_first_match('{"first_match": "none"}', 5) == 0
    assert read_first_match('{"match": 1.0}', 5) == 1
    for raw in ('{"first_match": 3}', '{"first_match": true}', "the second one", "{}"):
        with pytest.raises(ValueError):
            read_first_match(raw, 2)  # rank past the list, a bool, prose, no key


ECHOED_PROMPT = 'Answer as {"first_match": 1} or {"first_match": null}. Candidates: 1. GBM'


@pytest.mark.parametrize(
    "raw",
    [
        ECHOED_PROMPT + '\n{"first_match": 2}',  # a server echoing the prompt
        '{"first_match": 1}\n{"first_match": 2}',  # a second object
        'Looking at the list:\n```json\n{"first_match": 1}\n```',  # prose before a fence
        '```json\n{"first_match": 1}\n```\n```json\n{"first_match": 2}\n```',  # two fences
        '{"first_match": 1} (grader: {"first_match": 1})',  # text after the object
    ],
)
def test_a_judge_answer_is_read_only_as_the_whole_object_or_its_one_fence(raw):
    with pytest.raises(UnreadableAnswer):
        read_first_match(raw, 5)
    with pytest.raises(UnreadableAnswer):
        read_keywords(raw.replace('"first_match": 1', '"findings": [], "label": "normal"'))
    assert read_first_match('  ```json\n{"first_match": 2}\n```  ', 5) == 2


def test_an_echoing_judge_is_counted_as_failing_not_scored(tmp_path):
    with FakeOpenAI(lambda seen: Reply(seen.prompt + '\n{"first_match": 1}')) as server:
        judge = LLMDiagnosisJudge("judge", judge_settings(server), cache_dir=tmp_path)
        with pytest.raises(NovaError, match="1 of 1 answers could not be read"):
            judge.match_ranked_many([(["Glioblastoma"], "Glioblastoma")])
    assert judge.usage()["unreadable"] == 1


# --- batches, cache, failures -------------------------------------------------------------------


def test_a_batch_is_sent_concurrently_and_rescoring_hits_the_cache(tmp_path, monkeypatch):
    lock, in_flight, peak = threading.Lock(), [0], [0]

    def script(seen):
        with lock:
            in_flight[0] += 1
            peak[0] = max(peak[0], in_flight[0])
        time.sleep(0.2)
        with lock:
            in_flight[0] -= 1
        return Reply('{"findings": ["' + caption_of(seen.prompt) + '"], "label": "abnormal"}')

    captions = [f"lesion {i}" for i in range(8)]
    with FakeOpenAI(script) as server:
        judge = LLMKeywordJudge("judge", judge_settings(server, concurrency=4), cache_dir=tmp_path)
        started = time.perf_counter()
        first = judge.extract_many(captions)
        elapsed = time.perf_counter() - started
        assert [k.keywords for k in first] == [frozenset({c}) for c in captions]
        assert len(server.requests) == 8 and peak[0] == 4
        assert elapsed < 8 * 0.2 * 0.75  # one by one would take 1.6 s

        # Re-scoring: every answer from the cache, so no request and no key are needed.
        monkeypatch.delenv("NOVA_JUDGE_UNSET", raising=False)
        settings = judge_settings(server, concurrency=4, api_key_env="NOVA_JUDGE_UNSET")
        again = LLMKeywordJudge("judge", settings, cache_dir=tmp_path)
        assert again.extract_many(captions) == first
        assert len(server.requests) == 8
        assert again.usage()["cached"] == 8 and again.usage()["sent"] == 0
        assert list((tmp_path / "judges" / "judge").glob("??/*.json"))
        # A caption that is not cached needs the key: one line naming the variable.
        with pytest.raises(
            NovaError, match=r"judges\.judge: environment variable NOVA_JUDGE_UNSET"
        ):
            again.extract_many(["lesion 9"])
        assert len(server.requests) == 8


def test_unreadable_answers_stop_scoring_and_are_asked_again(tmp_path):
    answers = {FLAIR: ["I am sorry, I cannot help with that.", ANSWERS[FLAIR]]}

    def script(seen):
        caption = caption_of(seen.prompt)
        options = answers.get(caption, [ANSWERS.get(caption)])
        return Reply(options[min(seen.attempt, len(options)) - 1])

    with FakeOpenAI(script) as server:
        judge = LLMKeywordJudge("judge", judge_settings(server), cache_dir=tmp_path)
        with pytest.raises(NovaError) as failure:
            judge.extract_many([FLAIR, NORMAL])
        message = str(failure.value)
        assert "\n" not in message
        assert "judges.judge (captioning): 1 of 2 answers could not be read" in message
        assert "no JSON object" in message and "max_failure_rate" in message
        # The unreadable answer left the cache, the readable one stayed: a re-run asks
        # only for the first again, and now gets a readable answer.
        again = LLMKeywordJudge("judge", judge_settings(server), cache_dir=tmp_path)
        assert again.extract_many([FLAIR, NORMAL]) == [EXPECTED[FLAIR], EXPECTED[NORMAL]]
        assert [caption_of(s.prompt) for s in server.requests[2:]] == [FLAIR]


def test_failures_within_the_allowed_rate_are_counted_and_scored_conservatively(tmp_path):
    def script(seen):
        caption = caption_of(seen.prompt)
        return Reply("no idea") if caption == FLAIR else Reply(ANSWERS[caption])

    with FakeOpenAI(script) as server:
        settings = judge_settings(server, max_failure_rate=50)
        judge = LLMKeywordJudge("judge", settings, cache_dir=tmp_path)
        got = judge.extract_many([FLAIR, T1C, NORMAL])
    # 1 of 3 unreadable (33 % <= 50 %): extract_many gives that caption no keywords and
    # normal; judge_pairs (what scores use) gives a pair with it no verdict.
    assert got == [verdict(frozenset(), frozenset(), False), EXPECTED[T1C], EXPECTED[NORMAL]]
    assert judge.usage()["unreadable"] == 1 and judge.usage()["requests"] == 3
    assert judge.judge_pairs([(FLAIR, T1C), (NORMAL, T1C)]) == [
        None,
        (EXPECTED[NORMAL], EXPECTED[T1C]),
    ]


def test_failed_requests_and_an_unreachable_endpoint_stop_scoring(tmp_path):
    with FakeOpenAI(lambda seen: Fail(503, message="overloaded")) as server:
        judge = LLMDiagnosisJudge("judge", judge_settings(server), cache_dir=tmp_path)
        with pytest.raises(NovaError, match=r"2 of 2 requests failed \(first: HTTP 503"):
            judge.match_ranked_many([(["A"], "B"), (["C"], "D")])
        assert len(server.requests) == 4  # max_attempts 2 each
    url = f"http://127.0.0.1:{free_port()}/v1"
    settings = {"backend": {"base_url": url, "model": "m", "api_key_env": None}}
    down = LLMDiagnosisJudge("judge", settings, cache_dir=tmp_path)
    with pytest.raises(NovaError, match=re.escape(f"judges.judge: cannot reach {url}")):
        down.match_ranked(["A"], "B")


# --- configuration and environment ------------------------------------------------------------


def test_settings_are_validated_with_the_key_named():
    base = {"base_url": "http://x/v1", "model": "m", "api_key_env": None}
    with pytest.raises(
        ConfigError, match=r"judges\.j\.settings\.backend: unknown setting temprature"
    ):
        check_settings("j", {"backend": {**base, "temprature": 0}})
    with pytest.raises(ConfigError, match=r"judges\.j\.settings: missing setting backend"):
        check_settings("j", {})
    with pytest.raises(ConfigError, match=r"judges\.j\.settings\.max_failure_rate"):
        check_settings("j", {"backend": base, "max_failure_rate": 150})
    with pytest.raises(
        ConfigError, match=r"invalid value of judges\.j\.settings\.protocol: 'pairwise' is not"
    ):
        check_settings("j", {"backend": base, "protocol": "pairwise"})
    resolved = check_settings("j", {"backend": {**base, "temperature": 0.3}})
    assert resolved["backend"]["temperature"] == 0.3 and resolved["backend"]["max_tokens"] == 2048
    # paired by default, with its prompt; per-caption takes the keyword prompt
    assert resolved["protocol"] == "paired"
    assert resolved["prompts"]["captioning"].resolve() == PAIRED_PROMPT
    per_caption = check_settings("j", {"backend": base, "protocol": "per-caption"})
    assert per_caption["prompts"]["captioning"].resolve() == KEYWORDS_PROMPT
    assert per_caption["prompts"]["diagnosis"].resolve() == DIAGNOSIS_PROMPT


def test_a_prompt_with_the_wrong_placeholders_is_refused(tmp_path):
    prompt = tmp_path / "p.txt"
    prompt.write_text('Caption: {text}\nAnswer {"label": "normal"}')
    settings = {
        "backend": {"base_url": "http://x/v1", "model": "m", "api_key_env": None},
        "prompts": {"captioning": str(prompt)},
    }
    with pytest.raises(ConfigError, match=r"placeholders .*\{caption\}"):
        LLMKeywordJudge("j", settings)
    # the paired protocol (the default) needs both captions in its prompt
    with pytest.raises(
        ConfigError,
        match=r"has the placeholders \['\"label\"', 'text'\], not \{prediction\}, \{reference\} "
        r"\(protocol paired\)",
    ):
        make_judge({"name": "j", "kind": "llm", "settings": settings}, task="captioning")
    with pytest.raises(
        ConfigError, match=r"judges\.j \(kind llm\) judges captioning, diagnosis, not localization"
    ):
        make_judge({"name": "j", "kind": "llm", "settings": settings}, task="localization")


def planned(config: dict):
    return read_config(config, ROOT)


def llm_config(server: FakeOpenAI, key_env: str | None) -> dict:
    config = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    config["judges"]["llm-judge"] = {
        "kind": "llm",
        "settings": {"backend": judge_backend(server, api_key_env=key_env)},
    }
    config["tasks"]["diagnosis"]["judge"] = "llm-judge"
    config["models"] = {"gold": {"adapter": "gold", "tasks": ["diagnosis"]}}
    return config


def test_the_workflow_checks_the_judge_before_any_job(monkeypatch):
    monkeypatch.delenv("NOVA_JUDGE_KEY", raising=False)
    with FakeOpenAI() as server:
        settings = {"backend": judge_backend(server, api_key_env="NOVA_JUDGE_KEY")}
        problems = judge_kind("llm").environment_problems("gpt", settings, ["diagnosis"], None)
        assert len(problems) == 1
        assert re.match(r"judges\.gpt: environment variable NOVA_JUDGE_KEY", str(problems[0]))
        plan = planned(llm_config(server, "NOVA_JUDGE_KEY"))
        with pytest.raises(NovaError, match=r"judges\.llm-judge: environment variable NOVA_JUDGE"):
            plan.check_environment()
        monkeypatch.setenv("NOVA_JUDGE_KEY", "sk-judge")
        plan.check_environment()  # key set, endpoint reachable
        # a task without jobs needs no judge
        idle = llm_config(server, "NOVA_JUDGE_UNSET")
        idle["tasks"]["diagnosis"]["enabled"] = False
        planned(idle).check_environment()
    bad = llm_config(server, None)
    bad["judges"]["llm-judge"]["settings"]["backend"]["temprature"] = 0
    with pytest.raises(ConfigError, match=r"judges\.llm-judge\.settings\.backend: unknown setting"):
        planned(bad)
    missing = llm_config(server, None)
    missing["judges"]["llm-judge"]["settings"]["prompts"] = {"diagnosis": "no/such/prompt.txt"}
    with pytest.raises(ConfigError, match="cannot read the diagnosis judge prompt"):
        planned(missing)


def test_scorers_hand_an_llm_judge_every_text_at_once():
    class Batch:
        """Records how it was called; answers without a server."""

        def __init__(self):
            self.calls = []

        def extract_many(self, texts):
            self.calls.append(list(texts))
            return [verdict(frozenset(), frozenset({t}), bool(t)) for t in texts]

        def match_ranked_many(self, pairs):
            self.calls.append([tuple(r) for r, _ in pairs])
            return [(r[0] == ref, ref in r) for r, ref in pairs]

        def identity(self):
            return {"name": "batch"}

    judge = Batch()
    fields = ("filename", "case_id", "reference", "predictions", "status")
    records = [
        dict(zip(fields, values, strict=True))
        for values in (
            ("a", "c", "X", ["Y", "X"], "ok"),
            ("b", "c", "X", [], "parse_error"),
            ("c", "d", "Z", ["Z"], "ok"),
        )
    ]
    summary, table = score_diagnosis(records, judge)
    assert judge.calls == [[("Y", "X"), ("Z",)]]  # one call, images without an answer left out
    assert list(table["top1_correct"]) == [False, False, True]
    assert list(table["top5_correct"]) == [True, False, True]
    assert summary["Top-5"] == pytest.approx(200 / 3)


# --- end to end: score_predictions writes the judge's identity ----------------------------

# The dataset of tests/upstream.py: references and what the model answered.
PREDICTED_CAPTIONS = {
    "case0001_001.png": "Axial T2 image with a hyperintense lesion in the right frontal lobe.",
    "case0001_002.png": "Coronal T1 image after contrast showing ring enhancement.",
    "case0002_001.png": "Sagittal T2 image, normal.",
    # case0003_001.png has no answer: status missing, scored as an empty caption
}
JUDGED_CAPTIONS = {
    # references
    "Axial FLAIR image shows a hyperintense mass in the right frontal lobe.": {
        "sequence": ["FLAIR"], "plane": ["axial"], "anatomy": ["right", "frontal lobe"],
        "characteristics": ["hyperintense"], "findings": ["mass"], "label": "abnormal",
    },
    "(1b) Coronal T1 post-contrast image shows ring enhancement.": {
        "sequence": ["T1 post-contrast"], "plane": ["coronal"],
        "characteristics": ["ring enhancement"], "label": "abnormal",
    },
    "Sagittal T2 image without abnormality.": {
        "sequence": ["T2"], "plane": ["sagittal"], "negated_findings": ["abnormality"],
        "label": "normal",
    },
    "Axial DWI shows restricted diffusion in the left basal ganglia.": {
        "sequence": ["DWI"], "plane": ["axial"], "anatomy": ["left", "basal ganglia"],
        "characteristics": ["restricted diffusion"], "label": "abnormal",
    },
    # predictions
    PREDICTED_CAPTIONS["case0001_001.png"]: {
        "sequence": ["T2-weighted"], "plane": ["Axial"], "anatomy": ["Right", "frontal lobe"],
        "characteristics": ["hyperintense"], "findings": ["lesion"], "label": "abnormal",
    },
    PREDICTED_CAPTIONS["case0001_002.png"]: {
        "sequence": ["T1", "post-contrast"], "plane": ["coronal"],
        "characteristics": ["ring enhancement"], "label": "abnormal",
    },
    PREDICTED_CAPTIONS["case0002_001.png"]: {
        "sequence": ["T2"], "plane": ["sagittal"], "findings": [], "label": "normal",
    },
}  # fmt: skip
PREDICTED_DIAGNOSES = {
    "case0001_001.png": ["GBM", "Metastasis", "Lymphoma", "Abscess", "Meningioma"],
    "case0001_002.png": ["Brain abscess", "Glioblastoma", "Metastasis", "Lymphoma", "MS"],
    "case0002_001.png": ["Migraine", "Small vessel disease", "Normal variant", "Cyst", "Artifact"],
    "case0003_001.png": ["Acute ischemic stroke", "Encephalitis", "Glioma", "Abscess", "MS"],
}
# The judge's verdict, by the first candidate of each list.
FIRST_MATCH = {"GBM": 1, "Brain abscess": 2, "Migraine": 0, "Acute ischemic stroke": 1}


REFERENCES = {filename: caption for filename, _, caption, _ in IMAGES}
REFERENCE_DIAGNOSES = {filename: CASES[case][1] for filename, case, _, _ in IMAGES}
# The paired judge's standardized keywords of each (reference, prediction), with the same
# verdicts as JUDGED_CAPTIONS; case0003_001 has no prediction: the prompt says so, and the
# judge's pred side is ignored (it lists a keyword here that must not count).
PAIRED = {
    "case0001_001.png": (
        {"sequence_and_plane": ["FLAIR", "axial"], "anatomy": ["right", "frontal lobe"],
         "imaging_characteristics": ["hyperintense"], "findings": ["mass"]},
        {"sequence_and_plane": ["T2-weighted", "Axial"], "anatomy": ["Right", "frontal lobe"],
         "imaging_characteristics": ["hyperintense"], "findings": ["lesion"]},
        "abnormal", "abnormal",
    ),
    "case0001_002.png": (
        {"sequence_and_plane": ["T1 post-contrast", "coronal"],
         "imaging_characteristics": ["ring enhancement"]},
        {"sequence_and_plane": ["T1", "post-contrast", "coronal"],
         "imaging_characteristics": ["ring enhancement"]},
        "abnormal", "abnormal",
    ),
    "case0002_001.png": (
        {"sequence_and_plane": ["T2", "sagittal"], "negated_findings": ["no abnormality"]},
        {"sequence_and_plane": ["T2", "sagittal"], "findings": []},
        "normal", "normal",
    ),
    "case0003_001.png": (
        {"sequence_and_plane": ["DWI", "axial"], "anatomy": ["left", "basal ganglia"],
         "imaging_characteristics": ["restricted diffusion"]},
        {"findings": ["restricted diffusion"]},
        "abnormal", "abnormal",
    ),
}  # fmt: skip
PAIRED_ANSWERS = {
    (REFERENCES[name], PREDICTED_CAPTIONS.get(name, NO_DESCRIPTION)): paired_answer(*answer)
    for name, answer in PAIRED.items()
}
SERVED_MODEL = "judge-llm-2024-08-06"  # what the server says answered (the config names an alias)


def llm_judge_server(seen):
    if "Reference diagnosis:" in seen.prompt:
        _, candidates = diagnosis_of(seen.prompt)
        answer = json.dumps({"first_match": FIRST_MATCH[candidates[0]]})
    elif "Predicted description (Pred):" in seen.prompt:
        answer = PAIRED_ANSWERS[pair_of(seen.prompt)]
    else:
        answer = json.dumps(JUDGED_CAPTIONS[caption_of(seen.prompt)])
    return Reply(answer, served_model=SERVED_MODEL, system_fingerprint="fp_0123abcd")


@pytest.fixture(scope="module")
def scored_inputs(tmp_path_factory, dataset, nltk_data):
    """The upstream test dataset and both tasks' predictions (answers made elsewhere)."""
    folder = tmp_path_factory.mktemp("llm-judge")
    diagnoses = {
        name: json.dumps({"most_likely_diagnosis": top, "other_possible_diagnoses": others})
        for name, (top, *others) in PREDICTED_DIAGNOSES.items()
    }
    predictions = {}
    for task, answers in (("captioning", PREDICTED_CAPTIONS), ("diagnosis", diagnoses)):
        path = folder / f"{task}-answers.jsonl"
        lines = [json.dumps({"filename": f, "raw": raw}) + "\n" for f, raw in answers.items()]
        path.write_text("".join(lines))
        out = folder / f"{task}.jsonl"
        model = {
            "adapter": "predictions_file",
            "tasks": [task],
            "max_error_rate": 1,  # a caption is missing on purpose
            "settings": {"path": str(path)},
        }
        run_predictions(
            dataset=dataset,
            task=task,
            model_name="api-model",
            model_cfg=model,
            prompt_path=PROMPTS / f"{task}-v1.txt",
            out=out,
            summary_out=folder / f"{task}.summary.json",
        )
        predictions[task] = out
    return dataset, predictions, nltk_data


@pytest.mark.parametrize(
    "protocol, prompt, caption_requests",
    [
        # one request per (reference, prediction) pair, the one without a prediction too
        ("paired", PAIRED_PROMPT, 4),
        # 4 references + 3 non-empty predictions, each judged once
        ("per-caption", KEYWORDS_PROMPT, 7),
    ],
)
def _scorer(scored_inputs, tmp_path, judge_cfg):
    """Score one task's predictions with ``judge_cfg`` and read back the score file."""
    dataset, predictions, nltk_data = scored_inputs

    def score(task: str, out: str) -> dict:
        score_predictions(
            task=task,
            dataset=dataset,
            predictions=predictions[task],
            out_json=tmp_path / f"{out}.json",
            out_csv=tmp_path / f"{out}.csv",
            judge_cfg=judge_cfg,
            nltk_data=nltk_data,
            cache_dir=tmp_path / "cache",
        )
        return json.loads((tmp_path / f"{out}.json").read_text())

    return score


def _check_caption_metrics(metrics: dict, rescored: dict) -> None:
    # Per image (modality | clinical F1):
    #   case0001_001 {flair,axial} vs {t2,axial}: 50 | {right,frontal lobe,hyperintense,mass}
    #     vs {..,lesion}: 2*3/8 = 75;  case0001_002: 100 | {post-contrast,ring enhancement}: 100
    #   case0002_001: 100 | {neg:abnormality} vs {}: 0;  case0003_001 (no answer): 0 | 0
    assert metrics["Modality_F1"] == pytest.approx((50 + 100 + 100 + 0) / 4)
    assert metrics["Clinical_F1"] == pytest.approx((75 + 100 + 0 + 0) / 4)
    # reference labels A A N A, predicted A A N N: tp 2, fn 1, tn 1 -> F1 4/5, accuracy 3/4
    assert metrics["Binary_F1"] == pytest.approx(80.0)
    assert metrics["Binary_accuracy"] == pytest.approx(75.0)
    assert (metrics["judge_failures"], metrics["judge_failure_rate"]) == (0, 0.0)
    assert rescored["metrics"]["Clinical_F1"] == metrics["Clinical_F1"]


def _check_caption_judge(captions, rescored, *, server, protocol, prompt, caption_requests):
    judge = captions["judge"]
    assert judge["name"] == "llm/judge-llm" and judge["judge"] == "gpt-judge"
    assert judge["protocol"] == protocol
    assert judge["code"] == code_fingerprint("novabench.judges.llm")
    assert judge["backend"]["base_url"] == server.base_url and judge["backend"]["temperature"] == 0
    assert (judge["prompt"], judge["prompt_id"]) == (prompt.name, prompt.stem)
    assert judge["prompt_sha256"] == hashlib.sha256(prompt.read_bytes()).hexdigest()
    # the model that answered, as the server named it, and its fingerprint
    served = {"model": [SERVED_MODEL], "system_fingerprint": ["fp_0123abcd"], "unknown": 0}
    assert judge["served"] == {**served, "answers": caption_requests}
    assert captions["metrics"]["judge"] == judge
    assert captions["judge_usage"]["sent"] == caption_requests
    assert captions["judge_usage"]["unreadable"] == 0
    # re-scored from the cache: nothing sent, the served model read back from the cache
    assert rescored["judge_usage"]["cached"] == caption_requests
    assert rescored["judge_usage"]["sent"] == 0
    assert rescored["judge"]["served"] == judge["served"]


def _check_diagnosis_scores(diagnosis: dict) -> None:
    # Top-1: GBM (1), abscess (2: top-5 only), migraine (none), stroke (1) -> 2/4, Top-5 3/4;
    # by case: case0001 (1/2, 2/2), case0002 (0, 0), case0003 (1, 1)
    dx = diagnosis["metrics"]
    assert (dx["Top-1"], dx["Top-5"]) == (pytest.approx(50.0), pytest.approx(75.0))
    assert dx["Top-1_case"] == pytest.approx(50.0)
    assert dx["Top-5_case"] == pytest.approx(200 / 3)
    assert diagnosis["judge"]["task"] == "diagnosis"
    assert diagnosis["judge"]["protocol"] == "ranked-list"
    assert diagnosis["judge"]["prompt_sha256"] == (
        hashlib.sha256(DIAGNOSIS_PROMPT.read_bytes()).hexdigest()
    )
    assert diagnosis["judge"]["served"]["model"] == [SERVED_MODEL]


@pytest.mark.parametrize(
    "protocol, prompt, caption_requests",
    [
        # one request per (reference, prediction) pair, the one without a prediction too
        ("paired", PAIRED_PROMPT, 4),
        # 4 references + 3 non-empty predictions, each judged once
        ("per-caption", KEYWORDS_PROMPT, 7),
    ],
)
def test_score_predictions_with_an_llm_judge_records_its_identity(
    scored_inputs, tmp_path, protocol, prompt, caption_requests
):
    with FakeOpenAI(llm_judge_server) as server:
        settings = judge_settings(server, protocol=protocol if protocol != "paired" else None)
        judge_cfg = {"name": "gpt-judge", "kind": "llm", "settings": settings}
        score = _scorer(scored_inputs, tmp_path, judge_cfg)

        captions = score("captioning", "cap")
        assert len(server.requests) == caption_requests
        if protocol == "paired":  # each request carries both captions
            assert sorted(pair_of(s.prompt) for s in server.requests) == sorted(PAIRED_ANSWERS)
        diagnosis = score("diagnosis", "dx")
        # + one request per image, with its reference and all five ranked candidates
        assert len(server.requests) == caption_requests + 4
        dx_prompts = [diagnosis_of(s.prompt) for s in server.requests[caption_requests:]]
        assert sorted(dx_prompts) == sorted(
            (REFERENCE_DIAGNOSES[name], ranked) for name, ranked in PREDICTED_DIAGNOSES.items()
        )
        rescored = score("captioning", "cap-again")
        assert len(server.requests) == caption_requests + 4  # all from the cache

    _check_caption_metrics(captions["metrics"], rescored)
    _check_caption_judge(
        captions,
        rescored,
        server=server,
        protocol=protocol,
        prompt=prompt,
        caption_requests=caption_requests,
    )
    _check_diagnosis_scores(diagnosis)


def test_captioning_scorer_sends_one_batch(scored_inputs):
    _, _, nltk_data = scored_inputs

    calls = []

    class Batch:
        def extract_many(self, texts):
            calls.append(list(texts))
            return [verdict(frozenset({"t2"} if t else ()), frozenset(), bool(t)) for t in texts]

        def identity(self):
            return {"name": "batch"}

    rows = [
        {"filename": "a", "reference": "ref a", "prediction": "pred a", "status": "ok"},
        {"filename": "b", "reference": "ref b", "prediction": None, "status": "error"},
    ]
    summary, _ = score_captioning(rows, Batch(), nltk_data)
    assert calls == [["ref a", "ref b", "pred a", ""]]
    assert summary["Modality_F1"] == pytest.approx(50.0)  # 100 for a; b has no prediction: 0


def test_the_paper_configuration_uses_the_gpt4o_judge():
    config = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    paper = yaml.safe_load((ROOT / "config" / "paper.yaml").read_text())
    merged = copy.deepcopy(config)
    for key, value in paper.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            for inner, inner_value in value.items():
                if isinstance(inner_value, dict) and isinstance(merged[key].get(inner), dict):
                    merged[key][inner] = {**merged[key][inner], **inner_value}
                else:
                    merged[key][inner] = inner_value
        else:
            merged[key] = value
    expand_models(merged, ROOT / "config" / "models")  # the paper's models are catalog names
    plan = planned(merged)
    for task in ("captioning", "diagnosis"):
        judge = plan.judge(task)
        assert judge["kind"] == "llm"
        assert judge["settings"]["backend"]["model"].startswith("gpt-4o")
        assert judge["settings"]["backend"]["temperature"] == 0
        assert judge["settings"]["protocol"] == "paired"  # one request per caption pair
    assert {"keywords", "matcher"} <= set(merged["judges"])  # offline judges stay defined
    prompts = merged["judges"]["gpt-4o-judge"]["settings"]["prompts"]
    assert prompts == {
        "captioning": "scripts/novabench/resources/prompts/judge-caption-paired-v1.txt",
        "diagnosis": "scripts/novabench/resources/prompts/judge-diagnosis-v1.txt",
    }


def test_the_configuration_names_the_package_default_prompts():
    """One copy of each judge prompt: the paper's configuration names the files the package
    falls back to (the command line's defaults), so the two cannot differ."""
    settings = yaml.safe_load((ROOT / "config" / "paper.yaml").read_text())["judges"]
    settings = settings["gpt-4o-judge"]["settings"]
    named = prompt_paths("gpt-4o-judge", settings, lambda p: str(ROOT / p))
    defaults = prompt_paths("gpt-4o-judge", {"backend": settings["backend"]})
    assert named == defaults
    assert named["captioning"] == str(JUDGE_PROMPTS / "judge-caption-paired-v1.txt")


def test_reading_jobs_of_an_llm_judge_claim_its_provider_and_read_its_prompt(tmp_path):
    paper = ROOT / "config" / "paper.yaml"
    dry = snakemake(tmp_path, "-n", "--configfile", str(paper), timeout=120)
    assert dry.returncode == 0, dry.stderr[-3000:]
    jobs = {}  # rule and its first output -> its block of the dry-run listing
    for rule in ("read", "score"):
        for block in (dry.stdout + dry.stderr).split(f"rule {rule}:")[1:]:
            output = re.search(r"output: (\S+?\.jsonl?)[,\s]", block).group(1)
            jobs[rule, output] = block.split("\n[", 1)[0]
    verdicts = "results/nova/verdicts/{}/{}.jsonl"
    caption = jobs["read", verdicts.format("captioning/gpt-4o-judge", "gold")]
    # the configuration's versioned prompts, so editing one re-reads
    assert "api_openai=1" in caption
    assert str(JUDGE_PROMPTS / "judge-caption-paired-v1.txt") in caption
    diagnosis = jobs["read", verdicts.format("diagnosis/gpt-4o-judge", "retrieval")]
    assert "api_openai=1" in diagnosis
    assert str(JUDGE_PROMPTS / "judge-diagnosis-v1.txt") in diagnosis
    localization = jobs["read", verdicts.format("localization/boxes", "gold")]
    assert "api_openai=0" in localization and "judge-" not in localization
    # Scoring counts the verdicts: it sends nothing and reads no judge prompt.
    score = jobs["score", "results/nova/scores/diagnosis/retrieval.json"]
    assert "api_openai" not in score and "judge-" not in score


@pytest.mark.parametrize("shape", SHAPES)
def test_judge_answers_of_a_megabyte_are_read_in_linear_time(shape):
    def read_each_way(text):
        for read in (read_keywords, read_paired, lambda raw: read_first_match(raw, 5)):
            with contextlib.suppress(UnreadableAnswer):
                read(text)

    assert_linear_time(read_each_way, shape)
