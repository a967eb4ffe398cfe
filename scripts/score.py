"""Rule `score`: the benchmark's metrics for one (task, model) prediction file."""

from pathlib import Path

from novabench.rules import log, run
from novabench.score import metrics_text, score_predictions


def main(smk):
    summary = score_predictions(
        task=smk.wildcards.task,
        dataset=Path(smk.input.dataset),
        predictions=Path(smk.input.predictions),
        out_json=Path(smk.output.scores),
        out_csv=Path(smk.output.per_image),
        judge_cfg=smk.params.judge,
        options=smk.params.options,
        nltk_data=Path(smk.params.nltk_data),
        cache_dir=Path(smk.params.cache_dir),
        code=smk.params.code,
        # The judges' held-out figures (absent for a task scored without a judge).
        judge_figures=next((Path(p) for p in smk.input.judge_figures), None),
    )
    log.info("%s/%s scored: %s", smk.wildcards.task, smk.wildcards.model, metrics_text(summary))


run(snakemake, main)
