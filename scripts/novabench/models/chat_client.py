"""An async chat-completions client: the requests of the models and of the LLM judges.

Sends ``POST {base_url}/chat/completions`` (OpenAI's API, Gemini's OpenAI-compatible
endpoint, ``vllm serve``, Ollama) through the official ``openai`` client (async). The
``openai_compatible`` and ``vllm`` model adapters answer samples with it, and the LLM judges
free prompts (:meth:`ChatClient.complete_many`).

Robust enough to run overnight against a paid API:

- every successful answer goes into a content-addressed cache (:mod:`novabench.cache`) as
  soon as it arrives (written by a thread, flushed to disk in batches), so a killed job
  resumes without re-sending a request that already succeeded; failures are never cached;
  identical requests in one job are sent once;
- 429, 408/409, 5xx, timeouts, connection errors and malformed answers are retried with
  exponential backoff and full jitter, honouring ``Retry-After``, up to ``max_attempts`` sends
  (the client's own retries are off so the count is ours); other statuses (400, 401, 404...)
  are not; a request that still fails becomes a Response with ``error`` (record status
  ``error``), and the job carries on; any other exception is a bug and fails the job;
- at most ``concurrency`` requests in flight per job, fewer while the server throttles: a
  429 shrinks the window of requests in flight and paces the sends, answers grow it back
  (:mod:`novabench.pacing`), so the job finds the provider's quota by itself;
  ``requests_per_minute`` caps the rate when the quota is known; Snakemake's
  ``api_<provider>`` resource caps jobs per provider across the whole run;
- the API key is read from the environment variable named by ``api_key_env`` and never
  written anywhere: not in settings, logs, errors, the cache or the predictions (and an
  address with credentials, ``https://user:password@host``, is refused); keys a
  server echoes (in an error or an answer) are redacted before anything is stored or
  forwarded (:mod:`novabench.redaction`), and counted;
- a hostile or broken server cannot hold, flood or divert a job: ``timeout_s`` bounds each
  send from start to last byte (a server trickling bytes is cut off),
  ``request_time_limit_min`` a request's sends and waits together (a server answering 429
  with ``Retry-After: 600`` for ever ends it at the limit), an answer over
  ``max_response_mb`` or not UTF-8 is a failed send, and a redirect to another host is
  refused (:mod:`novabench.http_guards`);
- a request another process is already sending (a concurrent run, or a job left running by
  a killed ``snakemake``) is not sent again: each request's cache entry is claimed across
  processes, and a job finding one claimed waits for it and reads the answer.
"""

from __future__ import annotations

import asyncio
import base64
import concurrent.futures
import contextlib
import dataclasses
import email.utils
import functools
import hashlib
import json
import logging
import os
import random
import re
import socket
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from novabench.cache import CacheWriter, ResponseCache, request_key
from novabench.errors import ConfigError, NovaError, settings_error
from novabench.models.base import Response
from novabench.pacing import AdaptiveWindow, Pacer
from novabench.progress import Progress
from novabench.redaction import Redactor, configured_keys
from novabench.tokens import dollars

log = logging.getLogger(__name__)

# The key sent to servers that take none (a local vLLM or Ollama): the client needs one.
DUMMY_KEY = "EMPTY"
# Statuses worth another try: rate limit, request timeout, conflict, server errors.
RETRY_STATUSES = frozenset({408, 409, 429})
# A Retry-After longer than this is not waited for in full (the attempt budget still applies).
MAX_RETRY_AFTER_S = 600.0
# How often new cache entries are flushed to disk (what a power loss may cost, at most).
SYNC_EVERY_S = 1.0
# How often a request whose cache entry another process has claimed looks again: from
# the first to the last interval, doubling (thousands may wait at once).
CLAIM_POLL_S = (0.05, 1.0)

DEFAULTS: dict[str, Any] = {
    "temperature": 0.1,  # the paper's generation settings
    "max_tokens": 2048,
    "seed": None,
    "extra_body": {},
    "system_prompt": None,
    "concurrency": 8,
    "initial_concurrency": None,
    "requests_per_minute": None,
    "timeout_s": 120.0,
    "connect_timeout_s": 5.0,
    # Answers are kilobytes (max_tokens bounds them); megabytes are a broken server.
    "max_response_mb": 4.0,
    "max_attempts": 6,
    # A request's sends and waits together: then it fails, however often the server says
    # to come back later.
    "request_time_limit_min": 15.0,
    "backoff_base_s": 1.0,
    "backoff_max_s": 60.0,
    "price_per_million_input": None,
    "price_per_million_output": None,
    "provider": None,
    # The address answers are cached under (default: base_url): set it to the address of
    # record to keep one cache when the server moves (another node, a job's own server).
    "cache_url": None,
}
# Settings that change what the model answers; everything else is operational.
GENERATION_KEYS = ("temperature", "max_tokens", "seed", "extra_body")

