"""Performance of the pipeline: one table, every figure a ratio measured in the same run.

Rows (each with its target from the reproducibility issue):

- the sample pipeline (default config): a full run's wall time; a no-op re-run as a fraction
  of it; after an edit to the figure code, the jobs a dry run plans (only plotting jobs);
- the classical detector and the three scorers on generated datasets of about 906 and
  9,060 images (``generate_sample`` with 281 and 2,810 cases of 1-17 images): the cost
  ratio of the large to the small set;
- the localization scorer against a bare pycocotools evaluation of the same boxes;
- the case-level bootstrap (``novabench.report.bootstrap``) against a naive loop that
  re-scores every resample with the real scorer;
- API inference against its ideal wall time (``api_throughput.py``, concurrency 32);
- the peak memory (max RSS) of the largest job on the large set.

Each job of the scaling rows runs the rule's own function (what the rule's script calls) in
a fresh Python process, which reports the function's wall time (imports of the job module
excluded, the lazy imports and model loads inside it included) and its max RSS. The
pipeline rows run a copy of the workflow, so that the figure-code edit never touches the
repository. Generated datasets are cached under ``results/benchmarks/data/``.

    python scripts/benchmarks/performance.py            # about 906 and 9,060 images (long)
    python scripts/benchmarks/performance.py --quick    # about 91 and 906 images (smoke test)
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import io
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

DATA_DIR = ROOT / "results" / "benchmarks" / "data"
SEED = 20250520
IMAGES_PER_CASE = (1, 17)
# Cases of the small and large generated sets: 281 cases give about 906 images (NOVA's
# size), 2,810 about ten times that.
SIZES = {"full": (281, 2810), "quick": (28, 281)}
# What the workflow copy needs (the rest of the repository plays no part in a run).
WORKFLOW_PARTS = ("Snakefile", "workflow", "scripts", "config", "envs", "pyproject.toml")
FIGURE_CODE = Path("scripts") / "novabench" / "report" / "figures.py"
PLOTTING_RULES = "figure_"  # rule-name prefix of the plotting jobs

# The pipeline's jobs of the scaling rows: name -> (kind, task, model).
DETECTOR = "predict localization/classical"
SCORERS = (
    "score localization/classical",
    "score captioning/classical",
    "score diagnosis/retrieval",
)
JOBS: dict[str, tuple[str, str | None, str | None]] = {
    "dataset": ("dataset", None, None),
    DETECTOR: ("predict", "localization", "classical"),
    "predict captioning/classical": ("predict", "captioning", "classical"),
    "predict diagnosis/retrieval": ("predict", "diagnosis", "retrieval"),
    SCORERS[0]: ("score", "localization", "classical"),
    SCORERS[1]: ("score", "captioning", "classical"),
    SCORERS[2]: ("score", "diagnosis", "retrieval"),
    "statistics localization": ("statistics", "localization", "classical"),
    "statistics captioning": ("statistics", "captioning", "classical"),
    "statistics diagnosis": ("statistics", "diagnosis", "retrieval"),
}

TARGET_NOOP = 0.05
NOOP_REPEATS = 3
TARGET_SCALING = 12.0
TARGET_COCO = 1.5
TARGET_BOOTSTRAP = 50.0
TARGET_API = 1.25


@dataclass
class Row:
    what: str
    measured: str
    target: str
    met: bool | None  # None: no target, or not measured


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- datasets


def generated_dataset(n_cases: int) -> tuple[Path, dict[str, Any]]:
    """A generated NOVA-like dataset (cached): its folder and ``generate_sample``'s counts."""
    from novabench.sample import generate_sample

    folder = DATA_DIR / f"nova-{n_cases}cases-seed{SEED}"
    marker = folder / "generated.json"
    params = {"n_cases": n_cases, "seed": SEED, "images_per_case": list(IMAGES_PER_CASE)}
    if marker.is_file():
        meta = json.loads(marker.read_text())
        if {k: meta.get(k) for k in params} == params:
            return folder, meta["summary"]
    log(f"generating {n_cases} cases into {folder} (cached for later runs)")
    started = time.perf_counter()
    summary = generate_sample(folder, n_cases=n_cases, seed=SEED, images_per_case=IMAGES_PER_CASE)
    # Written last: a marker only a complete generation leaves behind.
    meta = {**params, "summary": summary, "seconds": round(time.perf_counter() - started, 1)}
    marker.write_text(json.dumps(meta, indent=2, default=str) + "\n")
    return folder, summary


