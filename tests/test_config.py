"""Config validation: every mistake stops the run with one line naming the key."""

from __future__ import annotations

import copy
import os
import subprocess

import pytest
import yaml

import support
from novabench.answer_formats import BOX_FORMATS
from novabench.config import (
    config_schema,
    read_config,
    validate_config,
)
from novabench.dataset.schema import rater_slug
from novabench.errors import ConfigError, NovaError
from support import ROOT

SCHEMA = str(ROOT / "workflow" / "schemas" / "config.schema.yaml")
DEFAULT = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())


def checked(config):
    """Read like common.smk does; return the one-line message it prints, or the plan."""
    try:
        return read_config(config, ROOT)
    except ConfigError as exc:
        return f"config error: {exc}"


def with_change(change):
    config = copy.deepcopy(DEFAULT)
    change(config)
    return checked(config)


def test_the_box_cap_is_a_reading_option_of_localization_only():
    plan = checked(copy.deepcopy(DEFAULT))
    assert plan.reading_options("localization") == {"max_boxes": 100}
    assert plan.reading_options("captioning") == {}
    capped = with_change(lambda c: c["tasks"]["localization"].update(max_boxes=5))
    assert capped.reading_options("localization") == {"max_boxes": 5}
    refused = with_change(lambda c: c["tasks"]["localization"].update(max_boxes=0))
    assert refused.startswith("config error: ") and "max_boxes" in refused


def test_default_config_is_valid_and_plans_the_offline_models():
    plan = checked(copy.deepcopy(DEFAULT))
    assert not isinstance(plan, str), plan
    jobs = plan.jobs()
    assert ("localization", "gold") in jobs and ("localization", "random") in jobs
    assert all(task in {"localization", "captioning", "diagnosis"} for task, _ in jobs)


def test_schema_fills_defaults():
    config = {"dataset": {"source": "sample"}, "models": {}}
    validate_config(config, config_schema(ROOT))
    assert config["dataset"]["sample"] == {
        "seed": 20250520,
        "n_cases": 12,
        "images_per_case": [1, 4],
    }
    assert config["dataset"]["hf"]["current"] == {"repo_id": "c-i-ber/Nova", "revision": "main"}
    assert config["tasks"]["diagnosis"]["findings"] == "reference"


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (lambda c: c.update(datset={}), "unknown key datset"),
        (lambda c: c.pop("models"), "missing key models"),
        (lambda c: c["dataset"].pop("source"), "missing key dataset.source"),
        (lambda c: c["dataset"].update(sourc="hf"), "unknown key dataset.sourc"),
        (
            lambda c: c["dataset"].update(source="s3"),
            "invalid value at dataset.source: 's3' is not one of",
        ),
        (
            lambda c: c["dataset"]["sample"].update(n_cases="ten"),
            "invalid value at dataset.sample.n_cases: 'ten' is not of type 'integer'",
        ),
        (
            lambda c: c["models"].update({"../evil": c["models"]["gold"]}),
            "bad name '../evil' at models",
        ),
        (lambda c: c["models"].update({"a/b": c["models"]["gold"]}), "bad name 'a/b' at models"),
        (lambda c: c["models"].update({"rater-x": c["models"]["gold"]}), "bad name 'rater-x'"),
        (
            lambda c: c["models"]["gold"].update(tasks=["segmentation"]),
            "invalid value at models.gold.tasks.0",
        ),
        (
            lambda c: c["models"]["gold"].update(adapter="no_such_backend"),
            "no adapter called 'no_such_backend'",
        ),
        (
            lambda c: c["tasks"]["captioning"].update(judge="oracle"),
            "tasks.captioning.judge names 'oracle'",
        ),
        (
            lambda c: c["tasks"]["localization"].update(prompt="config/prompts/missing.txt"),
            "prompt template config/prompts/missing.txt",
        ),
        (
            lambda c: c["tasks"]["diagnosis"].update(findings="random"),
            "not an enabled captioning model",
        ),
        (lambda c: c["dataset"].update(source="local"), "dataset.local_path is not set"),
        (
            lambda c: c["tasks"]["diagnosis"].update(judge="bad name"),
            "bad name 'bad name' at tasks.diagnosis.judge",
        ),
        # Settings are checked at plan time through each adapter's and judge's schema.
        (
            lambda c: c["models"]["random"]["settings"].update(sed=1),
            "models.random.settings: unknown setting sed",
        ),
        (
            lambda c: c["models"].update(
                api={
                    "adapter": "openai_compatible",
                    "tasks": ["captioning"],
                    "settings": {"base_url": "http://localhost:1/v1", "modle": "gpt-4o"},
                }
            ),
            "models.api.settings: unknown setting modle",
        ),
        (
            lambda c: c["judges"]["matcher"]["settings"].update(threshold=2),
            "invalid value of judges.matcher.settings.threshold",
        ),
        (
            lambda c: c["judges"].update(j={"kind": "oracle"}),
            "judges.j.kind: no judge kind called 'oracle'",
        ),
        (
            lambda c: c["models"]["retrieval"].update(tasks=["localization"]),
            "models.retrieval: the retrieval adapter cannot run localization",
        ),
        (
            lambda c: c["tasks"]["captioning"].update(judge="matcher"),
            "tasks.captioning.judge: judge 'matcher' (kind diagnosis-matcher) judges diagnosis",
        ),
    ],
)
def test_bad_config_gives_one_line_naming_the_key(change, expected):
    message = with_change(change)
    assert isinstance(message, str), "the bad config was accepted"
    assert expected in message
    assert "fix" in message and "\n" not in message


