"""The vision-language model families the ``hf_local`` adapter knows, by ``model_type``.

A checkpoint's ``config.json`` names its ``transformers`` architecture (``model_type``); that
decides the family, and the family decides what the adapter cannot learn from the
checkpoint itself:

- ``box_format``: the box convention the family was trained to answer in (its grounding
  data), used when the model's config declares no ``box_format``. Families trained without
  a box convention answer in whatever the prompt asks; for them the default is
  ``pixel_xyxy``, the convention the default localization prompt asks for.
- ``prompt``: ``chat`` (the processor's chat template builds the prompt) or ``plain`` (the
  family has no chat template; the processor takes the question as it is and adds the
  image tokens itself: PaliGemma).
- ``text_only``: whether the processor takes a prompt without an image (the diagnosis task).
- ``needs``: modules its processor imports beyond the pipeline's environment.
- ``refused``: why the adapter cannot run the family at all, and what to use instead.

A ``model_type`` missing here still runs when ``transformers`` serves it as
image-text-to-text with a chat template; its model must then declare ``box_format``.
Every entry is exercised on a tiny random checkpoint of its own architecture in
tests/models/test_hf_families.py, except the MoE variants (the processor and convention of their
dense family), ``pixtral`` (the Mistral 3 processor) and ``florence2`` (refused unloaded).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

SERVE_ELSEWHERE = "serve it with vLLM and use adapter openai_compatible"


@dataclass(frozen=True)
class Family:
    """What the hf_local adapter knows about one family of checkpoints."""

    title: str
    box_format: str
    prompt: str = "chat"  # "chat" | "plain"
    text_only: bool = True
    needs: tuple[str, ...] = ()
    refused: str | None = None


_PIXTRAL = Family(
    "Mistral 3 / Pixtral",
    "pixel_xyxy",
    # transformers 5.24's Pixtral processor imports torchvision even for PIL images.
    needs=("torchvision",),
)

FAMILIES: dict[str, Family] = {
    # Qwen2-VL writes <|box_start|>(x1,y1),(x2,y2)<|box_end|> in 0-1000.
    "qwen2_vl": Family("Qwen2-VL", "xyxy_1000"),
    # Qwen2.5-VL writes bbox_2d in pixels of the frame its processor resized the image to.
    "qwen2_5_vl": Family("Qwen2.5-VL", "qwen25_bbox_2d"),
    # Qwen3-VL went back to 0-1000 (JSON bbox_2d).
    "qwen3_vl": Family("Qwen3-VL", "xyxy_1000"),
    "qwen3_vl_moe": Family("Qwen3-VL (MoE)", "xyxy_1000"),
    # Qwen3.5: Qwen3-VL's vision stack and processor, so its convention.
    "qwen3_5": Family("Qwen3.5", "xyxy_1000"),
    "qwen3_5_moe": Family("Qwen3.5 (MoE)", "xyxy_1000"),
    # LLaVA's grounding data (RefCOCO, Visual Genome) writes [x1, y1, x2, y2] in 0-1.
    "llava": Family("LLaVA-1.5", "xyxy_01"),
    "llava_next": Family("LLaVA-NeXT", "xyxy_01"),
    "llava_onevision": Family("LLaVA-OneVision", "xyxy_01"),
    "idefics3": Family("Idefics3", "pixel_xyxy"),
    "smolvlm": Family("SmolVLM", "pixel_xyxy"),
    "gemma3": Family("Gemma 3 / MedGemma", "pixel_xyxy"),
    "gemma4": Family("Gemma 4", "pixel_xyxy"),
    # PaliGemma: "<loc..>" x4 (ymin, xmin, ymax, xmax in 1024 bins) and a label; no chat
    # template, and its processor refuses a prompt without an image.
    "paligemma": Family("PaliGemma", "paligemma_loc", prompt="plain", text_only=False),
    # InternVL: <ref>label</ref><box>[[x1, y1, x2, y2]]</box> in 0-1000.
    "internvl": Family("InternVL", "xyxy_1000"),
    "mistral3": _PIXTRAL,
    "pixtral": _PIXTRAL,  # model_type llava with a Pixtral vision tower (Pixtral-12B)
    "mllama": Family("Llama 3.2 Vision", "pixel_xyxy"),
    "aya_vision": Family("Aya Vision", "pixel_xyxy"),
    # GLM-4.1V / 4.5V: <|begin_of_box|>[x1, y1, x2, y2]<|end_of_box|> in 0-1000.
    "glm4v": Family("GLM-4.1V", "xyxy_1000"),
    "glm4v_moe": Family("GLM-4.5V", "xyxy_1000"),
    "florence2": Family(
        "Florence-2",
        "pixel_xyxy",
        refused="Florence-2 answers fixed task tokens (<OD>, <MORE_DETAILED_CAPTION>), not "
        "questions, so it cannot follow the benchmark's prompts",
    ),
}


def family_key(checkpoint: Mapping[str, Any]) -> str | None:
    """The ``FAMILIES`` key of a checkpoint's ``config.json``: its ``model_type``, except
    that a ``llava`` checkpoint with a Pixtral vision tower is ``pixtral``."""
    model_type = checkpoint.get("model_type")
    vision = checkpoint.get("vision_config") or {}
    if model_type == "llava" and vision.get("model_type") == "pixtral":
        return "pixtral"
    return model_type


def family_of(checkpoint: Mapping[str, Any]) -> Family | None:
    """The family of a checkpoint's ``config.json``, None for one not in ``FAMILIES``."""
    return FAMILIES.get(family_key(checkpoint) or "")


def family_problem(
    family: Family, *, image_free_tasks: list[str], system_prompt: bool
) -> tuple[str, str] | None:
    """Why the adapter cannot run this family as configured, and the fix; None if it can.

    ``image_free_tasks`` are the model's tasks that send no image; ``system_prompt`` says
    whether the model's settings set one.
    """
    if family.refused:
        return family.refused, f"{SERVE_ELSEWHERE}, or use another model"
    missing = [module for module in family.needs if importlib.util.find_spec(module) is None]
    if missing:
        return (
            f"transformers' {family.title} processor needs {', '.join(missing)}, which the "
            "pipeline's environment leaves out",
            SERVE_ELSEWHERE,
        )
    if image_free_tasks and not family.text_only:
        tasks = ", ".join(image_free_tasks)
        return (
            f"{family.title} answers only about an image, and {tasks} sends none",
            f"remove {tasks} from the model's tasks",
        )
    if system_prompt and family.prompt == "plain":
        return f"{family.title} has no chat template, so no system prompt", "remove system_prompt"
    return None