_NUMBER = {"type": "number", "minimum": 0}
_POSITIVE = {"type": "number", "exclusiveMinimum": 0}
SETTINGS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["base_url", "model", "api_key_env"],
    "properties": {
        "base_url": {"type": "string", "pattern": "^https?://[^/]+"},
        "model": {"type": "string", "minLength": 1},
        "api_key_env": {"type": ["string", "null"], "pattern": r"^[A-Za-z_][A-Za-z0-9_]*\Z"},
        "temperature": {"type": ["number", "null"], "minimum": 0},
        "max_tokens": {"type": ["integer", "null"], "minimum": 1},
        "seed": {"type": ["integer", "null"]},
        "extra_body": {"type": "object"},
        "system_prompt": {"type": ["string", "null"]},
        "concurrency": {"type": "integer", "minimum": 1, "maximum": 1024},
        "initial_concurrency": {"type": ["integer", "null"], "minimum": 1, "maximum": 1024},
        "requests_per_minute": {"type": ["number", "null"], "exclusiveMinimum": 0},
        "timeout_s": _POSITIVE,
        "connect_timeout_s": _POSITIVE,
        "max_response_mb": _POSITIVE,
        "max_attempts": {"type": "integer", "minimum": 1, "maximum": 100},
        "request_time_limit_min": _POSITIVE,
        "backoff_base_s": _NUMBER,
        "backoff_max_s": _NUMBER,
        "price_per_million_input": {"type": ["number", "null"], "minimum": 0},
        "price_per_million_output": {"type": ["number", "null"], "minimum": 0},
        "provider": {"type": ["string", "null"], "pattern": r"^[A-Za-z0-9_]+\Z"},
        "cache_url": {"type": ["string", "null"], "pattern": "^https?://[^/]+"},
    },
}


def resolve_settings(
    name: str, settings: dict[str, Any], where: str | None = None
) -> dict[str, Any]:
    """Check a model's settings and fill in the defaults; ConfigError names the key
    (under ``where``, default ``models.<name>.settings``)."""
    import jsonschema

    where = where or f"models.{name}.settings"
    try:
        jsonschema.validate(settings, SETTINGS_SCHEMA)
    except jsonschema.ValidationError as exc:
        raise settings_error(
            exc, where, "see the openai_compatible adapter in config/README.md"
        ) from None
    for key in ("base_url", "cache_url"):
        problem = url_credentials_problem(f"{where}.{key}", settings.get(key))
        if problem is not None:
            raise problem
    resolved = {**DEFAULTS, **settings}
    resolved["base_url"] = resolved["base_url"].rstrip("/")
    if resolved["cache_url"]:
        resolved["cache_url"] = resolved["cache_url"].rstrip("/")
    return resolved


def url_credentials_problem(where: str, url: str | None) -> ConfigError | None:
    """An address holding a user or password (``https://user:password@host/v1``) would
    write them into the manifest, the logs, the cache and the reports, and the client would
    send them as Basic authentication instead of the key: refused, without repeating it."""
    if url is None or "@" not in urlsplit(url).netloc:
        return None
    return ConfigError(
        f"{where} holds credentials (user:password@), which would be written wherever the "
        "address is",
        "remove them from the address and put the key in an environment variable named by "
        "api_key_env",
    )


def api_resource(settings: dict[str, Any]) -> str:
    """The Snakemake resource that caps jobs per provider: ``api_<provider>``.

    ``provider`` defaults to the endpoint's host (and port), so two models on one server
    share a cap unless told otherwise.
    """
    provider = settings.get("provider")
    if not provider:
        parts = urlsplit(str(settings.get("base_url", "")))
        host = re.sub(r"^(api|www)\.", "", (parts.hostname or "unknown").lower())
        provider = host + (f"_{parts.port}" if parts.port else "")
    return "api_" + re.sub(r"[^A-Za-z0-9]+", "_", provider).strip("_").lower()


def endpoint_address(base_url: str) -> tuple[str, int]:
    parts = urlsplit(base_url)
    return parts.hostname or "", parts.port or (443 if parts.scheme == "https" else 80)


# An answer that came after the job's own server had ended (see ChatClient.serving_at).
SERVER_GONE = (
    "answered after the server the job started had ended: not its answer (another process "
    "on its port?), not kept"
)
# Stands for the image's data URL while the rest of a request is encoded (see body()).
_IMAGE_SLOT = "\x00image\x00"


