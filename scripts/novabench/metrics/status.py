"""Prediction-status counts, reported under the same keys by every task's scorer.

Each image's prediction has a status (``ok``, ``parse_error``, ``refusal``, ``error``,
``missing``, and for localization also ``no_finding``). Every scorer reports ``n_images``,
``n_<status>`` for each status it knows, and ``<status>_rate`` (percent of images) for the
failure statuses, so a table or a notebook reads one set of keys whatever the task. A
refusal (the model declined, see ``novabench.refusals``) is scored by every task exactly
as an ``error`` and counted apart from it.

``missing``: the image has no answer at all (not in a predictions file, or no record):
scored like an empty answer, counted apart from failed requests (``error``).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

MISSING = "missing"
STATUSES = ("ok", "parse_error", "refusal", "error", MISSING)
RATE_STATUSES = ("parse_error", "refusal", "error", MISSING)
# Statuses of a readable answer; every other status is a failure of some kind.
ANSWERED = ("ok", "no_finding")


def status_summary(
    statuses: Iterable[str],
    counted: Sequence[str] = STATUSES,
    rates: Sequence[str] = RATE_STATUSES,
    *,
    known: bool = True,
) -> dict[str, Any]:
    """``n_images``, ``n_<s>`` for each status in ``counted`` and ``<s>_rate`` for each in
    ``rates``, in percent of images.

    ``statuses`` holds one status per image. Rates are NaN when the statuses are not
    ``known`` (a scorer given none) or there is no image.
    """
    counts = Counter(statuses)
    unknown = sorted(set(counts) - set(counted), key=str)
    if unknown:
        raise ValueError(f"status(es) {unknown} are not among {list(counted)}")
    n_images = sum(counts.values())
    summary: dict[str, Any] = {"n_images": n_images}
    summary.update({f"n_{status}": counts[status] for status in counted})
    for status in rates:
        summary[f"{status}_rate"] = (
            100.0 * counts[status] / n_images if known and n_images else math.nan
        )
    return summary
