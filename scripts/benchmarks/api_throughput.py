"""Throughput of the openai_compatible adapter against a server with a fixed latency.

Sends NOVA-sized work (906 localization requests, each with its own 480x480 PNG) to the
loopback test server (``tests/openai_server.py``, run in its own process so that it does not
share the client's interpreter lock), which answers every request after ``--latency-ms``.
The ideal wall time is ``requests x latency / concurrency``; the ratio to it measures what
the adapter adds (client work, the response cache's fsynced writes, scheduling).
At concurrency 1 the ideal is 90 s, so by default fewer requests are sent there and the
table says so.

    python scripts/benchmarks/api_throughput.py                # prints and writes the table
    python scripts/benchmarks/api_throughput.py --concurrency 32 --requests 300
"""

from __future__ import annotations

import argparse
import io
import os
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


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=906)
    parser.add_argument("--latency-ms", type=float, default=100.0)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 32, 64])
    parser.add_argument("--requests-at-1", type=int, default=100, help="fewer at concurrency 1")
    parser.add_argument("--out", type=Path, default=ROOT / "results/benchmarks/api_throughput.md")
    args = parser.parse_args(argv)

    images = [slice_png(i) for i in range(args.requests)]
    latency = args.latency_ms / 1000
    rows = []
    server, base_url = start_server(args.latency_ms)
    try:
        for run, concurrency in enumerate(args.concurrency):
            n = min(args.requests, args.requests_at_1) if concurrency == 1 else args.requests
            # A distinct prompt per run and image: no request is answered from the cache.
            samples = [
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
            wall, cpu, errors = run_once(base_url, samples, concurrency)
            ideal = n * latency / concurrency
            scaled = "" if n == args.requests else f" (x{args.requests / n:.2f})"
            rows.append(
                {
                    "concurrency": concurrency,
                    "requests": f"{n}{' of ' + str(args.requests) if scaled else ''}",
                    "ideal_s": ideal * args.requests / n,
                    "wall_s": wall * args.requests / n,
                    "ratio": wall / ideal,
                    "rate": n / wall,
                    "cpu_ms": 1000 * cpu / n,
                    "errors": errors,
                    "note": "wall and ideal scaled to all requests" if scaled else "",
                }
            )
            print(f"concurrency {concurrency}: {n} requests in {wall:.2f} s", file=sys.stderr)
    finally:
        server.terminate()
        server.wait(timeout=10)

    size = sum(len(i) for i in images) / len(images) / 1024
    load = os.getloadavg()[0]
    lines = [
        "# API throughput of the openai_compatible adapter",
        "",
        f"{args.requests} requests (480x480 PNG, mean {size:.0f} KiB, + localization prompt) "
        f"to the loopback test server answering after {args.latency_ms:g} ms; response cache on "
        "(fsynced writes). Ideal = requests x latency / concurrency. Client CPU is the adapter "
        f"process's CPU time per request. Machine: {os.cpu_count()} CPUs, load average "
        f"{load:.1f} when the runs ended.",
        "",
        "| concurrency | requests | ideal (s) | wall (s) | wall / ideal | requests/s "
        "| client CPU (ms/request) | errors | note |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for r in rows:
        lines.append(
            f"| {r['concurrency']} | {r['requests']} | {r['ideal_s']:.2f} | {r['wall_s']:.2f} | "
            f"{r['ratio']:.2f}x | {r['rate']:.1f} | {r['cpu_ms']:.2f} | {r['errors']} "
            f"| {r['note']} |"
        )
    table = "\n".join(lines) + "\n"
    print(table)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(table)


if __name__ == "__main__":
    main()
