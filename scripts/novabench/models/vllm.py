"""An open model served by a vLLM server that the prediction job starts, uses and stops.

The settings are those of ``openai_compatible`` (the same client sends the requests, with
its cache, retries and pacing) plus a ``serve`` block for ``vllm serve`` (see
novabench.vllm_server and config/README.md). ``base_url`` is not where the requests go
(the job's own server on a free port of its node) but the address of record under which
answers are cached: the catalog gives each model the address its hand-started entry
uses, so a model asked through either route, under the same name, with the same model id
and revision, shares its answers. The revision enters the cache key only when pinned, so
an unpinned managed server shares with a hand-started one.

In a workflow run the server is the model's, not the job's: one service job per model
(rule ``serve_model``) starts it with :meth:`Adapter.shared_server`, and every task's
prediction job of that run sends to it (:meth:`Adapter.attach`), so the weights are loaded
once for all tasks. That service job asks the scheduler for ``serve.gpus`` GPUs (Snakemake
resource ``gpu``; the SLURM profile's ``--gpus``), ``serve.cpus`` and ``serve.mem_mb``; the
prediction jobs ask for none. Prediction code run without a shared server (a direct call
of ``novabench.predict.run_predictions``) starts its own, as before. No ``api_<provider>``
is claimed: no endpoint is shared between models.
"""

from __future__ import annotations

import contextlib
import copy
import re
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from novabench import serving, vllm_server
from novabench.errors import ConfigError, NovaError
from novabench.models.base import Response, Sample
from novabench.models.openai_compatible import SETTINGS_SCHEMA as CLIENT_SCHEMA
from novabench.models.openai_compatible import Adapter as ClientAdapter

#: The address of record when an entry names none: vLLM's default port on the job's node.
RECORD_URL = "http://localhost:8000/v1"
_COMMIT = re.compile(r"^[0-9a-f]{40}\Z")


def _schema() -> dict[str, Any]:
    schema = copy.deepcopy(CLIENT_SCHEMA)
    schema["required"] = ["model"]  # no key (loopback), no address to reach
    schema["properties"]["serve"] = vllm_server.SERVE_SCHEMA
    return schema


SETTINGS_SCHEMA = _schema()


def client_settings(settings: dict[str, Any]) -> dict[str, Any]:
    """The client's settings: the address of record, no key, no ``serve``."""
    client = {k: v for k, v in settings.items() if k != "serve"}
    client.setdefault("base_url", RECORD_URL)
    client.setdefault("api_key_env", None)
    return client


def serve_settings(name: str, settings: dict[str, Any]) -> dict[str, Any]:
    return vllm_server.resolve_serve(name, settings.get("serve"))


def remote_code_problem(name: str, serve: dict[str, Any]) -> NovaError | None:
    """Code from the model's repository runs in the server: only a commit pins which."""
    revision = serve["revision"]
    if serve["trust_remote_code"] and not _COMMIT.match(revision or ""):
        return ConfigError(
            f"models.{name}.settings.serve.trust_remote_code runs code from the model's "
            f"repository, so serve.revision must pin a commit (40 hex digits), not "
            f"{revision or 'main'}",
            "set serve.revision to the commit whose code you reviewed (the model page's file "
            "history lists them), or remove trust_remote_code",
        )
    return None


