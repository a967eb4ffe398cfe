"""The `novabench` command, called in-process: score, validate, build-dataset, user errors."""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path
from typing import ClassVar

import pytest
import yaml

from novabench import cli
from novabench.errors import NovaError
from novabench.judges.base import _KINDS, JudgeKind
from novabench.predict import run_predictions
from novabench.score import score_predictions
from novabench.tasks import get_task
from novabench.wordnet import DEBIAN_WORDNET_DIR, ensure_wordnet
from support import ROOT
from upstream import IMAGES, build_local_dataset, write_current

PROMPTS = ROOT / "config" / "prompts"
NAMES = sorted(name for name, *_ in IMAGES)

# Raw answers, as a harness outside the pipeline writes them; one image left unanswered.
ANSWERS = {
    "localization": {
        "case0001_001.png": "[208, 250, 333, 333]",  # near the gold box (xyxy_1000)
        "case0001_002.png": "lesion at [12, 40, 3",  # unreadable
        "case0002_001.png": "No abnormality.",
    },
    "captioning": {
        "case0001_001.png": "Axial FLAIR image: hyperintense lesion in the left frontal lobe.",
        "case0001_002.png": "Sagittal T2 image shows no abnormality.",
        "case0003_001.png": "Axial DWI with restricted diffusion in the basal ganglia.",
    },
    "diagnosis": {
        "case0001_001.png": json.dumps(
            {"most_likely_diagnosis": "glioblastoma", "other_possible_diagnoses": ["abscess"]}
        ),
        "case0001_002.png": "1. Brain abscess\n2. Glioblastoma multiforme",
        "case0002_001.png": "Normal study",
    },
}
# The pipeline's judges (config/config.yaml), which the command uses too.
CONFIG = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
JUDGES = {
    task: {"name": name, "settings": {}, **CONFIG["judges"][name]}
    for task in ("captioning", "diagnosis")
    for name in [CONFIG["tasks"][task]["judge"]]
}
JUDGES["localization"] = None


@pytest.fixture(scope="module")
def nova(tmp_path_factory) -> Path:
    return build_local_dataset(tmp_path_factory.mktemp("nova"))


@pytest.fixture(scope="module")
def wordnet(tmp_path_factory) -> Path:
    if not (DEBIAN_WORDNET_DIR / "index.sense").is_file():
        pytest.skip("needs `apt-get install wordnet-base wordnet-sense-index`")
    return ensure_wordnet(tmp_path_factory.mktemp("nltk_data"))


def write_answers(folder: Path, task: str, name: str = "harness") -> Path:
    path = folder / f"{name}.jsonl"
    lines = [{"filename": f, "raw": raw} for f, raw in ANSWERS[task].items()]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def make_records(nova: Path, folder: Path, task: str, model_cfg: dict, name: str) -> Path:
    """A prediction file as the pipeline's predict rule writes it."""
    out = folder / f"{name}.jsonl"
    run_predictions(
        dataset=nova,
        task=task,
        model_name=name,
        model_cfg=model_cfg,
        prompt_path=PROMPTS / f"{task}-v1.txt",
        out=out,
        summary_out=folder / f"{name}.summary.json",
    )
    return out


def expected_scores(nova: Path, records: Path, task: str, folder: Path, nltk: Path) -> dict:
    """The score file that score_predictions writes for the same records, read back."""
    out_json = folder / "expected.json"
    score_predictions(
        task=task,
        dataset=nova,
        predictions=records,
        out_json=out_json,
        out_csv=folder / "expected.csv",
        judge_cfg=JUDGES[task],
        options=get_task(task).options(CONFIG["tasks"][task]),
        nltk_data=nltk,
    )
    return json.loads(out_json.read_text())


def read_table(text: str) -> dict[str, str]:
    """metric -> printed cell, from `score --format table` (title and header skipped)."""
    rows = [line.split(None, 1) for line in text.strip().splitlines()[2:]]
    return {key: cell.strip() for key, cell in rows}


def assert_table_matches(table: dict[str, str], metrics: dict) -> None:
    scalars = {k: v for k, v in metrics.items() if not isinstance(v, dict | list)}
    assert set(table) == set(scalars)
    for key, value in scalars.items():
        if value is None or (isinstance(value, float) and math.isnan(value)):
            assert table[key] == "n/a", key
        elif isinstance(value, str):
            assert table[key] == value, key
        else:
            assert float(table[key]) == pytest.approx(value, abs=5e-5), key


