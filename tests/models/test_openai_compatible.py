"""The openai_compatible adapter against a scripted chat-completions server on loopback.

Every test starts its own server (``openai_server.FakeOpenAI``) with a script saying what to
do with each request, then asserts what the server received (request shape, counts, timing)
as well as what the pipeline wrote (statuses, errors, cache, scores).
"""

from __future__ import annotations

import base64
import csv
import hashlib
import json
import logging
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

from novabench.cache import ResponseCache, response_check
from novabench.dataset.read import load_nova
from novabench.errors import ConfigError, NovaError
from novabench.models.base import Sample
from novabench.models.openai_compatible import Adapter, api_resource
from novabench.predict import build_samples, run_predictions
from novabench.score import score_predictions
from novabench.tasks import get_task
from openai_server import Fail, FakeOpenAI, Garbage, Hang, Reply, Reset, usage_for
from read_back import read_back
from support import ROOT, free_port, snakemake
from upstream import CASES, IMAGES, build_local_dataset, write_current

PROMPTS = ROOT / "config" / "prompts"
NORMAL = "case0002_001.png"  # the image without a gold box
SIZE = 480


def gold_boxes(images=IMAGES) -> dict[str, list[tuple[float, float, float, float]]]:
    return {
        name: [(x, y, w, h) for x, y, w, h, source in boxes or [] if source == "gold"]
        for name, _, _, boxes in images
    }


# Twelve images over the three cases, for the runs that must be killed part-way.
MANY = [
    (f"{case}_{k}{name[-7:]}", case, caption, boxes)
    for k in range(3)
    for name, case, caption, boxes in IMAGES
]


def make_dataset(folder: Path, images=IMAGES) -> tuple[Path, dict[str, str]]:
    """A dataset and the sha256 of each image -> its file name."""
    out = build_local_dataset(folder, images=images)
    frame = load_nova(out)
    return out, {
        hashlib.sha256(r.image["bytes"]).hexdigest(): r.filename for r in frame.itertuples()
    }


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    return make_dataset(tmp_path_factory.mktemp("small"))


@pytest.fixture(scope="module")
def many(tmp_path_factory):
    return make_dataset(tmp_path_factory.mktemp("many"), MANY)


# --- the answers a model would give, written independently of the parser ----------------


def answer(filename: str, convention: str, golds=None) -> str:
    boxes = (golds or gold_boxes())[filename]
    if not boxes:
        return "no target" if convention == "gemini_yxyx_1000" else "no finding"
    if convention == "pixel_xyxy":
        return json.dumps(
            [{"bbox_2d": [x, y, x + w, y + h], "label": "lesion"} for x, y, w, h in boxes]
        )
    if convention == "fenced_pixel_xyxy":
        return "Here are the boxes:\n```json\n" + answer(filename, "pixel_xyxy", golds) + "\n```"
    if convention == "xyxy_1000":  # Qwen2-VL: points on a 0-1000 grid
        k = 1000 / SIZE
        return "\n".join(
            f"lesion ({x * k:.4f},{y * k:.4f}),({(x + w) * k:.4f},{(y + h) * k:.4f})"
            for x, y, w, h in boxes
        )
    if convention == "gemini_yxyx_1000":
        k = 1000 / SIZE
        return "\n".join(
            f"lesion: [{y * k:.4f}, {x * k:.4f}, {(y + h) * k:.4f}, {(x + w) * k:.4f}]"
            for x, y, w, h in boxes
        )
    if convention == "qwen25_bbox_2d":  # pixels of the 476x476 frame Qwen2.5-VL sees
        k = 476 / SIZE
        return json.dumps(
            [
                {"bbox_2d": [x * k, y * k, (x + w) * k, (y + h) * k], "label": "lesion"}
                for x, y, w, h in boxes
            ]
        )
    raise ValueError(convention)


def model(server: FakeOpenAI, box_format: str = "pixel_xyxy", **settings) -> dict:
    return {
        "adapter": "openai_compatible",
        "tasks": ["localization", "captioning", "diagnosis"],
        "box_format": box_format,
        "settings": {
            "base_url": server.base_url,
            "model": "test-vlm",
            "api_key_env": None,
            "backoff_base_s": 0.01,
            "timeout_s": 5,
            **settings,
        },
    }


def predict(dataset: Path, out: Path, cfg: dict, task: str = "localization", name: str = "api"):
    summary = run_predictions(
        dataset=dataset,
        task=task,
        model_name=name,
        model_cfg=cfg,
        prompt_path=PROMPTS / f"{task}-v1.txt",
        out=out / f"{task}-{name}.jsonl",
        summary_out=out / f"{task}-{name}.summary.json",
        cache_dir=out / "cache",
    )
    # As the reading stage reads them: statuses, refusals in the text, the parser.
    records = read_back(out / f"{task}-{name}.jsonl", dataset)
    return {r["filename"]: r for r in records}, summary


def port(server: FakeOpenAI) -> int:
    return int(server.base_url.rsplit(":", 1)[1].split("/")[0])


def counts(server: FakeOpenAI, names: dict[str, str]) -> dict[str, int]:
    return {names[sha]: len(seen) for sha, seen in server.seen_by_image().items()}


def per_image_scores(dataset: Path, out: Path, name: str = "api") -> dict[str, dict]:
    score_predictions(
        task="localization",
        dataset=dataset,
        predictions=out / f"localization-{name}.jsonl",
        out_json=out / f"scores-{name}.json",
        out_csv=out / f"scores-{name}.csv",
    )
    with open(out / f"scores-{name}.csv") as handle:
        return {row["filename"]: row for row in csv.DictReader(handle)}


