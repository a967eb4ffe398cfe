"""One server load for a model's three tasks against one load per task, on the vLLM stand-in.

A managed model's tasks either share one server (the workflow's way: a service job, with
the three prediction jobs attached to it at once, novabench.serving) or each start their
own, one after another (the way before: three loads, and a node's GPUs held for each). The
stand-in (tests/vllm_stand_in.py) is given a start-up delay (the weights' load) and an
answer delay; nothing runs on a GPU. The table gives per way the wall time, the loads, and
the GPU-seconds held (the servers' lifetimes x ``--gpus``, the GPUs a 72B model asks for).

    python scripts/benchmarks/one_load.py                        # 20 s start-up, 4 GPUs
    python scripts/benchmarks/one_load.py --startup-s 60 --answer-s 0.2
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "tests"))

from novabench.predict import run_predictions  # noqa: E402

PROMPTS = {
    "localization": "localization-qwen25-v1.txt",
    "captioning": "captioning-v1.txt",
    "diagnosis": "diagnosis-v1.txt",
}


def model_cfg(executable: Path) -> dict:
    serve = {"gpus": 0, "startup_timeout_s": 600, "stop_grace_s": 5, "executable": str(executable)}
    return {
        "adapter": "vllm",
        "tasks": list(PROMPTS),
        "box_format": "qwen25_bbox_2d",
        "settings": {"model": "Qwen/Qwen2.5-VL-72B-Instruct", "concurrency": 4, "serve": serve},
    }


def predict(folder: Path, dataset: Path, task: str, cfg: dict, service: Path | None) -> None:
    run_predictions(
        dataset=dataset,
        task=task,
        model_name="served",
        model_cfg=cfg,
        prompt_path=ROOT / "config" / "prompts" / PROMPTS[task],
        out=folder / f"{task}.jsonl",
        summary_out=folder / f"{task}.summary.json",
        cache_dir=folder / "results" / "cache",  # a fresh cache: every request is sent
        shared_server=service,
    )


def three_loads(folder: Path, dataset: Path, cfg: dict) -> float:
    """Each task's job starts, uses and stops its own server; returns GPU-held seconds."""
    held = 0.0
    for task in PROMPTS:
        started = time.monotonic()
        predict(folder, dataset, task, cfg, None)
        held += time.monotonic() - started
    return held


def one_load(folder: Path, dataset: Path, cfg: dict) -> float:
    """The service job's server, the three tasks at once; returns GPU-held seconds."""
    service = folder / "served.json"
    command = [sys.executable, str(ROOT / "scripts" / "serve.py"), "--model", "served"]
    command += ["--settings", json.dumps(cfg), "--service", str(service)]
    command += ["--cache-dir", str(folder / "results" / "cache"), "--log", str(folder / "log")]
    started = time.monotonic()
    server = subprocess.Popen(command)
    try:
        with ThreadPoolExecutor(len(PROMPTS)) as pool:
            list(pool.map(lambda t: predict(folder, dataset, t, cfg, service), PROMPTS))
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait()
    return time.monotonic() - started


def measure(way, base: Path, dataset: Path, cfg: dict, starts: Path) -> tuple[float, float, int]:
    folder = base / way.__name__
    folder.mkdir()
    starts.write_text("")
    started = time.monotonic()
    held = way(folder, dataset, cfg)
    return time.monotonic() - started, held, len(starts.read_text().splitlines())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--startup-s", type=float, default=20.0)
    parser.add_argument("--answer-s", type=float, default=0.05)
    parser.add_argument("--gpus", type=int, default=4)
    args = parser.parse_args()
    from upstream import build_local_dataset

    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        executable = base / "vllm"
        executable.write_text(
            f'#!/bin/sh\nexec "{sys.executable}" "{ROOT}/tests/vllm_stand_in.py" "$@"\n'
        )
        executable.chmod(0o755)
        os.environ.update(
            VLLM_STAND_IN_STARTUP_S=str(args.startup_s),
            VLLM_STAND_IN_DELAY_S=str(args.answer_s),
            VLLM_STAND_IN_STARTS=str(base / "starts"),
        )
        dataset = build_local_dataset(base / "nova")
        cfg = model_cfg(executable)
        print(f"start-up {args.startup_s:g} s, answers {args.answer_s:g} s, {args.gpus} GPUs")
        print(f"{'way':<12} {'loads':>5} {'wall s':>8} {'GPU-s held':>11}")
        for way in (three_loads, one_load):
            wall, held, loads = measure(way, base, dataset, cfg, base / "starts")
            print(f"{way.__name__:<12} {loads:>5} {wall:>8.1f} {held * args.gpus:>11.0f}")


if __name__ == "__main__":
    main()
