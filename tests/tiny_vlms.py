"""Tiny, randomly initialised checkpoints of every vision-language family hf_local serves.

Nothing is downloaded. Each builder writes to a folder what ``save_pretrained`` writes for
a real checkpoint of that family: a byte-level tokenizer with the family's special tokens,
the family's chat template (its structure: turn markers and where the image goes), the
family's own processor and image processor configured small, and a two-layer model of the
real architecture with random weights. Images are shrunk to a few patches so that a run of
all three tasks takes a second or two per family on a CPU.

``FAMILIES`` maps a name to a :class:`Tiny`: its builder and the answer a trained model of
that family would write for :data:`BOX`, in the family's own box convention.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import transformers
from tokenizers import Tokenizer, decoders, models, pre_tokenizers

#: Where the tiny-family tests run their models: ``cpu`` here and in CI;
#: ``NOVA_HF_TEST_DEVICE=cuda`` runs them on a GPU (scripts/benchmarks/gpu_hf_local.py
#: --tiny-tests does).
DEVICE = os.environ.get("NOVA_HF_TEST_DEVICE", "cpu")

#: The box every family's scripted answer describes, in pixels of a 480x480 slice:
#: x 120..240, y 60..180 (x, y, width, height).
BOX = (120.0, 60.0, 120.0, 120.0)
#: The same box as 0-1000 corners [x1, y1, x2, y2]: 120/480 = 0.25, 60/480 = 0.125, ...
BOX_1000 = "[250, 125, 500, 375]"

# Small text and vision towers; the large initializer makes answers depend on the input.
WIDTH = {"hidden_size": 32, "intermediate_size": 64, "initializer_range": 0.5}
HEADS = {"num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 8}
TEXT = {**WIDTH, **HEADS, "num_hidden_layers": 2, "max_position_embeddings": 4096}
ROPE = {"rope_type": "default", "rope_theta": 10000.0}


def byte_tokenizer(
    specials: list[str], *, eos: str, pad: str, bos: str | None = None, **extra: str
) -> Any:
    """Bytes as tokens plus the family's special tokens; ``extra`` names special tokens the
    family's processor reads as tokenizer attributes (e.g. ``image_token``)."""
    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    backend = Tokenizer(models.BPE(vocab={c: i for i, c in enumerate(alphabet)}, merges=[]))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    backend.decoder = decoders.ByteLevel()
    backend.add_special_tokens(specials)
    return transformers.PreTrainedTokenizerFast(
        tokenizer_object=backend,
        eos_token=eos,
        pad_token=pad,
        bos_token=bos,
        extra_special_tokens=extra or None,
    )


def chat_template(
    *, user: str, end: str, image: str, assistant: str, system: str | None = None,
    system_end: str | None = None,
) -> str:  # fmt: skip
    """A chat template of the shape all these families share: per turn a prefix, the
    images and texts of the turn, and ``end``; then the assistant's prefix.

    ``user`` and ``system`` are turn prefixes (``system_end`` closes a system turn, default
    ``end``); without ``system`` the system text opens the first user turn (as Gemma's and
    LLaVA's templates do).
    """
    contents = (
        "{% for c in m['content'] %}{% if c['type'] == 'image' %}" + image + "{% else %}"
        "{{ c['text'] }}{% endif %}{% endfor %}"
    )
    if system is None:
        system_turn = "{% set ns.system = m['content'][0]['text'] + '\n\n' %}"
    else:
        system_turn = system + contents + (end if system_end is None else system_end)
    return (
        "{% set ns = namespace(system='') %}{% for m in messages %}"
        "{% if m['role'] == 'system' %}" + system_turn + "{% else %}" + user + "{{ ns.system }}"
        "{% set ns.system = '' %}" + contents + end + "{% endif %}{% endfor %}"
        "{% if add_generation_prompt %}" + assistant + "{% endif %}"
    )


def save(
    folder: Path,
    model: Any,
    tokenizer: Any,
    image_processor: Any,
    template: str,
    eos: list[int],
    **processor: Any,
) -> None:
    """Write a checkpoint as the Hub holds one: weights and config, generation config (its
    stop tokens), tokenizer, ``preprocessor_config.json``, ``chat_template.jinja`` and
    ``processor_config.json`` (``processor``: its class and init arguments)."""
    model.generation_config.eos_token_id = eos
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    image_processor.save_pretrained(folder)
    (folder / "chat_template.jinja").write_text(template)
    (folder / "processor_config.json").write_text(json.dumps(processor))


def ids(tokenizer: Any, *tokens: str) -> list[int]:
    return tokenizer.convert_tokens_to_ids(list(tokens))


# -- Qwen ------------------------------------------------------------------------------

QWEN_SPECIAL = [
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|image_pad|>",
    "<|video_pad|>",
    "<|box_start|>",
    "<|box_end|>",
    "<|object_ref_start|>",
    "<|object_ref_end|>",
]
QWEN_CHAT = chat_template(
    user="<|im_start|>user\n",
    system="<|im_start|>system\n",
    end="<|im_end|>\n",
    image="<|vision_start|><|image_pad|><|vision_end|>",
    assistant="<|im_start|>assistant\n",
)


