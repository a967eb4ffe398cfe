"""The live check of an LLM judge: hand-labelled pairs sent in every reading job.

A judge behind a service can change without notice (a new snapshot behind the same model
name, a stricter or broken deployment). So every reading job that builds an LLM judge, alone
or as a cascade's stage, also sends it a fixed sample of hand-labelled validation pairs
(``validation/``, the held-out halves of the sets of its task, drawn with a seed: the same
pairs every run) and measures its agreement with the hand labels:

- diagnosis: the share of pairs whose Top-1 verdict is the hand label (a failed or
  unreadable answer counts as a disagreement), in percent;
- captioning: the mean absolute difference, per pair, between the Clinical F1 of the
  judge's keywords and that of the hand keywords, in points (as the judge report measures
  it, :func:`novabench.judges.validation.caption_rows`).

Its requests are cached like every judge request, so a re-run costs nothing. When the job's
own answers were served by a model or system fingerprint that none of the check's answers
carries (the cache held the check from before a change of the served model), the check is
asked again, so that its figure is that of the model that judged. A figure past the bound
(``min_agreement``, ``max_f1_difference``) stops the reading job with one line, unless
``stop: false``; the check's answers are then dropped from the cache, so that a re-run
(the endpoint fixed) measures again.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from typing import Any

from novabench.errors import NovaError

#: The settings of ``judges.<name>.settings.live_check`` and their defaults.
DEFAULTS: dict[str, Any] = {
    "diagnosis_pairs": 40,
    "caption_pairs": 20,
    "seed": 0,
    "min_agreement": 75.0,
    "max_f1_difference": 25.0,
    "stop": True,
}
SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "diagnosis_pairs": {"type": "integer", "minimum": 0, "maximum": 1000},
        "caption_pairs": {"type": "integer", "minimum": 0, "maximum": 1000},
        "seed": {"type": "integer"},
        "min_agreement": {"type": "number", "minimum": 0, "maximum": 100},
        "max_f1_difference": {"type": "number", "minimum": 0, "maximum": 100},
        "stop": {"type": "boolean"},
    },
}
#: Per task: the setting of its sample size, and the measure of a validation set it draws on.
SAMPLE_SETTING = {"diagnosis": "diagnosis_pairs", "captioning": "caption_pairs"}
PAIR_MEASURE = {"diagnosis": "match", "captioning": "keywords"}


def resolve(settings: Mapping[str, Any] | None) -> dict[str, Any]:
    """The live check's settings with their defaults."""
    return {**DEFAULTS, **(settings or {})}


def sets_of(task: str) -> list[Any]:
    """The validation sets (``novabench.judges.validation.VALIDATION_SETS``) of ``task``
    whose pairs the judge is asked as they are (not the raw answers, read first)."""
    from novabench.judges.validation import MEASURES, VALIDATION_SETS

    measure = MEASURES[PAIR_MEASURE[task]]
    return [vset for vset in VALIDATION_SETS if vset.task == task and vset.measure is measure]


def set_files(task: str, folder: Any = None) -> list[str]:
    """The files the sample of ``task`` is drawn from (those that exist)."""
    from novabench.judges.validation import validation_folder

    base = validation_folder(folder)
    return [str(base / v.filename) for v in sets_of(task) if (base / v.filename).is_file()]


def sample_pairs(task: str, n: int, seed: int, folder: Any = None) -> list[dict[str, Any]]:
    """``n`` held-out pairs of the validation sets of ``task``, drawn with ``seed`` from
    all of them pooled in a fixed order: the same pairs every run while the sets stay."""
    from novabench.judges.validation import read_pairs, validation_folder

    if n <= 0:
        return []
    base = validation_folder(folder)
    pool = []
    for vset in sets_of(task):
        path = base / vset.filename
        if path.is_file():
            pairs = read_pairs(path, vset.fields)
            pool += [{**p, "set": vset.key} for p in pairs if p["split"] == "heldout"]
    pool.sort(key=lambda p: (p["set"], str(p["id"])))
    return random.Random(seed).sample(pool, min(n, len(pool)))


def check_prompts(judge: Any, pairs: Sequence[Mapping[str, Any]]) -> list[str]:
    """The distinct prompts the check of ``pairs`` asks ``judge`` (the cost estimate's)."""
    return judge.request_prompts(asked_pairs(judge.task, pairs))


def asked_pairs(task: str, pairs: Sequence[Mapping[str, Any]]) -> list[tuple[Any, str]]:
    """The pairs as the judge of ``task`` is asked about them."""
    if task == "diagnosis":
        return [([p["prediction"]], p["reference"]) for p in pairs]
    return [(p["reference"], p["prediction"]) for p in pairs]


def diagnosis_figure(judge: Any, pairs: Sequence[Mapping[str, Any]]) -> tuple[float, int]:
    """(agreement in percent, pairs) of the judge's Top-1 verdicts with the hand labels."""
    verdicts = judge.judge_ranked_many(asked_pairs("diagnosis", pairs))
    rows = zip(pairs, verdicts, strict=True)
    right = sum(_agrees(v, bool(p["match"])) for p, v in rows)
    return 100.0 * right / len(pairs), len(pairs)