@dataclass(frozen=True)
class ChatRequest:
    """One chat-completions request, before it is sent."""

    label: str  # names the request in logs and errors (file name, or "prompt")
    prompt: str
    system_prompt: str | None
    image_png: bytes | None

    @functools.cached_property
    def image_sha256(self) -> str | None:
        """Hashed once: the cache key and the log line both need it."""
        return None if self.image_png is None else _sha256(self.image_png)

    def messages(self, image_url: str | None = None) -> list[dict[str, Any]]:
        messages: list[dict[str, Any]] = []
        if self.system_prompt:
            messages.append({"role": "system", "content": self.system_prompt})
        if self.image_png is None:
            messages.append({"role": "user", "content": self.prompt})
        else:
            url = image_url
            if url is None:
                url = "data:image/png;base64," + base64.b64encode(self.image_png).decode("ascii")
            messages.append(
                {
                    "role": "user",
                    # Image first, then the question: the order VLM chat templates expect.
                    "content": [
                        {"type": "image_url", "image_url": {"url": url}},
                        {"type": "text", "text": self.prompt},
                    ],
                }
            )
        return messages

    def body(self, fields: dict[str, Any]) -> bytes:
        """The JSON body: ``fields`` (model, generation settings) and the messages.

        Encoded once per request and re-sent as is on retries. The image's base64 is spliced
        into the encoded rest rather than passed through ``json.dumps``, which would scan its
        ~200 KB for characters to escape (base64 has none): the client's main cost per
        request, with the ``openai`` client's own walk over the body, which sending these
        bytes as they are avoids.
        """
        if self.image_png is None:
            return json.dumps({**fields, "messages": self.messages()}).encode()
        text = json.dumps({**fields, "messages": self.messages(_IMAGE_SLOT)})
        slot = json.dumps(_IMAGE_SLOT)
        head, found, tail = text.partition(slot)
        if not found or slot in tail:  # the slot's spelling also in a prompt: no shortcut
            return json.dumps({**fields, "messages": self.messages()}).encode()
        image = base64.b64encode(self.image_png)
        return b"".join((head.encode(), b'"data:image/png;base64,', image, b'"', tail.encode()))

    def describe(self) -> str:
        """The request for a log line: no image bytes (their size and hash instead)."""
        image = (
            "none"
            if self.image_png is None
            else f"png {len(self.image_png)} bytes sha256={self.image_sha256[:16]}"
        )
        system = "none" if not self.system_prompt else f"{len(self.system_prompt)} chars"
        return f"{self.label}: image {image}, system prompt {system}, prompt {self.prompt!r}"