def qwen_tokenizer() -> Any:
    return byte_tokenizer(QWEN_SPECIAL, eos="<|im_end|>", pad="<|endoftext|>")


def qwen_tokens(tokenizer: Any) -> dict[str, int]:
    image, video, start, end = ids(
        tokenizer, "<|image_pad|>", "<|video_pad|>", "<|vision_start|>", "<|vision_end|>"
    )
    return {
        "image_token_id": image,
        "video_token_id": video,
        "vision_start_token_id": start,
        "vision_end_token_id": end,
    }


def qwen_vision(patch: int) -> dict[str, Any]:
    return {
        "depth": 2,
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_heads": 2,
        "out_hidden_size": 32,
        "patch_size": patch,
        "spatial_merge_size": 2,
        "temporal_patch_size": 2,
        "initializer_range": 0.5,
    }


def qwen_version(version: str, patch: int) -> tuple[str, str, str, dict, dict]:
    """Config, model and processor class names of a Qwen version, and what its text and
    vision configs add to the shared tiny sizes."""
    mrope = {**ROPE, "mrope_section": [1, 1, 2]}
    interleaved = {**mrope, "mrope_interleaved": True}
    vision = qwen_vision(patch)
    qwen2_vision = {"depth": 2, "embed_dim": 32, "hidden_size": 32, "mlp_ratio": 2,
                    "num_heads": 2, "patch_size": patch, "spatial_merge_size": 2,
                    "temporal_patch_size": 2, "initializer_range": 0.5}  # fmt: skip
    linear_attention = {"layer_types": ["linear_attention", "full_attention"],
                        "linear_key_head_dim": 8, "linear_value_head_dim": 8,
                        "linear_num_key_heads": 2, "linear_num_value_heads": 4}  # fmt: skip
    return {
        "2": ("Qwen2VLConfig", "Qwen2VLForConditionalGeneration", "Qwen2VLProcessor",
              {"rope_parameters": mrope}, qwen2_vision),
        "2.5": ("Qwen2_5_VLConfig", "Qwen2_5_VLForConditionalGeneration", "Qwen2_5_VLProcessor",
                {"rope_parameters": mrope},
                {**vision, "window_size": 56, "fullatt_block_indexes": [1]}),
        "3": ("Qwen3VLConfig", "Qwen3VLForConditionalGeneration", "Qwen3VLProcessor",
              {"rope_parameters": interleaved},
              {**vision, "num_position_embeddings": 64, "deepstack_visual_indexes": [1]}),
        "3.5": ("Qwen3_5Config", "Qwen3_5ForConditionalGeneration", "Qwen3VLProcessor",
                {"rope_parameters": {**interleaved, "partial_rotary_factor": 1.0},
                 **linear_attention},
                {**vision, "num_position_embeddings": 64}),
    }[version]  # fmt: skip


def build_qwen(folder: Path, version: str, pixels: tuple[int, int] | None = None) -> None:
    """Qwen2-VL (``"2"``), Qwen2.5-VL (``"2.5"``), Qwen3-VL (``"3"``) or Qwen3.5 (``"3.5"``,
    its hybrid linear/full attention language model); ``pixels`` is the image processor's
    (min_pixels, max_pixels), by default a budget that makes a 480x480 slice 4x4 merged
    patches: 112x112 with Qwen2/2.5's patches of 14, 128x128 with Qwen3's of 16."""
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import (
        Qwen2VLImageProcessorPil,
    )

    tokenizer = qwen_tokenizer()
    pad, eos = ids(tokenizer, "<|endoftext|>", "<|im_end|>")
    patch = 16 if version.startswith("3") else 14
    config_class, model_class, processor_class, text, vision = qwen_version(version, patch)
    config = getattr(transformers, config_class)(
        text_config={**TEXT, "vocab_size": len(tokenizer), "pad_token_id": pad,
                     "eos_token_id": eos, "bos_token_id": pad, **text},
        vision_config=vision,
        **qwen_tokens(tokenizer),
    )  # fmt: skip
    side = 4 * 2 * patch
    low, high = pixels or ((2 * patch) ** 2, side * side)
    torch.manual_seed(0)
    model = getattr(transformers, model_class)(config)
    image_processor = Qwen2VLImageProcessorPil(patch_size=patch, min_pixels=low, max_pixels=high)
    save(folder, model, tokenizer, image_processor, QWEN_CHAT, [eos, pad],
         processor_class=processor_class)  # fmt: skip


# -- LLaVA -----------------------------------------------------------------------------

LLAVA_SPECIAL = ["<s>", "</s>", "<unk>", "<image>", "<video>"]


def clip_vision(image_size: int = 28) -> dict[str, Any]:
    return {
        "model_type": "clip_vision_model",
        **WIDTH,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "image_size": image_size,
        "patch_size": 14,
        "projection_dim": 32,
    }


