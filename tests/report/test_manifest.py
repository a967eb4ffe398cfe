"""The provenance manifest: everything that produced the results, and no secret."""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path

import pytest

from novabench.provenance import canonical_json
from novabench.report.manifest import build_manifest, drop_secrets, git_state, write_manifest

SECRET_VALUES = ("sk-live-123456", "hunter2", "ghp_tokenvalue", "s3cr3t")
CONFIG = {
    "dataset": {"source": "sample", "sample": {"seed": 11, "n_cases": 3}},
    "tasks": {"localization": {"enabled": True, "prompt": "loc.txt"}},
    "judges": {
        "keywords": {"kind": "keyword-lexicon", "settings": {"auth_token": "ghp_tokenvalue"}}
    },
    "models": {
        "api-model": {
            "adapter": "openai_compatible",
            "tasks": ["localization"],
            "box_format": "pixel_xyxy",
            "settings": {
                "base_url": "https://example.org/v1",
                "api_key": "sk-live-123456",
                "api_key_env": "EXAMPLE_KEY",
                "temperature": 0.1,
                "extra_body": {"Password": "hunter2", "top_k": 5},
                "headers": [{"x-secret": "s3cr3t", "x-trace": "on"}],
            },
        },
        "random": {"adapter": "random", "tasks": ["localization"], "settings": {"seed": 4}},
        "off": {"adapter": "gold", "tasks": ["localization"], "enabled": False},
    },
    "reporting": {"bootstrap": {"resamples": 100, "seed": 9, "confidence": 0.95}},
}


def test_drop_secrets_at_any_depth():
    cleaned = drop_secrets(CONFIG["models"]["api-model"]["settings"])
    assert cleaned == {
        "base_url": "https://example.org/v1",
        "temperature": 0.1,
        "extra_body": {"top_k": 5},
        "headers": [{"x-trace": "on"}],
    }


@pytest.fixture
def inputs(tmp_path):
    dataset = tmp_path / "dataset_manifest.json"
    dataset.write_text(
        json.dumps(
            {
                "source": "hf",
                "repo_id": "c-i-ber/Nova",
                "revision": "main",
                "resolved_revision": "abc123",
                "sha256": "f" * 64,
                "n_images": 3,
                "raters": ["r1"],
                "missing_text": {},
            }
        )
    )
    prompt = tmp_path / "loc.txt"
    prompt.write_text("Find the lesion in {width}x{height}.")
    summary = tmp_path / "predictions" / "localization" / "api-model.summary.json"
    summary.parent.mkdir(parents=True)
    summary.write_text(
        json.dumps(
            {
                "model": "api-model",
                "identity": {"settings": {"api_key": "sk-live-123456"}},
                "request": {
                    "prompt_id": "loc",
                    "prompt_sha256": "1" * 64,
                    "model_sha256": "2" * 64,
                },
                "status_counts": {"ok": 3},
            }
        )
    )
    score = tmp_path / "scores" / "localization" / "api-model.json"
    score.parent.mkdir(parents=True)
    score.write_text(
        json.dumps(
            {
                "task": "localization",
                "model": "api-model",
                "metrics": {"Hit@30": 50.0},
                "judge": None,
                "inputs": {"dataset_sha256": "f" * 64},
            }
        )
    )
    return {"dataset": dataset, "prompt": prompt, "summary": summary, "score": score}


def test_manifest_records_provenance_without_secrets(inputs, tmp_path):
    out = tmp_path / "manifest.json"
    write_manifest(
        out,
        config=CONFIG,
        dataset_manifest=inputs["dataset"],
        prediction_summaries=[inputs["summary"]],
        score_files=[inputs["score"]],
        prompts=[inputs["prompt"]],
        git={"commit": "0123abc", "dirty": False},
    )
    text = out.read_text()
    for secret in SECRET_VALUES:
        assert secret not in text
    for key in _all_keys(json.loads(text)):
        assert not any(word in key.lower() for word in ("key", "token", "secret", "password"))

    manifest = json.loads(text)
    assert manifest["git"] == {"commit": "0123abc", "dirty": False}
    expected_hash = hashlib.sha256(canonical_json(CONFIG).encode()).hexdigest()
    assert manifest["config_sha256"] == expected_hash
    assert manifest["dataset"]["resolved_revision"] == "abc123"
    assert manifest["dataset"]["sha256"] == "f" * 64
    assert "missing_text" not in manifest["dataset"]
    assert manifest["software"]["packages"]["snakemake"]
    assert manifest["software"]["packages"]["numpy"]
    assert set(manifest["models"]) == {"api-model", "random"}  # disabled models left out
    assert manifest["models"]["api-model"]["settings"]["temperature"] == 0.1
    prompt_sha = hashlib.sha256(inputs["prompt"].read_bytes()).hexdigest()
    assert manifest["prompts"]["loc.txt"] == {"id": "loc", "sha256": prompt_sha}
    request = manifest["predictions"]["localization"]["api-model"]["request"]
    assert request["prompt_sha256"] == "1" * 64
    score_sha = hashlib.sha256(inputs["score"].read_bytes()).hexdigest()
    assert manifest["scores"]["localization"]["api-model"]["sha256"] == score_sha
    assert manifest["seeds"] == {
        "dataset.sample.seed": 11,
        "reporting.bootstrap.seed": 9,
        "models.random.settings.seed": 4,
    }


def _all_keys(value) -> list[str]:
    if isinstance(value, dict):
        return [*value, *(k for v in value.values() for k in _all_keys(v))]
    if isinstance(value, list):
        return [k for v in value for k in _all_keys(v)]
    return []


def test_git_state_inside_and_outside_a_checkout(tmp_path):
    assert git_state(tmp_path) == {"commit": None, "dirty": None}
    repo = tmp_path / "repo"
    repo.mkdir()
    run = lambda *a: subprocess.run(["git", "-C", str(repo), *a], check=True, capture_output=True)  # noqa: E731
    run("init", "-q")
    (repo / "f.txt").write_text("one")
    run("add", "f.txt")
    run("-c", "user.name=t", "-c", "user.email=t@example.org", "commit", "-q", "-m", "x")
    head = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    assert git_state(repo) == {"commit": head, "dirty": False}
    (repo / "f.txt").write_text("two")
    assert git_state(repo) == {"commit": head, "dirty": True}


def test_build_manifest_without_git(inputs):
    manifest = build_manifest(
        config=CONFIG,
        dataset_manifest=Path(inputs["dataset"]),
        prediction_summaries=[],
        score_files=[],
    )
    assert manifest["git"]["commit"] is None