class ChatClient:
    """Answers chat requests for one endpoint, cached under ``cache`` when there is one.

    ``config``: settings resolved by :func:`resolve_settings`, read at each send rather than
    copied (a managed server's address set on it later is where requests go). ``identify``:
    a request's cache-key content, :meth:`request_identity` unless an adapter keys requests
    its own way.
    """

    def __init__(
        self,
        name: str,
        config: dict[str, Any],
        cache: ResponseCache | None = None,
        identify: Callable[[ChatRequest], dict[str, Any]] | None = None,
    ):
        self.name, self.config, self.cache = name, config, cache
        if cache is not None:  # this client writes the entries, so it knows their shape
            cache.response_problem = response_problem
        self._identify = identify or self.request_identity
        self._request_logged = False
        # A job's own server's key (see serving_at), in place of api_key_env's, and
        # whether that server still runs.
        self._session_key: str | None = None
        self._still_serving: Callable[[], bool] = lambda: True

    @contextlib.contextmanager
    def serving_at(
        self, base_url: str, api_key: str, still_serving: Callable[[], bool]
    ) -> Iterator[None]:
        """Send to ``base_url`` with ``api_key`` meanwhile (a server the job started, which
        checks the key); answers stay cached under the address of record. An answer that
        arrives once ``still_serving()`` is False came from whoever took the port after
        the server ended: a failure, never cached."""
        previous = self.config["base_url"]
        self.config["base_url"], self._session_key = base_url, api_key
        self._still_serving = still_serving
        self.__dict__.pop("redactor", None)  # the key joins the redacted ones
        try:
            yield
        finally:
            self.config["base_url"], self._session_key = previous, None
            self._still_serving = lambda: True
            self.__dict__.pop("redactor", None)

    def settings_of_record(self) -> dict[str, Any]:
        """What determines the answers; not the key's variable, limits or prices."""
        keep = ("base_url", "model", "system_prompt", *GENERATION_KEYS)
        settings = {k: self.config[k] for k in keep}
        # The address of record: a server that moves answers the same.
        settings["base_url"] = self.config["cache_url"] or self.config["base_url"]
        return settings

    def cost(self, usage: dict[str, int]) -> float | None:
        """US dollars for this token usage, when both prices are configured."""
        usd = dollars(
            usage.get("prompt_tokens", 0),
            usage.get("completion_tokens", 0),
            self.config["price_per_million_input"],
            self.config["price_per_million_output"],
        )
        return None if usd is None else round(usd, 6)

    @functools.cached_property
    def redactor(self) -> Redactor:
        """Removes this endpoint's key and every configured one from what servers send."""
        variable = self.config["api_key_env"]
        own = self._session_key or (None if variable is None else os.environ.get(variable))
        return configured_keys(own)

    def request_identity(self, request: ChatRequest) -> dict[str, Any]:
        """The cache key's content: everything that determines the answer, no secrets."""
        return {
            "model": self.config["model"],
            "base_url": self.config["cache_url"] or self.config["base_url"],
            "generation": {k: self.config[k] for k in GENERATION_KEYS},
            "system_prompt": request.system_prompt,
            "prompt": request.prompt,
            "image_sha256": request.image_sha256,
        }

    def cache_key(self, request: ChatRequest) -> str:
        """The key of ``request``'s entry in the cache."""
        return request_key(self._identify(request))

    def cached(self, request: ChatRequest) -> Response | None:
        """The cached answer to ``request``, as :meth:`answer` would use it, or None."""
        return self._cached(self.cache_key(request))

    def _cached(self, key: str) -> Response | None:
        entry = None if self.cache is None else self.cache.get(key)
        return None if entry is None else _from_cache(entry["response"], self.redactor)

    def forget(self, request: ChatRequest) -> None:
        """Drop the cached answer to ``request`` (an unreadable one), so that the next run
        asks again."""
        if self.cache is not None:
            self.cache.path(self.cache_key(request)).unlink(missing_ok=True)

    def complete(
        self, prompt: str, system_prompt: str | None = None, image_png: bytes | None = None
    ) -> Response:
        """One free prompt (e.g. for an LLM judge), cached and retried like predictions."""
        return self.complete_many([prompt], system_prompt, [image_png])[0]

    def complete_many(
        self,
        prompts: Sequence[str],
        system_prompt: str | None = None,
        images_png: Sequence[bytes | None] | None = None,
        progress: str | None = None,
    ) -> list[Response]:
        """Several free prompts answered concurrently; Responses in prompt order.
        ``progress``: the label of a progress bar (None: none)."""
        system = system_prompt if system_prompt is not None else self.config["system_prompt"]
        images = list(images_png) if images_png is not None else [None] * len(prompts)
        requests = [
            ChatRequest(f"prompt {i}", p, system, img)
            for i, (p, img) in enumerate(zip(prompts, images, strict=True))
        ]
        return self.answer(requests, progress=progress)

    def answer(self, requests: Sequence[ChatRequest], progress: str | None) -> list[Response]:
        """Answer every request: cache hits first, then each distinct request once."""
        _quiet_http_loggers()
        identities = [self._identify(r) for r in requests]
        keys = [request_key(i) for i in identities]
        responses: list[Response | None] = [None] * len(requests)
        if self.cache is not None:
            self.cache.remove_stale_partials()
            for i, key in enumerate(keys):
                responses[i] = self._cached(key)
        # Identical requests (one key) are sent once; the others reuse the answer.
        copies: dict[str, list[int]] = {}
        for i, response in enumerate(responses):
            if response is None:
                copies.setdefault(keys[i], []).append(i)
        cached = len(requests) - sum(map(len, copies.values()))
        if copies and self.cache is not None:
            self.cache.check_writable()
        meter = Progress(
            len(requests),
            progress,
            unit="req",
            initial=cached,
            counts={"ok": 0, "errors": 0, "cached": cached},
        )
        try:
            if copies:
                firsts = [indices[0] for indices in copies.values()]
                answers = self._send_distinct(
                    [requests[i] for i in firsts],
                    [(keys[i], identities[i]) for i in firsts],
                    meter,
                )
                for indices, answer in zip(copies.values(), answers, strict=True):
                    responses[indices[0]] = answer
                    for i in indices[1:]:
                        responses[i] = _reused(answer)
                        meter.update(_outcome(responses[i]))
        finally:
            meter.close()
        return [r for r in responses if r is not None]

    def _send_distinct(
        self,
        requests: Sequence[ChatRequest],
        keyed: Sequence[tuple[str, dict[str, Any]]],
        meter: Progress,
    ) -> list[Response]:
        """Send the requests that need an answer; Responses in request order."""
        rpm = self.config["requests_per_minute"]
        log.info(
            "%s: %d requests to %s (model %s), %d answered from the cache, "
            "concurrency up to %d (starting at %d)%s",
            self.name,
            len(requests),
            self.config["base_url"],
            self.config["model"],
            meter.counts["cached"],
            self.config["concurrency"],
            self.config["initial_concurrency"] or self.config["concurrency"],
            "" if rpm is None else f", at most {rpm}/min",
        )
        answers: list[Response | None] = [None] * len(requests)

        def record(j: int, response: Response) -> None:
            answers[j] = response
            meter.update(_outcome(response))

        _run_sync(self._send_all(requests, keyed, record))
        return [a for a in answers if a is not None]

    async def _send_all(
        self,
        requests: Sequence[ChatRequest],
        keyed: Sequence[tuple[str, dict[str, Any]]],
        record: Callable[[int, Response], None],
    ) -> None:
        """Send requests under one client and one pacer; cache each answer, then record it."""
        key = self._session_key or read_api_key(self.name, self.config)
        window = self._window()
        pacer = Pacer(window)
        client = self._http_client(key)
        # Entries are written by a thread (the loop never waits on the disk) without an fsync
        # each, and flushed in batches every second and at the end (see novabench.cache).
        writer = None if self.cache is None else CacheWriter(self.cache, SYNC_EVERY_S)
        claims = _Claims(self.name, self.cache)

        async def answer(j: int) -> None:
            entry_key = keyed[j][0]
            # Sent by another process meanwhile (a concurrent run, a killed run's orphan):
            # its answer, not a second send.
            elsewhere = await claims.take(entry_key, self._cached)
            if elsewhere is not None:
                record(j, elsewhere)
                return
            try:
                response = await self._send(client, pacer, requests[j], key)
            except BaseException:
                claims.release(entry_key)
                raise
            if response.error is None and not self._still_serving():
                response = Response(raw=None, error=SERVER_GONE)
            if response.error is None and writer is not None:
                # Released once written: a waiting process then finds the entry.
                then = functools.partial(claims.release, entry_key)
                writer.put(entry_key, _to_cache(response), keyed[j][1], then)
            else:
                claims.release(entry_key)
            record(j, response)

        try:
            async with client:
                await _all_or_none([answer(j) for j in range(len(requests))])
        except BaseException:
            if writer is not None:
                with contextlib.suppress(Exception):  # the first error is the one to see
                    writer.close()
            claims.release_all()
            raise
        if writer is not None:
            writer.close()
        claims.release_all()
        claims.log()
        _log_pacing(self.name, window)

    def _http_client(self, key: str | None) -> Any:
        """The ``openai`` async client of one batch of sends."""
        import openai

        from novabench.http_guards import event_hooks

        timeout = openai.Timeout(self.config["timeout_s"], connect=self.config["connect_timeout_s"])
        return openai.AsyncOpenAI(
            api_key=key or DUMMY_KEY,
            base_url=self.config["base_url"],
            timeout=timeout,
            max_retries=0,  # retries are ours: counted, logged, bounded
            # The client's defaults (pool limits, proxies from the environment), plus the
            # guards: no redirect to another host, no answer over max_response_mb.
            http_client=openai.DefaultAsyncHttpxClient(
                timeout=timeout,
                event_hooks=event_hooks(
                    self.config["base_url"], int(self.config["max_response_mb"] * 1e6)
                ),
            ),
        )

    def _window(self) -> AdaptiveWindow:
        rpm = self.config["requests_per_minute"]
        start = self.config["initial_concurrency"] or self.config["concurrency"]
        return AdaptiveWindow(
            min(start, self.config["concurrency"]),
            self.config["concurrency"],
            requests_per_second=None if rpm is None else rpm / 60,
        )

    async def _send(
        self, client: Any, pacer: Pacer, request: ChatRequest, key: str | None
    ) -> Response:
        """Send one request with bounded, jittered retries, when the pacer lets it.

        API and transport faults become a Response with ``error``; anything else is a bug
        here and raises, failing the job rather than passing for the model's answer.
        """
        attempts = self.config["max_attempts"]
        fields: dict[str, Any] = {"model": self.config["model"]}
        for name in ("temperature", "max_tokens", "seed"):
            if self.config[name] is not None:
                fields[name] = self.config[name]
        body: bytes | None = None
        deadline = _Deadline(self.config["request_time_limit_min"])
        reason = ""
        for attempt in range(1, attempts + 1):
            ticket = await deadline.turn(pacer)
            if ticket is None:
                reason = deadline.exceeded("waiting for a turn to send", reason)
                attempt -= 1
                break
            outcome: Response | _Failure | None = None
            try:
                # Encoded once, when its turn comes: encoding every request of the job up
                # front would hold the first sends back and all the bodies in memory.
                body = body or request.body({**fields, **self.config["extra_body"]})
                self._log_request(request, attempt)
                outcome = await self._attempt(client, body)
            finally:
                pacer.release(ticket, **_pacing_signal(outcome))
            if isinstance(outcome, Response):
                return outcome
            reason = outcome.reason
            if not outcome.retryable or attempt == attempts:
                break
            delay = self._backoff(attempt, outcome.retry_after)
            if delay >= deadline.left():
                reason = deadline.exceeded(f"the next try in {delay:.0f} s", reason)
                break
            log.warning(
                "%s: attempt %d/%d failed (%s); retrying in %.1f s",
                request.label,
                attempt,
                attempts,
                reason,
                delay,
            )
            await asyncio.sleep(delay)
        log.error("%s: failed after %d attempt(s): %s", request.label, attempt, reason)
        return Response(raw=None, error=f"{reason} (after {attempt} attempt(s))")

    def _log_request(self, request: ChatRequest, attempt: int) -> None:
        # The first request of a run goes to the job's log (INFO), so the log shows what was
        # sent; the others at DEBUG.
        level = logging.DEBUG if self._request_logged else logging.INFO
        self._request_logged = True
        if log.isEnabledFor(level):
            log.log(
                level,
                "POST %s/chat/completions model=%s attempt %d/%d %s",
                self.config["base_url"],
                self.config["model"],
                attempt,
                self.config["max_attempts"],
                request.describe(),
            )

    async def _attempt(self, client: Any, body: bytes) -> Response | _Failure:
        """One send: the answer, or why the server did not give one (keys redacted)."""
        import openai
        from openai.types.chat import ChatCompletion

        from novabench.http_guards import Refused

        started = time.perf_counter()
        short = functools.partial(_short, redact=self.redactor)
        try:
            # The client's timeout is per read: a server sending a byte every few seconds
            # would hold the request for ever. This one bounds the send, start to last byte.
            async with asyncio.timeout(self.config["timeout_s"]):
                # The body goes as encoded bytes: the client's typed create() would walk and
                # re-encode its ~200 KB on every send. Statuses and errors are the client's.
                completion = await client.post(
                    "/chat/completions", cast_to=ChatCompletion, content=body
                )
        except openai.APIStatusError as exc:
            return _status_failure(exc, short)
        except (openai.APITimeoutError, TimeoutError):
            return _Failure(f"timed out after {self.config['timeout_s']} s", retryable=True)
        except openai.APIConnectionError as exc:
            cause = exc.__cause__ or exc
            return _Failure(f"connection error: {short(str(cause) or repr(cause))}", True)
        except Refused as exc:  # a redirect to another host, an answer too large
            return _Failure(short(exc), retryable=False)
        except UnicodeDecodeError as exc:
            # Not text: a broken proxy or server; the next try may get a real answer.
            return _Failure(f"malformed answer: the body is not UTF-8 ({short(exc)})", True)
        except json.JSONDecodeError as exc:
            # A cut body or a proxy's error page: the next try may get a real answer.
            return _Failure(f"malformed answer: the body is not JSON ({short(exc)})", True)
        except openai.APIResponseValidationError as exc:
            return _Failure(f"malformed answer: {short(exc.message)}", True)
        except RecursionError:
            return _Failure("malformed answer: the body is nested too deeply to read", True)
        except ValueError as exc:
            # JSON that Python will not read: a number of over 4,300 digits.
            reason = short(str(exc).split(";")[0])  # not the advice to raise Python's limit
            return _Failure(f"malformed answer: the body cannot be read ({reason})", True)
        try:
            response = _response(completion, time.perf_counter() - started)
        except MalformedAnswer as exc:
            return _Failure(f"malformed answer: {short(exc)}", retryable=True)
        if _blank(completion):
            # Nothing to parse and nothing refused: a glitch to retry, never to cache.
            return _Failure("malformed answer: empty content and no refusal", retryable=True)
        return _redacted(response, self.redactor)

    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        """Full-jitter exponential backoff; a server's Retry-After is a lower bound."""
        base, cap = self.config["backoff_base_s"], self.config["backoff_max_s"]
        delay = random.uniform(0, min(cap, base * 2 ** (attempt - 1)))
        if retry_after is not None:
            # Waiting at least what the server asked, plus a little jitter so that requests
            # told the same thing do not all come back at the same instant.
            wait = min(retry_after, MAX_RETRY_AFTER_S)
            delay = wait + random.uniform(0, max(0.1 * wait, 0.05))
        return delay