def score_cli(capsys, *args: str) -> tuple[int, str]:
    capsys.readouterr()
    code = cli.main(["score", *args])
    return code, capsys.readouterr().out


# --- score ------------------------------------------------------------------------------


@pytest.mark.parametrize("task", ["localization", "captioning", "diagnosis"])
def test_raw_answers_score_as_the_pipeline_scores_them(task, nova, tmp_path, capsys, request):
    nltk = request.getfixturevalue("wordnet") if task == "captioning" else tmp_path / "nltk"
    answers = write_answers(tmp_path, task)
    model_cfg = {
        "adapter": "predictions_file",
        "tasks": [task],
        "max_error_rate": 1,  # as the CLI: missing images are scored as missing
        "settings": {"path": str(answers)},
    }
    args = ["--task", task, "--dataset", str(nova), "--predictions", str(answers)]
    args += ["--nltk-data", str(nltk), "--allow-missing"]
    if task == "localization":
        model_cfg["box_format"] = "xyxy_1000"
        args += ["--box-format", "xyxy_1000"]
    records = make_records(nova, tmp_path, task, model_cfg, "harness")
    expected = expected_scores(nova, records, task, tmp_path, nltk)
    code, out = score_cli(capsys, *args)
    assert code == 0
    assert out.splitlines()[0] == f"{task} scores of harness"
    assert_table_matches(read_table(out), expected["metrics"])
    code, out = score_cli(capsys, *args, "--format", "json")
    assert code == 0
    payload = json.loads(out)
    assert payload["metrics"] == expected["metrics"]
    assert (payload["task"], payload["model"], payload["judge"]) == (
        task,
        "harness",
        expected["judge"],
    )


def test_prediction_records_are_scored_as_they_are(nova, tmp_path, capsys):
    model_cfg = {"adapter": "random", "tasks": ["localization"], "settings": {"seed": 7}}
    records = make_records(nova, tmp_path, "localization", model_cfg, "random")
    expected = expected_scores(nova, records, "localization", tmp_path, tmp_path / "nltk")
    out_dir = tmp_path / "scores"
    code, out = score_cli(
        capsys,
        *("--task", "localization", "--dataset", str(nova), "--predictions", str(records)),
        *("--out-dir", str(out_dir)),
    )
    assert code == 0
    assert_table_matches(read_table(out), expected["metrics"])
    written = json.loads((out_dir / "localization-random.json").read_text())
    assert written["metrics"] == expected["metrics"]
    assert written["inputs"] == expected["inputs"]  # the records themselves were scored
    assert (out_dir / "localization-random.images.csv").read_text() == (
        tmp_path / "expected.csv"
    ).read_text()


def test_the_diagnosis_matcher_can_run_without_its_embedding_model(nova, tmp_path, capsys):
    answers = write_answers(tmp_path, "diagnosis")
    code, out = score_cli(
        capsys,
        *("--task", "diagnosis", "--dataset", str(nova), "--predictions", str(answers)),
        *("--no-embedding-fallback", "--format", "json", "--allow-missing"),
    )
    assert code == 0
    assert json.loads(out)["metrics"]["judge"]["embedding_fallback"] is False


def test_raw_answers_are_kept_as_records_in_the_output_folder(nova, tmp_path, capsys):
    answers = write_answers(tmp_path, "localization", name="answers")
    out_dir = tmp_path / "kept"
    code, _ = score_cli(
        capsys,
        *("--task", "localization", "--dataset", str(nova), "--predictions", str(answers)),
        *("--box-format", "xyxy_1000", "--model", "my-vlm", "--out-dir", str(out_dir)),
        "--allow-missing",
    )
    assert code == 0
    records = [
        json.loads(line) for line in (out_dir / "localization-my-vlm.predictions.jsonl").open()
    ]
    assert [r["filename"] for r in records] == NAMES
    assert {r["model"] for r in records} == {"my-vlm"}
    # The records keep the raw answers; the verdicts beside them say what was read.
    assert {r["status"] for r in records} == {"ok", "missing"}
    verdicts = [
        json.loads(line) for line in (out_dir / "localization-my-vlm.verdicts.jsonl").open()
    ]
    statuses = {r["filename"]: r["status"] for r in verdicts}
    assert statuses == {
        "case0001_001.png": "ok",
        "case0001_002.png": "parse_error",
        "case0002_001.png": "no_finding",
        "case0003_001.png": "missing",
    }
    assert json.loads((out_dir / "localization-my-vlm.json").read_text())["model"] == "my-vlm"


