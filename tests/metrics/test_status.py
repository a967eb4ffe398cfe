"""Status counts and rates: one set of keys for every task's scorer."""

from __future__ import annotations

import math

import pytest

from novabench.metrics.status import status_summary


def test_counts_and_rates_in_percent_of_images():
    summary = status_summary(["ok", "ok", "parse_error", "error", "ok", "refusal", "refusal", "ok"])
    assert summary == {
        "n_images": 8,
        "n_ok": 4,
        "n_parse_error": 1,
        "n_refusal": 2,
        "n_error": 1,
        "n_missing": 0,
        "parse_error_rate": 12.5,
        "refusal_rate": 25.0,
        "error_rate": 12.5,
        "missing_rate": 0.0,
    }


def test_localization_statuses_and_their_order():
    statuses = ["ok", "no_finding", "missing", "missing"]
    counted = ("ok", "no_finding", "parse_error", "error", "missing")
    summary = status_summary(statuses, counted, ("parse_error", "no_finding", "error"))
    assert list(summary) == [
        "n_images",
        "n_ok",
        "n_no_finding",
        "n_parse_error",
        "n_error",
        "n_missing",
        "parse_error_rate",
        "no_finding_rate",
        "error_rate",
    ]
    assert summary["no_finding_rate"] == 25.0 and summary["n_missing"] == 2


@pytest.mark.parametrize(("statuses", "known"), [(["ok"], False), ([], True)])
def test_rates_are_nan_without_statuses_or_images(statuses, known):
    summary = status_summary(statuses, known=known)
    assert summary["n_images"] == len(statuses)
    rates = ("parse_error_rate", "refusal_rate", "error_rate")
    assert all(math.isnan(summary[rate]) for rate in rates)


def test_a_status_outside_the_counted_ones_is_refused():
    with pytest.raises(ValueError, match="no_finding"):
        status_summary(["ok", "no_finding"])
