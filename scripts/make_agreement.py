"""Rule `judge_agreement`: several judges' verdicts on the same predictions, Cohen's kappa."""

from pathlib import Path

from novabench.report.agreement import group_verdict_files, write_agreement
from novabench.report.labels import dataset_label, read_manifest
from novabench.rules import log, run


def main(smk):
    table = write_agreement(
        verdicts=group_verdict_files([Path(p) for p in smk.input.verdicts], smk.params.judges),
        out_csv=Path(smk.output.table),
        out_md=Path(smk.output.md),
        dataset_label=dataset_label(read_manifest(Path(smk.input.dataset_manifest))),
    )
    log.info("judge agreement: %d comparisons", len(table))


run(snakemake, main)
