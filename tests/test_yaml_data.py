"""The strict YAML reader: a key given twice, a NaN or an infinity, and an alias bomb are
refused in one line naming the file and line, in every YAML the project reads from users."""

from __future__ import annotations

import copy
import re
import time

import pytest
import yaml

import support
from novabench.catalog import load_catalog
from novabench.config import plan_from_files, read_config
from novabench.errors import ConfigError, NovaError
from novabench.yaml_data import MAX_ALIAS_EXPANSION, check_loaded, load_yaml, read_yaml
from support import ROOT


def alias_bomb(indent: str = "") -> str:
    """Nine levels of ten aliases: about 500 bytes that expand to 10^9 values."""
    lines = [f"{indent}l0: &l0 [v, v, v, v, v, v, v, v, v, v]"]
    lines += [f"{indent}l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 10)}]" for i in range(1, 9)]
    return "\n".join(lines) + "\n"


def bomb_model_config(tmp_path):
    path = tmp_path / "bomb.yaml"
    path.write_text(
        "models:\n  bomb:\n    adapter: openai_compatible\n    tasks: [captioning]\n"
        "    settings:\n      model: m\n      base_url: http://127.0.0.1:9/v1\n"
        "      api_key_env: NO_SUCH_KEY\n      provider: local\n      extra_body:\n"
        + alias_bomb(" " * 8)
    )
    return path


def test_an_alias_bomb_is_refused_quickly_naming_the_file():
    started = time.monotonic()
    with pytest.raises(NovaError, match=r"^bomb\.yaml: its aliases expand it by more than"):
        load_yaml(alias_bomb(), "bomb.yaml")
    assert time.monotonic() - started < 1


def test_aliases_within_the_bound_still_load():
    text = "base: &b {lr: 1, steps: [1, 2, 3]}\nrun1: *b\nrun2:\n  <<: *b\n  lr: 2\n"
    assert load_yaml(text, "ok.yaml") == {
        "base": {"lr": 1, "steps": [1, 2, 3]},
        "run1": {"lr": 1, "steps": [1, 2, 3]},
        "run2": {"lr": 2, "steps": [1, 2, 3]},
    }
    wide = f"a: &a [{', '.join(['x'] * 100)}]\nb: [{', '.join(['*a'] * 120)}]\n"
    assert MAX_ALIAS_EXPANSION < 101 * 120
    with pytest.raises(NovaError, match="aliases expand it"):
        load_yaml(wide, "wide.yaml")


def test_a_self_referring_alias_is_refused():
    with pytest.raises(NovaError, match=r"^loop\.yaml:1: an alias refers to itself"):
        load_yaml("a: &x [1, *x]\n", "loop.yaml")


def test_a_duplicate_key_names_the_key_file_and_line():
    text = "models:\n  gpt:\n    adapter: gold\n  gpt:\n    adapter: random\n"
    with pytest.raises(NovaError, match=r"^my\.yaml:4: the key 'gpt' is given twice"):
        load_yaml(text, "my.yaml")
    # The same text as an int and a string are two keys.
    assert load_yaml("1: a\n'1': b\n", "keys.yaml") == {1: "a", "1": "b"}


@pytest.mark.parametrize("value", [".nan", ".NaN", ".inf", "-.Inf", "+.inf"])
def test_nan_and_infinities_are_refused_with_their_line(value):
    with pytest.raises(NovaError, match=rf"^t\.yaml:2: {re.escape(value)} is not a finite number"):
        load_yaml(f"reporting:\n  confidence: {value}\n", "t.yaml")


@pytest.mark.parametrize("value", ["!!float nan", "!!float -inf", "!!float 1e400", "-1.5e+999"])
def test_non_finite_numbers_spelled_otherwise_are_refused_too(value):
    with pytest.raises(NovaError, match=r"^t\.yaml:2: .* is not a finite number"):
        load_yaml(f"reporting:\n  confidence: {value}\n", "t.yaml")


