"""The record of the judges' held-out figures lives in :mod:`novabench.judge_figures`
(outside this package, so that a score job, which looks its judge up there, has no judge
in its code); these names stay importable from here."""

from novabench.judge_figures import (  # noqa: F401
    NOT_VALIDATED,
    NOT_VERDICT_FIELDS,
    RECORD,
    RECORD_NAME,
    REMEASURE,
    figures_line,
    lookup,
    read_record,
    verdict_identity,
)
