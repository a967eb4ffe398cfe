"""The statistics and Markdown the judge report's measures share: proportions with their
Wilson intervals, a three-valued judge's figures against hand labels, and the tables."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from novabench.errors import NovaError

SPLITS = ("heldout", "tune")


def json_lines(path: Path) -> Iterator[tuple[int, Any]]:
    """(line number, value) of each non-empty line; a line that is no JSON stops with its
    number."""
    for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            yield number, json.loads(line)
        except json.JSONDecodeError as exc:
            raise NovaError(f"{path}:{number} is not JSON ({exc.msg})", "fix that line") from None


def wilson(k: int, n: int) -> list[float] | None:
    """Wilson score 95% interval of k/n (scipy's binomtest), None for n = 0."""
    if n == 0:
        return None
    from scipy.stats import binomtest

    ci = binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
    return [float(ci.low), float(ci.high)]


def proportion(k: int, n: int) -> dict[str, Any]:
    return {"k": k, "n": n, "rate": k / n if n else None, "ci95": wilson(k, n)}


def three_valued(rows: Sequence[tuple[Mapping[str, Any], str]]) -> dict[str, Any]:
    """The figures of (pair, top-1 verdict) rows that the undecided verdict brings: the
    undecided share; among decided pairs accuracy, false-match rate (of decided true
    non-matches) and missed rate (of decided true matches); and the bracket check: the
    hand-labelled share of true matches against the share scored as matches (undecided =
    no match) and the upper bound (undecided = match)."""
    n = len(rows)
    decided = [(p, v) for p, v in rows if v != "undecided"]
    undecided = n - len(decided)
    right = sum((v == "match") == bool(p["match"]) for p, v in decided)
    positives = sum(bool(p["match"]) for p, _ in decided)
    false_match = sum(v == "match" and not p["match"] for p, v in decided)
    missed = sum(v == "no_match" and bool(p["match"]) for p, v in decided)
    matched = sum(v == "match" for _, v in rows)
    hand = sum(bool(p["match"]) for p, _ in rows)
    bracket = {
        "hand": hand / n if n else None,
        "scored": matched / n if n else None,
        "upper": (matched + undecided) / n if n else None,
    }
    bracket["inside"] = None if not n else matched <= hand <= matched + undecided
    return {
        "undecided": proportion(undecided, n),
        "decided_accuracy": proportion(right, len(decided)),
        "decided_false_match": proportion(false_match, len(decided) - positives),
        "decided_missed": proportion(missed, positives),
        "bracket": bracket,
    }


def percent(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.1f}%"


def k_of_n(p: Mapping[str, Any]) -> str:
    """A proportion's count as every report and page prints it: "k/n"."""
    return f"{p['k']}/{p['n']}"


def share(p: dict[str, Any]) -> list[str]:
    ci = p["ci95"]
    interval = "n/a" if ci is None else f"{percent(ci[0])} to {percent(ci[1])}"
    return [percent(p["rate"]), k_of_n(p), interval]


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    def cell(value: Any) -> str:
        return str(value).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]


def bracket_line(bracket: Mapping[str, Any]) -> str:
    """Whether the hand-labelled share of true matches lies in the judge's bracket."""
    if bracket["inside"] is None:
        return "No pairs: no bracket to check."
    verdict = "yes" if bracket["inside"] else "no"
    return (
        f"Bracket check: the hand-labelled share of true matches, "
        f"{percent(bracket['hand'])}, lies between the share scored as matches "
        f"(undecided = no match), {percent(bracket['scored'])}, and the upper bound "
        f"(undecided = match), {percent(bracket['upper'])}: {verdict}."
    )
