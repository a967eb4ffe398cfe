"""Vision-language models run in-process with Hugging Face ``transformers``.

Any checkpoint that ``transformers`` serves as image-text-to-text works: every family in
novabench.vlm_families (Qwen2-VL to Qwen3.5, LLaVA-1.5/NeXT/OneVision, Idefics3/SmolVLM,
Gemma 3/MedGemma, Gemma 4, PaliGemma, InternVL, Llama 3.2 Vision, Aya Vision, GLM-4V) is run
on a tiny checkpoint of its architecture in the tests; that table also gives each family's box
convention (the default ``box_format``) and refuses, at plan time, what cannot run here.
Per batch of samples:

- each prompt goes through the model's own chat template (image first, then the question;
  an optional system prompt), or is passed as it is to families without one (PaliGemma),
  and the images, one list per sample, through the model's own processor;
- prompts are left-padded so that every row's answer starts right after its prompt, and
  only the generated tokens are decoded;
- the frame each image was resized to (``image_grid_thw`` x patch size, Qwen2-VL family)
  is returned with the answer, so that ``qwen25_bbox_2d`` boxes, which are in pixels of
  that frame, are mapped back to the original image exactly, whatever ``min_pixels`` and
  ``max_pixels`` say.

Weights are read from a local folder or the Hugging Face cache only (``local_files_only``,
default true): a run never downloads a model unless the configuration allows it. Code from
a model's repository runs only with ``trust_remote_code`` and a ``revision`` pinned to a
commit. torch and transformers are imported only when a job loads the model, so the
Snakemake process that plans the run does not need them.
"""

from __future__ import annotations

import io
import json
import logging
import re
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, ClassVar

from novabench.errors import ConfigError, NovaError, settings_error
from novabench.models.base import COST_LOCAL_GPU, Response, Sample
from novabench.models.base import Adapter as BaseAdapter
from novabench.vlm_families import SERVE_ELSEWHERE, Family, family_of, family_problem

log = logging.getLogger(__name__)

DEFAULTS: dict[str, Any] = {
    "revision": None,
    "dtype": "auto",
    "device": "auto",
    "gpus": None,
    "attn_implementation": None,
    "batch_size": 4,
    "max_new_tokens": 1024,
    "temperature": 0.1,  # the paper's generation setting
    "seed": 0,
    "generate_kwargs": {},
    "min_pixels": None,
    "max_pixels": None,
    "system_prompt": None,
    "local_files_only": True,
    "trust_remote_code": False,
}
# Settings that change what the model answers (recorded in every prediction's identity);
# the rest (device, gpus, local_files_only) only decide where and how it runs.
ANSWER_KEYS = (
    "model",
    "revision",
    "dtype",
    "attn_implementation",
    "batch_size",  # sampling draws and padding differ with the batch composition
    "max_new_tokens",
    "temperature",
    "seed",
    "generate_kwargs",
    "min_pixels",
    "max_pixels",
    "system_prompt",
)
DTYPES = ("auto", "bfloat16", "float16", "float32")

_PIXELS = {"type": ["integer", "null"], "minimum": 1}
SETTINGS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["model"],
    "properties": {
        "model": {"type": "string", "minLength": 1},
        "revision": {"type": ["string", "null"], "minLength": 1},
        "dtype": {"enum": list(DTYPES)},
        "device": {"type": "string", "pattern": r"^(auto|cpu|cuda(:\d+)?)\Z"},
        "gpus": {"type": ["integer", "null"], "minimum": 0},
        "attn_implementation": {"type": ["string", "null"], "minLength": 1},
        "batch_size": {"type": "integer", "minimum": 1},
        "max_new_tokens": {"type": "integer", "minimum": 1},
        "temperature": {"type": "number", "minimum": 0},
        "seed": {"type": ["integer", "null"], "minimum": 0},
        "generate_kwargs": {"type": "object"},
        "min_pixels": _PIXELS,
        "max_pixels": _PIXELS,
        "system_prompt": {"type": ["string", "null"]},
        "local_files_only": {"type": "boolean"},
        "trust_remote_code": {"type": "boolean"},
    },
}
_HELP = "see the hf_local adapter in config/README.md"
_COMMIT = re.compile(r"^[0-9a-f]{40}\Z")


