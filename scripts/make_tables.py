"""Rule `tables`: the paper's tables (LaTeX, CSV, Markdown), reproduced vs reported, summary."""

from pathlib import Path

from novabench.report.failures import Limits
from novabench.report.tables import write_all_tables
from novabench.rules import log, run, task_report_files


def main(smk):
    statistics, scores = task_report_files(smk.input)
    tables = write_all_tables(
        statistics=statistics,
        scores=scores,
        paper_reference=Path(smk.input.paper_reference),
        dataset_manifest=Path(smk.input.dataset_manifest),
        out_dir=Path(smk.output.summary).parent,
        agreement=smk.params.agreement,
        audits={model: Path(sheet) for model, sheet in smk.params.audits.items()},
        limits=Limits.from_config(smk.params.limits),
        left_out=smk.params.left_out,
    )
    log.info("tables written for %s", ", ".join(tables) or "no task")


run(snakemake, main)
