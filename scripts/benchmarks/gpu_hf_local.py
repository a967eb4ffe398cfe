"""The hf_local adapter on a GPU: throughput, memory and the decode rate against its bound.

A model of a real architecture and size is built from its configuration with random
weights (nothing is downloaded): Qwen2.5-VL-7B-Instruct's (28 layers of width 3584, a
vocabulary of 152,064, its 32-layer vision tower), in bfloat16 on the GPU. The tokenizer is
the tests' byte-level one with Qwen's special tokens (tests/tiny_vlms.py), so prompts are
about four times as many tokens as Qwen's own tokenizer makes of them; images go through
Qwen2.5-VL's real image processor (a 480x480 slice is 476x476, 289 image tokens). Every
answer is exactly ``--new-tokens`` long (``min_new_tokens``; random weights would stop
anywhere).

The adapter's own loading, batching, generation and decoding run unchanged; only the weights
come from memory instead of a folder. For batch sizes 1, 8 and 32 over 64 images of the
captioning task it measures images/s, generated tokens/s and peak GPU memory, and the decode
rate: (new tokens - 1) per answer over the time a run takes beyond a run of one new token
(the prefill), against the memory-bandwidth bound of decoding, batch x HBM bandwidth /
bytes of the language model's weights read per step (KV-cache reads ignored, so the bound
is optimistic for long contexts). The table goes to stdout and to
``results/benchmarks/gpu_hf_local.md``.

    python scripts/benchmarks/gpu_hf_local.py            # one CUDA GPU, a few minutes
    python scripts/benchmarks/gpu_hf_local.py --smoke    # a tiny config on the CPU, seconds
    python scripts/benchmarks/gpu_hf_local.py --tiny-tests   # the tiny-family tests on CUDA

Never part of CI: it needs a GPU for its numbers.
"""

from __future__ import annotations

import argparse
import io
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "scripts"), str(ROOT / "tests")]

IMAGES = 64
BATCH_SIZES = (1, 8, 32)
# HBM bandwidth (bytes/s) of common data-centre GPUs, by a word of their CUDA name.
HBM_BYTES_PER_S = {
    "H200": 4.8e12,
    "H100": 3.35e12,  # SXM; the PCIe card has 2.0e12: give --hbm-tb-s
    "A100": 2.0e12,  # 80 GB SXM 2.04e12, 40 GB 1.56e12
    "L40S": 0.864e12,
    "A10": 0.6e12,
}

# Qwen/Qwen2.5-VL-7B-Instruct's config.json (its text and vision parts).
QWEN25_VL_7B_TEXT = {
    "hidden_size": 3584,
    "intermediate_size": 18944,
    "num_hidden_layers": 28,
    "num_attention_heads": 28,
    "num_key_value_heads": 4,
    "vocab_size": 152064,
    "max_position_embeddings": 128000,
    "rms_norm_eps": 1e-6,
    "tie_word_embeddings": False,
    "rope_parameters": {"rope_type": "default", "rope_theta": 1e6, "mrope_section": [16, 24, 24]},
}
QWEN25_VL_7B_VISION = {
    "depth": 32,
    "hidden_size": 1280,
    "intermediate_size": 3420,
    "num_heads": 16,
    "out_hidden_size": 3584,
    "patch_size": 14,
    "spatial_merge_size": 2,
    "temporal_patch_size": 2,
    "window_size": 112,
    "fullatt_block_indexes": [7, 15, 23, 31],
    "tokens_per_second": 2,
}


