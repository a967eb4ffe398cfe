"""Rule `predict`: run one model on one task."""

from pathlib import Path

from novabench.predict import run_predictions
from novabench.rules import log, run


def main(smk):
    summary = run_predictions(
        dataset=Path(smk.input.dataset),
        task=smk.wildcards.task,
        model_name=smk.wildcards.model,
        model_cfg=smk.params.model,
        prompt_path=Path(smk.input.prompt),
        out=Path(smk.output.predictions),
        summary_out=Path(smk.output.summary),
        upstream_predictions=Path(smk.input.upstream) if hasattr(smk.input, "upstream") else None,
        cache_dir=Path(smk.params.cache_dir),
        code=smk.params.code,
        shared_server=Path(smk.input.server) if hasattr(smk.input, "server") else None,
    )
    log.info("%s/%s: %s", smk.wildcards.task, smk.wildcards.model, summary["status_counts"])


run(snakemake, main)
