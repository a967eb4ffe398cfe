"""Running models: records, statuses, adapters, and scoring what came out."""

from __future__ import annotations

import json
import math

import pytest

from novabench.answers import read_file
from novabench.dataset.read import load_nova
from novabench.errors import ConfigError, NovaError
from novabench.predict import run_predictions
from novabench.records import STATUSES, read_predictions
from novabench.score import score_predictions
from support import ROOT
from upstream import IMAGES

PROMPTS = ROOT / "config" / "prompts"


def predict(dataset, tmp_path, task, model_cfg, name="m", prompt=None):
    """(the records as the reading stage reads them, the prediction summary, the file)."""
    out = tmp_path / f"{task}-{name}.jsonl"
    summary = run_predictions(
        dataset=dataset,
        task=task,
        model_name=name,
        model_cfg=model_cfg,
        prompt_path=prompt or PROMPTS / f"{task}-v1.txt",
        out=out,
        summary_out=tmp_path / f"{task}-{name}.summary.json",
    )
    read = read_file(task, out, load_nova(dataset)).by_filename
    return [{**r, **read[r["filename"]]} for r in read_predictions(out)], summary, out


def read_counts(records):
    """Statuses of records as read, every status named."""
    return {s: sum(r["status"] == s for r in records) for s in STATUSES}


def test_gold_localization_records_and_perfect_score(dataset, tmp_path):
    records, summary, out = predict(
        dataset, tmp_path, "localization", {"adapter": "gold", "tasks": ["localization"]}
    )
    assert [r["filename"] for r in records] == sorted(name for name, *_ in IMAGES)
    by_name = {r["filename"]: r for r in records}
    assert by_name["case0002_001.png"]["status"] == "no_finding"  # the normal image
    first = by_name["case0001_002.png"]
    assert first["status"] == "ok" and first["request"]["prompt_id"] == "localization-v1"
    boxes = [(b["x"], b["y"], b["width"], b["height"]) for b in first["read"]["boxes"]]
    assert boxes == [(200.0, 210.0, 30.0, 30.0), (10.0, 20.0, 5.0, 6.0)]
    counts = {"ok": 3, "no_finding": 1, "parse_error": 0, "refusal": 0, "error": 0}
    assert read_counts(records) == {**counts, "missing": 0}
    # The prediction file says how the requests went, nothing read from the text.
    assert summary["status_counts"] == {"ok": 4, "refusal": 0, "error": 0, "missing": 0}
    assert "parsed" not in read_predictions(out)[0]

    scores = score_predictions(
        task="localization",
        dataset=dataset,
        predictions=out,
        out_json=tmp_path / "s.json",
        out_csv=tmp_path / "s.csv",
    )
    for key in ("mAP@30", "mAP@50", "mAP@[50:95]", "Hit@30", "Hit@50"):
        assert scores[key] == pytest.approx(100.0), key
    written = json.loads((tmp_path / "s.json").read_text())
    assert written["metrics"]["mAP@50"] == pytest.approx(100.0)
    assert written["inputs"]["predictions_sha256"]


def test_garbage_answers_score_zero_with_their_parse_error_rate(dataset, tmp_path):
    answers = tmp_path / "answers.jsonl"
    lines = [
        # A refusal: counted apart from parse failures, scored as an error.
        {"filename": "case0001_001.png", "raw": "I am not able to help with medical images."},
        {"filename": "case0001_002.png", "raw": "lesion at [12, 40, 3"},
        {"filename": "case0002_001.png", "raw": ""},
        # case0003_001.png is missing: counted as missing, not as a wrong answer
    ]
    answers.write_text("".join(json.dumps(line) + "\n" for line in lines))
    cfg = {
        "adapter": "predictions_file",
        "tasks": ["localization"],
        "box_format": "xyxy_1000",
        "max_error_rate": 0.25,
        "settings": {"path": str(answers)},
    }
    records, summary, out = predict(dataset, tmp_path, "localization", cfg, name="garbage")
    counts = {"ok": 0, "no_finding": 0, "parse_error": 2, "refusal": 1, "error": 0}
    assert read_counts(records) == {**counts, "missing": 1}
    # A refusal in the text is the reading stage's to find: the request went fine.
    assert summary["status_counts"] == {"ok": 3, "refusal": 0, "error": 0, "missing": 1}
    missing = next(r for r in records if r["filename"] == "case0003_001.png")
    assert missing["status"] == "missing" and "missing from" in missing["error"]
    scores = score_predictions(
        task="localization",
        dataset=dataset,
        predictions=out,
        out_json=tmp_path / "g.json",
        out_csv=tmp_path / "g.csv",
    )
    assert scores["mAP@50"] == 0.0 and scores["Hit@30"] == 0.0
    assert scores["parse_error_rate"] == pytest.approx(50.0)
    assert scores["refusal_rate"] == scores["missing_rate"] == pytest.approx(25.0)
    assert scores["n_missing"] == 1 and scores["error_rate"] == 0.0


