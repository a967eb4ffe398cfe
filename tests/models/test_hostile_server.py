"""The openai_compatible client against servers that misbehave on purpose (issue 21): they
trickle bytes, send invalid UTF-8 or megabytes, echo keys in errors and answers, redirect to
another host; and two processes that want the same answers at once.

Each test asserts what the server received (nothing re-sent, nothing sent elsewhere) and
what was written (a failed request with its one-line reason, the other answers kept, no
key in any file).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

from novabench.cache import ResponseCache, request_key
from novabench.config import Plan
from novabench.dataset.read import load_nova
from novabench.models.openai_compatible import DEFAULTS, Adapter, ChatRequest
from novabench.predict import run_predictions
from novabench.records import read_predictions
from novabench.redaction import KEY_VARIABLES_ENV, PLACEHOLDER, Redactor
from openai_server import Fail, FakeOpenAI, Raw, Redirect, Reply, Trickle, completion
from support import ROOT, snakemake
from upstream import IMAGES, build_local_dataset, write_current

PROMPTS = ROOT / "config" / "prompts"


def settings(server: FakeOpenAI, **more) -> dict:
    return {
        "base_url": server.base_url,
        "model": "test-vlm",
        "api_key_env": None,
        "backoff_base_s": 0.01,
        "timeout_s": 5,
        **more,
    }


def canary() -> str:
    """A key no file holds by chance."""
    return "sk-CANARY" + hashlib.sha256(str(time.time()).encode()).hexdigest()[:32]


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """Four images, and each one's sha256 -> file name."""
    out = build_local_dataset(tmp_path_factory.mktemp("small"))
    frame = load_nova(out)
    return out, {
        hashlib.sha256(r.image["bytes"]).hexdigest(): r.filename for r in frame.itertuples()
    }


def predict(dataset: Path, out: Path, model_settings: dict, **model_cfg):
    cfg = {
        "adapter": "openai_compatible",
        "tasks": ["localization"],
        "box_format": "pixel_xyxy",
        "settings": model_settings,
        **model_cfg,
    }
    summary = run_predictions(
        dataset=dataset,
        task="localization",
        model_name="api",
        model_cfg=cfg,
        prompt_path=PROMPTS / "localization-v1.txt",
        out=out / "localization-api.jsonl",
        summary_out=out / "localization-api.summary.json",
        cache_dir=out / "cache",
    )
    records = read_predictions(out / "localization-api.jsonl")
    return {r["filename"]: r for r in records}, summary


def body(content: str) -> bytes:
    return json.dumps(completion(content)).encode()


# --- 3: timeout_s bounds the whole request -------------------------------------------------


def test_a_server_trickling_bytes_is_cut_off_at_timeout_s_and_retried():
    def script(seen):
        return Trickle("no finding", every_s=0.2) if seen.prompt == "slow" else Reply("fine")

    with FakeOpenAI(script) as server:
        client = Adapter("api", settings(server, timeout_s=1, max_attempts=2))
        started = time.monotonic()
        slow, fine = client.complete_many(["slow", "fine"])
        took = time.monotonic() - started
        sent = [s.prompt for s in server.requests]
    # The body (~300 bytes at 5 a second) would take a minute; each try gets 1 s in all.
    assert took < 5, took
    assert sorted(sent) == ["fine", "slow", "slow"]
    assert slow.raw is None and slow.error == "timed out after 1 s (after 2 attempt(s))"
    assert fine.raw == "fine"


# --- 4: invalid text is one failed request --------------------------------------------------


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (body("lesion").replace(b"lesion", b"l\xe9sion"), "the body is not UTF-8"),
        (body("lesion").replace(b"lesion", b"\\ud800"), "not valid Unicode (a lone surrogate)"),
    ],
)
def test_an_answer_that_is_not_text_is_a_failed_request_and_the_others_are_kept(
    small, tmp_path, data, reason
):
    dataset, names = small
    bad = sorted(names.values())[0]

    def script(seen):
        if names[seen.image_sha256] == bad:
            return Raw(data)
        return Reply("no finding")

    with FakeOpenAI(script) as server:
        records, summary = predict(
            dataset, tmp_path, settings(server, max_attempts=2), max_error_rate=0.5
        )
        sent_bad = sum(names[s.image_sha256] == bad for s in server.requests)
    assert sent_bad == 2  # retried within the attempt budget
    assert records[bad]["status"] == "error" and reason in records[bad]["error"]
    assert records[bad]["error"].startswith("malformed answer: ")
    assert {r["status"] for n, r in records.items() if n != bad} == {"ok"}
    assert summary["status_counts"]["error"] == 1
    assert len(list((tmp_path / "cache").rglob("*.json"))) == 3  # the failure is not cached


