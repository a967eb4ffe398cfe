"""What every LLM judge shares: its prompt, its chat client, and batches of requests
with failure accounting."""

from __future__ import annotations

import contextlib
import logging
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from novabench import vllm_server
from novabench.cache import ResponseCache
from novabench.code_fingerprint import code_fingerprint
from novabench.errors import NovaError
from novabench.judges.base import ServiceRequests
from novabench.judges.llm import live_check
from novabench.judges.llm.answers import UnreadableAnswer
from novabench.judges.llm.settings import (
    TASK_PROTOCOLS,
    check_settings,
    endpoint_problem,
    read_prompt,
)
from novabench.models import chat_client
from novabench.provenance import sha256_text

log = logging.getLogger(__name__)

# The package: its code (requests, reading of answers, prompts) is the judges' identity.
PACKAGE = __name__.rpartition(".")[0]
T = TypeVar("T")


class LLMJudge:
    """Shared machinery: prompt, backend, batch requests with failure accounting."""

    task: ClassVar[str]
    protocol: ClassVar[str]  # how it asks (a key of PROMPT_SPECS)
    #: Tokens of one answer, for the cost estimate until answers were measured.
    answer_tokens: ClassVar[int]
    requests_per_image: ClassVar[int] = 1

    def __init__(
        self,
        name: str,
        settings: dict[str, Any],
        *,
        cache_dir: Path | None = None,
        resolve: Callable[[str], str] | None = None,
    ):
        self.name = name
        if len(TASK_PROTOCOLS[self.task]) > 1:  # the class decides the protocol, hence the prompt
            settings = {**settings, "protocol": self.protocol}
        resolved = check_settings(name, settings, resolve)
        self.prompt_path = resolved["prompts"][self.task]
        self.template = read_prompt(name, self.task, self.prompt_path, resolved["protocol"])
        self.max_failure_rate = resolved["max_failure_rate"]
        self.live_check_settings = resolved["live_check"]
        # An open-weight judge this job serves itself while it asks (vllm serve).
        self.serve = resolved["serve"]
        self.pid_dir = None if cache_dir is None else Path(cache_dir).parent / "servers"
        # A judge's cache sits apart from the models' (a judge may share a model's name).
        cache = None if cache_dir is None else ResponseCache(Path(cache_dir) / "judges" / name)
        self.client = chat_client.ChatClient(name, resolved["backend"], cache)
        self.counts: Counter[str] = Counter()
        # (served model, system fingerprint) of every answer read, cached ones included.
        self.served: Counter[tuple[str | None, str | None]] = Counter()

    @property
    def adapter(self) -> chat_client.ChatClient:
        """The chat client, under the name callers used when it was a model adapter."""
        return self.client

    def service_requests(self, name: str, select: Any = None) -> ServiceRequests:
        """What the cost estimate counts of this judge (``select``: which pairs it gets)."""
        config = self.client.config
        prices = (config["price_per_million_input"], config["price_per_million_output"])
        return ServiceRequests(
            name,
            self,
            select,
            self.template,
            config["system_prompt"] or "",
            prices,
            self.answer_tokens,
            self.requests_per_image,
        )

    # -- record ------------------------------------------------------------------------------

    def identity(self) -> dict[str, Any]:
        """Everything that determines the verdicts (no key): backend, settings, protocol,
        prompt, and the model that answered as the server named it (once it has)."""
        backend = self.client.settings_of_record()
        return {
            "name": f"llm/{backend['model']}",
            # The package's requests and reading of answers, and its prompts.
            "code": code_fingerprint(PACKAGE),
            "kind": "llm",
            "judge": self.name,
            "task": self.task,
            "protocol": self.protocol,
            "backend": {"adapter": "openai_compatible", **backend},
            "served": self.served_identity(),
            "prompt": self.prompt_path.name,
            "prompt_id": self.prompt_path.stem,
            "prompt_sha256": sha256_text(self.template),
            "max_failure_rate": self.max_failure_rate,
        }

    def served_identity(self) -> dict[str, Any]:
        """The served model names and system fingerprints of the answers so far, sorted;
        ``unknown`` counts answers without a model name (cache entries of older versions)."""
        models = {m for m, _ in self.served if m}
        fingerprints = {f for _, f in self.served if f}
        unknown = sum(n for (m, _), n in self.served.items() if not m)
        return {
            "model": sorted(models),
            "system_fingerprint": sorted(fingerprints),
            "answers": sum(self.served.values()),
            "unknown": unknown,
        }

    def usage(self) -> dict[str, Any]:
        """Requests so far: asked (distinct), cached, sent, failed, unreadable, tokens, cost;
        ``label_conflicts``: paired answers whose stated agreement contradicts their labels."""
        counts = {
            key: int(self.counts[key])
            for key in (
                "requests",
                "cached",
                "sent",
                "failed",
                "unreadable",
                "label_conflicts",
                "prompt_tokens",
                "completion_tokens",
            )
        }
        counts["cost_usd"] = self.client.cost(
            {k: counts[k] for k in ("prompt_tokens", "completion_tokens")}
        )
        return counts

    # -- the live check (novabench.judges.llm.live_check) ---------------------------------------

    def live_check(self) -> list[dict[str, Any]]:
        """Send the hand-labelled sample and return its record (none when switched off);
        NovaError past the bound unless ``live_check.stop`` is false."""
        record = live_check.run(self, self.live_check_settings)
        return [] if record is None else [record]

    def live_check_prompts(self) -> list[str]:
        """The prompts the live check asks (the cost estimate counts them)."""
        settings = self.live_check_settings
        size = settings[live_check.SAMPLE_SETTING[self.task]]
        pairs = live_check.sample_pairs(self.task, int(size), settings["seed"])
        return live_check.check_prompts(self, pairs) if pairs else []

    # -- requests ----------------------------------------------------------------------------

    def _cache_key(self, prompt: str) -> str:
        return self.client.cache_key(self._request(prompt))

    def _request(self, prompt: str) -> chat_client.ChatRequest:
        return chat_client.ChatRequest("judge", prompt, self.client.config["system_prompt"], None)

    def cached(self, prompt: str) -> bool:
        """Whether this prompt's answer is in the cache (the estimate counts the rest)."""
        cache = self.client.cache
        return cache is not None and self._cache_key(prompt) in cache

    def _check_can_send(self, prompts: Sequence[str]) -> None:
        """Only requests without a cached answer need the key and the endpoint."""
        cache = self.client.cache
        if cache is not None and all(self._cache_key(p) in cache for p in prompts):
            return
        if self.serve is not None:
            return  # the job starts the judge's server itself (_served)
        backend = self.client.config
        problem = endpoint_problem(self.name, backend)
        if problem is not None:
            raise problem

    @contextlib.contextmanager
    def _served(self, prompts: Sequence[str]) -> Iterator[None]:
        """A served judge's vLLM server while prompts without a cached answer are asked,
        with a managed model's lifecycle (novabench.vllm_server); answers are cached under
        the address of record, not the server's port."""
        cache = self.client.cache
        uncached = cache is None or not all(self._cache_key(p) in cache for p in prompts)
        if self.serve is None or not uncached:
            yield
            return
        config = self.client.config
        record = config["cache_url"] or config["base_url"]
        model = config["model"]
        config["cache_url"] = record
        served = vllm_server.managed_server(self.name, model, self.serve, self.pid_dir)
        with (
            served as server,
            self.client.serving_at(server.base_url, server.api_key, server.running),
        ):  # each request carries the key the server checks; none kept once it is gone
            yield

    def _forget(self, prompt: str) -> None:
        """Drop a cached answer (an unreadable one), so that the next run asks again."""
        self.client.forget(self._request(prompt))

    def _ask(self, prompts: Sequence[str], read: Callable[[str, str], T]) -> list[T | None]:
        """Every prompt's verdict, ``read(prompt, answer)`` (None where the judge could not
        give one, within the allowed failure rate); identical prompts are sent once."""
        unique = list(dict.fromkeys(prompts))
        if not unique:
            return []
        self._check_can_send(unique)
        with self._served(unique):
            responses = self.client.complete_many(
                unique, progress=f"judge {self.name} ({self.task})"
            )
        verdicts: dict[str, T | None] = {}
        failed: list[str] = []
        unreadable: list[tuple[str, str]] = []  # (prompt, why)
        for prompt, response in zip(unique, responses, strict=True):
            self.counts["requests"] += 1
            self.counts["cached" if response.cached else "sent"] += 1
            if not response.cached:
                for key in ("prompt_tokens", "completion_tokens"):
                    self.counts[key] += (response.usage or {}).get(key, 0)
            verdicts[prompt] = None
            if response.error is not None or response.raw is None:
                failed.append(response.error or "no answer")
                continue
            self.served[(response.served_model, response.system_fingerprint)] += 1
            try:
                verdicts[prompt] = read(prompt, response.raw)
            except UnreadableAnswer as exc:
                snippet = " ".join(response.raw.split())[:120]
                unreadable.append((prompt, f"{exc}: {snippet!r}"))
        self.counts["failed"] += len(failed)
        self.counts["unreadable"] += len(unreadable)
        bad = len(failed) + len(unreadable)
        log.info(
            "judge %s (%s): %d distinct requests, %d from the cache, %d failed, %d unreadable",
            self.name,
            self.task,
            len(unique),
            sum(r.cached for r in responses),
            len(failed),
            len(unreadable),
        )
        if bad and 100.0 * bad / len(unique) > self.max_failure_rate:
            for prompt, _ in unreadable:
                self._forget(prompt)
            raise NovaError(self._failure_message(len(unique), failed, unreadable), self._fix())
        for reason in failed:
            log.warning("judge %s: a request failed (%s); scored as no verdict", self.name, reason)
        for _, reason in unreadable:
            log.warning("judge %s: unreadable answer (%s); scored as no verdict", self.name, reason)
        return [verdicts[p] for p in prompts]

    def _failure_message(
        self, total: int, failed: list[str], unreadable: list[tuple[str, str]]
    ) -> str:
        parts = []
        if failed:
            parts.append(f"{len(failed)} of {total} requests failed (first: {failed[0]})")
        if unreadable:
            parts.append(
                f"{len(unreadable)} of {total} answers could not be read "
                f"(first: {unreadable[0][1]})"
            )
        return (
            f"judges.{self.name} ({self.task}): {' and '.join(parts)}, more than "
            f"max_failure_rate {self.max_failure_rate:g}% allows; no scores were written"
        )

    def _fix(self) -> str:
        return (
            "re-run scoring: answers that arrived are cached and only the rest is asked "
            "again; if the endpoint fails, check it and the key; if answers stay unreadable, "
            f"revise the judge prompt or raise judges.{self.name}.settings.max_failure_rate"
        )
