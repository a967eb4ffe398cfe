"""The estimate before a run: requests, tokens, dollars and time, checked by hand."""

from __future__ import annotations

import hashlib
import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from novabench import tokens
from novabench.cache import ResponseCache, request_key
from novabench.cli import main
from novabench.config import plan_from_files
from novabench.estimate import (
    PLACEHOLDER_CHARS,
    estimate_run,
    expected_size,
    format_estimate,
)

ROOT = Path(__file__).resolve().parents[1]
CAPTIONING_PROMPT = (ROOT / "config" / "prompts" / "captioning-v1.txt").read_text()
DIAGNOSIS_PROMPT = (ROOT / "config" / "prompts" / "diagnosis-v1.txt").read_text()
BASE_URL = "http://127.0.0.1:9/v1"
TINY = """
dataset: {source: sample, tag: tiny}
models:
  m:
    adapter: openai_compatible
    tasks: [captioning]
    settings: {base_url: "http://127.0.0.1:9/v1", model: vlm-1, api_key_env: null, concurrency: 3}
    info:
      price_usd_per_million_tokens: {input: 2.0, output: 10.0}
      latency_s: 4
      image_tokens: 100
"""


def plan_for(tmp_path: Path, text: str):
    config = tmp_path / "config.yaml"
    config.write_text(text)
    return plan_from_files(ROOT, [config])


@pytest.fixture
def workdir(tmp_path, dataset) -> Path:
    """A run's working directory with the four-image dataset built as results/tiny/."""
    target = tmp_path / "results" / "tiny" / "dataset" / "nova.parquet"
    target.parent.mkdir(parents=True)
    shutil.copy(dataset, target)
    return tmp_path


def images(workdir: Path) -> list[dict]:
    """The dataset's rows in filename order, read without the package."""
    table = pq.read_table(workdir / "results" / "tiny" / "dataset" / "nova.parquet")
    return sorted(table.to_pylist(), key=lambda row: row["filename"])


def test_every_request_is_counted_with_the_configured_price_and_concurrency(workdir):
    (job,) = estimate_run(plan_for(workdir, TINY), workdir).jobs
    n = len(images(workdir))
    per_request = math.ceil(len(CAPTIONING_PROMPT) / 4) + 100  # text + the fixed image count
    assert (job.requests, job.to_send) == (n, n)
    assert job.input_tokens == n * per_request
    assert job.output_tokens == n * 70  # the captioning task's answer_tokens
    assert job.usd == pytest.approx((n * per_request * 2.0 + n * 70 * 10.0) / 1e6)
    assert job.wall_s == math.ceil(n / 3) * 4


def test_a_cached_answer_is_one_request_less_and_its_usage_is_the_measure(workdir):
    first = images(workdir)[0]
    identity = {  # the adapter's cache key, written out here
        "model": "vlm-1",
        "base_url": BASE_URL,
        "generation": {"temperature": 0.1, "max_tokens": 2048, "seed": None, "extra_body": {}},
        "system_prompt": None,
        "prompt": CAPTIONING_PROMPT,
        "image_sha256": hashlib.sha256(first["image"]["bytes"]).hexdigest(),
    }
    answer = {"raw": "Axial FLAIR.", "usage": {"prompt_tokens": 300, "completion_tokens": 40}}
    ResponseCache(workdir / "results" / "cache" / "m").put(request_key(identity), answer, identity)
    (job,) = estimate_run(plan_for(workdir, TINY), workdir).jobs
    n = len(images(workdir))
    assert (job.requests, job.to_send) == (n, n - 1)
    assert (job.input_tokens, job.output_tokens) == (300 * (n - 1), 40 * (n - 1))
    assert job.usd == pytest.approx((300 * 2.0 + 40 * 10.0) * (n - 1) / 1e6)
    assert "tokens per request measured on 1 cached answers" in job.notes


def test_without_cached_answers_the_last_summary_is_the_measure(workdir):
    summary = workdir / "results" / "tiny" / "predictions" / "captioning" / "m.summary.json"
    summary.parent.mkdir(parents=True)
    # 4 images, one failed: 3 answers used 900 prompt and 150 answer tokens.
    usage = {"prompt_tokens": 900, "completion_tokens": 150}
    summary.write_text(
        json.dumps({"n_images": 4, "status_counts": {"ok": 3, "error": 1}, "usage": usage})
    )
    (job,) = estimate_run(plan_for(workdir, TINY), workdir).jobs
    n = len(images(workdir))
    assert (job.input_tokens, job.output_tokens) == (300 * n, 50 * n)
    assert "tokens per request measured on the last run's 3 answers" in job.notes


