"""The ``novabench`` command: the benchmark's scorers without Snakemake.

    novabench score --task localization --dataset nova.parquet --predictions preds.jsonl
    novabench validate --task captioning --predictions preds.jsonl --dataset nova.parquet
    novabench build-dataset --source local --local-path /data/Nova --out nova.parquet
    novabench judge-report --config config/config.yaml --out-dir results/judges
    novabench estimate --configfile config/paper.yaml
    novabench catalog
    novabench audit draw --scores scores/diagnosis/gold.images.csv --out sheet.csv
    novabench audit estimate --scores scores/diagnosis/gold.images.csv --sheet sheet.csv

A predictions file is either prediction records (lines with ``status``: the pipeline's
``results/<tag>/predictions/{task}/{model}.jsonl`` with the raw answer, or another
harness's records with a ``parsed`` value, taken as read) or raw answers
``{"filename", "raw"}`` (README, "Score predictions made elsewhere", and docs/models.md),
which are turned into records exactly as the ``predictions_file`` adapter does in the
pipeline. Either is then
read and judged by the reading stage's code and scored (novabench.score).

A problem the user can fix prints one line ``novabench: error: ...`` and exits with 2.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from novabench import __version__, paths
from novabench.answer_formats import BOX_FORMATS
from novabench.errors import NovaError
from novabench.judges import judge_kind, judge_kinds
from novabench.records import STATUSES, json_lines
from novabench.tasks import dataset_needs, get_task, task_names

RECORD_FIELDS = ("filename", "task", "model", "status")
HUB_REPOSITORIES = {"hf": "c-i-ber/Nova", "hf-legacy": "Ano-2090/Nova"}


def default_nltk_data() -> Path:
    """WordNet for METEOR is installed once per user, under the user's cache folder."""
    cache = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(cache) / "novabench" / "nltk_data"


# --- checking a predictions file ----------------------------------------------------------


@dataclass
class PredictionsCheck:
    """What :func:`check_predictions` found in a predictions file."""

    kind: str | None = None  # "records", "answers", or None for an empty file
    filenames: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    # Records whose status is ``missing`` (no answer on file when the pipeline ran).
    missing: list[str] = field(default_factory=list)


def _parsed_problem(task: str, parsed: Any) -> str | None:
    """Why an ``ok`` record's ``parsed`` cannot be scored, or None."""
    if not isinstance(parsed, dict):
        return "status ok but parsed is not an object"
    return get_task(task).parsed_problem(parsed)


def _line_problems(task: str, line: dict[str, Any]) -> list[str]:
    """Problems of one JSON object line of a file of prediction records."""
    missing = [name for name in RECORD_FIELDS if name not in line]
    if missing:
        return [f"missing field{'s' * (len(missing) > 1)} {', '.join(missing)}"]
    problems = []
    if not isinstance(line["filename"], str) or not line["filename"]:
        problems.append("filename must be a non-empty string")
    if line["task"] != task:
        problems.append(f"task is {line['task']!r}, not {task}")
    if "parsed" not in line and "raw" not in line:
        problems.append("missing field raw (or parsed)")
    elif line["status"] not in STATUSES:
        problems.append(f"unknown status {line['status']!r} (one of {', '.join(STATUSES)})")
    elif "parsed" not in line:
        if line["raw"] is not None and not isinstance(line["raw"], str):
            problems.append("raw must be a string or null")
    elif line["status"] == "ok" and (why := _parsed_problem(task, line["parsed"])):
        problems.append(why)
    return problems + _context_problems(line)


def _context_problems(line: dict[str, Any]) -> list[str]:
    """Problems of the fields that reading an answer takes its context from (``request``,
    ``frame_size``; novabench.answers.read_answer), which would crash it."""
    problems = []
    request = line.get("request")
    if request is not None and not isinstance(request, dict):
        problems.append(f"request is a {type(request).__name__}, not an object")
    elif request and not isinstance(request.get("box_format"), str | None):
        problems.append("request.box_format must be a string or null")
    frame = line.get("frame_size")
    if frame and not (
        isinstance(frame, list)
        and len(frame) == 2
        and all(type(side) is int and side > 0 for side in frame)
    ):
        problems.append("frame_size must be two positive integers [width, height]")
    return problems


