"""The estimate before a run: requests, tokens, dollars and time, checked by hand."""

from __future__ import annotations

import hashlib
import json
import math
import shutil
import subprocess
from pathlib import Path

import pyarrow.parquet as pq
import pytest

import support
from novabench import tokens
from novabench.cache import ResponseCache, request_key, response_check
from novabench.cli import main
from novabench.config import plan_from_files
from novabench.estimate import (
    LIVE_CHECK,
    PLACEHOLDER_CHARS,
    estimate_run,
    expected_size,
    format_estimate,
)
from support import ROOT, RecordingJudge

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


def first_image_key(workdir) -> dict:
    """The adapter's cache key of vlm-1's captioning request for the first image, written out
    here."""
    first = images(workdir)[0]
    return {
        "model": "vlm-1",
        "base_url": BASE_URL,
        "generation": {"temperature": 0.1, "max_tokens": 2048, "seed": None, "extra_body": {}},
        "system_prompt": None,
        "prompt": CAPTIONING_PROMPT,
        "image_sha256": hashlib.sha256(first["image"]["bytes"]).hexdigest(),
    }


def test_a_cached_answer_is_one_request_less_and_its_usage_is_the_measure(workdir):
    identity = first_image_key(workdir)
    answer = {"raw": "Axial FLAIR.", "usage": {"prompt_tokens": 300, "completion_tokens": 40}}
    ResponseCache(workdir / "results" / "cache" / "m").put(request_key(identity), answer, identity)
    (job,) = estimate_run(plan_for(workdir, TINY), workdir).jobs
    n = len(images(workdir))
    assert (job.requests, job.to_send) == (n, n - 1)
    assert (job.input_tokens, job.output_tokens) == (300 * (n - 1), 40 * (n - 1))
    assert job.usd == pytest.approx((300 * 2.0 + 40 * 10.0) * (n - 1) / 1e6)
    assert "tokens per request measured on 1 cached answers" in job.notes


@pytest.mark.parametrize(
    "response, problem",
    [
        ("Axial FLAIR.", "the response has type str, not an object"),
        ({"raw": "Axial FLAIR.", "usage": ["many"]}, "usage has type list"),
        ({"raw": 7}, "raw has type int"),
    ],
)
def test_a_cache_entry_of_the_wrong_shape_is_counted_as_to_send(workdir, caplog, response, problem):
    identity = first_image_key(workdir)
    cache = ResponseCache(workdir / "results" / "cache" / "m")
    path = cache.put(request_key(identity), {"raw": "Axial FLAIR."}, identity)
    entry = json.loads(path.read_text())  # valid JSON, its check recomputed
    path.write_text(json.dumps({**entry, "response": response, "check": response_check(response)}))
    (job,) = estimate_run(plan_for(workdir, TINY), workdir).jobs
    n = len(images(workdir))
    assert (job.requests, job.to_send) == (n, n)
    assert [r.getMessage() for r in caplog.records if str(path) in r.getMessage()] == [
        f"ignoring cache entry {path} of the wrong shape ({problem}); the request is re-sent"
    ]


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


def test_a_managed_vllm_model_adds_its_server_start_and_gpu_time(workdir):
    config = """
dataset: {source: sample, tag: tiny}
models:
  q:
    adapter: vllm
    tasks: [captioning]
    settings: {model: Qwen/Qwen2.5-VL-72B-Instruct, concurrency: 3, serve: {gpus: 4}}
    info: {latency_s: 4, image_tokens: 100, startup_s: 900}
"""
    (job,) = estimate_run(plan_for(workdir, config), workdir).jobs
    n = len(images(workdir))
    per_request = math.ceil(len(CAPTIONING_PROMPT) / 4) + 100
    assert (job.to_send, job.input_tokens, job.output_tokens) == (n, n * per_request, n * 70)
    assert job.wall_s == math.ceil(n / 3) * 4 + 900  # the requests, then the server's start
    assert job.gpu_s == job.wall_s * 4
    # Without a start-up figure one is assumed, and said.
    (job,) = estimate_run(plan_for(workdir, config.replace(", startup_s: 900", "")), workdir).jobs
    assert job.wall_s == math.ceil(n / 3) * 4 + 600
    assert "server start assumed 10 min (set info.startup_s)" in job.notes


