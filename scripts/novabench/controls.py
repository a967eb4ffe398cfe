"""Controls as live checks: a control's scores bound what a working judge can give it.

An adapter whose answers are a control declares the bounds its scores must keep
(``Adapter.control_bounds``): ``at_least`` (the positive control, answering with the
reference, must score that, 100, on every metric where the reference scores 100) or
``at_most`` (the negative control must not beat that on those metrics). The metrics are
the task's ``Metric.ceiling`` ones (APs, hit rates, F1s, Top-k), where defined: a metric
the score file leaves undefined (None, e.g. Binary F1 without an abnormal reference) is not
checked. Scoring a control outside its bounds stops the score job with one line naming the
task, the judge and the metric, before anything is written: a broken or steered judge (or
reader) shows on every run that has a control. ``models.<name>.control_check: false``
scores anyway and records the failed check.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from novabench.errors import NovaError


def _defined(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def out_of_bounds(
    metrics: Mapping[str, Any], keys: list[str], bounds: Mapping[str, float]
) -> list[tuple[str, float, str]]:
    """(metric, value, what it must be) of every defined metric of ``keys`` outside
    ``bounds``; a small tolerance absorbs rounding."""
    failed = []
    for key in keys:
        value = metrics.get(key)
        if not _defined(value):
            continue
        if "at_least" in bounds and value < bounds["at_least"] - 1e-6:
            failed.append((key, float(value), f"at least {bounds['at_least']:g}"))
        if "at_most" in bounds and value > bounds["at_most"] + 1e-6:
            failed.append((key, float(value), f"at most {bounds['at_most']:g}"))
    return failed


def check_control(
    task: str,
    model: str,
    judge: str,
    metrics: Mapping[str, Any],
    task_metrics: Sequence[Any],
    bounds: Mapping[str, Any] | None,
) -> dict[str, Any] | None:
    """The control check of one score file (None for a model that is no control); raises
    NovaError when a metric is outside the bounds, unless ``bounds["stop"]`` is false."""
    if not bounds:
        return None
    limits = {k: float(v) for k, v in bounds.items() if k in ("at_least", "at_most")}
    metric_keys = [m.key for m in task_metrics if m.ceiling]
    checked = [k for k in metric_keys if _defined(metrics.get(k))]
    failed = out_of_bounds(metrics, metric_keys, limits)
    record = {
        "model": model,
        "judge": judge,
        "bounds": limits,
        "metrics": checked,
        "passed": not failed,
        "failed": [{"metric": k, "value": v, "must_be": m} for k, v, m in failed],
    }
    if failed and bounds.get("stop", True):
        key, value, must = failed[0]
        more = f" (and {len(failed) - 1} more metrics)" if len(failed) > 1 else ""
        raise NovaError(
            f"control {model} scored {key} {value:.1f} on {task} under judge {judge}, where it "
            f"must score {must}{more}: the judge or the scoring is broken or steered; no "
            "scores were written",
            f"inspect results/<tag>/verdicts/{task}/{judge}/{model}.jsonl; to score anyway "
            f"set models.{model}.control_check: false",
        )
    return record


def controls_note(payloads: Mapping[str, Mapping[str, Any]]) -> str:
    """One sentence on the controls checked among the score files of one task (``payloads``
    by model), for the table caption and the leaderboard."""
    checks = [p["control_check"] for p in payloads.values() if p.get("control_check")]
    if not checks:
        return "No control in this run: its scores are not checked against a control."
    parts = []
    for check in checks:
        bound = ", ".join(f"{k.replace('_', ' ')} {v:g}" for k, v in check["bounds"].items())
        state = "within" if check["passed"] else "OUTSIDE"
        parts.append(f"{check['model']} {state} its bound ({bound}) on {len(check['metrics'])}")
    return f"Controls checked on every run: {'; '.join(parts)} metrics."
