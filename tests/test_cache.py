"""The response cache: content addressing, atomic entries, garbage tolerance, kill -9."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from novabench.cache import CacheWriter, ResponseCache, request_key
from support import ROOT

REQUEST = {
    "model": "gpt-4o-2024-08-06",
    "base_url": "https://api.openai.com/v1",
    "generation": {"temperature": 0.1, "max_tokens": 2048, "seed": None, "extra_body": {}},
    "system_prompt": None,
    "prompt": "Find every abnormal region.",
    "image_sha256": "ab" * 32,
}


def test_key_is_the_sha256_of_the_canonical_request():
    text = json.dumps({"v": 1, **REQUEST}, sort_keys=True, separators=(",", ":"))
    assert request_key(REQUEST) == hashlib.sha256(text.encode()).hexdigest()
    reordered = dict(reversed(list(REQUEST.items())))
    assert request_key(reordered) == request_key(REQUEST)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("model", "gpt-4o-mini"),
        ("base_url", "http://localhost:8000/v1"),
        ("generation", {"temperature": 0.2, "max_tokens": 2048, "seed": None, "extra_body": {}}),
        ("generation", {"temperature": 0.1, "max_tokens": 2048, "seed": 1, "extra_body": {}}),
        ("system_prompt", "You are a radiologist."),
        ("prompt", "Find every abnormal region!"),
        ("image_sha256", "cd" * 32),
    ],
)
def test_every_input_of_the_answer_changes_the_key(field, value):
    assert request_key({**REQUEST, field: value}) != request_key(REQUEST)


def test_round_trip_lays_out_one_file_per_entry(tmp_path):
    cache = ResponseCache(tmp_path / "gpt-4o")
    key = request_key(REQUEST)
    assert cache.get(key) is None and key not in cache
    response = {"raw": "no finding", "usage": {"prompt_tokens": 3}, "latency_s": 0.5}
    path = cache.put(key, response, REQUEST)
    assert path == tmp_path / "gpt-4o" / key[:2] / f"{key}.json"
    entry = cache.get(key)
    assert entry["response"] == response and entry["request"] == REQUEST and entry["key"] == key
    assert len(cache) == 1
    assert sorted(p.name for p in path.parent.iterdir()) == [f"{key}.json"]  # no temp file left


@pytest.mark.parametrize(
    "garbage",
    [b"", b'{"key": "', b"\xff\xfe\x00", b"[1, 2]", b'{"v": 1}', b'{"key": "0", "response": {}}'],
)
def test_unreadable_entries_are_ignored_then_rewritten(tmp_path, garbage):
    cache = ResponseCache(tmp_path)
    key = request_key(REQUEST)
    path = cache.path(key)
    path.parent.mkdir(parents=True)
    path.write_bytes(garbage)
    assert cache.get(key) is None
    cache.put(key, {"raw": "ok"}, REQUEST)
    assert cache.get(key)["response"] == {"raw": "ok"}


def test_an_entry_whose_response_does_not_match_its_check_is_ignored(tmp_path):
    # What a power loss can leave of an entry that was renamed before its data reached the
    # disk: it must read as absent, never as an answer.
    cache = ResponseCache(tmp_path)
    key = request_key(REQUEST)
    path = cache.put(key, {"raw": "no finding", "usage": None}, REQUEST)
    entry = json.loads(path.read_text())
    assert (
        entry["check"]
        == hashlib.sha256(
            json.dumps(entry["response"], sort_keys=True, separators=(",", ":")).encode()
        ).hexdigest()
    )
    entry["response"]["raw"] = "no findinf"
    path.write_text(json.dumps(entry))
    assert cache.get(key) is None
    # Entries written before the check existed have none, and are still read.
    del entry["check"]
    path.write_text(json.dumps(entry))
    assert cache.get(key)["response"]["raw"] == "no findinf"


@pytest.fixture
def flushed(monkeypatch) -> list[str]:
    """The paths (files and folders) fsynced during the test, in any thread."""
    paths: list[str] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        paths.append(os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    return paths


def test_put_flushes_nothing_and_sync_flushes_each_new_entry_and_folder_once(tmp_path, flushed):
    cache = ResponseCache(tmp_path)
    requests = [{**REQUEST, "prompt": str(i)} for i in range(5)]
    paths = [cache.put(request_key(r), {"raw": "ok"}, r) for r in requests]
    assert flushed == []  # a kill cannot lose these already: no disk flush per entry
    assert cache.sync() == 5
    folders = {str(p.parent) for p in paths}
    assert sorted(flushed) == sorted([str(p) for p in paths] + list(folders))
    flushed.clear()
    assert cache.sync() == 0 and flushed == []
    again = cache.put(request_key(requests[0]), {"raw": "ok"}, requests[0])
    assert cache.sync() == 1 and sorted(flushed) == sorted([str(again), str(again.parent)])


def test_the_writer_thread_writes_every_entry_and_flushes_them_when_closed(tmp_path, flushed):
    cache = ResponseCache(tmp_path)
    writer = CacheWriter(cache, sync_every_s=3600)  # no periodic sync in this test
    requests = [{**REQUEST, "prompt": str(i)} for i in range(20)]
    for request in requests:
        writer.put(request_key(request), {"raw": request["prompt"]}, request)
    writer.close()
    paths = [cache.path(request_key(r)) for r in requests]
    assert [cache.get(request_key(r))["response"]["raw"] for r in requests] == [
        r["prompt"] for r in requests
    ]
    assert sorted(flushed) == sorted(
        [str(p) for p in paths] + [str(p) for p in {p.parent for p in paths}]
    )


def test_an_error_in_the_writer_thread_is_raised_in_the_caller(tmp_path, monkeypatch):
    def full(self, key, response, request):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(ResponseCache, "put", full)
    writer = CacheWriter(ResponseCache(tmp_path))
    writer.put(request_key(REQUEST), {"raw": "ok"}, REQUEST)
    with pytest.raises(OSError, match="No space left on device"):
        writer.close()
    with pytest.raises(OSError, match="No space left on device"):  # and by any later put
        writer.put(request_key(REQUEST), {"raw": "ok"}, REQUEST)


def test_keys_that_are_not_hashes_are_refused(tmp_path):
    cache = ResponseCache(tmp_path)
    for bad in ("../../etc/passwd", "AB" * 32, "ab" * 31):
        with pytest.raises(ValueError):
            cache.path(bad)


def test_concurrent_writers_of_one_key_leave_a_complete_entry(tmp_path):
    cache = ResponseCache(tmp_path)
    key = request_key(REQUEST)

    def write(worker: int) -> None:
        for i in range(30):
            cache.put(key, {"raw": f"<{worker}-{i}>" * 500}, REQUEST)

    threads = [threading.Thread(target=write, args=(w,)) for w in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    raw = cache.get(key)["response"]["raw"]
    assert raw == raw[: raw.index(">") + 1] * 500  # one writer's whole value, never a mix
    assert list(cache.path(key).parent.glob(".*")) == []


WRITER = """
import sys
sys.path.insert(0, sys.argv[2])
from novabench.cache import CacheWriter, ResponseCache, request_key
cache = ResponseCache(sys.argv[1])
i = 0
while True:
    request = {"prompt": str(i)}
    cache.put(request_key(request), {"raw": str(i) * 20000}, request)
    print(i, flush=True)  # acknowledged: the entry must survive the kill
    i += 1
