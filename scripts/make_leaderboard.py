"""Rule `leaderboard`: one offline HTML page with every task's sortable table."""

from pathlib import Path

from novabench.report.failures import Limits
from novabench.report.leaderboard import write_leaderboard
from novabench.rules import log, run


def main(smk):
    statistics = {Path(p).stem: Path(p) for p in smk.input.statistics}
    scores: dict[str, list[Path]] = {}
    for path in smk.input.scores:
        scores.setdefault(Path(path).parent.name, []).append(Path(path))
    boards = write_leaderboard(
        statistics=statistics,
        scores=scores,
        dataset_manifest=Path(smk.input.dataset_manifest),
        figures=[Path(f) for f in smk.params.figures],
        out=Path(smk.output.html),
        git=smk.params.git,
        limits=Limits.from_config(smk.params.limits),
    )
    log.info("leaderboard written for %s", ", ".join(b.task for b in boards) or "no task")


run(snakemake, main)