def check_predictions(
    path: Path, task: str, dataset_filenames: Sequence[str] | None = None
) -> PredictionsCheck:
    """Every problem of a predictions file, one line each (``<path>:<line>: <problem>``).

    The first JSON object decides the format: a prediction record if it has ``status``
    or ``parsed`` (with ``raw``, or ``parsed`` taken as read), else a raw answer, which
    is the predictions_file model's to read (``kind`` "answers", nothing else checked).
    ``dataset_filenames``: also flag unknown images.
    """
    path = Path(path)
    if not path.is_file():
        raise NovaError(f"predictions file {path} does not exist", "check --predictions")
    check, seen = PredictionsCheck(), {}
    known = None if dataset_filenames is None else set(dataset_filenames)
    for number, line, unreadable in json_lines(path):
        where = f"{path}:{number}"
        if unreadable is not None:
            check.problems.append(f"{where}: {unreadable}")
            continue
        if not isinstance(line, dict):
            check.problems.append(f"{where}: not a JSON object")
            continue
        if check.kind is None:
            check.kind = "records" if {"status", "parsed"} & set(line) else "answers"
        if check.kind == "answers":  # read whole by the predictions-file report instead
            return PredictionsCheck(kind="answers")
        problems = _line_problems(task, line)
        check.problems += [f"{where}: {problem}" for problem in problems]
        name = line.get("filename")
        if not isinstance(name, str) or not name:
            continue
        if name in seen:
            check.problems.append(f"{where}: {name} repeats line {seen[name]}")
            continue
        seen[name] = number
        check.filenames.append(name)
        if check.kind == "records" and line.get("status") == "missing":
            check.missing.append(name)
        if known is not None and name not in known:
            check.problems.append(f"{where}: {name} is not in the dataset")
    return check


def require_answers(check: PredictionsCheck, path: Path, n_images: int | None) -> None:
    """NovaError, in the pipeline's words, when the file answers no image at all: empty,
    or every record missing. Scoring it would give a model zeros that mean nothing."""
    answered = len(check.filenames) - len(check.missing)
    if answered:
        return
    n = n_images if n_images is not None else len(check.filenames)
    what = "the file is empty" if not check.filenames else "every record's status is missing"
    counted = f"{n} of {n} images are" if n else "every image is"
    raise NovaError(
        f"{path}: {counted} missing from the predictions file ({what})",
        "add the answers, or pass the predictions file made for this dataset",
    )


def scored_sizes(task: str, dataset: Path | None) -> dict[str, tuple[int, int]] | None:
    """filename -> (width, height) of the images ``task`` asks and scores, as the
    pipeline's prediction job takes them (Task.scored_rows); None without a dataset."""
    if dataset is None:
        return None
    from novabench.dataset.read import load_nova

    spec = get_task(task)
    columns = ["filename", "width", "height", *spec.required_references]
    frame, _ = spec.scored_rows(load_nova(Path(dataset), columns=list(dict.fromkeys(columns))))
    return {r.filename: (int(r.width), int(r.height)) for r in frame.itertuples(index=False)}


def missing_limit(allow_missing: bool) -> float:
    """The share of images that may lack an answer: the pipeline's predictions_file
    default (none), or every one with ``--allow-missing`` (scored as missing)."""
    from novabench.models.predictions_file import Adapter

    return 1.0 if allow_missing else Adapter.max_error_rate


def _require_box_format(task: str, box_format: str | None) -> None:
    if get_task(task).needs_box_format and not box_format:
        raise NovaError(
            f"raw {task} answers need the model's box convention",
            f"pass --box-format, one of {', '.join(BOX_FORMATS)}",
        )


def task_reading_options(task: str, config: Mapping[str, Any]) -> dict[str, Any]:
    """The task's reading options as the pipeline's read rule receives them
    (``Task.reading_options`` of ``tasks.<task>``; the task's defaults without a config)."""
    return get_task(task).reading_options((config.get("tasks") or {}).get(task) or {})


def answers_report(args: argparse.Namespace, sizes: dict[str, tuple[int, int]] | None) -> Any:
    """The predictions_file model's report of a raw-answers file (FileReport)."""
    from novabench.models.predictions_file import file_report, read_answer_file

    _require_box_format(args.task, args.box_format)
    report = file_report(
        read_answer_file(args.predictions),
        args.task,
        sizes,
        args.box_format,
        getattr(args, "reading_options", None),
    )
    if not report.file.answers and not report.stops(missing_limit(args.allow_missing)):
        require_answers(PredictionsCheck(kind="answers"), Path(args.predictions), len(sizes or {}))
    return report


def answers_report_lines(args: argparse.Namespace, report: Any) -> tuple[list[str], list[str]]:
    """(problems, notes) of a raw-answers file, one line each, ``<path>:<line>: ...``."""
    from novabench.models.predictions_file import FAILURES

    path, file = args.predictions, report.file
    problems = [f"{path}:{n}: {why}" for n, why in file.unreadable]
    problems += [
        f"{path}:{n}: {name} repeats line {file.line_of[name]}" for n, name in file.repeated
    ]
    problems += [f"{path}:{file.line_of[n]}: {n} is not in the dataset" for n in report.unknown]
    notes = [
        f"{path}:{n}: {name}: {status} ({why})"
        for status in FAILURES
        for n, name, why in report.failures.get(status, [])
    ]
    if report.missing:
        line = (
            f"{path}: {len(report.missing)} of {report.n_images} images have no answer, "
            f"e.g. {report.missing[0]}"
        )
        if args.allow_missing:
            notes.append(f"{line} (scored as missing)")
        elif report.stops(missing_limit(False)):
            problems.append(f"{line} (pass --allow-missing to score them as missing)")
    if report.null_raws:
        n, name = report.null_raws[0]
        line = f"{path}: {len(report.null_raws)} answer(s) with raw null, e.g. line {n} {name}"
        if args.allow_missing:
            notes.append(f"{line} (scored as error)")
        elif report.stops(missing_limit(False)):
            problems.append(f"{line} (pass --allow-missing to score them as error)")
    if report.counts:
        notes.append(f"{path}: images: {report.counts_text()}")
    return problems, notes


