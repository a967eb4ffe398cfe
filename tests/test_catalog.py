"""The model catalog (config/models/): names expand to entries that plan, offline."""

from __future__ import annotations

import copy
import os
import re
import subprocess
from pathlib import Path

import pytest
import yaml

import support
from novabench.catalog import (
    FAMILIES,
    catalog_table,
    entry_tasks,
    load_catalog,
    predict_params,
    readme_with_table,
)
from novabench.config import plan_from_files, read_config
from novabench.errors import ConfigError
from novabench.tokens import IMAGE_RULES
from support import ROOT

CATALOG_DIR = ROOT / "config" / "models"
SCHEMA = str(ROOT / "workflow" / "schemas" / "config.schema.yaml")
DEFAULT = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
# The raw files, read here without the package.
RAW = {
    name: entry
    for path in sorted(CATALOG_DIR.glob("*.yaml"))
    for name, entry in yaml.safe_load(path.read_text()).items()
}


def planned(models) -> object:
    """Expand, validate and check like common.smk; the plan or the one-line message."""
    config = copy.deepcopy(DEFAULT)
    config["models"] = copy.deepcopy(models)
    try:
        return read_config(config, ROOT)
    except ConfigError as exc:
        return str(exc)


def test_the_catalog_has_at_least_thirty_entries_in_several_files():
    catalog = load_catalog(CATALOG_DIR)
    assert len(catalog) == len(RAW) >= 30
    assert len({entry.file for entry in catalog.values()}) >= 5


def test_a_list_of_names_gives_the_catalog_entries():
    plan = planned(["gold", "gpt-4o", "qwen2.5-vl-7b-local"])
    assert list(plan.config["models"]) == ["gold", "gpt-4o", "qwen2.5-vl-7b-local"]
    gpt = plan.config["models"]["gpt-4o"]
    assert gpt["settings"]["model"] == RAW["gpt-4o"]["settings"]["model"]
    assert gpt["info"]["checked"] == str(RAW["gpt-4o"]["info"]["checked"])  # a date in YAML


def test_overrides_merge_over_the_entry_and_from_copies_it():
    plan = planned(
        {
            "qwen2.5-vl-7b": {"settings": {"base_url": "http://gpu-node:8000/v1"}},
            "greedy": {"from": "qwen2.5-vl-7b", "tasks": ["captioning"], "settings": {"seed": 1}},
        }
    )
    served, greedy = plan.config["models"]["qwen2.5-vl-7b"], plan.config["models"]["greedy"]
    raw = RAW["qwen2.5-vl-7b"]
    assert served["settings"] == {**raw["settings"], "base_url": "http://gpu-node:8000/v1"}
    assert greedy["settings"] == {**raw["settings"], "seed": 1}
    assert greedy["tasks"] == ["captioning"]  # lists are replaced, not merged
    assert greedy["box_format"] == raw["box_format"] and "from" not in greedy
    assert [task for task, model in plan.jobs() if model == "greedy"] == ["captioning"]


def test_a_full_entry_is_kept_as_it_is():
    entry = {"adapter": "random", "tasks": ["localization"], "settings": {"seed": 3}}
    plan = planned({"gpt-4o": copy.deepcopy(entry)})
    assert plan.config["models"]["gpt-4o"] == {**entry, "enabled": True, "control_check": True}


@pytest.mark.parametrize(
    ("models", "message"),
    [
        (
            ["gpt4o"],
            "models.gpt4o: no catalog entry called 'gpt4o' (did you mean gpt-4o",
        ),
        (
            {"mine": {"from": "qwen2.5vl-7b"}},
            "models.mine: no catalog entry called 'qwen2.5vl-7b' (did you mean qwen2.5-vl-7b",
        ),
        (
            {"x": {"from": "gold", "adapter": "gold", "tasks": ["diagnosis"]}},
            "models.x has both adapter and from",
        ),
        (["gold", 3], "models[1] is 3, not a catalog name"),
        (["gold", "gold"], "models lists 'gold' twice"),
        (
            {"gpt-4o": {"settings": {"temprature": 0.2}}},
            "models.gpt-4o.settings: unknown setting temprature",
        ),
        (
            {"gpt-4o": {"settings": {"api_key_env": None, "base_url": None}}},
            "invalid value of models.gpt-4o.settings.base_url",
        ),
        (
            {"gpt-4o": {"info": {"family": "gtp"}}},
            "models.gpt-4o.info.family: unknown family 'gtp' (did you mean gpt?)",
        ),
        (
            {"gpt-4o": {"info": {"image_tokens": "openai_tile"}}},
            "models.gpt-4o.info.image_tokens: unknown rule 'openai_tile'",
        ),
        ({"gpt-4o": {"info": {"pricce": 1}}}, "unknown key models.gpt-4o.info.pricce"),
    ],
)
def test_mistakes_stop_the_plan_with_one_line(models, message):
    result = planned(models)
    assert isinstance(result, str), "the mistake was accepted"
    assert message in result and "fix" in result and "\n" not in result


