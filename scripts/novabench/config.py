"""The one reader of the configuration, its checks beyond the JSON schema, and the run
plan derived from it.

:func:`read_config` is how the workflow (workflow/rules/common.smk) and the command line
(novabench.cli, :func:`plan_from_files`) read a configuration: plug-ins first, catalog
names expanded, ``--config`` strings typed, the schema checked (its defaults filled in),
then :func:`check_config`. The schema (workflow/schemas/config.schema.yaml) names no task:
:func:`config_schema` merges each registered task's block in. The schema checks shapes
and names; this module checks what a schema cannot (files exist, names refer to things
that exist, a model can run the tasks it lists) and derives which (task, model) jobs the
DAG contains. Every problem is reported as one line naming the key and the fix.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from novabench.answer_formats import BOX_FORMATS
from novabench.catalog import check_model_info
from novabench.code_fingerprint import code_fingerprint, code_graph
from novabench.dataset.tags import SHARED_FOLDERS
from novabench.errors import ConfigError, DatasetError, NovaError
from novabench.io import resolve_path
from novabench.judges import judge_kind
from novabench.judges.base import READ_RESOURCES, expand_judge, judge_kind_names
from novabench.models.base import (
    Adapter,
    adapter_class,
    adapter_exists,
    adapter_kind,
    adapter_module_name,
)
from novabench.tasks import get_task, task_names

FIX = "edit the config (every key is documented in config/README.md)"


def _key_path(parts: Any) -> str:
    return ".".join(str(p) for p in parts) or "(top level)"


def describe_validation_error(exc: BaseException) -> str:
    """One line for a schema violation, naming the offending key."""
    import jsonschema

    # Snakemake folds the ValidationError into its message text; the object itself is
    # the exception being handled when it raised (its __context__).
    error, seen = None, exc
    while seen is not None and error is None:
        candidates = [seen, *getattr(seen, "args", ())]
        error = next((a for a in candidates if isinstance(a, jsonschema.ValidationError)), None)
        seen = seen.__cause__ or seen.__context__
    if error is None:
        return f"config error: {' '.join(str(exc).split())}; fix: {FIX}"
    where = _key_path(error.absolute_path)
    if error.validator == "additionalProperties":
        extra = sorted(set(error.instance) - set(error.schema.get("properties", {})))
        problem = (
            f"unknown key {where + '.' if error.absolute_path else ''}{extra[0] if extra else '?'}"
        )
    elif error.validator == "required":
        missing = [k for k in error.validator_value if k not in error.instance]
        prefix = where + "." if error.absolute_path else ""
        problem = f"missing key {prefix}{missing[0] if missing else '?'}"
    elif error.validator == "pattern" and "A-Za-z0-9" in str(error.schema.get("pattern", "")):
        problem = (
            f"bad name {error.instance!r} at {where}: names may use only letters, digits, "
            "'.', '_' and '-', start with a letter or digit, and not start with 'rater-'"
        )
    else:
        message = " ".join(error.message.split())
        if len(message) > 200:
            message = message[:200] + "..."
        problem = f"invalid value at {where}: {message}"
    return f"config error: {problem}; fix: {FIX}"


# --- `--config` values: Snakemake parses nested YAML there with every scalar a string -----

NULL_WORDS = frozenset({"null", "Null", "NULL", "~"})
BOOL_WORDS = {"true": True, "false": False}
INTEGER = re.compile(r"[-+]?[0-9]+")


def coerce_config(config: dict[str, Any], schema: Mapping[str, Any]) -> dict[str, Any]:
    """Turn the strings ``--config key='{...}'`` gives for YAML scalars into the type the
    schema asks at their place: "true"/"false" where a boolean goes, "10" where an integer
    goes, "0.5" where a number goes, "null" where null is allowed. A string that is not such
    a value is left alone for validation to report. Changes ``config`` in place."""
    return _coerce(config, schema, schema)


def _coerce(value: Any, schema: Mapping[str, Any], root: Mapping[str, Any]) -> Any:
    branches = _branches(schema, root)
    if isinstance(value, dict):
        for key in list(value):
            sub = [_child(b, key) for b in branches if "object" in _types(b)]
            sub = [s for s in sub if s is not None]
            if sub:
                value[key] = _coerce(value[key], {"anyOf": sub}, root)
        return value
    if isinstance(value, list):
        items = [b["items"] for b in branches if "array" in _types(b) and "items" in b]
        if items:
            return [_coerce(item, {"anyOf": items}, root) for item in value]
        return value
    if isinstance(value, str):
        types = set().union(*(_types(b) for b in branches)) if branches else set()
        return _scalar(value, types)
    return value


def _scalar(text: str, types: set[str]) -> Any:
    if "null" in types and text in NULL_WORDS:
        return None
    if "string" in types:
        return text
    word = text.strip().lower()
    if "boolean" in types and word in BOOL_WORDS:
        return BOOL_WORDS[word]
    if types & {"integer", "number"} and INTEGER.fullmatch(text.strip()):
        return int(text)
    if "number" in types:
        try:
            number = float(text)
        except ValueError:
            return text
        return number if math.isfinite(number) else text
    return text


def _branches(schema: Mapping[str, Any], root: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The schema and its anyOf/oneOf alternatives, with local $refs resolved."""
    if "$ref" in schema:
        target: Any = root
        for part in str(schema["$ref"]).removeprefix("#/").split("/"):
            target = target[part]
        return _branches({**target, **{k: v for k, v in schema.items() if k != "$ref"}}, root)
    out = [schema]
    for key in ("anyOf", "oneOf"):
        for branch in schema.get(key, []):
            out += _branches(branch, root)
    return out