def _agrees(verdict: Any, match: bool) -> bool:
    """Whether a Top-1 verdict is the hand label: a failed or undecided one never is (read
    as "no match" it would agree with every non-match pair)."""
    if verdict.failed or verdict.top1 not in ("match", "no_match"):
        return False
    return (verdict.top1 == "match") == match


def caption_figure(judge: Any, pairs: Sequence[Mapping[str, Any]]) -> tuple[float, int]:
    """(mean absolute Clinical F1 difference in points, pairs where both F1s are defined)."""
    from novabench.judges.validation import caption_rows, f1_difference

    diffs = [f1_difference(*row["f1"]["clinical"]) for row in caption_rows(judge, list(pairs))]
    defined = [d for d in diffs if d is not None]
    return (math.fsum(defined) / len(defined) if defined else math.nan), len(defined)


def _served(judge: Any, before: Mapping[tuple, int]) -> set[tuple[Any, Any]]:
    """The (served model, fingerprint) of the answers read since ``before``."""
    return {key for key, n in judge.served.items() if n > before.get(key, 0)}


def _measure(judge: Any, pairs: Sequence[Mapping[str, Any]]) -> tuple[float, int, set]:
    before = dict(judge.served)
    figure = diagnosis_figure if judge.task == "diagnosis" else caption_figure
    value, n = figure(judge, pairs)
    return value, n, _served(judge, before)


def run(judge: Any, settings: Mapping[str, Any]) -> dict[str, Any] | None:
    """Send ``judge`` (an LLM judge that has judged the job's answers) its check; the record
    of it (None when the sample size is 0). Raises NovaError past the bound unless
    ``stop: false``."""
    settings = resolve(settings)
    size = SAMPLE_SETTING[judge.task]
    try:
        pairs = sample_pairs(judge.task, int(settings[size]), settings["seed"])
    except NovaError as exc:  # no validation/ folder: an installed package without one
        raise NovaError(
            f"judges.{judge.name}: its live check cannot run: {str(exc).split('; fix:')[0]}",
            f"run from a checkout of the repository, or set "
            f"judges.{judge.name}.settings.live_check.{size}: 0",
        ) from None
    if not pairs:
        return None
    judged_by = {key for key in judge.served if key[0]}  # the job's own answers so far
    counts = dict(judge.counts)
    value, n, served = _measure(judge, pairs)
    stale = None
    if judged_by - served:  # answers of another served model: the cached check is not its
        stale = {"value": round(value, 2), "served": _served_names(served)}
        for prompt in check_prompts(judge, pairs):
            judge._forget(prompt)
        value, n, served = _measure(judge, pairs)
    record = _record(judge, settings, value, n, served, judged_by)
    # The cached check it replaced (its figure and served model): the drift, visible.
    record["refreshed"], record["stale"] = stale is not None, stale
    record["requests"] = {
        k: int(judge.counts[k] - counts.get(k, 0)) for k in ("requests", "cached", "sent")
    }
    if not record["passed"] and settings["stop"]:
        for prompt in check_prompts(judge, pairs):  # so that a re-run measures again
            judge._forget(prompt)
        raise NovaError(stop_line(record), fix(judge.name))
    return record


def _served_names(served: set[tuple[Any, Any]]) -> dict[str, list[str]]:
    return {
        "model": sorted({m for m, _ in served if m}),
        "system_fingerprint": sorted({f for _, f in served if f}),
    }


def _record(
    judge: Any, settings: Mapping[str, Any], value: float, n: int, served: set, judged_by: set
) -> dict[str, Any]:
    diagnosis = judge.task == "diagnosis"
    bound = float(settings["min_agreement" if diagnosis else "max_f1_difference"])
    passed = (value >= bound) if diagnosis else (value <= bound)
    record = {
        "judge": judge.name,
        "task": judge.task,
        "measure": "top1_agreement" if diagnosis else "clinical_f1_difference",
        "unit": "%" if diagnosis else "points",
        "value": None if math.isnan(value) else round(value, 2),
        "n_pairs": n,
        "bound": bound,
        "passed": bool(passed),
        "seed": settings["seed"],
        "served": _served_names(served),
        # Served models of the job's own answers that the check's answers do not carry.
        "judged_by_others": sorted({m for m, _ in judged_by - served if m}),
    }
    record["line"] = summary_line(record)
    return record


def summary_line(record: Mapping[str, Any]) -> str:
    """The check in words, as tables and the leaderboard print it beside the judge."""
    value = "n/a" if record["value"] is None else f"{record['value']:.1f}"
    if record["measure"] == "top1_agreement":
        what = f"agreement {value}% with hand labels (bound >= {record['bound']:g}%)"
    else:
        what = (
            f"Clinical F1 {value} points from hand labels per pair (bound <= {record['bound']:g})"
        )
    served = ", ".join(record["served"]["model"] + record["served"]["system_fingerprint"])
    mark = "" if record["passed"] else ", BELOW THE BOUND"
    return (
        f"live check of {record['judge']}: {what} on {record['n_pairs']} pairs, "
        f"served {served or 'unknown'}{mark}"
    )


def stop_line(record: Mapping[str, Any]) -> str:
    return (
        f"judges.{record['judge']} ({record['task']}): {summary_line(record)}; "
        "no verdicts were written"
    )


def fix(name: str) -> str:
    return (
        f"check the judge's endpoint and served model; to score anyway (recorded as below "
        f"the bound) set judges.{name}.settings.live_check.stop: false"
    )