def test_a_managed_model_is_loaded_once_for_its_tasks_and_its_replicas_share_the_work(workdir):
    config = """
dataset: {source: sample, tag: tiny}
models:
  q:
    adapter: vllm
    tasks: [localization, captioning]
    box_format: qwen25_bbox_2d
    settings:
      model: Qwen/Qwen2.5-VL-7B-Instruct
      concurrency: 1
      serve: {gpus: 4, replicas: 4}
    info: {latency_s: 4, image_tokens: 100, startup_s: 900}
"""
    localization, captioning = estimate_run(plan_for(workdir, config), workdir).jobs
    n = len(images(workdir))
    # One server start for the two tasks, on the first; four replicas answer at once.
    assert localization.wall_s == n * 4 / 4 + 900 and captioning.wall_s == n * 4 / 4
    assert "1 server load for its 2 tasks" in localization.notes
    assert not any("server load" in note for note in captioning.notes)
    assert captioning.gpu_s == captioning.wall_s * 4


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
    return support.snakemake(workdir, "-n", "--configfile", str(configfile), timeout=300)


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


# --- the judges' requests ---------------------------------------------------------------------

JUDGE_PROMPT = ROOT / "scripts" / "novabench" / "resources" / "prompts" / "judge-diagnosis-v1.txt"
JUDGED = """
dataset: {source: sample, tag: tiny}
tasks:
  localization: {enabled: false}
  captioning: {enabled: false}
  diagnosis: {judge: JUDGE}
judges:
  llm-judge:
    kind: llm
    settings:
      backend: {base_url: "BASE_URL", model: judge-llm, api_key_env: null,
                price_per_million_input: 2.0, price_per_million_output: 10.0}
  c: {kind: cascade, settings: {first: matcher, second: llm-judge}}
"""
# The four test images' references: Glioblastoma (2), Normal study, Acute ischemic infarct.
# Two models' answers, written by hand; retrieval's last one is no JSON (a parse error).
ANSWERS = {
    "gold": {
        "case0001_001.png": ["Glioblastoma"],
        "case0001_002.png": ["Glioblastoma"],
        "case0002_001.png": ["Normal study"],
        "case0003_001.png": ["Acute ischemic infarct"],
    },
    "retrieval": {
        "case0001_001.png": ["GBM", "Metastasis", "Lymphoma"],
        "case0001_002.png": ["Meningioma", "frobnication of widgets"],
        "case0002_001.png": ["Migraine", "Small vessel disease", "Normal variant", "Cyst"],
        "case0003_001.png": None,
    },
}


def judged_config(judge: str, base_url: str = BASE_URL) -> str:
    return JUDGED.replace("JUDGE", judge).replace("BASE_URL", base_url)


def write_answers(workdir: Path) -> dict[str, list[tuple[list[str], str]]]:
    """Both models' diagnosis predictions in results/tiny; per model the (ranked,
    reference) pairs a judge is asked about (the answered images)."""
    from novabench.predict import run_predictions
    from upstream import CASES, IMAGES

    references = {filename: CASES[case][1] for filename, case, _, _ in IMAGES}
    asked = {}
    for model, answers in ANSWERS.items():
        raw = workdir / f"{model}-answers.jsonl"
        raw.write_text(
            "".join(
                json.dumps({"filename": name, "raw": "no json here" if ranked is None else
                            json.dumps({"most_likely_diagnosis": ranked[0],
                                        "other_possible_diagnoses": ranked[1:]})}) + "\n"
                for name, ranked in answers.items()
            )
        )  # fmt: skip
        out = workdir / "results" / "tiny" / "predictions" / "diagnosis" / f"{model}.jsonl"
        out.parent.mkdir(parents=True, exist_ok=True)
        run_predictions(
            dataset=workdir / "results" / "tiny" / "dataset" / "nova.parquet",
            task="diagnosis",
            model_name=model,
            model_cfg={
                "adapter": "predictions_file",
                "tasks": ["diagnosis"],
                "max_error_rate": 1,
                "settings": {"path": str(raw)},
            },
            prompt_path=ROOT / "config" / "prompts" / "diagnosis-v1.txt",
            out=out,
            summary_out=out.with_suffix(".summary.json"),
        )
        asked[model] = [
            (ranked, references[name]) for name, ranked in answers.items() if ranked is not None
        ]
    return asked