def resolve_settings(name: str, settings: dict[str, Any]) -> dict[str, Any]:
    """Check a model's settings and fill in the defaults; ConfigError names the key."""
    import jsonschema

    try:
        jsonschema.validate(settings, SETTINGS_SCHEMA)
    except jsonschema.ValidationError as exc:
        raise settings_error(exc, f"models.{name}.settings", _HELP) from None
    resolved = {**DEFAULTS, **settings}
    low, high = resolved["min_pixels"], resolved["max_pixels"]
    if low is not None and high is not None and low > high:
        raise ConfigError(
            f"models.{name}.settings: min_pixels ({low}) is larger than max_pixels ({high})",
            "swap them or remove one",
        )
    revision = resolved["revision"]
    if resolved["trust_remote_code"] and not _COMMIT.match(revision or ""):
        # Remote code runs in the job: only a commit pins which code that is.
        raise ConfigError(
            f"models.{name}.settings.trust_remote_code runs code from the model's repository, "
            f"so settings.revision must pin a commit (40 hex digits), not {revision or 'main'}",
            "set revision to the commit whose code you reviewed (the model page's file history "
            "lists them), or remove trust_remote_code",
        )
    return resolved


def job_gpus(model_cfg: dict[str, Any]) -> int:
    """GPUs a prediction job of a model asks the scheduler for (Snakemake resource ``gpu``):
    ``settings.gpus``, else 1 (0 with ``device: cpu``); 0 for models of other adapters."""
    if model_cfg.get("adapter") != "hf_local":
        return 0
    settings = model_cfg.get("settings") or {}
    if settings.get("gpus") is not None:
        return int(settings["gpus"])
    return 0 if settings.get("device", DEFAULTS["device"]) == "cpu" else 1


# -- finding the weights without loading them ------------------------------------------

_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?\Z")


def _missing_weights(name: str, config: dict[str, Any]) -> NovaError:
    model, revision = config["model"], config["revision"]
    at = f" --revision {revision}" if revision else ""
    return NovaError(
        f"models.{name}: the weights of {model} (revision {revision or 'main'}) are not on "
        "this machine and settings.local_files_only is true",
        f"download them once with `hf download {model}{at}`, point settings.model at a local "
        "folder, or set settings.local_files_only: false to let the job download them",
    )


def check_weights(name: str, config: dict[str, Any]) -> None:
    """The model is a folder with a ``config.json`` or, as a Hub id, is in the local cache.

    Only the presence of ``config.json`` is checked (cheap, no torch needed); incomplete
    weights are reported when the job loads them.
    """
    model = config["model"]
    folder = Path(model).expanduser()
    if folder.is_dir():
        if not (folder / "config.json").is_file():
            raise NovaError(
                f"models.{name}.settings.model: the folder {folder} holds no config.json",
                "point it at a folder written by save_pretrained or `hf download --local-dir`",
            )
        return
    if not _HUB_ID.match(model):
        raise NovaError(
            f"models.{name}.settings.model: the folder {folder} does not exist",
            "fix the path, or give a Hugging Face model id such as Qwen/Qwen2.5-VL-7B-Instruct",
        )
    if not config["local_files_only"]:
        return  # the job may download what is missing
    from huggingface_hub import try_to_load_from_cache

    found = try_to_load_from_cache(model, "config.json", revision=config["revision"])
    if not isinstance(found, str):
        raise _missing_weights(name, config)


