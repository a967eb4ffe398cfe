"""Each plug-in owns its room: a backend, task or judge kind says everything about itself,
and no central file of the workflow names one.

- a toy backend kind (tests/plugins/toy_backend.py, one module) and a toy task
  (tests/plugins/anomaly/: the task, its prompt, its config block) are registered from
  the test suite's own folder through the config's ``plugins:`` and run through the
  workflow with no other file edited;
- the workflow's rules, the plan, the estimate, the scorer and the report name no
  backend kind, task or judge kind in their code.
"""

from __future__ import annotations

import ast
import json
import os
import pkgutil
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import novabench.models
from novabench.config import read_config
from novabench.errors import ConfigError
from novabench.judges import judge_kinds
from novabench.models.base import adapter_kind, unregister_adapter
from novabench.plugins import load_plugins
from novabench.report.inputs import GROUP_CONTROL, GROUP_MODEL, model_group, report_models
from novabench.tasks import builtin_task_names, register_task, unregister_task
from support import ROOT

PLUGINS = ROOT / "tests" / "plugins"
TOY_BACKEND, ANOMALY = PLUGINS / "toy_backend.py", PLUGINS / "anomaly"
SNAKEMAKE = [sys.executable, "-m", "snakemake"]
DEFAULT = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())


@pytest.fixture
def plugins():
    """Both toy plug-ins loaded (again after an earlier test took them out)."""
    backend, task = load_plugins([str(TOY_BACKEND), str(ANOMALY)])
    register_task(task.TASK)
    yield backend, task
    unregister_task("anomaly")
    unregister_adapter("toy")


def toy_config(**changes) -> dict:
    config = json.loads(json.dumps(DEFAULT))
    config["plugins"] = [str(TOY_BACKEND), str(ANOMALY)]
    config["models"] = {"gold": {"adapter": "gold"}, "toy": {"adapter": "toy"}}
    config.update(changes)
    return config


def test_a_plugin_backend_and_task_join_the_plan_without_a_central_edit(plugins):
    plan = read_config(toy_config(), ROOT)
    # A model without tasks: runs every task its adapter supports, the plug-in's included.
    assert ("anomaly", "toy") in plan.jobs() and ("anomaly", "gold") in plan.jobs()
    assert plan.model("toy")["tasks"] == ["localization", "captioning", "diagnosis", "anomaly"]
    # The task's block was merged into the schema: its default and its own key.
    assert plan.task_config("anomaly")["min_boxes"] == 1
    assert plan.prompt("anomaly", "toy") == str(ANOMALY / "anomaly-v1.txt")
    assert plan.options("anomaly") == {"min_boxes": 1}
    # The backend's class decides its environment, resources and report group.
    assert plan.predict_environment("toy") == "envs/inference.yaml"
    assert plan.predict_resources("toy") == {"gpu": 0, "cpus": 1, "mem_mb": 500}
    models = report_models({"toy": {"adapter": "toy"}, "gold": {"adapter": "gold"}})
    assert model_group("toy", models, None) == GROUP_MODEL
    assert model_group("gold", models, None) == GROUP_CONTROL


def test_a_plugin_tasks_block_is_checked_like_a_builtin_one(plugins):
    config = toy_config()
    config["tasks"]["anomaly"] = {"min_boxes": 0}
    with pytest.raises(ConfigError, match=r"invalid value at tasks\.anomaly\.min_boxes"):
        read_config(config, ROOT)
    config["tasks"]["anomaly"] = {"max_boxes": 2}
    with pytest.raises(ConfigError, match=r"unknown key tasks\.anomaly\.max_boxes"):
        read_config(config, ROOT)


def test_a_missing_plugin_is_one_line():
    config = toy_config(plugins=["tests/plugins/nowhere.py"])
    with pytest.raises(ConfigError, match=r"^plugins: tests/plugins/nowhere.py is neither"):
        read_config(config, ROOT)


def test_an_unknown_backend_kind_is_one_line():
    with pytest.raises(ConfigError, match="unknown adapter 'nope'; fix: use one of the modules"):
        adapter_kind("nope")


