"""Checks on the configuration beyond its JSON schema, and the run plan derived from it.

The schema (workflow/schemas/config.schema.yaml) checks shapes and names; this module
checks what a schema cannot (files exist, names refer to things that exist, a model can
run the tasks it lists) and derives which (task, model) jobs the DAG contains. Every
problem is reported as one line naming the key and the fix.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from novabench.errors import ConfigError

TASKS = ("localization", "captioning", "diagnosis")
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


def rater_slug(rater: str) -> str:
    """A rater id as it appears in file names (upstream ids may hold any character)."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", rater.strip()).strip("._-")
    return slug or "unnamed"


@dataclass
class Plan:
    """Which jobs the configuration asks for, and the inputs each needs."""

    config: dict[str, Any]
    basedir: Path

    def task_enabled(self, task: str) -> bool:
        return bool(self.config["tasks"][task]["enabled"])

    def model(self, name: str) -> dict[str, Any]:
        return self.config["models"][name]

    def enabled_models(self) -> list[str]:
        return [n for n, m in self.config["models"].items() if m.get("enabled", True)]

    def jobs(self) -> list[tuple[str, str]]:
        """Every (task, model) pair to predict and score, in a stable order."""
        return [
            (task, name)
            for task in TASKS
            if self.task_enabled(task)
            for name in self.enabled_models()
            if task in self.model(name)["tasks"]
        ]

    def resolve(self, path: str) -> str:
        """Config paths are relative to the working directory, else to the workflow."""
        candidate = Path(path).expanduser()
        if candidate.is_absolute() or candidate.exists():
            return str(candidate)
        in_workflow = self.basedir / candidate
        return str(in_workflow) if in_workflow.exists() else str(candidate)

    def prompt(self, task: str, model: str) -> str:
        override = self.model(model).get("prompts", {}).get(task)
        return self.resolve(override or self.config["tasks"][task]["prompt"])

    def findings_model(self, task: str) -> str | None:
        if task != "diagnosis":
            return None
        findings = self.config["tasks"]["diagnosis"]["findings"]
        return None if findings == "reference" else findings

    def external_predictions(self, task: str, model: str) -> str | None:
        cfg = self.model(model)
        if cfg["adapter"] != "predictions_file":
            return None
        from novabench.models.predictions_file import predictions_path

        return self.resolve(str(predictions_path(model, cfg.get("settings", {}), task)))

    def check_environment(self) -> None:
        """Once per real run, before any job: every enabled model, and the LLM judge of
        every task that has jobs, can reach its backend."""
        from novabench.judges import llm
        from novabench.models.base import adapter_class

        for name in self.enabled_models():
            cfg = self.model(name)
            if any(self.task_enabled(t) for t in cfg["tasks"]):
                adapter_class(name, cfg).check_environment(name, cfg.get("settings", {}))
        for name, tasks in self.llm_judge_tasks().items():
            settings = self.config["judges"][name].get("settings", {})
            llm.check_environment(name, settings, tasks, resolve=self.resolve)

    def llm_judge_tasks(self) -> dict[str, list[str]]:
        """Name of each `llm` judge that will run -> the tasks (with jobs) it judges."""
        judged: dict[str, list[str]] = {}
        with_jobs = {task for task, _ in self.jobs()}
        for task in TASKS:
            judge = self.judge(task) if task in with_jobs else None
            if judge is not None and judge["kind"] == "llm":
                judged.setdefault(judge["name"], []).append(task)
        return judged

    def judge(self, task: str) -> dict[str, Any] | None:
        if task == "localization":
            return None
        name = self.config["tasks"][task]["judge"]
        return {"name": name, **self.config["judges"][name]}


def check_config(config: dict[str, Any], basedir: Path) -> Plan:
    """Check what the schema cannot; return the run plan."""
    from novabench.judges import llm
    from novabench.models.base import adapter_exists

    plan = Plan(config, Path(basedir))
    dataset = config["dataset"]
    if dataset["source"] == "local" and not dataset.get("local_path"):
        raise ConfigError(
            "dataset.source is local but dataset.local_path is not set",
            "set dataset.local_path to the folder of the downloaded dataset repository",
        )
    lo, hi = dataset["sample"]["images_per_case"]
    if lo > hi:
        raise ConfigError(
            f"dataset.sample.images_per_case is [{lo}, {hi}]", "give [minimum, maximum]"
        )
    for name, judge in config["judges"].items():
        if judge["kind"] == "llm":
            llm.check_settings(name, judge.get("settings", {}), plan.resolve)
    for name, model in config["models"].items():
        if not adapter_exists(model["adapter"]):
            raise ConfigError(
                f"models.{name}.adapter: no adapter called {model['adapter']!r}",
                "use an adapter documented in config/README.md",
            )
    for task in TASKS:
        if not plan.task_enabled(task):
            continue
        judge = config["tasks"][task].get("judge")
        if judge is not None and judge not in config["judges"]:
            raise ConfigError(
                f"tasks.{task}.judge names {judge!r}, which is not under judges:",
                "add it under judges: or name an existing judge",
            )
        if judge is not None and config["judges"][judge]["kind"] == "llm":
            settings = config["judges"][judge].get("settings", {})
            paths = llm.check_settings(judge, settings, plan.resolve)["prompts"]
            llm.read_prompt(judge, task, paths[task])
        for name in plan.enabled_models():
            if task in plan.model(name)["tasks"]:
                prompt = plan.prompt(task, name)
                if not Path(prompt).is_file():
                    raise ConfigError(
                        f"prompt template {prompt} (task {task}, model {name}) does not exist",
                        "fix tasks.<task>.prompt or models.<name>.prompts",
                    )
    upstream = plan.findings_model("diagnosis")
    if upstream and plan.task_enabled("diagnosis"):
        model = config["models"].get(upstream)
        if (
            model is None
            or not model.get("enabled", True)
            or "captioning" not in model["tasks"]
            or not plan.task_enabled("captioning")
        ):
            raise ConfigError(
                f"tasks.diagnosis.findings names {upstream!r}, which is not an enabled "
                "captioning model",
                "use `reference` or the name of a model that runs captioning",
            )
    return plan
