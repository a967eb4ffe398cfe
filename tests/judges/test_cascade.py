"""The cascade judge: the offline judge decides what it can, the LLM judge (a scripted chat
server on loopback) exactly the rest, each request once, none again on a re-run; a failed
request is counted and stays undecided. Expected verdicts are worked out by hand."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from novabench.config import plan_from_files
from novabench.errors import ConfigError, NovaError
from novabench.judges import KeywordSet, make_judge
from novabench.judges.base import _KINDS, JudgeKind, RankedVerdict, expand_judge
from novabench.predict import run_predictions
from novabench.score import score_predictions
from openai_server import Fail, FakeOpenAI, Garbage, Reply
from support import NO_LIVE_CHECK, ROOT, diagnosis_of, judge_backend, pair_of

PROMPTS = ROOT / "config" / "prompts"


def llm_judge(server: FakeOpenAI, **settings) -> dict:
    return {"kind": "llm", "settings": {"backend": judge_backend(server), **settings}}


MATCHER = {"kind": "diagnosis-matcher", "settings": {"embedding_fallback": False}}


def cascade(second: dict, first: dict = MATCHER, first_name="matcher", **settings) -> dict:
    """The cascade ``c`` over ``first`` (the rules-only matcher) and ``second``, written
    out the way the plan builds it."""
    stages = {"first": first_name, "second": "llm-judge"}
    judges = {
        first_name: first,
        "llm-judge": second,
        "c": {"kind": "cascade", "settings": {**stages, **settings}},
    }
    return expand_judge(judges, "c")


# --- diagnosis ------------------------------------------------------------------------------

DECIDED = [
    (["GBM", "Metastasis"], "Glioblastoma"),  # the matcher: a match at rank 1
    (["Meningioma", "Lymphoma"], "Glioblastoma"),  # the matcher: no match anywhere
]
UNDECIDED = [
    (["frobnication of widgets"], "Glioblastoma"),  # no rule knows the candidate
    (["Meningioma", "frobnication of widgets"], "Glioblastoma"),  # Top-1 decided, Top-5 not
    (
        ["Migraine", "Small vessel disease", "Normal variant", "Cyst", "Artifact"],
        "Normal study",
    ),
]
# The scripted LLM's first matching rank, by the first candidate of the list it is shown.
FIRST_MATCH = {"frobnication of widgets": 1, "Meningioma": 2, "Migraine": 0}


def answer_diagnosis(seen):
    _, candidates = diagnosis_of(seen.prompt)
    return Reply(json.dumps({"first_match": FIRST_MATCH[candidates[0]]}))


def test_only_the_undecided_items_are_sent_each_once_and_a_rerun_sends_nothing(tmp_path):
    pairs = [DECIDED[0], UNDECIDED[0], DECIDED[1], UNDECIDED[1], UNDECIDED[2], UNDECIDED[0]]
    with FakeOpenAI(answer_diagnosis) as server:
        judge = make_judge(cascade(llm_judge(server)), "diagnosis", cache_dir=tmp_path)
        verdicts = judge.judge_ranked_many(pairs)
        sent = [diagnosis_of(seen.prompt) for seen in server.requests]
        # Exactly the three distinct undecided lists, in one batch, none twice.
        assert sorted(sent) == sorted((ref, ranked) for ranked, ref in UNDECIDED)
        assert [seen.attempt for seen in server.requests] == [1, 1, 1]
        assert verdicts == [
            RankedVerdict("match", "match", "matcher"),
            RankedVerdict("match", "match", "llm-judge"),  # rank 1
            RankedVerdict("no_match", "no_match", "matcher"),
            RankedVerdict("no_match", "match", "llm-judge"),  # rank 2
            RankedVerdict("no_match", "no_match", "llm-judge"),  # rank 0: none
            RankedVerdict("match", "match", "llm-judge"),
        ]
        usage = judge.usage()
        assert usage["decided_by"] == {"matcher": 2, "llm-judge": 4}
        assert (usage["escalated"], usage["undecided"]) == (4, 0)
        assert (usage["requests"], usage["sent"], usage["failed"]) == (3, 3, 0)

        again = make_judge(cascade(llm_judge(server)), "diagnosis", cache_dir=tmp_path)
        assert again.judge_ranked_many(pairs) == verdicts
        assert len(server.requests) == 3  # the re-run is answered from the cache
        assert (again.usage()["cached"], again.usage()["sent"]) == (3, 0)
    # The second judge's answers sit in its own cache folder, shared with it used alone.
    assert len(list((tmp_path / "judges" / "llm-judge").rglob("*.json"))) == 3


def test_nothing_is_sent_when_the_first_judge_decides_everything(tmp_path):
    with FakeOpenAI(answer_diagnosis) as server:
        judge = make_judge(cascade(llm_judge(server)), "diagnosis", cache_dir=tmp_path)
        assert judge.match_ranked_many(DECIDED) == [(True, True), (False, False)]
        assert server.requests == []
        assert judge.usage()["decided_by"] == {"matcher": 2, "llm-judge": 0}


def fail_some(seen):
    _, candidates = diagnosis_of(seen.prompt)
    if candidates[0] == "Meningioma":
        return Fail(500)
    if candidates[0] == "Migraine":
        return Garbage("not a chat completion", "text/plain")
    return answer_diagnosis(seen)


def test_a_failed_request_is_counted_and_stays_undecided(tmp_path):
    with FakeOpenAI(fail_some) as server:
        judge_cfg = cascade(llm_judge(server, max_failure_rate=100))
        judge = make_judge(judge_cfg, "diagnosis", cache_dir=tmp_path)
        verdicts = judge.judge_ranked_many([*DECIDED, *UNDECIDED])
        assert verdicts[:3] == [
            RankedVerdict("match", "match", "matcher"),
            RankedVerdict("no_match", "no_match", "matcher"),
            RankedVerdict("match", "match", "llm-judge"),
        ]
        # The 500 and the garbage: no verdict of the second judge, never "no match"; what
        # the matcher decided (top-1 here) stands, the rest stays undecided.
        failed = RankedVerdict("no_match", "undecided", "matcher", failed=True)
        assert verdicts[3:] == [failed, failed]
        assert judge.match_ranked_many(UNDECIDED[1:]) == [(False, False), (False, False)]
        usage = judge.usage()
        assert usage["failed"] == 4  # two requests, judged twice
        assert usage["decided_by"] == {"matcher": 2, "llm-judge": 1}
        assert usage["undecided"] == 4

        # Within the default rate (0 %), a failure stops scoring: no verdict at all.
        strict = make_judge(cascade(llm_judge(server)), "diagnosis", cache_dir=tmp_path)
        with pytest.raises(NovaError, match=r"judges.llm-judge \(diagnosis\): 2 of 3 requests"):
            strict.judge_ranked_many(UNDECIDED)


def test_the_identity_names_both_judges():
    with FakeOpenAI(answer_diagnosis) as server:
        identity = make_judge(cascade(llm_judge(server)), "diagnosis").identity()
    assert identity["name"] == "cascade(diagnosis-matcher -> llm/judge-llm)"
    assert identity["first"]["judge"] == "matcher" and identity["second"]["judge"] == "llm-judge"
    assert identity["second"]["backend"]["model"] == "judge-llm"
    assert identity["first"]["code"] and identity["code"]


def test_a_score_file_says_which_judge_decided_how_many(tmp_path, dataset):
    # The four test images' diagnoses; the matcher leaves case0002_001's Top-5 undecided
    # ("Normal study" against five candidates it partly cannot place).
    ranked = {
        "case0001_001.png": ["GBM", "Metastasis", "Lymphoma", "Abscess", "Meningioma"],
        "case0001_002.png": ["Brain abscess", "Glioblastoma", "Metastasis", "Lymphoma", "MS"],
        "case0002_001.png": UNDECIDED[2][0],
        "case0003_001.png": ["Acute ischemic stroke", "Encephalitis", "Glioma", "Abscess", "MS"],
    }
    answers = tmp_path / "answers.jsonl"
    answers.write_text(
        "".join(
            json.dumps({"filename": name, "raw": json.dumps({
                "most_likely_diagnosis": top, "other_possible_diagnoses": rest})}) + "\n"
            for name, (top, *rest) in ranked.items()
        )
    )  # fmt: skip
    predictions = tmp_path / "diagnosis.jsonl"
    run_predictions(
        dataset=dataset,
        task="diagnosis",
        model_name="m",
        model_cfg={
            "adapter": "predictions_file",
            "tasks": ["diagnosis"],
            "settings": {"path": str(answers)},
        },
        prompt_path=PROMPTS / "diagnosis-v1.txt",
        out=predictions,
        summary_out=tmp_path / "diagnosis.summary.json",
    )
    with FakeOpenAI(answer_diagnosis) as server:
        metrics = score_predictions(
            task="diagnosis",
            dataset=dataset,
            predictions=predictions,
            out_json=tmp_path / "scores.json",
            out_csv=tmp_path / "scores.csv",
            judge_cfg=cascade(llm_judge(server, **NO_LIVE_CHECK)),
            cache_dir=tmp_path / "cache",
        )
        assert [diagnosis_of(s.prompt)[0] for s in server.requests] == ["Normal study"]
    scores = json.loads((tmp_path / "scores.json").read_text())
    assert scores["judge_usage"]["decided_by"] == {"matcher": 3, "llm-judge": 1}
    assert scores["judge"]["kind"] == "cascade"
    # GBM (rank 1), Glioblastoma at rank 2, stroke (rank 1) by the matcher; none by the LLM.
    assert metrics["Top-1"] == pytest.approx(50.0) and metrics["Top-5"] == pytest.approx(75.0)


# --- captioning -----------------------------------------------------------------------------

# Unread shares the first judge reports, by caption (the keyword lexicon says how much of a
# caption it could not read; this stand-in lets the test set the shares).
SHARES = {"read well": 0.0, "partly read": 0.3, "hardly read": 0.8, "reference": 0.1}


class _SharesJudge:
    def extract(self, text: str) -> KeywordSet:
        return KeywordSet(frozenset({f"kw:{text}"}), False, unread_share=SHARES[text])

    def identity(self) -> dict:
        return {"name": "unread-shares"}


class _SharesKind(JudgeKind):
    name = "unread-shares-test"
    tasks = ("captioning",)

    def build(self, name, settings, task, cache_dir=None):
        return _SharesJudge()


@pytest.fixture
def shares_kind():
    _KINDS[_SharesKind.name] = _SharesKind()
    yield _SharesKind.name
    del _KINDS[_SharesKind.name]


def answer_pair(seen):
    reference, prediction = pair_of(seen.prompt)
    side = {"findings": [f"llm:{prediction}"]}
    answer = {
        "standardized_keywords": {"gt": {"findings": [f"llm:{reference}"]}, "pred": side},
        "gt_label": "abnormal",
        "pred_label": "abnormal",
    }
    return Reply(json.dumps(answer))


def test_captions_the_first_judge_could_not_read_go_to_the_second(tmp_path, shares_kind):
    pairs = [
        ("reference", "read well"),  # shares 0.1 / 0.0: kept
        ("reference", "partly read"),  # 0.3 > 0.25: sent
        ("reference", "hardly read"),  # sent
        ("reference", "read well"),  # kept
    ]
    with FakeOpenAI(answer_pair) as server:
        judge_cfg = cascade(
            llm_judge(server), {"kind": shares_kind}, "lexicon", unread_share_threshold=0.25
        )
        judge = make_judge(judge_cfg, "captioning", cache_dir=tmp_path)
        verdicts = judge.judge_pairs(pairs)
        assert sorted(pair_of(s.prompt) for s in server.requests) == [
            ("reference", "hardly read"),
            ("reference", "partly read"),
        ]
        keywords = [sorted(ref.keywords | pred.keywords) for ref, pred in verdicts]
        assert keywords == [
            ["kw:read well", "kw:reference"],
            ["llm:partly read", "llm:reference"],
            ["llm:hardly read", "llm:reference"],
            ["kw:read well", "kw:reference"],
        ]
        assert judge.usage()["decided_by"] == {"lexicon": 2, "llm-judge": 2}
        assert judge.identity()["unread_share_threshold"] == 0.25
        again = make_judge(judge_cfg, "captioning", cache_dir=tmp_path)
        assert again.judge_pairs(pairs) == verdicts
        assert len(server.requests) == 2


def test_captions_the_keyword_judge_is_not_confident_of_go_to_the_second(tmp_path):
    reference = "Axial FLAIR image shows a hyperintense lesion in the temporal lobe."
    pairs = [
        # Every word read: doubt 0, kept.
        (reference, "Axial FLAIR shows hyperintensity in the temporal lobe."),
        # Two invented words on a pair of few keywords: their F1 could move far, sent.
        (reference, "Axial FLAIR shows zorblax flibbertigibbet."),
    ]
    with FakeOpenAI(answer_pair) as server:
        keywords = {"kind": "keyword-lexicon", "settings": {}}
        judge_cfg = cascade(llm_judge(server), keywords, "keywords", max_keyword_doubt=25)
        judge = make_judge(judge_cfg, "captioning", cache_dir=tmp_path)
        verdicts = judge.judge_pairs(pairs)
        assert [pair_of(s.prompt)[1] for s in server.requests] == [pairs[1][1]]
    assert "llm:" not in " ".join(verdicts[0][1].keywords)
    assert judge.usage()["decided_by"] == {"keywords": 1, "llm-judge": 1}
    assert judge.identity()["max_keyword_doubt"] == 25


# --- configuration --------------------------------------------------------------------------

CONFIG = """
dataset: {source: sample, tag: tiny}
tasks:
  captioning: {enabled: false}
  localization: {enabled: false}
  diagnosis: {judge: c}
