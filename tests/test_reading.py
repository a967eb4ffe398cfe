"""The reading stage: raw answers in, verdict files out; scoring counts the verdicts and
runs no judge."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from novabench.errors import NovaError
from novabench.predict import run_predictions
from novabench.reading import read_predictions_file
from novabench.records import read_verdicts, write_jsonl
from novabench.score import score_verdicts
from novabench.tasks import get_task
from support import ROOT, predict_from_file
from upstream import CASES, IMAGES

NAMES = sorted(name for name, *_ in IMAGES)
MATCHER = {
    "name": "matcher",
    "kind": "diagnosis-matcher",
    "settings": {"embedding_fallback": False},
}


def diagnosis_answers(tmp_path: Path, dataset: Path) -> Path:
    """A diagnosis model's prediction file: right, a synonym, unreadable, a text refusal."""
    ranked = {
        NAMES[0]: ["Glioblastoma", "Metastasis"],
        NAMES[1]: ["GBM"],
        NAMES[2]: None,
        NAMES[3]: "refusal",
    }
    lines = []
    for name, answer in ranked.items():
        if answer is None:
            raw = "no json here"
        elif answer == "refusal":
            raw = "I cannot provide medical diagnoses. Please consult a doctor."
        else:
            raw = json.dumps(
                {"most_likely_diagnosis": answer[0], "other_possible_diagnoses": answer[1:]}
            )
        lines.append({"filename": name, "raw": raw})
    answers = tmp_path / "answers.jsonl"
    write_jsonl(lines, answers)
    out = tmp_path / "predictions.jsonl"
    run_predictions(
        dataset=dataset,
        task="diagnosis",
        model_name="m",
        model_cfg={
            "adapter": "predictions_file",
            "tasks": ["diagnosis"],
            "settings": {"path": str(answers)},
        },
        prompt_path=ROOT / "config" / "prompts" / "diagnosis-v1.txt",
        out=out,
        summary_out=tmp_path / "predictions.summary.json",
    )
    return out


def read(tmp_path: Path, dataset: Path, predictions: Path, judge=MATCHER) -> dict:
    return read_predictions_file(
        task="diagnosis",
        dataset=dataset,
        predictions=predictions,
        out=tmp_path / "verdicts.jsonl",
        summary_out=tmp_path / "verdicts.summary.json",
        judge_cfg=judge,
        code="abc",
    )


def test_reading_writes_statuses_reads_verdicts_and_labels(dataset, tmp_path):
    predictions = diagnosis_answers(tmp_path, dataset)
    # The prediction file holds the answers only: every request went fine.
    assert {json.loads(line)["status"] for line in predictions.open()} == {"ok"}
    summary = read(tmp_path, dataset, predictions)
    records = {r["filename"]: r for r in read_verdicts(tmp_path / "verdicts.jsonl")}
    assert list(records) == NAMES  # dataset order
    right, synonym, unreadable, refused = (records[n] for n in NAMES)
    assert right["status"] == "ok" and right["read"] == {"ranked": ["Glioblastoma", "Metastasis"]}
    assert right["verdict"]["top1"] == right["verdict"]["top5"] == "match"
    assert right["labels"] == {"top1_correct": True, "top5_correct": True}
    # GBM for a glioblastoma: a match, and one label as Coverage counts it.
    assert synonym["verdict"]["top1"] == "match"
    assert synonym["verdict"]["top1_label"] == synonym["verdict"]["reference_label"]
    assert synonym["verdict"]["top1_label"] == right["verdict"]["reference_label"]
    assert unreadable["status"] == "parse_error" and unreadable["read"] is None
    assert unreadable["verdict"]["top1"] is None  # nothing judged: wrong, not undecided
    assert unreadable["labels"] == {"top1_correct": False, "top5_correct": False}
    assert refused["status"] == "refusal" and refused["error"].startswith("the model declined")
    assert summary["status_counts"] == {
        "ok": 2,
        "no_finding": 0,
        "parse_error": 1,
        "refusal": 1,
        "error": 0,
        "missing": 0,
    }
    assert summary["judge"] == "matcher" and summary["identity"]["embedding_fallback"] is False
    assert summary["verdict_counts"]["top1:match"] == 2 and summary["code"] == "abc"
    assert summary["notes"] == {"label_normalization": "judge.canonical_label"}


def test_scoring_counts_the_verdicts_and_builds_no_judge(dataset, tmp_path, monkeypatch):
    predictions = diagnosis_answers(tmp_path, dataset)
    read(tmp_path, dataset, predictions)

    def no_judge(*args, **kwargs):
        raise AssertionError("scoring built a judge")

    monkeypatch.setattr("novabench.judges.make_judge", no_judge)
    monkeypatch.setattr("novabench.judges.base.make_judge", no_judge)
    metrics = score_verdicts(
        task="diagnosis",
        dataset=dataset,
        verdicts=tmp_path / "verdicts.jsonl",
        verdict_summary=tmp_path / "verdicts.summary.json",
        out_json=tmp_path / "scores.json",
        out_csv=tmp_path / "scores.images.csv",
        options={"unit": "image"},
    )
    assert metrics["Top-1"] == pytest.approx(50.0) and metrics["n_parse_error"] == 1
    assert metrics["refusal_rate"] == pytest.approx(25.0)
    payload = json.loads((tmp_path / "scores.json").read_text())
    summary = json.loads((tmp_path / "verdicts.summary.json").read_text())
    assert payload["judge"] == summary["identity"] and payload["judge_usage"] is None
    assert payload["inputs"]["predictions_sha256"] == summary["inputs"]["predictions_sha256"]
    per_image = pd.read_csv(tmp_path / "scores.images.csv")
    verdicts = read_verdicts(tmp_path / "verdicts.jsonl")
    assert list(per_image["reference_label"]) == [v["verdict"]["reference_label"] for v in verdicts]
    assert per_image["top1_label"].isna().tolist() == [False, False, True, True]