def siglip_vision(image_size: int = 28, patch: int = 14) -> dict[str, Any]:
    return {
        "model_type": "siglip_vision_model",
        **WIDTH,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "image_size": image_size,
        "patch_size": patch,
    }


def llama_text(tokenizer: Any, **extra: Any) -> dict[str, Any]:
    bos, eos, pad = ids(tokenizer, tokenizer.bos_token, tokenizer.eos_token, tokenizer.pad_token)
    return {
        "model_type": "llama",
        **TEXT,
        "vocab_size": len(tokenizer),
        "bos_token_id": bos,
        "eos_token_id": eos,
        "pad_token_id": pad,
        **extra,
    }


def build_llava(folder: Path) -> None:
    """LLaVA-1.5: CLIP tower at 28 px, patches of 14: 2x2 image tokens (CLS dropped)."""
    from transformers.models.clip.image_processing_pil_clip import CLIPImageProcessorPil

    tokenizer = byte_tokenizer(LLAVA_SPECIAL, eos="</s>", pad="<unk>", bos="<s>")
    template = chat_template(user="USER: ", end=" ", image="<image>\n", assistant="ASSISTANT:")
    config = transformers.LlavaConfig(
        vision_config=clip_vision(),
        text_config=llama_text(tokenizer),
        image_token_id=ids(tokenizer, "<image>")[0],
        vision_feature_select_strategy="default",
        vision_feature_layer=-1,
    )
    torch.manual_seed(0)
    model = transformers.LlavaForConditionalGeneration(config)
    image_processor = CLIPImageProcessorPil(
        size={"shortest_edge": 28}, crop_size={"height": 28, "width": 28}
    )
    save(folder, model, tokenizer, image_processor, "{{ bos_token }}" + template,
         ids(tokenizer, "</s>"), processor_class="LlavaProcessor", patch_size=14,
         vision_feature_select_strategy="default", num_additional_image_tokens=1)  # fmt: skip


# Tiles the anyres families choose from: the 28x28 base image plus up to 2x2 tiles of 28.
PINPOINTS = [[28, 28], [28, 56], [56, 28], [56, 56]]


def build_llava_next(folder: Path) -> None:
    """LLaVA-NeXT (llava-v1.6-mistral): anyres tiling over 28 px tiles."""
    from transformers.models.llava_next.image_processing_pil_llava_next import (
        LlavaNextImageProcessorPil,
    )

    tokenizer = byte_tokenizer(LLAVA_SPECIAL, eos="</s>", pad="<unk>", bos="<s>")
    template = chat_template(user="[INST] ", end=" [/INST]", image="<image>\n", assistant="")
    config = transformers.LlavaNextConfig(
        vision_config=clip_vision(),
        text_config=llama_text(tokenizer, model_type="mistral"),
        image_token_id=ids(tokenizer, "<image>")[0],
        image_grid_pinpoints=PINPOINTS,
        vision_feature_select_strategy="default",
        vision_feature_layer=-1,
    )
    torch.manual_seed(0)
    model = transformers.LlavaNextForConditionalGeneration(config)
    image_processor = LlavaNextImageProcessorPil(
        size={"shortest_edge": 28},
        crop_size={"height": 28, "width": 28},
        image_grid_pinpoints=PINPOINTS,
    )
    save(folder, model, tokenizer, image_processor, "{{ bos_token }}" + template,
         ids(tokenizer, "</s>"), processor_class="LlavaNextProcessor", patch_size=14,
         vision_feature_select_strategy="default", num_additional_image_tokens=1)  # fmt: skip


def build_llava_onevision(folder: Path) -> None:
    """LLaVA-OneVision (Qwen2 language model, SigLIP tower): anyres_max tiling."""
    from transformers.models.llava_onevision.image_processing_pil_llava_onevision import (
        LlavaOnevisionImageProcessorPil,
    )

    tokenizer = byte_tokenizer(
        ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<image>", "<video>"],
        eos="<|im_end|>",
        pad="<|endoftext|>",
    )
    template = chat_template(
        user="<|im_start|>user ",
        system="<|im_start|>system\n",
        end="<|im_end|>\n",
        image="<image>\n",
        assistant="<|im_start|>assistant\n",
    )
    pad, eos = ids(tokenizer, "<|endoftext|>", "<|im_end|>")
    config = transformers.LlavaOnevisionConfig(
        vision_config=siglip_vision(),
        text_config={
            "model_type": "qwen2",
            **TEXT,
            "vocab_size": len(tokenizer),
            "eos_token_id": eos,
            "pad_token_id": pad,
        },
        image_token_id=ids(tokenizer, "<image>")[0],
        video_token_id=ids(tokenizer, "<video>")[0],
        image_grid_pinpoints=PINPOINTS,
        vision_feature_select_strategy="full",
        vision_feature_layer=-1,
    )
    torch.manual_seed(0)
    model = transformers.LlavaOnevisionForConditionalGeneration(config)
    image_processor = LlavaOnevisionImageProcessorPil(
        size={"height": 28, "width": 28}, image_grid_pinpoints=PINPOINTS
    )
    # num_image_tokens: (28 / 14) ** 2 per tile, SigLIP has no CLS token
    save(folder, model, tokenizer, image_processor, template, [eos],
         processor_class="LlavaOnevisionProcessor", num_image_tokens=4,
         vision_feature_select_strategy="full")  # fmt: skip


