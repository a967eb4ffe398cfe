"""The installable package: declared dependencies agree with the pins, and the wheel works."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tomllib
import zipfile
from dataclasses import dataclass
from importlib.metadata import distribution
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from support import ROOT

PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
TASKS = ("localization", "captioning", "diagnosis")


def pinned_versions() -> dict[str, Version]:
    """Package -> its exact pin in requirements.txt (the one source of versions)."""
    pins = {}
    for line in (ROOT / "requirements.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            requirement = Requirement(line)
            (spec,) = requirement.specifier
            assert spec.operator == "==", f"requirements.txt must pin exactly: {line}"
            pins[canonicalize_name(requirement.name)] = Version(spec.version)
    return pins


def declared() -> list[tuple[str, Requirement]]:
    """(where, requirement) for the core and every extra of pyproject.toml."""
    found = [("dependencies", Requirement(r)) for r in PROJECT["dependencies"]]
    for extra, requirements in PROJECT["optional-dependencies"].items():
        found += [(f"extra {extra}", Requirement(r)) for r in requirements]
    return found


def test_every_declared_dependency_is_pinned_inside_its_range():
    pins = pinned_versions()
    for where, requirement in declared():
        name = canonicalize_name(requirement.name)
        assert name in pins, f"{where}: {requirement.name} is not pinned in requirements.txt"
        assert requirement.specifier.contains(pins[name]), (
            f"{where}: the pin {name}=={pins[name]} is outside {requirement}"
        )
        lower = [s for s in requirement.specifier if s.operator == ">="]
        assert [Version(s.version) for s in lower] == [pins[name]], (
            f"{where}: {requirement} must start at the pinned {pins[name]}"
        )


def test_every_pin_is_declared_somewhere():
    names = {canonicalize_name(r.name) for _, r in declared()}
    assert set(pinned_versions()) <= names


# --- the command with the core dependencies only ------------------------------------------

PROMPTS = ROOT / "config" / "prompts"
# Raw answers, as a harness outside the pipeline writes them (xyxy_1000 boxes).
LOCALIZATION_ANSWERS = {
    "case0001_001.png": "[208, 250, 333, 333]",
    "case0001_002.png": "lesion at [12, 40, 3",
    "case0002_001.png": "No abnormality.",
}
DIAGNOSIS_ANSWERS = {
    "case0001_001.png": "1. Glioblastoma\n2. Brain abscess",
    "case0001_002.png": "Metastasis",
    "case0003_001.png": "Acute ischemic stroke",
}


@dataclass
class Inputs:
    """A dataset and one predictions file per task, in both accepted formats."""

    dataset: Path
    predictions: dict[str, Path]  # task -> file
    nltk_data: Path | None  # WordNet for captioning; None where Debian's is not installed

    def score_args(self, task: str) -> list[str]:
        args = ["score", "--task", task, "--dataset", str(self.dataset)]
        args += ["--predictions", str(self.predictions[task]), "--format", "json"]
        args += ["--allow-missing"]  # each harness file lacks an image on purpose
        if task == "localization":
            args += ["--box-format", "xyxy_1000"]
        if task == "captioning":
            args += ["--nltk-data", str(self.nltk_data)]
        if task == "diagnosis":
            args += ["--no-embedding-fallback"]
        return args

    def tasks(self) -> list[str]:
        return [t for t in TASKS if t != "captioning" or self.nltk_data is not None]


def write_answers(path: Path, answers: dict[str, str]) -> Path:
    path.write_text(
        "".join(json.dumps({"filename": f, "raw": r}) + "\n" for f, r in answers.items())
    )
    return path


def make_inputs(folder: Path) -> Inputs:
    from novabench.predict import run_predictions
    from novabench.wordnet import DEBIAN_WORDNET_DIR, ensure_wordnet
    from upstream import build_local_dataset

    dataset = build_local_dataset(folder)
    captions = folder / "gold.jsonl"
    run_predictions(
        dataset=dataset,
        task="captioning",
        model_name="gold",
        model_cfg={"adapter": "gold", "tasks": ["captioning"]},
        prompt_path=PROMPTS / "captioning-v1.txt",
        out=captions,
        summary_out=folder / "gold.summary.json",
    )
    wordnet = None
    if (DEBIAN_WORDNET_DIR / "index.sense").is_file():
        wordnet = ensure_wordnet(folder / "nltk_data")
    predictions = {
        "localization": write_answers(folder / "harness-loc.jsonl", LOCALIZATION_ANSWERS),
        "captioning": captions,
        "diagnosis": write_answers(folder / "harness-dx.jsonl", DIAGNOSIS_ANSWERS),
    }
    return Inputs(dataset, predictions, wordnet)


def expected_metrics(inputs: Inputs, task: str, folder: Path) -> dict:
    """The metrics of score_predictions on the same files, read back from its score file."""
    from novabench.predict import run_predictions
    from novabench.score import score_predictions
    from novabench.tasks import get_task

    records = inputs.predictions[task]
    if task != "captioning":  # raw answers: parsed as the pipeline's predictions_file model
        records = folder / f"{task}-records.jsonl"
        model_cfg = {
            "adapter": "predictions_file",
            "tasks": [task],
            "max_error_rate": 1,  # as --allow-missing: an image without an answer is missing
            "settings": {"path": str(inputs.predictions[task])},
            **({"box_format": "xyxy_1000"} if task == "localization" else {}),
        }
        run_predictions(
            dataset=inputs.dataset,
            task=task,
            model_name=inputs.predictions[task].stem,
            model_cfg=model_cfg,
            prompt_path=PROMPTS / f"{task}-v1.txt",
            out=records,
            summary_out=folder / f"{task}-records.summary.json",
        )
    judges = {"captioning": "keyword-lexicon", "diagnosis": "diagnosis-matcher"}
    judge = {"kind": judges[task], "settings": {}} if task in judges else None
    if task == "diagnosis":
        judge["settings"]["embedding_fallback"] = False
    score_predictions(
        task=task,
        dataset=inputs.dataset,
        predictions=records,
        out_json=folder / f"{task}-expected.json",
        out_csv=folder / f"{task}-expected.csv",
        judge_cfg=judge,
        # The command scores with the pipeline's scoring options (defaults outside a checkout).
        options=get_task(task).options({}),
        nltk_data=inputs.nltk_data,
    )
    return json.loads((folder / f"{task}-expected.json").read_text())["metrics"]


def link_core_dependencies(folder: Path) -> Path:
    """``folder`` with links to the core dependencies and what they require, nothing else."""
    folder.mkdir(parents=True, exist_ok=True)
    seen: set[str] = set()
    todo = [Requirement(r) for r in PROJECT["dependencies"]]
    while todo:
        requirement = todo.pop()
        name = canonicalize_name(requirement.name)
        if name in seen or (requirement.marker and not requirement.marker.evaluate({"extra": ""})):
            continue
        seen.add(name)
        dist = distribution(requirement.name)
        todo += [Requirement(r) for r in dist.requires or []]
        for top in {f.parts[0] for f in dist.files or [] if f.parts[0] != ".."}:
            if not (folder / top).exists():
                (folder / top).symlink_to(dist.locate_file(top))
    return folder


# Runs each argument list through the command in one process; the exit codes come last.
PROBE = """
import json, sys
from novabench import cli
codes = [cli.main(argv) for argv in json.loads(sys.argv[1])]
print(json.dumps(codes))
"""


def test_the_command_needs_only_the_core_dependencies(tmp_path):
    inputs = make_inputs(tmp_path / "inputs")
    core = link_core_dependencies(tmp_path / "core")
    runs = [inputs.score_args(task) for task in inputs.tasks()]
    runs.append(
        ["validate", "--task", "diagnosis", "--predictions", str(inputs.predictions["diagnosis"])]
    )
    runs.append(
        [
            "build-dataset",
            "--source",
            "local",
            "--local-path",
            str(tmp_path / "inputs" / "repo"),
            "--out",
            str(tmp_path / "built" / "nova.parquet"),
        ]
    )
    # The pipeline's diagnosis judge scores without the embedding extra (its fallback is off
    # in config/config.yaml); asking for the fallback needs the extra, and says so.
    runs.append([a for a in inputs.score_args("diagnosis") if a != "--no-embedding-fallback"])
    runs.append([*runs[-1], "--embedding-fallback"])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(core), str(ROOT / "scripts")])}
    env.update(HOME=str(tmp_path / "home"), XDG_CACHE_HOME=str(tmp_path / "cache"))
    # The interpreter without any site-packages: only the links and the package import.
    python = getattr(sys, "_base_executable", sys.executable)
    done = subprocess.run(
        [python, "-S", "-s", "-c", PROBE, json.dumps(runs)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.splitlines()[-1]) == [0] * (len(runs) - 1) + [2]
    assert "pip install 'novabench[embedding]'" in done.stderr.splitlines()[-1]


# --- the wheel ------------------------------------------------------------------------------

# Files the package reads at run time; a wheel without them scores nothing.
DATA_FILES = (
    "novabench/resources/lexicon.yaml",
    "novabench/resources/diagnosis_synonyms.yaml",
    "novabench/resources/diagnosis_ontology_synonyms.yaml",
    "novabench/resources/diagnosis_vocabulary.yaml",
    "novabench/models/retrieval/corpus.yaml",
    "novabench/resources/prompts/judge-caption-paired-v1.txt",
    "novabench/resources/prompts/judge-keywords-v1.txt",
    "novabench/resources/prompts/judge-diagnosis-v1.txt",
)


def copy_working_tree(dest: Path) -> Path:
    """The repository as it is on disk (committed or not), without ignored files."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source = ROOT / name
        if source.is_file():  # a tracked file deleted in the working tree is left out
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)
    return dest