def test_a_settings_price_wins_and_a_missing_one_is_said(workdir):
    priced = TINY.replace(
        "concurrency: 3}",
        "concurrency: 3, price_per_million_input: 1.0, price_per_million_output: 1.0}",
    )
    (job,) = estimate_run(plan_for(workdir, priced), workdir).jobs
    assert job.usd == pytest.approx((job.input_tokens + job.output_tokens) / 1e6)
    unpriced = TINY.replace("      price_usd_per_million_tokens: {input: 2.0, output: 10.0}\n", "")
    (job,) = estimate_run(plan_for(workdir, unpriced), workdir).jobs
    assert job.usd is None
    assert "no dollars: no price in the config" in job.notes


def test_before_the_dataset_is_built_the_published_size_is_assumed(tmp_path):
    config = TINY.replace("source: sample, tag: tiny", "source: hf")
    config = config.replace("tasks: [captioning]", "tasks: [diagnosis]")
    estimate = estimate_run(plan_for(tmp_path, config), tmp_path)
    assert not estimate.exact and "906 images assumed (NOVA's published size)" in estimate.dataset
    (job,) = estimate.jobs
    # Diagnosis is text only: the template with each text placeholder PLACEHOLDER_CHARS long.
    text = DIAGNOSIS_PROMPT.replace("{clinical_history}", "x" * PLACEHOLDER_CHARS)
    text = text.replace("{findings}", "x" * PLACEHOLDER_CHARS).replace("{{", "{")
    text = text.replace("}}", "}")
    assert (job.to_send, job.input_tokens) == (906, 906 * math.ceil(len(text) / 4))


@pytest.mark.parametrize(
    ("dataset", "size"),
    [
        ({"source": "hf"}, 906),
        ({"source": "hf", "subset": {"limit": 20}}, 20),
        ({"source": "hf", "subset": {"filenames": ["a.png", "b.png"]}}, 2),
        ({"source": "hf", "subset": {"cases": ["c1", "c2", "c3"]}}, round(3 * 906 / 281)),
        ({"source": "sample", "sample": {"n_cases": 12, "images_per_case": [1, 4]}}, 30),
        ({"source": "sample", "sample": {"n_cases": 10, "images_per_case": [1, 17]}}, 32),
        ({"source": "sample", "sample": {"n_cases": 10, "images_per_case": [5, 9]}}, 50),
    ],
)
def test_expected_sizes(dataset, size):
    assert expected_size(dataset)[0] == size


def test_a_local_model_gets_requests_and_gpu_time(workdir):
    config = """
dataset: {source: sample, tag: tiny}
models:
  v:
    adapter: hf_local
    tasks: [localization, captioning]
    box_format: pixel_xyxy
    settings: {model: Org/Model, gpus: 2}
    info: {gpu_s_per_image: 1.5}
"""
    done = workdir / "results" / "tiny" / "predictions" / "captioning" / "v.jsonl"
    done.parent.mkdir(parents=True)
    done.write_text("")
    localization, captioning = estimate_run(plan_for(workdir, config), workdir).jobs
    n = len(images(workdir))
    assert (localization.to_send, localization.wall_s, localization.gpu_s) == (n, n * 1.5, n * 3.0)
    assert (localization.input_tokens, localization.usd) == (None, None)
    assert (captioning.to_send, captioning.gpu_s) == (0, 0)