# -- Gemma ----------------------------------------------------------------------------

GEMMA_SPECIAL = [
    "<pad>",
    "<eos>",
    "<bos>",
    "<start_of_turn>",
    "<end_of_turn>",
    "<start_of_image>",
    "<end_of_image>",
    "<image_soft_token>",
]


def gemma_text(tokenizer: Any, model_type: str) -> dict[str, Any]:
    pad, eos, bos = ids(tokenizer, "<pad>", "<eos>", "<bos>")
    return {
        "model_type": model_type,
        **TEXT,
        "vocab_size": len(tokenizer),
        "query_pre_attn_scalar": 8,
        "sliding_window": 64,
        "pad_token_id": pad,
        "eos_token_id": eos,
        "bos_token_id": bos,
    }


def build_gemma3(folder: Path) -> None:
    """Gemma 3 (and MedGemma): SigLIP at 28 px pooled to 2x2 = 4 soft tokens per image."""
    from transformers.models.gemma3.image_processing_pil_gemma3 import Gemma3ImageProcessorPil

    tokenizer = byte_tokenizer(
        GEMMA_SPECIAL,
        eos="<eos>",
        pad="<pad>",
        bos="<bos>",
        boi_token="<start_of_image>",
        eoi_token="<end_of_image>",
        image_token="<image_soft_token>",
    )
    template = "{{ bos_token }}" + chat_template(
        user="<start_of_turn>user\n",
        end="<end_of_turn>\n",
        image="<start_of_image>",
        assistant="<start_of_turn>model\n",
    )
    boi, eoi, image = ids(tokenizer, "<start_of_image>", "<end_of_image>", "<image_soft_token>")
    config = transformers.Gemma3Config(
        text_config=gemma_text(tokenizer, "gemma3_text"),
        vision_config=siglip_vision(),
        mm_tokens_per_image=4,
        boi_token_index=boi,
        eoi_token_index=eoi,
        image_token_index=image,
    )
    torch.manual_seed(0)
    model = transformers.Gemma3ForConditionalGeneration(config)
    image_processor = Gemma3ImageProcessorPil(size={"height": 28, "width": 28})
    save(folder, model, tokenizer, image_processor, template,
         ids(tokenizer, "<eos>", "<end_of_turn>"), processor_class="Gemma3Processor",
         image_seq_length=4)  # fmt: skip


def gemma4_tokenizer() -> Any:
    # Its processor requires the audio tokens too (even without audio).
    return byte_tokenizer(
        [*GEMMA_SPECIAL, "<start_of_audio>", "<end_of_audio>", "<audio_soft_token>"],
        eos="<eos>",
        pad="<pad>",
        bos="<bos>",
        boi_token="<start_of_image>",
        eoi_token="<end_of_image>",
        image_token="<image_soft_token>",
        boa_token="<start_of_audio>",
        eoa_token="<end_of_audio>",
        audio_token="<audio_soft_token>",
    )


def gemma4_config(tokenizer: Any) -> Any:
    """Two text layers (one sliding, one full attention), a two-layer vision tower."""
    boi, eoi, image = ids(tokenizer, "<start_of_image>", "<end_of_image>", "<image_soft_token>")
    # The processor adds <|video|> to the vocabulary when it loads.
    text = {**gemma_text(tokenizer, "gemma4_text"), "vocab_size": len(tokenizer) + 1,
            "vocab_size_per_layer_input": len(tokenizer) + 1, "hidden_size_per_layer_input": 8,
            "layer_types": ["sliding_attention", "full_attention"],
            "global_head_dim": 8}  # fmt: skip
    vision = {**WIDTH, "num_hidden_layers": 2, "num_attention_heads": 4,
              "num_key_value_heads": 4, "head_dim": 8, "patch_size": 4,
              "pooling_kernel_size": 3, "position_embedding_size": 256}  # fmt: skip
    return transformers.Gemma4Config(
        text_config=text,
        vision_config=vision,
        audio_config=None,
        boi_token_id=boi,
        eoi_token_id=eoi,
        image_token_id=image,
    )