def test_every_entry_is_documented_and_uses_its_familys_box_convention():
    for name, entry in load_catalog(CATALOG_DIR).items():
        config, info = entry.config, entry.config["info"]
        assert info["about"] and info["provider"], name
        family = FAMILIES[info["family"]]
        localizes = "localization" in entry_tasks(config)
        if family.box_format and localizes:
            assert config["box_format"] == family.box_format, name
        assert info.get("price_usd_per_million_tokens") or info.get("price_note"), name
        if config["adapter"] in ("openai_compatible", "hf_local"):
            assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", str(info["checked"])), name
            assert info["source"].startswith("https://"), name
        for prompt in (config.get("prompts") or {}).values():
            assert (ROOT / prompt).is_file(), f"{name}: {prompt}"


def test_every_family_names_a_known_image_rule():
    for family in FAMILIES.values():
        assert isinstance(family.image_tokens, int) or family.image_tokens in IMAGE_RULES


def test_the_baselines_are_the_default_configs_models():
    baselines = yaml.safe_load((CATALOG_DIR / "baselines.yaml").read_text())
    assert {name: predict_params(entry) for name, entry in baselines.items()} == DEFAULT["models"]


def test_the_papers_models_send_what_they_sent_before_the_catalog():
    # What config/paper.yaml spelled out before it named catalog entries: the settings that
    # make the cache key, so the paper's cached answers stay valid.
    before = {
        "gpt-4o": ("https://api.openai.com/v1", "gpt-4o-2024-08-06", "pixel_xyxy", None),
        "gemini-2.0-flash": (
            "https://generativelanguage.googleapis.com/v1beta/openai/",
            "gemini-2.0-flash-001",
            "gemini_yxyx_1000",
            "config/prompts/localization-gemini-v1.txt",
        ),
        "qwen2.5-vl-72b": (
            "http://localhost:8000/v1",
            "Qwen/Qwen2.5-VL-72B-Instruct",
            "qwen25_bbox_2d",
            "config/prompts/localization-qwen25-v1.txt",
        ),
        "qwen2-vl-72b": (
            "http://localhost:8001/v1",
            "Qwen/Qwen2-VL-72B-Instruct",
            "xyxy_1000",
            "config/prompts/localization-qwen2-v1.txt",
        ),
    }
    paper = yaml.safe_load((ROOT / "config" / "paper.yaml").read_text())["models"]
    assert set(paper) == set(before)
    for name, (base_url, model, box_format, prompt) in before.items():
        entry = RAW[name]
        settings = entry["settings"]
        assert (settings["base_url"], settings["model"], entry["box_format"]) == (
            base_url,
            model,
            box_format,
        )
        assert (entry.get("prompts") or {}).get("localization") == prompt
        assert (settings["temperature"], settings["max_tokens"]) == (0.1, 2048)
        assert not {"seed", "extra_body", "system_prompt"} & set(settings)