@pytest.mark.parametrize(
    ("rule", "size", "expected"),
    [
        ("openai_tiles", (1024, 1024), 765),  # OpenAI's documented examples
        ("openai_tiles", (2048, 4096), 1105),
        ("openai_tiles", (480, 480), 255),
        ("openai_tiles_4o_mini", (480, 480), 2833 + 5667),
        ("openai_patches_mini", (1024, 1024), math.ceil(1024 * 1.62)),
        ("openai_patches_nano", (480, 480), math.ceil(225 * 2.46)),
        ("gemini", (384, 384), 258),
        ("gemini", (1000, 500), 516),
        ("claude", (1000, 1000), 1334),
        ("qwen2_vl", (480, 480), 17 * 17 + 2),
        ("qwen3_vl", (480, 480), 15 * 15 + 2),
        ("pixtral16", (480, 480), 30 * 31),
        ("mistral28", (480, 480), 18 * 19),
    ],
)
def test_image_token_rules(rule, size, expected):
    assert tokens.image_tokens(rule, *size) == expected


def test_the_table_totals_models_and_marks_unpriced_jobs(workdir):
    config = (
        TINY.replace("tasks: [captioning]", "tasks: [captioning, diagnosis]")
        + """
  n:
    adapter: openai_compatible
    tasks: [captioning]
    settings: {base_url: "http://127.0.0.1:9/v1", model: vlm-2, api_key_env: null}
"""
    )
    estimate = estimate_run(plan_for(workdir, config), workdir)
    text = format_estimate(estimate)
    m_usd = sum(j.usd for j in estimate.jobs if j.model == "m")
    rows = {tuple(line.split()[:2]): line.split() for line in text.splitlines()}
    assert rows[("m", "(all)")][6] == f"{m_usd:,.2f}"
    assert rows[("n", "captioning")][6] == "-"
    (total,) = [line for line in text.splitlines() if line.startswith("total")]
    assert f">= {m_usd:,.2f}" in total  # n's cost is not known
    assert "note: n: no dollars: no price in the config" in text


def test_the_command_prints_the_estimate(workdir, capsys, monkeypatch):
    (workdir / "config.yaml").write_text(TINY)
    monkeypatch.chdir(workdir)
    assert main(["estimate", "--configfile", "config.yaml"]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("Estimate of the prediction jobs: results/tiny: 4 images (built")
    assert format_estimate(estimate_run(plan_for(workdir, TINY), workdir)) in printed


def dry_run(configfile: Path, workdir: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "snakemake", "-n", "--configfile", str(configfile), "-d", workdir],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_a_dry_run_of_the_paper_config_prints_the_estimate_once(tmp_path):
    result = dry_run(ROOT / "config" / "paper.yaml", tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stderr.count("Estimate of the prediction jobs") == 1
    lines = {tuple(line.split()[:2]): line.split() for line in result.stderr.splitlines()}
    for model in ("gpt-4o", "gemini-2.0-flash", "qwen2.5-vl-72b", "qwen2-vl-72b"):
        requests, to_send, tokens_in, tokens_out, usd = lines[(model, "(all)")][2:7]
        assert (requests, to_send) == ("2,718", "2,718")  # 3 tasks x 906 images
        assert int(tokens_in.replace(",", "")) > 0 and int(tokens_out.replace(",", "")) > 0
        assert (usd == "-") == model.startswith("qwen")  # self-hosted: no price
    assert "results/nova: not built yet, 906 images assumed" in result.stderr


def test_a_dry_run_reads_the_working_directory_and_is_silent_with_nothing_to_send(workdir):
    from novabench.dataset.read import load_nova
    from novabench.models.base import load_adapter
    from novabench.predict import build_samples
    from novabench.tasks import get_task

    config = workdir / "tiny.yaml"
    config.write_text(TINY)
    first = dry_run(config, workdir)
    assert first.returncode == 0, first.stderr
    assert "results/tiny: 4 images (built" in first.stderr
    # An answer in the cache for every request: nothing to send, nothing printed.
    plan = plan_for(workdir, TINY)
    adapter = load_adapter("m", plan.model("m"), cache_dir=workdir / "results" / "cache")
    frame = load_nova(workdir / "results" / "tiny" / "dataset" / "nova.parquet")
    samples = build_samples(frame, get_task("captioning"), CAPTIONING_PROMPT, "p")
    cache = ResponseCache(workdir / "results" / "cache" / "m")
    for request in adapter.requests_for(samples):
        identity = adapter.request_identity(request)
        cache.put(request_key(identity), {"raw": "x", "usage": None}, identity)
    second = dry_run(config, workdir)
    assert second.returncode == 0, second.stderr
    assert "Estimate of the prediction jobs" not in second.stderr