# --- answers, conventions, request shape -------------------------------------------------


@pytest.mark.parametrize(
    ("convention", "box_format"),
    [
        ("pixel_xyxy", "pixel_xyxy"),
        ("fenced_pixel_xyxy", "pixel_xyxy"),
        ("xyxy_1000", "xyxy_1000"),
        ("gemini_yxyx_1000", "gemini_yxyx_1000"),
        ("qwen25_bbox_2d", "qwen25_bbox_2d"),
    ],
)
def test_reference_boxes_in_each_convention_score_100(small, tmp_path, convention, box_format):
    dataset, names = small
    with FakeOpenAI(lambda seen: Reply(answer(names[seen.image_sha256], convention))) as server:
        records, summary = predict(dataset, tmp_path, model(server, box_format))
    golds = gold_boxes()
    for filename, record in records.items():
        boxes = [(b["x"], b["y"], b["width"], b["height"]) for b in record["read"]["boxes"]]
        assert record["status"] == ("no_finding" if filename == NORMAL else "ok")
        flat = [v for box in boxes for v in box]
        assert flat == pytest.approx([v for box in golds[filename] for v in box], abs=1e-3), (
            filename
        )
    assert summary["status_counts"] == {"ok": 4, "refusal": 0, "error": 0, "missing": 0}
    scores = score_predictions(
        task="localization",
        dataset=dataset,
        predictions=tmp_path / "localization-api.jsonl",
        out_json=tmp_path / "s.json",
        out_csv=tmp_path / "s.csv",
    )
    assert scores["mAP@50"] == pytest.approx(100.0) and scores["Hit@50"] == pytest.approx(100.0)


def test_request_carries_the_image_prompt_and_generation_settings(small, tmp_path, monkeypatch):
    dataset, names = small
    monkeypatch.setenv("NOVA_TEST_KEY", "sk-test-123")
    with FakeOpenAI(lambda seen: Reply(answer(names[seen.image_sha256], "pixel_xyxy"))) as server:
        cfg = model(
            server,
            api_key_env="NOVA_TEST_KEY",
            temperature=0.1,
            max_tokens=2048,
            seed=7,
            extra_body={"top_k": 20},
            system_prompt="You are a neuroradiologist.",
            price_per_million_input=2.5,
            price_per_million_output=10.0,
        )
        records, summary = predict(dataset, tmp_path, cfg)
    frame = load_nova(dataset)
    png = {r.filename: r.image["bytes"] for r in frame.itertuples()}
    prompt = (PROMPTS / "localization-v1.txt").read_text().format(width=480, height=480)
    assert len(server.requests) == 4
    for seen in server.requests:
        body = seen.body
        assert seen.headers["authorization"] == "Bearer sk-test-123"
        assert {k: body[k] for k in ("model", "temperature", "max_tokens", "seed", "top_k")} == {
            "model": "test-vlm",
            "temperature": 0.1,
            "max_tokens": 2048,
            "seed": 7,
            "top_k": 20,
        }
        system, user = body["messages"]
        assert system == {"role": "system", "content": "You are a neuroradiologist."}
        image, text = user["content"]
        assert text == {"type": "text", "text": prompt}
        header, data = image["image_url"]["url"].split(",")
        assert image["type"] == "image_url" and header == "data:image/png;base64"
        assert base64.b64decode(data) == png[names[seen.image_sha256]]
    # Usage and cost: recomputed from what the server reported for each request.
    usages = [usage_for(s, answer(names[s.image_sha256], "pixel_xyxy")) for s in server.requests]
    prompt_tokens = sum(u["prompt_tokens"] for u in usages)
    completion_tokens = sum(u["completion_tokens"] for u in usages)
    assert summary["usage"]["prompt_tokens"] == prompt_tokens
    assert summary["usage"]["completion_tokens"] == completion_tokens
    assert summary["cost_usd"] == pytest.approx(
        (prompt_tokens * 2.5 + completion_tokens * 10) / 1e6
    )
    assert all(r["usage"]["total_tokens"] > 0 and r["latency_s"] >= 0 for r in records.values())
    assert "NOVA_TEST_KEY" not in json.dumps(summary["identity"])  # identity: answers only


def test_text_only_samples_send_plain_text_and_a_dummy_key(small):
    dataset, _ = small
    frame = load_nova(dataset)
    template = (PROMPTS / "diagnosis-v1.txt").read_text()
    samples = build_samples(frame, get_task("diagnosis"), template, "diagnosis-v1.txt")
    with FakeOpenAI(lambda seen: Reply('{"most_likely_diagnosis": "x"}')) as server:
        adapter = Adapter("api", model(server)["settings"])
        responses = list(adapter.predict(samples))
    assert [r.raw for r in responses] == ['{"most_likely_diagnosis": "x"}'] * 4
    assert all(r.cached is False for r in responses)  # no cache_dir: nothing cached
    sent = sorted(s.body["messages"][0]["content"] for s in server.requests)
    assert sent == sorted(s.prompt for s in samples)
    history = CASES["case0001"][0]
    assert any(history in text for text in sent)
    assert {s.headers["authorization"] for s in server.requests} == {"Bearer EMPTY"}


# --- failures: statuses, bounded retries, Retry-After, threshold ----------------------------


