"""Dataset tags: one results folder per source, and a folder of another source refused."""

from __future__ import annotations

import json
import subprocess

import pytest

import support
from novabench.config import read_config
from novabench.dataset.tags import check_tag_source, source_identity, source_tag
from novabench.errors import ConfigError
from support import ROOT


def hub(revision: str) -> dict:
    return {"source": "hf", "hf": {"current": {"repo_id": "c-i-ber/Nova", "revision": revision}}}


def test_two_hub_revisions_get_two_tags():
    assert source_tag(hub("release-2025-01")) == "nova-release-2025-01"
    assert source_tag(hub("release-2025-02")) == "nova-release-2025-02"
    assert source_tag(hub("a" * 40)) == "nova-" + "a" * 12  # a commit sha: its first digits
    assert source_tag(hub("main")) == "nova"


def built(results, tag: str, dataset_cfg: dict) -> None:
    """A results folder as the dataset build leaves it (the manifest's provenance)."""
    folder = results / tag / "dataset"
    folder.mkdir(parents=True)
    manifest = {"source": dataset_cfg["source"], "source_id": source_identity(dataset_cfg)}
    (folder / "manifest.json").write_text(json.dumps(manifest))


def test_a_folder_of_another_source_with_the_same_name_is_refused(tmp_path):
    first = {"source": "local", "local_path": str(tmp_path / "A" / "Nova")}
    second = {"source": "local", "local_path": str(tmp_path / "B" / "Nova")}
    tag = source_tag(first)
    assert tag == source_tag(second)  # both folders are called Nova
    built(tmp_path / "results", tag, first)
    check_tag_source(tmp_path / "results", tag, first)  # the same source: rebuilt there
    with pytest.raises(ConfigError) as refused:
        check_tag_source(tmp_path / "results", tag, second)
    message = str(refused.value)
    assert f"results/{tag}/ holds the dataset of the local folder {tmp_path}/A/Nova" in message
    assert f"not of the local folder {tmp_path}/B/Nova" in message
    assert "set dataset.tag to a new name" in message


def test_a_hand_set_tag_of_another_source_is_refused_from_an_older_manifest(tmp_path):
    """A manifest written before ``source_id``: its provenance fields name the source."""
    folder = tmp_path / "results" / "mine" / "dataset"
    folder.mkdir(parents=True)
    old = {"source": "hf", "repo_id": "c-i-ber/Nova", "revision": "release-2025-01"}
    (folder / "manifest.json").write_text(json.dumps(old))
    check_tag_source(tmp_path / "results", "mine", {**hub("release-2025-01"), "tag": "mine"})
    with pytest.raises(ConfigError, match="c-i-ber/Nova@release-2025-01 on the Hub, not of"):
        check_tag_source(tmp_path / "results", "mine", {**hub("release-2025-02"), "tag": "mine"})


def test_the_dry_run_refuses_a_tag_holding_another_source(tmp_path):
    data = tmp_path / "B" / "Nova" / "data"
    data.mkdir(parents=True)
    (data / "nova-v1.parquet").write_bytes(b"")
    config = tmp_path / "config.yaml"
    config.write_text(f"dataset: {{source: local, local_path: '{data.parent}'}}\n")
    other = {"source": "local", "local_path": str(tmp_path / "A" / "Nova")}
    built(tmp_path / "results", "local-Nova", other)
    result: subprocess.CompletedProcess = support.snakemake(
        tmp_path, "-n", "--configfile", str(config), timeout=120
    )
    assert result.returncode != 0
    assert "config error: results/local-Nova/ holds the dataset of the local folder" in (
        result.stdout + result.stderr
    )


@pytest.mark.parametrize("tag", ["cache", "sources", "servers", "nltk_data", "Cache"])
def test_a_tag_naming_a_shared_folder_is_refused(tag):
    import yaml

    config = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    config["dataset"]["tag"] = tag
    with pytest.raises(ConfigError, match=f"dataset.tag '{tag}' names a folder that every"):
        read_config(config, ROOT)


def test_a_tag_with_a_trailing_newline_is_refused():
    import yaml

    config = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    config["dataset"]["tag"] = "mine\n"
    with pytest.raises(ConfigError, match=r"bad name .mine\\n. at dataset\.tag"):
        read_config(config, ROOT)
