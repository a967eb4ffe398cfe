"""Throughput of the openai_compatible adapter against a server with a fixed latency.

Sends NOVA-sized work (906 localization requests, each with its own 480x480 PNG) to the
loopback test server (``tests/openai_server.py``, run in its own process so that it does not
share the client's interpreter lock), which answers every request after ``--latency-ms``.
The ideal wall time is ``requests x latency / concurrency``; the ratio to it measures what
the adapter adds (client work, the response cache's writes, scheduling).
At concurrency 1 the ideal is 90 s, so by default fewer requests are sent there and the
table says so.

On a shared machine the ratios move with the other jobs' load, so every concurrency is run
``--repeat`` times, the runs interleaved, and the table gives the median (and the range).
The ``openai`` package is imported before the runs: importing it (about a second, once per
job) is start-up, not throughput.

    python scripts/benchmarks/api_throughput.py                # prints and writes the table
    python scripts/benchmarks/api_throughput.py --concurrency 32 --requests 300 --repeat 5
"""

from __future__ import annotations

import argparse
import io
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from PIL import Image

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

from novabench.models.base import Sample  # noqa: E402
from novabench.models.openai_compatible import Adapter  # noqa: E402

PROMPT = (ROOT / "config" / "prompts" / "localization-v1.txt").read_text()


def slice_png(seed: int) -> bytes:
    """A 480x480 grayscale PNG of about the size of a NOVA slice: a smooth disc plus noise."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[:480, :480]
    disc = 180 * np.exp(-(((xx - 240) ** 2 + (yy - 240) ** 2) / (2 * 150.0**2)))
    pixels = np.clip(disc + rng.normal(0, 6, disc.shape), 0, 255).astype(np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(pixels, mode="L").save(buffer, format="PNG")
    return buffer.getvalue()


def start_server(latency_ms: float) -> tuple[subprocess.Popen, str]:
    server = subprocess.Popen(
        [sys.executable, str(ROOT / "tests" / "openai_server.py"), "--latency-ms", str(latency_ms)],
        stdout=subprocess.PIPE,
        text=True,
    )
    line = server.stdout.readline().split()
    if len(line) != 2 or line[0] != "port":
        server.kill()
        raise RuntimeError(f"the test server did not start: {line}")
    return server, f"http://127.0.0.1:{line[1]}/v1"


def run_once(base_url: str, samples: list[Sample], concurrency: int) -> tuple[float, float, int]:
    """Wall seconds, client CPU seconds and errors of one prediction run."""
    with tempfile.TemporaryDirectory() as cache:
        adapter = Adapter(
            "bench",
            {
                "base_url": base_url,
                "model": "bench-model",
                "api_key_env": None,
                "concurrency": concurrency,
                "max_attempts": 1,
            },
            cache_dir=Path(cache),
        )
        started, cpu = time.perf_counter(), time.process_time()
        responses = list(adapter.predict(samples))
        wall, cpu = time.perf_counter() - started, time.process_time() - cpu
    return wall, cpu, sum(r.error is not None for r in responses)


def samples_for(run: int, images: list[bytes], n: int) -> list[Sample]:
    # A distinct prompt per run and image: no request is answered from the cache.
    return [
        Sample(
            filename=f"img{i:04d}.png",
            case_id=f"case{i:04d}",
            task="localization",
            prompt=PROMPT.format(width=480, height=480) + f"\n(run {run}, image {i})",
            image_png=images[i],
            width=480,
            height=480,
        )
        for i in range(n)
    ]


def measure(args: argparse.Namespace, images: list[bytes]) -> dict[int, list[tuple]]:
    """(wall s, CPU s, errors) of every run, by concurrency; runs interleaved."""
    import openai  # noqa: F401 - imported once here, not inside the first timed run

    runs: dict[int, list[tuple]] = {c: [] for c in args.concurrency}
    server, base_url = start_server(args.latency_ms)
    try:
        for repeat in range(args.repeat):
            for k, concurrency in enumerate(args.concurrency):
                n = min(args.requests, args.requests_at_1) if concurrency == 1 else args.requests
                samples = samples_for(repeat * len(args.concurrency) + k, images, n)
                runs[concurrency].append(run_once(base_url, samples, concurrency))
                wall = runs[concurrency][-1][0]
                print(f"concurrency {concurrency}: {n} requests in {wall:.2f} s", file=sys.stderr)
    finally:
        server.terminate()
        server.wait(timeout=10)
    return runs


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=906)
    parser.add_argument("--latency-ms", type=float, default=100.0)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 32, 64])
    parser.add_argument("--requests-at-1", type=int, default=100, help="fewer at concurrency 1")
    parser.add_argument("--repeat", type=int, default=3, help="runs per concurrency (median)")
    parser.add_argument("--out", type=Path, default=ROOT / "results/benchmarks/api_throughput.md")
    args = parser.parse_args(argv)

    images = [slice_png(i) for i in range(args.requests)]
    latency = args.latency_ms / 1000
    runs = measure(args, images)
    size = sum(len(i) for i in images) / len(images) / 1024
    load = os.getloadavg()[0]
    lines = [
        "# API throughput of the openai_compatible adapter",
        "",
        f"{args.requests} requests (480x480 PNG, mean {size:.0f} KiB, + localization prompt) "
        f"to the loopback test server answering after {args.latency_ms:g} ms; response cache on "
        "(entries written without fsync, flushed in batches every second). Ideal = requests x "
        "latency / concurrency. Median of "
        f"{args.repeat} interleaved runs (range in brackets). Client CPU is the adapter "
        f"process's CPU time per request. Machine: {os.cpu_count()} CPUs, load average "
        f"{load:.1f} when the runs ended.",
        "",
        "| concurrency | requests | ideal (s) | wall (s) | wall / ideal | requests/s "
        "| client CPU (ms/request) | errors | note |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for concurrency, results in runs.items():
        n = min(args.requests, args.requests_at_1) if concurrency == 1 else args.requests
        scale = args.requests / n
        ideal = n * latency / concurrency
        walls = sorted(wall for wall, _, _ in results)
        wall = statistics.median(walls)
        cpu = statistics.median(cpu for _, cpu, _ in results)
        errors = sum(e for _, _, e in results)
        note = f"wall and ideal scaled x{scale:.2f} to all requests" if scale != 1 else ""
        lines.append(
            f"| {concurrency} | {n}{'' if scale == 1 else f' of {args.requests}'} "
            f"| {ideal * scale:.2f} | {wall * scale:.2f} "
            f"| {wall / ideal:.2f}x ({walls[0] / ideal:.2f}-{walls[-1] / ideal:.2f}) "
            f"| {n / wall:.1f} | {1000 * cpu / n:.2f} | {errors} | {note} |"
        )
    table = "\n".join(lines) + "\n"
    print(table)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(table)


if __name__ == "__main__":
    main()
