"""Rule `score_rater`: one human rater's boxes scored against gold, as a model would be."""

from pathlib import Path

from novabench.rules import log, run
from novabench.score import metrics_text, score_rater


def main(smk):
    summary = score_rater(
        rater=smk.wildcards.rater,
        dataset=Path(smk.input.dataset),
        out_json=Path(smk.output.scores),
        out_csv=Path(smk.output.per_image),
        code=smk.params.code,
        task=smk.wildcards.task,
    )
    log.info(
        "%s/rater %s scored: %s", smk.wildcards.task, smk.wildcards.rater, metrics_text(summary)
    )


run(snakemake, main)