def run(*args: object, **options) -> subprocess.CompletedProcess:
    done = subprocess.run(
        [str(a) for a in args], capture_output=True, text=True, timeout=600, **options
    )
    assert done.returncode == 0, f"{args}\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    return done


def build_wheel(tmp_path: Path) -> Path:
    source = copy_working_tree(tmp_path / "source")
    # No build isolation: it would download setuptools.
    run(
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "--no-deps",
        "--no-build-isolation",
        "-w",
        tmp_path / "dist",
        ".",
        cwd=source,
    )
    (wheel,) = (tmp_path / "dist").glob("novabench-*.whl")
    package = source / "scripts" / "novabench"
    data = {
        f"novabench/{p.relative_to(package)}"
        for p in package.rglob("*")
        if p.is_file() and p.suffix not in (".py", ".pyc")
    }
    assert set(DATA_FILES) <= data  # the list above is still the package's
    with zipfile.ZipFile(wheel) as archive:
        assert data <= set(archive.namelist()), data - set(archive.namelist())
    return wheel


def new_venv(venv: Path) -> Path:
    """A fresh venv that sees this environment's packages (pip and setuptools too); its
    site-packages folder."""
    run(sys.executable, "-m", "venv", "--without-pip", venv)
    python = venv / "bin" / "python"
    site = run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])")
    here = run(sys.executable, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])")
    (Path(site.stdout.strip()) / "project-dependencies.pth").write_text(here.stdout)
    return Path(site.stdout.strip())


