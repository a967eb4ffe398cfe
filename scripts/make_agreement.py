"""Rule `judge_agreement`: several judges on the same predictions, Cohen's kappa."""

from pathlib import Path

from novabench.report.agreement import write_agreement
from novabench.report.labels import dataset_label, read_manifest
from novabench.rules import log, run


def main(smk):
    predictions: dict[str, list[Path]] = {}
    for path in smk.input.predictions:
        predictions.setdefault(Path(path).parent.name, []).append(Path(path))
    table = write_agreement(
        dataset_path=Path(smk.input.dataset),
        predictions=predictions,
        judges=smk.params.judges,
        out_csv=Path(smk.output.table),
        out_md=Path(smk.output.md),
        dataset_label=dataset_label(read_manifest(Path(smk.input.dataset_manifest))),
    )
    log.info("judge agreement: %d comparisons", len(table))


run(snakemake, main)