# --------------------------------------------------------------------------- one job


def _plan():
    from novabench.config import merged_config_files, read_config

    config = merged_config_files(ROOT, [])
    return config, read_config(config, ROOT)


def verdicts_path(task: str | None, model: str | None) -> Path:
    """Where a score job's reading stage leaves its verdicts (``novabench score``'s
    layout: beside the score file)."""
    return Path(f"results/scores/{task}/{model}.verdicts.jsonl")


def job_function(kind: str, task: str | None, model: str | None, data: Path) -> Callable[[], Any]:
    """The rule's own function for one job, its arguments as the rule passes them, to run
    in the current directory (a scratch working directory, laid out like a run's)."""
    config, plan = _plan()
    dataset = Path("results/dataset/nova.parquet")
    predictions = Path(f"results/predictions/{task}/{model}.jsonl")
    scores = Path(f"results/scores/{task}/{model}.json")
    for path in (dataset, predictions, scores, Path(f"results/statistics/{task}.csv")):
        path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "dataset":
        from novabench.dataset.build import build_dataset

        cfg = {"source": "local", "local_path": str(data), "clip_boxes": False}
        return lambda: build_dataset(cfg, dataset, Path("results/dataset/manifest.json"))
    if kind == "predict":
        from novabench.predict import run_predictions

        return lambda: run_predictions(
            dataset=dataset,
            task=task,
            model_name=model,
            model_cfg=plan.model(model),
            prompt_path=Path(plan.prompt(task, model)),
            out=predictions,
            summary_out=predictions.with_suffix(".summary.json"),
            cache_dir=Path("results/cache"),
        )
    if kind == "score":  # the reading and the score job, as `novabench score` runs them
        from novabench.score import score_predictions

        return lambda: score_predictions(
            task=task,
            dataset=dataset,
            predictions=predictions,
            out_json=scores,
            out_csv=scores.with_suffix(".images.csv"),
            judge_cfg=plan.judge(task),
            options=plan.options(task),
            nltk_data=Path("results/nltk_data"),
        )
    if kind == "statistics":
        from novabench.report.statistics import write_task_statistics

        return lambda: write_task_statistics(
            task=task,
            dataset_path=dataset,
            score_paths=[scores],
            verdicts={model: verdicts_path(task, model)},
            models={model: {"adapter": plan.model(model)["adapter"]}},
            reporting=config["reporting"],
            out=Path(f"results/statistics/{task}.csv"),
        )
    raise ValueError(f"unknown job kind {kind!r}")


def peak_rss_mib() -> float:
    """This process's peak resident set size. Linux's VmHWM starts afresh at exec, whereas
    ``ru_maxrss`` keeps the parent's peak from before the fork."""
    status = Path("/proc/self/status")
    if status.is_file():
        for line in status.read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024  # kB
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def run_job_here(name: str, data: Path) -> None:
    """Child process: run one job, print its wall and CPU seconds and peak RSS as JSON."""
    function = job_function(*JOBS[name], data)
    started, cpu = time.perf_counter(), time.process_time()
    function()
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    print(json.dumps({"seconds": seconds, "cpu_seconds": cpu, "max_rss_mib": peak_rss_mib()}))


def run_job(name: str, workdir: Path, data: Path) -> dict[str, float]:
    """Run one job in a fresh Python process (its own max RSS) in ``workdir``."""
    command = [sys.executable, str(Path(__file__).resolve()), "--job", name, "--data", str(data)]
    result = subprocess.run(command, cwd=workdir, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"job {name} failed:\n{result.stderr[-3000:]}")
    measured = json.loads(result.stdout.strip().splitlines()[-1])
    log(
        f"  {name}: {measured['seconds']:.2f} s wall, {measured['cpu_seconds']:.2f} s CPU, "
        f"{measured['max_rss_mib']:.0f} MiB"
    )
    return measured


# --------------------------------------------------------------------------- the pipeline


def snakemake_executable() -> str:
    beside = Path(sys.executable).parent / "snakemake"
    return str(beside) if beside.exists() else (shutil.which("snakemake") or "snakemake")


