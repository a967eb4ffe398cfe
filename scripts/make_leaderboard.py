"""Rule `leaderboard`: one offline HTML page with every task's sortable table."""

from pathlib import Path

from novabench.report.failures import Limits
from novabench.report.leaderboard import write_leaderboard
from novabench.rules import log, run, task_report_files


def main(smk):
    statistics, scores = task_report_files(smk.input)
    boards = write_leaderboard(
        statistics=statistics,
        scores=scores,
        dataset_manifest=Path(smk.input.dataset_manifest),
        figures=[Path(f) for f in smk.input.figures],
        out=Path(smk.output.html),
        git=smk.params.git,
        limits=Limits.from_config(smk.params.limits),
        left_out=smk.params.left_out,
    )
    log.info("leaderboard written for %s", ", ".join(b.task for b in boards) or "no task")


run(snakemake, main)