# --- validate ---------------------------------------------------------------------------


def validate(capsys, *args: str) -> tuple[int, list[str]]:
    capsys.readouterr()
    code = cli.main(["validate", *args])
    return code, capsys.readouterr().out.splitlines()


def test_validate_accepts_a_pipeline_prediction_file(nova, tmp_path, capsys):
    records = make_records(
        nova, tmp_path, "captioning", {"adapter": "gold", "tasks": ["captioning"]}, "gold"
    )
    code, lines = validate(
        capsys, "--task", "captioning", "--predictions", str(records), "--dataset", str(nova)
    )
    assert code == 0
    assert lines == [f"{records}: images: 4 ok", f"{records}: valid (4 records for captioning)"]


def test_validate_finds_every_planted_problem_in_records(nova, tmp_path, capsys):
    good = {"task": "diagnosis", "model": "m", "parsed": {"ranked": ["Glioblastoma"]}}
    lines = [
        {**good, "filename": "case0001_001.png", "status": "ok"},  # line 1: fine
        "{not json",  # line 2
        {"filename": "case0001_002.png", "status": "ok", "parsed": None},  # 3: no task, model
        {**good, "filename": "case0002_001.png", "status": "done"},  # 4: unknown status
        {**good, "filename": "case0001_001.png", "status": "ok"},  # 5: duplicate
        {**good, "filename": "case9999_001.png", "status": "ok"},  # 6: not in the dataset
        {**good, "filename": "case0003_001.png", "status": "ok", "parsed": {"ranked": "x"}},
        {**good, "filename": "case0003_002.png", "task": "captioning", "status": "error"},
    ]
    path = tmp_path / "broken.jsonl"
    path.write_text("".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines))
    code, out = validate(
        capsys, "--task", "diagnosis", "--predictions", str(path), "--dataset", str(nova)
    )
    assert code == 1
    assert out[:-1] == [
        f"{path}:2: not valid JSON at column 2 (Expecting property name enclosed in double quotes)",
        f"{path}:3: missing fields task, model",
        f"{path}:4: unknown status 'done' "
        "(one of ok, no_finding, parse_error, refusal, error, missing)",
        f"{path}:5: case0001_001.png repeats line 1",
        f"{path}:6: case9999_001.png is not in the dataset",
        f"{path}:7: parsed.ranked must be a list of diagnosis strings",
        f"{path}:8: task is 'captioning', not diagnosis",
        f"{path}:8: case0003_002.png is not in the dataset",
    ]
    assert out[-1] == f"{path}: 8 problem(s)"


def test_validate_checks_raw_answers_and_notes_unanswered_images(nova, tmp_path, capsys):
    path = tmp_path / "answers.jsonl"
    path.write_text(
        '{"filename": "case0001_001.png", "raw": "[1, 2, 3, 4]"}\n'
        "\n"
        '{"filename": "case0001_002.png"}\n'
        '{"filename": "case0001_001.png", "raw": "again"}\n'
        '{"filename": "case0002_001.png", "raw": 42}\n'
        "[1, 2]\n"
    )
    args = ["--task", "localization", "--predictions", str(path), "--box-format", "xyxy_1000"]
    code, out = validate(capsys, *args)
    assert code == 1
    assert out == [
        f"{path}:3: no raw field",
        f"{path}:5: raw is a int, not a string or null",
        f"{path}:6: a JSON list, not an object with filename and raw",
        f"{path}:4: case0001_001.png repeats line 1",
        f"{path}: 4 problem(s)",
    ]
    path.write_text('{"filename": "case0001_001.png", "raw": null}\n')
    args = [*args, "--dataset", str(nova)]
    code, out = validate(capsys, *args, "--allow-missing")
    assert code == 0
    assert out == [
        f"{path}: 3 of 4 images have no answer, e.g. case0001_002.png (scored as missing)",
        f"{path}: 1 answer(s) with raw null, e.g. line 1 case0001_001.png (scored as error)",
        f"{path}: images: 1 error, 3 missing",
        f"{path}: valid (1 answers for localization)",
    ]
    code, out = validate(capsys, *args)  # as `score` and the pipeline: none may be missing
    assert code == 1
    assert out[0] == (
        f"{path}: 3 of 4 images have no answer, e.g. case0001_002.png "
        "(pass --allow-missing to score them as missing)"
    )