judges:
  llm-judge:
    kind: llm
    settings:
      backend: {base_url: "http://127.0.0.1:9/v1", model: judge-llm, provider: judgehost,
                api_key_env: NOVABENCH_TEST_UNSET_KEY}
  c: {kind: cascade, settings: {first: matcher, second: llm-judge}}
"""


def plan_for(tmp_path: Path, text: str):
    config = tmp_path / "config.yaml"
    config.write_text(text)
    return plan_from_files(ROOT, [config])


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            ("second: llm-judge", "second: gpt-5"),
            "judges.c.settings.second names 'gpt-5', which is not under judges:",
        ),
        (("first: matcher", "first: c"), "judges.c.settings.first names the cascade itself"),
        (
            (
                "  c: {kind",
                "  d: {kind: cascade, settings: {first: matcher, second: c}}\n  c: {kind",
            ),
            "judges.d.settings.second names 'c', another cascade",
        ),
        (
            ("second: llm-judge", "second: keywords"),
            "judges.c.settings.second: judge 'keywords' (kind keyword-lexicon) judges "
            "captioning, not diagnosis",
        ),
        (
            ("captioning: {enabled: false}", "captioning: {judge: c}"),
            "judges.c.settings.first: judge 'matcher' (kind diagnosis-matcher) judges "
            "diagnosis, not captioning",
        ),
        (
            ("second: llm-judge}", "second: llm-judge, depth: 2}"),
            "judges.c.settings: unknown setting depth",
        ),
    ],
)
def test_a_wrong_cascade_is_one_line_at_plan_time(tmp_path, change, message):
    with pytest.raises(ConfigError) as error:
        plan_for(tmp_path, CONFIG.replace(*change))
    assert message in str(error.value) and "\n" not in str(error.value)


def test_a_captioning_cascade_needs_its_threshold(tmp_path):
    config = CONFIG.replace("captioning: {enabled: false}", "captioning: {judge: c2}")
    config += "  c2: {kind: cascade, settings: {first: keywords, second: llm-judge}}\n"
    with pytest.raises(ConfigError, match=r"judges.c2.settings.max_keyword_doubt is not set"):
        plan_for(tmp_path, config)
    for bound in ("unread_share_threshold: 0.2", "max_keyword_doubt: 25"):
        fixed = config.replace("second: llm-judge}}\n", f"second: llm-judge, {bound}}}}}\n")
        plan = plan_for(tmp_path, fixed)
        assert plan.judge("captioning")["settings"]["first"]["name"] == "keywords"


def test_the_plan_runs_both_stages_code_resource_and_checks(tmp_path, monkeypatch):
    plan = plan_for(tmp_path, CONFIG)
    roots = plan.code_roots("read", task="diagnosis")
    for module in ("cascade", "diagnosis_matcher", "llm"):
        assert f"novabench.judges.{module}" in roots
    assert plan.api_resources()["api_judgehost"]["tasks"] == {"diagnosis"}
    assert plan.api_resources()["api_judgehost"]["judges"] == {plan.judge("diagnosis")["name"]}
    # The second judge's key is checked before a real run, under its own name.
    monkeypatch.delenv("NOVABENCH_TEST_UNSET_KEY", raising=False)
    with pytest.raises(NovaError, match=r"judges.llm-judge: .*NOVABENCH_TEST_UNSET_KEY"):
        plan.check_environment()
    # Its prompt is an input of the score job: editing it re-scores.
    assert any(p.endswith("judge-diagnosis-v1.txt") for p in plan.judge_inputs("diagnosis"))


def test_labels_are_counted_the_first_judges_way_and_other_judges_stay_as_configured(tmp_path):
    from novabench.judges import judge_kind
    from novabench.judges.diagnosis_matcher import DiagnosisMatcher

    plan = plan_for(tmp_path, CONFIG)
    judge = plan.judge("diagnosis")
    label = judge_kind("cascade").labeler(judge["settings"])
    matcher = DiagnosisMatcher(embedding_fallback=False)
    assert [label(t) for t in ("GBM", "Glioblastoma multiforme")] == [
        matcher.canonical_label(t) for t in ("GBM", "Glioblastoma multiforme")
    ]
    # What the judge report is given: the cascade written out, every other judge as it is.
    configs = plan.judge_configs()
    assert configs["matcher"] == plan.config["judges"]["matcher"]
    assert configs["c"]["settings"]["second"]["kind"] == "llm"
    assert plan.judge_kinds(judge) == ("cascade", "diagnosis-matcher", "llm")


def test_the_command_builds_a_configured_cascade_as_the_pipeline_does(tmp_path):
    # `novabench score --configfile config/paper-cascade.yaml` judges with both stages.
    from novabench.cli import configured_judge, pipeline_config
    from novabench.judges.base import make_judge

    files = [ROOT / "config" / "paper.yaml", ROOT / "config" / "paper-cascade.yaml"]
    judge_cfg = configured_judge("diagnosis", pipeline_config(ROOT, files))
    assert judge_cfg["settings"]["first"]["kind"] == "diagnosis-matcher"
    assert judge_cfg["settings"]["second"]["name"] == "gpt-4o-judge"
    judge = make_judge(judge_cfg, "diagnosis", cache_dir=tmp_path)
    assert judge.judge_ranked(["Glioblastoma"], "glioblastoma").judge == "matcher"
