"""The whole workflow on the embedded sample, as a user runs it."""

from __future__ import annotations

import html
import json
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from novabench.dataset.tags import source_identity
from support import ROOT, SNAKEMAKE, snakemake

pytestmark = pytest.mark.slow


def scores(workdir: Path, task: str, model: str) -> dict:
    return json.loads(
        (workdir / "results" / "sample" / "scores" / task / f"{model}.json").read_text()
    )


@pytest.fixture(scope="module")
def run(sample_checkout):
    """One full run on the default config (the embedded sample), in a checkout copy, with
    HOME an empty folder beside it (:func:`home_of`)."""
    return sample_checkout


def home_of(workdir: Path) -> Path:
    return workdir.parent / "home"


def test_no_job_writes_in_the_home_folder(run):
    home = home_of(run)
    written = sorted(str(p.relative_to(home)) for p in home.rglob("*") if p.is_file())
    # Snakemake keeps a cache of the workflow's sources itself; the jobs write nothing
    # there (matplotlib's and the datasets caches are under results/cache/).
    assert [name for name in written if not name.startswith(".cache/snakemake/")] == []
    assert {p.name for p in home.iterdir()} <= {".cache"}
    assert (run / "results" / "cache" / "matplotlib").is_dir()


def test_every_configured_job_left_its_outputs(run):
    results = run / "results" / "sample"
    manifest = json.loads((results / "dataset" / "manifest.json").read_text())
    assert manifest["source"] == "sample" and manifest["layout"] == "current"
    assert manifest["n_cases"] >= 10 and manifest["n_images"] >= 20
    for task, model in [
        ("localization", "gold"),
        ("localization", "random"),
        ("localization", "classical"),
        ("captioning", "gold"),
        ("captioning", "classical"),
        ("diagnosis", "gold"),
        ("diagnosis", "retrieval"),
    ]:
        predictions = results / "predictions" / task / f"{model}.jsonl"
        lines = predictions.read_text().splitlines()
        assert len(lines) == manifest["n_images"]
        per_image = pd.read_csv(results / "scores" / task / f"{model}.images.csv")
        assert len(per_image) == manifest["n_images"]
        # What the score counted: the answers as read, and judged.
        reader = {"localization": "boxes", "captioning": "keywords", "diagnosis": "matcher"}
        verdicts = results / "verdicts" / task / reader[task] / f"{model}.jsonl"
        assert len(verdicts.read_text().splitlines()) == manifest["n_images"]
        assert (results / "logs" / "predict" / task / f"{model}.log").exists()
        assert (results / "benchmarks" / "predict" / task / f"{model}.tsv").exists()
    for rater in manifest["raters"]:
        rater_scores = json.loads(
            (results / "scores" / "localization" / f"rater-{rater}.json").read_text()
        )
        # raters are perturbed gold: good but not perfect
        assert 30 < rater_scores["metrics"]["Hit@30"] <= 100


# What the positive control must score on each task: it answers with the reference.
GOLD_IS_100 = {
    "localization": ("mAP@30", "mAP@50", "mAP@[50:95]", "Hit@30", "Hit@50"),
    "captioning": ("Clinical_F1", "Modality_F1", "Binary_F1", "BLEU-4"),
    "diagnosis": ("Top-1", "Top-5", "Coverage", "Label_recall"),
}


@pytest.mark.parametrize("task", sorted(GOLD_IS_100))
def test_gold_scores_100_on_every_task(run, task):
    gold = scores(run, task, "gold")["metrics"]
    for key in GOLD_IS_100[task]:
        assert gold[key] == pytest.approx(100.0), (task, key, gold[key])
    if task == "captioning":
        # METEOR of a caption against itself keeps nltk's fragmentation penalty
        # (0.5 * (1/n)^3 for n matched words): 99.996 on the sample, not 100.
        assert 99.9 < gold["METEOR"] <= 100.0
        # BERT F1 needs roberta-large: 100 where it is cached, else null with the reason.
        if gold["BERT_F1"] is None:
            assert gold["bertscore"]["reason"].startswith("BERT F1 not computed: the encoder")
        else:
            assert gold["BERT_F1"] == pytest.approx(100.0, abs=1e-3)


