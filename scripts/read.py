"""Rule `read`: one (task, judge, model) prediction file read and judged into verdicts."""

from pathlib import Path

from novabench.reading import read_predictions_file
from novabench.rules import log, run


def main(smk):
    summary = read_predictions_file(
        task=smk.wildcards.task,
        dataset=Path(smk.input.dataset),
        predictions=Path(smk.input.predictions),
        out=Path(smk.output.verdicts),
        summary_out=Path(smk.output.summary),
        judge_cfg=smk.params.judge,
        cache_dir=Path(smk.params.cache_dir),
        code=smk.params.code,
        options=smk.params.options,
    )
    log.info(
        "%s/%s/%s: %s",
        smk.wildcards.task,
        smk.wildcards.judge,
        smk.wildcards.model,
        summary["status_counts"],
    )


run(snakemake, main)
