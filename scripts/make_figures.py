"""Rule `figure_*`: one figure family (PNG and PDF) from score and statistics files."""

from pathlib import Path

from novabench.report.figures import make_figure
from novabench.report.labels import figure_note, read_manifest
from novabench.rules import log, run


def _optional(files, name: str) -> Path | None:
    # Snakemake's named lists: `name in files` would test the values, not the names.
    value = getattr(files, name, None)
    return Path(value) if value else None


def main(smk):
    make_figure(
        smk.params.family,
        png=Path(smk.output.png),
        pdf=Path(smk.output.pdf),
        task=smk.params.task,
        statistics=_optional(smk.input, "statistics"),
        dataset=_optional(smk.input, "dataset"),
        scores=[Path(p) for p in getattr(smk.input, "scores", [])],
        verdicts={Path(p).stem: Path(p) for p in getattr(smk.input, "verdicts", [])},
        models=smk.params.models,
        reporting=smk.params.reporting,
        table=_optional(smk.output, "table") or _optional(smk.input, "table"),
        axis=getattr(smk.params, "axis", None),
        note=figure_note(read_manifest(_optional(smk.input, "dataset_manifest"))),
    )
    log.info("figure %s (%s) written", smk.params.family, smk.params.task or "all tasks")


run(snakemake, main)