def _dataset_filenames(dataset: Path) -> list[str]:
    from novabench.dataset.read import load_nova

    return list(load_nova(Path(dataset), columns=["filename"])["filename"])


# --- the scorer and the prediction runner (the only calls into them) ----------------------


def _with_suffix(stem: Path, suffix: str) -> Path:
    return stem.with_name(stem.name + suffix)


def answers_to_records(
    *,
    task: str,
    dataset: Path,
    answers: Path,
    model: str,
    box_format: str | None,
    stem: Path,
    max_error_rate: float = 1.0,
) -> Path:
    """Turn raw answers into prediction records as the pipeline's predictions_file model
    does; return the records file ``<stem>.predictions.jsonl`` (its summary is
    ``<stem>.summary.json``). Scoring reads them (novabench.reading)."""
    from novabench.predict import run_predictions

    model_cfg: dict[str, Any] = {
        "adapter": "predictions_file",
        "tasks": [task],
        # The pipeline's gate (none missing) unless --allow-missing: images without an
        # answer are then scored as missing and counted (n_missing, missing_rate).
        "max_error_rate": max_error_rate,
        "settings": {"path": str(answers)},
    }
    if box_format:
        model_cfg["box_format"] = box_format
    run_predictions(
        dataset=Path(dataset),
        task=task,
        model_name=model,
        model_cfg=model_cfg,
        prompt_path=None,  # nothing is sent: the answers exist already
        out=_with_suffix(stem, ".predictions.jsonl"),
        summary_out=_with_suffix(stem, ".summary.json"),
    )
    return _with_suffix(stem, ".predictions.jsonl")