def build(smoke: bool, device: str) -> tuple[Any, Path]:
    """The model (random weights, on ``device``) and a folder holding its processor."""
    import torch
    import transformers
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import (
        Qwen2VLImageProcessorPil,
    )

    import tiny_vlms

    tokenizer = tiny_vlms.qwen_tokenizer()
    pad, eos = tiny_vlms.ids(tokenizer, "<|endoftext|>", "<|im_end|>")
    if smoke:
        _, _, _, text, vision = tiny_vlms.qwen_version("2.5", 14)
        text = {**tiny_vlms.TEXT, "vocab_size": len(tokenizer), **text}
        vision = {**vision, "out_hidden_size": tiny_vlms.TEXT["hidden_size"]}
    else:
        text, vision = QWEN25_VL_7B_TEXT, QWEN25_VL_7B_VISION
    config = transformers.Qwen2_5_VLConfig(
        text_config={**text, "pad_token_id": pad, "eos_token_id": eos, "bos_token_id": pad},
        vision_config=vision,
        **tiny_vlms.qwen_tokens(tokenizer),
    )
    dtype = torch.float32 if smoke else torch.bfloat16
    torch.manual_seed(0)
    started = time.perf_counter()
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.device(device):  # initialised where it runs: no host copy of 15 GB
            model = transformers.Qwen2_5_VLForConditionalGeneration(config)
    finally:
        torch.set_default_dtype(previous)
    model.generation_config.eos_token_id = [eos, pad]
    model.generation_config.pad_token_id = pad
    print(f"built {type(model).__name__} in {time.perf_counter() - started:.1f} s", flush=True)
    folder = Path(tempfile.mkdtemp(prefix="gpu-hf-local-"))
    tokenizer.save_pretrained(folder)
    # The real processor's pixel budget (a 480x480 slice becomes 476x476); the smoke run
    # shrinks a slice to 4x4 merged patches, as the tests do.
    pixels = {"min_pixels": 28 * 28, "max_pixels": 112 * 112} if smoke else {}
    Qwen2VLImageProcessorPil(patch_size=14, **pixels).save_pretrained(folder)
    (folder / "chat_template.jinja").write_text(tiny_vlms.QWEN_CHAT)
    (folder / "processor_config.json").write_text('{"processor_class": "Qwen2_5_VLProcessor"}')
    (folder / "config.json").write_text(config.to_json_string())
    return model, folder


def adapter_for(model: Any, folder: Path, device: str, batch: int, new_tokens: int) -> Any:
    """The hf_local adapter with its real settings and load path, the weights from memory."""
    from novabench.models.hf_local import Adapter, load_processor

    class Prebuilt(Adapter):
        def _load_checkpoint(self, source: str, hub: dict, options: dict) -> None:
            self.processor = load_processor(source, **hub)
            self.model = model

    return Prebuilt(
        "qwen2.5-vl-7b-random",
        {
            "model": str(folder),
            "device": device,
            "dtype": "float32" if device == "cpu" else "bfloat16",
            "batch_size": batch,
            "max_new_tokens": new_tokens,
            "temperature": 0,
            "generate_kwargs": {"min_new_tokens": new_tokens},
        },
    )


def samples(n: int) -> list[Any]:
    """``n`` captioning requests on seeded noise slices of 480x480 (the answer's content
    does not matter to the speed; the prompt and the image size do)."""
    import numpy as np
    from PIL import Image

    from novabench.models.base import Sample

    prompt = (ROOT / "config" / "prompts" / "captioning-v1.txt").read_text()
    prompt = prompt.format(width=480, height=480)
    rng = np.random.default_rng(0)
    out = []
    for i in range(n):
        buffer = io.BytesIO()
        pixels = rng.integers(0, 256, (480, 480), dtype=np.uint8)
        Image.fromarray(pixels, mode="L").save(buffer, format="PNG")
        name = f"case{i:04d}_001.png"
        out.append(Sample(name, name[:8], "captioning", prompt, buffer.getvalue(), 480, 480))
    return out


def timed(adapter: Any, batch_samples: list[Any], device: str) -> tuple[float, list[Any]]:
    import torch

    if device != "cpu":
        torch.cuda.synchronize()
    started = time.perf_counter()
    responses = list(adapter.predict(batch_samples))
    if device != "cpu":
        torch.cuda.synchronize()
    return time.perf_counter() - started, responses


def decode_bytes(model: Any) -> int:
    """Bytes of the weights one decoding step reads: the language model and its head (the
    vision tower runs in the prefill only)."""
    vision = sum(p.numel() * p.element_size() for p in model.model.visual.parameters())
    every = sum(p.numel() * p.element_size() for p in model.parameters())
    return every - vision


def gpu_name() -> str:
    import torch

    return torch.cuda.get_device_name()


def bandwidth(device: str, given_tb_s: float | None) -> tuple[float | None, str]:
    if given_tb_s:
        return given_tb_s * 1e12, f"{given_tb_s:g} TB/s (given)"
    if device == "cpu":
        return None, "-"

    name = gpu_name()
    for word, value in HBM_BYTES_PER_S.items():
        if word in name:
            return value, f"{value / 1e12:g} TB/s ({word}'s datasheet)"
    return None, f"unknown for {name}: give --hbm-tb-s"