def test_a_refusal_in_the_text_is_never_scored_as_a_caption(small, tmp_path, nltk_data):
    dataset, names = small
    declines, caption, flagged, fine = sorted(names.values())
    texts = {
        declines: "I'm sorry, but I can't assist with interpreting medical images.",
        caption: "Axial FLAIR: hyperintense lesion; malignancy cannot be excluded.",
        flagged: "Axial T2 image.",  # text that reads as a caption, refused by the API
    }

    def script(seen):
        name = names[seen.image_sha256]
        if name == flagged:
            return Reply(content=texts[name], refusal="I can't help with that.")
        return Reply(texts.get(name, f"Axial T2 image of {name}."))

    with FakeOpenAI(script) as server:
        records, summary = predict(dataset, tmp_path, model(server), task="captioning")
    statuses = {name: record["status"] for name, record in records.items()}
    assert statuses == {declines: "refusal", caption: "ok", flagged: "refusal", fine: "ok"}
    assert records[declines]["error"].startswith("the model declined: ")
    assert records[declines]["read"] is None
    # Only the API's flag is the prediction's: the text refusal is found when reading.
    assert summary["status_counts"]["refusal"] == 1
    metrics = score_predictions(
        task="captioning",
        dataset=dataset,
        predictions=tmp_path / "captioning-api.jsonl",
        out_json=tmp_path / "scores.json",
        out_csv=tmp_path / "scores.csv",
        options={"bertscore": {"enabled": False}},
        nltk_data=nltk_data,
    )
    assert (metrics["n_refusal"], metrics["refusal_rate"], metrics["n_ok"]) == (2, 50.0, 2)
    with open(tmp_path / "scores.csv") as handle:
        per_image = {row["filename"]: row for row in csv.DictReader(handle)}
    # Scored as an empty caption, as a failed request is: no keyword, METEOR 0.
    assert per_image[declines]["pred_clinical"] == "" and float(per_image[declines]["meteor"]) == 0


def test_refusals_empty_answers_and_failures_are_counted_apart(small, tmp_path):
    dataset, names = small
    by_name = {v: k for k, v in names.items()}
    refusal, empty, failing, fine = sorted(by_name)

    def script(seen):
        name = names[seen.image_sha256]
        if name == refusal:
            return Reply(content=None, refusal="I'm sorry, I can't help with that.")
        if name == empty:
            return Reply(content="")
        if name == failing:
            return Fail(500, message="upstream overloaded")
        return Reply(answer(name, "pixel_xyxy"))

    with FakeOpenAI(script) as server:
        cfg = model(server, max_attempts=3)
        with pytest.raises(
            NovaError, match=r"2 of 4 requests failed \(50.0% > max_error_rate 0.1\)"
        ):
            predict(dataset, tmp_path, cfg)
        assert not (tmp_path / "localization-api.jsonl").exists()
        cfg["max_error_rate"] = 0.6
        records, summary = predict(dataset, tmp_path, cfg)
        sent = counts(server, names)
    # The refusal and the fine answer were cached by the first run; the failure and the
    # empty answer were not, and were retried exactly max_attempts times in each run.
    assert sent == {refusal: 1, empty: 6, failing: 6, fine: 1}
    # The API's refusal field, also when the answer comes back from the cache.
    assert records[refusal]["status"] == "refusal" and records[refusal]["cached"]
    assert records[refusal]["raw"] == "I'm sorry, I can't help with that."
    assert records[refusal]["error"] == "the API flagged the answer as a refusal"
    assert records[empty]["status"] == "error" and records[empty]["raw"] is None
    assert records[empty]["error"] == (
        "malformed answer: empty content and no refusal (after 3 attempt(s))"
    )
    assert records[failing]["status"] == "error" and records[failing]["raw"] is None
    assert (
        "HTTP 500" in records[failing]["error"]
        and "after 3 attempt(s)" in records[failing]["error"]
    )
    assert records[fine]["status"] == "ok"
    assert summary["status_counts"] == {"ok": 1, "refusal": 1, "error": 2, "missing": 0}
    assert summary["n_cached"] == 2

    # Once the server recovers (same address: the URL is part of the cache key), a re-run
    # sends only the failed requests.
    healthy = FakeOpenAI(
        lambda seen: Reply(answer(names[seen.image_sha256], "pixel_xyxy")), port=port(server)
    )
    with healthy:
        records, summary = predict(dataset, tmp_path, cfg)
        assert counts(healthy, names) == {failing: 1, empty: 1}
    assert records[failing]["status"] == ("no_finding" if failing == NORMAL else "ok")
    assert records[empty]["status"] == ("no_finding" if empty == NORMAL else "ok")
    assert summary["n_cached"] == 2


def test_rate_limits_honour_retry_after_and_client_errors_are_not_retried(small, tmp_path):
    dataset, names = small
    limited, bad, *_ = sorted(names.values())

    def script(seen):
        name = names[seen.image_sha256]
        if name == limited and seen.attempt == 1:
            return Fail(429, retry_after="1", message="rate limit reached")
        if name == bad:
            return Fail(400, message="invalid image")
        return Reply(answer(name, "pixel_xyxy"))

    with FakeOpenAI(script) as server:
        records, _ = predict(dataset, tmp_path, {**model(server), "max_error_rate": 0.5})
    first, second = server.seen_by_image()[
        hashlib.sha256(
            next(r.image["bytes"] for r in load_nova(dataset).itertuples() if r.filename == limited)
        ).hexdigest()
    ]
    assert 1.0 <= second.received - first.received < 3  # waited what the server asked
    assert records[limited]["status"] == "ok"
    assert counts(server, names)[bad] == 1
    assert records[bad]["status"] == "error" and "HTTP 400" in records[bad]["error"]
    assert "after 1 attempt(s)" in records[bad]["error"]


