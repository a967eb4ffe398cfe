"""Job parameters never carry a config string raw: their text (what Snakemake compares
between runs and shows in its HTML report) cannot end or open markup."""

from __future__ import annotations

import json
import pickle

from novabench.job_params import DigestParam, InertParam, inert_json, inert_param
from novabench.report.labels import rst_escape

HOSTILE = {"backend": {"model": "</script><script>alert(1)</script>", "base_url": "a&b"}}


def test_the_text_of_a_parameter_has_no_markup_and_reads_back_as_the_content():
    param = inert_param(HOSTILE)
    for text in (repr(param), str(param), f"{param}"):
        assert not {"<", ">", "&"} & set(text)
        assert json.loads(text) == HOSTILE
    # A job script gets the mapping itself.
    assert param == HOSTILE and param["backend"]["model"].startswith("</script>")
    copy = pickle.loads(pickle.dumps(param))
    assert type(copy) is InertParam and copy == HOSTILE


def test_the_same_content_gives_the_same_text_and_a_change_another():
    # Snakemake re-runs a job when the repr of a parameter changes.
    assert repr(inert_param({"b": 1, "a": [1, 2]})) == repr(inert_param({"a": [1, 2], "b": 1}))
    assert repr(inert_param({"a": 1})) != repr(inert_param({"a": 2}))
    assert inert_json({"x": "é"}) == '{"x": "\\u00e9"}'


def test_values_that_are_not_mappings_pass_unchanged():
    assert inert_param(None) is None
    assert inert_param("results/cache") == "results/cache"


def test_the_dataset_label_of_the_captions_never_holds_an_end_tag():
    escaped = rst_escape("local copy at /data/x</script>\n\n.. raw:: html\n\n<b>")
    assert "</" not in escaped and "\n" not in escaped
    assert escaped == ("local copy at \\/data\\/x\\<\\/script\\> .. raw\\:\\: html \\<b\\>")


def test_a_digest_parameter_is_short_text_that_follows_its_content():
    listing = {f"scripts/novabench/module_{n}.py": "0" * 64 for n in range(300)}
    param = DigestParam(listing)
    assert len(repr(param)) == len("sha256:") + 16 and str(param) == repr(param)
    assert repr(DigestParam(dict(reversed(listing.items())))) == repr(param)
    changed = DigestParam({**listing, "scripts/novabench/module_0.py": "1" * 64})
    assert repr(changed) != repr(param)
    copy = pickle.loads(pickle.dumps(param))  # the job script gets the listing itself
    assert type(copy) is DigestParam and copy == listing