def build_gemma4(folder: Path) -> None:
    """Gemma 4 (no audio tower): 70 soft tokens per image, the fewest it supports, from
    patches of 4 px pooled 3x3."""
    from transformers.models.gemma4.feature_extraction_gemma4 import (
        Gemma4AudioFeatureExtractor,
    )
    from transformers.models.gemma4.image_processing_pil_gemma4 import Gemma4ImageProcessorPil

    tokenizer = gemma4_tokenizer()
    template = "{{ bos_token }}" + chat_template(
        user="<start_of_turn>user\n",
        end="<end_of_turn>\n",
        image="<image_soft_token>",  # Gemma 4 marks an image by its soft token
        assistant="<start_of_turn>model\n",
    )
    config = gemma4_config(tokenizer)
    torch.manual_seed(0)
    model = transformers.Gemma4ForConditionalGeneration(config)
    image_processor = Gemma4ImageProcessorPil(
        patch_size=4, max_soft_tokens=70, pooling_kernel_size=3
    )
    model.generation_config.eos_token_id = ids(tokenizer, "<eos>", "<end_of_turn>")
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    (folder / "chat_template.jinja").write_text(template)
    # Two sub-processors that both read preprocessor_config.json: nested, as 5.x saves them.
    processor = {
        "processor_class": "Gemma4Processor",
        "image_seq_length": 70,
        "image_processor": json.loads(image_processor.to_json_string()),
        "feature_extractor": json.loads(Gemma4AudioFeatureExtractor().to_json_string()),
    }
    (folder / "processor_config.json").write_text(json.dumps(processor))


def build_paligemma(folder: Path) -> None:
    """PaliGemma 2 (Gemma 2 language model): no chat template, 4 image tokens; its
    processor adds the 1024 ``<locNNNN>`` and 128 ``<segNNN>`` tokens to the vocabulary."""
    from transformers.models.siglip.image_processing_pil_siglip import SiglipImageProcessorPil

    tokenizer = byte_tokenizer(["<pad>", "<eos>", "<bos>", "<image>"], eos="<eos>", pad="<pad>",
                               bos="<bos>", image_token="<image>")  # fmt: skip
    image_processor = SiglipImageProcessorPil(size={"height": 28, "width": 28})
    image_processor.image_seq_length = 4
    # The processor's loc and seg tokens belong in the saved vocabulary, as on the Hub.
    processor = transformers.PaliGemmaProcessor(image_processor, tokenizer)
    config = transformers.PaliGemmaConfig(
        text_config=gemma_text(tokenizer, "gemma2"),
        vision_config={**siglip_vision(), "projection_dim": 32},
        image_token_index=processor.image_token_id,
        projection_dim=32,
        hidden_size=32,
    )
    torch.manual_seed(0)
    model = transformers.PaliGemmaForConditionalGeneration(config)
    model.generation_config.eos_token_id = ids(tokenizer, "<eos>")
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.save_pretrained(folder)
    processor.save_pretrained(folder)


# -- Idefics3 / SmolVLM ----------------------------------------------------------------

IDEFICS_SPECIAL = [
    "<|begin_of_text|>",
    "<|end_of_text|>",
    "<end_of_utterance>",
    "<fake_token_around_image>",
    "<image>",
    "<global-img>",
    *(f"<row_{i}_col_{j}>" for i in range(1, 7) for j in range(1, 7)),
]
IDEFICS_CHAT = "<|begin_of_text|>" + chat_template(
    user="User:",
    system="System: ",
    end="<end_of_utterance>\n",
    image="<image>",
    assistant="Assistant:",
)


def build_idefics3(folder: Path, smolvlm: bool = False) -> None:
    """Idefics3 / SmolVLM: a 480x480 slice becomes 2x2 crops of 28 px plus the whole
    image, each 2x2 patches of 14 shuffled into 1 token."""
    from transformers.models.idefics3.image_processing_pil_idefics3 import (
        Idefics3ImageProcessorPil,
    )

    tokenizer = byte_tokenizer(IDEFICS_SPECIAL, eos="<end_of_utterance>",
                               pad="<|end_of_text|>", bos="<|begin_of_text|>")  # fmt: skip
    vision = {**WIDTH, "num_hidden_layers": 2, "num_attention_heads": 4, "image_size": 28,
              "patch_size": 14}  # fmt: skip
    kind = "SmolVLM" if smolvlm else "Idefics3"
    config = getattr(transformers, f"{kind}Config")(
        text_config=llama_text(tokenizer),
        vision_config=vision,
        image_token_id=ids(tokenizer, "<image>")[0],
        scale_factor=2,
    )
    torch.manual_seed(0)
    model = getattr(transformers, f"{kind}ForConditionalGeneration")(config)
    image_processor = Idefics3ImageProcessorPil(
        size={"longest_edge": 56}, max_image_size={"longest_edge": 28}
    )
    save(folder, model, tokenizer, image_processor, IDEFICS_CHAT,
         ids(tokenizer, "<end_of_utterance>"), processor_class=f"{kind}Processor",
         image_seq_len=1)  # fmt: skip


# -- InternVL, Mistral 3, Llama 3.2 Vision, Aya Vision, GLM-4V --------------------------


