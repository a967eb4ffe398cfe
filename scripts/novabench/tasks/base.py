"""What a task is: the one place that says how a NOVA task is asked, read, scored and reported.

A task is an object of a :class:`Task` subclass. Prediction, scoring, statistics, tables,
figures and config checks ask the registry (:func:`get_task`) for the task and call these
hooks; none of them branches on a task's name or imports a task's module. The built-in
tasks are the subfolders of this package whose ``__init__`` assigns ``TASK`` (found by
reading the files, :func:`builtin_task_names`); each is the module :func:`task_module`
names, loaded on first use, whose ``TASK`` is its :class:`Task` object. So a module's
static imports never pull in another task's code (what a job's code fingerprint relies
on). A plug-in outside the package (the config's ``plugins:``) or a test registers a task
with :func:`register_task`.

A task owns everything about it: its block of the configuration (:meth:`Task.config_schema`,
merged into the config schema when the configuration is read, novabench.config), its
default prompt and judge, and the text of its figures' captions in the HTML report
(:attr:`Task.figure_captions`).

Hooks take plain data (dataset rows, prediction records, per-image tables), so they can
be called from a notebook as well as from the pipeline.
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any, ClassVar, Protocol

import numpy as np
import pandas as pd

from novabench.errors import ConfigError


@dataclass(frozen=True)
class Metric:
    """One metric of a task's score file, as the report uses it."""

    key: str  # the key in the score file and the statistics table
    label: str  # the column header
    better: str | None = "higher"  # "higher", "lower" or None (no best, e.g. Entropy)
    decimals: int = 1
    percent: bool = True  # on a 0-100 scale
    headline: bool = False  # one of the task's columns in the across-task summary
    table: bool = True  # a column of the task's table (else only in the statistics)
    interval: bool = True  # whether a bootstrap CI is defined
    figure: bool = True  # a panel of the task's metric figure (a bound is no panel of its own)
    #: The reference as an answer scores 100 on it: what a control's bounds are checked on
    #: (novabench.controls).
    ceiling: bool = False
    # Largest |bootstrap point estimate - score file| accepted, relative to max(1, |value|).
    tolerance: float = 1e-6
    # The score file's metrics key that records what computed this metric and, where it
    # was not computed, why ({"status": "unavailable" or "disabled", "reason": ...}).
    computed_by: str | None = None
    # Why the score file can hold null for this metric, where the general reason (no image
    # it can be computed on) would mislead; the report's "–" says it.
    when_undefined: str | None = None

    @property
    def arrow(self) -> str:
        return {"higher": "↑", "lower": "↓"}.get(self.better or "", "")


@dataclass(frozen=True)
class AnswerContext:
    """What reading one answer needs besides its text."""

    width: int
    height: int
    box_format: str | None = None
    # (width, height) of the frame a local model resized the image to, where known.
    frame_size: tuple[int, int] | None = None
    # The task's reading options (:meth:`Task.reading_options`), e.g. a cap on boxes.
    options: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Parsed:
    """A read answer: ``status`` ok / no_finding / parse_error, the parsed value, why not.

    (``refusal`` and ``error`` are decided before the task reads the answer.)"""

    status: str
    value: dict[str, Any] | None = None
    error: str | None = None


@dataclass(frozen=True)
class ScoringContext:
    """Everything a scorer may need beyond the dataset and the answers: the reading
    stage's verdicts (``verdicts``: filename -> the judge's per-image output; ``judge``:
    the identity of the judge that gave them; ``notes``: :meth:`Task.reading_notes`), the
    task's options and the WordNet folder. Scoring runs no judge."""

    verdicts: Mapping[str, Any] = field(default_factory=dict)
    judge: Mapping[str, Any] | None = None
    notes: Mapping[str, Any] = field(default_factory=dict)
    options: Mapping[str, Any] = field(default_factory=dict)
    nltk_data: Path | None = None


