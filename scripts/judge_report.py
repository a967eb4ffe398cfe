"""Rule `judge_report`: every configured judge against the hand-labelled pairs."""

from pathlib import Path

from novabench.judges.validation import write_report
from novabench.rules import log, run


def main(smk):
    report = write_report(
        smk.params.judges,
        Path(smk.input.pairs[0]).parent,  # the folder of the hand-labelled sets
        Path(smk.output.json),
        Path(smk.output.md),
        cache_dir=Path(smk.params.cache),
    )
    for name, entry in report["judges"].items():
        for task, reason in entry["skipped"].items():
            log.info("judge %s (%s) skipped: %s", name, task, reason)
        log.info("judge %s: measured on %s", name, ", ".join(entry["tasks"]) or "nothing")


run(snakemake, main)
