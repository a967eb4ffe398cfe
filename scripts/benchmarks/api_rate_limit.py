"""How close the openai_compatible adapter comes to a provider's quota, found by itself.

The loopback test server (``tests/openai_server.py``, in its own process) admits requests
through a token bucket of R requests per second holding ``--burst-s`` seconds of quota and
answers a request beyond it with an immediate 429 and the wait for the next token
(``Retry-After`` / ``retry-after-ms``), like a provider's requests-per-minute limit; admitted
requests are answered after ``--latency-ms``. The adapter runs with ``concurrency`` 64 as the
upper bound, starting from 1 or 64 requests in flight (``initial_concurrency``), and must
find R without being told.

Per run the table gives the answers per second over the whole run and over its second half
(once the window has converged), both as a share of R, and the share of sends the server
rejected. Requests are diagnosis-sized text prompts (the controller does not depend on the
payload, and text keeps the client's CPU out of the measurement on a shared machine).

    python scripts/benchmarks/api_rate_limit.py                 # R = 50 and 200, start 1 and 64
    python scripts/benchmarks/api_rate_limit.py --rates 20 --starts 8 --requests 400
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

from novabench.models.openai_compatible import Adapter  # noqa: E402

PROMPT = (ROOT / "config" / "prompts" / "diagnosis-v1.txt").read_text()


def start_server(rate: float, burst_s: float, latency_ms: float) -> tuple[subprocess.Popen, str]:
    command = [
        sys.executable,
        str(ROOT / "tests" / "openai_server.py"),
        "--latency-ms",
        str(latency_ms),
        "--rate-per-s",
        str(rate),
        "--burst-s",
        str(burst_s),
        "--answer",
        '{"most_likely_diagnosis": "Glioblastoma"}',
    ]
    server = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    line = server.stdout.readline().split()
    if len(line) != 2 or line[0] != "port":
        server.kill()
        raise RuntimeError(f"the test server did not start: {line}")
    return server, f"http://127.0.0.1:{line[1]}/v1"


def server_stats(base_url: str) -> dict:
    """Admitted and rejected requests since the last call, from the server."""
    with urllib.request.urlopen(base_url + "/stats", timeout=10) as answer:
        return json.load(answer)


def run_once(base_url: str, start: int, n: int, run: int, burst_s: float) -> dict:
    """One job of ``n`` distinct requests; what the client and the server saw."""
    time.sleep(burst_s + 0.2)  # every run starts with a full bucket, as a fresh job would
    server_stats(base_url)  # reset the server's counts
    with tempfile.TemporaryDirectory() as cache:
        adapter = Adapter(
            "bench",
            {
                "base_url": base_url,
                "model": "bench-model",
                "api_key_env": None,
                "concurrency": 64,
                "initial_concurrency": start,
            },
            cache_dir=Path(cache),
        )
        # A distinct prompt per run and request: no request is answered from the cache.
        prompts = [PROMPT + f"\n(run {run}, case {i})" for i in range(n)]
        started = time.perf_counter()
        responses = adapter.complete_many(prompts)
        wall = time.perf_counter() - started
    stats = server_stats(base_url)
    admitted = sorted(stats["admitted_at"])
    half = admitted[0] + (admitted[-1] - admitted[0]) / 2
    second_half = sum(t > half for t in admitted) / (admitted[-1] - half)
    return {
        "wall": wall,
        "rate_per_s": n / wall,
        "second_half": second_half,
        "rejected": stats["rejected"],
        "sends": stats["admitted"] + stats["rejected"],
        "errors": sum(r.error is not None for r in responses),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rates", type=float, nargs="+", default=[50.0, 200.0])
    parser.add_argument("--starts", type=int, nargs="+", default=[1, 64])
    parser.add_argument("--burst-s", type=float, default=1.0)
    parser.add_argument("--latency-ms", type=float, default=100.0)
    parser.add_argument("--requests", type=int, default=906)
    parser.add_argument("--out", type=Path, default=ROOT / "results/benchmarks/api_rate_limit.md")
    args = parser.parse_args(argv)

    rows = []
    for rate in args.rates:
        server, base_url = start_server(rate, args.burst_s, args.latency_ms)
        try:
            for start in args.starts:
                result = run_once(base_url, start, args.requests, len(rows), args.burst_s)
                rows.append({"rate": rate, "start": start, **result})
                print(f"R={rate:g}/s start {start}: {result}", file=sys.stderr)
        finally:
            server.terminate()
            server.wait(timeout=10)

    lines = [
        "# The openai_compatible adapter against a rate limit it is not told",
        "",
        f"{args.requests} text requests per run to the loopback test server: a token bucket "
        f"of R requests/s holding {args.burst_s:g} s of quota, an immediate 429 with the wait "
        f"for the next token beyond it, answers after {args.latency_ms:g} ms. Adapter: "
        "concurrency 64 (upper bound), starting at `initial_concurrency`, max_attempts 6. "
        "Second half: answers per second once half the run's time has passed. Machine: "
        f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} when the runs ended.",
        "",
        "| R (requests/s) | start | wall (s) | answers/s | whole run / R | second half / R "
        "| rejected (429) | rejected / sends | errors |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        lines.append(
            f"| {r['rate']:g} | {r['start']} | {r['wall']:.2f} | {r['rate_per_s']:.1f} "
            f"| {r['rate_per_s'] / r['rate']:.2f} | {r['second_half'] / r['rate']:.2f} "
            f"| {r['rejected']} | {100 * r['rejected'] / r['sends']:.1f}% | {r['errors']} |"
        )
    table = "\n".join(lines) + "\n"
    print(table)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(table)


if __name__ == "__main__":
    main()