def test_gold_brackets_from_above_and_random_from_below(run):
    gold = scores(run, "localization", "gold")["metrics"]
    assert gold["FP30"] == 0 and gold["FN30"] == 0
    random = scores(run, "localization", "random")["metrics"]
    classical = scores(run, "localization", "classical")["metrics"]
    assert random["Hit@30"] < 50
    # the classical detector must clearly beat random boxes
    assert classical["Hit@30"] > random["Hit@30"] + 15
    assert classical["mAP@30"] > random["mAP@30"]


def test_a_rerun_does_nothing(run):
    result = snakemake(run, "--cores", "2", "--dry-run")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Nothing to be done" in result.stdout + result.stderr


def test_a_changed_prompt_reruns_only_its_jobs(run, tmp_path):
    prompt = tmp_path / "localization-v2.txt"
    shutil.copy(ROOT / "config" / "prompts" / "localization-v1.txt", prompt)
    config = tmp_path / "changed.yaml"
    config.write_text(
        "dataset: {source: sample}\n"
        f"tasks: {{localization: {{prompt: {prompt}}}}}\n"
        "models:\n"
        "  gold: {adapter: gold, tasks: [localization, captioning, diagnosis]}\n"
        "  random: {adapter: random, tasks: [localization], settings: {seed: 0, max_boxes: 3}}\n"
        "  classical: {adapter: classical, tasks: [localization], settings: {max_boxes: 3}}\n"
    )
    result = snakemake(run, "--cores", "2", "--dry-run", "--configfile", str(config))
    assert result.returncode == 0, result.stderr[-3000:]
    jobs = job_counts(result.stdout + result.stderr)
    # the three localization models re-predict, re-read and re-score (and the report after);
    # the dataset and the other tasks' predictions stay as they are
    assert jobs["predict"] == 3 and jobs["read"] == 3 and jobs["score"] == 3, jobs
    assert "sample" not in jobs and "dataset" not in jobs, jobs


def job_counts(output: str) -> dict[str, int]:
    """Parse Snakemake's 'Job stats' table."""
    lines = output.split("Job stats:")[1].splitlines()[3:]
    counts = {}
    for line in lines:
        parts = line.split()
        if len(parts) != 2 or not parts[1].isdigit():
            break
        counts[parts[0]] = int(parts[1])
    return counts


def test_a_subset_runs_into_its_own_folder(run, tmp_path):
    full = run / "results" / "sample"
    before = {p: p.read_bytes() for p in (full / "tables").iterdir()}
    config = tmp_path / "subset.yaml"
    config.write_text("dataset: {source: sample, subset: {limit: 5, seed: 1}}\n")
    result = snakemake(run, "--cores", "2", "--configfile", str(config))
    assert result.returncode == 0, result.stderr[-3000:]
    jobs = job_counts(result.stdout + result.stderr)
    # cut from the built dataset, not rebuilt
    assert jobs["subset"] == 1 and "dataset" not in jobs and "sample" not in jobs, jobs
    (folder,) = (run / "results").glob("sample-subset-*")
    manifest = json.loads((folder / "dataset" / "manifest.json").read_text())
    assert manifest["n_images"] <= 5 and manifest["subset"]["limit"] == 5
    predictions = (folder / "predictions" / "localization" / "gold.jsonl").read_text()
    assert len(predictions.splitlines()) == manifest["n_images"]
    # every table and the summary say it is a subset of the synthetic sample
    for table in (folder / "tables").glob("*.md"):
        text = table.read_text()
        assert "subset: limit=5, seed=1" in text or "Not compared" in text, table
    # the full sample's results are untouched, and switching back re-runs nothing
    assert {p: p.read_bytes() for p in (full / "tables").iterdir()} == before
    result = snakemake(run, "--cores", "2", "--dry-run")
    assert "Nothing to be done" in result.stdout + result.stderr


# Text that ends the report's embedded JSON and opens markup, wherever the config or the
# dataset manifest puts it; each script that runs adds one to window.__pwned.
PAYLOAD = (
    "</script><script>window.__pwned=(window.__pwned||0)+1</script>"
    '<img src=x onerror="window.__pwned=(window.__pwned||0)+1">'
)