def build_internvl(folder: Path) -> None:
    """InternVL 3 (the -hf checkpoints; Qwen2 language model): 2x2 tiles of 28 px plus a
    thumbnail, each 2x2 patches shuffled into 1 ``<IMG_CONTEXT>`` token."""
    from transformers.models.got_ocr2.image_processing_pil_got_ocr2 import (
        GotOcr2ImageProcessorPil,
    )

    tokenizer = byte_tokenizer(
        ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<img>", "</img>", "<IMG_CONTEXT>",
         "<video>", "<box>", "</box>", "<ref>", "</ref>"],
        eos="<|im_end|>",
        pad="<|endoftext|>",
        start_image_token="<img>",
        end_image_token="</img>",
        context_image_token="<IMG_CONTEXT>",
        video_token="<video>",
    )  # fmt: skip
    template = chat_template(
        user="<|im_start|>user\n",
        system="<|im_start|>system\n",
        end="<|im_end|>\n",
        image="<IMG_CONTEXT>\n",
        assistant="<|im_start|>assistant\n",
    )
    pad, eos = ids(tokenizer, "<|endoftext|>", "<|im_end|>")
    config = transformers.InternVLConfig(
        vision_config={**WIDTH, "num_hidden_layers": 2, "num_attention_heads": 4,
                       "image_size": [28, 28], "patch_size": [14, 14]},
        text_config={"model_type": "qwen2", **TEXT, "vocab_size": len(tokenizer),
                     "eos_token_id": eos, "pad_token_id": pad},
        image_token_id=ids(tokenizer, "<IMG_CONTEXT>")[0],
        image_seq_length=1,
        downsample_ratio=0.5,
    )  # fmt: skip
    torch.manual_seed(0)
    model = transformers.InternVLForConditionalGeneration(config)
    image_processor = GotOcr2ImageProcessorPil(
        size={"height": 28, "width": 28}, crop_to_patches=True, min_patches=1, max_patches=4
    )
    save(folder, model, tokenizer, image_processor, template, [eos],
         processor_class="InternVLProcessor", image_seq_length=1)  # fmt: skip


def build_mistral3(folder: Path) -> None:
    """Mistral Small 3.x (Pixtral tower): 56 px, 4x4 patches of 14 merged 2x2, so 2 rows
    of 2 ``[IMG]`` tokens, each row closed by ``[IMG_BREAK]``, the last by ``[IMG_END]``."""
    from transformers.models.pixtral.image_processing_pil_pixtral import (
        PixtralImageProcessorPil,
    )

    tokenizer = byte_tokenizer(
        ["<unk>", "<s>", "</s>", "[INST]", "[/INST]", "[IMG]", "[IMG_BREAK]", "[IMG_END]",
         "[SYSTEM_PROMPT]", "[/SYSTEM_PROMPT]"],
        eos="</s>",
        pad="<unk>",
        bos="<s>",
    )  # fmt: skip
    template = "{{ bos_token }}" + chat_template(
        user="[INST]",
        system="[SYSTEM_PROMPT]",
        system_end="[/SYSTEM_PROMPT]",
        end="[/INST]",
        image="[IMG]",
        assistant="",
    )
    config = transformers.Mistral3Config(
        vision_config={"model_type": "pixtral", **WIDTH, "num_hidden_layers": 2,
                       "num_attention_heads": 4, "head_dim": 8, "image_size": 56,
                       "patch_size": 14},
        text_config=llama_text(tokenizer, model_type="mistral"),
        image_token_index=ids(tokenizer, "[IMG]")[0],
        spatial_merge_size=2,
    )  # fmt: skip
    torch.manual_seed(0)
    model = transformers.Mistral3ForConditionalGeneration(config)
    image_processor = PixtralImageProcessorPil(
        size={"longest_edge": 56}, patch_size={"height": 14, "width": 14}
    )
    save(folder, model, tokenizer, image_processor, template, ids(tokenizer, "</s>"),
         processor_class="PixtralProcessor", patch_size=14, spatial_merge_size=2)  # fmt: skip


def build_mllama(folder: Path) -> None:
    """Llama 3.2 Vision: one ``<|image|>`` token per image, read through cross-attention;
    tiles of 28 px (up to 4 per image)."""
    from transformers.models.mllama.image_processing_pil_mllama import MllamaImageProcessorPil

    tokenizer = byte_tokenizer(
        ["<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>", "<|start_header_id|>",
         "<|end_header_id|>", "<|image|>", "<|python_tag|>", "<|finetune_right_pad_id|>"],
        eos="<|eot_id|>",
        pad="<|finetune_right_pad_id|>",
        bos="<|begin_of_text|>",
    )  # fmt: skip
    template = "{{ bos_token }}" + chat_template(
        user="<|start_header_id|>user<|end_header_id|>\n\n",
        system="<|start_header_id|>system<|end_header_id|>\n\n",
        end="<|eot_id|>",
        image="<|image|>",
        assistant="<|start_header_id|>assistant<|end_header_id|>\n\n",
    )
    config = transformers.MllamaConfig(
        vision_config={"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
                       "num_global_layers": 1, "attention_heads": 4, "image_size": 28,
                       "patch_size": 14, "max_num_tiles": 4, "intermediate_layers_indices": [0],
                       "vision_output_dim": 64, "initializer_range": 0.5},
        text_config={**llama_text(tokenizer, model_type="mllama_text_model"),
                     "cross_attention_layers": [1]},
        image_token_index=ids(tokenizer, "<|image|>")[0],
    )  # fmt: skip
    torch.manual_seed(0)
    model = transformers.MllamaForConditionalGeneration(config)
    image_processor = MllamaImageProcessorPil(size={"height": 28, "width": 28}, max_image_tiles=4)
    eos = ids(tokenizer, "<|eot_id|>", "<|end_of_text|>")
    save(folder, model, tokenizer, image_processor, template, eos,
         processor_class="MllamaProcessor")  # fmt: skip