def judge_prompt(ranked: list[str], reference: str) -> str:
    """The diagnosis judge's prompt, written out from its template."""
    candidates = "\n".join(f"{i}. {item}" for i, item in enumerate(ranked, start=1))
    text = JUDGE_PROMPT.read_text().replace("{reference}", reference)
    return text.replace("{candidates}", candidates).replace("{{", "{").replace("}}", "}")


def by_model(estimate) -> dict:
    """The judge rows of the reading jobs by model (the live check's row left out)."""
    return {job.model: job for job in estimate.judges if job.model != LIVE_CHECK}


def test_before_predictions_a_judge_counts_every_image_and_a_cascade_an_upper_bound(tmp_path):
    placeholder = JUDGE_PROMPT.read_text().replace("{reference}", "x" * PLACEHOLDER_CHARS)
    placeholder = placeholder.replace("{candidates}", "x" * PLACEHOLDER_CHARS)
    per_request = math.ceil(len(placeholder.replace("{{", "{").replace("}}", "}")) / 4)
    for judge, counted in (("llm-judge", "every image"), ("c", "upper bound")):
        config = judged_config(judge).replace("source: sample", "source: hf")
        estimate = estimate_run(plan_for(tmp_path, config), tmp_path)
        jobs = by_model(estimate)
        assert sorted(jobs) == ["gold", "retrieval"]  # the score jobs of the plan
        for job in jobs.values():
            assert (job.stage, job.requests, job.to_send, job.counted) == (
                "llm-judge", 906, 906, counted)  # fmt: skip
            assert (job.input_tokens, job.output_tokens) == (906 * per_request, 906 * 12)
            assert job.usd == pytest.approx((906 * per_request * 2.0 + 906 * 12 * 10.0) / 1e6)
        text = format_estimate(estimate)
        if judge == "c":
            assert "counted as left undecided by matcher: an upper bound" in text
    total = sum(j.usd for j in estimate.judges)
    assert f"USD: {total:,.2f} with the judges, - without them (the judges: {total:,.2f})" in text


def test_with_predictions_the_counts_are_exact(workdir, matcher):
    asked = write_answers(workdir)
    # A full LLM judge: every answered image, an identical question once (3 of retrieval's
    # 4 images; gold's two Glioblastoma images ask the same).
    distinct = {m: len({(tuple(r), ref) for r, ref in pairs}) for m, pairs in asked.items()}
    assert distinct == {"gold": 3, "retrieval": 3}
    full = by_model(estimate_run(plan_for(workdir, judged_config("llm-judge")), workdir))
    assert {m: j.requests for m, j in full.items()} == distinct
    assert all(j.counted == "exact" for j in full.values())
    # The cascade: only what the matcher (run here on its own) leaves undecided.
    undecided = {
        model: [pair for pair in pairs if not matcher.judge_ranked(*pair).decided]
        for model, pairs in asked.items()
    }
    assert {m: len(p) for m, p in undecided.items()} == {"gold": 0, "retrieval": 2}
    cascade = by_model(estimate_run(plan_for(workdir, judged_config("c")), workdir))
    assert {m: j.requests for m, j in cascade.items()} == {"gold": 0, "retrieval": 2}
    job = cascade["retrieval"]
    tokens_in = sum(math.ceil(len(judge_prompt(*pair)) / 4) for pair in undecided["retrieval"])
    assert (job.input_tokens, job.output_tokens) == (tokens_in, 2 * 12)
    assert job.usd == pytest.approx((tokens_in * 2.0 + 24 * 10.0) / 1e6)
    text = format_estimate(estimate_run(plan_for(workdir, judged_config("c")), workdir))
    (row,) = [
        line.split()
        for line in text.splitlines()
        if line.split()[:3] == ["c", "diagnosis", "llm-judge"]
    ]
    assert row[3:5] == ["42", "42"]  # the two undecided lists and the live check's 40 pairs