def test_disabled_models_and_tasks_stay_out_of_the_plan():
    config = copy.deepcopy(DEFAULT)
    config["models"]["random"]["enabled"] = False
    config["tasks"]["captioning"]["enabled"] = False
    plan = checked(config)
    assert all(model != "random" for _, model in plan.jobs())
    assert all(task != "captioning" for task, _ in plan.jobs())


def test_rater_slugs_are_safe_file_names():
    assert rater_slug("rater1") == "rater1"
    assert rater_slug("Dr. A / B") == "Dr._A_B"
    assert rater_slug("../..") == "unnamed"


def failed_dry_run(tmp_path, config_text: str) -> str:
    """The output of `snakemake -n` with this config, which must fail."""
    config = tmp_path / "config.yaml"
    config.write_text("dataset: {source: sample}\n" + config_text)
    result = support.snakemake(tmp_path, "-n", "--configfile", str(config), timeout=120)
    assert result.returncode != 0
    return result.stderr + result.stdout


def test_snakemake_stops_on_a_bad_config_with_the_one_line(tmp_path):
    models = "models:\n  ../evil:\n    adapter: gold\n    tasks: [localization]\n"
    assert "config error: bad name '../evil' at models" in failed_dry_run(tmp_path, models)


def test_a_dry_run_catches_a_misspelled_setting(tmp_path):
    models = (
        "models:\n  gpt:\n    adapter: openai_compatible\n    tasks: [captioning]\n"
        "    settings: {base_url: 'http://localhost:1/v1', modle: gpt-4o}\n"
    )
    assert "models.gpt.settings: unknown setting modle" in failed_dry_run(tmp_path, models)


def test_the_environment_check_names_every_missing_key_at_once(monkeypatch):
    monkeypatch.delenv("NOVA_TEST_KEY_A", raising=False)
    monkeypatch.delenv("NOVA_TEST_KEY_B", raising=False)
    config = copy.deepcopy(DEFAULT)
    for name, variable in (("a", "NOVA_TEST_KEY_A"), ("b", "NOVA_TEST_KEY_B")):
        config["models"][name] = {
            "adapter": "openai_compatible",
            "tasks": ["captioning"],
            "settings": {
                "base_url": "http://127.0.0.1:9/v1",
                "model": "m",
                "api_key_env": variable,
            },
        }
    plan = checked(config)
    with pytest.raises(NovaError) as caught:
        plan.check_environment()
    message = str(caught.value)
    assert message.startswith("2 problems before the run: (1) models.a")
    assert "NOVA_TEST_KEY_A" in message and "NOVA_TEST_KEY_B" in message
    assert "\n" not in message


# --- `--config` strings, one-line errors, an empty plan -----------------------------------


def coerced(config):
    from novabench.config import coerce_config

    return coerce_config(config, config_schema(ROOT))


