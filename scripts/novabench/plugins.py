"""Plug-ins from outside the package: the config's ``plugins:`` list.

Each entry is the path of a Python file, or of a package folder (its ``__init__.py``),
whose import registers what it brings: a backend kind
(:func:`novabench.models.base.register_adapter`), a task
(:func:`novabench.tasks.register_task`) or a judge kind
(:func:`novabench.judges.register_judge_kind`). The configuration is read after them
(a task's block of the config schema comes from the task), and every job script imports
them again before it works (novabench.rules), so a plug-in runs in the workflow exactly as
a built-in one does. Paths are relative to the working directory, else to the workflow.
"""

from __future__ import annotations

import hashlib
import importlib.util
import sys
from collections.abc import Iterable
from pathlib import Path
from types import ModuleType

from novabench.errors import ConfigError
from novabench.io import resolve_path
from novabench.paths import REPOSITORY

# Loaded plug-ins by resolved path: each is imported once per process.
_LOADED: dict[Path, ModuleType] = {}


def load_plugins(paths: Iterable[str], basedir: Path | None = None) -> list[ModuleType]:
    """Import every plug-in of ``paths`` once (in order); ConfigError naming a missing one."""
    base = basedir if basedir is not None else REPOSITORY
    return [_load(str(path), base) for path in paths or ()]


def _load(path: str, basedir: Path | None) -> ModuleType:
    found = Path(resolve_path(path, basedir))
    file = found / "__init__.py" if found.is_dir() else found
    if not file.is_file() or file.suffix != ".py":
        raise ConfigError(
            f"plugins: {path} is neither a Python file nor a package folder",
            "give the path of a .py file or of a folder with an __init__.py",
        )
    file = file.resolve()
    if file in _LOADED:
        return _LOADED[file]
    # A name of its own per file, so that two plug-ins named alike do not clash.
    stem = file.parent.name if file.name == "__init__.py" else file.stem
    name = f"novabench_plugin_{stem}_{hashlib.sha256(str(file).encode()).hexdigest()[:8]}"
    locations = [str(file.parent)] if file.name == "__init__.py" else None
    spec = importlib.util.spec_from_file_location(name, file, submodule_search_locations=locations)
    if spec is None or spec.loader is None:
        raise ConfigError(f"plugins: cannot import {path}", "check the file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    _LOADED[file] = module
    return module
