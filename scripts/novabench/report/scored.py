"""Score files under ``results/<tag>/scores/`` that the current config does not plan.

Separate runs with different ``models:`` lists share one results folder; the tables and
the leaderboard show the config's models (``reporting.models: config``) or every model
scored there (``all``). Either way a score file that is not shown is named, never left
out without a word.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

# What the statistics and tables jobs read of a model, beside its score file: its per-image
# table and the verdicts of the task's judge (`{judge}`: its name, or the task's reader).
COMPANIONS = ("scores/{task}/{model}.images.csv", "verdicts/{task}/{judge}/{model}.jsonl")


@dataclass(frozen=True)
class Scored:
    """One score file of a model the config does not run."""

    task: str
    model: str
    missing: tuple[str, ...]  # companion files absent: it cannot be shown

    @property
    def score_file(self) -> str:
        return f"scores/{self.task}/{self.model}.json"


def scored_elsewhere(
    results_dir: Path, tasks: Mapping[str, str], planned: Iterable[tuple[str, str]]
) -> list[Scored]:
    """Score files of ``tasks`` (task -> the ``{judge}`` of its verdict files) under
    ``results_dir`` (``results/<tag>``) whose (task, model) is not ``planned``, sorted;
    human-rater files (``rater-*``) are the dataset's."""
    planned = set(planned)
    found = []
    for task, judge in tasks.items():
        for path in sorted((Path(results_dir) / "scores" / task).glob("*.json")):
            model = path.name.removesuffix(".json")
            if model.startswith("rater-") or (task, model) in planned:
                continue
            names = [name.format(task=task, judge=judge, model=model) for name in COMPANIONS]
            missing = tuple(name for name in names if not (Path(results_dir) / name).is_file())
            found.append(Scored(task, model, missing))
    return found


def shown_elsewhere(scored: Sequence[Scored], include: bool) -> list[Scored]:
    """The files the report adds to the config's models: all complete ones if ``include``."""
    return [s for s in scored if include and not s.missing]


def left_out_line(scored: Sequence[Scored], include: bool) -> str | None:
    """One line naming every score file the report does not show, and why; None if none."""
    left = [s for s in scored if not include or s.missing]
    if not left:
        return None
    names = ", ".join(
        s.score_file + (f" (lacks {' and '.join(s.missing)})" if include else "") for s in left
    )
    why = (
        "they lack files the report reads"
        if include
        else "their models are not in this config's models:; reporting.models: all shows them"
    )
    return f"Not shown: {len(left)} score file(s) under this results folder, {why}: {names}."


def unreadable(results_dir: Path, shown: Sequence[Scored]) -> list[Scored]:
    """The shown files of earlier runs whose prediction files are gone: a judge other
    than the task's own (reporting.agreement_judges) has no answers of theirs to read."""
    return [
        s
        for s in shown
        if not (Path(results_dir) / "predictions" / s.task / f"{s.model}.jsonl").is_file()
    ]


def agreement_left_out_line(left: Sequence[Scored]) -> str | None:
    """One line naming the models judge agreement leaves out (:func:`unreadable`)."""
    if not left:
        return None
    names = ", ".join(f"{s.task}/{s.model}" for s in left)
    return (
        f"Judge agreement leaves out {len(left)} model(s) of earlier runs whose prediction "
        f"files are gone, so that the agreement judges cannot read them: {names}."
    )


def own_verdicts_lookahead(shown: Sequence[Scored], judges: Mapping[str, str]) -> str:
    """A lookahead for the `read` rule's ``{task}`` wildcard that refuses the verdict
    files of the shown models of earlier runs by their task's own judge (``judges``: task
    -> the ``{judge}`` of its verdict files): those are read as they are, like their
    score files; other judges' verdicts on them are made from their predictions."""
    import re

    stems = sorted({f"{s.task}/{judges[s.task]}/{s.model}" for s in shown if s.task in judges})
    if not stems:
        return ""
    return rf"(?!(?:{'|'.join(map(re.escape, stems))})\.(?:jsonl|summary\.json)$)"


def recorded_adapters(results_dir: Path, scored: Sequence[Scored]) -> dict[str, dict[str, str]]:
    """``{model: {"adapter": ...}}`` as each one's prediction summaries record it (the
    report groups controls by adapter); a model without a readable summary is a model."""
    import json

    adapters: dict[str, dict[str, str]] = {}
    for s in scored:
        path = Path(results_dir) / "predictions" / s.task / f"{s.model}.summary.json"
        try:
            adapter = json.loads(path.read_text(encoding="utf-8")).get("adapter")
        except (OSError, ValueError, AttributeError):
            adapter = None
        if isinstance(adapter, str) and s.model not in adapters:
            adapters[s.model] = {"adapter": adapter}
        adapters.setdefault(s.model, {"adapter": "unknown"})
    return adapters