def copy_workflow(target: Path) -> Path:
    ignore = shutil.ignore_patterns("__pycache__", ".snakemake", "results")
    target.mkdir(parents=True)
    for part in WORKFLOW_PARTS:
        source = ROOT / part
        if source.is_dir():
            shutil.copytree(source, target / part, ignore=ignore)
        elif source.exists():
            shutil.copy2(source, target / part)
    return target / "Snakefile"


def snakemake(snakefile: Path, workdir: Path, cores: int, *args: str) -> tuple[float, str]:
    command = [snakemake_executable(), "-s", str(snakefile), "-d", str(workdir)]
    command += ["--cores", str(cores), *args]
    started = time.perf_counter()
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - started
    output = result.stdout + result.stderr
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed:\n{output[-3000:]}")
    return seconds, output


def job_stats(output: str) -> dict[str, int]:
    """Planned jobs by rule, from Snakemake's 'Job stats' table (empty when none)."""
    if "Job stats:" not in output:
        return {}
    counts = {}
    for line in output.split("Job stats:", 1)[1].splitlines()[3:]:
        parts = line.split()
        if len(parts) != 2 or not parts[1].isdigit():
            break
        counts[parts[0]] = int(parts[1])
    counts.pop("total", None)
    return counts


def pipeline_rows(scratch: Path, cores: int) -> list[Row]:
    snakefile = copy_workflow(scratch / "workflow-copy")
    workdir = scratch / "pipeline"
    log("sample pipeline: full run")
    full_s, _ = snakemake(snakefile, workdir, cores)
    log(f"  {full_s:.1f} s; no-op re-runs")
    # A no-op takes about as long as Snakemake's start-up and DAG; the median of a few
    # keeps one slow start (a busy neighbour) from deciding the row.
    noops = []
    for _ in range(NOOP_REPEATS):
        seconds, output = snakemake(snakefile, workdir, cores)
        if "Nothing to be done" not in output:
            raise RuntimeError(f"the re-run was not a no-op:\n{output[-3000:]}")
        noops.append(seconds)
    noop_s = statistics.median(noops)
    log(f"  {', '.join(f'{s:.1f}' for s in noops)} s; dry run after an edit to {FIGURE_CODE}")
    figure_code = snakefile.parent / FIGURE_CODE
    figure_code.write_text(figure_code.read_text() + "\n# edited by the benchmark\n")
    _, output = snakemake(snakefile, workdir, cores, "--dry-run")
    planned = job_stats(output)
    planned.pop("all", None)  # the target rule runs nothing
    other = {rule: n for rule, n in planned.items() if not rule.startswith(PLOTTING_RULES)}
    plotting = sum(n for rule, n in planned.items() if rule.startswith(PLOTTING_RULES))
    listed = ", ".join(f"{rule} {n}" for rule, n in sorted(planned.items()))
    ratio = noop_s / full_s
    return [
        Row("Sample pipeline, full run (default config)", f"{full_s:.1f} s", "-", None),
        Row(
            f"No-op re-run / full run (median of {NOOP_REPEATS} re-runs)",
            f"{ratio:.1%} ({noop_s:.1f} s)",
            f"<= {TARGET_NOOP:.0%}",
            ratio <= TARGET_NOOP,
        ),
        Row(
            f"Jobs planned after editing `{FIGURE_CODE.as_posix()}` (dry run)",
            f"{plotting} plotting, {sum(other.values())} other ({listed or 'none'})",
            "plotting jobs only",
            plotting > 0 and not other,
        ),
    ]


# --------------------------------------------------------------------------- scaling


def scaling_runs(scratch: Path, mode: str) -> dict[int, dict[str, Any]]:
    """Every job of ``JOBS`` on the small and large generated sets."""
    runs = {}
    for n_cases in SIZES[mode]:
        data, summary = generated_dataset(n_cases)
        workdir = scratch / f"scaling-{n_cases}"
        workdir.mkdir(parents=True)
        log(f"scaling: {summary['n_images']} images ({n_cases} cases)")
        jobs = {name: run_job(name, workdir, data) for name in JOBS}
        runs[n_cases] = {"n_images": summary["n_images"], "workdir": workdir, "jobs": jobs}
    return runs