def test_config_strings_take_the_type_the_schema_asks():
    # what `--config dataset='{...}'` passes: Snakemake parses it with every scalar a string
    config = coerced(
        {
            "dataset": {
                "source": "local",
                "local_path": "null",
                "clip_boxes": "true",
                "hf": {"timeout_s": "2.5", "current": {"repo_id": "a/b", "revision": "123"}},
                "sample": {"n_cases": "7", "images_per_case": ["1", "4"], "seed": "x1"},
            },
            "tasks": {"captioning": {"enabled": "False"}},
            "reporting": {"controls": ["gold"], "reference_model": "~"},
            "models": {"gold": {"adapter": "gold", "tasks": ["captioning"], "enabled": "true"}},
        }
    )
    assert config["dataset"] == {
        "source": "local",
        "local_path": None,
        "clip_boxes": True,
        "hf": {"timeout_s": 2.5, "current": {"repo_id": "a/b", "revision": "123"}},
        "sample": {"n_cases": 7, "images_per_case": [1, 4], "seed": "x1"},  # left for validate
    }
    assert config["tasks"] == {"captioning": {"enabled": False}}
    assert config["reporting"] == {"controls": ["gold"], "reference_model": None}
    assert config["models"]["gold"]["enabled"] is True


def test_a_string_that_is_no_such_value_is_still_reported():
    config = copy.deepcopy(DEFAULT)
    config["dataset"]["clip_boxes"] = "maybe"
    coerced(config)
    assert checked(config) == (
        "config error: invalid value at dataset.clip_boxes: 'maybe' is not of type 'boolean'; "
        "fix: edit the config (every key is documented in config/README.md)"
    )


def test_model_settings_strings_take_the_adapters_types():
    config = copy.deepcopy(DEFAULT)
    config["models"]["random"]["settings"] = {"seed": "3", "max_boxes": "2"}
    plan = checked(config)
    assert not isinstance(plan, str), plan
    assert config["models"]["random"]["settings"] == {"seed": 3, "max_boxes": 2}


def dry_run(tmp_path, *args: str) -> subprocess.CompletedProcess:
    return support.snakemake(tmp_path, "-n", *args, timeout=120)


# Snakemake's own notices on every run: the default profile it applies, config keys
# extended by the command line.
NOTICES = ("extended by additional", "Using workflow specific profile profiles/default")


def output_lines(result: subprocess.CompletedProcess) -> list[str]:
    lines = (result.stdout + result.stderr).splitlines()
    return [line for line in lines if not any(notice in line for notice in NOTICES)]


def test_config_on_the_command_line_is_typed(tmp_path):
    result = dry_run(
        tmp_path, "--config", "dataset={source: sample, clip_boxes: true, hf: {timeout_s: 30}}"
    )
    assert result.returncode == 0, result.stderr[-2000:]


def test_a_config_error_is_one_line_without_stack_frames(tmp_path):
    result = dry_run(tmp_path, "--config", "dataset={source: local}")
    assert result.returncode == 1
    assert output_lines(result) == [
        "config error: dataset.source is local but dataset.local_path is not set; fix: set "
        "dataset.local_path to the folder of the downloaded dataset repository"
    ]


def test_a_plan_without_jobs_says_so(tmp_path):
    config = copy.deepcopy(DEFAULT)
    for task in config["tasks"].values():
        task["enabled"] = False
    assert checked(config).idle_reason() == (
        "nothing to predict or score: every task is disabled; only the dataset is built; "
        "fix: set tasks.<task>.enabled: true"
    )
    config["tasks"]["localization"]["enabled"] = True
    for model in config["models"].values():
        model["tasks"] = [t for t in model["tasks"] if t != "localization"] or ["captioning"]
    assert checked(config).idle_reason() == (
        "nothing to predict or score: no enabled model runs localization; only the dataset "
        "is built; fix: add the task to a model's tasks: or enable a model that runs it"
    )
    assert checked(copy.deepcopy(DEFAULT)).idle_reason() is None
    disabled = "tasks: {localization: {enabled: false}, captioning: {enabled: false}, "
    disabled += "diagnosis: {enabled: false}}"
    (tmp_path / "c.yaml").write_text(disabled + "\n")
    result = dry_run(tmp_path, "--configfile", str(tmp_path / "c.yaml"))
    assert result.returncode == 0
    assert "nothing to predict or score: every task is disabled" in result.stdout + result.stderr


def test_a_wrong_local_path_stops_the_dry_run_in_one_line_and_leaves_nothing(tmp_path):
    folder = tmp_path / "Nova"
    result = dry_run(tmp_path, "--config", f"dataset={{source: local, local_path: {folder}}}")
    assert result.returncode == 1
    assert output_lines(result) == [
        f"config error: dataset.local_path: dataset directory {folder} does not exist; fix: "
        "set dataset.local_path to the folder holding the downloaded dataset repository"
    ]
    # A folder that exists but is not the dataset's is named too.
    folder.mkdir()
    message = with_change(lambda c: c["dataset"].update(source="local", local_path=str(folder)))
    assert message.startswith(
        f"config error: dataset.local_path: {folder} holds neither data/nova-v1.parquet"
    )
    assert not (tmp_path / "results").exists()