def test_timeouts_resets_and_garbage_are_retried_within_the_attempt_budget(small, tmp_path):
    dataset, names = small
    slow, reset, dead, garbage = sorted(names.values())

    def script(seen):
        name = names[seen.image_sha256]
        if name == slow and seen.attempt == 1:
            return Hang(1.5)
        if name == reset and seen.attempt <= 2:
            return Reset()
        if name == dead:
            return Reset()
        if name == garbage and seen.attempt == 1:
            return Garbage()
        return Reply(answer(name, "pixel_xyxy"))

    with FakeOpenAI(script) as server:
        cfg = {**model(server, timeout_s=0.5, max_attempts=4), "max_error_rate": 0.5}
        records, summary = predict(dataset, tmp_path, cfg)
    assert counts(server, names) == {slow: 2, reset: 3, dead: 4, garbage: 2}
    assert [records[n]["status"] for n in (slow, reset, garbage)] == [
        "no_finding" if n == NORMAL else "ok" for n in (slow, reset, garbage)
    ]
    assert records[dead]["status"] == "error"
    assert (
        "connection error" in records[dead]["error"]
        and "after 4 attempt(s)" in records[dead]["error"]
    )
    assert summary["status_counts"]["error"] == 1


@pytest.mark.parametrize(
    ("garbage", "reason"),
    [
        (Garbage("{not json"), "the body is not JSON"),
        (Garbage("", content_type="application/json"), "the body is not JSON"),
        (Garbage("<html>Bad gateway</html>", content_type="text/html"), "no choices in str"),
        (Garbage("null"), "no choices in NoneType"),
        (Garbage('{"choices": []}'), "no choices in ChatCompletion"),
        (Garbage('{"choices": "none"}'), "no choices in ChatCompletion"),
        (Garbage('{"choices": [{}]}'), "choices[0] has no message"),
        (Garbage('{"choices": [{"message": "hi"}]}'), "choices[0] has no message"),
        (Garbage('{"choices": [{"message": {"content": 5}}]}'), "content is int, not text"),
        (Garbage('{"choices": [{"message": {"content": ["a"]}}]}'), "content is list, not text"),
    ],
)
def test_malformed_answers_are_retried_then_recorded_as_errors(tmp_path, garbage, reason):
    with FakeOpenAI(lambda seen: garbage) as server:
        client = Adapter("api", model(server, max_attempts=2)["settings"], cache_dir=tmp_path)
        response = client.complete("prompt")
        assert len(server.requests) == 2
    assert response.raw is None
    assert response.error.startswith("malformed answer: ") and reason in response.error
    assert response.error.endswith("(after 2 attempt(s))")
    assert not list(tmp_path.rglob("*.json"))  # failures are never cached


@pytest.mark.parametrize(
    ("reply", "sent"),
    [
        (Reply(content=""), 2),
        (Reply(content=" \n"), 2),
        (Reply(content=None), 2),
        (Reply(content=None, refusal="I can't help with that."), 1),
        (Reply(content="", refusal="I can't help with that."), 1),
    ],
)
def test_an_empty_answer_is_retried_and_never_cached_unlike_a_refusal(tmp_path, reply, sent):
    with FakeOpenAI(lambda seen: reply) as server:
        client = Adapter("api", model(server, max_attempts=2)["settings"], cache_dir=tmp_path)
        response = client.complete("prompt")
        assert len(server.requests) == sent
    cached = list(tmp_path.rglob("*.json"))
    if sent == 2:
        assert response.raw is None and not cached
        assert response.error == (
            "malformed answer: empty content and no refusal (after 2 attempt(s))"
        )
    else:  # a refusal is the model's answer, cached and scored as such
        assert response.error is None and len(cached) == 1


def test_identical_requests_in_one_job_are_sent_once(tmp_path):
    def script(seen):
        return Fail(503) if seen.prompt == "down" else Reply(f"echo {seen.prompt}")

    with FakeOpenAI(script) as server:
        client = Adapter("api", model(server, max_attempts=2)["settings"], cache_dir=tmp_path)
        prompts = ["a", "b", "a", "down", "a", "down"]
        answers = client.complete_many(prompts)
        sent = sorted(seen.prompt for seen in server.requests)
    assert sent == ["a", "b", "down", "down"]  # "down" failed twice: max_attempts, once
    assert [a.raw for a in answers] == ["echo a", "echo b", "echo a", None, "echo a", None]
    # The copies were not sent again: like cached answers (a failure stays a failure).
    assert [a.cached for a in answers] == [False, False, True, False, True, False]
    assert answers[5].error == answers[3].error == "HTTP 503: scripted failure (after 2 attempt(s))"
    assert answers[2].usage == answers[0].usage is not None
    assert len(list(tmp_path.rglob("*.json"))) == 2


@pytest.mark.parametrize(
    ("status", "sent"),
    [(400, 1), (401, 1), (403, 1), (404, 1), (422, 1), (408, 3), (409, 3), (429, 3), (503, 3)],
)
def test_only_statuses_that_waiting_may_cure_are_retried(tmp_path, status, sent):
    with FakeOpenAI(lambda seen: Fail(status, message="scripted")) as server:
        client = Adapter("api", model(server, max_attempts=3)["settings"], cache_dir=tmp_path)
        response = client.complete("prompt")
        assert len(server.requests) == sent
    assert response.error == f"HTTP {status}: scripted (after {sent} attempt(s))"


