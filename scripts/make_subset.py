"""Rule `subset`: cut the configured subset from the built dataset (dataset.subset)."""

from pathlib import Path

from novabench.dataset.build import remove_stale_rater_scores
from novabench.dataset.subset import write_subset
from novabench.judges.vocabulary import load_vocabulary
from novabench.rules import log, run


def main(smk):
    manifest = write_subset(
        Path(smk.input.parquet),
        Path(smk.input.manifest),
        smk.params.subset,
        smk.params.tag,
        Path(smk.output.parquet),
        Path(smk.output.manifest),
        load_vocabulary().category_of,
        task_needs=smk.params.tasks,
        out_tasks={Path(path).stem: Path(path) for path in smk.output.tasks},
    )
    full = manifest["full_dataset"]
    log.info(
        "subset %s: %d of %d images, %d of %d cases",
        smk.params.tag,
        manifest["n_images"],
        full["n_images"],
        manifest["n_cases"],
        full["n_cases"],
    )
    for folder in smk.params.rater_scores:
        for path in remove_stale_rater_scores(Path(folder), manifest["raters"]):
            log.info("removed %s: its rater is not in the subset", path)


run(snakemake, main)
