"""The judges' own held-out error, recorded by judge identity (``validation/judge_figures.json``).

A score computed through a judge is only as good as the judge. The judge report
(:mod:`novabench.judges.validation`) measures each judge against hand labels;
``novabench judge-report --record`` writes the held-out figures of every judge it measured
into the committed record (``validation.write_record``), one entry per (task, judge
identity):

- diagnosis judges: decided accuracy, false-match rate (of decided true non-matches) and
  missed rate (of decided true matches), the undecided share, accuracy as scored, each
  with its Wilson 95% interval;
- caption judges: the mean absolute difference of the judge's Clinical F1 per pair to the
  hand-labelled F1, over all pairs, over the pairs whose two captions it read fully
  (unread share 0), and over the rest.

Each figure is given per validation set (its file's sha256 and size) and pooled over the
sets. Only halves that are a measurement are recorded: held out and never used to tune a
judge (``ValidationSet.reported``). Every score file of a judged task looks its judge up
(:func:`lookup`): the figures where the record holds its identity, else a reason and
"judge not validated", never another judge's numbers. The identity is the judge's
``identity()`` without the fields that do not change a verdict (:data:`NOT_VERDICT_FIELDS`):
its kind and name, its code fingerprint, and the settings and tables behind its verdicts.
So any edit of a judge's code or tables is a judge the record does not hold until it is
re-measured.

This module only reads the record (score jobs and tables import it); measuring and
writing it is the judge report's.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from novabench import paths
from novabench.errors import NovaError

RECORD_NAME = "judge_figures.json"
RECORD = paths.VALIDATION / RECORD_NAME
#: The command that re-measures the configured judges and rewrites the record.
REMEASURE = "novabench judge-report --record"
#: Identity fields that change no verdict: the answers an LLM judge was served so far, how
#: many failed requests a run allows, and the judge's name in the config.
NOT_VERDICT_FIELDS = frozenset({"served", "max_failure_rate", "judge"})
NOT_VALIDATED = "judge not validated"


def verdict_identity(identity: Mapping[str, Any]) -> dict[str, Any]:
    """The part of a judge's identity that decides its verdicts, as JSON would read it; at
    every depth, since a cascade nests its stages' identities."""

    def kept(value: Any) -> Any:
        if isinstance(value, Mapping):
            return {k: kept(v) for k, v in value.items() if k not in NOT_VERDICT_FIELDS}
        return value

    return json.loads(json.dumps(kept(identity), sort_keys=True))


def read_record(path: Path = RECORD) -> list[dict[str, Any]]:
    """The record's entries; NovaError naming the file when it is unreadable."""
    try:
        body = json.loads(Path(path).read_text(encoding="utf-8"))
        entries = body["judges"]
        if not all(
            isinstance(e, dict) and {"task", "identity", "pooled"} <= set(e) for e in entries
        ):
            raise ValueError("an entry lacks task, identity or pooled")
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise NovaError(
            f"cannot read the judge figures {path} ({type(exc).__name__}: {exc})",
            f"restore it from the repository, or re-measure with `{REMEASURE}`",
        ) from None
    return entries


# --- looking a judge up ------------------------------------------------------------------------


def lookup(
    identity: Mapping[str, Any],
    task: str,
    path: Path | None = None,
    reader: str | None = None,
) -> dict[str, Any]:
    """What a score file records of its judge's error: ``validated`` true with the record's
    ``figures`` where the record holds the judge's identity on ``task``; else ``validated``
    false and the ``reason``. Figures measured end to end on raw answers come along under
    ``end_to_end`` when they were measured with ``reader`` (the fingerprint of the code that
    read the answers: :func:`novabench.answers.reader_fingerprint`); with another reader
    they are left out with the reason (``end_to_end_reason``)."""
    path = Path(path) if path is not None else RECORD
    if not path.is_file():
        reason = f"no judge figures at {path.name} (the record ships with the repository)"
        return {"validated": False, "reason": reason}
    wanted = verdict_identity(identity)
    for entry in read_record(path):
        if entry["task"] == task and entry["identity"] == wanted:
            figures = {"task": task, "pooled": entry["pooled"], "sets": entry.get("sets", [])}
            return {
                "validated": True,
                "record": path.name,
                "figures": figures,
                **_end_to_end(entry, reader),
            }
    return {
        "validated": False,
        "reason": (
            f"its identity is not in {path.name} (its code, tables or settings changed, or "
            f"it was never measured); re-measure with `{REMEASURE}`"
        ),
    }


