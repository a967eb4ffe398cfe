# Config validation, wildcard constraints and every input function.

import sys
from pathlib import Path

from snakemake.exceptions import WorkflowError
from snakemake.utils import validate

# The rules' Python code lives in scripts/novabench; make it importable here too.
sys.path.insert(0, str(Path(workflow.basedir) / "scripts"))

from novabench.config import (  # noqa: E402
    check_config,
    describe_validation_error,
    rater_slug,
)

try:
    validate(config, schema="../schemas/config.schema.yaml")
except WorkflowError as exc:
    raise WorkflowError(describe_validation_error(exc)) from None

PLAN = check_config(config, Path(workflow.basedir))

DATASET = "results/dataset/nova.parquet"
MANIFEST = "results/dataset/manifest.json"


wildcard_constraints:
    task="localization|captioning|diagnosis",
    model=r"(?!rater-)[A-Za-z0-9][A-Za-z0-9._-]*",
    rater=r"[A-Za-z0-9][A-Za-z0-9._-]*",


def dataset_inputs(wildcards):
    """The embedded sample is built by its own rule; other sources are read in place."""
    if config["dataset"]["source"] == "sample":
        return {"sample": "results/dataset/sample/data/nova-v1.parquet"}
    return {}


def predict_inputs(wildcards):
    inputs = {
        "dataset": DATASET,
        "prompt": PLAN.prompt(wildcards.task, wildcards.model),
    }
    upstream = PLAN.findings_model(wildcards.task)
    if upstream:
        inputs["findings"] = f"results/predictions/captioning/{upstream}.jsonl"
    extra = PLAN.external_predictions(wildcards.task, wildcards.model)
    if extra:
        inputs["answers"] = extra
    return inputs


def rater_score_files(wildcards):
    """One human-reference score file per rater named in the dataset manifest."""
    import json

    manifest = checkpoints.dataset.get().output.manifest
    raters = json.loads(Path(manifest).read_text())["raters"]
    slugs = sorted({rater_slug(r) for r in raters})
    return expand("results/scores/localization/rater-{rater}.json", rater=slugs)


def all_targets(wildcards):
    """Known before the dataset exists, so a dry run shows the whole DAG."""
    targets = [DATASET, MANIFEST]
    for task, model in PLAN.jobs():
        targets.append(f"results/predictions/{task}/{model}.jsonl")
        targets.append(f"results/scores/{task}/{model}.json")
    return targets


def human_reference_targets(wildcards):
    """Rater scores: the raters are only known once the dataset is built."""
    if not PLAN.task_enabled("localization"):
        return []
    return rater_score_files(wildcards)