def test_a_predictions_file_model_without_box_format_fails_at_plan_time(tmp_path):
    answers = tmp_path / "answers.jsonl"
    answers.write_text("")
    model = {"adapter": "predictions_file", "tasks": ["localization"]}
    model["settings"] = {"path": str(answers)}
    message = with_change(lambda c: c["models"].update(harness=model))
    assert message == (
        "config error: models.harness runs localization but declares no box_format; fix: set "
        "models.harness.box_format to the model's box convention, one of "
        f"{', '.join(BOX_FORMATS)} (see config/README.md)"
    )
    # Declared, or a task without boxes: planned.
    for change in ({"box_format": "xyxy_1000"}, {"tasks": ["captioning"]}):
        fixed = {**model, **change}
        plan = with_change(lambda c, fixed=fixed: c["models"].update(harness=fixed))
        assert not isinstance(plan, str), plan


def test_a_model_name_with_a_trailing_newline_is_refused():
    message = with_change(lambda c: c["models"].update({"gpt\n": c["models"]["gold"]}))
    assert message.startswith("config error: bad name 'gpt\\n' at models")


def test_a_model_named_reference_is_refused():
    """`tasks.diagnosis.findings: reference` means the reference caption: a captioning
    model of that name would be silently ignored."""
    message = with_change(lambda c: c["models"].update(reference=c["models"]["gold"]))
    assert message == (
        "config error: models.reference: the name 'reference' is reserved "
        "(tasks.diagnosis.findings: reference means the reference caption); fix: give the "
        "model another name"
    )


def test_n_cases_beyond_the_generator_is_refused_at_plan_time(tmp_path):
    from novabench.sample.generate import MAX_CASES

    message = with_change(lambda c: c["dataset"]["sample"].update(n_cases=MAX_CASES + 1))
    assert message.startswith("config error: invalid value at dataset.sample.n_cases:")
    plan = with_change(lambda c: c["dataset"]["sample"].update(n_cases=MAX_CASES))
    assert not isinstance(plan, str), plan
    # The dry run stops before any job (the sample source is never deleted).
    result = dry_run(tmp_path, "--config", "dataset={source: sample, sample: {n_cases: 50000}}")
    assert result.returncode != 0
    assert "dataset.sample.n_cases" in result.stdout + result.stderr


def test_a_model_error_rate_in_percent_is_refused_with_the_fraction_to_write():
    def percent(config):
        config["models"]["gold"]["max_error_rate"] = 10

    assert with_change(percent) == (
        "config error: models.gold.max_error_rate is 10, a percent; it is a fraction of "
        "images (as reporting.max_error_rate); fix: write max_error_rate: 0.1"
    )

    def fraction(config):
        config["models"]["gold"]["max_error_rate"] = 0.1

    assert not isinstance(with_change(fraction), str)


def test_a_missing_key_is_checked_when_the_run_starts_as_the_docs_say(tmp_path):
    """The dry run plans without keys; the run stops at its start in one line naming the
    variable and the fix, with no traceback and no Snakefile header after it."""
    keyless = {
        "adapter": "openai_compatible",
        "tasks": ["captioning"],
        "settings": {"base_url": "http://127.0.0.1:9/v1", "model": "m"},
    }
    keyless["settings"]["api_key_env"] = "NOVA_TEST_KEY_NEVER_SET"
    config = tmp_path / "keyless.yaml"
    config.write_text(yaml.safe_dump({"models": {"keyless": keyless}}))
    readme = " ".join((ROOT / "docs" / "models.md").read_text().split())
    assert "An API key is checked when the run starts, not by `snakemake -n`" in readme
    env = {k: v for k, v in os.environ.items() if k != "NOVA_TEST_KEY_NEVER_SET"}
    planned = support.snakemake(tmp_path, "-n", "--configfile", str(config), env=env, timeout=120)
    assert planned.returncode == 0, planned.stderr[-2000:]
    run = support.snakemake(tmp_path, "--configfile", str(config), env=env, timeout=300)
    assert run.returncode == 1
    (line,) = [line for line in output_lines(run) if "NOVA_TEST_KEY_NEVER_SET" in line]
    assert line.startswith("cannot start the run: models.keyless: ") and "; fix: " in line
    output = run.stdout + run.stderr
    assert "Traceback" not in output and 'in file "' not in output, output[-3000:]
    assert output.rstrip().endswith(line), output[-3000:]
