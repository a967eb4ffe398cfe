"""Any model served behind the chat-completions protocol: OpenAI, Gemini, vLLM, Ollama.

One adapter for every endpoint that speaks ``POST {base_url}/chat/completions`` (OpenAI's
API, Gemini's OpenAI-compatible endpoint, ``vllm serve``, Ollama). It turns samples into
chat requests and answers them with the chat client (:mod:`novabench.models.chat_client`:
cache, retries, pacing, guards against hostile servers, key redaction), which the LLM
judges use as well; what is here is what a model backend adds: its checks before a run,
its identity and cost, its error budget and progress bar.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, ClassVar

from novabench.cache import ResponseCache
from novabench.models.base import COST_SERVICE, Response, Sample
from novabench.models.base import Adapter as BaseAdapter
from novabench.models.chat_client import (
    DEFAULTS,
    GENERATION_KEYS,
    SETTINGS_SCHEMA,
    ChatClient,
    ChatRequest,
    api_resource,
    endpoint_problem,
    key_problem,
    read_api_key,
    resolve_settings,
    url_credentials_problem,
)

# Names of the client that callers reach through this module (the judges, the vllm
# adapter, the benchmarks), kept importable from here.
__all__ = [
    "DEFAULTS",
    "GENERATION_KEYS",
    "SETTINGS_SCHEMA",
    "Adapter",
    "ChatRequest",
    "api_resource",
    "endpoint_problem",
    "key_problem",
    "resolve_settings",
]


class Adapter(BaseAdapter):
    """A chat-completions endpoint; settings are documented in config/README.md."""

    settings_schema = SETTINGS_SCHEMA
    cost_model = COST_SERVICE

    @classmethod
    def api_resource(cls, settings: dict[str, Any]) -> str:
        return api_resource(settings)

    #: Fraction of failed requests above which a prediction job fails (models.<name>.
    #: max_error_rate overrides it). Answers that did arrive are cached: a re-run resends failures.
    max_error_rate: ClassVar[float] = 0.1
    # Its bar counts requests, those answered from the cache apart.
    shows_progress: ClassVar[bool] = True

    def __init__(self, name: str, settings: dict[str, Any], *, cache_dir: Path | None = None):
        super().__init__(name, settings, cache_dir=cache_dir)
        self.config = resolve_settings(name, settings)
        cache = None if cache_dir is None else ResponseCache(Path(cache_dir) / name)
        # Keyed by this adapter's request_identity, which a subclass may extend.
        self.client = ChatClient(name, self.config, cache, identify=self.request_identity)

    @property
    def cache(self) -> ResponseCache | None:
        return self.client.cache

    # -- checks -------------------------------------------------------------------------

    @classmethod
    def check_settings(cls, name: str, settings: dict[str, Any]) -> None:
        """The schema, and no credentials in an address (which would be written)."""
        super().check_settings(name, settings)
        for key in ("base_url", "cache_url"):
            problem = url_credentials_problem(f"models.{name}.settings.{key}", settings.get(key))
            if problem is not None:
                raise problem

    @classmethod
    def check_environment(cls, name: str, settings: dict[str, Any]) -> None:
        """Before any job: the key's variable is set and the endpoint accepts connections."""
        problem = endpoint_problem(
            f"models.{name}",
            resolve_settings(name, settings),
            key_fix="before running, or disable the model",
            url_fix=f"start the server or fix models.{name}.settings.base_url, and check the "
            "network (or set enabled: false)",
        )
        if problem is not None:
            raise problem

    def preflight(self, task: str) -> None:
        read_api_key(self.name, self.config)

    def identity(self) -> dict[str, Any]:
        """What determines the answers; not the key's variable, limits or prices."""
        return {"adapter": "openai_compatible", "settings": self.client.settings_of_record()}

    def cost(self, usage: dict[str, int]) -> float | None:
        """US dollars for this token usage, when both prices are configured."""
        return self.client.cost(usage)

    # -- answering ----------------------------------------------------------------------

    def predict(self, samples: Sequence[Sample]) -> Iterator[Response]:
        # The task in the label: two jobs of one model run side by side, one bar each.
        label = f"{samples[0].task}/{self.name}" if samples else self.name
        yield from self._answer(self.requests_for(samples), progress=label)

    def requests_for(self, samples: Sequence[Sample]) -> list[ChatRequest]:
        """The request of each sample, as :meth:`predict` sends it (the estimate counts
        these, so that its count of cached answers is exact)."""
        return [
            ChatRequest(s.filename, s.prompt, self.config["system_prompt"], s.image_png)
            for s in samples
        ]

    def cached(self, request: ChatRequest) -> Response | None:
        """The cached answer to ``request``, as :meth:`predict` would use it, or None."""
        return self.client.cached(request)

    def complete(
        self, prompt: str, system_prompt: str | None = None, image_png: bytes | None = None
    ) -> Response:
        """One free prompt, cached and retried like predictions."""
        return self.client.complete(prompt, system_prompt, image_png)

    def complete_many(
        self,
        prompts: Sequence[str],
        system_prompt: str | None = None,
        images_png: Sequence[bytes | None] | None = None,
        progress: str | None = None,
    ) -> list[Response]:
        """Several free prompts answered concurrently; Responses in prompt order."""
        return self.client.complete_many(prompts, system_prompt, images_png, progress)

    def request_identity(self, request: ChatRequest) -> dict[str, Any]:
        """The cache key's content: everything that determines the answer, no secrets."""
        return self.client.request_identity(request)

    def _answer(self, requests: Sequence[ChatRequest], progress: str | None) -> list[Response]:
        return self.client.answer(requests, progress)