# -- helpers ----------------------------------------------------------------------------


def endpoint_problem(
    where: str,
    config: dict[str, Any],
    *,
    key_fix: str,
    url_fix: str,
    holder: str = "the API key",
) -> NovaError | None:
    """Why requests to this endpoint cannot work (the key's variable unset, the server not
    accepting connections), or None. Shared by models and LLM judges (``where`` names the
    config entry)."""
    problem = key_problem(where, config, key_fix=key_fix, holder=holder)
    if problem is not None:
        return problem
    host, port = endpoint_address(config["base_url"])
    try:
        with socket.create_connection((host, port), timeout=config["connect_timeout_s"]):
            return None
    except OSError as exc:
        return NovaError(
            f"{where}: cannot reach {config['base_url']} ({exc.strerror or exc})", url_fix
        )


def key_problem(
    where: str, config: dict[str, Any], *, key_fix: str, holder: str = "the API key"
) -> NovaError | None:
    """Why the API key cannot be read (its variable unset or empty), or None."""
    variable = config["api_key_env"]
    if variable is not None and not os.environ.get(variable, "").strip():
        return NovaError(
            f"{where}: environment variable {variable} is not set (it must hold {holder})",
            f"export {variable}=... {key_fix}",
        )
    return None


def read_api_key(name: str, config: dict[str, Any]) -> str | None:
    """The API key from its variable (None: the endpoint takes none); NovaError if unset."""
    problem = key_problem(f"models.{name}", config, key_fix="before running, or disable the model")
    if problem is not None:
        raise problem
    variable = config["api_key_env"]
    return None if variable is None else os.environ[variable].strip()


