"""The live check of an LLM judge: a seeded sample of hand-labelled validation pairs sent in
every reading job (a scripted chat server on loopback answers it), its agreement and the
served model in the verdict summary and the score file, a bound that stops the reading."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from hand_label_judge import DriftingJudge, judge_from_hand_labels
from novabench.errors import NovaError
from novabench.judges.llm import live_check
from novabench.predict import run_predictions
from novabench.reading import read_predictions_file
from novabench.score import score_predictions
from openai_server import Fail, FakeOpenAI
from support import ROOT, judge_backend

PROMPTS = ROOT / "config" / "prompts"


def llm_judge(server: FakeOpenAI, **check) -> dict:
    return {
        "name": "llm-judge",
        "kind": "llm",
        "settings": {"backend": judge_backend(server), "live_check": check},
    }


def predictions(tmp_path: Path, dataset: Path, model: str, ranked: list[str]) -> Path:
    """``model``'s diagnosis answers on the four test images: ``ranked`` for each."""
    from upstream import IMAGES

    answers = tmp_path / f"{model}-answers.jsonl"
    raw = json.dumps({"most_likely_diagnosis": ranked[0], "other_possible_diagnoses": ranked[1:]})
    answers.write_text("".join(json.dumps({"filename": i[0], "raw": raw}) + "\n" for i in IMAGES))
    out = tmp_path / f"{model}.jsonl"
    run_predictions(
        dataset=dataset,
        task="diagnosis",
        model_name=model,
        model_cfg={"adapter": "predictions_file", "tasks": ["diagnosis"],
                   "settings": {"path": str(answers)}},
        prompt_path=PROMPTS / "diagnosis-v1.txt",
        out=out,
        summary_out=tmp_path / f"{model}.summary.json",
    )  # fmt: skip
    return out


def read(tmp_path: Path, dataset: Path, judge_cfg: dict, model: str = "m", task="diagnosis"):
    return read_predictions_file(
        task=task,
        dataset=dataset,
        predictions=predictions(tmp_path, dataset, model, [f"Frobnication of {model}"]),
        out=tmp_path / f"{model}.verdicts.jsonl",
        summary_out=tmp_path / f"{model}.verdicts.summary.json",
        judge_cfg=judge_cfg,
        cache_dir=tmp_path / "cache",
    )


def test_the_sample_is_seeded_held_out_and_the_same_every_run():
    first = live_check.sample_pairs("diagnosis", 40, 0)
    assert len(first) == 40 and all(p["split"] == "heldout" for p in first)
    assert first == live_check.sample_pairs("diagnosis", 40, 0)
    assert first != live_check.sample_pairs("diagnosis", 40, 1)
    assert len({p["set"] for p in first}) > 1  # drawn from every diagnosis set pooled
    captions = live_check.sample_pairs("captioning", 20, 0)
    assert len(captions) == 20 and all("reference_labels" in p for p in captions)
    assert live_check.sample_pairs("diagnosis", 0, 0) == []


def test_a_right_judge_passes_and_its_check_is_in_the_summary_and_cached(tmp_path, dataset):
    with FakeOpenAI(judge_from_hand_labels) as server:
        summary = read(tmp_path, dataset, llm_judge(server))
        sent = len(server.requests)
        again = read(tmp_path, dataset, llm_judge(server))
        assert len(server.requests) == sent  # a re-run is answered from the cache
    (check,) = summary["live_check"]
    assert check["judge"] == "llm-judge" and check["task"] == "diagnosis"
    assert check["value"] == 100.0 and check["n_pairs"] == 40 and check["passed"]
    assert check["served"] == {"model": ["judge-v1"], "system_fingerprint": ["fp_1"]}
    assert check["requests"]["sent"] == 40 and again["live_check"][0]["requests"]["sent"] == 0
    assert sent == 43  # the check is 40 requests; the four images have three references
    assert "live check of llm-judge: agreement 100.0% with hand labels" in check["line"]


