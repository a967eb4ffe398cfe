"""Static checks of the per-rule conda environments (envs/*.yaml).

Conda channels cannot be reached where the tests run, so the environments are never built
here. Instead these tests check what a build would depend on:

- each env file parses, uses exactly the channels ``[conda-forge, nodefaults]`` and pins
  every package exactly (``name=version``; ``name==version`` in a ``pip:`` section, for
  wheels that only PyPI has);
- versions equal requirements.txt, the single source of truth. A package that
  requirements.txt does not pin (a transitive dependency such as ``tokenizers``) must
  equal the version installed in the test environment, i.e. what pip resolved from those
  pins; pin it in requirements.txt to make that choice explicit. Python is pinned to its
  minor series (``python=3.11``), which must equal the test environment's: patch releases
  are ABI compatible, and the patch level of the pip environment is the host's, not a
  project decision. ``pip`` (needed for a ``pip:`` section) is pinned but not compared:
  it installs, it does not run the code, and scripts/setup.sh upgrades the venv's pip to
  the newest release;
- every rule has a ``conda:`` and a ``log:`` directive, and its env holds every
  third-party distribution its script imports: found by a static walk over the script and
  every ``novabench`` module it reaches (imports inside functions included, since lazy
  imports still run in the job), mapped to distributions with
  ``importlib.metadata.packages_distributions()``. The predict rule loads adapters by
  name at run time, so each adapter (``novabench/models/<kind>.py`` or a package
  ``novabench/models/<kind>/``) counts as imported by it, checked against the env the
  rule's ``conda:`` function picks for that adapter kind. The
  standard library, ``novabench`` (on the path inside every job) and ``snakemake`` (the
  runner provides it to scripts) are not counted;
- every distribution that code imports is pinned in requirements.txt itself: a direct
  dependency, not left to whatever another pin happens to pull in.
"""

from __future__ import annotations

import ast
import re
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cache
from importlib.metadata import PackageNotFoundError, packages_distributions, version
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from novabench import vllm_server
from support import ROOT

SCRIPTS = ROOT / "scripts"
ENV_DIR = ROOT / "envs"
ENV_FILES = sorted(ENV_DIR.glob("*.yaml"))
REQUIREMENTS = ROOT / "requirements.txt"

CHANNELS = ["conda-forge", "nodefaults"]
# conda-forge names whose PyPI distribution is spelled differently beyond what name
# normalisation (case, '-' vs '_') covers.
CONDA_TO_PIP = {"pytorch": "torch", "matplotlib-base": "matplotlib"}
# Imported by rule code but provided outside the rule's env: the project's own package is
# on sys.path of every job, and Snakemake's script preamble brings the runner's snakemake.
NOT_THIRD_PARTY = {"__future__", "novabench", "snakemake"}
# Adapters load with importlib by kind (novabench.models.base.adapter_class); these
# modules of the models package are not adapter kinds.
# Modules of models/ that define no backend: the registry, and the chat client the
# openai_compatible adapter and the LLM judges share.
NOT_ADAPTERS = {"__init__", "base", "chat_client"}
# Installers: pinned like everything else, but their version is not compared (see above).
INSTALLERS = {"pip"}
# Optional packages that need CUDA, installed nowhere the tests run: pinned in their env
# only, to the version the code names (the install hint of a job that lacks them).
CUDA_ONLY = {"vllm": vllm_server.VLLM_VERSION}

CONDA_PIN = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)=(?P<version>[0-9][A-Za-z0-9.+]*)$")
PIP_PIN = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)==(?P<version>[0-9][A-Za-z0-9.+]*)$")


# --------------------------------------------------------------------------- env files


@dataclass
class CondaEnv:
    """One env file: its pins keyed by the PyPI distribution name (canonical form)."""

    path: Path
    channels: list[str]
    python: str | None = None
    # canonical pip name -> (name as written, version, "conda" or "pip")
    pins: dict[str, tuple[str, str, str]] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    @property
    def label(self) -> str:
        return rel(self.path)