def _types(schema: Mapping[str, Any]) -> set[str]:
    declared = schema.get("type")
    if declared is None:
        return {"object"} if "properties" in schema else set()
    return {declared} if isinstance(declared, str) else set(declared)


def _child(schema: Mapping[str, Any], key: str) -> Mapping[str, Any] | None:
    if key in schema.get("properties", {}):
        return schema["properties"][key]
    extra = schema.get("additionalProperties")
    return extra if isinstance(extra, dict) else None


# Each kind of job: its entry script (a top-level module of scripts/) and the stages of
# its task whose modules it runs.
JOB_CODE = {
    "sample": ("make_sample", None),
    "dataset": ("build_dataset", None),
    "subset": ("make_subset", None),
    "predict": ("predict", "predict"),
    # Reading parses the answers and runs the judge on them.
    "read": ("read", ("parse", "read")),
    "score": ("score", "score"),
    "score_rater": ("score_rater", "score"),
    "statistics": ("make_statistics", "statistics"),
    # The shared figure families (metrics, breakdowns) read the task's definition only; a
    # task's own families are its figures stage.
    "figure": ("make_figures", "report"),
    "task_figure": ("make_figures", "figures"),
    "tables": ("make_tables", "report"),
    "leaderboard": ("make_leaderboard", "report"),
    # Judge agreement compares verdict files: the task's definition (its labels) only.
    "agreement": ("make_agreement", "report"),
    "manifest": ("make_manifest", None),
    "judge_report": ("judge_report", None),
}
# Jobs that run the task's judge: reading only (scores, statistics, figures and judge
# agreement count the verdicts and labels it wrote and build no judge).
JUDGED_JOBS = ("read",)
# Where a prediction job loads the answer reader by name (novabench.predict.ANSWER_READER).
ANSWER_READER = "novabench.answers"
# Where a reading job loads the judge factory by name, for a judged task only
# (novabench.reading.JUDGE_FACTORY).
JUDGE_FACTORY = "novabench.judges"