class _Deadline:
    """The time limit of one request across its sends and waits (``request_time_limit_min``)."""

    def __init__(self, minutes: float):
        self.minutes = minutes
        self.started = time.monotonic()
        self.end = self.started + 60 * minutes

    def left(self) -> float:
        return max(0.0, self.end - time.monotonic())

    async def turn(self, pacer: Pacer) -> int | None:
        """The pacer's ticket, or None if the limit comes first (the pacer holds every send
        while a server says to wait, for up to MAX_RETRY_AFTER_S and more)."""
        try:
            async with asyncio.timeout(self.left()):
                return await pacer.acquire()
        except TimeoutError:
            return None

    def exceeded(self, what: str, last_failure: str = "") -> str:
        gave_up = (
            f"gave up after {time.monotonic() - self.started:.0f} s: {what} would pass "
            f"request_time_limit_min ({self.minutes:g} min)"
        )
        return f"{last_failure}; {gave_up}" if last_failure else gave_up


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _short(value: Any, limit: int = 300, redact: Callable[[str], str] | None = None) -> str:
    """One line of at most ``limit`` characters; keys redacted *before* the cut, which
    would otherwise leave a key straddling it as its first characters."""
    text = str(value) if redact is None else redact(str(value))
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + "..."


def _retry_after(headers: Any) -> float | None:
    """Seconds a server asked us to wait: ``retry-after-ms``, ``Retry-After`` seconds or date."""
    if headers is None:
        return None
    try:
        milliseconds = headers.get("retry-after-ms")
        if milliseconds is not None:
            return max(0.0, float(milliseconds) / 1000)
        value = headers.get("retry-after")
        if value is None:
            return None
        try:
            return max(0.0, float(value))
        except ValueError:
            when = email.utils.parsedate_to_datetime(value)
            return max(0.0, when.timestamp() - time.time())
    except (TypeError, ValueError):
        return None