@pytest.mark.slow  # the matcher is built four times
def test_a_cached_judge_answer_is_not_counted_and_nothing_is_printed_then(workdir):
    from novabench.estimate import plan_time_estimate
    from novabench.judges import make_judge
    from openai_server import FakeOpenAI, Reply

    write_answers(workdir)
    with FakeOpenAI(lambda seen: Reply('{"first_match": 0}')) as server:
        # (This scripted judge fails its live check: recorded, not stopped.)
        config = judged_config("c", server.base_url).replace(
            "      backend:", "      live_check: {stop: false}\n      backend:"
        )
        plan = plan_for(workdir, config)
        assert "Estimate of the judge requests" in plan_time_estimate(plan, workdir)
        # Score-time judging of the same answers, and its live check, fill the cache...
        judge = make_judge(plan.judge("diagnosis"), "diagnosis", workdir / "results" / "cache")
        judge.judge_ranked_many([(r, ref) for r, ref in write_answers(workdir)["retrieval"]])
        judge.live_check()
        assert len(server.requests) == 2 + 40
    (job,) = [j for j in estimate_run(plan, workdir).judges if j.model == "retrieval"]
    assert (job.requests, job.to_send, job.input_tokens, job.usd) == (2, 0, 0, 0.0)
    # ...and with nothing left to send, planning prints nothing.
    assert plan_time_estimate(plan, workdir) is None


@pytest.mark.parametrize("task", ["captioning", "diagnosis"])
def test_the_estimate_counts_what_scoring_asks_the_judge(workdir, nltk_data, task):
    """Task.judged_pairs (the estimate's) against the pairs reading gives the task's judge."""
    from novabench.answers import read_file
    from novabench.dataset.read import load_nova
    from novabench.tasks import Answers, get_task

    write_answers(workdir)
    frame = load_nova(workdir / "results" / "tiny" / "dataset" / "nova.parquet")
    path = workdir / "results" / "tiny" / "predictions" / "diagnosis" / "retrieval.jsonl"
    records = list(read_file("diagnosis", path, frame).by_filename.values())
    if task == "captioning":  # one caption missing, one that failed
        records = [
            {**r, "read": {"caption": f"caption of {r['filename']}"}, "status": "ok"}
            for r in records[1:]
        ]
        records[-1] = {**records[-1], "read": None, "status": "error"}
    spec, judge = get_task(task), RecordingJudge()
    frame, _ = spec.scored_rows(frame)
    spec.judge_answers(frame, Answers(records), judge)
    assert judge.asked and judge.asked == spec.judged_pairs(frame, Answers(records))


def test_the_live_check_of_an_llm_judge_is_counted_once_with_its_share(workdir):
    write_answers(workdir)
    estimate = estimate_run(plan_for(workdir, judged_config("llm-judge")), workdir)
    (check,) = [j for j in estimate.judges if j.model == LIVE_CHECK]
    # 40 hand-labelled diagnosis pairs by default, asked once for every reading job.
    assert (check.stage, check.task, check.requests, check.to_send) == (
        "llm-judge",
        "diagnosis",
        40,
        40,
    )
    assert check.input_tokens > 0 and check.usd is not None and check.usd > 0
    judged = sum(j.requests for j in estimate.judges if j.model != LIVE_CHECK)
    share = f"{100 * 40 / (40 + judged):.1f}%"
    assert f"live check: 40 hand-labelled pairs, {share} of the requests" in " ".join(check.notes)
    # Switched off, nothing is counted for it.
    off = judged_config("llm-judge").replace(
        "      backend:", "      live_check: {diagnosis_pairs: 0}\n      backend:"
    )
    assert not [
        j for j in estimate_run(plan_for(workdir, off), workdir).judges if j.model == LIVE_CHECK
    ]


