"""A stand-in for the ``vllm`` executable: the part of its command line a managed job uses.

``vllm serve MODEL --host H --port P --served-model-name NAME --tensor-parallel-size N
--dtype D --limit-mm-per-prompt JSON [--revision R] [--max-model-len L]
[--trust-remote-code] [--data-parallel-size N]`` serves the project's scripted
OpenAI-compatible test server (tests/openai_server.py) on ``H:P``, with vLLM's
``GET /health`` and ``GET /v1/models``.
An unknown flag ends it with status 2, as vLLM's argument parser does. Like vLLM it runs an
"engine worker" child process and stops it on SIGTERM, and like vLLM started with a key
(``--api-key`` or ``VLLM_API_KEY``) it answers 401 to a ``/v1`` request that does not carry
it as ``Authorization: Bearer <key>`` (``/health`` needs none).

What a test wants to see is set by environment variables:

- ``VLLM_STAND_IN_ANSWER``: the text of every answer (default: one Qwen2.5-VL box);
- ``VLLM_STAND_IN_STARTUP_S``: seconds before ``/health`` answers 200;
- ``VLLM_STAND_IN_LOAD_S``: seconds before it binds its port (vLLM imports for a while);
- ``VLLM_STAND_IN_PRINT``: a line it prints at start (a server printing a token, say);
- ``VLLM_STAND_IN_NEVER_HEALTHY=1``: ``/health`` answers 503 forever;
- ``VLLM_STAND_IN_CRASH=1``: print a CUDA-style error and exit 1 while "loading";
- ``VLLM_STAND_IN_DELAY_S``: seconds each answer takes;
- ``VLLM_STAND_IN_DIE_AFTER=N``: exit with status 1 after answering N requests;
- ``VLLM_STAND_IN_PIDS=path``: write ``{"server": pid, "worker": pid, "argv": [...],
  "keyed": bool}`` there (``keyed``: started with a key).
- ``VLLM_STAND_IN_STARTS=path``: append a line per start there (``model start-time``): how
  many times a run loaded the model.

Tests run it through a small wrapper named ``vllm`` that calls this file with the test
interpreter (``stand_in_executable`` in tests/models/test_vllm_serving.py).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from openai_server import FakeOpenAI, Reply

DEFAULT_ANSWER = '[{"bbox_2d": [100, 120, 160, 160], "label": "lesion"}]'


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="vllm")
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve")
    serve.add_argument("model")
    serve.add_argument("--host", default="0.0.0.0")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--served-model-name")
    serve.add_argument("--tensor-parallel-size", type=int, default=1)
    serve.add_argument("--dtype", default="auto")
    serve.add_argument("--limit-mm-per-prompt", type=json.loads)
    serve.add_argument("--revision")
    serve.add_argument("--max-model-len", type=int)
    serve.add_argument("--trust-remote-code", action="store_true")
    serve.add_argument("--api-key", default=os.environ.get("VLLM_API_KEY"))
    serve.add_argument("--data-parallel-size", type=int, default=1)
    return parser.parse_args(argv)


def _answering_script(worker: subprocess.Popen) -> Callable[[object], Reply]:
    """The same answer to every request; with VLLM_STAND_IN_DIE_AFTER, the engine dies
    (worker and server) on the request after the N-th."""
    answer = os.environ.get("VLLM_STAND_IN_ANSWER", DEFAULT_ANSWER)
    delay_s = float(os.environ.get("VLLM_STAND_IN_DELAY_S", "0"))
    die_after = int(os.environ.get("VLLM_STAND_IN_DIE_AFTER", "0")) or None
    answered = 0
    lock = threading.Lock()

    def script(seen: object) -> Reply:
        nonlocal answered
        with lock:
            answered += 1
            if die_after is not None and answered > die_after:
                print(f"ERROR engine died after {die_after} requests", flush=True)
                worker.kill()
                os._exit(1)
        return Reply(answer, delay_s=delay_s)

    return script


def add_vllm_routes(
    server: FakeOpenAI,
    name: str,
    ready_at: float = 0.0,
    never_healthy: bool = False,
    api_key: str | None = None,
) -> None:
    """vLLM's ``GET /health`` (503 until ``ready_at``) and ``GET /v1/models`` (``name``);
    with ``api_key``, vLLM's check of it on every ``/v1`` route."""
    base = server._server.RequestHandlerClass

    class Handler(base):
        def _unauthorized(self) -> bool:
            sent = self.headers.get("Authorization", "")
            if api_key is None or not self.path.startswith("/v1") or sent == f"Bearer {api_key}":
                return False
            self._send_json(401, {"error": "Unauthorized"})
            return True

        def do_POST(self) -> None:
            if not self._unauthorized():
                super().do_POST()

        def do_GET(self) -> None:
            path = self.path.rstrip("/")
            if self._unauthorized():
                return
            if path == "/health":
                healthy = not never_healthy and time.monotonic() >= ready_at
                self._send_json(200 if healthy else 503, {})
            elif path == "/v1/models":
                self._send_json(200, {"object": "list", "data": [{"id": name, "object": "model"}]})
            else:
                super().do_GET()

    server._server.RequestHandlerClass = Handler


def main(argv: list[str]) -> None:
    args = parse(argv)
    print(f"INFO stand-in vLLM serving {args.model} (tp {args.tensor_parallel_size})", flush=True)
    if os.environ.get("VLLM_STAND_IN_PRINT"):
        print(os.environ["VLLM_STAND_IN_PRINT"], flush=True)
    worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
    starts = os.environ.get("VLLM_STAND_IN_STARTS")
    if starts:
        with open(starts, "a", encoding="utf-8") as log:
            log.write(f"{args.model} {time.time():.3f}\n")
    pids = os.environ.get("VLLM_STAND_IN_PIDS")
    if pids:
        keyed = args.api_key is not None
        record = {"server": os.getpid(), "worker": worker.pid, "argv": argv, "keyed": keyed}
        Path(pids).write_text(json.dumps(record))

    def stop(signum: int = signal.SIGTERM, frame: object = None) -> None:
        # Only async-signal-safe calls: a second signal (the job's SIGTERM to the group,
        # then its parent-death signal) may arrive while a first one is handled, and a
        # lock taken here (print's, Popen.wait's) would then never be released.
        os.write(1, b"INFO shutting down the engine\n")
        with contextlib.suppress(ProcessLookupError):
            os.kill(worker.pid, signal.SIGTERM)
        os._exit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    if os.environ.get("VLLM_STAND_IN_CRASH"):
        print("ERROR torch.OutOfMemoryError: CUDA out of memory loading the weights", flush=True)
        worker.terminate()
        worker.wait()
        sys.exit(1)
    ready_at = time.monotonic() + float(os.environ.get("VLLM_STAND_IN_STARTUP_S", "0"))
    never_healthy = bool(os.environ.get("VLLM_STAND_IN_NEVER_HEALTHY"))
    time.sleep(float(os.environ.get("VLLM_STAND_IN_LOAD_S", "0")))
    server = FakeOpenAI(_answering_script(worker), host=args.host, port=args.port)
    name = args.served_model_name or args.model
    add_vllm_routes(server, name, ready_at, never_healthy, args.api_key)
    print(f"INFO Uvicorn running on http://{args.host}:{args.port}", flush=True)
    try:
        server._server.serve_forever()
    finally:
        stop()


if __name__ == "__main__":
    main(sys.argv[1:])