def test_a_wrong_judge_stops_the_reading_with_one_line(tmp_path, dataset):
    with FakeOpenAI(lambda seen: judge_from_hand_labels(seen, wrong=True)) as server:
        with pytest.raises(NovaError) as stop:
            read(tmp_path, dataset, llm_judge(server))
        # Scoring anyway is the documented override; the check is then recorded below it.
        summary = read(tmp_path, dataset, llm_judge(server, stop=False))
    message = str(stop.value)
    assert "\n" not in message
    assert message.startswith("judges.llm-judge (diagnosis): live check of llm-judge: ")
    assert "agreement 0.0% with hand labels (bound >= 75%) on 40 pairs" in message
    assert "live_check.stop: false" in message
    assert not (tmp_path / "m.verdicts.jsonl").exists() or summary
    check = summary["live_check"][0]
    assert not check["passed"] and "BELOW THE BOUND" in check["line"]
    # The stopped check's answers left the cache: the re-run asked them again.
    assert check["requests"]["sent"] == 40
    assert check["stale"] is None and not check["refreshed"]


def test_a_judge_that_drifts_between_two_runs_is_asked_again_and_stops(tmp_path, dataset):
    # The first run's check is cached with judge-v1; the second run judges a new model's
    # answers and the server now is judge-v2, fp_2, and wrong: the cached check is not
    # the figure of the model that judged, so it is asked again, and stops the run.
    judge = DriftingJudge()
    with FakeOpenAI(judge) as server:
        first = read(tmp_path, dataset, llm_judge(server))
        judge.drifted = True
        drifted = read(tmp_path, dataset, llm_judge(server, stop=False), model="m2")
        with pytest.raises(NovaError) as stop:
            read(tmp_path, dataset, llm_judge(server), model="m3")
    assert first["live_check"][0]["served"]["model"] == ["judge-v1"]
    check = drifted["live_check"][0]
    assert check["refreshed"] and check["requests"]["sent"] == 40
    # The cached check it replaced: judge-v1's figure, beside judge-v2's.
    assert check["stale"] == {
        "value": 100.0,
        "served": {"model": ["judge-v1"], "system_fingerprint": ["fp_1"]},
    }
    assert check["served"] == {"model": ["judge-v2"], "system_fingerprint": ["fp_2"]}
    assert check["value"] == 0.0 and not check["passed"]
    assert "served judge-v2, fp_2, BELOW THE BOUND" in str(stop.value)


def test_a_caption_judge_is_checked_on_clinical_f1(tmp_path, dataset, nltk_data):
    from upstream import IMAGES

    answers = tmp_path / "captions.jsonl"
    raw = "Axial FLAIR shows a mass."
    answers.write_text("".join(json.dumps({"filename": i[0], "raw": raw}) + "\n" for i in IMAGES))
    out = tmp_path / "captioning.jsonl"
    run_predictions(
        dataset=dataset,
        task="captioning",
        model_name="m",
        model_cfg={"adapter": "predictions_file", "tasks": ["captioning"],
                   "settings": {"path": str(answers)}},
        prompt_path=PROMPTS / "captioning-v1.txt",
        out=out,
        summary_out=tmp_path / "captioning.summary.json",
    )  # fmt: skip
    with FakeOpenAI(judge_from_hand_labels) as server:
        score_predictions(
            task="captioning",
            dataset=dataset,
            predictions=out,
            out_json=tmp_path / "scores.json",
            out_csv=tmp_path / "scores.csv",
            judge_cfg=llm_judge(server),
            nltk_data=nltk_data,
            cache_dir=tmp_path / "cache",
        )
    check = json.loads((tmp_path / "scores.json").read_text())["judge_live_check"][0]
    assert check["measure"] == "clinical_f1_difference" and check["unit"] == "points"
    assert check["n_pairs"] == 20 and check["passed"]
    assert check["value"] < 5  # the hand keywords, read back through the judge's cleaning
    assert "Clinical F1" in check["line"] and "(bound <= 25)" in check["line"]