def checkpoint_config(config: dict[str, Any], *, download: bool = False) -> dict[str, Any] | None:
    """The checkpoint's ``config.json`` (it names the family), if it is on this machine.

    With ``download`` and ``local_files_only: false`` a Hub model's config.json is fetched
    when the cache lacks it. Reading it needs neither torch nor transformers.
    """
    model = config["model"]
    folder = Path(model).expanduser()
    found: Any = None
    if folder.is_dir():
        found = folder / "config.json"
    elif _HUB_ID.match(model):
        from huggingface_hub import hf_hub_download, try_to_load_from_cache

        found = try_to_load_from_cache(model, "config.json", revision=config["revision"])
        if not isinstance(found, str) and download and not config["local_files_only"]:
            found = hf_hub_download(model, "config.json", revision=config["revision"])
    if not isinstance(found, str | Path) or not Path(found).is_file():
        return None
    try:
        return json.loads(Path(found).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise NovaError(
            f"cannot read {found} ({exc})", "download the checkpoint again (it is damaged)"
        ) from exc


def check_family(
    name: str, config: dict[str, Any], checkpoint: dict[str, Any], tasks: Sequence[str]
) -> None:
    """A ConfigError when the checkpoint's family cannot run one of ``tasks`` as set up."""
    from novabench.tasks import get_task

    family = family_of(checkpoint)
    if family is None:
        return
    problem = family_problem(
        family,
        image_free_tasks=[task for task in tasks if not get_task(task).uses_image],
        system_prompt=bool(config["system_prompt"]),
    )
    if problem is not None:
        raise ConfigError(
            f"models.{name}: {config['model']} is a {family.title} checkpoint "
            f"({checkpoint.get('model_type')}): {problem[0]}",
            problem[1],
        )


def check_remote_code(name: str, config: dict[str, Any], checkpoint: dict[str, Any]) -> None:
    """A NovaError when the checkpoint's architecture is code in its repository (not in
    transformers) and ``trust_remote_code`` does not allow running it."""
    import transformers
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

    model_type = checkpoint.get("model_type")
    if config["trust_remote_code"] or model_type in CONFIG_MAPPING_NAMES:
        return
    if "auto_map" in checkpoint:
        raise NovaError(
            f"models.{name}: {config['model']} ({model_type}) runs on code from its repository, "
            f"not an architecture of transformers {transformers.__version__}",
            "set settings.trust_remote_code: true with settings.revision pinned to a reviewed "
            f"commit, or {SERVE_ELSEWHERE}",
        )


# -- loading ---------------------------------------------------------------------------


def _backend(name: str) -> tuple[Any, Any]:
    """torch and transformers, or a NovaError naming the environment to use."""
    try:
        import torch
        import transformers
    except ImportError as exc:
        raise NovaError(
            f"models.{name}: the hf_local adapter needs torch and transformers ({exc})",
            "run Snakemake with --use-conda (envs/local-vlm.yaml) or install the pins listed "
            "there into this environment",
        ) from None
    return torch, transformers


def image_only(processor_class: type) -> type:
    """The model's processor class without its video processor.

    Since transformers 5.4 a VLM processor builds its video processor when it loads, and
    that needs torchvision even for still images (huggingface/transformers#48558). NOVA sends
    single images only, so the video half is left out instead of making torchvision (which
    must match the torch build exactly) a dependency. The image processor, tokenizer, chat
    template, image-token expansion and every setting of ``processor_config.json`` are the
    model's own.

    The class's own ``__init__`` stays in place: transformers passes a processor only the
    settings its ``__init__`` names (``num_image_tokens``, ``image_seq_len``, ...), so a
    wrapper there would silently drop them. Instead the sub-processor list leaves out
    ``video_processor`` (so it is never loaded), the processor is built with the others by
    name and ``video_processor=None`` (some list it first, some require it), and a base class
    slotted in just below the processor's own drops that ``None`` where the processor hands
    its sub-processors on to transformers' base class.
    """
    from transformers import ProcessorMixin

    attributes = processor_class.get_attributes()
    if "video_processor" not in attributes:
        return processor_class
    kept = [name for name in attributes if name != "video_processor"]

    class WithoutVideo(ProcessorMixin):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            # The processor hands its sub-processors on positionally, in its own order.
            named = dict(zip(attributes, args, strict=False))
            named.pop("video_processor", None)
            kwargs.pop("video_processor", None)
            super().__init__(**named, **kwargs)

    def get_attributes(cls: type) -> list[str]:
        return list(kept)

    def from_args_and_dict(cls: type, args: list, processor_dict: dict, **kwargs: Any) -> Any:
        named = dict(zip(kept, args, strict=True))
        return super(image_only_class, cls).from_args_and_dict(
            [], processor_dict, **kwargs, **named, video_processor=None
        )

    image_only_class = type(
        processor_class.__name__,
        (processor_class, WithoutVideo),
        {
            "get_attributes": classmethod(get_attributes),
            "from_args_and_dict": classmethod(from_args_and_dict),
        },
    )
    return image_only_class


def load_processor(source: str, **kwargs: Any) -> Any:
    """The model's processor (see :func:`image_only`); kwargs go to ``from_pretrained``."""
    from transformers import AutoConfig, AutoProcessor
    from transformers.models.auto.processing_auto import PROCESSOR_MAPPING

    config = AutoConfig.from_pretrained(source, **kwargs)
    try:
        processor_class = PROCESSOR_MAPPING[type(config)]
    except KeyError:
        return AutoProcessor.from_pretrained(source, **kwargs)
    return image_only(processor_class).from_pretrained(source, **kwargs)


def load_model(source: str, **kwargs: Any) -> Any:
    """The model through ``AutoModelForImageTextToText`` (remote code: also
    ``AutoModelForCausalLM``), else its own architecture class."""
    import transformers

    autos = [transformers.AutoModelForImageTextToText]
    if kwargs.get("trust_remote_code"):
        # Remote-code VLMs (Phi-3.5-vision, ...) often register as causal LMs only.
        autos.append(transformers.AutoModelForCausalLM)
    for auto in autos:
        try:
            return auto.from_pretrained(source, **kwargs)
        except ValueError as exc:
            if "Unrecognized configuration class" not in str(exc):
                raise
    hub = ("revision", "local_files_only", "trust_remote_code")
    config = transformers.AutoConfig.from_pretrained(
        source, **{key: kwargs[key] for key in hub if key in kwargs}
    )
    architecture = (config.architectures or [""])[0]
    model_class = getattr(transformers, architecture, None)
    if model_class is None:
        raise NovaError(
            f"{source} ({config.model_type}) is not an image-text-to-text model of transformers "
            f"{transformers.__version__}",
            "use a vision-language model that transformers supports, or serve it with vLLM "
            "and the openai_compatible adapter",
        )
    return model_class.from_pretrained(source, **kwargs)


def _rgb(png: bytes) -> Any:
    from PIL import Image

    with Image.open(io.BytesIO(png)) as image:
        return image.convert("RGB")  # NOVA slices are grayscale; the processors expect RGB


class Adapter(BaseAdapter):
    """A local transformers VLM; settings are documented in config/README.md."""

    settings_schema = SETTINGS_SCHEMA
    environment = "envs/local-vlm.yaml"  # torch and transformers
    cost_model = COST_LOCAL_GPU

    #: Diagnosis prompts (text only) go through the same chat template, without an image.
    supported_tasks: ClassVar[tuple[str, ...]] = ("localization", "captioning", "diagnosis")

    @classmethod
    def job_resources(cls, settings: dict[str, Any]) -> dict[str, int]:
        """The model's GPUs; its weights pass through host memory on loading."""
        gpus = job_gpus({"adapter": "hf_local", "settings": settings})
        return {"gpu": gpus, "cpus": 1, "mem_mb": 32000 if gpus else 2000}

    def __init__(self, name: str, settings: dict[str, Any], *, cache_dir: Path | None = None):
        super().__init__(name, settings, cache_dir=cache_dir)
        self.config = resolve_settings(name, settings)
        self.processor: Any = None
        self.model: Any = None
        self.family: Family | None = None
        self._images_kwargs: dict[str, Any] = {}
        self._prompt_logged = False

    # -- checks -------------------------------------------------------------------------

    @classmethod
    def check_settings(cls, name: str, settings: dict[str, Any]) -> None:
        """Plan time: the schema, and the settings that only make sense together."""
        resolve_settings(name, settings)

    @classmethod
    def check_tasks(cls, name: str, settings: dict[str, Any], tasks: Sequence[str]) -> None:
        """Plan time: a checkpoint already on this machine is of a family that can run
        ``tasks`` as configured (one that is not yet is checked when its job starts)."""
        config = resolve_settings(name, settings)
        checkpoint = checkpoint_config(config)
        if checkpoint is not None:
            check_family(name, config, checkpoint, tasks)

    @classmethod
    def check_environment(cls, name: str, settings: dict[str, Any]) -> None:
        """Before any job: valid settings and, unless downloads are allowed, local weights."""
        check_weights(name, resolve_settings(name, settings))

    def preflight(self, task: str) -> None:
        torch, _ = _backend(self.name)
        device = self.config["device"]
        if device.startswith("cuda") and not torch.cuda.is_available():
            raise NovaError(
                f"models.{self.name}.settings.device is {device} but torch sees no CUDA GPU",
                "run the job on a GPU node (the predict rule asks for settings.gpus GPUs) or "
                "set device: cpu",
            )
        check_weights(self.name, self.config)
        checkpoint = checkpoint_config(self.config, download=True)
        if checkpoint is not None:
            check_family(self.name, self.config, checkpoint, [task])
            check_remote_code(self.name, self.config, checkpoint)

    def native_box_format(self) -> str | None:
        """The box convention of the checkpoint's family (see novabench.vlm_families)."""
        check_weights(self.name, self.config)  # missing weights, not a missing box_format
        checkpoint = checkpoint_config(self.config, download=True)
        family = None if checkpoint is None else family_of(checkpoint)
        return None if family is None else family.box_format

    def identity(self) -> dict[str, Any]:
        settings = {k: self.config[k] for k in ANSWER_KEYS}
        if self.config["trust_remote_code"]:
            # Only when set, so that the identity of every other model stays as it was.
            settings["trust_remote_code"] = True
        return {"adapter": "hf_local", "settings": settings}

    # -- loading ------------------------------------------------------------------------

    def load(self) -> None:
        """Load processor and model once; a missing or broken checkpoint is a NovaError."""
        if self.model is not None:
            return
        torch, transformers = _backend(self.name)
        config = self.config
        folder = Path(config["model"]).expanduser()
        source = str(folder) if folder.is_dir() else config["model"]
        hub = {"revision": config["revision"], "local_files_only": config["local_files_only"]}
        if config["trust_remote_code"]:
            hub["trust_remote_code"] = True
        options: dict[str, Any] = {
            "dtype": "auto" if config["dtype"] == "auto" else getattr(torch, config["dtype"]),
            # "auto" spreads a model over every visible GPU (and the CPU if they are full).
            "device_map": config["device"],
        }
        if config["attn_implementation"]:
            options["attn_implementation"] = config["attn_implementation"]
        started = time.perf_counter()
        self._load_checkpoint(source, hub, options)
        self.family = family_of(self.model.config.to_dict())
        chat = self.family is None or self.family.prompt == "chat"
        if chat and not getattr(self.processor, "chat_template", None):
            raise NovaError(
                f"models.{self.name}: {source} has no chat template (a base model?)",
                "use the instruction-tuned checkpoint, e.g. a ...-Instruct model",
            )
        self.model.eval()
        tokenizer = self.processor.tokenizer
        tokenizer.padding_side = "left"  # answers must start where every prompt ends
        if tokenizer.pad_token is None:
            tokenizer.pad_token = tokenizer.eos_token
        self._images_kwargs = self._pixel_budget()
        log.info(
            "%s: loaded %s (%s, %s) on %s in %.1f s, transformers %s",
            self.name,
            source,
            type(self.model).__name__,
            self.model.dtype,
            self.model.device,
            time.perf_counter() - started,
            transformers.__version__,
        )

    def _load_checkpoint(self, source: str, hub: dict[str, Any], options: dict[str, Any]) -> None:
        config = self.config
        try:
            self.processor = load_processor(source, **hub)
            self.model = load_model(source, **options, **hub)
        except OSError as exc:
            # transformers reports a checkpoint it cannot find or read as an OSError
            if config["local_files_only"] and not Path(source).is_dir():
                raise _missing_weights(self.name, config) from exc
            raise NovaError(
                f"models.{self.name}: cannot load {source} ({' '.join(str(exc).split())[:300]})",
                "check settings.model and settings.revision, and that the download is complete",
            ) from exc
        except (ValueError, ImportError) as exc:
            # An architecture, processor or library this transformers cannot provide.
            raise NovaError(
                f"models.{self.name}: transformers cannot load {source} "
                f"({' '.join(str(exc).split())[:300]})",
                f"use a model whose architecture transformers ships, or {SERVE_ELSEWHERE}",
            ) from exc

    def _pixel_budget(self) -> dict[str, Any]:
        """Image processor arguments for ``min_pixels``/``max_pixels`` (Qwen2-VL family)."""
        low, high = self.config["min_pixels"], self.config["max_pixels"]
        if low is None and high is None:
            return {}
        image_processor = self.processor.image_processor
        size = getattr(image_processor, "size", None)
        if (
            getattr(size, "shortest_edge", None) is None
            or getattr(size, "longest_edge", None) is None
        ):
            raise ConfigError(
                f"models.{self.name}.settings: min_pixels/max_pixels apply to image processors "
                f"with a pixel budget (Qwen2-VL family), not {type(image_processor).__name__}",
                "remove min_pixels and max_pixels",
            )
        return {
            "size": {
                "shortest_edge": low if low is not None else size.shortest_edge,
                "longest_edge": high if high is not None else size.longest_edge,
            }
        }

    # -- answering ----------------------------------------------------------------------

    def messages(self, sample: Sample) -> list[dict[str, Any]]:
        """The chat for one sample: optional system prompt, then image and question."""
        content: list[dict[str, Any]] = []
        if sample.image_png is not None:
            content.append({"type": "image"})
        content.append({"type": "text", "text": sample.prompt})
        chat: list[dict[str, Any]] = []
        if self.config["system_prompt"]:
            chat.append(
                {
                    "role": "system",
                    "content": [{"type": "text", "text": self.config["system_prompt"]}],
                }
            )
        chat.append({"role": "user", "content": content})
        return chat

    def prompt_text(self, sample: Sample) -> str:
        """The prompt as the model reads it, before the processor expands image tokens."""
        from transformers import ProcessorMixin

        if self.family is not None and self.family.prompt == "plain":
            return sample.prompt  # the processor adds the image tokens (PaliGemma)
        # The base class's template rendering: processors that override it do so only to
        # fill in video settings, from a video processor this adapter never loads (SmolVLM).
        return ProcessorMixin.apply_chat_template(
            self.processor, self.messages(sample), tokenize=False, add_generation_prompt=True
        )

    def generation_options(self) -> dict[str, Any]:
        config = self.config
        options: dict[str, Any] = {"max_new_tokens": config["max_new_tokens"]}
        if config["temperature"] > 0:
            options.update(do_sample=True, temperature=config["temperature"])
        else:
            options["do_sample"] = False  # greedy: temperature 0 means the most likely token
        options["pad_token_id"] = self.processor.tokenizer.pad_token_id
        return {**options, **config["generate_kwargs"]}

    def predict(self, samples: Sequence[Sample]) -> Iterator[Response]:
        if not samples:
            return
        self.load()
        size = self.config["batch_size"]
        for number, start in enumerate(range(0, len(samples), size)):
            yield from self.answer_batch(samples[start : start + size], number)

    def model_inputs(self, batch: Sequence[Sample]) -> Any:
        """The processor's tensors for a batch (prompts, images), on the model's device."""
        processor = self.processor
        texts = [self.prompt_text(s) for s in batch]
        if not self._prompt_logged:
            log.info("%s: the first prompt as the model reads it: %r", self.name, texts[0])
            self._prompt_logged = True
        # One list per sample: processors that take several images per prompt (Gemma 3,
        # Idefics3, Mllama) cannot tell a flat list's images apart; the others accept both.
        images = [[_rgb(s.image_png)] for s in batch if s.image_png is not None]
        call: dict[str, Any] = {"text": texts, "padding": True, "return_tensors": "pt"}
        if images:
            call["images"] = images
            if self._images_kwargs:
                call["images_kwargs"] = self._images_kwargs
        try:
            return processor(**call).to(self.model.device)
        except ValueError as exc:
            # Processors check prompts against images with ValueErrors (token counts, ...).
            raise NovaError(
                f"models.{self.name}: {type(processor).__name__} refused a batch of "
                f"{len(batch)} ({' '.join(str(exc).split())[:300]})",
                "try settings.batch_size: 1, and report it with the model's name",
            ) from exc

    def answer_batch(self, batch: Sequence[Sample], number: int = 0) -> list[Response]:
        """One ``generate`` call for a batch; one Response per sample, in order."""
        import torch
        import transformers

        model = self.model
        inputs = self.model_inputs(batch)
        frames = iter(self.frame_sizes(inputs))

        if self.config["seed"] is not None:
            # Seeded per batch, so a batch's draws do not depend on the batches before it.
            transformers.set_seed(self.config["seed"] + number)
        started = time.perf_counter()
        try:
            with torch.inference_mode():
                output = model.generate(**inputs, **self.generation_options())
        except torch.OutOfMemoryError as exc:
            raise NovaError(
                f"models.{self.name}: out of memory generating a batch of {len(batch)}",
                "lower settings.batch_size or settings.max_pixels, or use a smaller dtype",
            ) from exc
        latency = (time.perf_counter() - started) / len(batch)

        prompt_length = inputs["input_ids"].shape[1]
        new_tokens = output[:, prompt_length:].cpu()
        answers = self.processor.tokenizer.batch_decode(
            new_tokens, skip_special_tokens=True, clean_up_tokenization_spaces=False
        )
        prompt_tokens = inputs["attention_mask"].sum(dim=1).tolist()
        responses = []
        for i, sample in enumerate(batch):
            frame = next(frames, None) if sample.image_png is not None else None
            responses.append(
                Response(
                    raw=answers[i],
                    latency_s=latency,
                    usage={
                        "prompt_tokens": int(prompt_tokens[i]),
                        "completion_tokens": self.completion_length(new_tokens[i].tolist()),
                    },
                    frame_size=frame,
                )
            )
        return responses

    def frame_sizes(self, inputs: Any) -> list[tuple[int, int] | None]:
        """(width, height) each image was resized to, in image order.

        Qwen2-VL-family processors report every image's grid of patches (``image_grid_thw``:
        frames, rows, columns); times the patch size that is the frame the model saw and
        writes ``qwen25_bbox_2d`` boxes in. Other processors report none.
        """
        grid = inputs.get("image_grid_thw")
        patch = getattr(self.processor.image_processor, "patch_size", None)
        if grid is None or not patch:
            return []
        return [(int(w) * patch, int(h) * patch) for _, h, w in grid.tolist()]

    def completion_length(self, tokens: list[int]) -> int:
        """Generated tokens up to and including the first end-of-sequence token."""
        stop = self.model.generation_config.eos_token_id
        stops = set(stop if isinstance(stop, list) else [stop]) - {None}
        for i, token in enumerate(tokens):
            if token in stops:
                return i + 1
        return len(tokens)