def test_the_paper_runs_live_checks_cost_under_two_percent_of_its_judge_requests(tmp_path):
    paper = plan_from_files(ROOT, [ROOT / "config" / "paper.yaml"])
    judges = estimate_run(paper, tmp_path).judges
    checks = sum(j.requests for j in judges if j.model == LIVE_CHECK)
    assert checks == 60  # 40 diagnosis and 20 caption pairs
    assert checks / sum(j.requests for j in judges) < 0.02


def test_the_readme_and_the_paper_config_quote_the_estimate_of_the_paper_run(tmp_path):
    paper = ROOT / "config" / "paper.yaml"
    estimate = estimate_run(plan_from_files(ROOT, [paper]), tmp_path)
    models = sum(j.usd for j in estimate.jobs if j.usd is not None)
    tasks = ("captioning", "diagnosis")
    judges = {task: sum(j.usd for j in estimate.judges if j.task == task) for task in tasks}
    quoted = [models, sum(judges.values()), models + sum(judges.values()), *judges.values()]
    for text in ((ROOT / "README.md").read_text(), paper.read_text()):
        for usd in quoted:
            assert f"{usd:,.2f}" in " ".join(text.split())
    # The cascade variant: GPT-4o only behind the matcher, counted as every image before
    # predictions (an upper bound: the same as GPT-4o alone).
    variant = plan_from_files(ROOT, [paper, ROOT / "config" / "paper-cascade.yaml"])
    assert variant.judge("diagnosis")["settings"]["second"]["name"] == "gpt-4o-judge"
    assert variant.api_resources()["api_openai"]["tasks"] == {"captioning", "diagnosis"}
    cascade = estimate_run(variant, tmp_path)
    rows = {(j.stage, j.model == LIVE_CHECK, j.counted) for j in cascade.judges}
    assert ("gpt-4o-judge", False, "upper bound") in rows
    assert ("gpt-4o-judge", True, "exact") in rows
    upper = sum(j.usd for j in cascade.judges if j.task == "diagnosis")
    assert upper == pytest.approx(judges["diagnosis"])
    # Its commented captioning cascade plans too, once uncommented.
    text = (ROOT / "config" / "paper-cascade.yaml").read_text()
    uncommented = tmp_path / "paper-cascade-captions.yaml"
    uncommented.write_text(text.replace("\n  # ", "\n  ").replace("\n  #   ", "\n    "))
    both = plan_from_files(ROOT, [paper, uncommented])
    assert both.judge("captioning")["settings"]["max_keyword_doubt"] == 25


def write_usage(workdir: Path, judge: str, model: str, usage: dict) -> None:
    """A reading job's verdict summary of ``judge`` on ``model``'s diagnosis answers."""
    folder = workdir / "results" / "tiny" / "verdicts" / "diagnosis" / judge
    folder.mkdir(parents=True, exist_ok=True)
    summary = {"task": "diagnosis", "model": model, "judge": judge, "usage": usage}
    (folder / f"{model}.summary.json").write_text(json.dumps(summary))


def test_judge_answers_are_sized_by_earlier_reading_jobs_of_the_same_judge(workdir):
    asked = write_answers(workdir)
    write_usage(workdir, "llm-judge", "old", {"sent": 4, "completion_tokens": 100})  # 25 each
    write_usage(workdir, "another-judge", "old", {"sent": 1, "completion_tokens": 9})
    write_usage(workdir, "llm-judge", "offline", None)  # a summary without requests
    jobs = by_model(estimate_run(plan_for(workdir, judged_config("llm-judge")), workdir))
    assert jobs["retrieval"].output_tokens == 25 * len(asked["retrieval"])
    assert "judge answers measured on 4 earlier requests" in jobs["retrieval"].notes