def test_no_script_runs_in_the_html_report_whatever_the_config_says(run, tmp_path):
    """`snakemake --report` with an LLM judge whose model and endpoint, and a dataset whose
    local_path and subset description, hold script, opened in headless chromium."""
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None or shutil.which("chromedriver") is None:
        pytest.skip("needs `apt-get install chromium chromium-driver`")
    work, config = _hostile_report_inputs(run, tmp_path)
    report = tmp_path / "report.html"
    result = snakemake(work, "--configfile", str(config), "--report", str(report))
    assert result.returncode == 0, result.stderr[-3000:]
    page = report.read_text()
    assert page.count("window.__pwned") >= 3  # the payload is in the page, inert
    driver = _headless_chromium(browser)
    try:
        driver.get(report.as_uri())
        # The page's data parsed: no block was ended early.
        assert driver.execute_script("return Object.keys(results).length") > 10
        # Show every caption as the report does when a result is opened (as HTML).
        driver.execute_script(
            "for (const r of Object.values(results)) {"
            " const d = document.createElement('div'); d.innerHTML = r.caption;"
            " document.body.appendChild(d); }"
        )
        driver.execute_script("return new Promise(done => setTimeout(done, 500))")
        assert driver.execute_script("return window.__pwned || 0") == 0
    finally:
        driver.quit()


def _hostile_report_inputs(run, tmp_path) -> tuple[Path, Path]:
    """A copy of the sample run whose dataset path, subset description and LLM judge hold
    PAYLOAD; returns the work folder and the config file."""
    work = tmp_path / "work"
    shutil.copytree(run, work, symlinks=True)
    local = tmp_path / f"x{PAYLOAD}"
    # A dataset folder in the current layout, so that the plan accepts it (the report
    # reads the results already there, not the dataset).
    (local / "data").mkdir(parents=True)
    (local / "data" / "nova-v1.parquet").write_bytes(b"")
    # The captions read the dataset label from the manifest.
    manifest_path = work / "results" / "sample" / "dataset" / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest.update(source="local", local_path=str(local), subset={"description": PAYLOAD})
    # The folder's recorded source is this one (else the plan refuses the tag).
    manifest["source_id"] = source_identity({"source": "local", "local_path": str(local)})
    manifest_path.write_text(json.dumps(manifest))
    config = tmp_path / "hostile.yaml"
    config.write_text(
        json.dumps(
            {
                "dataset": {"source": "local", "local_path": str(local), "tag": "sample"},
                "tasks": {"captioning": {"judge": "evil"}, "diagnosis": {"judge": "evil"}},
                "judges": {
                    "evil": {
                        "kind": "llm",
                        "settings": {
                            "backend": {
                                "base_url": f"http://127.0.0.1:9/v1{PAYLOAD}",
                                "model": PAYLOAD,
                                "api_key_env": "NOVA_TEST_NO_KEY",
                            }
                        },
                    }
                },
            }
        )
    )
    return work, config


def _headless_chromium(browser: str):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"):
        options.add_argument(argument)
    return webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=options)


def test_the_predictions_target_runs_exactly_the_pending_predictions(tmp_path):
    """For a submit host that predicts before the cluster scores: a fresh subset, then one
    new model; `--until predict` is refused, since Snakemake drops its jobs after the
    dataset checkpoint."""
    from novabench.config import plan_from_files

    pairs = plan_from_files(ROOT, []).jobs()
    subset = tmp_path / "subset.yaml"
    subset.write_text("dataset: {source: sample, subset: {limit: 4, seed: 3}}\n")
    # The target first: `--configfile` takes every word after it as a config file.
    result = snakemake(tmp_path, "predictions", "--cores", "2", "--configfile", str(subset))
    assert result.returncode == 0, result.stderr[-3000:]
    jobs = job_counts(result.stdout + result.stderr)
    assert jobs["predict"] == len(pairs) and jobs["subset"] == 1, jobs
    assert "score" not in jobs and "tables" not in jobs, jobs
    (folder,) = (tmp_path / "results").glob("sample-subset-*")
    made = {(p.parent.name, p.stem) for p in (folder / "predictions").glob("*/*.jsonl")}
    assert made == set(pairs)
    assert not (folder / "scores").exists()

    new_model = tmp_path / "new-model.yaml"
    new_model.write_text(
        subset.read_text()
        + "models: {random-2: {adapter: random, tasks: [localization], settings: {seed: 2}}}\n"
    )
    args = ("--cores", "2", "--configfile", str(new_model))
    result = snakemake(tmp_path, "predictions", *args)
    assert result.returncode == 0, result.stderr[-3000:]
    jobs = job_counts(result.stdout + result.stderr)
    assert jobs["predict"] == 1 and "subset" not in jobs and "score" not in jobs, jobs
    assert (folder / "predictions" / "localization" / "random-2.jsonl").is_file()

    result = snakemake(tmp_path, "--until", "predict", *args)
    assert result.returncode != 0
    assert "fix: run the `predictions` target" in result.stderr