class Adapter(ClientAdapter):
    """``vllm serve`` in the job, read through the chat-completions client."""

    settings_schema = SETTINGS_SCHEMA
    environment = "envs/vllm.yaml"
    starts_server = True

    def __init__(self, name: str, settings: dict[str, Any], *, cache_dir: Path | None = None):
        self.serve = serve_settings(name, settings)
        super().__init__(name, client_settings(settings), cache_dir=cache_dir)
        # Kept by settings (the identity), not the client's filled-in copy.
        self.settings = dict(settings)
        self.record_url = self.config["cache_url"] or self.config["base_url"]
        # Pid files of running servers, beside the response cache under results/.
        self.pid_dir = None if cache_dir is None else Path(cache_dir).parent / "servers"
        # Where the run's shared server of the model is, when the run started one: asked
        # only when a request is to be sent (it waits for the server to be ready).
        self.shared_address: Callable[[], serving.SharedServer] | None = None

    # -- plan time and start-up ---------------------------------------------------------

    @classmethod
    def check_settings(cls, name: str, settings: dict[str, Any]) -> None:
        super().check_settings(name, settings)
        problem = vllm_server.replicas_problem(name, serve_settings(name, settings))
        if problem is not None:
            raise problem

    @classmethod
    def api_resource(cls, settings: dict[str, Any]) -> None:
        return None  # each job has its own server: no cap across jobs

    @classmethod
    def job_resources(cls, settings: dict[str, Any]) -> dict[str, int]:
        """What a prediction job asks the scheduler for: GPUs, CPUs, host memory (MB)."""
        serve = vllm_server.resolve_serve("model", settings.get("serve"))
        return {
            "gpu": vllm_server.job_gpus(serve),
            "cpus": vllm_server.job_cpus(serve),
            "mem_mb": vllm_server.job_mem_mb(serve),
        }

    @classmethod
    def check_environment(cls, name: str, settings: dict[str, Any]) -> None:
        """Before any job of a real run: remote code only from a pinned commit. The server
        runs on the job's node, so the executable is looked for when the job starts."""
        problem = remote_code_problem(name, serve_settings(name, settings))
        if problem is not None:
            raise problem

    def preflight(self, task: str) -> None:
        super().preflight(task)
        problem = remote_code_problem(self.name, self.serve)
        if problem is not None:
            raise problem
        # The executable is looked for when a server is to start: a job whose answers are
        # all cached runs without vLLM installed.

    def identity(self) -> dict[str, Any]:
        """The client's identity and what of ``serve`` changes the answers."""
        client = super().identity()["settings"]
        serve = {k: self.serve[k] for k in vllm_server.SERVE_ANSWER_KEYS}
        return {"adapter": "vllm", "settings": {**client, "serve": serve}}

    def request_identity(self, request: Any) -> dict[str, Any]:
        """As a hand-started server at the address of record would key it, plus the
        revision when one is pinned."""
        identity = super().request_identity(request)
        identity["base_url"] = self.record_url
        if self.serve["revision"]:
            identity["revision"] = self.serve["revision"]
        return identity

    # -- one server for all of a model's tasks ---------------------------------------------

    def shared_server(self) -> contextlib.AbstractContextManager[vllm_server.ManagedServer]:
        """The model's server for every task of a run, with the same lifecycle (process
        group, parent-death signal, pid file, reaping) as a job's own."""
        return vllm_server.managed_server(self.name, self.config["model"], self.serve, self.pid_dir)

    def attach(self, service_file: Path) -> None:
        """Send to the run's shared server, whose service job publishes its address in
        ``service_file``, instead of starting one."""
        timeout_s = float(self.serve["startup_timeout_s"]) + serving.WAIT_MARGIN_S
        self.shared_address = serving.service_address(service_file, timeout_s)

    # -- answering ----------------------------------------------------------------------

    def predict(self, samples: Sequence[Sample]) -> Iterator[Response]:
        requests = self.requests_for(samples)
        if all(self.cached(r) is not None for r in requests):
            # Everything is answered already: no server to start (a re-run after an edit).
            yield from self._answer(requests, progress=self.name)
            return
        if self.shared_address is not None:
            yield from self._answer_through(self.shared_address(), requests)
            return
        model = self.config["model"]
        with vllm_server.managed_server(self.name, model, self.serve, self.pid_dir) as server:
            # Each request carries the key the server was started with (it checks it).
            with self.client.serving_at(server.base_url, server.api_key, server.running):
                responses = self._answer(requests, progress=self.name)
            died = server.exit_reason()
            failed = sum(r.error is not None for r in responses)
            if died is not None and failed:
                raise NovaError(
                    f"{died}; {len(responses) - failed} of {len(responses)} requests were "
                    f"answered (cached), {failed} failed",
                    f"{vllm_server.EXIT_FIX}, then re-run the job: the answers received are "
                    "not asked again",
                )
        yield from responses

    def _answer_through(self, shared: serving.SharedServer, requests: list[Any]) -> list[Response]:
        """The requests, sent to the run's shared server: its port checked to be its own
        first, each request with its key, no answer kept that arrives once it is gone."""
        problem = shared.listener_problem(self.name)
        if problem is not None:
            raise problem
        with self.client.serving_at(shared.base_url, shared.api_key, shared.running):
            return self._answer(requests, progress=self.name)
