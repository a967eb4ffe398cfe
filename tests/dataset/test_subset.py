"""Dataset subsets and the tags that name each dataset's results folder."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from novabench.dataset.subset import select_rows, write_subset
from novabench.dataset.tags import dataset_tags, source_tag, subset_spec, subset_tag
from novabench.errors import ConfigError
from novabench.judges.vocabulary import load_vocabulary
from support import ROOT

# Three cases of 1, 2 and 3 images; diagnoses of three categories and one unknown.
CASES = ["a", "b", "b", "c", "c", "c"]
DIAGNOSES = ["Glioblastoma", "Multiple sclerosis", "Multiple sclerosis", "zzz", "zzz", "zzz"]


def table() -> pa.Table:
    return pa.table(
        {
            "filename": [f"{case}{i}.png" for i, case in enumerate(CASES)],
            "case_id": CASES,
            "final_diagnosis": DIAGNOSES,
        }
    )


def category_of(diagnosis):
    return load_vocabulary().category_of(diagnosis)


@pytest.mark.parametrize(
    ("cfg", "tag"),
    [
        ({"source": "sample"}, "sample"),
        ({"source": "hf"}, "nova"),
        (
            {"source": "hf", "hf": {"current": {"revision": "0123456789abcdef"}}},
            "nova-0123456789abcdef",
        ),
        ({"source": "hf-legacy"}, "nova-legacy"),
        ({"source": "local", "local_path": "/data/my Nova/"}, "local-my_Nova"),
        ({"source": "local", "local_path": "/x", "tag": "mine"}, "mine"),
    ],
)
def test_source_tags(cfg, tag):
    assert source_tag(cfg) == tag


def test_subset_tag_depends_on_the_settings_only():
    cfg = {"source": "sample", "subset": {"limit": 5}}
    spec = subset_spec(cfg)
    assert spec == {"limit": 5, "seed": 0}  # the seed is made explicit
    base, tag = dataset_tags(cfg)
    assert base == "sample" and tag == f"sample-{subset_tag(spec)}"
    assert tag == dataset_tags({"source": "sample", "subset": {"seed": 0, "limit": 5}})[1]
    assert tag != dataset_tags({"source": "sample", "subset": {"limit": 5, "seed": 1}})[1]
    assert dataset_tags({"source": "sample", "subset": None}) == ("sample", "sample")


def test_vocabulary_categories():
    kb = load_vocabulary()
    assert kb.category_of("Glioblastoma, IDH-wildtype") == "neoplasm"
    assert kb.category_of("Multiple sclerosis") == "demyelinating"
    assert kb.category_of("zzz") == "unknown"
    assert kb.category_of(None) == "unknown"


def test_filters_combine():
    assert select_rows(table(), {"cases": ["b", "c"]}, category_of) == [1, 2, 3, 4, 5]
    assert select_rows(table(), {"filenames": ["a0.png", "c5.png"]}, category_of) == [0, 5]
    assert select_rows(table(), {"categories": ["unknown"]}, category_of) == [3, 4, 5]
    both = {"cases": ["a", "b"], "categories": ["demyelinating"]}
    assert select_rows(table(), both, category_of) == [1, 2]


def test_limit_keeps_whole_cases():
    for seed in range(20):
        rows = select_rows(table(), {"limit": 3, "seed": seed}, category_of)
        kept = [CASES[i] for i in rows]
        assert len(rows) <= 3
        # every kept case is kept whole
        assert all(kept.count(case) == CASES.count(case) for case in set(kept))
    # a limit smaller than every case keeps the smallest case
    assert select_rows(table(), {"cases": ["b", "c"], "limit": 1, "seed": 0}, category_of) == [1, 2]
    # the draw is fixed by the seed
    draws = {tuple(select_rows(table(), {"limit": 3, "seed": s}, category_of)) for s in range(20)}
    assert len(draws) > 1


def test_bad_subsets_say_what_to_change():
    with pytest.raises(
        ConfigError, match=r"dataset.subset.cases names 1 not in the dataset \(e.g. 'q'\)"
    ):
        select_rows(table(), {"cases": ["a", "q"]}, category_of)
    with pytest.raises(ConfigError, match=r"keeps no image; fix: widen dataset\.subset"):
        select_rows(table(), {"cases": ["a"], "categories": ["trauma"]}, category_of)


def test_write_subset_keeps_the_schema_and_recounts(dataset, tmp_path):
    full = pq.read_table(dataset)
    manifest = tmp_path / "full.json"
    manifest.write_text(json.dumps({"source": "local", "n_images": full.num_rows, "n_cases": 9}))
    first = full.column("filename")[0].as_py()
    out, out_manifest = tmp_path / "sub.parquet", tmp_path / "sub.json"
    written = write_subset(
        dataset, manifest, {"filenames": [first]}, "t-subset-1", out, out_manifest, category_of
    )
    sub = pq.read_table(out)
    assert sub.num_rows == 1 and sub.column("filename")[0].as_py() == first
    assert sub.schema.metadata == full.schema.metadata  # the datasets Image feature survives
    assert written == json.loads(out_manifest.read_text())
    assert written["n_images"] == 1 and written["n_cases"] == 1 and written["tag"] == "t-subset-1"
    assert written["full_dataset"]["n_images"] == full.num_rows
    assert written["subset_filenames"] == [first]
    assert written["subset"]["description"] == (
        f"filenames=['{first}']; 1 of {full.num_rows} images, 1 of 9 cases"
    )
    assert written["source"] == "local"


def test_schema_lists_the_vocabulary_categories():
    import yaml

    from novabench.judges.vocabulary import CATEGORIES, UNKNOWN_CATEGORY

    schema = yaml.safe_load((ROOT / "workflow" / "schemas" / "config.schema.yaml").read_text())
    subset = schema["properties"]["dataset"]["properties"]["subset"]["properties"]
    assert subset["categories"]["items"]["enum"] == [*CATEGORIES, UNKNOWN_CATEGORY]


def test_parenthetical_text_explains_and_does_not_decide_the_category():
    kb = load_vocabulary()
    melas = "MELAS (mitochondrial encephalomyopathy with stroke-like episodes)"
    assert kb.category_of(melas) == "metabolic"  # not "stroke" (vascular), a longer alias
    assert kb.category_of("(acute stroke)") == "vascular"
