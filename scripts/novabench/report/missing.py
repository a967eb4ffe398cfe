"""Why the report shows "–" instead of a value, in words, from what the score file says.

A metric has no value in a row because the score file says why it was not computed
(``{"status": "unavailable" or "disabled", "reason": ...}`` under the key the metric
names as ``computed_by``, e.g. BERT F1 without its encoder), because it is undefined (null:
no image it could be computed on), or because the score file does not hold it at all; a
failure share is missing where the score file counts no answer statuses (a human rater's
boxes are not answers).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from novabench.tasks import Metric

NO_SCORE_FILE = "no score file for this entry"
NOT_IN_SCORE_FILE = "not in this entry's score file (its scorer does not compute it)"
UNDEFINED = "undefined for this entry: no image it can be computed on (e.g. no readable answer)"
NO_STATUSES = "the score file counts no answer statuses (scored without them)"
RATER_STATUSES = "a human rater's boxes are not model answers: no answer statuses to count"
NOT_COMPUTED = ("unavailable", "disabled")


def unavailable_reason(value: Any, statuses: tuple[str, ...] = ("unavailable",)) -> str | None:
    """The reason a score file gives for a metric it did not compute, without the fix
    (the score file keeps it; "" where it gives none); None for a value whose status is
    not one of ``statuses``."""
    if not (isinstance(value, Mapping) and value.get("status") in statuses):
        return None
    return str(value.get("reason") or "").split("; fix:")[0].strip().rstrip(".")


def metric_reason(payload: Mapping[str, Any] | None, metric: Metric) -> str | None:
    """Why ``metric`` has no value in a score file; None where it has one."""
    if payload is None:
        return NO_SCORE_FILE
    metrics = payload.get("metrics") or {}
    value = metrics.get(metric.key)
    if isinstance(value, int | float) and not isinstance(value, bool) and not math.isnan(value):
        return None
    if metric.computed_by:
        reason = unavailable_reason(metrics.get(metric.computed_by), NOT_COMPUTED)
        if reason is not None:
            stated = reason or "the score file says no more"
            return stated if stated.startswith(metric.label) else f"not computed: {stated}"
    if metric.key not in metrics:
        return NOT_IN_SCORE_FILE
    return unavailable_reason(value, NOT_COMPUTED) or metric.when_undefined or UNDEFINED


def share_reason(group: str) -> str:
    """Why an entry of ``group`` has no failure shares."""
    from novabench.report.inputs import GROUP_HUMAN

    return RATER_STATUSES if group == GROUP_HUMAN else NO_STATUSES
