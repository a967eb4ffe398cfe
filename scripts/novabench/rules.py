"""Glue between Snakemake's ``script:`` directive and the package.

Every rule script calls :func:`run`: it logs to the rule's log file and to stderr (which
Snakemake shows; progress lines that a bar shows there go to the log file only,
:mod:`novabench.progress`), and turns a
:class:`~novabench.errors.NovaError` into one line on stderr and in the log (no
traceback) and a non-zero exit, so Snakemake stops with the problem and its fix.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from novabench.errors import NovaError
from novabench.io import disk_full_error, is_disk_full
from novabench.plugins import load_plugins
from novabench.progress import not_shown_by_bar

log = logging.getLogger("novabench")


def run(snakemake: Any, body: Callable[[Any], Any]) -> None:
    log_file = str(snakemake.log[0]) if len(snakemake.log) else None
    terminal = logging.StreamHandler(sys.stderr)
    terminal.addFilter(not_shown_by_bar)
    handlers: list[logging.Handler] = [terminal]
    if log_file:
        handlers.append(logging.FileHandler(log_file, mode="w", encoding="utf-8"))
    logging.basicConfig(
        level=logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        handlers=handlers,
        force=True,
    )
    # A log file on a full disk must not add a "Logging error" traceback to the line.
    logging.raiseExceptions = False
    try:
        # The config's plug-ins register their backends, tasks and judges in this job too.
        load_plugins((getattr(snakemake, "config", None) or {}).get("plugins") or [])
        body(snakemake)
    except NovaError as exc:
        log.error("%s", exc)
        sys.exit(1)
    except OSError as exc:
        if not is_disk_full(exc):
            log.exception("unexpected failure")
            sys.exit(1)
        log.error("%s", disk_full_error(_written_folder(snakemake, exc)))
        sys.exit(1)
    except Exception:
        # A bug, not a user error: keep the traceback, in the log too.
        log.exception("unexpected failure")
        sys.exit(1)


def _written_folder(snakemake: Any, exc: OSError) -> Path:
    """The folder a failed write was in: the error's file, else the job's first output."""
    if exc.filename:
        return Path(str(exc.filename)).parent
    outputs = list(getattr(snakemake, "output", []) or [])
    return Path(str(outputs[0])).parent if outputs else Path.cwd()


def task_report_files(inputs: Any) -> tuple[dict[str, Path], dict[str, list[Path]]]:
    """A report rule's ``statistics`` (``<task>.csv``) and ``scores`` (``<task>/<name>.json``)
    inputs, keyed by task."""
    statistics = {Path(p).stem: Path(p) for p in inputs.statistics}
    scores: dict[str, list[Path]] = {}
    for path in inputs.scores:
        scores.setdefault(Path(path).parent.name, []).append(Path(path))
    return statistics, scores