def test_a_bug_reading_the_answer_fails_the_job_instead_of_being_retried(monkeypatch):
    import novabench.models.chat_client as client_module

    def broken(completion, latency_s):
        raise RuntimeError("bug in the adapter")

    monkeypatch.setattr(client_module, "_response", broken)
    sample = Sample("case0001_001.png", "case0001", "diagnosis", "History: ...", None, 1, 1)
    with FakeOpenAI(lambda seen: Reply()) as server:
        client = Adapter("api", model(server, max_attempts=3)["settings"])
        with pytest.raises(RuntimeError, match="bug in the adapter"):
            list(client.predict([sample]))
        assert len(server.requests) == 1


def test_a_bug_in_the_cache_fails_the_job(small, tmp_path, monkeypatch):
    def broken(self, key, response, request):
        raise RuntimeError("bug in the cache")

    monkeypatch.setattr(ResponseCache, "put", broken)
    dataset, _ = small
    with FakeOpenAI(lambda seen: Reply()) as server:
        with pytest.raises(RuntimeError, match="bug in the cache"):
            predict(dataset, tmp_path, {**model(server), "max_error_rate": 1})
        assert all(seen.attempt == 1 for seen in server.requests)  # nothing retried
    assert not (tmp_path / "localization-api.jsonl").exists()


def test_scores_of_requests_that_succeeded_match_a_fault_free_run(many, tmp_path):
    dataset, names = many
    golds = gold_boxes(MANY)
    clean, faulty = tmp_path / "clean", tmp_path / "faulty"
    clean.mkdir(), faulty.mkdir()
    ordered = sorted(names.values())
    lost = set(ordered[::5])  # never answered
    faults = [Fail(503), Fail(429, retry_after="0"), Reset(), Fail(502)]

    def reference(seen):
        return Reply(answer(names[seen.image_sha256], "pixel_xyxy", golds), delay_s=0.01)

    def flaky(seen):
        name = names[seen.image_sha256]
        if name in lost:
            return Fail(500)
        index = ordered.index(name)
        if seen.attempt <= index % 3:  # 0, 1 or 2 faults before the answer
            return faults[(index + seen.attempt) % len(faults)]
        return reference(seen)

    with FakeOpenAI(reference) as server:
        predict(dataset, clean, model(server))
    with FakeOpenAI(flaky) as server:
        cfg = {**model(server, max_attempts=3, concurrency=4), "max_error_rate": 0.5}
        records, _ = predict(dataset, faulty, cfg)
        sent = counts(server, names)
    assert {n for n, r in records.items() if r["status"] == "error"} == lost
    assert all(sent[n] == 3 for n in lost)
    assert all(sent[n] == ordered.index(n) % 3 + 1 for n in names.values() if n not in lost)
    want, got = per_image_scores(dataset, clean), per_image_scores(dataset, faulty)
    for name in names.values():
        if name not in lost:
            assert got[name] == want[name], name
    # The lost images count as misses, not as something else.
    assert all(got[n]["status"] == "error" for n in lost)


# --- cache and resume ------------------------------------------------------------------------


def test_cached_answers_are_reused_until_the_request_changes(small, tmp_path):
    dataset, names = small
    with FakeOpenAI(lambda seen: Reply(answer(names[seen.image_sha256], "pixel_xyxy"))) as server:
        cfg = model(server, concurrency=2)
        first, summary = predict(dataset, tmp_path, cfg)
        assert len(server.requests) == 4 and summary["n_cached"] == 0
        cfg["settings"].update(concurrency=3, timeout_s=9, max_attempts=2)  # operational only
        again, summary = predict(dataset, tmp_path, cfg)
        assert len(server.requests) == 4 and summary["n_cached"] == 4
        cfg["settings"]["temperature"] = 0.7
        _, summary = predict(dataset, tmp_path, cfg)
        assert len(server.requests) == 8 and summary["n_cached"] == 0
    drop = ("cached",)
    assert [{k: v for k, v in r.items() if k not in drop} for r in first.values()] == [
        {k: v for k, v in r.items() if k not in drop} for r in again.values()
    ]
    assert all(r["cached"] for r in again.values())


@pytest.mark.parametrize(
    "response",
    [
        "the answer",
        {"raw": 5},
        {"raw": ["no finding"]},
        {"raw": "no finding", "redacted": "many"},
        {"raw": "no finding", "usage": {"prompt_tokens": "many"}},
        {"raw": "no finding", "latency_s": True},
    ],
)
def test_a_cache_entry_of_the_wrong_shape_is_named_and_asked_again(
    small, tmp_path, caplog, response
):
    dataset, names = small
    with FakeOpenAI(lambda seen: Reply(answer(names[seen.image_sha256], "pixel_xyxy"))) as server:
        cfg = model(server)
        first, _ = predict(dataset, tmp_path, cfg)
        entry_path = sorted((tmp_path / "cache" / "api").glob("??/*.json"))[0]
        entry = json.loads(entry_path.read_text())
        # Valid JSON with its checksum recomputed: only the shape is wrong.
        entry.update(response=response, check=response_check(response))
        entry_path.write_text(json.dumps(entry))
        again, summary = predict(dataset, tmp_path, cfg)
    assert len(server.requests) == 5 and summary["n_cached"] == 3
    assert {n: (r["status"], r["read"]) for n, r in again.items()} == {
        n: (r["status"], r["read"]) for n, r in first.items()
    }
    named = [r.getMessage() for r in caplog.records if str(entry_path) in r.getMessage()]
    assert len(named) == 1 and "wrong shape" in named[0] and "\n" not in named[0]


