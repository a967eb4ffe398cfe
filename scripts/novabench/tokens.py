"""How many tokens a request costs, estimated before it is sent.

Text: about 4 characters per token (OpenAI's rule of thumb for English; no tokenizer is
needed offline, and the providers' tokenizers differ anyway). Images: each provider's or
model family's published rule, by image size (``IMAGE_RULES``); the numbers for a 480x480
NOVA slice are in config/models/README.md. The estimate prefers measured usage (the
``prompt_tokens`` and ``completion_tokens`` of earlier answers) whenever there is some.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from novabench.answer_formats import smart_resize

CHARS_PER_TOKEN = 4.0


def dollars(
    input_tokens: float, output_tokens: float, price_in: float | None, price_out: float | None
) -> float | None:
    """US dollars at list prices per million input and output tokens (what a request cost,
    what a run will cost); None unless both prices are known."""
    if price_in is None or price_out is None:
        return None
    return (input_tokens * price_in + output_tokens * price_out) / 1e6


def text_tokens(text: str) -> int:
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def _fit(width: float, height: float, longest: float, shortest: float) -> tuple[float, float]:
    """Scaled down (never up) to fit ``longest`` and then to a shortest side of ``shortest``."""
    scale = min(1.0, longest / max(width, height))
    width, height = width * scale, height * scale
    scale = min(1.0, shortest / min(width, height))
    return width * scale, height * scale


def openai_tiles(base: int, per_tile: int) -> Callable[[int, int], int]:
    """OpenAI's high-detail rule (GPT-4o, GPT-4.1, GPT-5): fit in 2048x2048, shortest side
    at most 768, then ``base`` + ``per_tile`` per 512-px tile. 480x480: one tile."""

    def rule(width: int, height: int) -> int:
        w, h = _fit(width, height, 2048, 768)
        return base + per_tile * math.ceil(w / 512) * math.ceil(h / 512)

    return rule


def openai_patches(multiplier: float) -> Callable[[int, int], int]:
    """OpenAI's patch rule (GPT-4.1 mini/nano, GPT-5 mini): 32-px patches, at most 1536,
    times a per-model multiplier. 480x480: 225 patches."""

    def rule(width: int, height: int) -> int:
        patches = math.ceil(width / 32) * math.ceil(height / 32)
        return math.ceil(min(patches, 1536) * multiplier)

    return rule


def gemini(width: int, height: int) -> int:
    """Gemini 2.x: 258 tokens for an image within 384x384, else 258 per 768x768 tile."""
    if width <= 384 and height <= 384:
        return 258
    return 258 * math.ceil(width / 768) * math.ceil(height / 768)


def claude(width: int, height: int) -> int:
    """Anthropic: width x height / 750 (images up to 1.15 megapixels are not resized)."""
    return math.ceil(width * height / 750)


def qwen(factor: int, min_pixels: int, max_pixels: int) -> Callable[[int, int], int]:
    """Qwen-VL: one token per ``factor`` x ``factor`` pixels of the processor-resized frame
    (``smart_resize``), plus the vision start and end tokens."""

    def rule(width: int, height: int) -> int:
        h, w = smart_resize(height, width, factor, min_pixels, max_pixels)
        return (h // factor) * (w // factor) + 2

    return rule


def patches_with_row_breaks(patch: int) -> Callable[[int, int], int]:
    """Pixtral and Mistral Small 3.1: one token per ``patch``-pixel square and one break token
    per row (16 px for Pixtral, 28 px = 14-px patches merged 2x2 for Mistral Small 3.1)."""

    def rule(width: int, height: int) -> int:
        return math.ceil(height / patch) * (math.ceil(width / patch) + 1)

    return rule


IMAGE_RULES: dict[str, Callable[[int, int], int]] = {
    "openai_tiles": openai_tiles(85, 170),  # GPT-4o, GPT-4.1
    "openai_tiles_4o_mini": openai_tiles(2833, 5667),  # GPT-4o mini
    "openai_tiles_gpt5": openai_tiles(70, 140),  # GPT-5
    "openai_patches_mini": openai_patches(1.62),  # GPT-4.1 mini, GPT-5 mini
    "openai_patches_nano": openai_patches(2.46),  # GPT-4.1 nano
    "gemini": gemini,
    "claude": claude,
    "qwen2_vl": qwen(28, 56 * 56, 28 * 28 * 1280),  # Qwen2-VL, Qwen2.5-VL
    "qwen3_vl": qwen(32, 256 * 256, 4096 * 4096),  # Qwen3-VL: 16-px patches merged 2x2
    "pixtral16": patches_with_row_breaks(16),
    "mistral28": patches_with_row_breaks(28),
}


def image_tokens(rule: str | int, width: int, height: int) -> int:
    """Tokens of one ``width`` x ``height`` image by ``rule`` (a fixed count or a name)."""
    if isinstance(rule, int):
        return rule
    return IMAGE_RULES[rule](width, height)
