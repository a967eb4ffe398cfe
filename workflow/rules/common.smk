# Config validation, wildcard constraints and every input function.

import json
import os
import re
import sys
from pathlib import Path

from snakemake.logging import logger
from snakemake.settings.types import DeploymentMethod

# The rules' Python code lives in scripts/novabench; make it importable here too.
sys.path.insert(0, str(Path(workflow.basedir) / "scripts"))

from novabench.catalog import predict_params  # noqa: E402
from novabench.config import read_config  # noqa: E402
from novabench.errors import NovaError  # noqa: E402
from novabench.job_env import job_environment  # noqa: E402
from novabench.job_params import DigestParam, inert_param  # noqa: E402
from novabench.snakemake_log import install as install_short_job_lines  # noqa: E402
from novabench.redaction import export_key_variables  # noqa: E402
from novabench.dataset.schema import rater_slug  # noqa: E402
from novabench.dataset.tags import (  # noqa: E402
    check_tag_source,
    dataset_tags,
    subset_spec,
)
from novabench.report.breakdowns import AXES as BREAKDOWN_AXES  # noqa: E402
from novabench.report.inputs import report_models  # noqa: E402
from novabench.report.scored import (  # noqa: E402
    agreement_left_out_line,
    left_out_line,
    own_verdicts_lookahead,
    recorded_adapters,
    scored_elsewhere,
    shown_elsewhere,
    unreadable,
)
from novabench.tasks import dataset_needs, get_task, task_names  # noqa: E402

# Snakemake's job lines with file lists and reasons a person can read (novabench.snakemake_log).
install_short_job_lines(logger)

# Libraries keep their state under results/, not in the home folder (novabench.job_env);
# set before any job starts, so every job inherits it.
os.environ.update(job_environment(Path("results") / "cache"))


def stop(message):
    """One line, then exit: a raised error would add Snakemake's stack-frame lines."""
    logger.error(message)
    sys.exit(1)


def check_run_environment():
    """`onstart` (a real run only, not `-n`): every model's and judge's key variable is
    set and its server reachable; a problem is one line, with no Snakefile header."""
    try:
        PLAN.check_environment()
    except NovaError as exc:
        stop(f"cannot start the run: {exc}")


# The one reader of the configuration (the command line's too): plug-ins, catalog names,
# `--config` strings typed, the schema with each task's block, then the checks.
try:
    PLAN = read_config(config, Path(workflow.basedir), workflow.configfiles)
except NovaError as exc:
    stop(f"config error: {exc}")
if PLAN.idle_reason():
    logger.warning(PLAN.idle_reason())
# Each job knows the other models' and judges' keys too, to redact them from answers.
export_key_variables(PLAN.key_variables())


def _print_estimate():
    """Requests, tokens, dollars and time still ahead, when service models or LLM judges
    have requests to send: on every plan (dry runs too, where `onstart` does not run), once, by the main
    process only (cluster jobs parse this file again)."""
    from novabench.estimate import plan_time_estimate

    text = plan_time_estimate(PLAN, Path.cwd())
    if text:
        print(text, file=sys.stderr)


if workflow.is_main_process:
    _print_estimate()

# Each dataset (source and subset) has its results folder, results/<tag>/, so switching
# datasets re-runs and overwrites nothing; the response caches and WordNet are shared.
FULL_TAG, TAG = dataset_tags(config["dataset"])
# A tag whose folder holds another source's dataset is refused before anything runs (by
# the main process: a job's node may see the folder by another path).
if workflow.is_main_process:
    try:
        check_tag_source(Path("results"), FULL_TAG, config["dataset"])
    except NovaError as exc:
        stop(f"config error: {exc}")
SUBSET = subset_spec(config["dataset"])


def results(path, tag=TAG):
    """``results/<tag>/<path>``: where this dataset's run state lives."""
    return f"results/{tag}/{path}"


# The embedded sample in the upstream layout, as a download would leave it.
SAMPLE_SOURCE = "results/sources/sample/data/nova-v1.parquet"
# The full dataset of the source, and the one this run scores (a subset cut from it).
FULL_DATASET = results("dataset/nova.parquet", FULL_TAG)
FULL_MANIFEST = results("dataset/manifest.json", FULL_TAG)
DATASET = results("dataset/nova.parquet")
MANIFEST = results("dataset/manifest.json")
# What each task's jobs read of the dataset (novabench.dataset.references): they re-run
# when that changes, not whenever the dataset file is rebuilt.
FULL_TASK_INPUTS = {
    task: results(f"dataset/tasks/{task}.json", FULL_TAG) for task in task_names()
}
TASK_INPUTS = {task: results(f"dataset/tasks/{task}.json") for task in task_names()}
# Tasks the dataset's human raters are scored on (Task.scores_raters).
RATER_TASKS = [task for task in task_names() if get_task(task).scores_raters]