@dataclass
class Plan:
    """Which jobs the configuration asks for, and the inputs each needs."""

    config: dict[str, Any]
    basedir: Path

    def task_config(self, task: str) -> dict[str, Any]:
        return self.config["tasks"].get(task) or {}

    def task_enabled(self, task: str) -> bool:
        return bool(self.task_config(task).get("enabled", False))

    def tasks(self) -> list[str]:
        """Configured tasks, in the registry's (the clinical workflow's) order."""
        return [task for task in task_names() if task in self.config["tasks"]]

    def model(self, name: str) -> dict[str, Any]:
        return self.config["models"][name]

    def enabled_models(self) -> list[str]:
        return [n for n, m in self.config["models"].items() if m.get("enabled", True)]

    def jobs(self) -> list[tuple[str, str]]:
        """Every (task, model) pair to predict and score, in a stable order."""
        return [
            (task, name)
            for task in self.tasks()
            if self.task_enabled(task)
            for name in self.enabled_models()
            if task in self.model(name)["tasks"]
        ]

    def idle_reason(self) -> str | None:
        """Why the plan holds no (task, model) job, in one line; None when it holds some."""
        if self.jobs():
            return None
        enabled = [t for t in self.tasks() if self.task_enabled(t)]
        if not enabled:
            why, fix = "every task is disabled", "set tasks.<task>.enabled: true"
        elif not self.enabled_models():
            why, fix = "no model is enabled", "enable a model under models:"
        else:
            why = f"no enabled model runs {' or '.join(enabled)}"
            fix = "add the task to a model's tasks: or enable a model that runs it"
        return f"nothing to predict or score: {why}; only the dataset is built; fix: {fix}"

    def audit_jobs(self) -> list[tuple[str, str]]:
        """(task, model) of each model that names an audit sheet (``models.<name>.audit``;
        novabench.audit) and runs a task whose judge the sheet audits (``Task.audited``)."""
        return [
            (task, name)
            for task, name in self.jobs()
            if get_task(task).audited and "audit" in self.model(name)
        ]

    def audits(self) -> dict[str, str]:
        """The filled judge audit sheet of each model of :meth:`audit_jobs`."""
        return {name: self.resolve(self.model(name)["audit"]) for _, name in self.audit_jobs()}

    def rater_tasks(self) -> list[str]:
        """Enabled tasks the dataset's human raters are scored on (``Task.scores_raters``)."""
        return [t for t in self.tasks() if self.task_enabled(t) and get_task(t).scores_raters]

    def resolve(self, path: str) -> str:
        """Config paths are relative to the working directory, else to the workflow."""
        return resolve_path(path, self.basedir)

    def prompt(self, task: str, model: str) -> str:
        override = self.model(model).get("prompts", {}).get(task)
        return self.resolve(override or self.task_config(task)["prompt"])

    def options(self, task: str) -> dict[str, Any]:
        """The task's scoring options (a change re-scores that task only)."""
        return get_task(task).options(self.task_config(task))

    def reading_options(self, task: str) -> dict[str, Any]:
        """The task's reading options (a change re-reads that task only)."""
        return get_task(task).reading_options(self.task_config(task))

    def upstream(self, task: str) -> tuple[str, str] | None:
        """(upstream task, model) whose predictions ``task`` reads, if configured."""
        spec = get_task(task)
        model = spec.upstream_model(self.task_config(task))
        return None if model is None else (spec.upstream_task, model)

    def external_predictions(self, task: str, model: str) -> str | None:
        path = adapter_class(model, self.model(model)).input_file(
            model, self.model(model).get("settings", {}), task
        )
        return None if path is None else self.resolve(str(path))

    def judge(self, task: str) -> dict[str, Any] | None:
        name = self.task_config(task).get("judge") if get_task(task).needs_judge else None
        return None if name is None else self.judge_config(name)

    def judge_config(self, name: str) -> dict[str, Any]:
        """``judges.<name>`` as ``{name, kind, settings}``, the judges it runs written out
        (a cascade's stages), which is how every judge is built and checked."""
        return self.served_judge(expand_judge(self.config["judges"], name))

    def served_judge(self, judge: dict[str, Any]) -> dict[str, Any]:
        """A judge (or stage) whose ``settings.served_by`` names a ``models:`` entry with
        a server of its own: that entry's model and ``serve`` written in, so the reading
        job serves it (an open-weight judge the pipeline starts itself)."""
        settings = {
            key: self.served_judge(value) if isinstance(value, dict) and "kind" in value else value
            for key, value in (judge.get("settings") or {}).items()
        }
        entry = settings.pop("served_by", None)
        if entry is None:
            return {**judge, "settings": settings}
        where = f"judges.{judge.get('name', '?')}.settings.served_by"
        cfg = self.config["models"].get(entry)
        if cfg is None or not adapter_class(entry, cfg).starts_server:
            raise ConfigError(
                f"{where} names {entry!r}, which is not a models: entry with a server of its own",
                "name a managed entry (config/models/vllm-managed.yaml), or set the judge's "
                "backend.base_url",
            )
        model = cfg.get("settings") or {}
        backend = {"model": model["model"], **(settings.get("backend") or {})}
        served = {"backend": backend, "serve": {**(model.get("serve") or {})}}
        return {**judge, "settings": {**settings, **served}}

    def read_resources(self, task: str, judge_name: str) -> dict[str, int]:
        """What a `read` job asks the scheduler for: a judge it serves itself needs its
        server's GPUs, CPUs and memory (``JudgeKind.job_resources``)."""
        judge = self.reading_judge(task, judge_name)
        if judge is None:
            return dict(READ_RESOURCES)
        return judge_kind(judge["kind"]).job_resources(judge.get("settings") or {})

    def judge_configs(self) -> dict[str, dict[str, Any]]:
        """Every configured judge as ``judges:`` has it, the judges it runs written out."""
        return {
            name: {k: v for k, v in self.judge_config(name).items() if k != "name"}
            for name in self.config["judges"]
        }

    def judge_kinds(self, judge: dict[str, Any]) -> tuple[str, ...]:
        """The kinds a written-out judge runs: its own and its stages' (their code)."""
        return tuple(judge_kind_names(judge))

    def judges_in_use(self) -> dict[str, list[str]]:
        """Name of each judge that will run -> the tasks (with jobs) it judges."""
        judged: dict[str, list[str]] = {}
        for task in dict.fromkeys(task for task, _ in self.jobs()):
            judge = self.judge(task)
            if judge is not None:
                judged.setdefault(judge["name"], []).append(task)
        return judged

    def judge_inputs(self, task: str, judge_name: str | None = None) -> list[str]:
        """Files behind the task's judge, or behind judge ``judge_name`` reading it."""
        judge = self.judge(task) if judge_name is None else self.reading_judge(task, judge_name)
        if judge is None:
            return []
        kind = judge_kind(judge["kind"])
        return kind.input_files(judge["name"], judge.get("settings", {}), task, self.resolve)

    def control_bounds(self, name: str) -> dict[str, Any]:
        """The bounds a control's scores are checked against (its adapter's
        ``control_bounds``, novabench.controls) and whether a failed check stops
        (``models.<name>.control_check``); {} for a model that is no control or is not
        configured (a score file of an earlier run)."""
        model = self.config["models"].get(name)
        if not model or not adapter_exists(model["adapter"]):
            return {}
        bounds = dict(adapter_kind(model["adapter"]).control_bounds)
        return {**bounds, "stop": bool(model.get("control_check", True))} if bounds else {}

    def verdict_judge(self, task: str) -> str:
        """The ``{judge}`` of the task's own verdict files: its judge's config name, or
        the task's reader name (``Task.reader``) for a task without a judge."""
        judge = self.judge(task)
        return get_task(task).reader if judge is None else judge["name"]

    def reading_judge(self, task: str, name: str) -> dict[str, Any] | None:
        """The written-out judge a `read` job of ``task`` runs for the ``{judge}`` wildcard
        ``name``; None for the reader of a task without a judge."""
        spec = get_task(task)
        if not spec.needs_judge:
            if name != spec.reader:
                raise ConfigError(
                    f"{task} is read without a judge, as {spec.reader!r}, not {name!r}",
                    f"ask for verdicts/{task}/{spec.reader}/<model>.jsonl",
                )
            return None
        judge = self.judge_config(name)
        judge_kind(judge["kind"]).check_task(
            f"verdicts/{task}/{name}", name, judge["settings"], task
        )
        return judge

    def code_roots(
        self,
        job: str,
        task: str | None = None,
        model: str | None = None,
        tasks: tuple[str, ...] = (),
        judge_kinds: tuple[str, ...] = (),
        judge: str | None = None,
    ) -> list[str]:
        """The modules a job runs: its entry script, then the plug-ins it loads by name
        (its task's stages, the model's adapter, the judge of a reading job: the task's
        own, or ``judge`` by config name), which the import graph cannot see. ``tasks``:
        the tasks of a job that reads several (tables, leaderboard, agreement);
        ``judge_kinds``: further judges it runs."""
        entry, stages = JOB_CODE[job]
        roots = [entry]
        for name in (task,) if task else tasks:
            if stages:
                stages = (stages,) if isinstance(stages, str) else stages
                roots += get_task(name).code_modules(*stages)
            used = None
            if job in JUDGED_JOBS:
                used = self.judge(name) if judge is None else self.reading_judge(name, judge)
            if used is not None:  # a cascade runs its stages' modules too
                roots.append(JUDGE_FACTORY)
                roots += [type(judge_kind(k)).__module__ for k in judge_kind_names(used)]
        roots += [type(judge_kind(kind)).__module__ for kind in judge_kinds]
        if model is not None and job == "predict":
            roots.append(adapter_module_name(self.model(model)["adapter"]))
            upstream = self.upstream(task) if task else None
            if upstream:  # it reads the upstream model's answers with their task's parser
                roots += [ANSWER_READER, *get_task(upstream[0]).code_modules("parse")]
        # A plug-in outside the package (the config's plugins:) has no fingerprint here.
        graph = code_graph()
        return [root for root in dict.fromkeys(roots) if graph.module_file(root) is not None]

    def code(self, job: str, **job_keys: Any) -> str:
        """The fingerprint of the code and data behind one job (a rule parameter: an edit
        re-runs exactly the jobs whose code changed, and what reads their outputs)."""
        return code_fingerprint(*self.code_roots(job, **job_keys))

    def run_code_files(self) -> dict[str, str]:
        """``{file: hash}`` (``CodeGraph.file_hash``: a module's syntax, a data file's
        bytes) of the code and data behind the numbers the provenance manifest describes:
        the dataset, every prediction, score and statistics job.
        Figures and tables are drawn from those numbers; their code is the commit's, so
        that editing it re-draws them and rewrites no manifest."""
        numbers = ("sample", "dataset", "subset", "predict", "read", "score", "score_rater")
        roots = [JOB_CODE[job][0] for job in (*numbers, "statistics")]
        for task, model in self.jobs():
            roots += self.code_roots("predict", task=task, model=model)
            roots += self.code_roots("read", task=task)
            roots += self.code_roots("score", task=task)
            roots += self.code_roots("statistics", task=task)
        return code_graph().listing(dict.fromkeys(roots))

    def predict_resources(self, name: str) -> dict[str, int]:
        """What a prediction job of model ``name`` asks the scheduler for (``gpu``,
        ``cpus``, ``mem_mb``), as its adapter sizes it (``Adapter.job_resources``); a
        model with a shared server asks for them once, in its service job, and its
        prediction jobs for what a client needs."""
        if name in self.served_models():
            # Clients of the server beside them (threads 0): a group's CPUs are summed,
            # and the server's job already holds the node's share for them.
            return {**Adapter.job_resources({}), "cpus": 0}
        return self.serve_resources(name)

    def serve_resources(self, name: str) -> dict[str, int]:
        """What model ``name``'s job that holds it asks for: its prediction job, or its
        shared server's service job (novabench.serving)."""
        cfg = self.model(name)
        return adapter_class(name, cfg).job_resources(cfg.get("settings") or {})

    def served_models(self) -> list[str]:
        """Models with jobs in this run whose adapter starts a server: one shared server
        per model for all its tasks (rule ``serve_model``)."""
        names = dict.fromkeys(model for _, model in self.jobs())
        return [n for n in names if adapter_class(n, self.model(n)).starts_server]

    def predict_environment(self, name: str) -> str:
        """The conda environment file of model ``name``'s prediction jobs (relative to the
        workflow folder), as its adapter declares it."""
        return adapter_class(name, self.model(name)).environment

    def api_resources(self) -> dict[str, dict[str, set[str]]]:
        """``api_<provider>`` -> {"models": names, "tasks": tasks whose judge calls it,
        "judges": names of the judges in use (a task's own or an agreement judge) that
        call it}: what the `predict` and `read` jobs count against it."""
        resources: dict[str, dict[str, set[str]]] = {}

        def users(resource: str) -> dict[str, set[str]]:
            return resources.setdefault(
                resource, {"models": set(), "tasks": set(), "judges": set()}
            )

        for name in self.enabled_models():
            cfg = self.model(name)
            resource = adapter_class(name, cfg).api_resource(cfg.get("settings", {}))
            if resource:
                users(resource)["models"].add(name)
        for name, tasks in self.judges_in_use().items():
            judge = self.judge_config(name)
            resource = judge_kind(judge["kind"]).api_resource(judge.get("settings", {}))
            if resource:
                users(resource)["tasks"].update(tasks)
                users(resource)["judges"].add(name)
        for name in self.agreement_judge_names():
            judge = self.judge_config(name)
            resource = judge_kind(judge["kind"]).api_resource(judge.get("settings", {}))
            if resource:
                users(resource)["judges"].add(name)
        return resources

    def agreement_judge_names(self) -> list[str]:
        """The further judges ``reporting.agreement_judges`` names, for tasks with jobs."""
        listed = (self.config.get("reporting") or {}).get("agreement_judges") or {}
        tasks = {task for task, _ in self.jobs()}
        names = [n for task, names in listed.items() if task in tasks for n in names or []]
        return list(dict.fromkeys(names))

    def key_variables(self) -> list[str]:
        """The environment variables holding the configured API keys: every
        ``api_key_env`` under ``models`` and ``judges`` (novabench.redaction removes their
        values from what servers send back)."""
        names: set[str] = set()

        def walk(node: Any) -> None:
            if isinstance(node, dict):
                for key, value in node.items():
                    if key == "api_key_env" and isinstance(value, str):
                        names.add(value)
                    walk(value)
            elif isinstance(node, list):
                for value in node:
                    walk(value)

        walk([self.config.get("models"), self.config.get("judges")])
        return sorted(names)

    def check_environment(self) -> None:
        """Once per real run, before any job: every model with jobs and every judge in use
        can reach its backend. Every problem is named at once, not the first only."""
        problems: list[NovaError] = []
        for name in dict.fromkeys(model for _, model in self.jobs()):
            cfg = self.model(name)
            try:
                adapter_class(name, cfg).check_environment(name, cfg.get("settings", {}))
            except NovaError as exc:
                problems.append(exc)
        for name, tasks in self.judges_in_use().items():
            judge = self.judge_config(name)
            kind = judge_kind(judge["kind"])
            problems += kind.environment_problems(
                name, judge.get("settings", {}), tasks, self.resolve
            )
        if len(problems) == 1:
            raise problems[0]
        if problems:
            raise NovaError(
                f"{len(problems)} problems before the run: "
                + " | ".join(f"({i}) {p}" for i, p in enumerate(problems, 1))
            )


