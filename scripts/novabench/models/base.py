"""The one small interface every model backend implements.

A model is configuration (``models:`` in config.yaml): a name, an ``adapter`` kind, the
tasks it runs and adapter ``settings``. The kind names a module ``novabench/models/<kind>.py``
(or a package ``novabench/models/<kind>/`` whose ``__init__`` defines it, for an adapter with
internals of its own) that defines a subclass of :class:`Adapter` called ``Adapter``; adding
a backend is adding one such module, nothing else. A module outside the package (a
``plugins:`` entry of the config, novabench.plugins) registers its class under a kind with
:func:`register_adapter`.

The class says everything the workflow needs to know about its kind, so no other module
names one: its conda environment (:attr:`Adapter.environment`), its cost model
(:attr:`Adapter.cost_model`), what a prediction job asks the scheduler for
(:meth:`Adapter.job_resources`), whether its answers are a control rather than a model
under test (:attr:`Adapter.control`) and the bounds a control's scores must keep under every
judge (:attr:`Adapter.control_bounds`, checked by :mod:`novabench.controls`).

Adapters see one :class:`Sample` per image and return one :class:`Response` per sample,
in order. They return raw text exactly as a model would; the task code parses it with the
model's declared conventions, so offline baselines and API models share the same parsing,
statuses and scoring.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from novabench.errors import ConfigError, settings_error


@dataclass(frozen=True)
class Sample:
    """What a model is given for one image of one task."""

    filename: str
    case_id: str
    task: str
    prompt: str
    image_png: bytes | None  # None for text-only tasks
    width: int
    height: int
    # Template inputs of the prompt (e.g. clinical_history, findings) for adapters that
    # work on text directly rather than on the rendered prompt.
    inputs: dict[str, str] = field(default_factory=dict)
    # The reference answer. Only positive controls may read it.
    reference: dict[str, Any] = field(default_factory=dict)


@dataclass
class Response:
    """One model answer: raw text, or an error that prevented one."""

    raw: str | None
    error: str | None = None
    # No answer exists for this image (a predictions file lacks it): status ``missing``,
    # counted apart from failed requests.
    missing: bool = False
    latency_s: float | None = None
    usage: dict[str, int] | None = None
    cached: bool = False
    # (width, height) of the frame the model saw, for adapters that resize the image
    # themselves; ``qwen25_bbox_2d`` boxes are in pixels of it. None: the convention's
    # default frame (smart_resize of the original size).
    frame_size: tuple[int, int] | None = None
    # The service itself flagged the answer as a refusal (e.g. the OpenAI API's
    # ``message.refusal``); ``raw`` then holds the refusal text. Answers whose text declines
    # are found by novabench.refusals whatever the backend.
    refusal: bool = False
    # Who answered, as the server says: its ``model`` field (the exact snapshot behind an
    # alias such as "gpt-4o") and ``system_fingerprint`` (its backend build), where sent.
    served_model: str | None = None
    system_fingerprint: str | None = None
    # API keys removed from the answer before it was stored (novabench.redaction): a
    # server echoed one, which the prediction summary counts.
    redacted: int = 0


# How the cost estimate (novabench.estimate) counts a backend's jobs.
COST_SERVICE = "service"  # requests to a chat-completions service: tokens, dollars, time
COST_LOCAL_GPU = "local_gpu"  # a model run in the job: GPU time per image
COST_NONE = "none"  # offline (controls, baselines, answer files): nothing to count
COST_MODELS = (COST_SERVICE, COST_LOCAL_GPU, COST_NONE)


class Adapter(ABC):
    """Base class of every backend kind."""

    #: The conda environment of its prediction jobs, relative to the workflow folder.
    environment: ClassVar[str] = "envs/inference.yaml"
    #: How the cost estimate counts its jobs: one of :data:`COST_MODELS`.
    cost_model: ClassVar[str] = COST_NONE
    #: Its model runs in a server started for it (estimated as a service, plus the
    #: server's start and the GPUs it holds meanwhile). A workflow run starts one per model
    #: for all its tasks (``shared_server``) and its prediction jobs ``attach`` to it.
    starts_server: ClassVar[bool] = False
    #: Its answers are a control (gold, chance), shown apart from the models under test.
    control: ClassVar[bool] = False
    #: A control's bounds, checked on every score file of its answers (novabench.controls):
    #: ``at_least`` / ``at_most`` on the task's ceiling metrics where defined; {}: none.
    control_bounds: ClassVar[Mapping[str, float]] = {}

    #: For models whose box convention is fixed by the adapter (offline baselines);
    #: None means the model's config must declare ``box_format``.
    box_format: ClassVar[str | None] = None
    #: Tasks this backend can run; None: every registered task.
    supported_tasks: ClassVar[tuple[str, ...] | None] = None
    #: The backend shows its own progress (e.g. requests answered from a cache); else
    #: the prediction job shows one per image.
    shows_progress: ClassVar[bool] = False

    @classmethod
    def supports(cls, task: str) -> bool:
        return cls.supported_tasks is None or task in cls.supported_tasks

    def __init__(self, name: str, settings: dict[str, Any], *, cache_dir: Path | None = None):
        self.name = name
        self.settings = dict(settings)
        # Where backends that call a service keep their persistent response cache.
        self.cache_dir = cache_dir
        # The model's whole entry of ``models:`` (box_format, max_error_rate), where the
        # backend needs more than its settings (load_adapter fills it in).
        self.model_cfg: dict[str, Any] = {}

    #: JSON schema of the model's ``settings``, checked at plan time (a dry run too).
    settings_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "additionalProperties": False,
        "properties": {},
    }

    @classmethod
    def check_settings(cls, name: str, settings: dict[str, Any]) -> None:
        """Raise ConfigError naming ``models.<name>.settings.<key>`` and the fix."""
        import jsonschema

        try:
            jsonschema.validate(settings, cls.settings_schema)
        except jsonschema.ValidationError as exc:
            fix = f"see the {cls.__module__.rsplit('.', 1)[-1]} adapter in config/README.md"
            raise settings_error(exc, f"models.{name}.settings", fix) from None

    @classmethod  # noqa: B027 - optional hook, empty by default
    def check_tasks(cls, name: str, settings: dict[str, Any], tasks: Sequence[str]) -> None:
        """Plan time, after ``check_settings``: raise ConfigError if the model cannot run
        one of its enabled ``tasks`` for a reason its settings reveal (e.g. the family of
        a local checkpoint)."""

    @classmethod
    def input_file(cls, name: str, settings: dict[str, Any], task: str) -> Path | None:
        """A file the model's answers are read from (a job input), if any."""
        return None

    @classmethod
    def job_resources(cls, settings: dict[str, Any]) -> dict[str, int]:
        """What a prediction job asks the scheduler for: ``gpu`` (the SLURM executor's
        ``--gpus``; a workstation's ``--resources gpu=1`` runs one such job at a time),
        ``cpus`` and host memory ``mem_mb``. An offline or API job holds little more than
        the dataset."""
        return {"gpu": 0, "cpus": 1, "mem_mb": 2000}

    @classmethod
    def api_resource(cls, settings: dict[str, Any]) -> str | None:
        """The Snakemake resource ``api_<provider>`` that caps jobs per provider, if any."""
        return None

    @classmethod  # noqa: B027 - optional hook, empty by default
    def check_environment(cls, name: str, settings: dict[str, Any]) -> None:
        """Checked once when a run starts (not on dry runs), before any job does work:
        API keys present, endpoints reachable. Raise NovaError naming the fix."""

    def native_box_format(self) -> str | None:
        """The box convention the model answers in when its config declares no
        ``box_format`` (hf_local: its family's); None: it must declare one."""
        return None

    def identity(self) -> dict[str, Any]:
        """Everything that determines this model's outputs (no secrets)."""
        return {"adapter": type(self).__module__.rsplit(".", 1)[-1], "settings": self.settings}

    def preflight(self, task: str) -> None:  # noqa: B027 - optional hook, empty by default
        """Checked at the start of each job; raise NovaError if the model cannot run."""

    def shared_server(self) -> contextlib.AbstractContextManager[Any]:
        """A ``starts_server`` backend: its server for every task of a run (a context
        manager whose value has ``base_url``; novabench.serving)."""
        raise NotImplementedError(f"{type(self).__name__} starts no server")

    def attach(self, service_file: Path) -> None:
        """A ``starts_server`` backend: send to the run's shared server, whose address
        its service job writes into ``service_file``, instead of starting one."""
        raise NotImplementedError(f"{type(self).__name__} starts no server")

    @abstractmethod
    def predict(self, samples: Sequence[Sample]) -> Iterator[Response]:
        """Yield one Response per sample, in order."""