def _dataset_label():
    from novabench.report.labels import DatasetLabel

    return DatasetLabel(MANIFEST)


# The dataset's name in the HTML report's captions (`snakemake.params.dataset_label`),
# read from the manifest when the report is rendered; never a reason to re-run a job.
DATASET_LABEL = _dataset_label()


def task_caption(family=None):
    """The task's own caption text of a figure family (`snakemake.params.caption`); the
    family is the rule's `family` wildcard when not given."""
    from novabench.report.labels import TaskCaption

    return lambda wildcards: TaskCaption(
        wildcards.task, family or wildcards.family, DATASET_LABEL
    )


# Score files under results/<tag>/ of models this config does not run (earlier runs with
# other models: lists): `reporting.models: all` adds the complete ones to the report; the
# rest are named in one line (novabench.report.scored).
VERDICT_JUDGES = {
    task: PLAN.verdict_judge(task) for task in PLAN.tasks() if PLAN.task_enabled(task)
}
SCORED_ELSEWHERE = scored_elsewhere(Path(results("")), VERDICT_JUDGES, PLAN.jobs())
REPORT_ALL = config["reporting"]["models"] == "all"
SHOWN_ELSEWHERE = shown_elsewhere(SCORED_ELSEWHERE, REPORT_ALL)
LEFT_OUT = left_out_line(SCORED_ELSEWHERE, REPORT_ALL)
if LEFT_OUT and workflow.is_main_process:
    logger.warning(LEFT_OUT)
# Their files are read as they are: no rule may claim to make them (it would look the
# model up in this config).
_OTHER_RUNS = "|".join(sorted({re.escape(s.model) for s in SHOWN_ELSEWHERE}))
_NOT_OTHER_RUNS = (
    rf"(?!(?:{_OTHER_RUNS})\.(?:json|jsonl|images\.csv|summary\.json|log|tsv)$)"
    if _OTHER_RUNS
    else ""
)

MODEL_NAME = r"(?!rater-)[A-Za-z0-9][A-Za-z0-9._-]*"
# The `read` rule's wildcards: it reads their predictions for the agreement judges too,
# but leaves their own judge's verdicts as they are (novabench.report.scored).
READ_TASK = own_verdicts_lookahead(SHOWN_ELSEWHERE, VERDICT_JUDGES) + "(?:{})".format(
    "|".join(task_names())
)
READ_MODEL = MODEL_NAME


wildcard_constraints:
    task="|".join(task_names()),
    model=rf"{_NOT_OTHER_RUNS}{MODEL_NAME}",
    rater=r"[A-Za-z0-9][A-Za-z0-9._-]*",
    judge=r"[A-Za-z0-9][A-Za-z0-9._-]*",
    axis="|".join(BREAKDOWN_AXES),


def dataset_inputs(wildcards):
    """The embedded sample is built by its own rule; other sources are read in place."""
    if config["dataset"]["source"] == "sample":
        return {"sample": SAMPLE_SOURCE}
    return {}


def dataset_fingerprint(wildcards):
    """A local source folder's files, sizes, times and metadata checksums, as a
    parameter: a change there re-runs the dataset job (see dataset/fingerprint.py)."""
    from novabench.dataset.fingerprint import source_fingerprint

    return source_fingerprint(config["dataset"])


def task_dataset(wildcards):
    """The dataset as a task's jobs read it: the file (its time ignored: it is rebuilt
    whenever the source changes) and the task's digest (re-runs them when what they
    read of it changed)."""
    return {"dataset": ancient(DATASET), "task_inputs": TASK_INPUTS[wildcards.task]}


def predict_inputs(wildcards):
    inputs = {
        **task_dataset(wildcards),
        "prompt": PLAN.prompt(wildcards.task, wildcards.model),
    }
    upstream = PLAN.upstream(wildcards.task)
    if upstream:
        inputs["upstream"] = results("predictions/{}/{}.jsonl".format(*upstream))
    extra = PLAN.external_predictions(wildcards.task, wildcards.model)
    if extra:
        inputs["answers"] = extra
    if wildcards.model in SERVED_MODELS:
        inputs["server"] = results(f"servers/{wildcards.model}.json")
    return inputs