# A predictions file with five kinds of problem (localization, boxes in xyxy_1000).
FIVE_PROBLEMS = [
    '{"filename": "case0001_001.png", "raw": "[208, 250, 333, 333]"}',  # 1: fine
    '{"filename": "case0001_002.png", "raw": "lesion at [12, 40, 3"',  # 2: cut short
    '{"filename": "case0001_001.png", "raw": "[1, 2, 3, 4]"}',  # 3: repeats line 1
    '{"filename": "case9999_001.png", "raw": "no finding"}',  # 4: not in the dataset
    '{"filename": "case0001_002.png", "raw": "lesion at [12, 40, 3"}',  # 5: parse error
    '{"filename": "case0002_001.png", "raw": "I am not able to help with medical images."}',
    # case0003_001.png: missing
]


def test_five_problems_of_a_predictions_file_come_in_one_report(nova, tmp_path, capsys):
    path = tmp_path / "five.jsonl"
    path.write_text("\n".join(FIVE_PROBLEMS) + "\n")
    common = ["--task", "localization", "--predictions", str(path), "--dataset", str(nova)]
    common += ["--box-format", "xyxy_1000"]
    code, out = validate(capsys, *common)
    assert code == 1
    assert out[:4] == [
        f"{path}:2: not valid JSON: the line ends inside its JSON value",
        f"{path}:3: case0001_001.png repeats line 1",
        f"{path}:4: case9999_001.png is not in the dataset",
        f"{path}: 1 of 4 images have no answer, e.g. case0003_001.png "
        "(pass --allow-missing to score them as missing)",
    ]
    assert out[4].startswith(f"{path}:5: case0001_002.png: parse_error (")
    assert out[5].startswith(f"{path}:6: case0002_001.png: refusal (")
    assert out[6:] == [
        f"{path}: images: 1 ok, 1 parse_error, 1 refusal, 1 missing",
        f"{path}: 4 problem(s)",
    ]
    # The pipeline's predictions_file model stops on the same file with one line naming
    # all five, and `score` passes the same gate with the same words.
    model_cfg = {
        "adapter": "predictions_file",
        "tasks": ["localization"],
        "box_format": "xyxy_1000",
        "settings": {"path": str(path)},
    }
    with pytest.raises(NovaError) as stopped:
        make_records(nova, tmp_path, "localization", model_cfg, "five")
    pipeline = str(stopped.value)
    for named in (
        "1 unreadable line(s): line 2 not valid JSON: the line ends inside its JSON value",
        "1 repeated filename(s): line 3 repeats case0001_001.png of line 1",
        "1 filename(s) not in the dataset: case9999_001.png",
        "1 of 4 images missing: case0003_001.png",
        "1 answer(s) the task cannot read: line 5 case0001_002.png (",
        "1 refusal(s): line 6 case0002_001.png (",
    ):
        assert named in pipeline, named
    capsys.readouterr()
    assert cli.main(["score", *common]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    report = pipeline.removeprefix("models.five: ").split(" (images: ")[0]
    assert line.startswith(f"novabench: error: {report}; fix: list every problem with ")


def test_score_and_the_pipeline_agree_on_missing_images(nova, tmp_path, capsys):
    answers = write_answers(tmp_path, "localization")  # 3 of 4 images
    model_cfg = {"adapter": "predictions_file", "settings": {"path": str(answers)}}
    model_cfg.update(tasks=["localization"], box_format="xyxy_1000")
    with pytest.raises(NovaError, match=r"1 of 4 images missing: case0003_001\.png"):
        make_records(nova, tmp_path, "localization", model_cfg, "partial")
    common = ["--task", "localization", "--predictions", str(answers), "--dataset", str(nova)]
    common += ["--box-format", "xyxy_1000", "--format", "json"]
    capsys.readouterr()
    assert cli.main(["score", *common]) == 2
    assert "1 of 4 images missing: case0003_001.png" in capsys.readouterr().err
    # Allowed in both, the image is scored as missing in both.
    make_records(nova, tmp_path, "localization", {**model_cfg, "max_error_rate": 0.25}, "partial")
    code, out = score_cli(capsys, *common, "--allow-missing")
    assert code == 0 and json.loads(out)["metrics"]["n_missing"] == 1


# --- build-dataset ----------------------------------------------------------------------


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_build_dataset_from_a_local_copy_is_the_dataset_rule_output(tmp_path, capsys):
    from novabench.dataset.build import build_dataset

    root = write_current(tmp_path / "repo")
    reference = tmp_path / "rule" / "nova.parquet"
    build_dataset({"source": "local", "local_path": str(root)}, reference, tmp_path / "m.json")
    out = tmp_path / "cli" / "nova.parquet"
    capsys.readouterr()
    code = cli.main(
        ["build-dataset", "--source", "local", "--local-path", str(root), "--out", str(out)]
    )
    assert code == 0
    assert sha256(out) == sha256(reference)
    manifest = json.loads((tmp_path / "cli" / "nova.manifest.json").read_text())
    assert manifest["source"] == "local" and manifest["n_images"] == len(IMAGES)
    assert capsys.readouterr().out.startswith(f"{out}: 4 images, 3 cases, 4 gold boxes")


def test_build_dataset_from_the_embedded_sample(tmp_path, capsys):
    out = tmp_path / "nova.parquet"
    code = cli.main(
        ["build-dataset", "--source", "sample", "--out", str(out), "--n-cases", "1", "--seed", "5"]
    )
    assert code == 0
    manifest = json.loads((tmp_path / "nova.manifest.json").read_text())
    assert manifest["source"] == "sample" and manifest["n_cases"] == 1
    assert (manifest["seed"], manifest["n_cases"], manifest["images_per_case"]) == (5, 1, [1, 4])
    assert (tmp_path / "sample" / "data" / "nova-v1.parquet").is_file()


# --- user errors ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["score", "--task", "localization", "--predictions", "{answers}"], "need the model's box"),
        (["score", "--task", "captioning", "--predictions", "missing.jsonl"], "does not exist"),
        (["score", "--task", "localization", "--judge-kind", "keyword-lexicon"], "without a judge"),
        (["score", "--task", "localization", "--predictions", "{broken}"], "1 problem(s)"),
        (["score", "--task", "diagnosis", "--judge-kind", "keyword-lexicon"], "cannot score"),
        (["build-dataset", "--source", "local", "--out", "x.parquet"], "needs the dataset folder"),
    ],
)
def test_a_user_error_is_one_line_and_exit_code_2(args, message, nova, tmp_path, capsys):
    answers = write_answers(tmp_path, "localization")
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"filename": "case0001_001.png", "status": "ok"}\n')
    args = [a.format(answers=answers, broken=broken) for a in args]
    if args[0] == "score":
        args += ["--dataset", str(nova)]
        args += [] if "--predictions" in args else ["--predictions", str(answers)]
    capsys.readouterr()
    code = cli.main(args)
    captured = capsys.readouterr()
    assert code == 2
    assert captured.out == ""
    (line,) = captured.err.splitlines()
    assert line.startswith("novabench: error: ") and message in line and "; fix: " in line