def build_aya_vision(folder: Path) -> None:
    """Aya Vision (Cohere 2 language model, SigLIP tower): 2x2 tiles of 28 px plus a
    global view, each 2x2 patches shuffled into 1 token."""
    from transformers.models.got_ocr2.image_processing_pil_got_ocr2 import (
        GotOcr2ImageProcessorPil,
    )

    tokenizer = byte_tokenizer(
        ["<PAD>", "<BOS_TOKEN>", "<|END_OF_TURN_TOKEN|>", "<|START_OF_TURN_TOKEN|>",
         "<|USER_TOKEN|>", "<|CHATBOT_TOKEN|>", "<|SYSTEM_TOKEN|>", "<image>",
         "<|START_OF_IMG|>", "<|END_OF_IMG|>", "<|IMG_PATCH|>", "<|IMG_LINE_BREAK|>"],
        eos="<|END_OF_TURN_TOKEN|>",
        pad="<PAD>",
        bos="<BOS_TOKEN>",
    )  # fmt: skip
    template = "{{ bos_token }}" + chat_template(
        user="<|START_OF_TURN_TOKEN|><|USER_TOKEN|>",
        system="<|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|>",
        end="<|END_OF_TURN_TOKEN|>",
        image="<image>",
        assistant="<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>",
    )
    text = {**llama_text(tokenizer, model_type="cohere2"), "sliding_window": 64}
    config = transformers.AyaVisionConfig(
        vision_config=siglip_vision(),
        text_config=text,
        downsample_factor=2,
        image_token_index=ids(tokenizer, "<|IMG_PATCH|>")[0],
    )
    torch.manual_seed(0)
    model = transformers.AyaVisionForConditionalGeneration(config)
    image_processor = GotOcr2ImageProcessorPil(
        size={"height": 28, "width": 28}, crop_to_patches=True, min_patches=1, max_patches=4
    )
    save(folder, model, tokenizer, image_processor, template,
         ids(tokenizer, "<|END_OF_TURN_TOKEN|>"), processor_class="AyaVisionProcessor",
         patch_size=14, img_size=28, downsample_factor=2)  # fmt: skip


def build_glm4v(folder: Path) -> None:
    """GLM-4.1V / GLM-4.5V (Qwen2-VL-like tower at 14 px patches, merged 2x2)."""
    from transformers.models.glm4v.image_processing_pil_glm4v import Glm4vImageProcessorPil

    tokenizer = byte_tokenizer(
        ["<|endoftext|>", "[gMASK]", "<sop>", "<|system|>", "<|user|>", "<|assistant|>",
         "<|begin_of_image|>", "<|end_of_image|>", "<|image|>", "<|video|>",
         "<|begin_of_video|>", "<|end_of_video|>", "<|begin_of_box|>", "<|end_of_box|>"],
        eos="<|user|>",
        pad="<|endoftext|>",
    )  # fmt: skip
    template = "[gMASK]<sop>" + chat_template(
        user="<|user|>\n",
        system="<|system|>\n",
        end="",
        image="<|begin_of_image|><|image|><|end_of_image|>",
        assistant="<|assistant|>\n",
    )
    pad, eos, image, video, boi, eoi, bov, eov = ids(
        tokenizer, "<|endoftext|>", "<|user|>", "<|image|>", "<|video|>", "<|begin_of_image|>",
        "<|end_of_image|>", "<|begin_of_video|>", "<|end_of_video|>",
    )  # fmt: skip
    config = transformers.Glm4vConfig(
        text_config={**TEXT, "vocab_size": len(tokenizer), "pad_token_id": pad,
                     "eos_token_id": eos,
                     "rope_parameters": {**ROPE, "mrope_section": [1, 1, 2],
                                         "partial_rotary_factor": 1.0}},
        vision_config={"depth": 2, "hidden_size": 32, "intermediate_size": 64, "num_heads": 2,
                       "out_hidden_size": 32, "patch_size": 14, "spatial_merge_size": 2,
                       "temporal_patch_size": 2, "image_size": 28, "initializer_range": 0.5},
        image_token_id=image,
        video_token_id=video,
        image_start_token_id=boi,
        image_end_token_id=eoi,
        video_start_token_id=bov,
        video_end_token_id=eov,
    )  # fmt: skip
    torch.manual_seed(0)
    model = transformers.Glm4vForConditionalGeneration(config)
    image_processor = Glm4vImageProcessorPil(
        patch_size=14, size={"shortest_edge": 28 * 28, "longest_edge": 112 * 112}
    )
    save(folder, model, tokenizer, image_processor, template, [eos, pad],
         processor_class="Glm4vProcessor")  # fmt: skip