# Backend kinds registered by hand (plug-ins outside the package), by kind.
_REGISTERED: dict[str, type[Adapter]] = {}


def register_adapter(kind: str, cls: type[Adapter]) -> type[Adapter]:
    """Make ``cls`` the backend of kind ``kind`` (a plug-in module calls this on import)."""
    if not (isinstance(cls, type) and issubclass(cls, Adapter)):
        raise TypeError(f"{cls!r} is not an Adapter subclass")
    _REGISTERED[kind] = cls
    return cls


def unregister_adapter(kind: str) -> None:
    _REGISTERED.pop(kind, None)


def adapter_module_name(kind: str) -> str:
    """The module that defines backend ``kind`` (a registered plug-in's own module)."""
    if kind in _REGISTERED:
        return _REGISTERED[kind].__module__
    return f"novabench.models.{kind}"


def adapter_exists(kind: str) -> bool:
    """Cheap check (no import) that a backend kind has a module."""
    if kind in _REGISTERED:
        return True
    try:
        return importlib.util.find_spec(adapter_module_name(kind)) is not None
    except (ImportError, ValueError):
        return False


def adapter_kind(kind: str) -> type[Adapter]:
    """The adapter class of backend ``kind``: registered, else ``novabench.models.<kind>``."""
    if kind in _REGISTERED:
        return _REGISTERED[kind]
    if not adapter_exists(kind):
        raise ConfigError(
            f"unknown adapter {kind!r}",
            "use one of the modules in scripts/novabench/models/ or register a plug-in",
        )
    module = importlib.import_module(adapter_module_name(kind))
    cls = getattr(module, "Adapter", None)
    if not (isinstance(cls, type) and issubclass(cls, Adapter)):
        raise ConfigError(f"module {module.__name__} does not define an Adapter subclass")
    return cls


def is_control(kind: str | None) -> bool:
    """Whether backend ``kind`` answers as a control; False for a kind not known here
    (e.g. one an earlier run recorded whose plug-in this run does not load)."""
    try:
        return kind is not None and adapter_kind(kind).control
    except (ConfigError, ImportError):
        return False


def adapter_class(name: str, model_cfg: dict[str, Any]) -> type[Adapter]:
    try:
        return adapter_kind(model_cfg["adapter"])
    except ConfigError as exc:
        raise ConfigError(f"models.{name}.adapter: {exc}") from None


def load_adapter(name: str, model_cfg: dict[str, Any], cache_dir: Path | None = None) -> Adapter:
    cls = adapter_class(name, model_cfg)
    adapter = cls(name, model_cfg.get("settings", {}), cache_dir=cache_dir)
    adapter.model_cfg = dict(model_cfg)
    return adapter