def unreadable_json(kind: str) -> bytes:
    """A chat completion that Python's JSON reader refuses: a number of 5,000 digits, or a
    field nested 10^5 deep."""
    data = body("lesion")
    if kind == "long number":
        return data.replace(b'"total_tokens": ', b'"total_tokens": ' + b"1" * 5000 + b', "t": ')
    return data[:-1] + b', "deep": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"


@pytest.mark.parametrize(
    ("kind", "reason"),
    [
        ("long number", "the body cannot be read (Exceeds the limit (4300 digits)"),
        ("deep", "the body is nested too deeply to read"),
    ],
)
def test_an_answer_json_cannot_read_is_a_failed_request_and_the_others_are_kept(
    small, tmp_path, kind, reason
):
    dataset, names = small
    bad = sorted(names.values())[0]
    data = unreadable_json(kind)

    def script(seen):
        return Raw(data) if names[seen.image_sha256] == bad else Reply("no finding")

    with FakeOpenAI(script) as server:
        records, summary = predict(
            dataset, tmp_path, settings(server, max_attempts=2), max_error_rate=0.5
        )
        sent_bad = sum(names[s.image_sha256] == bad for s in server.requests)
    assert sent_bad == 2  # retried within the attempt budget, as other malformed bodies
    error = records[bad]["error"]
    assert records[bad]["status"] == "error" and error.startswith(f"malformed answer: {reason}")
    assert "\n" not in error and "set_int_max_str_digits" not in error
    assert {r["status"] for n, r in records.items() if n != bad} == {"ok"}
    assert summary["status_counts"]["error"] == 1


# --- 5: keys, in errors and in answers --------------------------------------------------------


def test_a_key_straddling_the_cut_of_an_error_message_is_redacted_whole(monkeypatch):
    key = canary()
    monkeypatch.setenv("NOVA_HOSTILE_KEY", key)
    # The key starts at character 290 of the message, which is cut at 300.
    with FakeOpenAI(lambda seen: Fail(401, message="x" * 290 + key)) as server:
        client = Adapter("api", settings(server, api_key_env="NOVA_HOSTILE_KEY"))
        response = client.complete("prompt")
    assert key[:8] not in response.error
    assert response.error == f"HTTP 401: {'x' * 290}{PLACEHOLDER} (after 1 attempt(s))"


def test_keys_echoed_in_answers_are_redacted_before_the_cache_and_counted(
    small, tmp_path, monkeypatch, caplog
):
    dataset, names = small
    key, other, shaped = canary(), canary(), "sk-proj-" + "Q" * 40
    monkeypatch.setenv("NOVA_HOSTILE_KEY", key)
    # A judge's key the configuration names: the job knows it through the workflow.
    monkeypatch.setenv("NOVA_JUDGE_KEY", other)
    monkeypatch.setenv(KEY_VARIABLES_ENV, "NOVA_HOSTILE_KEY NOVA_JUDGE_KEY")
    first, second, third, clean = sorted(names.values())
    echoed = {first: key, second: other, third: shaped}

    def script(seen):
        name = names[seen.image_sha256]
        if name in echoed:  # a hostile server quotes keys inside the answer
            return Reply(f"no finding ({echoed[name]})", served_model=f"m-{echoed[name]}")
        return Reply("no finding")

    with caplog.at_level(logging.DEBUG), FakeOpenAI(script) as server:
        model_settings = settings(server, api_key_env="NOVA_HOSTILE_KEY")
        records, summary = predict(dataset, tmp_path, model_settings)
        again, summary_again = predict(dataset, tmp_path, model_settings)
        assert len(server.requests) == 4  # the second run read the cache
    assert {n: r["raw"] for n, r in records.items()} == {
        **{n: f"no finding ({PLACEHOLDER})" for n in echoed},
        clean: "no finding",
    }
    assert summary["n_redacted"] == summary_again["n_redacted"] == 3
    assert [r["raw"] for r in again.values()] == [r["raw"] for r in records.values()]
    logged = "\n".join(r.getMessage() for r in caplog.records)
    for path in [p for p in tmp_path.rglob("*") if p.is_file()]:
        data = path.read_bytes()
        for secret in (key, other, shaped):
            assert secret.encode() not in data, path
    for secret in (key, other, shaped):
        assert secret not in logged