def check_config(config: dict[str, Any], basedir: Path) -> Plan:
    """Check what the schema cannot, at plan time (a dry run too); return the run plan."""
    plan = Plan(config, Path(basedir))
    _coerce_settings(config)
    _check_dataset(config["dataset"])
    _check_judges(plan)
    _check_tasks(plan)
    _check_models(plan)
    check_reporting(config)
    return plan


def _coerce_settings(config: dict[str, Any]) -> None:
    """Model and judge settings have their adapter's or kind's own schema (not in the
    config schema): coerce ``--config`` strings against it too."""
    for name, model in config["models"].items():
        if adapter_exists(model["adapter"]) and isinstance(model.get("settings"), dict):
            coerce_config(model["settings"], adapter_class(name, model).settings_schema)
    for judge in config["judges"].values():
        try:
            schema = judge_kind(judge["kind"]).settings_schema
        except ConfigError:
            continue  # an unknown kind: _check_judges names it
        if isinstance(judge.get("settings"), dict):
            coerce_config(judge["settings"], schema)


def _check_dataset(dataset: dict[str, Any]) -> None:
    if dataset["source"] == "local" and not dataset.get("local_path"):
        raise ConfigError(
            "dataset.source is local but dataset.local_path is not set",
            "set dataset.local_path to the folder of the downloaded dataset repository",
        )
    if dataset["source"] == "local":
        # At plan time, so a dry run catches a wrong folder and a real run starts nothing
        # (the dataset job would fail behind Snakemake's own lines).
        from novabench.dataset.layouts import detect_layout

        try:
            detect_layout(Path(str(dataset["local_path"])).expanduser())
        except DatasetError as exc:
            raise ConfigError(f"dataset.local_path: {exc}") from None
    tag = dataset.get("tag")
    if tag and str(tag).lower() in SHARED_FOLDERS:
        raise ConfigError(
            f"dataset.tag {tag!r} names a folder that every dataset shares (results/{tag}/)",
            f"choose a tag other than {', '.join(SHARED_FOLDERS)}",
        )
    lo, hi = dataset["sample"]["images_per_case"]
    if lo > hi:
        raise ConfigError(
            f"dataset.sample.images_per_case is [{lo}, {hi}]", "give [minimum, maximum]"
        )