# --- predictions that answer nothing ----------------------------------------------------


@pytest.mark.parametrize("content", ["empty", "all missing"])
def test_predictions_that_answer_no_image_fail_in_one_line(content, nova, tmp_path, capsys):
    path = tmp_path / "answers.jsonl"
    path.write_text("")
    if content == "all missing":  # the pipeline's records of a file that answered nothing
        model_cfg = {
            "adapter": "predictions_file",
            "tasks": ["localization"],
            "box_format": "xyxy_1000",
            "max_error_rate": 1,
            "settings": {"path": str(path)},
        }
        path = make_records(nova, tmp_path, "localization", model_cfg, "nothing")
        assert {json.loads(line)["status"] for line in path.open()} == {"missing"}
    common = ["--task", "localization", "--predictions", str(path), "--dataset", str(nova)]
    for args in (["score", *common, "--box-format", "xyxy_1000"], ["validate", *common]):
        capsys.readouterr()
        code = cli.main(args)
        captured = capsys.readouterr()
        assert code == 2 and captured.out == "", args
        (line,) = captured.err.splitlines()
        assert f"{path}: 4 of 4 images are missing from the predictions file" in line, line
        assert "; fix: " in line


# --- the pipeline's judges and workflow ---------------------------------------------------


@pytest.mark.parametrize("task", ["localization", "captioning", "diagnosis"])
def test_the_command_judges_as_the_pipeline_configures_it(task):
    # The workflow's own reader: the config's judge of the task, its settings written out.
    read = cli.pipeline_config(ROOT)
    assert read["tasks"][task]["enabled"] is True  # the schema's defaults are filled in
    assert cli.judge_config(task, None, None, read) == JUDGES[task]
    # An installed package outside a checkout: the task's own default judge.
    default = get_task(task).default_judge
    outside = cli.judge_config(task, None, None, {})
    assert outside == (None if default is None else {"settings": {}, **default})
    if task == "diagnosis":
        assert outside["settings"]["embedding_fallback"] is False


