"""Rule `score`: the benchmark's metrics for one (task, model) verdict file."""

from pathlib import Path

from novabench.rules import log, run
from novabench.score import metrics_text, score_verdicts


def main(smk):
    summary = score_verdicts(
        task=smk.wildcards.task,
        dataset=Path(smk.input.dataset),
        verdicts=Path(smk.input.verdicts),
        verdict_summary=Path(smk.input.verdict_summary),
        out_json=Path(smk.output.scores),
        out_csv=Path(smk.output.per_image),
        options=smk.params.options,
        control=smk.params.control,
        nltk_data=Path(smk.params.nltk_data),
        code=smk.params.code,
        # The judges' held-out figures (absent for a task scored without a judge).
        judge_figures=next((Path(p) for p in smk.input.judge_figures), None),
    )
    log.info("%s/%s scored: %s", smk.wildcards.task, smk.wildcards.model, metrics_text(summary))


run(snakemake, main)