@pytest.mark.parametrize(
    ("task", "model"),
    [("localization", "classical"), ("captioning", "classical"), ("diagnosis", "retrieval")],
)
def test_the_command_scores_a_prediction_file_as_the_pipeline_did(run, task, model, capsys):
    from novabench import cli

    results = run / "results" / "sample"
    capsys.readouterr()
    code = cli.main(
        [
            *("score", "--task", task, "--format", "json"),
            *("--dataset", str(results / "dataset" / "nova.parquet")),
            *("--predictions", str(results / "predictions" / task / f"{model}.jsonl")),
            *("--nltk-data", str(run / "results" / "nltk_data")),
        ]
    )
    assert code == 0
    payload, pipeline = json.loads(capsys.readouterr().out), scores(run, task, model)
    assert payload["judge"] == pipeline["judge"]
    # Why BERT F1 is unavailable offline names what this process's environment lacks
    # (another test of the session may have set HF_HUB_OFFLINE): not a scoring difference.
    for metrics in (payload["metrics"], pipeline["metrics"]):
        if isinstance(metrics.get("bertscore"), dict):
            metrics["bertscore"].pop("reason", None)
    assert payload["metrics"] == pipeline["metrics"]
    assert payload["inputs"] == pipeline["inputs"]


def test_a_run_interrupted_with_sigint_resumes_on_the_next_plain_run(tmp_path):
    """SIGINT to the snakemake process (not its jobs): Snakemake lets the running jobs
    finish without recording them, so their outputs stay marked incomplete; the next plain
    run must re-run them (profiles/default sets rerun-incomplete), not refuse to start."""
    import signal
    import time

    # The first jobs (the sample, then the dataset): short, and like any other.
    target = "results/sample/dataset/nova.parquet"
    log = tmp_path / "interrupted.log"
    with log.open("w") as out:
        process = subprocess.Popen(
            [*SNAKEMAKE, "-d", str(tmp_path), "--cores", "2", target],
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
            # A shell's background job ignores SIGINT; the test sends it on purpose.
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
        deadline = time.monotonic() + 600
        while "rule sample:" not in log.read_text() and time.monotonic() < deadline:
            assert process.poll() is None, log.read_text()[-3000:]
            time.sleep(0.2)
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=600) != 0
    assert list((tmp_path / ".snakemake" / "incomplete").iterdir()), "nothing was cut short"
    result = snakemake(tmp_path, "--cores", "2", target)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "IncompleteFilesException" not in result.stderr
    result = snakemake(tmp_path, "--cores", "2", target, "--dry-run")
    assert "Nothing to be done" in result.stdout + result.stderr


def test_models_of_earlier_runs_are_named_or_shown(run, tmp_path):
    """Separate runs with different models: lists share results/<tag>/: a score file the
    report does not show is named in one line; reporting.models: all shows it."""
    workdir = tmp_path / "run"
    shutil.copytree(run, workdir, symlinks=True)
    results = workdir / "results" / "sample"
    without = tmp_path / "without-random.yaml"
    without.write_text("models: {random: {enabled: false}}\n")
    result = snakemake(workdir, "--cores", "2", "--configfile", str(without))
    assert result.returncode == 0, result.stderr[-3000:]
    jobs = job_counts(result.stdout + result.stderr)
    assert "predict" not in jobs and "score" not in jobs, jobs
    line = (
        "Not shown: 1 score file(s) under this results folder, their models are not in this "
        "config's models:; reporting.models: all shows them: scores/localization/random.json."
    )
    summary = (results / "tables" / "summary.md").read_text()
    assert line in summary.splitlines() and "| random |" not in summary
    assert html.escape(line) in (results / "leaderboard.html").read_text()
    assert line in result.stderr

    every = tmp_path / "every.yaml"
    every.write_text(without.read_text() + "reporting: {models: all}\n")
    result = snakemake(workdir, "--cores", "2", "--configfile", str(every))
    assert result.returncode == 0, result.stderr[-3000:]
    jobs = job_counts(result.stdout + result.stderr)
    assert "predict" not in jobs and "score" not in jobs, jobs
    summary = (results / "tables" / "summary.md").read_text()
    assert "| random | Controls |" in summary and "Not shown" not in summary
    table = pd.read_csv(results / "tables" / "localization.csv")
    assert "random" in set(table["model"])