class MalformedAnswer(Exception):
    """A 2xx answer that is not a chat completion, e.g. from a misbehaving proxy or server."""


@dataclass(frozen=True)
class _Failure:
    """Why one send got no answer, and whether another may."""

    reason: str
    retryable: bool
    retry_after: float | None = None
    throttled: bool = False  # a rate limit (429) that waiting cures: the pacer slows down


def _status_failure(exc: Any, short: Callable[[Any], str] = _short) -> _Failure:
    """An HTTP error status: 408/409/429 and 5xx are worth another try, others are not."""
    status = exc.status_code
    retryable = status in RETRY_STATUSES or status >= 500
    if getattr(exc, "code", None) == "insufficient_quota":
        retryable = False  # a 429 that waiting does not cure
    message = re.sub(r"^Error code: \d+ - ", "", str(exc.message))
    return _Failure(
        f"HTTP {status}: {short(message)}",
        retryable,
        _retry_after(exc.response.headers),
        throttled=retryable and status == 429,
    )


def _response(completion: Any, latency_s: float) -> Response:
    """A Response from a chat completion; the API's ``refusal`` field marks a refusal.

    The client does not validate what the server sent, so each field is checked here:
    anything that is not a chat completion raises MalformedAnswer.
    """
    choices = getattr(completion, "choices", None)
    if not isinstance(choices, list) or not choices:
        raise MalformedAnswer(f"no choices in {type(completion).__name__} {_short(completion, 80)}")
    message = getattr(choices[0], "message", None)
    if message is None or not hasattr(message, "content"):
        raise MalformedAnswer(f"choices[0] has no message ({_short(choices[0], 80)})")
    raw = message.content
    refusal = getattr(message, "refusal", None)
    if raw is None:
        raw = refusal or ""
    if not isinstance(raw, str):
        raise MalformedAnswer(f"the message content is {type(raw).__name__}, not text")
    if _not_utf8(raw):  # JSON may spell lone surrogates (\ud800), which no file can hold
        raise MalformedAnswer("the message content is not valid Unicode (a lone surrogate)")
    usage = None
    if getattr(completion, "usage", None) is not None:
        usage = {
            k: int(v)
            for k in ("prompt_tokens", "completion_tokens", "total_tokens")
            if isinstance(v := getattr(completion.usage, k, None), int)
        }
    refused = isinstance(refusal, str) and bool(refusal.strip())
    served = {
        name: value
        for name in ("model", "system_fingerprint")
        if isinstance(value := getattr(completion, name, None), str) and value
        if not _not_utf8(value)
    }
    return Response(
        raw=raw,
        latency_s=latency_s,
        usage=usage or None,
        refusal=refused,
        served_model=served.get("model"),
        system_fingerprint=served.get("system_fingerprint"),
    )


def _redacted(response: Response, redactor: Redactor) -> Response:
    """The answer without keys (in its text and in the names the server gives itself),
    with how many were removed."""
    assert response.raw is not None
    raw, n = redactor.redact(response.raw)
    return dataclasses.replace(
        response,
        raw=raw,
        redacted=n,
        served_model=response.served_model and redactor(response.served_model),
        system_fingerprint=response.system_fingerprint and redactor(response.system_fingerprint),
    )


def _not_utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _blank(completion: Any) -> bool:
    """Neither text (only white space, if any) nor a refusal in a checked chat completion."""
    message = completion.choices[0].message
    content = message.content or ""
    refusal = getattr(message, "refusal", None)
    return not content.strip() and not (isinstance(refusal, str) and refusal.strip())


def _reused(response: Response) -> Response:
    """The answer of an identical request, for another record: like a cached one, it was
    not sent again (a failure stays a failure)."""
    return dataclasses.replace(response, cached=response.error is None)


def _pacing_signal(outcome: Response | _Failure | None) -> dict[str, Any]:
    """What one send's outcome tells the pacer (None: the send raised, a bug)."""
    if isinstance(outcome, Response):
        return {"latency": outcome.latency_s, "throttled": False, "retry_after": None}
    throttled = isinstance(outcome, _Failure) and outcome.throttled
    retry_after = outcome.retry_after if throttled else None
    return {"latency": None, "throttled": throttled, "retry_after": retry_after}