def run(args: argparse.Namespace) -> str:
    import torch

    device = "cpu" if args.smoke else "cuda"
    if device == "cuda" and not torch.cuda.is_available():
        sys.exit("no CUDA GPU: run on a GPU node, or --smoke for the tiny CPU check")
    images = samples(args.images)
    model, folder = build(args.smoke, device)
    try:
        return measure(args, device, images, model, folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


# The columns of the table, one row per batch size.
COLUMNS = [
    "batch",
    "images/s",
    "generated tokens/s",
    "decode tokens/s",
    "bandwidth bound tokens/s",
    "of bound",
    "peak GPU GiB",
    "prompt tokens",
    "wall s",
]


def measure(args: argparse.Namespace, device: str, images: list, model: Any, folder: Path) -> str:
    import torch

    weights = decode_bytes(model)
    hbm, hbm_text = bandwidth(device, args.hbm_tb_s)
    rows = []
    for batch in args.batch_sizes:
        rows.append(measure_batch(args, device, images, model, folder, batch, weights, hbm))
        print(" | ".join(rows[-1]), flush=True)
    if args.smoke:
        name = "tiny Qwen2.5-VL config (smoke, CPU, float32)"
    else:
        name = f"Qwen2.5-VL-7B from its config, random weights, bfloat16, {gpu_name()}"
    lines = [
        f"# hf_local on {device}: {name}",
        "",
        f"{len(images)} captioning images of 480x480, {args.new_tokens} new tokens each; "
        f"decode reads {weights / 2**30:.2f} GiB of weights per step; HBM {hbm_text}; "
        f"torch {torch.__version__}.",
        "",
        "| " + " | ".join(COLUMNS) + " |",
        "| " + " | ".join("---:" for _ in COLUMNS) + " |",
        *("| " + " | ".join(row) + " |" for row in rows),
    ]
    return "\n".join(lines) + "\n"


def measure_batch(
    args: argparse.Namespace,
    device: str,
    images: list,
    model: Any,
    folder: Path,
    batch: int,
    weights: int,
    hbm: float | None,
) -> list[str]:
    """One batch size's row of the table (COLUMNS)."""
    import torch

    # A first batch loads the processor and warms the kernels, outside the timing.
    timed(adapter_for(model, folder, device, batch, 2), images[:batch], device)
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    full, responses = timed(
        adapter_for(model, folder, device, batch, args.new_tokens), images, device
    )
    peak = torch.cuda.max_memory_allocated() / 2**30 if device == "cuda" else None
    prefill, _ = timed(adapter_for(model, folder, device, batch, 1), images, device)
    generated = sum(r.usage["completion_tokens"] for r in responses)
    prompt = sum(r.usage["prompt_tokens"] for r in responses) / len(responses)
    steps = (args.new_tokens - 1) * len(images)
    decode_rate = steps / (full - prefill) if full > prefill else float("nan")
    bound = None if hbm is None else batch * hbm / weights
    return [
        str(batch),
        f"{len(images) / full:.2f}",
        f"{generated / full:.1f}",
        f"{decode_rate:.1f}",
        "-" if bound is None else f"{bound:.0f}",
        "-" if bound is None else f"{decode_rate / bound:.0%}",
        "-" if peak is None else f"{peak:.1f}",
        f"{prompt:.0f}",
        f"{full:.1f}",
    ]


def tiny_tests() -> int:
    """The tiny-family hf_local tests with their models on the GPU."""
    env = {**os.environ, "NOVA_HF_TEST_DEVICE": "cuda"}
    tests = ["tests/models/test_hf_local.py", "tests/models/test_hf_families.py"]
    command = [sys.executable, "-m", "pytest", *tests, "-q", "-p", "no:cacheprovider"]
    return subprocess.call(command, cwd=ROOT, env=env)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="tiny config on the CPU")
    parser.add_argument("--tiny-tests", action="store_true", help="the hf_local tests on CUDA")
    parser.add_argument("--new-tokens", type=int, default=None, help="64; 8 with --smoke")
    parser.add_argument("--images", type=int, default=None, help="64; 16 with --smoke")
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=list(BATCH_SIZES))
    parser.add_argument("--hbm-tb-s", type=float, help="the GPU's memory bandwidth, TB/s")
    parser.add_argument("--out", type=Path, default=ROOT / "results" / "benchmarks")
    args = parser.parse_args(argv)
    if args.tiny_tests:
        sys.exit(tiny_tests())
    if args.new_tokens is None:
        args.new_tokens = 8 if args.smoke else 64
    if args.images is None:
        args.images = 16 if args.smoke else IMAGES
    table = run(args)
    print(table)
    args.out.mkdir(parents=True, exist_ok=True)
    name = "gpu_hf_local_smoke.md" if args.smoke else "gpu_hf_local.md"
    (args.out / name).write_text(table)
    print(f"written to {args.out / name}")


if __name__ == "__main__":
    main()