def test_a_key_in_a_cache_entry_written_before_redaction_is_redacted_as_it_is_read(
    tmp_path, monkeypatch
):
    key = canary()
    monkeypatch.setenv("NOVA_HOSTILE_KEY", key)
    client = Adapter(
        "api",
        {"base_url": "http://127.0.0.1:9/v1", "model": "m", "api_key_env": "NOVA_HOSTILE_KEY"},
        cache_dir=tmp_path,
    )
    request = ChatRequest("prompt 0", "prompt", None, None)
    identity = client.request_identity(request)
    client.cache.put(request_key(identity), {"raw": f"no finding {key}"}, identity)
    answer = client.complete("prompt")  # from the cache: nothing is sent (port 9 is closed)
    assert answer.cached and answer.raw == f"no finding {PLACEHOLDER}" and answer.redacted == 1


def test_a_redactor_removes_its_keys_and_well_known_shapes_only():
    redact = Redactor(["secret-key-123", None, "short", "secret-key-1234567"])
    text = (
        "a secret-key-1234567 b secret-key-123 c short d sk-ant-api03-"
        + "x" * 30
        + " e AIza"
        + "B" * 35
        + " f hf_"
        + "c" * 34
        + " g sk-learn task-sk-"
    )
    out, n = redact.redact(text)
    assert n == 5
    assert out == (
        f"a {PLACEHOLDER} b {PLACEHOLDER} c short d {PLACEHOLDER} e {PLACEHOLDER} "
        f"f {PLACEHOLDER} g sk-learn task-sk-"
    )


# --- 6: no redirect to another host ---------------------------------------------------------


def test_a_redirect_to_another_host_is_refused_and_one_to_the_same_host_followed():
    with FakeOpenAI(host="127.0.0.2") as elsewhere:
        target = elsewhere.base_url + "/chat/completions"

        def script(seen):
            if seen.prompt == "away":
                return Redirect(target)
            if seen.prompt == "along" and seen.attempt == 1:
                return Redirect("/v2/chat/completions")
            return Reply(f"answer to {seen.prompt}")

        with FakeOpenAI(script) as server:
            client = Adapter("api", settings(server, max_attempts=3))
            away, along = client.complete_many(["away", "along"])
            sent = sorted(s.prompt for s in server.requests)
        assert elsewhere.requests == []  # neither the prompt nor the image went there
    assert sent == ["along", "along", "away"]  # the refusal is not retried
    here = server.base_url.rsplit("/", 1)[0]
    there = elsewhere.base_url.rsplit("/", 1)[0]
    assert away.raw is None and away.error == (
        f"refused a redirect from {here} to {there}: requests go to base_url's host only "
        "(set base_url to the server that answers) (after 1 attempt(s))"
    )
    assert along.raw == "answer to along"


# --- 7: a cap on the answer's size ----------------------------------------------------------


@pytest.mark.parametrize("chunked", [False, True])
def test_an_answer_over_max_response_mb_is_a_failed_request(tmp_path, chunked):
    huge = body("x" * 300_000)

    def script(seen):
        return Raw(huge, chunked=chunked) if seen.prompt == "huge" else Reply("small")

    with FakeOpenAI(script) as server:
        client = Adapter("api", settings(server, max_response_mb=0.1), cache_dir=tmp_path)
        big, small = client.complete_many(["huge", "small"])
        assert sorted(s.prompt for s in server.requests) == ["huge", "small"]
    size = "over 100000 bytes" if chunked else f"{len(huge)} bytes"
    assert big.error == (
        f"answer too large: {size} (max_response_mb allows 0.1 MB; raise it if the model's "
        "answers are really that long) (after 1 attempt(s))"
    )
    assert small.raw == "small"
    assert len(list(tmp_path.rglob("*.json"))) == 1
    assert DEFAULTS["max_response_mb"] == 4.0  # the documented default


# --- 10: one request, one send, across processes ---------------------------------------------