def _check_tasks(plan: Plan) -> None:
    """Each enabled task: its judge exists and judges it, its upstream model runs."""
    config = plan.config
    for task in plan.tasks():
        if not plan.task_enabled(task):
            continue
        judge = plan.task_config(task).get("judge")
        if get_task(task).needs_judge and judge not in config["judges"]:
            raise ConfigError(
                f"tasks.{task}.judge names {judge!r}, which is not under judges:",
                "add it under judges: or name an existing judge",
            )
        if judge is not None:
            _check_judge_task(f"tasks.{task}.judge", plan.judge_config(judge), task)
        upstream = plan.upstream(task)
        if upstream:
            _check_upstream(plan, task, *upstream)


def _check_judge_task(key: str, judge: dict[str, Any], task: str) -> None:
    judge_kind(judge["kind"]).check_task(key, judge["name"], judge["settings"], task)


def _check_upstream(plan: Plan, task: str, upstream_task: str, name: str) -> None:
    model = plan.config["models"].get(name)
    if (
        model is None
        or not model.get("enabled", True)
        or upstream_task not in model["tasks"]
        or not plan.task_enabled(upstream_task)
    ):
        raise ConfigError(
            f"tasks.{task} reads the {upstream_task} of {name!r}, which is not an enabled "
            f"{upstream_task} model",
            f"use `reference` or the name of a model that runs {upstream_task}",
        )