def pip_name(conda_name: str) -> str:
    return canonicalize_name(CONDA_TO_PIP.get(conda_name.lower(), conda_name))


def parse_env(path: Path) -> CondaEnv:
    """Read an env file; whatever breaks the pinning rules is listed in ``problems``."""
    try:
        doc = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        env = CondaEnv(path, [])
        env.problems.append(f"{env.label} is not valid YAML: {exc}")
        return env
    if not isinstance(doc, dict):
        env = CondaEnv(path, [])
        env.problems.append(f"{env.label} is not a mapping")
        return env
    env = CondaEnv(path, list(doc.get("channels") or []))
    if env.channels != CHANNELS:
        env.problems.append(f"{env.label}: channels are {env.channels}, expected {CHANNELS}")

    def add(name: str, ver: str, kind: str) -> None:
        key = pip_name(name)
        if key in env.pins:
            env.problems.append(f"{env.label}: {name} is listed twice")
        env.pins[key] = (name, ver, kind)

    pip_section = False
    for entry in doc.get("dependencies") or []:
        if isinstance(entry, dict) and set(entry) == {"pip"}:
            pip_section = True
            for line in entry["pip"] or []:
                match = PIP_PIN.match(str(line).strip())
                if match is None:
                    env.problems.append(f"{env.label}: pip entry {line!r} is not name==version")
                    continue
                add(match["name"], match["version"], "pip")
            continue
        match = CONDA_PIN.match(str(entry).strip())
        if match is None:
            env.problems.append(f"{env.label}: {entry!r} is not pinned as name=version")
            continue
        if match["name"] == "python":
            env.python = match["version"]
            continue
        add(match["name"], match["version"], "conda")
    if env.python is None:
        env.problems.append(f"{env.label}: python is not pinned")
    if pip_section and "pip" not in env.pins:
        env.problems.append(f"{env.label}: has a pip section but does not pin pip itself")
    return env


def requirement_pins(path: Path) -> dict[str, str]:
    """Exact pins of a requirements file (canonical name -> version); ranges are an error."""
    pins = {}
    for raw in path.read_text().splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line or line.startswith("-"):
            continue
        req = Requirement(line)
        specs = list(req.specifier)
        assert len(specs) == 1 and specs[0].operator == "==", f"{path.name}: {line!r} not exact"
        pins[canonicalize_name(req.name)] = specs[0].version
    return pins


def installed_version(dist: str) -> str | None:
    """The public version installed here (``2.13.0`` for ``2.13.0+cpu``), or None."""
    try:
        return Version(version(dist)).public
    except PackageNotFoundError:
        return None


def version_problems(env: CondaEnv, pins: dict[str, str]) -> list[str]:
    problems = []
    series = f"{sys.version_info.major}.{sys.version_info.minor}"
    if env.python is not None and env.python != series:
        problems.append(
            f"{env.label}: python={env.python}, but the pip environment runs Python {series} "
            f"(pin python={series})"
        )
    for key, (name, ver, _) in sorted(env.pins.items()):
        if key in INSTALLERS:
            continue
        if key in CUDA_ONLY:
            if Version(ver) != Version(CUDA_ONLY[key]):
                problems.append(f"{env.label}: {name}={ver} but the code names {CUDA_ONLY[key]}")
            continue
        if key in pins:
            if Version(ver) != Version(pins[key]):
                problems.append(
                    f"{env.label}: {name}={ver} but requirements.txt pins {key}=={pins[key]}"
                )
            continue
        have = installed_version(key)
        if have is None:
            problems.append(
                f"{env.label}: {name} is neither pinned in requirements.txt nor installed by "
                "it; pin it there or drop it from the env"
            )
        elif Version(ver) != Version(have):
            problems.append(
                f"{env.label}: {name}={ver} but the pip environment installs {key} {have} "
                "(a dependency of the requirements.txt pins)"
            )
    return problems


# --------------------------------------------------------------------------- imports