class _Claims:
    """A job's claims on the cache entries of the requests it sends (novabench.cache), so
    that no other process sends them too, and the requests it found claimed elsewhere."""

    def __init__(self, name: str, cache: ResponseCache | None):
        self.name, self.cache = name, cache
        self.held: set[str] = set()
        self.waited = 0  # requests found claimed by another process
        self.answered_elsewhere = 0  # ... whose answer that process cached
        self._lock = threading.Lock()  # releases also come from the cache writer's thread

    async def take(self, key: str, cached: Callable[[str], Response | None]) -> Response | None:
        """Claim ``key`` (waiting while another process holds it); the cached answer if
        there is one by then (another process sent the request), else None: send it."""
        if self.cache is None:
            return None
        wait = CLAIM_POLL_S[0]
        if not self.cache.claim(key):
            self.waited += 1
            if self.waited == 1:
                log.warning(
                    "%s: another process is sending requests of this job (a concurrent run "
                    "sharing the cache, or a prediction job still running after its snakemake "
                    "was killed); waiting for its answers instead of sending them twice; fix, "
                    "if no other run is going: let the leftover job (a predict.py or score.py "
                    "process) finish, or kill it",
                    self.name,
                )
            while not self.cache.claim(key):
                await asyncio.sleep(wait)
                wait = min(CLAIM_POLL_S[1], 2 * wait)
        with self._lock:
            self.held.add(key)
        response = cached(key)
        if response is not None:
            self.answered_elsewhere += 1
            self.release(key)
        return response

    def release(self, key: str) -> None:
        with self._lock:
            if key in self.held:
                self.held.discard(key)
                assert self.cache is not None
                self.cache.release(key)

    def release_all(self) -> None:
        for key in list(self.held):
            self.release(key)

    def log(self) -> None:
        if self.answered_elsewhere:
            log.info(
                "%s: %d request(s) were answered by another process meanwhile (read from the "
                "cache, not sent again)",
                self.name,
                self.answered_elsewhere,
            )


def _log_pacing(name: str, window: AdaptiveWindow) -> None:
    if window.throttles:
        log.warning(
            "%s: the server throttled %d of %d sends (429); the window settled at %.1f "
            "requests in flight (of %d), %d cut(s)",
            name,
            window.throttles,
            window.sent,
            window.limit,
            window.maximum,
            window.cuts,
        )


def _to_cache(response: Response) -> dict[str, Any]:
    stored = {
        "raw": response.raw,
        "usage": response.usage,
        "latency_s": response.latency_s,
        "served_model": response.served_model,
        "system_fingerprint": response.system_fingerprint,
    }
    if response.refusal:  # only then: answers cached before the field keep their keys
        stored["refusal"] = True
    if response.redacted:  # the count travels with the answer, which no longer shows it
        stored["redacted"] = response.redacted
    return stored


# The types of a stored response's fields (as ``_to_cache`` writes them; None allowed).
_STORED_TYPES: dict[str, type | tuple[type, ...]] = {
    "raw": str,
    "usage": dict,
    "latency_s": (int, float),
    "served_model": str,
    "system_fingerprint": str,
    "refusal": bool,
    "redacted": int,
}


def response_problem(stored: dict[str, Any]) -> str | None:
    """What makes a stored response unusable as one ``_to_cache`` wrote, or None."""
    usage = stored.get("usage")
    fields = [(name, stored.get(name), kind) for name, kind in _STORED_TYPES.items()]
    if isinstance(usage, dict):
        fields += [(f"usage.{name}", usage.get(name), int) for name in _TOKEN_COUNTS]
    for name, value, kind in fields:
        # A bool is an int to isinstance; only "refusal" may be one.
        if value is not None and (not isinstance(value, kind) or _is_bool(value, kind)):
            return f"{name} has type {type(value).__name__}"
    if (stored.get("redacted") or 0) < 0:
        return "redacted is negative"
    return None


_TOKEN_COUNTS = ("prompt_tokens", "completion_tokens")


def _is_bool(value: Any, kind: type | tuple[type, ...]) -> bool:
    return isinstance(value, bool) and kind is not bool


def _from_cache(stored: dict[str, Any], redactor: Redactor | None = None) -> Response:
    # Entries written before the served model was kept have none: None. Entries written
    # before answers were redacted (or under another key) are redacted as they are read.
    raw, redacted = stored.get("raw"), int(stored.get("redacted", 0))
    if redactor is not None and isinstance(raw, str):
        raw, more = redactor.redact(raw)
        redacted += more
    return Response(
        raw=raw,
        redacted=redacted,
        latency_s=stored.get("latency_s"),
        usage=stored.get("usage"),
        cached=True,
        refusal=bool(stored.get("refusal", False)),
        served_model=stored.get("served_model"),
        system_fingerprint=stored.get("system_fingerprint"),
    )


def _quiet_http_loggers() -> None:
    """The HTTP libraries log every request at INFO, and the client logs request bodies
    (image bytes included) at DEBUG; keep them at WARNING unless the user set a level."""
    for name in ("openai", "httpx", "httpx2", "httpcore", "httpcore2"):
        logger = logging.getLogger(name)
        if logger.level == logging.NOTSET:
            logger.setLevel(logging.WARNING)


async def _all_or_none(coroutines: Sequence[Any]) -> None:
    """Await all; when one raises (a bug), cancel the others before the client closes, so
    that they do not log its closing as connection errors and retry."""
    tasks = [asyncio.ensure_future(c) for c in coroutines]
    try:
        await asyncio.gather(*tasks)
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise


def _run_sync(coroutine: Any) -> Any:
    """Run a coroutine from synchronous code, also when an event loop is already running
    (a notebook, or a judge called from async code): then it runs on a worker thread."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


def _outcome(response: Response) -> str:
    """How a response counts on the progress bar."""
    return "errors" if response.error else "cached" if response.cached else "ok"