def test_another_harness_parsed_value_is_read_as_it_is(dataset, tmp_path):
    records = [
        {
            "filename": name,
            "model": "elsewhere",
            "status": "ok",
            "parsed": {"ranked": [CASES[c][1]]},
        }
        for name, c, *_ in IMAGES
    ]
    records[0] = {**records[0], "raw": "not json at all"}  # its parsed value wins
    write_jsonl(records, tmp_path / "harness.jsonl")
    read(tmp_path, dataset, tmp_path / "harness.jsonl")
    verdicts = read_verdicts(tmp_path / "verdicts.jsonl")
    assert {v["status"] for v in verdicts} == {"ok"}
    assert all(v["labels"]["top1_correct"] for v in verdicts)


def read_boxes(tmp_path: Path, dataset: Path, predictions: Path, options=None):
    """(summary, verdicts) of reading localization ``predictions`` (no judge; ``options``:
    the task's reading options, None: its defaults)."""
    summary = read_predictions_file(
        task="localization",
        dataset=dataset,
        predictions=predictions,
        out=tmp_path / "v.jsonl",
        summary_out=tmp_path / "v.summary.json",
        options=options,
    )
    return summary, read_verdicts(tmp_path / "v.jsonl")


def test_another_harness_parsed_boxes_are_capped_like_read_ones(dataset, tmp_path):
    box = {"x": 10.0, "y": 20.0, "width": 30.0, "height": 30.0, "score": None, "label": None}
    parsed = {"boxes": [box] * 150, "dropped": 0, "error": None}
    records = [
        {"filename": n, "model": "elsewhere", "status": "ok", "parsed": parsed} for n in NAMES
    ]
    write_jsonl(records, tmp_path / "harness.jsonl")
    _, verdicts = read_boxes(tmp_path, dataset, tmp_path / "harness.jsonl")
    for verdict in verdicts:
        assert len(verdict["read"]["boxes"]) == 100 and verdict["read"]["over_cap"] == 50


def test_a_task_without_a_judge_is_read_as_its_reader(dataset, tmp_path):
    answers = tmp_path / "boxes.jsonl"
    write_jsonl([{"filename": n, "raw": "[10, 20, 110, 120]"} for n in NAMES], answers)
    predict_from_file(
        dataset, answers, "localization", tmp_path / "p.jsonl", box_format="pixel_xyxy"
    )
    summary, (first, *_) = read_boxes(tmp_path, dataset, tmp_path / "p.jsonl")
    assert summary["judge"] == "boxes" and summary["identity"] is None
    assert first["verdict"] is None and first["labels"] == {}
    (box,) = first["read"]["boxes"]
    assert (box["x"], box["y"], box["width"], box["height"]) == (10, 20, 100, 100)


@pytest.mark.parametrize("max_boxes, kept", [(None, 100), (2, 2)])
def test_reading_keeps_the_configured_boxes_per_answer_and_counts_the_rest(
    dataset, tmp_path, max_boxes, kept
):
    grid = [[x, y, x + 20, y + 20] for x in range(0, 400, 25) for y in range(0, 400, 25)]
    answers = tmp_path / "grid.jsonl"
    write_jsonl([{"filename": n, "raw": json.dumps(grid)} for n in NAMES], answers)
    out = tmp_path / "p.jsonl"
    predict_from_file(dataset, answers, "localization", out, "grid", box_format="pixel_xyxy")
    config = {} if max_boxes is None else {"max_boxes": max_boxes}
    options = get_task("localization").reading_options(config)
    _, verdicts = read_boxes(tmp_path, dataset, out, options)
    for verdict in verdicts:
        assert len(verdict["read"]["boxes"]) == kept
        assert verdict["read"]["over_cap"] == len(grid) - kept


def test_a_status_this_pipeline_does_not_count_is_refused_in_one_line(dataset, tmp_path):
    records = [
        {"filename": name, "model": "elsewhere", "status": "ok", "parsed": {"ranked": ["x"]}}
        for name, *_ in IMAGES
    ]
    records[1] = {**records[1], "status": "timeout"}  # another harness's status
    write_jsonl(records, tmp_path / "harness.jsonl")
    with pytest.raises(NovaError) as caught:
        read(tmp_path, dataset, tmp_path / "harness.jsonl")
    message = str(caught.value)
    assert "\n" not in message and str(tmp_path / "harness.jsonl") in message
    assert "'timeout'" in message and "ok, no_finding, parse_error, refusal" in message
    assert not (tmp_path / "verdicts.jsonl").exists()


def test_each_task_counts_its_own_verdicts():
    """The verdict summary's counts come from the task: the reading stage knows none."""
    from novabench.tasks import get_task

    diagnosis = [{"top1": "match", "top5": "match"}, {"top1": "no_match", "top5": "match"}, None]
    assert get_task("diagnosis").verdict_counts(diagnosis) == {
        "top1:match": 1,
        "top1:no_match": 1,
        "top5:match": 2,
    }
    captions = [{"judged": True}, {"judged": False}, {"judged": True}]
    assert get_task("captioning").verdict_counts(captions) == {"judged": 2, "not_judged": 1}
    assert get_task("localization").verdict_counts([None, None]) == {}
    source = (ROOT / "scripts" / "novabench" / "reading.py").read_text()
    assert "top1" not in source and '"judged"' not in source
