"""Rule `dataset`: read the configured source and write nova.parquet + manifest.json."""

from pathlib import Path

from novabench.dataset.build import build_dataset, remove_stale_rater_scores
from novabench.rules import log, run


def main(smk):
    sample_dir = Path(smk.input.sample).parent.parent if hasattr(smk.input, "sample") else None
    manifest = build_dataset(
        smk.params.dataset,
        Path(smk.output.parquet),
        Path(smk.output.manifest),
        task_needs=smk.params.tasks,
        out_tasks={Path(path).stem: Path(path) for path in smk.output.tasks},
        sample_dir=sample_dir,
    )
    log.info(
        "dataset: %d images, %d cases, %d gold boxes (sha256 %s)",
        manifest["n_images"],
        manifest["n_cases"],
        manifest["n_gold_boxes"],
        manifest["sha256"],
    )
    for task, excluded in manifest["excluded"].items():
        log.warning(
            "dataset: %d image(s) with %s are left out of %s (e.g. %s); they are counted in "
            "the manifest, score files and tables; dataset.missing_reference: error stops instead",
            len(excluded["filenames"]),
            excluded["reason"],
            task,
            excluded["filenames"][0],
        )
    if manifest["n_converted_images"]:
        modes = sorted({c["mode"] for c in manifest["converted_images"]})
        log.warning(
            "dataset: %d image(s) of mode %s converted to 8-bit grayscale (listed in the manifest)",
            manifest["n_converted_images"],
            ", ".join(modes),
        )
    for folder in smk.params.rater_scores:
        for path in remove_stale_rater_scores(Path(folder), manifest["raters"]):
            log.info("removed %s: its rater is no longer in the dataset", path)


run(snakemake, main)
