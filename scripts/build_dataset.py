"""Rule `dataset`: read the configured source and write nova.parquet + manifest.json."""

from pathlib import Path

from novabench.dataset.build import build_dataset
from novabench.rules import log, run


def main(smk):
    sample_dir = Path(smk.input.sample).parent.parent if hasattr(smk.input, "sample") else None
    manifest = build_dataset(
        smk.params.dataset,
        Path(smk.output.parquet),
        Path(smk.output.manifest),
        sample_dir=sample_dir,
    )
    log.info(
        "dataset: %d images, %d cases, %d gold boxes (sha256 %s)",
        manifest["n_images"],
        manifest["n_cases"],
        manifest["n_gold_boxes"],
        manifest["sha256"],
    )


run(snakemake, main)
