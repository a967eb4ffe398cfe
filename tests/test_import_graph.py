"""The package's import graph, read with ``ast`` (imports inside functions included):
no import loop between folders, and a task's folder is imported only through the
registry, so that a task's static import closure is its own code and shared code."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from novabench.tasks import TASK_NAMES, task_module

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"
PACKAGE = "novabench"


def _modules() -> dict[str, tuple[Path, bool]]:
    """Module name -> (file, is a package)."""
    out = {}
    for path in sorted((SCRIPTS / PACKAGE).rglob("*.py")):
        parts = list(path.relative_to(SCRIPTS).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        out[".".join(parts[:-1] if is_package else parts)] = (path, is_package)
    return out


MODULES = _modules()


def _with_parents(name: str) -> set[str]:
    """``name`` and the packages above it: importing a module runs their ``__init__``."""
    parts = name.split(".")
    return {".".join(parts[:i]) for i in range(1, len(parts) + 1)} & set(MODULES)


def imports_of(name: str) -> set[str]:
    """The package's modules that ``name`` imports anywhere in its code."""
    path, is_package = MODULES[name]
    package = name if is_package else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                found |= _with_parents(alias.name)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join([*base, *([node.module] if node.module else [])])
            else:
                target = node.module or ""
            found |= _with_parents(target)
            # `from package import module` imports the module
            found |= {f"{target}.{a.name}" for a in node.names} & set(MODULES)
    found.discard(name)
    return found


GRAPH = {name: imports_of(name) for name in MODULES}


def folder(name: str) -> str:
    """The folder (package) a module is in; a module directly in the package is its own."""
    if MODULES[name][1]:
        return name
    parent = name.rpartition(".")[0]
    return name if parent == PACKAGE else parent


def task_of(name: str) -> str | None:
    """The built-in task whose folder holds ``name``, if any."""
    return next(
        (t for t in TASK_NAMES if name == task_module(t) or name.startswith(task_module(t) + ".")),
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
    # `Localization.parse` imports the box parser in its body only.
    assert "novabench.tasks.localization.boxes" in GRAPH["novabench.tasks.localization"]
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


@pytest.mark.parametrize("task", TASK_NAMES)
def test_a_task_imports_its_own_code_and_shared_code_only(task):
    others = sorted(m for m in closure(task_module(task)) if task_of(m) not in (None, task))
    assert others == []
    assert f"{task_module(task)}.metrics" in closure(task_module(task))


def test_judges_import_no_task_and_no_metrics():
    wrong = sorted(
        f"{name} imports {target}"
        for name, targets in GRAPH.items()
        if folder(name) == "novabench.judges"
        for target in targets
        if task_of(target) or target.startswith("novabench.metrics")
    )
    assert wrong == []