def score_file(
    *,
    task: str,
    dataset: Path,
    predictions: Path,
    stem: Path,
    judge_cfg: dict[str, Any] | None,
    nltk_data: Path,
    options: dict[str, Any] | None = None,
    reading_options: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Read, judge and score prediction records into ``<stem>.json`` and
    ``<stem>.images.csv`` (the verdicts beside them); return the score file's content
    (JSON-safe). ``options`` and ``reading_options``: the task's scoring and reading
    options (None: its defaults)."""
    from novabench.score import score_predictions

    out_json = _with_suffix(stem, ".json")
    score_predictions(
        task=task,
        dataset=Path(dataset),
        predictions=Path(predictions),
        out_json=out_json,
        out_csv=_with_suffix(stem, ".images.csv"),
        judge_cfg=judge_cfg,
        options=options,
        nltk_data=Path(nltk_data),
        cache_dir=None,
        reading_options=reading_options,
    )
    return json.loads(out_json.read_text(encoding="utf-8"))


# --- subcommands ----------------------------------------------------------------------------


# The workflow this package belongs to, when it runs from a checkout.
WORKFLOW = paths.REPOSITORY


def find_workflow(start: Path | None = None) -> Path | None:
    """The checkout this package runs from, else the one holding the working directory
    (an installed package run inside a checkout); None outside any."""
    if WORKFLOW is not None:
        return WORKFLOW
    here = Path.cwd() if start is None else Path(start)
    for folder in (here, *here.parents):
        if (folder / "Snakefile").is_file() and (folder / "config" / "config.yaml").is_file():
            return folder
    return None


def pipeline_config(workflow: Path | None, configfiles: Sequence[Path] = ()) -> dict[str, Any]:
    """The configuration exactly as the workflow reads it: its config/config.yaml with
    ``configfiles`` merged over it (as ``snakemake --configfile``), read by the workflow's
    own reader (novabench.config.read_config: plug-ins, catalog, schema and defaults,
    checks). {} outside a checkout: each task's own defaults (``Task.default_judge``)."""
    from novabench.config import plan_from_files

    if workflow is None:
        if configfiles:
            raise NovaError(
                "--configfile needs the workflow it configures (its schema, catalog and "
                "config/config.yaml), and this command runs outside a checkout",
                "run it inside a checkout of the pipeline, or drop --configfile",
            )
        return {}
    return plan_from_files(Path(workflow), [Path(p) for p in configfiles]).config


def configured_judge(task: str, config: dict[str, Any]) -> dict[str, Any] | None:
    """``{name, kind, settings}`` of the judge ``tasks.<task>.judge`` names in ``config``;
    the task's own default judge (``Task.default_judge``) when ``config`` is empty."""
    if not config:
        default = get_task(task).default_judge
        return None if default is None else json.loads(json.dumps(default))
    name = ((config.get("tasks") or {}).get(task) or {}).get("judge")
    judges = config.get("judges") or {}
    if name not in judges:
        raise NovaError(
            f"the config names no judge of {task} under judges: (tasks.{task}.judge is {name!r})",
            f"set tasks.{task}.judge to an entry of judges:",
        )
    from novabench.judges.base import expand_judge

    # A cascade's stages written out, as the pipeline builds it.
    return expand_judge(judges, name)


def offline_judge_kinds(task: str) -> list[str]:
    """Judge kinds that score ``task`` without a service, the pipeline's default first."""
    kinds = [k.name for k in judge_kinds().values() if task in k.tasks and not k.remote]
    default = (get_task(task).default_judge or {}).get("kind")
    return sorted(kinds, key=lambda name: name != default)


def judge_config(
    task: str,
    kind: str | None,
    switches: Mapping[str, bool | None] | None,
    config: dict[str, Any] | None = None,
) -> dict | None:
    """The judge to score ``task`` with: the pipeline's configured one (``config``: the
    workflow's config; {} outside a checkout), or the offline ``kind`` with its own
    defaults. ``switches``: settings given on the command line (a judge kind's
    ``cli_switches``; None: not given); the packages the settings need must be installed."""
    if not get_task(task).needs_judge:
        if kind is not None:
            raise NovaError(f"{task} is scored without a judge", "drop --judge-kind")
        return None
    judge = configured_judge(task, config or {})
    if kind is not None and kind != judge["kind"]:
        offline = offline_judge_kinds(task)
        if kind not in offline:
            raise NovaError(
                f"a {kind} judge cannot score {task} here",
                f"use --judge-kind {' or '.join(offline)}",
            )
        judge = {"kind": kind, "settings": {}}
    settings = dict(judge.get("settings") or {})
    chosen = judge_kind(judge["kind"])
    for setting, value in (switches or {}).items():
        if value is None:
            continue
        if setting not in chosen.cli_switches:
            flag = _switch_flag(setting, value)
            owners = [k.name for k in judge_kinds().values() if setting in k.cli_switches]
            raise NovaError(
                f"{flag} is a setting of the {' or '.join(owners)} judge, not of {judge['kind']}",
                f"drop it, or score {task} with --judge-kind {' or '.join(owners)}",
            )
        settings[setting] = value
    problems = chosen.missing_dependencies(settings)
    if problems:
        raise problems[0]
    return {**judge, "settings": settings}


def _switch_flag(setting: str, value: bool) -> str:
    """The command-line switch that sets a judge's boolean ``setting`` to ``value``."""
    flag = setting.replace("_", "-")
    return f"--{flag}" if value else f"--no-{flag}"


def judge_switches() -> dict[str, str]:
    """Every judge kind's command-line switches: setting -> help."""
    return {s: h for k in judge_kinds().values() for s, h in k.cli_switches.items()}


def _records_for_scoring(args: argparse.Namespace, model: str, stem: Path) -> Path:
    """Check the predictions file with the pipeline's gates; raw answers are turned into
    records next to ``stem``."""
    check = check_predictions(args.predictions, args.task, None)
    validate = (
        f"list every problem with `novabench validate --task {args.task} "
        f"--predictions {args.predictions} --dataset {args.dataset}`"
    )
    sizes = scored_sizes(args.task, args.dataset) or {}
    if check.kind == "answers":
        report = answers_report(args, sizes)
        if report.stops(missing_limit(args.allow_missing)):
            raise NovaError(
                f"{args.predictions}: " + "; ".join(report.problems()),
                f"{validate}; --allow-missing scores absent images as missing",
            )
        return answers_to_records(
            task=args.task,
            dataset=args.dataset,
            answers=args.predictions,
            model=model,
            box_format=args.box_format,
            stem=stem,
            max_error_rate=missing_limit(args.allow_missing),
        )
    check = check_predictions(args.predictions, args.task, _dataset_filenames(args.dataset))
    if check.problems:
        raise NovaError(
            f"{len(check.problems)} problem(s) in the predictions file, first: {check.problems[0]}",
            validate,
        )
    require_answers(check, Path(args.predictions), len(sizes))
    _require_records_complete(args, check, sizes)
    return Path(args.predictions)


def _unanswered_records(check: PredictionsCheck, sizes: Mapping[str, Any]) -> list[str]:
    """Images of the task without an answer in a records file: status missing, or absent."""
    answered = set(check.filenames)
    return [*check.missing, *(name for name in sizes if name not in answered)]


def _require_records_complete(
    args: argparse.Namespace, check: PredictionsCheck, sizes: Mapping[str, Any]
) -> None:
    """The pipeline's gate on a records file: no image without an answer, unless
    ``--allow-missing``."""
    unanswered = _unanswered_records(check, sizes)
    if unanswered and not args.allow_missing:
        raise NovaError(
            f"{args.predictions}: {len(unanswered)} of {len(sizes)} images have no answer, "
            f"e.g. {unanswered[0]}",
            "add the answers, or pass --allow-missing to score them as missing",
        )


def _check_file_name(option: str, name: str, why: str) -> None:
    """A name that becomes part of a file name must stay one: no folder, no way up."""
    if name in ("", ".", "..") or any(sep in name for sep in ("/", "\\", "\0")):
        raise NovaError(
            f"{option} {name!r} is not a plain name (a path separator, or . or ..): {why}",
            f"pass a name without them, e.g. {option} my-model",
        )


def _check_output_file(option: str, path: Path) -> None:
    """An output file's path names a file in a folder that exists."""
    if path.is_dir():
        raise NovaError(
            f"{option} {path} is a folder", f"name the file to write, e.g. {path}/out.csv"
        )
    if not path.parent.is_dir():
        raise NovaError(
            f"{option} {path}: the folder {path.parent} does not exist",
            "create it, or pick another",
        )


def cmd_score(args: argparse.Namespace) -> int:
    config = pipeline_config(find_workflow(), args.configfile)
    switches = {s: getattr(args, f"judge_{s}") for s in judge_switches()}
    judge_cfg = judge_config(args.task, args.judge_kind, switches, config)
    # The task's scoring options as the pipeline's score rule receives them.
    options = get_task(args.task).options((config.get("tasks") or {}).get(args.task) or {})
    args.reading_options = task_reading_options(args.task, config)
    with tempfile.TemporaryDirectory(prefix="novabench-score-") as scratch:
        folder = Path(args.out_dir) if args.out_dir else Path(scratch)
        folder.mkdir(parents=True, exist_ok=True)
        model = args.model or Path(args.predictions).stem
        _check_file_name("--model", model, "the score files would be written outside --out-dir")
        # The task in front of the model's name: one folder holds every task's files.
        stem = folder / f"{args.task}-{model}"
        records = _records_for_scoring(args, model, stem)
        payload = score_file(
            task=args.task,
            dataset=args.dataset,
            predictions=records,
            stem=stem,
            judge_cfg=judge_cfg,
            options=options,
            reading_options=args.reading_options,
            nltk_data=args.nltk_data or default_nltk_data(),
        )
    if args.format == "json":
        print(json.dumps(payload, indent=2))
    else:
        print(metrics_table(payload))
    return 0


def _cell(value: Any) -> str:
    if value is None:  # an undefined metric (NaN in the scorer, null in the score file)
        return "n/a"
    if isinstance(value, float):
        return f"{value:.4f}"
    return str(value)


def metrics_table(payload: dict[str, Any]) -> str:
    """The score file's scalar metrics as an aligned table: numbers right-aligned, text
    after them. Provenance (judge, WordNet, parameters) is in ``--format json``."""
    rows = [
        (key, value, _cell(value))
        for key, value in payload["metrics"].items()
        if not isinstance(value, dict | list)
    ]
    width = max([len("metric"), *(len(key) for key, _, _ in rows)])
    numbers = max([len("value"), *(len(c) for _, v, c in rows if not isinstance(v, str))])
    lines = [
        f"{payload['task']} scores of {payload['model']}",
        f"{'metric':<{width}}  {'value':>{numbers}}",
    ]
    for key, value, cell in rows:
        lines.append(f"{key:<{width}}  {cell if isinstance(value, str) else cell.rjust(numbers)}")
    return "\n".join(lines)


def cmd_validate(args: argparse.Namespace) -> int:
    """Every problem of the file, then its counts per status; exit 1 on any problem."""
    config = pipeline_config(find_workflow(), args.configfile)
    args.reading_options = task_reading_options(args.task, config)
    sizes = scored_sizes(args.task, args.dataset)
    filenames = _dataset_filenames(args.dataset) if args.dataset else None
    check = check_predictions(args.predictions, args.task, filenames)
    if check.kind == "answers":
        report = answers_report(args, sizes)
        problems, notes = answers_report_lines(args, report)
        what = f"{len(report.file.answers)} answers"
    else:
        problems, notes = records_report_lines(args, check, sizes)
        what = f"{len(check.filenames)} records"
    for line in [*problems, *notes]:
        print(line)
    if problems:
        print(f"{args.predictions}: {len(problems)} problem(s)")
        return 1
    print(f"{args.predictions}: valid ({what} for {args.task})")
    return 0


def records_report_lines(
    args: argparse.Namespace,
    check: PredictionsCheck,
    sizes: Mapping[str, tuple[int, int]] | None,
) -> tuple[list[str], list[str]]:
    """(problems, notes) of a records file: its line problems; else the images without an
    answer (a problem unless --allow-missing) and the counts per status as the reading
    stage will take them (boxes only with --dataset, which gives the image sizes)."""
    from novabench.answers import read_answer
    from novabench.records import read_predictions

    if check.problems:
        return list(check.problems), []
    require_answers(check, Path(args.predictions), None if sizes is None else len(sizes))
    problems, notes, sizes = [], [], sizes or {}
    unanswered = _unanswered_records(check, sizes)
    if unanswered:
        line = (
            f"{args.predictions}: {len(unanswered)} of {len(sizes) or len(check.filenames)} "
            f"images have no answer, e.g. {unanswered[0]}"
        )
        if args.allow_missing:
            notes.append(f"{line} (scored as missing)")
        else:
            problems.append(f"{line} (pass --allow-missing to score them as missing)")
    spec = get_task(args.task)
    if spec.needs_box_format and not sizes:
        return problems, notes
    options = getattr(args, "reading_options", None)  # None: the task's defaults
    counts = Counter(
        read_answer(spec, record, sizes.get(record["filename"]), options)["status"]
        for record in read_predictions(Path(args.predictions))
        if not sizes or record["filename"] in sizes
    )
    counts["missing"] += len(unanswered) - len(check.missing)
    counted = ", ".join(f"{counts[s]} {s}" for s in STATUSES if counts[s])
    notes.append(f"{args.predictions}: images: {counted}")
    return problems, notes


def dataset_config(args: argparse.Namespace) -> dict[str, Any]:
    """The ``dataset:`` config section that the pipeline's dataset rule would receive."""
    cfg: dict[str, Any] = {"source": args.source, "clip_boxes": args.clip_boxes}
    if args.source == "sample":
        cfg["sample"] = {
            "seed": args.seed,
            "n_cases": args.n_cases,
            "images_per_case": list(args.images_per_case),
        }
    if args.source == "local":
        if not args.local_path:
            raise NovaError("--source local needs the dataset folder", "pass --local-path DIR")
        cfg["local_path"] = str(args.local_path)
    if args.source in HUB_REPOSITORIES:
        release = {
            "repo_id": args.repo_id or HUB_REPOSITORIES[args.source],
            "revision": args.revision,
        }
        key = "current" if args.source == "hf" else "legacy"
        cfg["hf"] = {"timeout_s": args.timeout_s, key: release}
    return cfg


def cmd_build_dataset(args: argparse.Namespace) -> int:
    from novabench.dataset.build import build_dataset

    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    manifest_path = Path(args.manifest) if args.manifest else out.with_suffix(".manifest.json")
    sample_dir = None
    if args.source == "sample":
        from novabench.sample import generate_sample

        sample_dir = Path(args.sample_dir) if args.sample_dir else out.parent / "sample"
        generate_sample(
            sample_dir,
            n_cases=args.n_cases,
            seed=args.seed,
            images_per_case=tuple(args.images_per_case),
        )
    manifest = build_dataset(
        dataset_config(args),
        out,
        manifest_path,
        task_needs=dataset_needs(),
        sample_dir=sample_dir,
        cache_dir=Path(args.cache_dir) if args.cache_dir else None,
    )
    print(
        f"{out}: {manifest['n_images']} images, {manifest['n_cases']} cases, "
        f"{manifest['n_gold_boxes']} gold boxes (manifest {manifest_path})"
    )
    return 0


def _config_judges(config_path: Path | None, workflow: Path | None) -> dict[str, Any]:
    """The judges to measure: those of ``config_path`` (a file with a ``judges:``
    section, measured as written), else those of the workflow's configuration as the
    workflow reads it."""
    from novabench.yaml_data import read_yaml

    if config_path is None:
        if workflow is None:
            raise NovaError("no configuration to read judges from", "pass --config")
        return pipeline_config(workflow)["judges"]
    config = read_yaml(Path(config_path), "the config", "pass --config")[1]
    judges = config.get("judges") if isinstance(config, dict) else None
    if not isinstance(judges, dict) or not judges:
        raise NovaError(f"{config_path} configures no judges", "add a `judges:` section")
    return judges


def cmd_judge_report(args: argparse.Namespace) -> int:
    from novabench.io import resolve_path
    from novabench.judges.validation import SETS_BY_KEY, validation_folder, write_report

    out_dir = Path(args.out_dir)
    workflow = find_workflow()
    validation_dir = args.validation_dir
    if validation_dir is None and workflow is not None:
        validation_dir = workflow / "validation"
    judges = _config_judges(args.config, workflow)
    # Config paths are relative to the working directory, else to the config's workflow.
    base = Path(args.config).resolve().parent.parent if args.config else workflow
    folder = validation_folder(validation_dir)
    report = write_report(
        judges,
        folder,
        out_dir / "report.json",
        out_dir / "report.md",
        cache_dir=Path(args.cache_dir) if args.cache_dir else None,
        resolve=lambda path: resolve_path(path, base),
    )
    for name, entry in report["judges"].items():
        for task, reason in entry["skipped"].items():
            print(f"{name} ({task}): skipped, {reason}")
        for key, splits in entry["tasks"].items():
            for line in _agreement_lines(SETS_BY_KEY[key], splits):
                print(f"{name} ({key}, {line}")
    print(f"wrote {out_dir / 'report.md'} and {out_dir / 'report.json'}")
    if args.record:
        from novabench.judges.figures import RECORD_NAME
        from novabench.judges.validation import write_record

        recorded = write_record(report, folder / RECORD_NAME)
        measured = ", ".join(f"{e['identity'].get('name')} ({e['task']})" for e in recorded)
        print(
            f"recorded the held-out figures of {measured or 'no judge'} in {folder / RECORD_NAME}"
        )
    return 0


def _agreement_lines(vset: Any, splits: dict[str, Any]) -> list[str]:
    """One line per held-out subset of a set's agreement numbers."""
    from novabench.judges.validation import NEW_PAIRS

    lines = []
    for subset in ("heldout", NEW_PAIRS):
        held = splits.get(subset)
        if not held or not held["n"]:
            continue
        line = vset.measure.summary(held)
        # Which numbers are tuning numbers: a half once held out, since tuned on, is one.
        lines.append(f"{vset.split_label(subset)}, n={held['n']}): {line}")
    return lines


def _judge_report_parser(commands: Any) -> None:
    report = commands.add_parser(
        "judge-report", help="measure the configured judges on the hand-labelled pairs"
    )
    report.add_argument("--config", type=Path, help="default: the workflow's config/config.yaml")
    report.add_argument(
        "--validation-dir",
        type=Path,
        help="folder with the validation sets (diagnoses*.jsonl, captions*.jsonl; default: "
        "the repository's validation/)",
    )
    report.add_argument("--out-dir", type=Path, default=Path("results/judges"))
    report.add_argument("--cache-dir", type=Path, help="LLM judge answers (default: none)")
    report.add_argument(
        "--record",
        action="store_true",
        help="also write each measured judge's held-out figures into judge_figures.json of "
        "the validation folder (the record every score file looks its judge up in)",
    )
    report.set_defaults(run=cmd_judge_report)


def _workflow_dir(args: argparse.Namespace) -> Path:
    folder = args.workflow or find_workflow()
    if folder is None or not (Path(folder) / "Snakefile").is_file():
        raise NovaError(
            f"{folder or 'this installation'} holds no Snakefile (the workflow whose "
            "config/config.yaml and config/models/ are read)",
            "run from a checkout of the repository, or pass --workflow DIR",
        )
    return Path(folder)


def cmd_estimate(args: argparse.Namespace) -> int:
    from novabench.config import plan_from_files
    from novabench.estimate import estimate_run, format_estimate

    plan = plan_from_files(_workflow_dir(args), list(args.configfile))
    print(format_estimate(estimate_run(plan, Path(args.directory))))
    return 0


def cmd_catalog(args: argparse.Namespace) -> int:
    from novabench.catalog import (
        catalog_table,
        default_catalog_dir,
        load_catalog,
        readme_with_table,
    )

    table = catalog_table(load_catalog(default_catalog_dir(_workflow_dir(args))))
    if args.readme is None:
        print(table)
        return 0
    readme = Path(args.readme)
    if not readme.is_file():
        raise NovaError(
            f"--readme {readme}: no such file",
            "name the README whose catalog table to rewrite, or leave --readme out to print "
            "the table",
        )
    text = readme.read_text(encoding="utf-8")
    readme.write_text(readme_with_table(text, table), encoding="utf-8")
    print(f"{args.readme}: catalog table written")
    return 0


def _audit_model(scores: Path) -> str:
    name = Path(scores).name
    return name.removesuffix(".json").removesuffix(".images.csv")


def cmd_audit_draw(args: argparse.Namespace) -> int:
    from novabench.audit import draw_sheet

    _check_output_file("--out", Path(args.out))
    drawn = draw_sheet(args.scores, args.out, size=args.size, seed=args.seed)
    strata = "; ".join(f"{s} {v['drawn']} of {v['size']}" for s, v in drawn["strata"].items())
    print(
        f"wrote {args.out}: {drawn['n_drawn']} of {drawn['n_ok']} answered images of "
        f"{_audit_model(args.scores)} ({strata})"
    )
    print(
        "label human_top1 and human_top5 yes/no in every row, then run `novabench audit "
        f"estimate --scores {args.scores} --sheet {args.out}`"
    )
    return 0


def cmd_audit_estimate(args: argparse.Namespace) -> int:
    from novabench.audit import audit_estimate, format_audit

    result = audit_estimate(args.scores, args.sheet)
    if args.format == "json":
        print(json.dumps(result, indent=2))
    else:
        print(format_audit(result, _audit_model(args.scores)))
    return 0


def _audit_parser(commands: Any) -> None:
    audit = commands.add_parser(
        "audit", help="measure the diagnosis judge on one model's own answers"
    )
    steps = audit.add_subparsers(dest="step", required=True)
    scores_help = "the model's diagnosis score file (<model>.images.csv)"
    draw = steps.add_parser("draw", help="draw a sample of judged images for a person to label")
    draw.add_argument("--scores", required=True, type=Path, help=scores_help)
    draw.add_argument("--out", required=True, type=Path, help="the sheet (CSV) to write")
    draw.add_argument("--size", type=int, default=100, help="images to draw (default 100)")
    draw.add_argument("--seed", type=int, default=0, help="seed of the draw (default 0)")
    draw.set_defaults(run=cmd_audit_draw)
    estimate = steps.add_parser(
        "estimate", help="the judge's error and the audited Top-1/Top-5 from a filled sheet"
    )
    estimate.add_argument("--scores", required=True, type=Path, help=scores_help)
    estimate.add_argument("--sheet", required=True, type=Path, help="the filled sheet")
    estimate.add_argument("--format", choices=("table", "json"), default="table")
    estimate.set_defaults(run=cmd_audit_estimate)


# --- the command line -------------------------------------------------------------------


def _estimate_parsers(commands: Any) -> None:
    estimate = commands.add_parser(
        "estimate", help="requests, tokens, dollars and time a run will need, before it runs"
    )
    estimate.add_argument(
        "--configfile",
        type=Path,
        action="append",
        default=[],
        help="merged over config/config.yaml, as snakemake --configfile (repeatable)",
    )
    estimate.add_argument(
        "--directory", type=Path, default=Path("."), help="the run's working directory"
    )
    estimate.add_argument(
        "--workflow",
        type=Path,
        help="the repository (default: this one, or the working directory's)",
    )
    estimate.set_defaults(run=cmd_estimate)
    catalog = commands.add_parser("catalog", help="the table of the model catalog")
    catalog.add_argument("--readme", type=Path, help="write the table into this README")
    catalog.add_argument(
        "--workflow",
        type=Path,
        help="the repository (default: this one, or the working directory's)",
    )
    catalog.set_defaults(run=cmd_catalog)


def _score_parser(commands: Any) -> None:
    score = commands.add_parser("score", help="score a predictions file against a dataset")
    score.add_argument("--task", required=True, choices=task_names())
    score.add_argument("--dataset", required=True, type=Path, help="nova.parquet")
    score.add_argument("--predictions", required=True, type=Path, help="records or raw answers")
    score.add_argument(
        "--judge-kind",
        choices=sorted({k for t in task_names() for k in offline_judge_kinds(t)}),
        help="another offline judge kind, with its own defaults; default: the judge that "
        "the workflow's config (with --configfile) names for the task",
    )
    for setting, help_text in judge_switches().items():
        score.add_argument(
            f"--{setting.replace('_', '-')}",
            dest=f"judge_{setting}",
            action=argparse.BooleanOptionalAction,
            help=help_text,
        )
    score.add_argument(
        "--configfile",
        type=Path,
        action="append",
        default=[],
        help="merged over config/config.yaml for the judges and scoring options, as "
        "snakemake --configfile (repeatable)",
    )
    score.add_argument(
        "--box-format", choices=BOX_FORMATS, help="box convention of raw localization answers"
    )
    score.add_argument(
        "--allow-missing",
        action="store_true",
        help="score images without an answer as missing (default: stop, as the pipeline's "
        "predictions_file model does)",
    )
    score.add_argument("--model", help="name of the model and its files (default: file name)")
    score.add_argument("--format", choices=("table", "json"), default="table")
    score.add_argument("--out-dir", type=Path, help="keep the score files here")
    score.add_argument("--nltk-data", type=Path, help="WordNet folder for METEOR")
    score.set_defaults(run=cmd_score)


def _build_parser(commands: Any) -> None:
    build = commands.add_parser("build-dataset", help="build nova.parquet from a source")
    build.add_argument("--source", required=True, choices=("local", "sample", "hf", "hf-legacy"))
    build.add_argument("--out", required=True, type=Path, help="the Parquet file to write")
    build.add_argument("--manifest", type=Path, help="default: <out>.manifest.json")
    build.add_argument("--local-path", type=Path, help="the downloaded dataset repository")
    build.add_argument("--repo-id", help="Hub dataset (default: the source's release)")
    build.add_argument("--revision", default="main", help="Hub revision; a commit sha pins it")
    build.add_argument("--timeout-s", type=float, default=10.0, help="Hub reachability wait")
    build.add_argument("--cache-dir", type=Path, help="Hub downloads (default: next to --out)")
    build.add_argument("--sample-dir", type=Path, help="where the sample's files are written")
    # The sample's defaults are those of config/config.yaml.
    build.add_argument("--seed", type=int, default=20250520, help="seed of the sample")
    build.add_argument("--n-cases", type=int, default=12, help="cases in the sample")
    build.add_argument(
        "--images-per-case", type=int, nargs=2, default=[1, 4], metavar=("MIN", "MAX")
    )
    build.add_argument("--clip-boxes", action="store_true", help="clip boxes outside images")
    build.set_defaults(run=cmd_build_dataset)


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="novabench", description=__doc__.split("\n")[0])
    parser.add_argument("--version", action="version", version=f"novabench {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    _score_parser(commands)
    validate = commands.add_parser("validate", help="list the problems of a predictions file")
    validate.add_argument("--task", required=True, choices=task_names())
    validate.add_argument("--predictions", required=True, type=Path)
    validate.add_argument(
        "--dataset", type=Path, help="also flag images not in it and images without an answer"
    )
    validate.add_argument(
        "--box-format", choices=BOX_FORMATS, help="box convention of raw localization answers"
    )
    validate.add_argument(
        "--allow-missing",
        action="store_true",
        help="images without an answer are a note, not a problem (as `score --allow-missing`)",
    )
    validate.add_argument(
        "--configfile",
        type=Path,
        action="append",
        default=[],
        help="merged over config/config.yaml for the reading options, as snakemake "
        "--configfile (repeatable)",
    )
    validate.set_defaults(run=cmd_validate)
    _build_parser(commands)
    _judge_report_parser(commands)
    _estimate_parsers(commands)
    _audit_parser(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = make_parser().parse_args(argv)
    try:
        return args.run(args)
    except NovaError as exc:
        print(f"novabench: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