def _end_to_end(entry: Mapping[str, Any], reader: str | None) -> dict[str, Any]:
    """The entry's end-to-end figures where they hold for ``reader``, else the reason."""
    measured = entry.get("end_to_end")
    if not measured:
        return {"end_to_end_reason": "not measured on raw answers"}
    if reader is None or measured["pooled"].get("reader") != reader:
        return {
            "end_to_end_reason": (
                "the answers were read by other code than the figures on raw answers were "
                f"measured with; re-measure with `{REMEASURE}`"
            )
        }
    return {"end_to_end": measured}


# --- one line for the tables ----------------------------------------------------------------------


def _percent(p: Mapping[str, Any], ci: bool = False, decimals: int = 1) -> str:
    if p.get("rate") is None:
        return "n/a"
    text = f"{100 * p['rate']:.{decimals}f}%"
    if ci and p.get("ci95"):
        low, high = p["ci95"]
        text += f" [{100 * low:.{decimals}f}-{100 * high:.{decimals}f}]"
    return text


def _points(mean: Mapping[str, Any]) -> str:
    return "n/a" if mean.get("mad") is None else f"{mean['mad']:.1f}"


def figures_line(judge: str, validation: Mapping[str, Any] | None) -> str:
    """``judge`` (its name and code) with its held-out figures in one line, or "judge not
    validated" where its score file found none (or predates the record)."""
    if not validation or not validation.get("validated"):
        return f"{judge}, {NOT_VALIDATED}"
    figures = validation["figures"]
    pooled, sets = figures["pooled"], figures.get("sets", [])
    named = ", ".join(s["set"] for s in sets)
    where = f"held-out pairs of {named}, n={pooled['n']}" if named else f"n={pooled['n']}"
    if figures["task"] == "diagnosis":
        text = (
            f"decided accuracy {_percent(pooled['decided_accuracy'], ci=True)}, false "
            f"matches {_percent(pooled['decided_false_match'])} and missed "
            f"{_percent(pooled['decided_missed'])} of decided non-matches and matches, "
            f"undecided {_percent(pooled['undecided'], decimals=0)}"
        )
    elif pooled.get("unread_known"):
        fully, rest = pooled["clinical_f1_read_fully"], pooled["clinical_f1_not_read_fully"]
        text = (
            f"Clinical F1 off by {_points(fully)} points per pair read fully (n={fully['n']}), "
            f"{_points(rest)} per pair with unread words (n={rest['n']})"
        )
    else:
        overall = pooled["clinical_f1"]
        text = f"Clinical F1 off by {_points(overall)} points per pair (n={overall['n']})"
    line = f"{judge}; held-out: {text} ({where})"
    if figures["task"] == "diagnosis":
        line += f"; {end_to_end_text(validation)}"
    return line


def end_to_end_text(validation: Mapping[str, Any]) -> str:
    """The judge's figures on raw answers, read by the pipeline and judged, in words."""
    measured = validation.get("end_to_end")
    if not measured:
        reason = validation.get("end_to_end_reason", "not measured on raw answers")
        return f"end to end on raw answers: not quoted ({reason})"
    pooled, named = measured["pooled"], ", ".join(s["set"] for s in measured["sets"])
    top1, top5 = pooled["top1"], pooled["top5"]
    return (
        f"end to end on raw answers ({named}, n={pooled['n']}): the reading agrees with a "
        f"person's on {_percent(pooled['reading']['status_and_top1'])} of answers, decided "
        f"accuracy Top-1 {_percent(top1['decided_accuracy'])} and Top-5 "
        f"{_percent(top5['decided_accuracy'])}, false matches "
        f"{_percent(top1['decided_false_match'])} and {_percent(top5['decided_false_match'])}, "
        f"undecided {_percent(top1['undecided'], decimals=0)} and "
        f"{_percent(top5['undecided'], decimals=0)}"
    )