def test_a_claimed_entry_is_not_claimed_by_another_process_until_its_holder_dies(tmp_path):
    cache = ResponseCache(tmp_path / "cache")
    key, other = "a" * 64, "b" * 64
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from novabench.cache import ResponseCache; "
            f"c = ResponseCache(sys.argv[1]); assert c.claim({key!r}); "
            "print('held', flush=True); time.sleep(60)",
            str(tmp_path / "cache"),
        ],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT / "scripts")},
    )
    try:
        assert holder.stdout.readline() == "held\n"
        assert not cache.claim(key)
        assert cache.claim(other)  # another entry is free
    finally:
        holder.kill()  # kill -9: the kernel drops its claims
        holder.wait()
    assert cache.claim(key)
    cache.release(key)
    cache.release(other)
    assert [p.name for p in (tmp_path / "cache").iterdir()] == [".claims"]


def test_a_file_system_without_locks_runs_without_claims_and_says_so_once(
    tmp_path, monkeypatch, caplog
):
    import errno
    import fcntl

    def no_locks(*args):
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(fcntl, "lockf", no_locks)
    cache = ResponseCache(tmp_path / "nolock")
    with caplog.at_level(logging.WARNING, logger="novabench.cache"):
        assert cache.claim("a" * 64) and cache.claim("b" * 64)
        cache.release("a" * 64)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "cannot take locks (No locks available)" in warnings[0]
    assert "a file system with POSIX locks" in warnings[0]


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

# Twelve images, for jobs that overlap in time.
MANY = [(f"{c}_{k}{n[-7:]}", c, cap, b) for k in range(3) for n, c, cap, b in IMAGES]


@pytest.mark.slow
def test_a_second_job_on_the_same_requests_waits_for_the_first_instead_of_resending(tmp_path):
    # What `kill -9` of snakemake alone, then `--unlock` and `--rerun-incomplete`, leads to:
    # the orphaned job still sending, a new one started on the same requests (and what two
    # runs with different dataset tags sharing results/cache do).
    dataset = build_local_dataset(tmp_path / "data", images=MANY)
    gate = threading.Event()  # holds the first job's answers after two, until the second waits

    def script(seen):
        if seen.received and len(server.requests) > 2:
            gate.wait(30)
        return Reply("no finding", delay_s=0.05)

    with FakeOpenAI(script) as server:
        cfg = {
            "adapter": "openai_compatible",
            "tasks": ["localization"],
            "box_format": "pixel_xyxy",
            "settings": settings(server, concurrency=3, timeout_s=60),  # the gate holds answers
        }

        def start(out: str) -> subprocess.Popen:
            args = {
                "dataset": str(dataset),
                "cfg": cfg,
                "prompt": str(PROMPTS / "localization-v1.txt"),
                "out": str(tmp_path / out),
                "cache": str(tmp_path / "cache"),
            }
            return subprocess.Popen(
                [sys.executable, "-c", RUNNER, json.dumps(args)],
                env={**os.environ, "PYTHONPATH": str(ROOT / "scripts")},
                stderr=subprocess.PIPE,
                text=True,
            )

        orphan = start("orphan.jsonl")
        deadline = time.monotonic() + 30
        while sum(s.answered is not None for s in server.requests) < 2:
            assert orphan.poll() is None and time.monotonic() < deadline
            time.sleep(0.01)
        rerun = start("rerun.jsonl")
        waiting = ""
        while "another process is sending requests of this job" not in waiting:
            line = rerun.stderr.readline()
            assert line, "the second job ended without waiting"
            waiting += line
        gate.set()
        _, orphan_log = orphan.communicate(timeout=60)
        _, rerun_log = rerun.communicate(timeout=60)
        assert orphan.returncode == rerun.returncode == 0, orphan_log + rerun_log
        sent = [s.attempt for s in server.requests]
    assert len(sent) == 12 and set(sent) == {1}  # every request sent once, by either job
    first = read_predictions(tmp_path / "orphan.jsonl")
    second = read_predictions(tmp_path / "rerun.jsonl")
    assert [r["raw"] for r in first] == [r["raw"] for r in second] == ["no finding"] * 12
    assert all(r["cached"] for r in second)  # read from the cache, none sent


# --- configured keys, and the whole pipeline ------------------------------------------------