def _check_judges(plan: Plan) -> None:
    for name, judge in plan.config["judges"].items():
        try:
            kind = judge_kind(judge["kind"])
        except ConfigError as exc:
            raise ConfigError(f"judges.{name}.kind: {exc}") from None
        settings = plan.served_judge({"name": name, **judge})["settings"]
        kind.check_settings(name, settings, plan.resolve)
        plan.judge_config(name)  # the judges it names (a cascade's stages) exist


def _check_models(plan: Plan) -> None:
    """Every model: a known adapter, valid settings, the tasks it can run, its prompts."""
    for name, model in plan.config["models"].items():
        _check_model_name(name)
        if not adapter_exists(model["adapter"]):
            raise ConfigError(
                f"models.{name}.adapter: no adapter called {model['adapter']!r}",
                "use an adapter documented in config/README.md",
            )
        adapter = adapter_class(name, model)
        adapter.check_settings(name, model.get("settings", {}))
        tasks = [task for task, job_model in plan.jobs() if job_model == name]
        if tasks:  # a disabled model (or one whose tasks are all off) does not run
            adapter.check_tasks(name, model.get("settings", {}), tasks)
        check_model_info(name, model)
        if "audit" in model:
            _check_audit(plan, name, model)
    for task, name in plan.jobs():
        adapter = adapter_class(name, plan.model(name))
        if not adapter.supports(task):
            raise ConfigError(
                f"models.{name}: the {plan.model(name)['adapter']} adapter cannot run {task}",
                f"remove {task} from models.{name}.tasks",
            )
        if get_task(task).needs_box_format:
            _check_box_format(name, plan.model(name), adapter, task)
        prompt = plan.prompt(task, name)
        if not Path(prompt).is_file():
            raise ConfigError(
                f"prompt template {prompt} (task {task}, model {name}) does not exist",
                f"fix tasks.{task}.prompt or models.{name}.prompts",
            )