@pytest.mark.parametrize("unwritable", ["read-only folder", "a file in its place"])
def test_an_unwritable_cache_is_found_before_the_first_request(small, tmp_path, unwritable):
    dataset, _ = small
    folder = tmp_path / "cache" / "api"
    if unwritable == "a file in its place":
        folder.parent.mkdir()
        folder.write_text("")
    elif os.geteuid() == 0:
        pytest.skip("root writes into a read-only folder")
    else:
        folder.mkdir(parents=True)
        folder.chmod(0o555)
    try:
        with FakeOpenAI(lambda seen: Reply("no finding")) as server:
            with pytest.raises(NovaError) as caught:
                predict(dataset, tmp_path, model(server))
            assert server.requests == []
    finally:
        if folder.is_dir():
            folder.chmod(0o755)
    assert str(caught.value).startswith(f"the response cache {folder} cannot be written (")
    assert "nothing was sent" in str(caught.value) and "\n" not in str(caught.value)


RUNNER = """
import json, sys
from pathlib import Path
from novabench.predict import run_predictions
args = json.loads(sys.argv[1])
run_predictions(
    dataset=Path(args["dataset"]), task="localization", model_name="api",
    model_cfg=args["cfg"], prompt_path=Path(args["prompt"]), out=Path(args["out"]),
    summary_out=Path(args["out"] + ".summary.json"), cache_dir=Path(args["cache"]),
)
"""


def test_a_killed_job_resumes_without_resending_what_succeeded(many, tmp_path):
    dataset, names = many
    golds = gold_boxes(MANY)

    def slow(seen):
        return Reply(answer(names[seen.image_sha256], "pixel_xyxy", golds), delay_s=0.25)

    with FakeOpenAI(slow) as server:
        cfg = model(server, concurrency=2)
        args = {
            "dataset": str(dataset),
            "cfg": cfg,
            "prompt": str(PROMPTS / "localization-v1.txt"),
            "out": str(tmp_path / "localization-api.jsonl"),
            "cache": str(tmp_path / "cache"),
        }
        env = {**os.environ, "PYTHONPATH": str(ROOT / "scripts")}
        job = subprocess.Popen([sys.executable, "-c", RUNNER, json.dumps(args)], env=env)
        deadline = time.monotonic() + 30
        while sum(s.answered is not None for s in server.requests) < 3:
            assert job.poll() is None and time.monotonic() < deadline
            time.sleep(0.01)
        job.send_signal(signal.SIGKILL)
        job.wait()
        answered_before = {names[s.image_sha256] for s in server.requests if s.answered}
        cache = tmp_path / "cache" / "api"
        cached = {
            json.loads(p.read_text())["request"]["image_sha256"] for p in cache.glob("??/*.json")
        }
        cached_names = {names[sha] for sha in cached}
        assert 1 <= len(cached_names) < len(names)  # killed part-way
        # Lost: at most the requests in flight (answered, but not yet in the cache).
        assert len(answered_before - cached_names) <= 2
        assert not (tmp_path / "localization-api.jsonl").exists()
        before = len(server.requests)

        records, summary = predict(dataset, tmp_path, cfg)
        resent = [names[s.image_sha256] for s in server.requests[before:]]
    assert sorted(resent) == sorted(set(names.values()) - cached_names)  # each once, no others
    assert summary["n_cached"] == len(cached_names)

    # The same endpoint (the URL is part of the model's identity), with a fresh cache.
    with FakeOpenAI(slow, port=port(server)) as server:
        uninterrupted, _ = predict(dataset, tmp_path / "fresh", model(server, concurrency=6))
    keep = ("filename", "raw", "read", "status", "error", "usage", "request")
    assert [{k: r[k] for k in keep} for r in records.values()] == [
        {k: r[k] for k in keep} for r in uninterrupted.values()
    ]


# --- secrets, logs, judges, concurrency --------------------------------------------------------


def test_a_canary_key_reaches_the_server_and_no_file(small, tmp_path, monkeypatch):
    dataset, names = small
    canary = "sk-canary-" + hashlib.sha256(str(time.time()).encode()).hexdigest()[:24]
    monkeypatch.setenv("NOVA_CANARY_KEY", canary)
    rejected = sorted(names.values())[0]
    log_file = tmp_path / "logs" / "predict.log"
    log_file.parent.mkdir()
    handler = logging.FileHandler(log_file)
    handler.setLevel(logging.DEBUG)
    root = logging.getLogger()
    old_level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)

    def script(seen):
        name = names[seen.image_sha256]
        if name == rejected:  # real services echo the key they were given
            return Fail(401, message=f"Incorrect API key provided: {canary}")
        return Reply(answer(name, "pixel_xyxy"))

    try:
        with FakeOpenAI(script, expected_key=canary) as server:
            cfg = {**model(server, api_key_env="NOVA_CANARY_KEY"), "max_error_rate": 0.5}
            records, _ = predict(dataset, tmp_path / "results", cfg)
    finally:
        root.removeHandler(handler)
        root.setLevel(old_level)
        handler.close()
    assert {s.headers["authorization"] for s in server.requests} == {f"Bearer {canary}"}
    assert "HTTP 401" in records[rejected]["error"] and "[redacted]" in records[rejected]["error"]
    log_text = log_file.read_text()
    assert "test-vlm" in log_text and "chat/completions" in log_text  # requests are logged
    image = load_nova(dataset).iloc[0].image["bytes"]
    assert base64.b64encode(image).decode()[:64] not in log_text  # without image bytes
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert any(p.suffix == ".jsonl" for p in written) and any("cache" in p.parts for p in written)
    for path in written:
        assert canary.encode() not in path.read_bytes(), path