def test_the_plan_names_every_configured_key_variable():
    config = {
        "models": {
            "a": {"settings": {"api_key_env": "OPENAI_API_KEY"}},
            "b": {"settings": {"api_key_env": None}},
            "c": {"settings": {}},
        },
        "judges": {"j": {"kind": "llm", "settings": {"backend": {"api_key_env": "JUDGE_KEY"}}}},
    }
    assert Plan(config, ROOT).key_variables() == ["JUDGE_KEY", "OPENAI_API_KEY"]


def _key_echoing_script(failing: dict):
    """Answers that echo the key they were sent; refusals (echoing it too) while ``failing``."""

    def script(seen):
        echoed = seen.headers["authorization"].removeprefix("Bearer ")
        if failing["on"] or seen.prompt.startswith("never"):
            return Fail(401, message=f"Incorrect API key provided: {'x' * 250}{echoed}")
        return Reply(f"no finding (served for {echoed})")

    return script


def _localization_run_config(server: FakeOpenAI, repo: Path) -> tuple[dict, dict]:
    """One API model on localization only, its key in NOVA_SMK_CANARY; (model, config)."""
    model = {
        "adapter": "openai_compatible",
        "tasks": ["localization"],
        "box_format": "pixel_xyxy",
        "settings": settings(server, api_key_env="NOVA_SMK_CANARY", max_attempts=1),
    }
    config = {
        "dataset": {"source": "local", "local_path": str(repo)},
        "tasks": {"captioning": {"enabled": False}, "diagnosis": {"enabled": False}},
        "models": {"api": model},
    }
    return model, config


def _files_under(work: Path) -> dict[str, bytes]:
    return {str(p.relative_to(work)): p.read_bytes() for p in work.rglob("*") if p.is_file()}


def _assert_no_file_holds(key: str, files: dict[str, bytes]) -> None:
    for name, data in files.items():
        assert key.encode() not in data, name


def _assert_only_the_failed_job_changed(before: dict, after: dict) -> None:
    # Only the failed job's own files changed: Snakemake removed its outputs (their answers
    # are in the cache) and rewrote its log; every other file, cache entries and scores
    # included, is byte-identical.
    job = "results/local-repo/predictions/localization/api"
    changed = {n for n in before if after.get(n) != before[n]}
    assert {n for n in changed if not n.startswith(".snakemake/metadata/")} == {
        f"{job}.jsonl",
        f"{job}.summary.json",
        "results/local-repo/logs/predict/localization/api.log",
    }
    assert after.get(f"{job}.jsonl") is None
    assert sum(n.startswith("results/cache/api/") and n.endswith(".json") for n in before) == 4
    assert len(before) - len(changed) > 10


@pytest.mark.slow
def test_no_echoed_key_survives_a_pipeline_run_and_a_failed_run_loses_nothing(tmp_path):
    key = canary()
    env = {**os.environ, "NOVA_SMK_CANARY": key}
    failing = {"on": False}

    with FakeOpenAI(_key_echoing_script(failing), expected_key=key) as server:
        model, config = _localization_run_config(server, write_current(tmp_path / "repo"))
        (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
        work = tmp_path / "work"
        target = "results/local-repo/scores/localization/api.json"
        ran = snakemake(work, target, "--configfile", str(tmp_path / "config.yaml"), env=env)
        assert ran.returncode == 0, ran.stderr[-3000:]
        assert len(server.requests) == 4
        summary = json.loads(
            (work / "results/local-repo/predictions/localization/api.summary.json").read_text()
        )
        assert summary["n_redacted"] == 4

        before = _files_under(work)
        assert any(name.startswith(".snakemake/") for name in before)
        assert any("/logs/" in name for name in before)
        _assert_no_file_holds(key, before)
        assert key not in ran.stdout + ran.stderr

        # A new setting asks every request again, and the server now refuses them all,
        # echoing the key: the run fails with one line, and what the first run finished
        # is kept.
        failing["on"] = True
        model["settings"]["temperature"] = 0.3
        (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
        failed = snakemake(work, target, "--configfile", str(tmp_path / "config.yaml"), env=env)
    assert failed.returncode != 0
    output = failed.stdout + failed.stderr
    assert key not in output and "Traceback" not in output
    line = next(x for x in output.splitlines() if "4 of 4 requests failed" in x)
    assert "HTTP 401" in line and "fix: " in line and PLACEHOLDER in line
    after = _files_under(work)
    _assert_no_file_holds(key, after)
    _assert_only_the_failed_job_changed(before, after)
