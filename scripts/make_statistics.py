"""Rule `statistics`: case-bootstrap CIs and paired tests for one task's score files."""

from pathlib import Path

from novabench.report.statistics import write_task_statistics
from novabench.rules import log, run


def main(smk):
    table = write_task_statistics(
        task=smk.wildcards.task,
        dataset_path=Path(smk.input.dataset),
        score_paths=[Path(p) for p in smk.input.scores],
        verdicts={Path(p).stem: Path(p) for p in smk.input.verdicts},
        models=smk.params.models,
        reporting=smk.params.reporting,
        out=Path(smk.output.statistics),
        breakdown_out=Path(smk.output.breakdown),
        cases_out=Path(smk.output.cases),
    )
    log.info(
        "%s: %d entries x %d metrics bootstrapped in %.1f s",
        smk.wildcards.task,
        table["model"].nunique(),
        table["metric"].nunique(),
        table.attrs["seconds"],
    )


run(snakemake, main)