# Models loaded once for all their tasks: rule serve_model's service job, run with the
# interpreter a `script:` job would get (the environment's under --sdm conda).
SERVED_MODELS = PLAN.served_models()
SERVICE_PYTHON = (
    "python"
    if DeploymentMethod.CONDA in workflow.deployment_settings.deployment_method
    else sys.executable
)


def serve_resource(what):
    """One of a shared server's resources (gpu, cpus, mem_mb), per model."""
    return lambda wildcards: PLAN.serve_resources(wildcards.model)[what]


def predict_env(wildcards):
    """The conda environment the model's adapter declares (relative to this file)."""
    return f"../../{PLAN.predict_environment(wildcards.model)}"


def predict_resource(what):
    """One of a prediction job's resources (gpu, cpus, mem_mb), per model."""
    return lambda wildcards: PLAN.predict_resources(wildcards.model)[what]


def read_resource(what):
    """One of a reading job's resources (gpu, cpus, mem_mb): a judge it serves itself."""
    return lambda wildcards: PLAN.read_resources(wildcards.task, wildcards.judge)[what]


def api_resources(what):
    """`api_<provider>: 1` per job that sends to a chat-completions endpoint, so that e.g.
    `--resources api_openai=2` caps the jobs sending to one provider at the same time:
    prediction jobs of its models (`what="models"`) and reading jobs whose judge calls it
    (`what="judges"`).
    """
    wildcard = {"models": "model", "tasks": "task", "judges": "judge"}[what]
    return {
        resource: lambda wildcards, names=frozenset(users[what]): int(
            getattr(wildcards, wildcard) in names
        )
        for resource, users in PLAN.api_resources().items()
        if users[what]
    }


def judge_inputs(wildcards):
    """Files behind the judge a reading job runs (an LLM judge's prompt): editing them
    re-reads."""
    return PLAN.judge_inputs(wildcards.task, wildcards.judge)


def reading_judge(wildcards):
    """The written-out judge of a reading job (None: a task read without a judge)."""
    return inert_param(PLAN.reading_judge(wildcards.task, wildcards.judge))


def control_bounds(wildcards):
    """A control's bounds, checked on its score file (none for a model under test)."""
    return inert_param(PLAN.control_bounds(wildcards.model))


def verdict_inputs(wildcards):
    """The verdicts a score job counts: those of the task's own judge (or reader)."""
    stem = f"verdicts/{wildcards.task}/{PLAN.verdict_judge(wildcards.task)}/{wildcards.model}"
    return {
        "verdicts": results(f"{stem}.jsonl"),
        "verdict_summary": results(f"{stem}.summary.json"),
    }


# The judges' held-out figures by judge identity (validation/), relative to the working
# directory when the workflow is there, as the judge report's inputs.
JUDGE_FIGURES = Path(workflow.basedir).resolve() / "validation" / "judge_figures.json"


def judge_figures(wildcards):
    """The record a judged task's score files look their judge up in; none for a task
    scored without a judge, or where the record is absent (its score files then say so).
    """
    if PLAN.judge(wildcards.task) is None or not JUDGE_FIGURES.is_file():
        return []
    path = JUDGE_FIGURES
    return [os.path.relpath(path) if Path.cwd() in path.parents else str(path)]


def reading_options(wildcards):
    """Only the task's own reading options, so a change re-reads that task only."""
    return inert_param(PLAN.reading_options(wildcards.task))


def score_options(wildcards):
    """Only the task's own scoring options, so a change re-scores that task only."""
    return inert_param(PLAN.options(wildcards.task))


def rater_score_files(wildcards, task):
    """One human-reference score file of ``task`` per rater named in the dataset manifest."""
    import json

    manifest = (
        (checkpoints.subset if SUBSET else checkpoints.dataset).get().output.manifest
    )
    raters = json.loads(Path(manifest).read_text())["raters"]
    slugs = sorted({rater_slug(r) for r in raters})
    return expand(results(f"scores/{task}/rater-{{rater}}.json"), rater=slugs)