class ScoredEntry(Protocol):
    """One scored model or rater as the report reads it (``novabench.report.inputs.Entry``)."""

    name: str
    scores: dict[str, Any]  # the score file
    per_image: pd.DataFrame  # its per-image table, in dataset order
    verdicts: Path | None  # its verdict file, what was read of its answers (None: a rater)
    extra: dict[str, Any]  # per-entry inputs a task computes once and reuses


class Answers:
    """A model's answers as read (``novabench.reading``: ``{filename, status, error,
    read}`` each, or verdict records) by filename; an image without one is missing."""

    MISSING: ClassVar[dict[str, Any]] = {"status": "missing", "read": None}

    def __init__(self, records: Sequence[Mapping[str, Any]]):
        self.by_filename = {r["filename"]: r for r in records}

    def get(self, filename: str, key: str, default: Any = None) -> tuple[Any, str]:
        """(the read ``key`` of the image's answer or ``default``, the answer's status)."""
        record = self.by_filename.get(filename, self.MISSING)
        return (record.get("read") or {}).get(key, default), record["status"]


class Task:
    """Base class of every task. Subclasses set the class attributes and the hooks."""

    name: ClassVar[str]
    title: ClassVar[str]  # e.g. "Anomaly localization" (table titles)
    #: Where the task comes in the clinical workflow (tables, reports, the registry's order).
    position: ClassVar[int] = 100
    #: The prompt template when the config names none (relative to the workflow folder, or
    #: absolute: a plug-in's prompt beside its module); None: config/prompts/<name>-v1.txt.
    default_prompt: ClassVar[str | None] = None
    #: JSON schema of the task's own keys of ``tasks.<name>`` (``enabled``, ``prompt`` and,
    #: for a judged task, ``judge`` are every task's): merged into the config schema.
    settings_schema: ClassVar[Mapping[str, Any]] = {}
    #: reStructuredText of the HTML report's figure captions, by figure family: ``metrics``
    #: (a sentence after the shared caption), ``breakdown`` (the metric broken down, as
    #: the axis says it) and each of :attr:`figures`. ``{dataset}`` is the dataset's label.
    figure_captions: ClassVar[Mapping[str, str]] = {}
    #: Human raters' annotations of the dataset are scored on this task as a reference.
    scores_raters: ClassVar[bool] = False
    #: A model's audit sheet (``models.<name>.audit``) audits this task's judge.
    audited: ClassVar[bool] = False
    caption: ClassVar[str]  # what the table's metrics are (LaTeX allowed)
    metrics: ClassVar[tuple[Metric, ...]]
    # Dataset columns the prompt, the gold control and the scorer read.
    reference_columns: ClassVar[tuple[str, ...]]
    # Text columns an image must have (non-empty) to be asked and scored for this task; an
    # image without one is excluded from this task only (dataset.missing_reference).
    required_references: ClassVar[tuple[str, ...]] = ()
    uses_image: ClassVar[bool] = True  # False: a text-only task (no image sent)
    needs_box_format: ClassVar[bool] = False  # answers are boxes in a declared convention
    needs_judge: ClassVar[bool] = False  # scored through a judge (tasks.<name>.judge)
    #: The judge of a judged task when no config names one (``{name, kind, settings}``: an
    #: installed package outside a checkout, a notebook); offline, so it costs nothing.
    default_judge: ClassVar[Mapping[str, Any] | None] = None
    # The judge's per-image labels that judge agreement compares (the ``labels`` of the
    # verdict files; none: no agreement).
    agreement_labels: ClassVar[tuple[str, ...]] = ()
    # Task-specific figure families beyond the metric bars (results/<tag>/figures/<task>_<family>):
    # "breakdown" is drawn by the report, any other by draw_figure.
    figures: ClassVar[tuple[str, ...]] = ()
    # The task whose predictions this one can read as an input (diagnosis: captioning).
    upstream_task: ClassVar[str | None] = None
    # Words this task's settings give a meaning of their own where a model name goes
    # (word -> that meaning): no model may be called so.
    reserved_model_names: ClassVar[Mapping[str, str]] = {}
    # Tokens of an answer, for the cost estimate until answers were measured.
    answer_tokens: ClassVar[int] = 100
    # The `{judge}` of a task's verdict files when it has no judge (what reading it reads).
    reader: ClassVar[str] = "answers"

    #: The modules of this task's folder behind each pipeline stage (``predict``,
    #: ``parse``, ``read``, ``score``, ``statistics``, ``figures``), named relative to the
    #: folder. The task's ``__init__`` imports none of them; its hooks load them with
    #: :meth:`stage`. So each stage's jobs fingerprint that stage's code only
    #: (novabench.code_fingerprint): editing the figures re-draws figures, editing the
    #: scorer re-scores, editing the parser (``parse``, run by the reading jobs and by a
    #: prediction job that reads this task's answers upstream) re-reads and re-predicts
    #: nothing.
    stage_modules: ClassVar[Mapping[str, tuple[str, ...]]] = {}

    def stage(self, module: str) -> ModuleType:
        """Module ``module`` of this task's folder; it must be one of ``stage_modules``, or
        no job's fingerprint would cover it."""
        if not any(module in modules for modules in self.stage_modules.values()):
            raise ValueError(
                f"{type(self).__name__}.stage_modules names no {module!r}: declare it under "
                "the stage that runs it, so that its jobs re-run when it changes"
            )
        return importlib.import_module(f"{type(self).__module__}.{module}")

    def code_modules(self, *stages: str) -> tuple[str, ...]:
        """The roots of the code fingerprints of one or more stages (``report`` for tables
        and the leaderboard, which read the task's definition only)."""
        package = type(self).__module__
        modules = [m for stage in stages for m in self.stage_modules.get(stage, ())]
        return (package, *(f"{package}.{m}" for m in dict.fromkeys(modules)))

    @property
    def category(self) -> str:
        """The HTML report's category."""
        return self.name.capitalize()

    # --- configuration -----------------------------------------------------------------

    def config_schema(self) -> dict[str, Any]:
        """The JSON schema of ``tasks.<name>``: what every task has, then its own keys."""
        properties: dict[str, Any] = {
            "enabled": {"type": "boolean", "default": True},
            "prompt": {
                "$ref": "#/$defs/prompt",
                "default": self.default_prompt or f"config/prompts/{self.name}-v1.txt",
            },
        }
        if self.needs_judge:
            judge: dict[str, Any] = {"$ref": "#/$defs/name"}
            if self.default_judge is not None:
                judge["default"] = self.default_judge["name"]
            properties["judge"] = judge
        properties.update(self.settings_schema)
        return {
            "type": "object",
            "additionalProperties": False,
            "default": {},
            "properties": properties,
        }

    def options(self, task_config: Mapping[str, Any]) -> dict[str, Any]:
        """The scoring options of ``tasks.<name>`` (only these re-run scoring on change)."""
        return {}

    #: The setting that caps an answer's volume, named where a model went over it (the
    #: score file's ``n_capped``); None: the task caps nothing.
    capped_by: str | None = None

    def reading_options(self, task_config: Mapping[str, Any]) -> dict[str, Any]:
        """The options of ``tasks.<name>`` that reading an answer uses (``AnswerContext.
        options``; a change re-reads that task), defaults filled in."""
        return {}

    def capped(self, read: Any, options: Mapping[str, Any]) -> Any:
        """A value read elsewhere (a record's ``parsed``) within the caps that :meth:`parse`
        applies under ``options``; as it is by default."""
        return read

    def upstream_model(self, task_config: Mapping[str, Any]) -> str | None:
        """The model whose ``upstream_task`` predictions this task reads, if any."""
        return None

    def dataset_needs(self) -> dict[str, Any]:
        """What the task reads of the dataset, as plain data for the dataset build."""
        return {
            "columns": list(self.reference_columns),
            "required": list(self.required_references),
            "uses_image": self.uses_image,
        }

    def missing_references(self, reference: Mapping[str, Any]) -> list[str]:
        """The required reference columns that are empty in one dataset row."""
        from novabench.dataset.references import missing_references

        return missing_references(reference, self.required_references)

    def scored_rows(self, frame: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
        """(the rows this task asks and scores, the filenames it excludes for lack of a
        reference); the dataset build counts the same exclusions in its manifest."""
        if not self.required_references or frame.empty:
            return frame, []
        rows = frame[list(self.required_references)].to_dict(orient="records")
        excluded = [bool(self.missing_references(row)) for row in rows]
        mask = pd.Series(excluded, index=frame.index)
        return frame[~mask].reset_index(drop=True), list(frame.loc[mask, "filename"])

    # --- prediction --------------------------------------------------------------------

    def prompt_inputs(self, row: Any, upstream: Mapping[str, Any] | None) -> dict[str, Any]:
        """Template values of the prompt for one dataset row (``width`` and ``height``
        are always there); ``upstream`` maps filenames to the upstream model's parsed answer
        (None where it failed) when the config names an upstream model."""
        return {}

    def gold_answer(self, reference: Mapping[str, Any]) -> str:
        """The reference as a model would write it (the positive control answers this)."""
        raise NotImplementedError

    def parse(self, raw: str, context: AnswerContext) -> Parsed:
        """Read a model's answer text; never raises on any text."""
        raise NotImplementedError

    def parsed_problem(self, parsed: dict[str, Any]) -> str | None:
        """Why an ``ok`` record's ``parsed`` value (e.g. written by another harness) cannot
        be scored, or None."""
        return None

    # --- reading -------------------------------------------------------------------------

    def judge_answers(self, frame: pd.DataFrame, answers: Answers, judge: Any) -> list[dict]:
        """Per row of ``frame``, in order: ``{"verdict": the judge's per-image output
        (plain JSON data; None without a judge), "labels": {agreement label: value}}``.
        The reading stage calls this; scoring counts what it stored."""
        return [{"verdict": None, "labels": {}} for _ in range(len(frame))]

    def verdict_counts(self, verdicts: Sequence[Any]) -> dict[str, int]:
        """How often each value of the judge's verdicts occurs (the verdict summary's
        ``verdict_counts``; ``verdicts``: :meth:`judge_answers`' ``verdict`` per image,
        None where none was given); none without a judge."""
        return {}

    def reading_notes(self, judge: Any) -> dict[str, Any]:
        """What scoring needs to know of the judge besides its verdicts (the verdict
        summary's ``notes``)."""
        return {}

    # --- scoring -------------------------------------------------------------------------

    def score(
        self, frame: pd.DataFrame, answers: Answers, context: ScoringContext
    ) -> tuple[dict[str, Any], pd.DataFrame]:
        """(summary metrics, per-image table) of one model's answers over ``frame``, from
        the verdicts in ``context`` (no judge runs here)."""
        raise NotImplementedError

    # --- report ------------------------------------------------------------------------

    def replicates(
        self, entry: ScoredEntry, dataset: pd.DataFrame, weights: np.ndarray
    ) -> dict[str, np.ndarray]:
        """Every metric of ``entry`` under each weight vector over images (the bootstrap),
        from what the scoring stage wrote: no judge is built."""
        raise NotImplementedError

    def figure_caption(self, family: str, dataset: str) -> str:
        """The HTML report's caption text of one figure family (reStructuredText) on the
        dataset labelled ``dataset``: :attr:`figure_captions`, else a plain default."""
        text = self.figure_captions.get(family)
        if text is None:
            defaults = {
                "metrics": "",
                "breakdown": f"The headline per-image metric of {self.name}",
            }
            text = defaults.get(family, f"{self.name}: {family.replace('_', ' ')}, on {{dataset}}.")
        return text.replace("{dataset}", dataset)

    def breakdown_values(self, per_image: pd.DataFrame) -> tuple[str, np.ndarray] | None:
        """(axis label, per-image values) of the metric broken down by sequence and plane;
        None: no breakdown figure."""
        return None

    def table_note(self, estimates: Mapping[str, Mapping[str, float]]) -> str | None:
        """An extra sentence for the table caption, from the entries' score-file values."""
        return None

    def judged_pairs(self, frame: pd.DataFrame, answers: Answers) -> list[tuple[Any, Any]]:
        """What reading gives the task's judge for these answers, in the judge's pair form
        (the cost estimate counts judge requests from it); none without a judge."""
        return []

    def draw_figure(self, family: str, context: Any) -> None:
        """Draw one of the task's own ``figures`` families from a
        ``novabench.report.figures.FigureContext`` (the report stage's inputs of one job)."""
        raise NotImplementedError(f"task {self.name} draws no figure family {family!r}")

    # --- derived -------------------------------------------------------------------------

    def metric(self, key: str) -> Metric | None:
        return next((m for m in self.metrics if m.key == key), None)

    @property
    def table_metrics(self) -> tuple[Metric, ...]:
        return tuple(m for m in self.metrics if m.table)

    @property
    def headline_metrics(self) -> tuple[Metric, ...]:
        return tuple(m for m in self.metrics if m.headline)


# Tasks loaded so far, and tasks registered by hand (after the built-ins, in order).
_REGISTRY: dict[str, Task] = {}


def task_module(name: str) -> str:
    """The module that defines the built-in task ``name`` (its ``TASK``)."""
    return f"{__package__}.{name}"


@cache
def builtin_task_names() -> tuple[str, ...]:
    """The subfolders of this package whose ``__init__`` assigns ``TASK``, by name: read,
    not imported, so that finding the tasks loads none."""
    folder = Path(__file__).parent
    names = []
    for module in pkgutil.iter_modules([str(folder)]):
        init = folder / module.name / "__init__.py"
        if module.ispkg and init.is_file() and _assigns_task(init):
            names.append(module.name)
    return tuple(sorted(names))


def _assigns_task(path: Path) -> bool:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return any(
        isinstance(node, ast.Assign | ast.AnnAssign)
        and any(
            isinstance(t, ast.Name) and t.id == "TASK"
            for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
        )
        for node in tree.body
    )


def register_task(task: Task) -> Task:
    """Add ``task`` to the registry under ``task.name`` (replacing one of that name)."""
    if not isinstance(task, Task):
        raise TypeError(f"{task!r} is not a Task")
    _REGISTRY[task.name] = task
    return task


def unregister_task(name: str) -> None:
    _REGISTRY.pop(name, None)


def task_names() -> tuple[str, ...]:
    """The built-in tasks in the clinical workflow's order (``Task.position``), then the
    ones registered by hand, in registration order."""
    builtins = sorted(builtin_task_names(), key=lambda name: (get_task(name).position, name))
    return (*builtins, *(name for name in _REGISTRY if name not in builtins))


def dataset_needs() -> dict[str, dict[str, Any]]:
    """``Task.dataset_needs()`` of every task: what the dataset build checks."""
    return {name: get_task(name).dataset_needs() for name in task_names()}


def get_task(name: str) -> Task:
    """The task ``name``; a built-in one's module is imported on first use."""
    task = _REGISTRY.get(name)
    if task is not None:
        return task
    if name not in builtin_task_names():
        raise ConfigError(f"unknown task {name!r}", f"use one of {', '.join(task_names())}")
    module = importlib.import_module(task_module(name))
    task = getattr(module, "TASK", None)
    if not (isinstance(task, Task) and task.name == name):
        raise TypeError(f"module {module.__name__} does not define TASK, a Task named {name!r}")
    return register_task(task)
