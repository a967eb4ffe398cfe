"""How much of each model's run failed, beside its metrics in every table.

Read from the status counts every scorer writes (``novabench.metrics.status``): a status
``X`` is any key pair ``n_X`` / ``X_rate`` of a score file's metrics, so statuses added
later (e.g. ``refusal``) show without a change here. "Answered" is the share of images with
a readable answer (``ok``, and ``no_finding`` for localization); every other status is a
kind of failure, shown as its own share of images.

A model is marked (``MARK``) when fewer than ``reporting.min_answered`` of the images have a
readable answer, or more than ``reporting.max_error_rate`` have none at all (``error``,
``missing``: failures of the run rather than of the model), or when answers went over a
task's cap (:func:`cap_reason`: volume must not buy a metric); a marked model is never bold.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from novabench.metrics.status import ANSWERED

# Statuses with no answer at all: the request failed, or the answer is not on file.
NO_ANSWER = ("error", "missing")
# Column order and headers of the statuses known today; others follow, by name.
STATUS_LABELS = {
    "parse_error": "Parse errors",
    "refusal": "Refusals",
    "error": "Errors",
    "missing": "Missing",
    "no_finding": "No finding",
}
MARK = "†"
ANSWERED_KEY = "answered"


@dataclass(frozen=True)
class Limits:
    """``reporting.min_answered`` and ``reporting.max_error_rate``, fractions of images."""

    # The defaults of config/config.yaml (config/README.md says why these).
    min_answered: float = 0.95
    max_error_rate: float = 0.02

    @classmethod
    def from_config(cls, reporting: Mapping[str, Any] | None) -> Limits:
        reporting = reporting or {}
        return cls(
            float(reporting.get("min_answered", cls.min_answered)),
            float(reporting.get("max_error_rate", cls.max_error_rate)),
        )

    def legend(self) -> str:
        """The one-line legend of ``MARK``."""
        return (
            f"{MARK} fewer than {share_text(100 * self.min_answered)} of the images answered "
            f"(reporting.min_answered), more than {share_text(100 * self.max_error_rate)} "
            "without an answer (reporting.max_error_rate), or answers over a task's cap (the "
            "CSV's flag column says which): never shown as best."
        )


def statuses(metrics: Mapping[str, Any]) -> list[str]:
    """The statuses a score file counts, known ones first in ``STATUS_LABELS`` order."""
    found = {k[2:] for k in metrics if k.startswith("n_") and f"{k[2:]}_rate" in metrics}
    found -= set(ANSWERED) - {"no_finding"}  # "ok" is the answered share itself
    known = [s for s in STATUS_LABELS if s in found]
    return known + sorted(found - set(known))


def status_label(status: str) -> str:
    return STATUS_LABELS.get(status, status.replace("_", " ").capitalize())


def shares(metrics: Mapping[str, Any]) -> dict[str, float]:
    """Percent of images answered and per status; NaN without counts, or when the scorer
    was given no statuses (its rates are null: e.g. ``score_localization`` without them)."""
    n_images = metrics.get("n_images")
    found = statuses(metrics)
    if (
        not isinstance(n_images, int | float)
        or not n_images
        or any(_undefined(metrics[f"{s}_rate"]) for s in found)
    ):
        return {ANSWERED_KEY: math.nan}
    count = lambda status: float(metrics.get(f"n_{status}") or 0)  # noqa: E731
    out = {ANSWERED_KEY: 100.0 * sum(count(s) for s in ANSWERED) / n_images}
    out.update({s: 100.0 * count(s) / n_images for s in found})
    return out


def _undefined(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def flag_reason(values: Mapping[str, float], limits: Limits) -> str | None:
    """Why a model's shares break the limits, or None (also None without counts)."""
    answered = values.get(ANSWERED_KEY, math.nan)
    if math.isnan(answered):
        return None
    # A hair of slack: 100 * n / n is exact, but a fraction limit like 0.95 is not.
    if answered < 100 * limits.min_answered - 1e-9:
        return f"{share_text(answered)} answered < {share_text(100 * limits.min_answered)}"
    no_answer = sum(values.get(s, 0.0) for s in NO_ANSWER)
    if no_answer > 100 * limits.max_error_rate + 1e-9:
        return (
            f"{share_text(no_answer)} without an answer > {share_text(100 * limits.max_error_rate)}"
        )
    return None


def cap_reason(metrics: Mapping[str, Any], capped_by: str | None) -> str | None:
    """Why a model is marked for volume: a score file's ``n_capped`` answers went over the
    task's cap (``capped_by``: the setting, ``Task.capped_by``), or None."""
    n_capped = metrics.get("n_capped")
    if not isinstance(n_capped, int | float) or not n_capped > 0:
        return None
    return f"{n_capped:.0f} answer(s) over {capped_by or 'the task cap'}"


def failure_columns(metrics_by_model: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """The status columns of a table: every status some model's score file counts."""
    seen: dict[str, None] = {}
    for metrics in metrics_by_model.values():
        seen.update(dict.fromkeys(statuses(metrics)))
    known = [s for s in STATUS_LABELS if s in seen]
    return [ANSWERED_KEY, *known, *sorted(set(seen) - set(known))]


def share_text(value: float) -> str:
    """A percentage that never rounds a failure away: 0.6 -> "<1%", 99.4 -> ">99%"."""
    if value is None or math.isnan(value):
        return "–"
    if 0 < value < 1:
        return "<1%"
    if 99 < value < 100:
        return ">99%"
    return f"{value:.0f}%"


def failure_summary(values: Mapping[str, float], columns: Sequence[str]) -> str:
    """One cell for the across-task summary: "67% (33% missing)"."""
    answered = share_text(values.get(ANSWERED_KEY, math.nan))
    failures = [
        f"{share_text(values[s])} {status_label(s).lower()}"
        for s in columns
        if s not in (ANSWERED_KEY, "no_finding") and values.get(s, 0) > 0
    ]
    return f"{answered} ({', '.join(failures)})" if failures else answered