def all_targets(wildcards):
    """Known before the dataset exists, so a dry run shows the whole DAG."""
    # `--until predict` plans the prediction jobs, then drops them all when the dataset
    # checkpoint re-plans the DAG, and reports success: refuse it rather than run nothing.
    # (The DAG settings exist once the DAG is built, so this lives in an input function.)
    if "predict" in workflow.dag_settings.until:
        stop(
            "--until predict would skip every prediction job once the dataset is built; "
            "fix: run the `predictions` target instead: snakemake --cores 4 predictions"
        )
    targets = [DATASET, MANIFEST]
    for task, model in PLAN.jobs():
        targets.append(results(f"predictions/{task}/{model}.jsonl"))
        targets.append(results(f"scores/{task}/{model}.json"))
    return targets


def prediction_targets(wildcards):
    """Every configured prediction file (the `predictions` target)."""
    return [results(f"predictions/{task}/{model}.jsonl") for task, model in PLAN.jobs()]


def human_reference_targets(wildcards):
    """Rater scores: the raters are only known once the dataset is built."""
    return [
        f for task in PLAN.rater_tasks() for f in rater_score_files(wildcards, task)
    ]


# --- Stage 4: statistics, tables, figures, provenance (workflow/rules/report.smk) -------


def task_models(task):
    """Models the report shows for ``task``: those that run it, in config order, then
    those scored by earlier runs (reporting.models: all)."""
    planned = [model for job_task, model in PLAN.jobs() if job_task == task]
    return planned + [s.model for s in SHOWN_ELSEWHERE if s.task == task]


REPORT_TASKS = [task for task in PLAN.tasks() if task_models(task)]
# What the statistics and figure jobs read of `reporting:`: the failure limits only mark
# rows of the tables and the leaderboard, so changing them re-runs those two jobs only.
REPORT_SETTINGS = {
    key: value
    for key, value in config["reporting"].items()
    if key not in ("min_answered", "max_error_rate", "models")
}
# Only what the report reads of each model (its adapter, and whether that adapter answers
# as a control), so that editing a model's settings does not re-run the report and
# changing an adapter's role does.
REPORT_MODELS = report_models(
    {
        **recorded_adapters(Path(results("")), SHOWN_ELSEWHERE),
        **{name: {"adapter": m["adapter"]} for name, m in config["models"].items()},
    }
)
# Task-specific figure families (results/<tag>/figures/{task}_{family}); `breakdown` has a rule
# of its own (it also writes its numbers).
TASK_FIGURES = {
    task: [f for f in get_task(task).figures if f != "breakdown"]
    for task in REPORT_TASKS
}


# Tasks whose predictions further judges judge too (reporting.agreement_judges), and per
# task the names of its own judge first, then those: the judges whose verdicts are compared.
AGREEMENT_JUDGES = {
    task: [PLAN.judge(task)["name"], *names]
    for task, names in config["reporting"]["agreement_judges"].items()
    if names and task in REPORT_TASKS
}
# Models of earlier runs whose predictions are gone: no agreement judge can read them.
AGREEMENT_UNREADABLE = [
    s
    for s in unreadable(Path(results("")), SHOWN_ELSEWHERE)
    if s.task in AGREEMENT_JUDGES
]
if AGREEMENT_UNREADABLE and workflow.is_main_process:
    logger.warning(agreement_left_out_line(AGREEMENT_UNREADABLE))


def _git_state():
    from novabench.report.manifest import git_state

    return git_state(Path(workflow.basedir))


# A parameter of the manifest rule, so that a new commit re-writes the manifest.
GIT_STATE = _git_state()


def manifest_code(wildcards):
    """The code and data behind every job of the run ({file: sha256}), for the manifest:
    worked out when the manifest job is, not on every parse of a cluster job; shown by
    its digest, so that Snakemake's "Params have changed" line stays short."""
    return DigestParam(PLAN.run_code_files())


def job_code(job, **keys):
    """The fingerprint of the code and data a job runs, as a parameter: editing a module
    it imports or a vocabulary it reads re-runs it, and nothing else
    (novabench.code_fingerprint)."""

    def fingerprint(wildcards):
        names = dict(wildcards.items())
        job_keys = {k: names[k] for k in ("task", "model", "judge") if k in names}
        return PLAN.code(job, **job_keys, **keys)

    return fingerprint


def report_category(wildcards):
    return get_task(wildcards.task).category


def task_score_files(wildcards, task):
    """Score files of a task: its models in config order, then the human raters."""
    files = [results(f"scores/{task}/{model}.json") for model in task_models(task)]
    if get_task(task).scores_raters:
        files += rater_score_files(wildcards, task)
    return files