def test_switched_off_the_check_sends_nothing(tmp_path, dataset):
    with FakeOpenAI(judge_from_hand_labels) as server:
        summary = read(tmp_path, dataset, llm_judge(server, diagnosis_pairs=0))
        assert len(server.requests) == 3  # the job's own: three distinct references
    assert summary["live_check"] is None


def test_a_cascade_checks_its_llm_stage_and_the_judge_line_prints_it(tmp_path, dataset):
    from novabench.judges.base import expand_judge
    from novabench.report.tables import judge_line

    with FakeOpenAI(judge_from_hand_labels) as server:
        judges = {
            "matcher": {"kind": "diagnosis-matcher", "settings": {"embedding_fallback": False}},
            "llm-judge": {k: v for k, v in llm_judge(server).items() if k != "name"},
            "c": {"kind": "cascade", "settings": {"first": "matcher", "second": "llm-judge"}},
        }
        summary = read(tmp_path, dataset, expand_judge(judges, "c"))
    (check,) = summary["live_check"]  # the matcher has none; its LLM stage one
    assert check["judge"] == "llm-judge" and check["passed"]
    line = judge_line({"judge": summary["identity"], "judge_live_check": summary["live_check"]})
    assert line.startswith("cascade(")
    assert line.endswith(
        "; live check of llm-judge: agreement 100.0% with hand labels (bound >= 75%) on 40 "
        "pairs, served judge-v1, fp_1"
    )


def test_without_the_validation_sets_the_check_says_how_to_switch_it_off(tmp_path, monkeypatch):
    from novabench import paths
    from novabench.judges.llm import make_llm_judge

    monkeypatch.setattr(paths, "VALIDATION", tmp_path / "absent")
    nowhere = SimpleNamespace(base_url="http://127.0.0.1:9/v1")  # nothing is sent
    judge = make_llm_judge("llm-judge", llm_judge(nowhere)["settings"], "diagnosis")
    with pytest.raises(NovaError) as stop:
        judge.live_check()
    assert str(stop.value).startswith("judges.llm-judge: its live check cannot run: no validation")
    assert str(stop.value).endswith("judges.llm-judge.settings.live_check.diagnosis_pairs: 0")


def test_failed_or_undecided_verdicts_count_as_disagreements():
    # An endpoint that fails every request leaves each verdict undecided and failed; read
    # as "no match" it would agree on every non-match pair (52.5% of the seed-0 sample).
    from novabench.judge_verdicts import RankedVerdict

    pairs = live_check.sample_pairs("diagnosis", 40, 0)
    assert any(not p["match"] for p in pairs)

    def judge(verdict):
        return SimpleNamespace(judge_ranked_many=lambda asked: [verdict] * len(asked))

    failed = RankedVerdict("undecided", "undecided", failed=True)
    assert live_check.diagnosis_figure(judge(failed), pairs) == (0.0, 40)
    undecided = RankedVerdict("undecided", "undecided")
    assert live_check.diagnosis_figure(judge(undecided), pairs) == (0.0, 40)
    # A failure marked on a verdict that still reads "no_match" is no agreement either.
    marked = RankedVerdict("no_match", "no_match", failed=True)
    assert live_check.diagnosis_figure(judge(marked), pairs) == (0.0, 40)


def test_an_endpoint_that_fails_every_request_agrees_on_nothing(tmp_path, dataset):
    with FakeOpenAI(lambda seen: Fail(400)) as server:
        cfg = llm_judge(server, stop=False)
        cfg["settings"]["max_failure_rate"] = 100  # score anyway, to read the check's figure
        summary = read(tmp_path, dataset, cfg)
    (check,) = summary["live_check"]
    assert check["value"] == 0.0 and check["n_pairs"] == 40 and not check["passed"]
    assert "agreement 0.0% with hand labels" in check["line"]
