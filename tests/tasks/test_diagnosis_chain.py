"""The caption-to-diagnosis chain: `tasks.diagnosis.findings: <captioning model>`.

The diagnosis prompt then carries that model's captions as the MRI findings instead of
the reference caption; an image the captioning model gave no usable caption for gets
empty findings (never the reference, which would leak the answer).
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from novabench.models import predictions_file
from novabench.predict import run_predictions
from novabench.records import read_predictions
from read_back import read_back
from support import ROOT, SNAKEMAKE
from upstream import CASES, IMAGES

TARGET = "results/sample/predictions/diagnosis/retrieval.jsonl"

# A captioning model's answers, written by hand: two usable captions, one blank answer
# (parse_error) and one image it never answered (error).
MODEL_CAPTIONS = {
    "case0001_001.png": "Model reading: enhancing mass in the left parietal lobe.",
    "case0001_002.png": "   ",
    "case0003_001.png": "Model reading: restricted diffusion in the right thalamus.",
}
FINDINGS = {
    "case0001_001.png": MODEL_CAPTIONS["case0001_001.png"],
    "case0001_002.png": "",
    "case0002_001.png": "",
    "case0003_001.png": MODEL_CAPTIONS["case0003_001.png"],
}
REFERENCE = {name: caption for name, _, caption, _ in IMAGES}
HISTORY = {name: CASES[case][0] for name, case, _, _ in IMAGES}
# Angle brackets show where the findings start and end, so empty findings are visible.
TEMPLATE = "History: {clinical_history}\nFindings: <{findings}>\nDiagnosis?"


def write_jsonl(path: Path, answers: dict[str, str]) -> Path:
    path.write_text(
        "".join(json.dumps({"filename": f, "raw": r}) + "\n" for f, r in answers.items())
    )
    return path


@pytest.fixture
def seen_samples(monkeypatch) -> list:
    """Every sample handed to a predictions_file model, as the model receives it."""
    seen = []
    original = predictions_file.Adapter.predict

    def spy(self, samples):
        seen.extend(samples)
        return original(self, samples)

    monkeypatch.setattr(predictions_file.Adapter, "predict", spy)
    return seen


def predict_from_file(
    dataset, tmp_path, task, answers, prompt, max_error_rate=0, **upstream
) -> Path:
    """Predictions of a model whose answers are on file (``predictions_file``)."""
    out = tmp_path / f"{task}.jsonl"
    run_predictions(
        dataset=dataset,
        task=task,
        model_name=f"{task}-model",
        model_cfg={
            "adapter": "predictions_file",
            "tasks": [task],
            "max_error_rate": max_error_rate,
            "settings": {"path": str(answers)},
        },
        prompt_path=prompt,
        out=out,
        summary_out=tmp_path / f"{task}.summary.json",
        **upstream,
    )
    return out


def diagnose(dataset, tmp_path, seen, **upstream) -> dict[str, str]:
    """Run a diagnosis model from answers on file; return the prompt sent for each image."""
    answer = json.dumps({"most_likely_diagnosis": "Glioblastoma", "other_possible_diagnoses": []})
    answers = write_jsonl(tmp_path / "diagnoses.jsonl", {f: answer for f in REFERENCE})
    prompt = tmp_path / "diagnosis-chain.txt"
    prompt.write_text(TEMPLATE)
    out = predict_from_file(dataset, tmp_path, "diagnosis", answers, prompt, **upstream)
    assert {r["status"] for r in read_predictions(out)} == {"ok"}
    return {s.filename: s.prompt for s in seen if s.task == "diagnosis"}


@pytest.fixture
def captions(dataset, tmp_path) -> Path:
    """The captioning model's prediction file."""
    answers = write_jsonl(tmp_path / "captions-answers.jsonl", MODEL_CAPTIONS)
    prompt = ROOT / "config" / "prompts" / "captioning-v1.txt"
    # one image of four has no caption on file
    out = predict_from_file(dataset, tmp_path, "captioning", answers, prompt, max_error_rate=0.25)
    # As read: the empty caption is unreadable (the prediction file says only "ok").
    status = {r["filename"]: r["status"] for r in read_back(out, dataset)}
    assert status == {
        "case0001_001.png": "ok",
        "case0001_002.png": "parse_error",
        "case0002_001.png": "missing",
        "case0003_001.png": "ok",
    }
    return out


def test_diagnosis_reads_the_model_captions_not_the_reference(
    dataset, tmp_path, captions, seen_samples
):
    prompts = diagnose(dataset, tmp_path, seen_samples, upstream_predictions=captions)
    assert prompts == {
        name: f"History: {HISTORY[name]}\nFindings: <{FINDINGS[name]}>\nDiagnosis?"
        for name in REFERENCE
    }
    for sample in (s for s in seen_samples if s.task == "diagnosis"):
        assert REFERENCE[sample.filename] not in sample.prompt
        assert sample.inputs["findings"] == FINDINGS[sample.filename]
        assert sample.image_png is None  # text only, as in NOVA


def test_without_a_captioning_model_the_findings_are_the_reference(dataset, tmp_path, seen_samples):
    assert diagnose(dataset, tmp_path, seen_samples) == {
        name: f"History: {HISTORY[name]}\nFindings: <{REFERENCE[name]}>\nDiagnosis?"
        for name in REFERENCE
    }


# --- the config key, as Snakemake reads it ------------------------------------------------


def dry_run(tmp_path: Path, findings: str) -> subprocess.CompletedProcess:
    config = tmp_path / "chain.yaml"
    config.write_text(yaml.safe_dump({"tasks": {"diagnosis": {"findings": findings}}}))
    return subprocess.run(
        [*SNAKEMAKE, TARGET, "-d", str(tmp_path), "--dry-run", "--configfile", str(config)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )


def diagnosis_job_inputs(output: str) -> list[str]:
    """The inputs of the dry run's diagnosis job (Snakemake prints them before its output)."""
    job = re.search(
        r"input: (.*)\n\s+output: results/sample/predictions/diagnosis/retrieval\.jsonl", output
    )
    assert job, f"no diagnosis job in:\n{output[-3000:]}"
    return job.group(1).split(", ")


def test_the_findings_key_makes_diagnosis_wait_for_the_captions(tmp_path):
    chained = dry_run(tmp_path, "classical")
    assert chained.returncode == 0, chained.stderr[-3000:]
    inputs = diagnosis_job_inputs(chained.stdout + chained.stderr)
    assert "results/sample/predictions/captioning/classical.jsonl" in inputs

    reference = dry_run(tmp_path, "reference")
    assert reference.returncode == 0, reference.stderr[-3000:]
    inputs = diagnosis_job_inputs(reference.stdout + reference.stderr)
    assert not any("predictions/captioning" in path for path in inputs)


def test_findings_from_a_model_that_does_not_caption_is_refused(tmp_path):
    result = dry_run(tmp_path, "random")
    assert result.returncode != 0
    output = result.stdout + result.stderr
    assert re.search(r"tasks\.diagnosis.*'random'.*captioning.*; fix: ", output)
    assert "Traceback" not in output