def test_the_papers_qwen_models_start_their_own_servers_and_share_the_hand_started_answers():
    # config/paper.yaml takes the managed entries under the paper's names; their address of
    # record, model id, generation settings and prompts are the hand-started entries', so
    # both routes make the same cache keys (tests/models/test_vllm_serving.py shows the keys agree).
    paper = yaml.safe_load((ROOT / "config" / "paper.yaml").read_text())["models"]
    for name in ("qwen2.5-vl-72b", "qwen2-vl-72b"):
        managed, hand_started = RAW[paper[name]["from"]], RAW[name]
        assert (managed["adapter"], hand_started["adapter"]) == ("vllm", "openai_compatible")
        assert managed["settings"]["serve"]["gpus"] == 4
        for key in ("base_url", "model", "temperature", "max_tokens"):
            assert managed["settings"][key] == hand_started["settings"][key], (name, key)
        assert managed["box_format"] == hand_started["box_format"]
        assert managed.get("prompts") == hand_started.get("prompts")
    # The documented variant for servers started by hand puts the catalog's entries back.
    plan = plan_from_files(
        ROOT, [ROOT / "config" / "paper.yaml", ROOT / "config/paper-hand-started.yaml"]
    )
    assert {plan.model(n)["adapter"] for n in ("qwen2.5-vl-72b", "qwen2-vl-72b")} == {
        "openai_compatible"
    }


def test_the_readme_table_is_the_catalog():
    readme = (CATALOG_DIR / "README.md").read_text()
    table = catalog_table(load_catalog(CATALOG_DIR))
    assert readme_with_table(readme, table) == readme, (
        "config/models/README.md is out of date: run `novabench catalog --readme "
        "config/models/README.md`"
    )
    assert f"{len(RAW)} entries in" in readme
    for name in RAW:
        assert f"| `{name}` |" in readme


def test_predictions_do_not_see_the_info_block():
    entry = load_catalog(CATALOG_DIR)["gpt-4o"].config
    params = predict_params(entry)
    assert "info" not in params and {**params, "info": entry["info"]} == entry
    predict_rule = (ROOT / "workflow" / "rules" / "predict.smk").read_text()
    assert "predict_params(PLAN.model(wildcards.model))" in predict_rule


def dry_run(config_text: str, workdir: Path) -> subprocess.CompletedProcess:
    config = workdir / "config.yaml"
    config.write_text(config_text)
    # No key is needed to plan: every key variable of the catalog is removed.
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    return support.snakemake(workdir, "-n", "--configfile", str(config), env=env, timeout=600)


def test_a_dry_run_plans_every_catalog_entry_offline(tmp_path):
    result = dry_run(f"dataset: {{source: hf}}\nmodels: [{', '.join(RAW)}]\n", tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    jobs = sum(len(entry_tasks(entry)) for entry in RAW.values())
    counts = dict(re.findall(r"^(\w+)\s+(\d+)$", result.stdout, re.MULTILINE))
    assert int(counts["predict"]) == jobs and int(counts["score"]) == jobs


def test_a_dry_run_names_a_misspelled_setting_of_a_catalog_entry(tmp_path):
    result = dry_run("models: {gemini-2.5-pro: {settings: {max_token: 10}}}\n", tmp_path)
    assert result.returncode != 0
    output = result.stdout + result.stderr
    assert "models.gemini-2.5-pro.settings: unknown setting max_token" in output


def snakemake(workdir: Path, config_text: str, *args: str) -> subprocess.CompletedProcess:
    config = workdir / "config.yaml"
    config.write_text(config_text)
    # After the target: `--configfile` takes every word after it as a config file.
    return support.snakemake(workdir, *args, "--configfile", str(config), timeout=600)


def test_a_new_price_re_runs_no_prediction_but_a_new_setting_does(tmp_path, dataset):
    source = f"dataset: {{source: local, local_path: {dataset.parent / 'repo'}, tag: t}}\n"
    target = "results/t/predictions/localization/random.jsonl"
    first = snakemake(tmp_path, source + "models: [random]\n", "--cores", "1", target)
    assert first.returncode == 0, first.stdout + first.stderr
    info = "models: {random: {info: {price_usd_per_million_tokens: {input: 1, output: 2}}}}\n"
    priced = snakemake(tmp_path, source + info, "-n", target)
    assert priced.returncode == 0 and "Nothing to be done" in priced.stdout, priced.stdout
    reseeded = snakemake(
        tmp_path, source + "models: {random: {settings: {seed: 7}}}\n", "-n", target
    )
    assert re.search(r"^predict\s+1$", reseeded.stdout, re.MULTILINE), reseeded.stdout
    assert "reason: Params have changed since last execution" in reseeded.stdout