def test_an_agreement_judges_answers_are_sized_by_its_own_reading_jobs(workdir):
    # Judge agreement's judge reads the answers in reading jobs of its own: their
    # summaries size its answers; the task's judge (a cascade) has measured none.
    write_answers(workdir)
    write_usage(workdir, "llm-judge", "gold", {"sent": 3, "completion_tokens": 30})  # 10 each
    config = judged_config("c") + "reporting: {agreement_judges: {diagnosis: [llm-judge]}}\n"
    estimate = estimate_run(plan_for(workdir, config), workdir)
    agreement = [j for j in estimate.judges if j.judge == "llm-judge"]
    assert agreement and all(j.output_tokens == 10 * j.to_send for j in agreement)
    assert all("judge answers measured on 3 earlier requests" in j.notes for j in agreement)
    cascade = [j for j in estimate.judges if j.judge == "c"]
    assert cascade and not any("measured" in note for j in cascade for note in j.notes)


def test_judge_agreement_is_counted_and_a_request_twice_only_once(workdir, matcher):
    asked = write_answers(workdir)
    config = judged_config("c") + "reporting: {agreement_judges: {diagnosis: [llm-judge]}}\n"
    jobs = estimate_run(plan_for(workdir, config), workdir).judges
    rows = {(j.judge, j.model): (j.requests, j.to_send) for j in jobs}
    undecided = [p for p in asked["retrieval"] if not matcher.judge_ranked(*p).decided]
    # The cascade's score job asks GPT about the undecided lists; judge agreement asks the
    # same LLM judge about every answered list, the cascade's ones already counted.
    assert rows[("c", "retrieval")] == (len(undecided), len(undecided))
    assert rows[("llm-judge", "retrieval")] == (3, 3 - len(undecided))
    assert rows[("llm-judge", "gold")] == (3, 3)
    text = format_estimate(estimate_run(plan_for(workdir, config), workdir))
    assert "llm-judge (diagnosis): judge agreement: this judge reads the answers too" in text


def test_dollars_at_list_prices_need_both_prices():
    # 2,000 prompt tokens at $2.50 and 500 answer tokens at $10.00 per million.
    assert tokens.dollars(2000, 500, 2.5, 10.0) == pytest.approx(0.005 + 0.005)
    assert tokens.dollars(2000, 500, None, 10.0) is None
    assert tokens.dollars(2000, 500, 2.5, None) is None


CHAINED = """
dataset: {source: sample, tag: tiny}
tasks: {diagnosis: {findings: captioner}}
models:
  captioner:
    adapter: predictions_file
    tasks: [captioning]
    settings: {path: captions.jsonl}
  m:
    adapter: openai_compatible
    tasks: [diagnosis]
    settings: {base_url: "http://127.0.0.1:9/v1", model: llm-1, api_key_env: null}
"""


def test_a_chained_diagnosis_is_sized_with_the_upstream_models_captions(workdir):
    """Diagnosis from a captioning model's captions: the prompts hold those captions, read
    from its raw answers as the prediction job reads them."""
    caption = "Axial FLAIR: a long upstream caption. " * 20
    rows = images(workdir)
    path = workdir / "results" / "tiny" / "predictions" / "captioning" / "captioner.jsonl"
    path.parent.mkdir(parents=True)
    records = [
        {"filename": r["filename"], "case_id": r["case_id"], "raw": caption, "status": "ok"}
        for r in rows
    ]
    path.write_text("".join(json.dumps(record) + "\n" for record in records))
    (job,) = [j for j in estimate_run(plan_for(workdir, CHAINED), workdir).jobs if j.model == "m"]
    assert job.requests == len(rows)
    assert not any("not predicted yet" in note for note in job.notes)
    # Every prompt carries the upstream caption (~4 characters per token).
    assert job.input_tokens >= len(rows) * len(caption) / 4