def test_complete_answers_free_prompts_in_order_with_bounded_concurrency(tmp_path):
    in_flight, peak = [0], [0]

    def script(seen):
        in_flight[0] += 1
        peak[0] = max(peak[0], in_flight[0])
        time.sleep(0.1 if seen.prompt.endswith("1") else 0.02)
        in_flight[0] -= 1
        return Reply(f"echo {seen.prompt} / {seen.system_prompt}")

    with FakeOpenAI(script) as server:
        judge = Adapter("judge", model(server, concurrency=3)["settings"], cache_dir=tmp_path)
        prompts = [f"prompt {i}" for i in range(12)]
        answers = judge.complete_many(prompts, system_prompt="Be strict.")
        assert [a.raw for a in answers] == [f"echo {p} / Be strict." for p in prompts]
        assert peak[0] == 3
        one = judge.complete("prompt 5", system_prompt="Be strict.")
        assert one.cached and one.raw == "echo prompt 5 / Be strict."
        other = judge.complete("prompt 5")
        assert not other.cached and other.raw == "echo prompt 5 / None"
        assert len(server.requests) == 13


# --- pacing: rate limits, the starting window, a known quota -------------------------------


def test_a_throttled_job_slows_down_answers_everything_and_says_how_often(tmp_path, caplog):
    # 40 requests a second with room for a burst of 4; the job starts with 16 in flight.
    with FakeOpenAI(
        lambda seen: Reply(f"echo {seen.prompt}"), latency_s=0.05, rate_limit=(40, 4)
    ) as server:
        client = Adapter("api", model(server, concurrency=16, max_attempts=10)["settings"])
        prompts = [f"prompt {i}" for i in range(60)]
        with caplog.at_level(logging.WARNING, logger="novabench.models.chat_client"):
            answers = client.complete_many(prompts)
        stats = server.bucket.stats()
    assert [a.raw for a in answers] == [f"echo {p}" for p in prompts]
    rejected = stats["rejected"]
    # At least the first burst's excess: 16 sent at once, 4 tokens (and one more refilled).
    assert stats["admitted"] == 60 and rejected >= 16 - 4 - 1
    pacing = [r.getMessage() for r in caplog.records if "throttled" in r.getMessage()]
    assert len(pacing) == 1
    assert pacing[0].startswith(f"api: the server throttled {rejected} of {60 + rejected} sends")


def test_the_window_starts_at_initial_concurrency_and_grows_to_concurrency():
    lock = threading.Lock()
    in_flight, peak, log = [0], [0], []

    def script(seen):
        with lock:
            in_flight[0] += 1
            peak[0] = max(peak[0], in_flight[0])
            log.append(("start", seen.prompt))
        time.sleep(0.05)
        with lock:
            in_flight[0] -= 1
            log.append(("end", seen.prompt))
        return Reply("ok")

    with FakeOpenAI(script) as server:
        settings = model(server, concurrency=4, initial_concurrency=1)["settings"]
        Adapter("api", settings).complete_many([f"prompt {i}" for i in range(16)])
    # One request alone, then one more per answer (slow start) up to the maximum.
    assert log[:2] == [("start", "prompt 0"), ("end", "prompt 0")]
    assert peak[0] == 4


def test_requests_per_minute_spaces_the_sends():
    with FakeOpenAI(lambda seen: Reply("ok")) as server:
        settings = model(server, concurrency=8, requests_per_minute=600)["settings"]
        started = time.monotonic()
        Adapter("api", settings).complete_many([f"prompt {i}" for i in range(6)])
        took = time.monotonic() - started
    # 600 a minute: one send per 100 ms, so the sixth leaves 0.5 s after the first, where
    # eight at once would all be answered at once (a lower bound: a busy machine only adds).
    assert len(server.requests) == 6 and took >= 0.5


# --- checks before any job ------------------------------------------------------------------


def test_environment_check_names_the_missing_variable_and_the_unreachable_url(monkeypatch):
    monkeypatch.delenv("NOVA_UNSET_KEY", raising=False)
    with FakeOpenAI() as server:
        settings = {"base_url": server.base_url, "model": "m", "api_key_env": "NOVA_UNSET_KEY"}
        with pytest.raises(NovaError, match="environment variable NOVA_UNSET_KEY is not set"):
            Adapter.check_environment("gpt", settings)
        monkeypatch.setenv("NOVA_UNSET_KEY", "sk-x")
        Adapter.check_environment("gpt", settings)  # set and reachable: passes
        Adapter.check_environment("vllm", {**settings, "api_key_env": None})
    url = f"http://127.0.0.1:{free_port()}/v1"
    with pytest.raises(NovaError, match=re.escape(f"cannot reach {url}")):
        Adapter.check_environment("vllm", {"base_url": url, "model": "m", "api_key_env": None})
    with pytest.raises(ConfigError, match=r"models\.gpt\.settings: unknown setting temprature"):
        Adapter.check_environment("gpt", {**settings, "temprature": 0.1})
    with pytest.raises(ConfigError, match="missing setting api_key_env"):
        Adapter("gpt", {"base_url": server.base_url, "model": "m"})