@pytest.mark.parametrize(("first", "second"), [("yes", "true"), ("1", "0x1"), ("1", "1.0")])
def test_keys_that_read_as_the_same_value_are_a_duplicate(first, second):
    with pytest.raises(NovaError, match=rf"^k\.yaml:3: the key '{second}' is given twice"):
        load_yaml(f"m:\n  {first}: a\n  {second}: b\n", "k.yaml")


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("n: " + "1" * 5000, "1" * 20 + "... (5,000"),
        ("? " + "7" * 4301 + "\n: x", "7" * 20 + "... (4,301"),
    ],
)
def test_an_integer_too_long_to_read_is_one_line_naming_the_file(tmp_path, text, shown):
    path = tmp_path / "long.yaml"
    path.write_text(text + "\n")
    with pytest.raises(NovaError) as refused:
        read_yaml(path, "the list", "fix it")
    message = str(refused.value)
    assert message.startswith(f"the list {path}:1: {shown} characters) is not a value that")
    assert message.endswith("fix: give a number of at most 4,300 digits") and len(message) < 300


def test_already_loaded_data_is_bounded_too():
    with pytest.raises(NovaError, match="the config: its aliases expand it by more than"):
        check_loaded(yaml.safe_load(alias_bomb()), "the config")
    with pytest.raises(NovaError, match=r"the config: a\.b\.1 is nan, not a finite number"):
        check_loaded({"a": {"b": [1.0, float("nan")]}}, "the config")


def test_read_config_refuses_nan_where_a_number_goes():
    config = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    for key, value in (("confidence", float("nan")), ("n_resamples", float("inf"))):
        changed = copy.deepcopy(config)
        changed["reporting"]["bootstrap"][key] = value
        with pytest.raises(ConfigError, match=f"reporting.bootstrap.{key} is (nan|inf), not"):
            read_config(changed, ROOT)


def test_a_nan_threshold_in_a_config_file_is_refused_by_the_dry_run(tmp_path):
    """`reporting.min_answered: .nan` would let no model's dagger ever show."""
    config = tmp_path / "nan.yaml"
    config.write_text("reporting:\n  min_answered: .nan\n")
    result = support.snakemake(tmp_path, "-n", "--configfile", str(config), timeout=120)
    assert result.returncode != 0
    assert f"config error: the config {config}:2: .nan is not a finite number" in (
        result.stdout + result.stderr
    )


def test_config_files_read_by_the_cli_refuse_duplicates_and_bombs(tmp_path):
    duplicated = tmp_path / "dup.yaml"
    duplicated.write_text("dataset: {source: sample}\ndataset: {source: hf}\n")
    with pytest.raises(ConfigError, match=r"dup\.yaml:2: the key 'dataset' is given twice"):
        plan_from_files(ROOT, [duplicated])
    with pytest.raises(ConfigError, match="its aliases expand it"):
        plan_from_files(ROOT, [bomb_model_config(tmp_path)])


def test_a_catalog_entry_given_twice_in_one_file_is_refused(tmp_path):
    entry = "  adapter: gold\n  tasks: [localization]\n"
    (tmp_path / "models.yaml").write_text(f"m1:\n{entry}m1:\n{entry}")
    with pytest.raises(ConfigError, match=r"models\.yaml:4: the key 'm1' is given twice"):
        load_catalog(tmp_path)


def test_a_dry_run_refuses_an_alias_bomb_and_a_duplicate_key(tmp_path):
    result = support.snakemake(
        tmp_path, "-n", "--configfile", str(bomb_model_config(tmp_path)), timeout=120
    )
    assert result.returncode != 0
    output = result.stdout + result.stderr
    assert "config error: the config " in output
    assert "its aliases expand it by more than 10,000 values" in output
    duplicated = tmp_path / "dup.yaml"
    duplicated.write_text("reporting: {}\nmodels: {}\nreporting: {}\n")
    result = support.snakemake(tmp_path, "-n", "--configfile", str(duplicated), timeout=120)
    assert result.returncode != 0
    assert "dup.yaml:3: the key 'reporting' is given twice" in result.stdout + result.stderr


def test_the_estimate_refuses_an_alias_bomb(tmp_path, capsys):
    from novabench.cli import main

    assert main(["estimate", "--configfile", str(bomb_model_config(tmp_path))]) == 2
    error = capsys.readouterr().err
    assert error.startswith("novabench: error: the config ")
    assert "its aliases expand it by more than" in error and len(error.splitlines()) == 1
