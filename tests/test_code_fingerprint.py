"""A job's code fingerprint: the modules its entry script imports and the data they name."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from novabench.code_fingerprint import SCRIPTS, CodeGraph
from novabench.errors import ConfigError

FILES = {
    "entry.py": "from novabench import shared\nimport yaml\n",
    "novabench/__init__.py": "",
    "novabench/shared.py": (
        "from .helpers import tool\n"
        "def late():\n"
        "    from novabench.pkg import sub\n"
        "    return sub\n"
    ),
    "novabench/helpers.py": "VOCABULARY = 'words.yaml'\n",
    "novabench/pkg/__init__.py": "",
    "novabench/pkg/sub.py": "import novabench.leaf\n",
    "novabench/leaf.py": "PATH = 'data/oth' + 'er.yaml'\n",
    "novabench/unused.py": "import novabench.shared\n",
    "novabench/plugin.py": "import importlib\nimportlib.import_module('novabench.unused')\n",
    "novabench/words.yaml": "a: 1\n",
    "novabench/data/other.yaml": "b: 2\n",
}


def write_tree(root: Path) -> Path:
    for name, text in FILES.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


@pytest.fixture
def tree(tmp_path):
    return write_tree(tmp_path / "scripts")


def names(graph: CodeGraph, roots) -> list[str]:
    return [p.relative_to(graph.root).as_posix() for p in graph.files(roots)]


def test_the_closure_follows_every_kind_of_import_and_names_data(tree):
    graph = CodeGraph(tree)
    assert names(graph, ["entry"]) == [
        "entry.py",
        "novabench/__init__.py",
        "novabench/helpers.py",  # relative import
        "novabench/leaf.py",
        "novabench/pkg/__init__.py",  # the package runs before its module
        "novabench/pkg/sub.py",  # imported inside a function
        "novabench/shared.py",
        "novabench/words.yaml",  # named by a string literal
    ]
    # A name built from pieces is not seen (other.yaml): the test on the real package
    # below makes sure every data file is named whole somewhere.


def test_a_module_loaded_by_name_is_not_an_edge(tree):
    graph = CodeGraph(tree)
    assert "novabench/unused.py" not in names(graph, ["novabench.plugin"])
    assert "novabench/unused.py" in names(graph, ["novabench.plugin", "novabench.unused"])


def test_the_fingerprint_follows_content_not_place_or_time(tree, tmp_path):
    graph = CodeGraph(tree)
    before = graph.fingerprint(["entry"])
    moved = tmp_path / "elsewhere" / "scripts"
    shutil.copytree(tree, moved)
    assert CodeGraph(moved).fingerprint(["entry"]) == before
    # A newer modification time alone changes nothing.
    os.utime(tree / "novabench" / "helpers.py", (1e9, 1e9))
    assert graph.fingerprint(["entry"]) == before
    # A byte of a data file does, and so does a module; one not imported does not.
    (tree / "novabench" / "unused.py").write_text("import os\n")
    assert graph.fingerprint(["entry"]) == before
    (tree / "novabench" / "words.yaml").write_text("a: 2\n")
    after_data = graph.fingerprint(["entry"])
    assert after_data != before
    (tree / "novabench" / "pkg" / "sub.py").write_text("import novabench.leaf as leaf\n")
    assert graph.fingerprint(["entry"]) not in (before, after_data)


DOCUMENTED = """\"\"\"A module.\"\"\"

LIMIT = 3  # how many


class Judge:
    \"\"\"A class.\"\"\"

    def verdict(self, text):
        \"\"\"A method.\"\"\"
        return len(text) > LIMIT


async def fetch():
    \"\"\"A coroutine.\"\"\"
    return "not a docstring"
"""

REWORDED = """# A new comment line above the module's docstring shifts every line below.
\"\"\"The module, described at more length
over two lines.\"\"\"

LIMIT = 3  # how many words


class Judge:
    \"\"\"The class, reworded.\"\"\"

    def verdict(self, text):
        # Why the limit.
        \"\"\"The method, reworded.\"\"\"

        return len(text) > LIMIT  # a trailing comment