def _check_model_name(name: str) -> None:
    """A model may not take a word a task's settings reserve (``Task.reserved_model_names``):
    the setting would read the word, and the model be silently ignored."""
    for task in task_names():
        meaning = get_task(task).reserved_model_names.get(name)
        if meaning is not None:
            raise ConfigError(
                f"models.{name}: the name {name!r} is reserved ({meaning})",
                "give the model another name",
            )


def _check_box_format(name: str, model: dict[str, Any], adapter: type[Adapter], task: str) -> None:
    """A model answering boxes declares their convention, unless its adapter fixes one or
    finds its own (hf_local: the checkpoint's family, checked when the job runs)."""
    finds_own = adapter.native_box_format is not Adapter.native_box_format
    if adapter.box_format is None and not finds_own and not model.get("box_format"):
        raise ConfigError(
            f"models.{name} runs {task} but declares no box_format",
            f"set models.{name}.box_format to the model's box convention, one of "
            f"{', '.join(BOX_FORMATS)} (see config/README.md)",
        )


def _check_audit(plan: Plan, name: str, model: dict[str, Any]) -> None:
    """A model's audit sheet audits the judge of a task it runs (``Task.audited``) and
    exists."""
    audited = [task for task in task_names() if get_task(task).audited]
    if not set(audited) & set(model["tasks"]):
        raise ConfigError(
            f"models.{name}.audit: {name} does not run {' or '.join(audited)}, whose judge "
            "the sheet audits",
            f"remove models.{name}.audit",
        )
    path = plan.resolve(model["audit"])
    if not Path(path).is_file():
        raise ConfigError(
            f"models.{name}.audit: no audit sheet at {path}",
            "draw one with `novabench audit draw` and label it, or remove the key",
        )


def check_reporting(config: dict[str, Any]) -> None:
    """The models and judges ``reporting:`` names exist; agreement judges judge the task."""
    reporting, models = config.get("reporting") or {}, config.get("models") or {}
    named = [("reporting.reference_model", reporting.get("reference_model"))]
    named += [("reporting.controls", name) for name in reporting.get("controls") or []]
    for key, name in named:
        if name is not None and name not in models:
            raise ConfigError(
                f"{key} names {name!r}, which is not under models:",
                "name a configured model (or null for the default)",
            )
    judges = config.get("judges") or {}
    for task, names in (reporting.get("agreement_judges") or {}).items():
        key = f"reporting.agreement_judges.{task}"
        for name in names:
            if name not in judges:
                raise ConfigError(f"{key} names {name!r}, which is not under judges:", "add it")
            judge = expand_judge(judges, name)
            _check_judge_task(key, judge, task)
            if name == (config.get("tasks") or {}).get(task, {}).get("judge"):
                raise ConfigError(
                    f"{key} lists {name!r}, the task's own judge",
                    "list only the judges to compare it with",
                )


# --- the one reader --------------------------------------------------------------------

SCHEMA = Path("workflow") / "schemas" / "config.schema.yaml"


def config_schema(basedir: Path) -> dict[str, Any]:
    """The config schema of the workflow in ``basedir`` with every registered task merged
    in: its block under ``tasks`` (``Task.config_schema``), its name among the tasks a model
    may run and name a prompt for, and, for a task with judge labels, its list of judges
    under ``reporting.agreement_judges``."""
    import yaml

    schema = yaml.safe_load((Path(basedir) / SCHEMA).read_text(encoding="utf-8"))
    names = task_names()
    schema["$defs"]["task"]["enum"] = list(names)
    properties = schema["properties"]
    properties["tasks"]["properties"] = {name: get_task(name).config_schema() for name in names}
    model = properties["models"]["additionalProperties"]["properties"]
    model["prompts"]["properties"] = {name: {"$ref": "#/$defs/prompt"} for name in names}
    judges = {"type": "array", "items": {"$ref": "#/$defs/name"}, "uniqueItems": True}
    properties["reporting"]["properties"]["agreement_judges"]["properties"] = {
        name: judges for name in names if get_task(name).agreement_labels
    }
    return schema