def test_retry_after_forms_and_backoff_bounds():
    from email.utils import formatdate

    from novabench.models.chat_client import _retry_after

    assert _retry_after({"retry-after": "7"}) == 7.0
    assert _retry_after({"retry-after-ms": "250", "retry-after": "7"}) == 0.25
    assert 28 <= _retry_after({"retry-after": formatdate(time.time() + 30, usegmt=True)}) <= 30
    assert _retry_after({"retry-after": "soon"}) is None and _retry_after({}) is None
    adapter = Adapter("m", {"base_url": "http://x/v1", "model": "m", "api_key_env": None})
    for attempt in (1, 2, 3, 8):
        waits = [adapter.client._backoff(attempt, None) for _ in range(200)]
        bound = min(60, 2 ** (attempt - 1))
        assert min(waits) >= 0 and bound / 2 < max(waits) <= bound  # jittered, capped
    assert all(4 <= adapter.client._backoff(1, 4.0) <= 4.4 for _ in range(50))


def test_provider_resources_default_to_the_endpoint_host():
    assert api_resource({"base_url": "https://api.openai.com/v1"}) == "api_openai_com"
    assert api_resource({"base_url": "http://localhost:8000/v1"}) == "api_localhost_8000"
    assert api_resource({"base_url": "http://x/v1", "provider": "Gemini"}) == "api_gemini"


def workflow_config(tmp_path: Path, server: FakeOpenAI) -> tuple[Path, Path, str]:
    """A one-model, localization-only config on a tiny local dataset."""
    repo = write_current(tmp_path / "repo")
    api = {**model(server, api_key_env="NOVA_SMK_KEY"), "tasks": ["localization"]}
    config = {
        "dataset": {"source": "local", "local_path": str(repo)},
        "tasks": {"captioning": {"enabled": False}, "diagnosis": {"enabled": False}},
        "models": {"api": api},
    }
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    return (
        tmp_path / "config.yaml",
        tmp_path / "work",
        "results/local-repo/predictions/localization/api.jsonl",
    )


def test_snakemake_stops_before_any_job_when_a_key_is_missing(tmp_path, monkeypatch):
    monkeypatch.delenv("NOVA_SMK_KEY", raising=False)
    with FakeOpenAI(lambda seen: Reply("no finding")) as server:
        config, work, target = workflow_config(tmp_path, server)
        failed = snakemake(work, target, "--configfile", str(config))
    assert failed.returncode != 0
    assert "environment variable NOVA_SMK_KEY is not set" in failed.stdout + failed.stderr
    assert not (work / "results").exists()  # stopped before the dataset job
    assert server.requests == []


@pytest.mark.slow
def test_snakemake_runs_the_api_model_through_the_predict_rule(tmp_path, monkeypatch):
    monkeypatch.setenv("NOVA_SMK_KEY", "k")
    with FakeOpenAI(lambda seen: Reply("no finding"), expected_key="k") as server:
        config, work, target = workflow_config(tmp_path, server)
        ran = snakemake(work, target, "--configfile", str(config))
        assert ran.returncode == 0, ran.stderr[-3000:]
        assert len(server.requests) == 4
    records = read_back(work / target, work / "results/local-repo/dataset/nova.parquet")
    assert [r["status"] for r in records] == ["no_finding"] * 4
    assert len(list((work / "results/cache/api").glob("??/*.json"))) == 4


def test_the_paper_configuration_dry_runs_offline(tmp_path):
    result = snakemake(tmp_path, "-n", "--configfile", str(ROOT / "config/paper.yaml"))
    assert result.returncode == 0, result.stderr[-3000:]
    out = result.stdout + result.stderr
    for name in ("gpt-4o", "gemini-2.0-flash", "qwen2.5-vl-72b", "qwen2-vl-72b"):
        for task in ("localization", "captioning", "diagnosis"):
            assert f"results/nova/predictions/{task}/{name}.jsonl" in out
    # The Qwen models' jobs start their own vLLM servers: GPUs, no provider cap.
    assert "api_openai=1" in out and "gpu=4" in out and "api_vllm_qwen25=1" not in out
    assert not (tmp_path / "results").exists()


def test_the_progress_of_an_api_job_names_its_task(small, tmp_path, monkeypatch, caplog):
    # Two jobs of one model run side by side: each bar and log line says which task.
    from novabench import progress

    monkeypatch.setattr(progress, "QUIET_S", 0)
    caplog.set_level("INFO", logger="novabench")
    with FakeOpenAI(lambda seen: Reply("A caption.")) as server:
        predict(small[0], tmp_path, model(server), task="captioning")
    done = [r.getMessage() for r in caplog.records if ": done, " in r.getMessage()]
    assert done and all(m.startswith("captioning/api: done, ") for m in done), done


def test_the_served_version_and_fingerprint_reach_the_summary(small, tmp_path):
    # An alias such as "gpt-4o" names no snapshot: the server's answer does, per request.
    dataset, names = small
    builds = iter(["fp_a", "fp_a", "fp_b"] + ["fp_b"] * len(names))
    with FakeOpenAI(
        lambda seen: Reply(
            "A caption.", served_model="vlm-2026-01", system_fingerprint=next(builds)
        )
    ) as server:
        records, summary = predict(dataset, tmp_path, model(server), task="captioning")
    assert {r["served"]["model"] for r in records.values()} == {"vlm-2026-01"}
    assert summary["served"] == [
        {"model": "vlm-2026-01", "system_fingerprint": "fp_a", "n": 2},
        {"model": "vlm-2026-01", "system_fingerprint": "fp_b", "n": len(records) - 2},
    ]