# What a planned workflow passes its report jobs as ``models`` (sys.argv: the workdir and the
# config files), as JSON by rule.
REPORT_PARAMS = """
import json, sys
from pathlib import Path
from snakemake.api import SnakemakeApi
from snakemake.settings.types import ConfigSettings, DAGSettings, OutputSettings, ResourceSettings

with SnakemakeApi(OutputSettings()) as api:
    planned = api.workflow(
        snakefile=Path("Snakefile").resolve(),
        workdir=Path(sys.argv[1]),
        config_settings=ConfigSettings(configfiles=[Path(p) for p in sys.argv[2:]]),
        resource_settings=ResourceSettings(cores=1),
    )
    planned.dag(DAGSettings())
    rules = planned._workflow.rules
    print(json.dumps({r.name: dict(r.params.items()).get("models") for r in rules}, default=str))
"""


def report_params(tmp_path: Path, backend: Path) -> dict[str, dict]:
    config = toy_config(plugins=[str(backend), str(ANOMALY)])
    configfile = tmp_path / "toy.yaml"
    configfile.write_text(yaml.safe_dump({k: config[k] for k in ("plugins", "models")}))
    done = subprocess.run(
        [sys.executable, "-c", REPORT_PARAMS, str(tmp_path), "config/config.yaml", configfile],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT / "scripts")},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return {rule: models for rule, models in json.loads(done.stdout).items() if models}


def test_a_backends_control_role_is_a_parameter_of_the_report_jobs(tmp_path):
    """The report groups models by their adapter's ``control``: flipping it changes the
    report jobs' parameters, so Snakemake re-runs them (the report imports no adapter)."""
    model = report_params(tmp_path, TOY_BACKEND)
    control = tmp_path / "control" / TOY_BACKEND.name
    control.parent.mkdir()
    text = TOY_BACKEND.read_text()
    control.write_text(text.replace("control: ClassVar[bool] = False", "control = True"))
    flipped = report_params(tmp_path, control)
    assert {"statistics", "figure_metrics"} <= set(model) and set(flipped) == set(model)
    for rule in model:
        assert model[rule]["toy"] == {"adapter": "toy", "control": False}, rule
        assert flipped[rule]["toy"] == {"adapter": "toy", "control": True}, rule
        assert flipped[rule]["gold"] == {"adapter": "gold", "control": True}


def test_the_report_reads_the_role_from_its_parameter():
    # What the planned workflow says, whatever the adapter's class says now.
    assert model_group("gold", {"gold": {"adapter": "gold", "control": False}}, None) == (
        GROUP_MODEL
    )
    assert model_group("toy", {"toy": {"adapter": "toy", "control": True}}, None) == (GROUP_CONTROL)


# --- no central file names a plug-in -------------------------------------------------------


def plugin_names() -> set[str]:
    """Every backend kind, task and judge kind the package defines."""
    backends = {m.name for m in pkgutil.iter_modules(novabench.models.__path__)} - {"base"}
    return backends | set(builtin_task_names()) | set(judge_kinds())


# The modules that must stay free of plug-in names, and the templates and rules.
CENTRAL_MODULES = [
    ROOT / "scripts" / "novabench" / name
    for name in ("cli.py", "config.py", "estimate.py", "reading.py", "score.py")
] + sorted((ROOT / "scripts" / "novabench" / "report").rglob("*.py"))
CENTRAL_TEXTS = sorted((ROOT / "workflow" / "rules").glob("*.smk")) + sorted(
    (ROOT / "workflow" / "report").glob("*.rst")
)
# Where a name is a word of the data, not the plug-in: the colour of gold boxes; the command
# scores answers made elsewhere through the file backend, as a pipeline model of them does.
NOT_PLUGINS = {"figures.py": {"gold"}, "cli.py": {"predictions_file"}}


def _names_in(text: str, names: set[str]) -> set[str]:
    """Names used as a value (a whole string, a path segment or a module path): prose
    in docstrings, comments and captions is not code."""
    found = set()
    for name in names:
        word = re.escape(name)
        if re.search(rf"(^|[/.]){word}($|[/.])", text):
            found.add(name)
    return found