def validate_config(config: dict[str, Any], schema: Mapping[str, Any]) -> None:
    """Check ``config`` against ``schema``, filling in the schema's defaults (as
    Snakemake's ``validate`` does); ConfigError naming the offending key."""
    import jsonschema

    base = jsonschema.Draft202012Validator
    check_properties = base.VALIDATORS["properties"]

    def set_defaults(validator: Any, properties: Any, instance: Any, subschema: Any) -> Any:
        if isinstance(instance, dict):
            for key, value in properties.items():
                if "default" in value:
                    instance.setdefault(key, value["default"])
        yield from check_properties(validator, properties, instance, subschema)

    validator = jsonschema.validators.extend(base, {"properties": set_defaults})
    try:
        validator(schema).validate(config)
    except jsonschema.ValidationError as exc:
        raise ConfigError(describe_validation_error(exc).removeprefix("config error: ")) from None


def read_config(config: dict[str, Any], basedir: Path, files: Sequence[str | Path] = ()) -> Plan:
    """Read a merged configuration as every reader does (in place): its size bounded (no
    alias bomb, no NaN), plug-ins loaded, catalog names expanded, ``--config`` strings
    typed, checked by the schema with the tasks' blocks (defaults filled in), each model's
    tasks filled in, then checked by :func:`check_config`; the run plan. ``files``: the
    config files another reader merged into ``config`` (Snakemake), read again strictly
    for what their loaded content cannot show (a key given twice)."""
    from novabench.catalog import default_catalog_dir, expand_models
    from novabench.plugins import load_plugins
    from novabench.yaml_data import check_loaded

    for path in files:
        read_config_file(Path(path))
    try:
        check_loaded(config, "the config")
    except NovaError as exc:
        raise ConfigError(str(exc)) from None
    plugins = config.get("plugins")
    load_plugins(plugins if isinstance(plugins, list) else [], Path(basedir))
    expand_models(config, default_catalog_dir(basedir))
    schema = config_schema(basedir)
    coerce_config(config, schema)
    check_error_rate_units(config)
    validate_config(config, schema)
    _default_model_tasks(config)
    return check_config(config, Path(basedir))


def check_error_rate_units(config: dict[str, Any]) -> None:
    """``models.<name>.max_error_rate`` is a fraction of images, as
    ``reporting.max_error_rate``; a value above 1 is the percent it once was."""
    for name, model in (config.get("models") or {}).items():
        rate = model.get("max_error_rate") if isinstance(model, dict) else None
        if isinstance(rate, int | float) and not isinstance(rate, bool) and rate > 1:
            raise ConfigError(
                f"models.{name}.max_error_rate is {rate}, a percent; it is a fraction of "
                "images (as reporting.max_error_rate)",
                f"write max_error_rate: {rate / 100:g}",
            )


def _default_model_tasks(config: dict[str, Any]) -> None:
    """A model that lists no ``tasks`` runs every task its adapter supports."""
    for model in config["models"].values():
        if "tasks" not in model:
            known = adapter_exists(model["adapter"])  # else _check_models names it
            adapter = adapter_kind(model["adapter"]) if known else None
            model["tasks"] = [t for t in task_names() if adapter and adapter.supports(t)]


def plan_from_files(basedir: Path, configfiles: list[Path]) -> Plan:
    """The plan Snakemake would make: ``config/config.yaml`` of the workflow in ``basedir``
    with each of ``configfiles`` merged over it (as ``--configfile`` does), read by
    :func:`read_config`."""
    return read_config(merged_config_files(basedir, configfiles), Path(basedir))


def merged_config_files(basedir: Path | None, configfiles: Sequence[Path]) -> dict[str, Any]:
    """``config/config.yaml`` of the workflow in ``basedir`` (none: no workflow) with each
    of ``configfiles`` merged over it, as ``snakemake --configfile`` merges them."""
    from novabench.catalog import merge

    files = [] if basedir is None else [Path(basedir) / "config" / "config.yaml"]
    config: dict[str, Any] = {}
    for path in [*files, *map(Path, configfiles)]:
        merge(config, read_config_file(path))
    return config


def read_config_file(path: Path) -> dict[str, Any]:
    """One config file, read strictly (novabench.yaml_data.load_yaml: no key twice, no
    NaN, no alias bomb); ConfigError naming the file otherwise."""
    from novabench.yaml_data import read_yaml

    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"config file {path} does not exist", "check --configfile")
    try:
        loaded = read_yaml(path, "the config", "check --configfile")[1] or {}
    except NovaError as exc:
        raise ConfigError(str(exc)) from None
    if not isinstance(loaded, dict):
        raise ConfigError(f"the config {path} is not a mapping", "check --configfile")
    return loaded