def test_predictions_file_with_missing_images_stops_unless_allowed(dataset, tmp_path):
    answers = tmp_path / "partial.jsonl"
    lines = [
        {"filename": "case0001_001.png", "raw": "no finding"},
        {"filename": "case0001_002.png", "raw": "no finding"},
        {"filename": "case0002_001.png", "raw": "no finding"},
    ]
    answers.write_text("".join(json.dumps(line) + "\n" for line in lines))
    cfg = {
        "adapter": "predictions_file",
        "tasks": ["captioning"],
        "settings": {"path": str(answers)},
    }
    out = tmp_path / "captioning-partial.jsonl"
    with pytest.raises(NovaError) as caught:
        predict(dataset, tmp_path, "captioning", cfg, name="partial")
    assert str(caught.value) == (
        f"models.partial: {answers}: 1 of 4 images missing: case0003_001.png "
        "(images: 3 ok, 1 missing); fix: correct the file (`novabench validate` lists every "
        "line), or set models.partial.max_error_rate (a fraction of images) to score absent "
        "images as missing"
    )
    assert not out.exists()  # nothing is written for a refused file

    records, summary, out = predict(
        dataset, tmp_path, "captioning", {**cfg, "max_error_rate": 0.25}, name="partial"
    )
    assert summary["status_counts"]["missing"] == 1
    assert [r["status"] for r in records] == ["ok", "ok", "ok", "missing"]


def test_an_answer_longer_than_the_cap_is_cut_before_it_is_stored_and_counted(dataset, tmp_path):
    answers = tmp_path / "long.jsonl"
    long = "no finding " + "x" * 1_000_000
    others = ("case0001_002.png", "case0002_001.png", "case0003_001.png")
    lines = [{"filename": "case0001_001.png", "raw": long}]
    lines += [{"filename": n, "raw": "no finding"} for n in others]
    answers.write_text("".join(json.dumps(line) + "\n" for line in lines))
    cfg = {
        "adapter": "predictions_file",
        "tasks": ["captioning"],
        "settings": {"path": str(answers)},
    }
    _, summary, out = predict(dataset, tmp_path, "captioning", cfg, name="long")
    stored = {r["filename"]: r for r in map(json.loads, out.read_text().splitlines())}
    first = stored["case0001_001.png"]
    assert len(first["raw"]) == 262_144 and first["raw"] == long[:262_144]
    assert first["raw_chars"] == len(long) and "raw_chars" not in stored["case0001_002.png"]
    assert summary["n_truncated"] == 1


def test_predictions_file_in_a_declared_convention_is_parsed(dataset, tmp_path):
    answers = tmp_path / "gemini.jsonl"
    # case0001_001 gold box: x=100, y=120, w=60, h=40 in a 480x480 image, written as Gemini
    # would: [ymin, xmin, ymax, xmax] normalized to 0-1000.
    ymin, xmin, ymax, xmax = (v / 480 * 1000 for v in (120, 100, 160, 160))
    raw = f"lesion: [{ymin:.1f}, {xmin:.1f}, {ymax:.1f}, {xmax:.1f}]"
    answers.write_text(json.dumps({"filename": "case0001_001.png", "raw": raw}) + "\n")
    cfg = {
        "adapter": "predictions_file",
        "tasks": ["localization"],
        "box_format": "gemini_yxyx_1000",
        "max_error_rate": 1,  # one image on file is enough here
        "settings": {"path": str(answers)},
    }
    records, _, _ = predict(dataset, tmp_path, "localization", cfg)
    box = next(r for r in records if r["filename"] == "case0001_001.png")["read"]["boxes"][0]
    assert (box["x"], box["y"], box["width"], box["height"]) == pytest.approx(
        (100, 120, 60, 40), abs=0.3
    )


def test_predictions_file_for_another_dataset_is_refused(dataset, tmp_path):
    answers = tmp_path / "other.jsonl"
    answers.write_text(json.dumps({"filename": "case9999_001.png", "raw": "no finding"}) + "\n")
    cfg = {
        "adapter": "predictions_file",
        "tasks": ["localization"],
        "box_format": "pixel_xyxy",
        "settings": {"path": str(answers)},
    }
    with pytest.raises(NovaError, match=r"1 filename\(s\) not in the dataset: case9999_001\.png"):
        predict(dataset, tmp_path, "localization", cfg)