def names_in_python(path: Path, names: set[str]) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if id(node) not in docstrings:
                found |= _names_in(node.value, names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found |= _names_in(node.module, names)
        elif isinstance(node, ast.Import):
            found |= {n for alias in node.names for n in _names_in(alias.name, names)}
    return found


def names_in_text(path: Path, names: set[str]) -> set[str]:
    """Quoted names and path segments in a rule file or a caption template, and in a rule
    file a module or call."""
    text = path.read_text(encoding="utf-8")
    code = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
    rule = path.suffix == ".smk"
    return {
        name
        for name in names
        if re.search(rf"""["'/]{re.escape(name)}["'/.]""", code)
        or (rule and re.search(rf"\b{re.escape(name)}\s*[.(]", code))
    }


@pytest.mark.parametrize("path", CENTRAL_MODULES, ids=lambda p: p.name)
def test_no_central_module_names_a_backend_task_or_judge_kind(path):
    found = names_in_python(path, plugin_names()) - NOT_PLUGINS.get(path.name, set())
    assert not found, f"{path.relative_to(ROOT)} names {sorted(found)}: ask the plug-in instead"


@pytest.mark.parametrize("path", CENTRAL_TEXTS, ids=lambda p: p.name)
def test_no_rule_or_caption_names_a_backend_task_or_judge_kind(path):
    found = names_in_text(path, plugin_names())
    assert not found, f"{path.relative_to(ROOT)} names {sorted(found)}: ask the plug-in instead"


def test_the_grep_finds_a_name_where_code_uses_it(tmp_path):
    # The checks above can fail: each way of naming a kind is caught.
    module = tmp_path / "m.py"
    module.write_text(
        '"""The hf_local adapter is prose."""\n'
        "from novabench.models.hf_local import job_gpus\n"
        'KINDS = ("openai_compatible",)\n'
        'path = f"scores/localization/{x}"\n'
    )
    names = {"hf_local", "openai_compatible", "localization", "gold"}
    assert names_in_python(module, names) == {"hf_local", "openai_compatible", "localization"}
    rule = tmp_path / "r.smk"
    rule.write_text('# "gold" in a comment\nif adapter == "vllm":\n    x = "gold boxes"\n')
    assert names_in_text(rule, {"vllm", "gold"}) == {"vllm"}


# --- end to end through the workflow ---------------------------------------------------------


@pytest.mark.slow
def test_a_plugin_backend_and_task_run_end_to_end_through_the_workflow(tmp_path):
    """Snakemake on the sample with both plug-ins and only the toy task enabled: the
    predictions, scores, statistics and tables of the toy task, for the built-in gold
    control and the plug-in backend. Asserts outputs only, so that a new stage between
    prediction and scoring does not break it."""
    config = {
        "plugins": [str(TOY_BACKEND), str(ANOMALY)],
        "dataset": {"source": "sample", "sample": {"n_cases": 4, "images_per_case": [1, 2]}},
        "tasks": {
            "localization": {"enabled": False},
            "captioning": {"enabled": False},
            "diagnosis": {"enabled": False},
            "anomaly": {"min_boxes": 1},
        },
        "models": {"gold": {"adapter": "gold"}, "toy": {"adapter": "toy"}},
        "reporting": {"bootstrap": {"resamples": 100}},
    }
    configfile = tmp_path / "toy.yaml"
    configfile.write_text(yaml.safe_dump(config))
    done = subprocess.run(
        [*SNAKEMAKE, "-d", str(tmp_path), "--cores", "2", "--configfile", str(configfile)],
        cwd=ROOT,
        # The jobs import this checkout's package, whatever else is installed.
        env={**os.environ, "PYTHONPATH": str(ROOT / "scripts")},
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    results = tmp_path / "results" / "sample"
    for model in ("gold", "toy"):
        lines = (results / "predictions" / "anomaly" / f"{model}.jsonl").read_text().splitlines()
        assert {json.loads(line)["status"] for line in lines} == {"ok"}
        scores = json.loads((results / "scores" / "anomaly" / f"{model}.json").read_text())
        assert scores["metrics"]["Accuracy"] == 100.0  # both answer with the reference
    assert not (results / "predictions" / "localization").exists()
    markdown = (results / "tables" / "anomaly.md").read_text()
    assert markdown.startswith("## Anomaly presence on synthetic sample (not NOVA)")
    assert re.search(r"\| Models \| toy \| 100\.0", markdown), markdown
    assert "| Controls | gold | 100.0" in markdown
    assert (results / "figures" / "anomaly_metrics.png").is_file()


def test_a_figure_caption_is_the_tasks_own_text(plugins):
    from novabench.report.labels import TaskCaption

    metrics = TaskCaption("anomaly", "metrics", "the sample")
    assert str(metrics) == "Accuracy of the yes/no answer on the sample."
    assert str(TaskCaption("anomaly", "breakdown", "x")) == (
        "The headline per-image metric of anomaly"
    )
    assert str(TaskCaption("localization", "breakdown", "x")).startswith("Hit\\@30 (%")
    # What Snakemake compares between runs: the same whatever the text says.
    assert repr(metrics) == "TaskCaption('anomaly', 'metrics')"
