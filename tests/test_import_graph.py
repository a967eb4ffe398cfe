"""The package's import graph, read with ``ast`` (imports inside functions included):
no import loop between folders, and a task's folder is imported only through the
registry, so that a task's static import closure is its own code and shared code."""

from __future__ import annotations

import pytest

from novabench.code_fingerprint import CodeGraph
from novabench.tasks import builtin_task_names, get_task, task_module
from support import SCRIPTS

PACKAGE = "novabench"
# The graph the code fingerprints read (novabench.code_fingerprint).
CODE = CodeGraph(SCRIPTS)
MODULES = {name: CODE.module_file(name).name == "__init__.py" for name in CODE.modules()}
GRAPH = {name: set(CODE.imports(name)) for name in MODULES}


def folder(name: str) -> str:
    """The folder (package) a module is in; a module directly in the package is its own."""
    if MODULES[name]:
        return name
    parent = name.rpartition(".")[0]
    return name if parent == PACKAGE else parent


def task_of(name: str) -> str | None:
    """The built-in task whose folder holds ``name``, if any."""
    return next(
        (t for t in builtin_task_names() if name.partition(".tasks.")[2].split(".")[0] == t),
        None,
    )


def closure(name: str) -> set[str]:
    seen, todo = set(), [name]
    while todo:
        for target in GRAPH[todo.pop()] - seen:
            seen.add(target)
            todo.append(target)
    return seen


def folder_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """A loop of folders, each importing the next (a package importing the package above
    it is no loop: that import runs anyway), or None."""
    edges: dict[str, set[str]] = {}
    for name, targets in graph.items():
        for target in targets:
            a, b = folder(name), folder(target)
            if a != b and not a.startswith(b + "."):
                edges.setdefault(a, set()).add(b)
    state: dict[str, str] = {}
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = "open"
        path.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == "open":
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        state[node] = "done"
        path.pop()
        return None

    for start in sorted(edges):
        if start not in state and (found := visit(start)):
            return found
    return None


def test_the_graph_sees_imports_inside_functions():
    # `Localization.score_rater` imports the rater names in its body only.
    assert "novabench.dataset.schema" in GRAPH["novabench.tasks.localization"]
    assert folder("novabench.tasks.localization.boxes") == "novabench.tasks.localization"
    assert folder("novabench.score") == "novabench.score"


def test_no_import_loop_between_folders():
    cycle = folder_cycle(GRAPH)
    assert cycle is None, "folders import each other: " + " -> ".join(cycle or [])


def test_the_cycle_finder_finds_a_loop():
    # A judge importing a task's metrics would close judges -> captioning -> judges.
    judge = "novabench.judges.keywords"
    graph = {**GRAPH, judge: GRAPH[judge] | {"novabench.tasks.captioning.metrics"}}
    cycle = folder_cycle(graph)
    assert cycle is not None and "novabench.judges" in cycle
    assert "novabench.tasks.captioning" in cycle


def test_only_the_registry_imports_a_task_folder():
    wrong = sorted(
        f"{name} imports {target}"
        for name, targets in GRAPH.items()
        for target in targets
        if (task := task_of(target)) is not None and task_of(name) != task
    )
    assert wrong == [], "use novabench.tasks.get_task instead: " + "; ".join(wrong)


@pytest.mark.parametrize("task", builtin_task_names())
def test_a_task_imports_its_own_code_and_shared_code_only(task):
    stages = get_task(task).code_modules
    every = ("predict", "parse", "read", "score", "statistics", "figures")
    modules = {m for stage in every for m in stages(stage)}
    reached = set(modules).union(*(closure(m) for m in modules))
    assert sorted(m for m in reached if task_of(m) not in (None, task)) == []
    assert f"{task_module(task)}.metrics" in reached


def test_judges_import_no_task_and_no_metrics():
    wrong = sorted(
        f"{name} imports {target}"
        for name, targets in GRAPH.items()
        # The judges' folder and the folders inside it (the diagnosis matcher's stages).
        if f"{folder(name)}.".startswith("novabench.judges.")
        for target in targets
        if task_of(target) or target.startswith("novabench.metrics")
    )
    assert wrong == []