def rel(path: Path, root: Path = ROOT) -> str:
    return str(path.relative_to(root)) if path.is_relative_to(root) else str(path)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imported_names(tree: ast.AST, module: str, is_package: bool) -> Iterator[str]:
    """Every module name an import statement anywhere in ``tree`` may load, including
    imports inside functions; ``if TYPE_CHECKING:`` bodies never run and are skipped."""
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            stack.extend(node.orelse)
            continue
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = module.split(".")
                parent = parts if is_package else parts[:-1]
                parent = parent[: len(parent) - (node.level - 1)]
                base = ".".join([*parent, base] if base else parent)
            yield base
            # `from pkg import name` loads pkg.name when it is a submodule.
            yield from (f"{base}.{alias.name}" for alias in node.names if alias.name != "*")
        stack.extend(ast.iter_child_nodes(node))


@cache
def _file_imports(path: Path, module: str, is_package: bool) -> tuple[str, ...]:
    tree = ast.parse(path.read_text(), filename=str(path))
    return tuple(_imported_names(tree, module, is_package))


@cache
def distributions_of_modules() -> dict[str, list[str]]:
    return packages_distributions()


def module_file(name: str, search_path: Path) -> Path | None:
    base = search_path.joinpath(*name.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def third_party_imports(
    entries: list[Path], search_path: Path, package: str = "novabench"
) -> dict[str, list[str]]:
    """Top-level third-party modules reached from ``entries`` through ``package``.

    Maps each module to an import chain that reaches it: the files (relative to
    ``search_path``) from an entry down to the one that imports the module.
    """
    found: dict[str, list[str]] = {}
    seen: set[Path] = set()
    queue: list[tuple[Path, str, bool, list[str]]] = [
        (entry, entry.stem, False, []) for entry in entries
    ]
    while queue:
        path, module, is_package, chain = queue.pop(0)  # breadth first: shortest chains
        if path in seen:
            continue
        seen.add(path)
        chain = [*chain, rel(path, search_path)]
        for name in _file_imports(path, module, is_package):
            top = name.split(".")[0]
            if top == package:
                # Importing a.b.c runs a/__init__, a/b/__init__ and a/b/c.
                parts = name.split(".")
                for i in range(1, len(parts) + 1):
                    sub = ".".join(parts[:i])
                    file = module_file(sub, search_path)
                    if file is not None:
                        queue.append((file, sub, file.name == "__init__.py", chain))
            elif top and top not in sys.stdlib_module_names and top not in NOT_THIRD_PARTY:
                found.setdefault(top, chain)
    return found


# --------------------------------------------------------------------------- the workflow


@dataclass(frozen=True)
class RuleEnv:
    """What one rule (or, for predict, one adapter kind) runs and in which env."""

    rule: str
    script: Path
    env: Path
    extra_modules: tuple[Path, ...] = ()
    what: str = ""


def load_rules() -> list:
    """The workflow's rules, loaded with Snakemake's API in a scratch working directory."""
    from snakemake.api import SnakemakeApi
    from snakemake.settings.types import OutputSettings, ResourceSettings

    with (
        tempfile.TemporaryDirectory() as workdir,
        SnakemakeApi(OutputSettings(quiet={"all"})) as api,
    ):
        workflow_api = api.workflow(
            resource_settings=ResourceSettings(),
            snakefile=ROOT / "Snakefile",
            workdir=Path(workdir),
        )
        # Snakemake's API exposes the parsed workflow only through this property.
        workflow = workflow_api._workflow
        return list(workflow.rules)


@pytest.fixture(scope="module")
def rules() -> list:
    return load_rules()


def adapter_modules() -> dict[str, Path]:
    """Adapter kind -> the file that defines it: ``models/<kind>.py`` or, for an adapter
    that is a package, ``models/<kind>/__init__.py``."""
    models = SCRIPTS / "novabench" / "models"
    found = {p.stem: p for p in models.glob("*.py") if p.stem not in NOT_ADAPTERS}
    found.update((p.parent.name, p) for p in models.glob("*/__init__.py"))
    return dict(sorted(found.items()))


def adapter_kind(module: Path) -> str:
    return module.parent.name if module.name == "__init__.py" else module.stem


def conda_env_of(rule, monkeypatch: pytest.MonkeyPatch, adapter: str | None) -> Path:
    """The env file a rule's ``conda:`` names, resolved like Snakemake does (relative to
    the rule's .smk file). A function (predict's) is called with a model of ``adapter``."""
    env = rule.conda_env
    if callable(env):
        # predict's function asks PLAN.model(name)["adapter"]; answer for one kind.
        plan = rule.conda_env.__globals__["PLAN"]
        monkeypatch.setattr(plan, "model", lambda name: {"adapter": adapter, "settings": {}})
        env = env(SimpleNamespace(model="bench-model", task="localization"))
    return (Path(rule.basedir) / str(env)).resolve()


def rule_envs(rules: list, monkeypatch: pytest.MonkeyPatch) -> list[RuleEnv]:
    out = []
    for rule in rules:
        if rule.norun or rule.conda_env is None or not rule.script:
            continue
        script = (Path(rule.basedir) / rule.script).resolve()
        if callable(rule.conda_env):
            for kind, module in adapter_modules().items():
                out.append(
                    RuleEnv(
                        rule.name,
                        script,
                        conda_env_of(rule, monkeypatch, kind),
                        (module,),
                        f" with adapter {kind}",
                    )
                )
        else:
            out.append(RuleEnv(rule.name, script, conda_env_of(rule, monkeypatch, None)))
    return out


# --------------------------------------------------------------------------- tests


@pytest.mark.parametrize("path", ENV_FILES, ids=lambda p: p.name)
def test_env_file_pins_every_package_exactly(path: Path) -> None:
    env = parse_env(path)
    assert not env.problems, "\n".join(env.problems)
    assert env.pins, f"{env.label} pins no package"


@pytest.mark.parametrize("path", ENV_FILES, ids=lambda p: p.name)
def test_env_versions_equal_the_pip_pins(path: Path) -> None:
    problems = version_problems(parse_env(path), requirement_pins(REQUIREMENTS))
    assert not problems, "\n".join(problems)


def test_every_rule_has_a_conda_env_and_a_log(rules: list) -> None:
    problems = []
    for rule in rules:
        if rule.norun:  # target-only rules such as `all` run nothing
            continue
        if rule.conda_env is None:
            problems.append(f"rule {rule.name} ({rel(Path(rule.snakefile))}) has no conda:")
        if not rule.log:
            problems.append(f"rule {rule.name} ({rel(Path(rule.snakefile))}) has no log:")
    assert [r.name for r in rules if not r.norun], "no rule with an action was loaded"
    assert not problems, "\n".join(problems)


def test_every_env_file_is_used_and_exists(rules: list, monkeypatch: pytest.MonkeyPatch) -> None:
    used = {r.env for r in rule_envs(rules, monkeypatch)}
    missing = sorted(rel(p) for p in used if not p.is_file())
    assert not missing, f"rules name env files that do not exist: {missing}"
    unused = sorted(rel(p) for p in set(ENV_FILES) - used)
    assert not unused, f"env files no rule uses: {unused}"


def test_each_rule_env_holds_every_module_its_code_imports(
    rules: list, monkeypatch: pytest.MonkeyPatch
) -> None:
    distributions = distributions_of_modules()
    problems = []
    checked = 0
    for job in rule_envs(rules, monkeypatch):
        env = parse_env(job.env)
        imports = third_party_imports([job.script, *job.extra_modules], SCRIPTS)
        for module, chain in sorted(imports.items()):
            checked += 1
            dists = distributions.get(module, [])
            if not any(canonicalize_name(d) in env.pins for d in dists):
                what = f"distribution {dists[0]}" if dists else "not installed here"
                problems.append(
                    f"rule {job.rule}{job.what}: module {module} ({what}) is missing from "
                    f"{rel(job.env)}; imported via {' -> '.join(chain)}"
                )
    assert checked, "no third-party import was found at all: the import walk is broken"
    assert not problems, "\n".join(problems)


def test_requirements_pin_every_distribution_the_rules_import(
    rules: list, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A module the code imports directly is a direct dependency: requirements.txt must
    pin it, not leave it to whatever another package happens to pull in."""
    distributions = distributions_of_modules()
    pins = requirement_pins(REQUIREMENTS)
    problems = {}
    for job in rule_envs(rules, monkeypatch):
        imports = third_party_imports([job.script, *job.extra_modules], SCRIPTS)
        for module, chain in imports.items():
            dists = distributions.get(module, [])
            if not any(canonicalize_name(d) in pins for d in dists):
                name = dists[0] if dists else f"(the distribution of {module}; not installed)"
                problems.setdefault(
                    module,
                    f"requirements.txt does not pin {name}, which rule {job.rule}{job.what} "
                    f"imports as {module} via {' -> '.join(chain)}",
                )
    assert not problems, "\n".join(problems[m] for m in sorted(problems))


def test_predict_env_follows_the_adapter(rules: list, monkeypatch: pytest.MonkeyPatch) -> None:
    predict = next(r for r in rules if r.name == "predict")
    assert conda_env_of(predict, monkeypatch, "hf_local") == ENV_DIR / "local-vlm.yaml"
    assert conda_env_of(predict, monkeypatch, "classical") == ENV_DIR / "inference.yaml"


# --------------------------------------------------------------------------- the checkers


def test_parse_env_rejects_ranges_unpinned_entries_and_other_channels(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(
        "channels: [conda-forge, defaults]\n"
        "dependencies:\n"
        "  - numpy>=2\n  - pandas\n  - scipy=1.17.*\n  - pyyaml=6.0.4\n"
        "  - pip:\n    - rank-bm25>=0.2\n"
    )
    env = parse_env(path)
    text = "\n".join(env.problems)
    for expected in (
        "channels are ['conda-forge', 'defaults']",
        "'numpy>=2' is not pinned",
        "'pandas' is not pinned",
        "'scipy=1.17.*' is not pinned",
        "'rank-bm25>=0.2' is not name==version",
        "python is not pinned",
        "does not pin pip itself",
    ):
        assert expected in text
    assert env.pins == {"pyyaml": ("pyyaml", "6.0.4", "conda")}


def test_version_check_maps_conda_names_and_catches_drift(tmp_path: Path) -> None:
    path = tmp_path / "env.yaml"
    series = f"{sys.version_info.major}.{sys.version_info.minor}"
    path.write_text(
        f"channels: [conda-forge, nodefaults]\ndependencies:\n  - python={series}\n"
        "  - pytorch=2.0.0\n  - huggingface_hub=9.9.9\n  - rank_bm25=0.2.2\n"
    )
    pins = {"torch": "2.13.0", "huggingface-hub": "9.9.9", "rank-bm25": "0.2.2"}
    problems = version_problems(parse_env(path), pins)
    assert problems == [
        f"{path}: pytorch=2.0.0 but requirements.txt pins torch==2.13.0",
    ]


def test_import_walk_follows_lazy_imports_and_skips_type_checking(tmp_path: Path) -> None:
    pkg = tmp_path / "novabench"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("import numpy\n")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "lazy.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    import pandas\n"
        "def f():\n    import scipy.stats\n    from . import sibling\n"
    )
    (pkg / "sub" / "sibling.py").write_text("import json\nfrom PIL import Image\n")
    (pkg / "unused.py").write_text("import torch\n")
    script = tmp_path / "entry.py"
    script.write_text("import os\nimport snakemake\nfrom novabench.sub import lazy\n")
    assert third_party_imports([script], tmp_path) == {
        "numpy": ["entry.py", "novabench/__init__.py"],
        "scipy": ["entry.py", "novabench/sub/lazy.py"],
        "PIL": ["entry.py", "novabench/sub/lazy.py", "novabench/sub/sibling.py"],
    }
