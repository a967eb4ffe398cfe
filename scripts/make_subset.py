"""Rule `subset`: cut the configured subset from the built dataset (dataset.subset)."""

from pathlib import Path

from novabench.dataset.subset import write_subset
from novabench.knowledge_base import load_knowledge_base
from novabench.rules import log, run


def main(smk):
    manifest = write_subset(
        Path(smk.input.parquet),
        Path(smk.input.manifest),
        smk.params.subset,
        smk.params.tag,
        Path(smk.output.parquet),
        Path(smk.output.manifest),
        load_knowledge_base().category_of,
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


run(snakemake, main)
