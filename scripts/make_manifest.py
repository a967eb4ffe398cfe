"""Rule `manifest`: results/<tag>/manifest.json, the provenance of every result."""

from pathlib import Path

from novabench.report.manifest import write_manifest
from novabench.rules import log, run


def main(smk):
    manifest = write_manifest(
        Path(smk.output.manifest),
        config=smk.params.config,
        dataset_manifest=Path(smk.input.dataset_manifest),
        prompts=[Path(p) for p in smk.input.prompts],
        prediction_summaries=[Path(p) for p in smk.input.predictions],
        score_files=[Path(p) for p in smk.input.scores],
        git=smk.params.git,
        code_files=smk.params.code,
    )
    log.info("manifest written (commit %s)", manifest["git"]["commit"])


run(snakemake, main)
