"""Rule `sample`: write the embedded sample dataset in the current release's layout."""

from pathlib import Path

from novabench.rules import log, run
from novabench.sample import generate_sample


def main(smk):
    out_dir = Path(smk.output[0]).parent.parent
    cfg = smk.params.sample
    summary = generate_sample(
        out_dir,
        n_cases=cfg["n_cases"],
        seed=cfg["seed"],
        images_per_case=tuple(cfg["images_per_case"]),
    )
    log.info("sample written to %s: %s", out_dir, summary)


run(snakemake, main)