def test_random_control_is_seeded_per_image(dataset, tmp_path):
    cfg = {"adapter": "random", "tasks": ["localization"], "settings": {"seed": 3}}
    first, _, _ = predict(dataset, tmp_path, "localization", cfg, name="a")
    again, _, _ = predict(dataset, tmp_path, "localization", cfg, name="b")
    other, _, _ = predict(
        dataset, tmp_path, "localization", {**cfg, "settings": {"seed": 4}}, name="c"
    )
    assert [r["raw"] for r in first] == [r["raw"] for r in again]
    assert [r["raw"] for r in first] != [r["raw"] for r in other]
    for record in first:
        assert record["status"] == "ok"
        for box in record["read"]["boxes"]:
            assert box["x"] >= 0 and box["x"] + box["width"] <= 480


def test_a_model_must_declare_its_box_convention(dataset, tmp_path):
    answers = tmp_path / "a.jsonl"
    answers.write_text("")
    cfg = {
        "adapter": "predictions_file",
        "tasks": ["localization"],
        "settings": {"path": str(answers)},
    }
    with pytest.raises(ConfigError, match="declares no box_format"):
        predict(dataset, tmp_path, "localization", cfg)
    bad = {"adapter": "gold", "tasks": ["localization"], "box_format": "xyxy_1000"}
    with pytest.raises(ConfigError, match="always answers in pixel_xyxy"):
        predict(dataset, tmp_path, "localization", bad)


def test_an_adapter_refuses_tasks_it_cannot_run(dataset, tmp_path):
    with pytest.raises(ConfigError, match="cannot run captioning"):
        predict(dataset, tmp_path, "captioning", {"adapter": "random", "tasks": ["captioning"]})


def test_a_prompt_with_an_unknown_placeholder_is_reported(dataset, tmp_path):
    prompt = tmp_path / "bad-v1.txt"
    prompt.write_text("Describe {organ} in this image.")
    with pytest.raises(ConfigError, match=r"unknown or malformed placeholder \('organ'\)"):
        predict(
            dataset,
            tmp_path,
            "localization",
            {"adapter": "gold", "tasks": ["localization"]},
            prompt=prompt,
        )


def test_gold_captions_and_diagnoses_are_the_references(dataset, tmp_path):
    captions, _, _ = predict(
        dataset, tmp_path, "captioning", {"adapter": "gold", "tasks": ["captioning"]}
    )
    assert {r["filename"]: r["read"]["caption"] for r in captions} == {
        name: caption for name, _, caption, _ in IMAGES
    }
    diagnoses, _, _ = predict(
        dataset, tmp_path, "diagnosis", {"adapter": "gold", "tasks": ["diagnosis"]}
    )
    ranked = {r["filename"]: r["read"]["ranked"] for r in diagnoses}
    assert ranked["case0003_001.png"] == ["Acute ischemic infarct"]
    # the diagnosis prompt carries the history and the reference caption as findings
    assert all(r["status"] == "ok" for r in diagnoses)


def test_a_score_log_line_prints_plain_numbers():
    import numpy as np

    from novabench.score import metrics_text

    metrics = {"Top-1": np.float64(88.461538), "n_ok": np.int64(26), "Entropy": math.nan}
    metrics["judge"] = {"name": "matcher"}  # details stay in the score file
    assert metrics_text(metrics) == "Top-1=88.46, n_ok=26, Entropy=None"


def test_a_report_quotes_few_and_short_items_of_a_huge_file(dataset, tmp_path):
    answers = tmp_path / "huge.jsonl"
    lines = [{"filename": f"{n}-" + "x" * 10_000, "raw": "no finding"} for n in range(50)]
    answers.write_text("".join(json.dumps(line) + "\n" for line in lines) + "{oops\n" * 50)
    cfg = {"adapter": "predictions_file", "tasks": ["captioning"]}
    cfg["settings"] = {"path": str(answers)}
    with pytest.raises(NovaError) as caught:
        predict(dataset, tmp_path, "captioning", cfg)
    message = str(caught.value)
    assert "50 unreadable line(s): line 51 not valid JSON" in message and "and 47 more" in message
    assert "50 filename(s) not in the dataset: 0-xxx" in message
    assert len(message) < 2_000