class _SwitchedKind(JudgeKind):
    """A judge kind with a command-line switch whose ``strict`` mode needs a package."""

    name = "switched"
    tasks = ("diagnosis",)
    cli_switches: ClassVar[dict[str, str]] = {"strict": "judge strictly (needs strictlib)"}

    def missing_dependencies(self, settings):
        if not settings.get("strict"):
            return []
        return [NovaError("strict judging needs strictlib", "pip install strictlib")]


@pytest.fixture
def switched(monkeypatch):
    """The kind registered, and a config whose diagnosis judge is one."""
    monkeypatch.setitem(_KINDS, _SwitchedKind.name, _SwitchedKind())
    judges = {"sw": {"kind": "switched", "settings": {"strict": False}}}
    return {"tasks": {"diagnosis": {"judge": "sw"}}, "judges": judges}


def test_a_judge_kind_declares_its_command_line_switches(switched):
    # The switch is the kind's: offered by the score command, set on its judge.
    args = cli.make_parser().parse_args(
        ["score", "--task", "diagnosis", "--predictions", "p", "--dataset", "d"]
    )
    assert args.judge_strict is None and args.judge_embedding_fallback is None
    args = cli.make_parser().parse_args(
        ["score", "--task", "diagnosis", "--predictions", "p", "--dataset", "d", "--no-strict"]
    )
    assert args.judge_strict is False
    judge = cli.judge_config("diagnosis", None, {"strict": False}, switched)
    assert judge["kind"] == "switched" and judge["settings"] == {"strict": False}
    # The kind says what its settings need that is not installed.
    with pytest.raises(NovaError, match="strict judging needs strictlib"):
        cli.judge_config("diagnosis", None, {"strict": True}, switched)
    # Another kind's switch is refused, naming the kind it belongs to.
    with pytest.raises(NovaError, match=r"--no-embedding-fallback is a setting of the diagnosis-m"):
        cli.judge_config("diagnosis", None, {"embedding_fallback": False}, switched)
    with pytest.raises(NovaError, match=r"--strict is a setting of the switched judge"):
        cli.judge_config("diagnosis", "diagnosis-matcher", {"strict": True}, switched)


def test_the_matcher_names_the_packages_its_embedding_step_needs(monkeypatch):
    import importlib.util

    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(NovaError, match=r"embedding step needs torch.*--no-embedding-fallback"):
        cli.judge_config("diagnosis", "diagnosis-matcher", {"embedding_fallback": True}, {})
    judge = cli.judge_config("diagnosis", "diagnosis-matcher", {"embedding_fallback": False}, {})
    assert judge["settings"]["embedding_fallback"] is False