def task_report_inputs(wildcards, task=None):
    """A task's score files, per-image tables and the verdict files they counted (what
    was read of each model's answers: captions, boxes); no prediction file."""
    task = task or wildcards.task
    scores = task_score_files(wildcards, task)
    judge = PLAN.verdict_judge(task)
    return {
        "dataset": DATASET,
        "scores": scores,
        "per_image": [s.removesuffix(".json") + ".images.csv" for s in scores],
        "verdicts": [
            results(f"verdicts/{task}/{judge}/{model}.jsonl")
            for model in task_models(task)
        ],
    }


def tables_inputs(wildcards):
    return {
        "statistics": [results(f"statistics/{task}.csv") for task in REPORT_TASKS],
        "scores": [
            f for task in REPORT_TASKS for f in task_score_files(wildcards, task)
        ],
        "paper_reference": PLAN.resolve(config["reporting"]["paper_reference"]),
        # Names the dataset in every caption; only the full release is set beside the paper.
        "dataset_manifest": MANIFEST,
    }


# Per (audited task, model), the filled sheet that audits the task's judge
# (models.<name>.audit); the tables job reads it with the model's per-image scores, so
# editing it re-writes the tables.
AUDIT_JOBS = [
    (task, model) for task, model in PLAN.audit_jobs() if task in REPORT_TASKS
]
AUDITS = {model: PLAN.audits()[model] for _, model in AUDIT_JOBS}


def audit_inputs(wildcards):
    return {
        "audit_sheets": list(AUDITS.values()),
        "audit_scores": [
            results(f"scores/{task}/{model}.images.csv") for task, model in AUDIT_JOBS
        ],
    }


def report_tables():
    """Per task: the CSV (shown in the HTML report), the LaTeX and Markdown versions."""
    # Imported under another name: Snakemake reads a line starting with `report(` as
    # its `report:` directive.
    from snakemake.io import report as report_flag

    outputs = []
    for task in REPORT_TASKS:
        outputs.append(
            report_flag(
                results(f"tables/{task}.csv"),
                caption="../report/tables.rst",
                category=get_task(task).category,
                subcategory="Tables",
                labels={"table": f"{task} (paper layout)", "models": "all"},
            )
        )
        outputs += [results(f"tables/{task}.tex"), results(f"tables/{task}.md")]
    return outputs


def agreement_inputs(wildcards):
    """Every judge's verdicts (AGREEMENT_JUDGES) on each model of its task whose answers
    can be read (models of earlier runs included), which the `read` rule writes, and the
    dataset manifest (the table's title names the data)."""
    left_out = {(s.task, s.model) for s in AGREEMENT_UNREADABLE}
    return {
        "dataset_manifest": MANIFEST,
        "verdicts": [
            results(f"verdicts/{task}/{judge}/{model}.jsonl")
            for task, judges in AGREEMENT_JUDGES.items()
            for model in task_models(task)
            if (task, model) not in left_out
            for judge in judges
        ],
    }


def manifest_inputs(wildcards):
    jobs = PLAN.jobs()
    scores = [f for task in REPORT_TASKS for f in task_score_files(wildcards, task)]
    return {
        "dataset_manifest": MANIFEST,
        "predictions": [results(f"predictions/{t}/{m}.summary.json") for t, m in jobs],
        "scores": scores,
        "prompts": sorted({PLAN.prompt(t, m) for t, m in jobs}),
    }


def leaderboard_inputs(wildcards):
    """What the tables read, the dataset manifest (the page names the dataset) and the
    figures (the page embeds their thumbnails: a re-drawn figure rewrites it)."""
    inputs = tables_inputs(wildcards)
    del inputs["paper_reference"]
    inputs["dataset_manifest"] = MANIFEST
    inputs["figures"] = report_figures()
    return inputs


def report_figures():
    """Every figure (PNG) of the report: per task, then judge agreement."""
    figures = []
    for task in REPORT_TASKS:
        figures.append(results(f"figures/{task}_metrics.png"))
        figures += [results(f"figures/{task}_{f}.png") for f in TASK_FIGURES[task]]
        if "breakdown" in get_task(task).figures:
            figures += [
                results(f"figures/{task}_breakdown_{axis}.png")
                for axis in BREAKDOWN_AXES
            ]
    if AGREEMENT_JUDGES:
        figures.append(results("figures/judge_agreement.png"))
    return figures


def report_targets(wildcards):
    """Tables, figures, the leaderboard and the provenance manifest of every task that
    has models."""
    if not REPORT_TASKS:
        return []
    return [
        results("tables/summary.md"),
        results("manifest.json"),
        results("leaderboard.html"),
        *report_figures(),
    ]