def scaling_rows(runs: dict[int, dict[str, Any]], mode: str) -> list[Row]:
    small, large = (runs[n] for n in SIZES[mode])
    size = f"{large['n_images']:,} vs {small['n_images']:,} images"
    image_ratio = large["n_images"] / small["n_images"]
    rows = []
    for name in (DETECTOR, *SCORERS, "all four"):
        names = (DETECTOR, *SCORERS) if name == "all four" else (name,)
        # Cost is CPU time: on a shared machine, wall time also measures the neighbours.
        cpu_small, cpu_large, wall_small, wall_large = (
            sum(run["jobs"][n][key] for n in names)
            for run, key in (
                (small, "cpu_seconds"),
                (large, "cpu_seconds"),
                (small, "seconds"),
                (large, "seconds"),
            )
        )
        ratio = cpu_large / cpu_small
        label = {
            DETECTOR: "Classical detector (`predict localization/classical`)",
            "all four": "Detector + the three scorers",
        }.get(name, f"Scorer `{name}`")
        rows.append(
            Row(
                f"{label}, cost {size}",
                f"{ratio:.1f}x CPU ({cpu_small:.1f} s -> {cpu_large:.1f} s; wall "
                f"{wall_large / wall_small:.1f}x, {wall_small:.1f} s -> {wall_large:.1f} s; "
                f"{image_ratio:.1f}x images)",
                f"<= {TARGET_SCALING:g}x",
                ratio <= TARGET_SCALING,
            )
        )
    return rows


def memory_row(runs: dict[int, dict[str, Any]], mode: str) -> Row:
    large = runs[SIZES[mode][1]]
    name, job = max(large["jobs"].items(), key=lambda item: item[1]["max_rss_mib"])
    return Row(
        f"Peak memory, largest job at {large['n_images']:,} images",
        f"{job['max_rss_mib']:,.0f} MiB max RSS (`{name}`)",
        "none set",
        None,
    )


# --------------------------------------------------------------------------- localization


def localization_inputs(workdir: Path) -> tuple[dict, dict, dict, dict]:
    """Gold boxes, predicted boxes, statuses and cases by filename, as the score job
    reads them from the verdict file (the boxes the reading stage parsed)."""
    from novabench.dataset.read import load_nova
    from novabench.records import read_verdicts

    frame = load_nova(
        workdir / "results/dataset/nova.parquet", columns=["filename", "case_id", "gold_boxes"]
    )
    records = {
        r["filename"]: r
        for r in read_verdicts(workdir / verdicts_path("localization", "classical"))
    }
    gold, preds, statuses = {}, {}, {}
    cases = dict(zip(frame["filename"], frame["case_id"], strict=True))
    for row in frame.itertuples(index=False):
        gold[row.filename] = [[b["x"], b["y"], b["width"], b["height"]] for b in row.gold_boxes]
        record = records.get(row.filename)
        statuses[row.filename] = record["status"] if record else "missing"
        preds[row.filename] = ((record or {}).get("read") or {}).get("boxes", [])
    n_boxes = sum(map(len, preds.values()))
    if not n_boxes:
        raise RuntimeError("the verdict file holds no predicted box: nothing to measure")
    log(f"localization: {n_boxes:,} predicted boxes on {len(preds):,} images")
    return gold, preds, statuses, cases


def bare_pycocotools(gold: dict, preds: dict) -> float:
    """pycocotools' own evaluation of the boxes (loadRes, evaluate, accumulate, summarize);
    returns its mAP@[50:95]."""
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    ids = {name: i for i, name in enumerate(sorted(gold), start=1)}
    boxes = [(name, box) for name in sorted(gold) for box in gold[name]]
    annotations = [
        # Ids from 1: pycocotools takes annotation id 0 for "unmatched".
        {"id": k, "image_id": ids[name], "category_id": 1, "bbox": box}
        | {"area": box[2] * box[3], "iscrowd": 0}
        for k, (name, box) in enumerate(boxes, start=1)
    ]
    detections = [
        {
            "image_id": ids[name],
            "category_id": 1,
            "bbox": [p["x"], p["y"], p["width"], p["height"]],
            "score": 1.0 if p.get("score") is None else p["score"],
        }
        for name in sorted(preds)
        for p in preds[name]
    ]
    with contextlib.redirect_stdout(io.StringIO()):
        coco_gt = COCO()
        coco_gt.dataset = {
            "images": [{"id": i} for i in ids.values()],
            "categories": [{"id": 1, "name": "anomaly"}],
            "annotations": annotations,
        }
        coco_gt.createIndex()
        coco_dt = coco_gt.loadRes(detections)
        evaluator = COCOeval(coco_gt, coco_dt, iouType="bbox")
        evaluator.evaluate()
        evaluator.accumulate()
        evaluator.summarize()
    return float(evaluator.stats[0])