def test_a_configfile_outside_a_checkout_is_refused_in_one_line(tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text("judges: {}\n")
    with pytest.raises(NovaError, match="--configfile needs the workflow it configures"):
        cli.pipeline_config(None, [config])


def test_an_installed_command_finds_the_checkout_it_runs_in(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(cli, "WORKFLOW", None)  # as a package installed by pip
    monkeypatch.chdir(ROOT / "config")
    assert cli.find_workflow() == ROOT
    assert cli.main(["catalog"]) == 0
    assert "gpt-4o" in capsys.readouterr().out
    monkeypatch.chdir(tmp_path)
    assert cli.find_workflow() is None
    assert cli.main(["catalog"]) == 2
    assert "holds no Snakefile" in capsys.readouterr().err


def test_python_dash_m_novabench_is_the_command():
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "novabench", "--version"],
        capture_output=True,
        text=True,
        cwd=ROOT / "scripts",
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"novabench {cli.__version__}"


# --- output paths the command lines write -----------------------------------------------------


@pytest.mark.parametrize("model", ["x/../../../escaped", "..", "a\\b"])
def test_score_refuses_a_model_name_that_leaves_the_out_dir(nova, tmp_path, capsys, model):
    answers = write_answers(tmp_path, "localization", name="answers")
    out_dir = tmp_path / "a" / "b" / "c" / "kept"
    capsys.readouterr()
    code = cli.main(
        ["score", "--task", "localization", "--dataset", str(nova), "--predictions", str(answers),
         "--box-format", "xyxy_1000", "--model", model, "--out-dir", str(out_dir)]
    )  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith(f"novabench: error: --model {model!r} is not a plain name")
    assert len(err.strip().splitlines()) == 1
    written = [p for p in tmp_path.rglob("*") if p.is_file() and p != answers]
    assert written == [], f"wrote {written}"


def test_audit_draw_into_a_folder_or_nowhere_is_one_line(tmp_path, capsys):
    from test_audit import score_file  # a scores file the draw reads to the end

    scores = score_file(tmp_path / "m.images.csv", [(True, True)] * 4)
    for out, expected in [
        (tmp_path, f"--out {tmp_path} is a folder"),
        (tmp_path / "no" / "sheet.csv", f"the folder {tmp_path / 'no'} does not exist"),
    ]:
        capsys.readouterr()
        code = cli.main(["audit", "draw", "--scores", str(scores), "--out", str(out)])
        err = capsys.readouterr().err
        assert code == 2 and expected in err and len(err.strip().splitlines()) == 1, err


def test_catalog_into_a_missing_readme_is_one_line(tmp_path, capsys):
    missing = tmp_path / "README.md"
    capsys.readouterr()
    assert cli.main(["catalog", "--readme", str(missing)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"novabench: error: --readme {missing}: no such file")
    assert len(err.strip().splitlines()) == 1 and not missing.exists()


# --- hostile predictions files: one line naming file and line, never a traceback --------

HOSTILE_LINES = {
    # 10^5 nested lists: json's decoder recurses once per level.
    "deep": (
        b'{"filename": "case0001_001.png", "raw": "x", "x": '
        + b"[" * 100_000
        + b"]" * 100_000
        + b"}\n",
        "nested too deeply to read",
    ),
    "latin-1": (b'{"filename": "case0001_001.png", "raw": "caf\xe9"}\n', "not UTF-8 (byte 0xe9"),
    # Python reads no integer of over 4,300 digits (a ValueError, not a JSONDecodeError).
    "long integer": (
        b'{"filename": "case0001_001.png", "raw": ' + b"1" * 5000 + b"}\n",
        "an integer of over 4300 digits, too long to read",
    ),
}


@pytest.mark.parametrize("shape", list(HOSTILE_LINES))
def test_a_hostile_predictions_line_is_one_line_in_validate_and_score(
    shape, nova, tmp_path, capsys
):
    content, problem = HOSTILE_LINES[shape]
    path = tmp_path / "answers.jsonl"
    path.write_bytes(b'{"filename": "case0001_002.png", "raw": "fine"}\n' + content)
    code, out = validate(capsys, "--task", "captioning", "--predictions", str(path))
    assert code == 1
    assert out[0].startswith(f"{path}:2: {problem}") and out[-1] == f"{path}: 1 problem(s)"
    capsys.readouterr()
    args = ["--task", "captioning", "--predictions", str(path), "--dataset", str(nova)]
    assert cli.main(["score", *args]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"novabench: error: {path}: 1 unreadable line(s): line 2 {problem}")


# --- the command reads as the pipeline reads, and agrees with the pipeline's job -----------


def test_score_reads_with_the_configfile_reading_options(nova, tmp_path, capsys):
    answers = tmp_path / "boxes.jsonl"
    three = "[[10, 10, 50, 50], [100, 100, 150, 150], [200, 200, 250, 250]]"
    answers.write_text(
        "".join(json.dumps({"filename": name, "raw": three}) + "\n" for name in NAMES)
    )
    configfile = tmp_path / "cap.yaml"
    configfile.write_text("tasks:\n  localization:\n    max_boxes: 2\n")
    args = ["--task", "localization", "--dataset", str(nova), "--predictions", str(answers)]
    args += ["--box-format", "xyxy_1000", "--format", "json"]
    code, out = score_cli(capsys, *args)
    assert code == 0 and json.loads(out)["metrics"]["n_boxes_over_cap"] == 0
    code, out = score_cli(capsys, *args, "--configfile", str(configfile))
    assert code == 0
    metrics = json.loads(out)["metrics"]
    assert (metrics["n_capped"], metrics["n_boxes_over_cap"]) == (len(NAMES), len(NAMES))


def test_validate_reads_with_the_configfile_reading_options(nova, tmp_path, capsys, monkeypatch):
    import novabench.answers

    seen, read_answer = [], novabench.answers.read_answer

    def spy(task, record, size, options=None):
        seen.append(options)
        return read_answer(task, record, size, options)

    monkeypatch.setattr(novabench.answers, "read_answer", spy)
    configfile = tmp_path / "cap.yaml"
    configfile.write_text("tasks:\n  localization:\n    max_boxes: 2\n")
    answers = write_answers(tmp_path, "localization")
    model_cfg = {"adapter": "gold", "tasks": ["localization"]}
    records = make_records(nova, tmp_path, "localization", model_cfg, "gold")
    for path in (answers, records):
        seen.clear()
        args = ["--task", "localization", "--predictions", str(path), "--dataset", str(nova)]
        args += ["--box-format", "xyxy_1000", "--allow-missing", "--configfile", str(configfile)]
        code, _ = validate(capsys, *args)
        assert code == 0 and seen and all(o == {"max_boxes": 2} for o in seen), (path, seen)


def test_validate_score_and_the_job_agree_on_null_answers(nova, tmp_path, capsys):
    answers = tmp_path / "nulls.jsonl"
    lines = [{"filename": name, "raw": "no finding"} for name in NAMES]
    lines[1]["raw"] = None
    answers.write_text("".join(json.dumps(line) + "\n" for line in lines))
    common = ["--task", "localization", "--predictions", str(answers), "--dataset", str(nova)]
    common += ["--box-format", "xyxy_1000"]
    code, out = validate(capsys, *common)
    assert code == 1
    assert out[0] == (
        f"{answers}: 1 answer(s) with raw null, e.g. line 2 {NAMES[1]} "
        "(pass --allow-missing to score them as error)"
    )
    capsys.readouterr()
    assert cli.main(["score", *common]) == 2
    assert f"1 answer(s) with raw null: line 2 {NAMES[1]}" in capsys.readouterr().err
    model_cfg = {"adapter": "predictions_file", "settings": {"path": str(answers)}}
    model_cfg.update(tasks=["localization"], box_format="xyxy_1000")
    # The job's words are the file's, not those of a failed request sent to a service.
    with pytest.raises(NovaError, match=rf"1 answer\(s\) with raw null: line 2 {NAMES[1]}"):
        make_records(nova, tmp_path, "localization", model_cfg, "nulls")
    # Allowed in all three, the image is scored as an error in all three.
    code, out = validate(capsys, *common, "--allow-missing")
    assert code == 0 and out[-1].endswith("valid (4 answers for localization)")
    records = make_records(
        nova, tmp_path, "localization", {**model_cfg, "max_error_rate": 0.25}, "nulls"
    )
    statuses = [json.loads(line)["status"] for line in records.read_text().splitlines()]
    assert statuses.count("error") == 1
    code, out = score_cli(capsys, *common, "--allow-missing", "--format", "json")
    assert code == 0 and json.loads(out)["metrics"]["n_error"] == 1


@pytest.mark.parametrize(
    ("field", "value", "problem"),
    [
        ("request", "xyxy", "request is a str, not an object"),
        ("request", {"box_format": 7}, "request.box_format must be a string or null"),
        ("frame_size", ["a", 2], "frame_size must be two positive integers [width, height]"),
        ("frame_size", [640], "frame_size must be two positive integers [width, height]"),
    ],
)
def test_a_record_field_that_would_crash_reading_is_one_line(
    field, value, problem, nova, tmp_path, capsys
):
    model_cfg = {"adapter": "gold", "tasks": ["localization"]}
    records = make_records(nova, tmp_path, "localization", model_cfg, "gold")
    lines = [json.loads(line) for line in records.read_text().splitlines()]
    lines[1][field] = value
    records.write_text("".join(json.dumps(line) + "\n" for line in lines))
    args = ["--task", "localization", "--predictions", str(records), "--dataset", str(nova)]
    code, out = validate(capsys, *args)
    assert code == 1 and out == [f"{records}:2: {problem}", f"{records}: 1 problem(s)"]
    capsys.readouterr()
    assert cli.main(["score", *args]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert f"first: {records}:2: {problem}" in line