# -- answers written by a stand-in for generate -----------------------------------------


def script_generate(monkeypatch: Any, folder: Path, answer_for: Callable[[str], str]) -> list:
    """Replace the checkpoint's ``generate``: after each row's prompt write
    ``answer_for(prompt text)``, an end-of-sequence token, then padding to the longest row,
    as generate pads finished rows. Returns the calls seen (prompts as text, and the
    generation options)."""
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
    architecture = json.loads((folder / "config.json").read_text())["architectures"][0]
    seen: list[dict[str, Any]] = []

    def generate(self, input_ids=None, attention_mask=None, **options):
        prompts = tokenizer.batch_decode(input_ids, skip_special_tokens=False)
        seen.append({"prompts": prompts, "attention_mask": attention_mask, **options})
        eos, pad = self.generation_config.eos_token_id[0], options["pad_token_id"]
        rows = [[*tokenizer.encode(answer_for(p), add_special_tokens=False), eos] for p in prompts]
        width = max(len(r) for r in rows) + 2
        new = torch.tensor([r + [pad] * (width - len(r)) for r in rows])
        return torch.cat([input_ids, new], dim=1)

    monkeypatch.setattr(getattr(transformers, architecture), "generate", generate)
    return seen


# -- the table -------------------------------------------------------------------------


@dataclass(frozen=True)
class Tiny:
    """One family: how to build its tiny checkpoint and what its trained models answer."""

    build: Callable[[Path], None]
    #: transformers' ``model_type`` of the checkpoint (its config.json).
    model_type: str
    #: A localization answer describing :data:`BOX` in the family's native convention.
    answer: str
    marks: tuple[Any, ...] = field(default=())


FAMILIES: dict[str, Tiny] = {
    "qwen2_vl": Tiny(
        lambda f: build_qwen(f, "2"),
        "qwen2_vl",
        "<|object_ref_start|>lesion<|object_ref_end|><|box_start|>(250,125),(500,375)<|box_end|>",
    ),
    "qwen2_5_vl": Tiny(
        lambda f: build_qwen(f, "2.5"),
        "qwen2_5_vl",
        # pixels of the 112x112 frame: 120 * 112 / 480 = 28, ...
        '```json\n[{"bbox_2d": [28, 14, 56, 42], "label": "lesion"}]\n```',
    ),
    "qwen3_5": Tiny(
        lambda f: build_qwen(f, "3.5"),
        "qwen3_5",
        '```json\n[{"bbox_2d": ' + BOX_1000 + ', "label": "lesion"}]\n```',
    ),
    "qwen3_vl": Tiny(
        lambda f: build_qwen(f, "3"),
        "qwen3_vl",
        '```json\n[{"bbox_2d": ' + BOX_1000 + ', "label": "lesion"}]\n```',
    ),
    "llava": Tiny(build_llava, "llava", "lesion: [0.25, 0.125, 0.5, 0.375]"),
    "llava_next": Tiny(build_llava_next, "llava_next", "[0.25, 0.125, 0.5, 0.375]"),
    "llava_onevision": Tiny(build_llava_onevision, "llava_onevision", "[0.25, 0.125, 0.5, 0.375]"),
    "gemma4": Tiny(build_gemma4, "gemma4", '[{"bbox_2d": [120, 60, 240, 180]}]'),
    "gemma3": Tiny(build_gemma3, "gemma3", '[{"bbox_2d": [120, 60, 240, 180], "label": "lesion"}]'),
    # ymin 60/480 * 1024 = 128, xmin 256, ymax 384, xmax 512
    "paligemma": Tiny(build_paligemma, "paligemma", "<loc0128><loc0256><loc0384><loc0512> lesion"),
    "idefics3": Tiny(build_idefics3, "idefics3", '[{"bbox_2d": [120, 60, 240, 180]}]'),
    "smolvlm": Tiny(
        lambda f: build_idefics3(f, smolvlm=True), "smolvlm", '[{"bbox_2d": [120, 60, 240, 180]}]'
    ),
    "internvl": Tiny(build_internvl, "internvl", "<ref>lesion</ref><box>[" + BOX_1000 + "]</box>"),
    "mistral3": Tiny(build_mistral3, "mistral3", '[{"bbox_2d": [120, 60, 240, 180]}]'),
    "mllama": Tiny(build_mllama, "mllama", '[{"bbox_2d": [120, 60, 240, 180]}]'),
    "aya_vision": Tiny(build_aya_vision, "aya_vision", '[{"bbox_2d": [120, 60, 240, 180]}]'),
    "glm4v": Tiny(build_glm4v, "glm4v", "<|begin_of_box|>" + BOX_1000 + "<|end_of_box|>"),
}


def build(name: str, folder: Path) -> Path:
    """Write family ``name``'s tiny checkpoint into ``folder``; return the folder."""
    FAMILIES[name].build(folder)
    written = json.loads((folder / "config.json").read_text())
    assert written["model_type"] == FAMILIES[name].model_type, written["model_type"]
    return folder