def best_of(repeats: int, function: Callable[[], Any]) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        function()
        times.append(time.perf_counter() - started)
    return min(times)


def coco_row(workdir: Path, n_images: int, repeats: int) -> Row:
    from novabench.tasks.localization.metrics import score_localization

    gold, preds, statuses, _ = localization_inputs(workdir)
    log("localization scorer vs bare pycocotools")
    scorer_s = best_of(repeats, lambda: score_localization(gold, preds, statuses))
    bare_s = best_of(repeats, lambda: bare_pycocotools(gold, preds))
    ratio = scorer_s / bare_s
    return Row(
        f"Localization scorer / bare pycocotools, same boxes ({n_images:,} images)",
        f"{ratio:.2f}x ({scorer_s:.2f} s vs {bare_s:.2f} s, best of {repeats})",
        f"<= {TARGET_COCO:g}x",
        ratio <= TARGET_COCO,
    )


# --------------------------------------------------------------------------- bootstrap


def bootstrap_row(workdir: Path, n_images: int, naive_resamples: int) -> Row:
    """The statistics rule's localization bootstrap against re-scoring each resample."""
    import numpy as np
    import yaml

    from novabench.report.bootstrap import draw_cases
    from novabench.tasks.localization.bootstrap import localization_replicates
    from novabench.tasks.localization.metrics import coco_detection_matches, score_localization

    reporting = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())["reporting"]
    n_resamples, seed = reporting["bootstrap"]["resamples"], reporting["bootstrap"]["seed"]
    gold, preds, statuses, case_of = localization_inputs(workdir)
    _, per_image = score_localization(gold, preds, statuses)
    names = sorted(gold)
    cases = [case_of[name] for name in names]
    # The weights' image order (sorted filenames), which the statistics rule uses too.
    per_image = per_image.set_index("filename").loc[names].reset_index()

    log(f"bootstrap: {n_resamples} resamples, vectorised")
    started = time.perf_counter()
    resamples = draw_cases(cases, n_resamples, seed)
    matches = coco_detection_matches(gold, preds)
    replicates = localization_replicates(per_image, matches, resamples.weights(cases))
    vectorised_s = time.perf_counter() - started

    # The naive loop: build each resampled image set (copies of a drawn case's images
    # renamed) and run the real scorer on it; timed on the first resamples, scaled up.
    log(f"bootstrap: naive loop over {naive_resamples} resamples")
    images_of: dict[str, list[str]] = {}
    for name, case in zip(names, cases, strict=True):
        images_of.setdefault(case, []).append(name)
    started = time.perf_counter()
    naive = []
    for b in range(naive_resamples):
        gold_b, preds_b, status_b = {}, {}, {}
        drawn: dict[str, int] = {}
        for index in resamples.indices[b]:
            case = resamples.cases[index]
            copy = drawn[case] = drawn.get(case, -1) + 1
            for name in images_of[case]:
                new = f"{name}~{copy:04d}"
                gold_b[new], preds_b[new], status_b[new] = gold[name], preds[name], statuses[name]
        naive.append(score_localization(gold_b, preds_b, status_b)[0]["mAP@30"])
    naive_s = (time.perf_counter() - started) * n_resamples / naive_resamples
    # Same numbers, or the comparison would be meaningless.
    if not np.allclose(replicates["mAP@30"][:naive_resamples], naive, equal_nan=True):
        raise RuntimeError("the vectorised bootstrap and the naive loop disagree on mAP@30")
    speedup = naive_s / vectorised_s
    return Row(
        f"Case bootstrap, localization ({n_images:,} images, {n_resamples} resamples): "
        "naive loop / vectorised",
        f"{speedup:,.0f}x faster ({vectorised_s:.2f} s vs {naive_s:,.0f} s; naive timed on "
        f"{naive_resamples} resamples, scaled)",
        f">= {TARGET_BOOTSTRAP:g}x",
        speedup >= TARGET_BOOTSTRAP,
    )