async def fetch():
    \"\"\"The coroutine, reworded.\"\"\"
    return "not a docstring"
"""


@pytest.mark.parametrize(
    "edit",
    [
        ("LIMIT = 3", "LIMIT = 4"),  # one constant
        ('"not a docstring"', '"not a docstring either"'),  # a string that is a value
        ("> LIMIT", ">= LIMIT"),
        ("return len", "x = 1\n        return len"),
    ],
)
def test_a_code_edit_changes_the_module_hash_and_a_comment_or_docstring_does_not(tree, edit):
    graph = CodeGraph(tree)
    module = tree / "novabench" / "judge.py"
    module.write_text(DOCUMENTED)
    before = graph.fingerprint(["novabench.judge"])
    module.write_text(REWORDED)
    assert graph.fingerprint(["novabench.judge"]) == before
    module.write_text(DOCUMENTED.replace(*edit))
    assert graph.fingerprint(["novabench.judge"]) != before


def test_a_file_name_in_a_docstring_is_no_data_edge(tree):
    graph = CodeGraph(tree)
    helpers = tree / "novabench" / "helpers.py"
    helpers.write_text('"""Reads other.yaml."""\nVOCABULARY = "words.yaml"\n')
    assert "novabench/data/other.yaml" not in names(graph, ["novabench.helpers"])
    assert "novabench/words.yaml" in names(graph, ["novabench.helpers"])


def test_an_unknown_root_is_named(tree):
    with pytest.raises(ValueError, match="no module 'missing'"):
        CodeGraph(tree).files(["missing"])


def test_a_new_import_joins_the_closure(tree):
    graph = CodeGraph(tree)
    assert "novabench/leaf.py" not in names(graph, ["novabench.helpers"])
    path = tree / "novabench" / "helpers.py"
    path.write_text(path.read_text() + "from novabench import leaf\n")
    assert "novabench/leaf.py" in names(graph, ["novabench.helpers"])


# --- the real package ----------------------------------------------------------------


def test_every_data_file_of_the_package_is_named_by_a_module():
    """Otherwise no fingerprint sees it, and editing it would leave stale numbers."""
    graph = CodeGraph(SCRIPTS)
    modules = [
        ".".join(p.relative_to(SCRIPTS).with_suffix("").parts).removesuffix(".__init__")
        for p in (SCRIPTS / "novabench").rglob("*.py")
    ]
    named = set(graph.files(modules))
    unnamed = [
        path.relative_to(SCRIPTS).as_posix()
        for paths in graph.data_files().values()
        for path in paths
        if path not in named
    ]
    assert unnamed == []


@pytest.mark.parametrize("entry", ["predict", "score", "make_statistics", "make_figures"])
def test_entry_scripts_reach_no_plug_in(entry):
    """Adapters, judge kinds and tasks are loaded by name: a job adds the ones it runs."""
    graph = CodeGraph(SCRIPTS)
    files = names(graph, [entry])
    plugins = [
        f
        for f in files
        if f.startswith(("novabench/models/", "novabench/tasks/"))
        and f.rsplit("/", 1)[-1] not in ("__init__.py", "base.py")
    ]
    from novabench.judges import judge_kinds

    kinds = {type(kind).__module__.replace(".", "/") + ".py" for kind in judge_kinds().values()}
    assert plugins == [] and kinds & set(files) == set()


def test_plan_roots_add_the_model_adapter_task_and_judge():
    from novabench.config import plan_from_files

    plan = plan_from_files(SCRIPTS.parent, [SCRIPTS.parent / "config" / "config.yaml"])
    assert plan.code_roots("predict", task="localization", model="classical") == [
        "predict",
        *plan.code_roots("predict", task="localization")[1:],
        "novabench.models.classical",
    ]
    # Only reading runs the judge: scoring counts its verdicts.
    reading = plan.code_roots("read", task="diagnosis", model="gold")
    assert reading[0] == "read" and "novabench.judges.diagnosis_matcher" in reading
    assert "novabench.tasks.diagnosis.parser" in reading
    scoring = plan.code_roots("score", task="diagnosis", model="gold")
    assert scoring[0] == "score" and not any(m.startswith("novabench.judges") for m in scoring)
    # Reading with a judge named by the `{judge}` wildcard runs that judge, of a kind
    # that judges the task; a task without a judge is read as its reader.
    assert plan.code_roots("read", task="diagnosis", judge="matcher") == reading
    with pytest.raises(ConfigError, match="judges captioning, not diagnosis"):
        plan.code_roots("read", task="diagnosis", judge="keywords")
    assert plan.reading_judge("localization", "boxes") is None
    assert plan.code("score", task="diagnosis") != plan.code("score", task="localization")
    assert len(plan.code("predict", task="localization", model="gold")) == 16


def test_a_prediction_that_reads_upstream_answers_runs_their_parser(tmp_path):
    """Diagnosis from a captioning model's captions reads them with the captioning reader
    inside the prediction job: that reader is in the job's code, and only in that job's."""
    import yaml

    from novabench.config import plan_from_files

    config = SCRIPTS.parent / "config" / "config.yaml"
    chained = tmp_path / "chained.yaml"
    chained.write_text(yaml.safe_dump({"tasks": {"diagnosis": {"findings": "classical"}}}))
    plain = plan_from_files(SCRIPTS.parent, [config])
    plan = plan_from_files(SCRIPTS.parent, [config, chained])
    roots = plan.code_roots("predict", task="diagnosis", model="gold")
    assert {"novabench.answers", "novabench.tasks.captioning"} <= set(roots)
    assert "novabench.answers" not in plain.code_roots("predict", task="diagnosis", model="gold")
    assert plan.code("predict", task="diagnosis", model="gold") != plain.code(
        "predict", task="diagnosis", model="gold"
    )


def covers(plan, job: str, module: str, **keys) -> bool:
    """Whether the fingerprint of ``job`` (its code roots' import closure) holds ``module``."""
    from novabench.code_fingerprint import code_graph

    graph = code_graph()
    return graph.module_file(module) in graph.files(plan.code_roots(job, **keys))


def test_the_captioning_parser_is_code_of_reading_not_of_its_predictions(tmp_path):
    import yaml

    from novabench.config import plan_from_files

    config = SCRIPTS.parent / "config" / "config.yaml"
    chained = tmp_path / "chained.yaml"
    chained.write_text(yaml.safe_dump({"tasks": {"diagnosis": {"findings": "classical"}}}))
    plain = plan_from_files(SCRIPTS.parent, [config])
    parser = "novabench.tasks.captioning.parser"
    assert covers(plain, "read", parser, task="captioning", judge="keywords")
    assert not covers(plain, "predict", parser, task="captioning", model="classical")
    assert not covers(plain, "predict", parser, task="diagnosis", model="gold")
    # A diagnosis prediction that reads captioning's answers parses them itself.
    chained_plan = plan_from_files(SCRIPTS.parent, [config, chained])
    assert covers(chained_plan, "predict", parser, task="diagnosis", model="gold")


def test_judges_are_code_of_judged_reading_jobs_only():
    """Editing the judges' base re-reads the judged tasks, never localization, and re-scores
    no task through the score job's own code (scoring counts verdicts, reads no answer)."""
    from novabench.config import plan_from_files

    plan = plan_from_files(SCRIPTS.parent, [SCRIPTS.parent / "config" / "config.yaml"])
    base = "novabench.judges.base"
    assert covers(plan, "read", base, task="diagnosis", judge="matcher")
    assert covers(plan, "read", base, task="captioning", judge="keywords")
    assert not covers(plan, "read", base, task="localization", judge="boxes")
    assert not covers(plan, "score", base, task="localization")
    for task in ("localization", "captioning", "diagnosis"):
        assert not covers(plan, "score", "novabench.answers", task=task), task
        assert not covers(plan, "score", "novabench.judges", task=task), task


JUDGE_MODULES = [
    "novabench.judges.diagnosis_matcher",
    "novabench.judges.keywords",
    "novabench.judges.cascade",
    "novabench.judges.llm",
]


@pytest.fixture
def package_copy(tmp_path, monkeypatch):
    """A copy of the package that ``code_fingerprint`` (so every judge's identity) reads."""
    copy = tmp_path / "scripts"
    shutil.copytree(
        SCRIPTS / "novabench", copy / "novabench", ignore=shutil.ignore_patterns("__pycache__")
    )
    graph = CodeGraph(copy)
    monkeypatch.setattr("novabench.code_fingerprint.code_graph", lambda: graph)
    return graph


def edit_in_place(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, f"{old!r} not in {path}"
    path.write_text(text.replace(old, new, 1))


@pytest.mark.parametrize("module", JUDGE_MODULES)
def test_a_judges_comments_and_docstrings_leave_its_fingerprint(package_copy, module):
    from novabench.code_fingerprint import code_fingerprint

    before = code_fingerprint(module)
    path = package_copy.module_file(module)
    edit_in_place(path, '"""', '"""Reworded: ')  # the module's docstring
    edit_in_place(path, "\nfrom __future__", "\n# A comment above the imports.\nfrom __future__")
    assert code_fingerprint(module) == before
    edit_in_place(path, "\nfrom __future__", "\nLIMIT = 1\nfrom __future__")
    assert code_fingerprint(module) != before


@pytest.mark.parametrize(
    ("kind", "task", "module"),
    [
        ("keyword-lexicon", "captioning", "novabench.judges.keywords"),
        ("diagnosis-matcher", "diagnosis", "novabench.judges.diagnosis_matcher"),
    ],
)
def test_a_judges_identity_follows_its_code_not_its_prose(package_copy, kind, task, module):
    from novabench.judges import make_judge

    def identity():
        return make_judge({"kind": kind}, task).identity()

    before = identity()
    path = package_copy.module_file(module)
    # The identity method's own docstring, and a comment line above it.
    text = path.read_text()
    method = text.index("    def identity(self)")
    docstring = text.index('"""', method) + 3
    path.write_text(
        f"{text[:method]}    # Why.\n{text[method:docstring]}Reworded: {text[docstring:]}"
    )
    assert identity() == before
    edit_in_place(path, "\nfrom __future__", "\nLIMIT = 1\nfrom __future__")
    assert identity()["code"] != before["code"]


def test_a_judges_identity_is_its_code():
    from novabench.code_fingerprint import code_fingerprint
    from novabench.judges import make_judge

    judge = make_judge({"kind": "keyword-lexicon"}, "captioning")
    assert judge.identity()["code"] == code_fingerprint("novabench.judges.keywords")
    assert "version" not in judge.identity()


@pytest.mark.parametrize("task", ["localization", "captioning", "diagnosis"])
def test_a_tasks_stages_are_apart(task):
    """A task's definition imports none of its stage modules, and a stage's roots hold no
    other stage's: editing the scorer re-predicts nothing, editing figures re-scores
    nothing."""
    from novabench.tasks import get_task, task_module

    spec, package = get_task(task), task_module(task)
    graph = CodeGraph(SCRIPTS)
    folder = SCRIPTS.joinpath(*package.split("."))
    own = {p for p in graph.files([package]) if p.parent == folder and p.name != "__init__.py"}
    assert own == set()
    declared = {m for modules in spec.stage_modules.values() for m in modules}
    on_disk = {p.stem for p in folder.glob("*.py")} - {"__init__"}
    assert declared == on_disk, "every module of the folder belongs to a stage"
    predict = graph.files(spec.code_modules("predict"))
    # Prediction writes raw answers: the parser and the judging are the reading stage's.
    later = ("metrics", "figures", "parser", "boxes", "verdicts")
    assert not any(p.parent == folder and p.stem in later for p in predict)
    assert not {"novabench/answers.py", "novabench/refusals.py"} & {
        str(p.relative_to(SCRIPTS)) for p in graph.files(["predict", *spec.code_modules("predict")])
    }
    with pytest.raises(ValueError, match="stage_modules names no 'nothing'"):
        spec.stage("nothing")