"""


@pytest.mark.parametrize("after_s", [0.4, 0.75])
def test_kill_9_mid_write_never_leaves_a_corrupt_entry(tmp_path, after_s):
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(tmp_path), str(ROOT / "scripts")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 10
    while not any(tmp_path.glob("??/*.json")) and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(after_s)
    os.kill(writer.pid, signal.SIGKILL)
    writer.wait()
    assert writer.returncode == -signal.SIGKILL, writer.stderr.read()

    cache = ResponseCache(tmp_path)
    acknowledged = writer.stdout.read().split()
    assert acknowledged
    for i in acknowledged:  # no fsync per entry, yet none of them is lost to the kill
        assert (
            cache.get(request_key({"prompt": i.decode()}))["response"]["raw"] == i.decode() * 20000
        )
    entries = list(tmp_path.glob("??/*.json"))
    assert len(entries) >= 1
    for path in entries:
        entry = json.loads(path.read_text())  # every visible entry is complete
        i = entry["request"]["prompt"]
        assert entry["response"]["raw"] == i * 20000
        assert path.stem == entry["key"] == request_key({"prompt": i})
        assert cache.get(path.stem) is not None
    # A write cut short leaves at most a temporary file, which readers never see and
    # which is swept once stale.
    partials = list(tmp_path.glob("??/.*.partial"))
    assert len(partials) <= 1
    for partial in partials:
        os.utime(partial, (time.time() - 7200, time.time() - 7200))
    assert cache.remove_stale_partials() == len(partials)
    assert list(tmp_path.glob("??/.*.partial")) == []