def install_in_new_venv(wheel: Path, venv: Path) -> Path:
    """A fresh venv that sees this environment's packages, with only the wheel installed."""
    site = new_venv(venv)
    # No --no-deps: pip must find every declared dependency already installed.
    run(venv / "bin" / "python", "-m", "pip", "install", "--no-index", wheel)
    return site


@pytest.mark.slow
def test_the_wheel_installs_and_scores_outside_the_repository(tmp_path):
    wheel = build_wheel(tmp_path)
    site = install_in_new_venv(wheel, tmp_path / "venv")
    inputs = make_inputs(tmp_path / "inputs")
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(HOME=str(tmp_path / "home"), XDG_CACHE_HOME=str(tmp_path / "cache"))
    python = tmp_path / "venv" / "bin" / "python"
    where = run(python, "-c", "import novabench.cli as c; print(c.__file__)", cwd=outside, env=env)
    assert Path(where.stdout.strip()).is_relative_to(site)
    for task in inputs.tasks():
        done = run(
            tmp_path / "venv" / "bin" / "novabench", *inputs.score_args(task), cwd=outside, env=env
        )
        payload = json.loads(done.stdout)
        assert payload["metrics"] == expected_metrics(inputs, task, tmp_path), task
        if task != "localization":  # the shipped tables and vocabulary were read
            assert payload["judge"]["name"] in ("keyword-lexicon", "diagnosis-matcher")
    # Inside a checkout the installed command reads its workflow without --workflow.
    checkout = tmp_path / "source"
    done = run(
        tmp_path / "venv" / "bin" / "novabench",
        *("estimate", "--configfile", "config/paper.yaml"),
        cwd=checkout,
        env=env,
    )
    assert "gpt-4o" in done.stdout, done.stdout
    # What `pip install .` leaves in a checkout is ignored.
    for left in ("build/", "scripts/novabench.egg-info/"):
        run("git", "check-ignore", "-q", left, cwd=ROOT)


@pytest.mark.slow
def test_setup_puts_the_command_into_the_venv(tmp_path):
    from novabench.wordnet import DEBIAN_WORDNET_DIR

    if not (DEBIAN_WORDNET_DIR / "index.sense").is_file():
        pytest.skip("needs `apt-get install wordnet-base wordnet-sense-index`")
    checkout = copy_working_tree(tmp_path / "checkout")
    venv = checkout / ".venv"
    # A venv that sees this environment's packages, marked as holding the requirements,
    # so that setup installs only what it adds (offline).
    site = new_venv(venv)
    digest = hashlib.sha256(
        b"".join(p.read_bytes() for p in sorted(checkout.glob("requirements*.txt")))
    ).hexdigest()
    (venv / ".installed-requirements").write_text(digest + "\n")
    done = run("bash", "scripts/setup.sh", cwd=checkout)
    assert "installing the novabench command" in done.stderr, done.stderr
    assert "installing requirements.txt" not in done.stderr
    novabench = venv / "bin" / "novabench"
    # Editable: the command runs the checkout's code, and finds its workflow from anywhere.
    where = run(venv / "bin" / "python", "-c", "import novabench; print(novabench.__file__)")
    assert Path(where.stdout.strip()).is_relative_to(checkout / "scripts")
    catalog = run(novabench, "catalog", cwd=tmp_path)
    assert "gpt-4o" in catalog.stdout
    assert not Path(site, "novabench").exists()
    again = run("bash", "scripts/setup.sh", cwd=checkout)
    assert "installing" not in again.stderr, again.stderr