# --------------------------------------------------------------------------- API


def api_row(requests: int, concurrency: int = 32, latency_ms: float = 100.0) -> Row:
    what = f"API inference wall / ideal, concurrency {concurrency} ({requests} requests)"
    path = Path(__file__).with_name("api_throughput.py")
    if not path.is_file():
        return Row(what, f"not measured ({path.name} is missing)", f"<= {TARGET_API:g}x", None)
    try:
        spec = importlib.util.spec_from_file_location("api_throughput", path)
        api = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(api)
    except Exception as exc:  # e.g. the openai client not installed
        return Row(what, f"not measured ({type(exc).__name__}: {exc})", "", None)
    from novabench.models.base import Sample

    log(f"API: {requests} requests at concurrency {concurrency}")
    samples = [
        Sample(
            filename=f"img{i:04d}.png",
            case_id=f"case{i:04d}",
            task="localization",
            # A distinct prompt per image: no request is answered from the cache.
            prompt=api.PROMPT.format(width=480, height=480) + f"\n(image {i})",
            image_png=api.slice_png(i),
            width=480,
            height=480,
        )
        for i in range(requests)
    ]
    server, base_url = api.start_server(latency_ms)
    try:
        wall, _, errors = api.run_once(base_url, samples, concurrency)
    finally:
        server.terminate()
        server.wait(timeout=10)
    ideal = requests * latency_ms / 1000 / concurrency
    ratio = wall / ideal
    return Row(
        what + f", server latency {latency_ms:g} ms",
        f"{ratio:.2f}x ({wall:.2f} s vs {ideal:.2f} s; {errors} errors)",
        f"<= {TARGET_API:g}x",
        ratio <= TARGET_API and errors == 0,
    )


# --------------------------------------------------------------------------- the table


def render(rows: list[Row], mode: str, seconds: float) -> str:
    load = os.getloadavg()[0]
    small, large = SIZES[mode]
    lines = [
        "# Performance of the pipeline",
        "",
        f"Measured by `scripts/benchmarks/performance.py{' --quick' if mode == 'quick' else ''}`"
        f" in one run of {seconds / 60:.0f} min on {os.cpu_count()} CPUs (load average "
        f"{load:.1f} at the end). Generated sets: `generate_sample` with {small:,} and "
        f"{large:,} cases of {IMAGES_PER_CASE[0]}-{IMAGES_PER_CASE[1]} images, seed {SEED}. "
        "Job costs are the rule function's CPU time in its own process (module imports "
        "excluded, model loading included); wall times beside them.",
        "",
        "| what | measured | target | met? |",
        "| --- | --- | --- | --- |",
    ]
    for row in rows:
        met = "-" if row.met is None else ("yes" if row.met else "**no**")
        lines.append(f"| {row.what} | {row.measured} | {row.target} | {met} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="about 91 and 906 images")
    parser.add_argument("--cores", type=int, default=os.cpu_count() or 1)
    parser.add_argument(
        "--out", type=Path, default=ROOT / "results" / "benchmarks" / "performance.md"
    )
    parser.add_argument("--job", help=argparse.SUPPRESS)  # internal: run one job here
    parser.add_argument("--data", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.job:
        run_job_here(args.job, args.data)
        return

    mode = "quick" if args.quick else "full"
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="nova-performance-") as tmp:
        scratch = Path(tmp)
        rows = pipeline_rows(scratch, args.cores)
        runs = scaling_runs(scratch, mode)
        rows += scaling_rows(runs, mode)
        large = runs[SIZES[mode][1]]
        rows.append(coco_row(large["workdir"], large["n_images"], repeats=3))
        # The bootstrap at NOVA's size: the 281-case set in both modes.
        nova = runs[281]
        rows.append(bootstrap_row(nova["workdir"], nova["n_images"], 5 if args.quick else 20))
        rows.append(api_row(906))
        rows.append(memory_row(runs, mode))
    table = render(rows, mode, time.perf_counter() - started)
    print(table)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(table)


if __name__ == "__main__":
    main()
