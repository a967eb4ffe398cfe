"""A scripted OpenAI-compatible chat-completions server on loopback, for tests and benchmarks.

Tests start it in a thread and give it a *script*: a function from the incoming request to
what the server does with it (answer, fail with a status, stall past the client's timeout,
reset the connection, answer garbage; misbehave on purpose: trickle an answer byte by byte,
send raw bytes, redirect). Every request is recorded, so tests can assert
exactly what was sent and how often. Built on the standard library's threading HTTP server
(one thread per connection), which is plenty for a few hundred requests in flight.

Optionally it admits requests through a token bucket (``rate_limit=(per_second, burst)``),
as providers enforce a requests-per-minute quota: a request beyond it gets an immediate 429
with ``Retry-After`` (whole seconds) and ``retry-after-ms`` (the wait for the next token).
``GET /stats`` returns (and resets) the counts of admitted and rejected requests and the
times admitted.

Run as a script it serves a fixed answer after a fixed latency, for the benchmarks::

    python tests/openai_server.py --latency-ms 100      # prints "port <n>", serves until killed
    python tests/openai_server.py --latency-ms 100 --rate-per-s 50 --burst-s 1
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import math
import socket
import struct
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

# --- what the server can do with one request -------------------------------------------


@dataclass(frozen=True)
class Reply:
    """A 200 answer with this content (None: no content, e.g. with a refusal)."""

    content: str | None = "no finding"
    refusal: str | None = None
    delay_s: float = 0.0
    # What the answer says served it: None gives the requested model, no fingerprint.
    served_model: str | None = None
    system_fingerprint: str | None = None


@dataclass(frozen=True)
class Fail:
    """An error status, optionally with a Retry-After header and a body text."""

    status: int
    retry_after: str | None = None
    message: str = "scripted failure"
    delay_s: float = 0.0


@dataclass(frozen=True)
class Hang:
    """Say nothing for this long (longer than the client's timeout), then drop it."""

    seconds: float


@dataclass(frozen=True)
class Reset:
    """Close the connection with a TCP reset instead of answering."""


@dataclass(frozen=True)
class Garbage:
    """A 200 whose body is not a chat completion (by default a JSON object without choices)."""

    body: str = '{"unexpected": true}'
    content_type: str = "application/json"


@dataclass(frozen=True)
class Trickle:
    """A 200 answer whose body (a chat completion with ``content``) comes one byte every
    ``every_s`` seconds: each read gets something, so no per-read timeout fires."""

    content: str = "no finding"
    every_s: float = 0.2


@dataclass(frozen=True)
class Raw:
    """These bytes as the body, as they are (invalid UTF-8, megabytes...); ``chunked``
    sends them without a Content-Length, in chunks of ``chunk`` bytes."""

    body: bytes
    status: int = 200
    content_type: str = "application/json"
    chunked: bool = False
    chunk: int = 65536


@dataclass(frozen=True)
class Redirect:
    """A redirect (307 keeps the method and the body) to ``location``."""

    location: str
    status: int = 307


Action = Reply | Fail | Hang | Reset | Garbage | Trickle | Raw | Redirect


class TokenBucket:
    """``per_second`` tokens a second, holding at most ``burst``; one token per request."""

    def __init__(self, per_second: float, burst: float):
        self.per_second, self.burst = per_second, max(1.0, burst)
        self.tokens, self.filled_at = self.burst, time.monotonic()
        self.admitted: list[float] = []  # time.monotonic() of each admitted request
        self.rejected = 0
        self._lock = threading.Lock()

    def take(self) -> float:
        """0 if the request is admitted, else the seconds until a token is there."""
        with self._lock:
            now = time.monotonic()
            self.tokens = min(self.burst, self.tokens + (now - self.filled_at) * self.per_second)
            self.filled_at = now
            if self.tokens >= 1:
                self.tokens -= 1
                self.admitted.append(now)
                return 0.0
            self.rejected += 1
            return (1 - self.tokens) / self.per_second

    def stats(self) -> dict[str, Any]:
        """Counts and admission times since the last call."""
        with self._lock:
            out = {"admitted": len(self.admitted), "rejected": self.rejected}
            out["admitted_at"], self.admitted, self.rejected = self.admitted, [], 0
        return out


@dataclass
class Seen:
    """One request as the server received it."""

    body: dict[str, Any]
    headers: dict[str, str]
    received: float  # time.monotonic()
    attempt: int  # 1 for the first request with this content, 2 for its first repeat, ...
    prompt: str
    image_png: bytes | None
    system_prompt: str | None
    action: str = ""
    answered: float | None = None  # when a 200 answer was fully written

    @property
    def image_sha256(self) -> str | None:
        return None if self.image_png is None else hashlib.sha256(self.image_png).hexdigest()


def usage_for(seen: Seen, content: str | None) -> dict[str, int]:
    """Deterministic token counts the tests can recompute."""
    prompt = len(seen.prompt) // 4 + (765 if seen.image_png is not None else 0)
    completion = len(content or "") // 4 + 1
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


def completion(
    content: str | None,
    refusal: str | None = None,
    model: str = "test-model",
    usage=None,
    system_fingerprint: str | None = None,
) -> dict[str, Any]:
    """A chat.completion object as OpenAI's API returns it."""
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "system_fingerprint": system_fingerprint,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content, "refusal": refusal},
                "finish_reason": "stop",
            }
        ],
        "usage": usage or {"prompt_tokens": 1000, "completion_tokens": 20, "total_tokens": 1020},
    }


def _read_messages(body: dict[str, Any]) -> tuple[str, bytes | None, str | None]:
    prompt, image, system = "", None, None
    for message in body.get("messages", []):
        content = message.get("content")
        if message.get("role") == "system":
            system = content
            continue
        parts = content if isinstance(content, list) else [{"type": "text", "text": content}]
        for part in parts:
            if part.get("type") == "text":
                prompt += part["text"]
            elif part.get("type") == "image_url":
                url = part["image_url"]["url"]
                header, _, data = url.partition(",")
                assert header == "data:image/png;base64", header
                image = base64.b64decode(data)
    return prompt, image, system


class _Server(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        # Clients that time out or are killed drop their connections: expected here.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class FakeOpenAI:
    """The server. ``script(seen) -> Action``; ``latency_s`` is added to every answer."""

    def __init__(
        self,
        script: Callable[[Seen], Action] | None = None,
        *,
        latency_s: float = 0.0,
        expected_key: str | None = None,
        fixed_answer: str | None = None,
        rate_limit: tuple[float, float] | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
    ):
        self.script = script or (lambda seen: Reply())
        self.latency_s = latency_s
        self.expected_key = expected_key
        self.bucket = None if rate_limit is None else TokenBucket(*rate_limit)
        # Benchmark mode: every request gets this answer, unread and unrecorded, so that the
        # server spends next to no CPU on a machine it shares with the client it measures.
        self.fixed_answer = (
            None if fixed_answer is None else json.dumps(completion(fixed_answer)).encode()
        )
        self.requests: list[Seen] = []
        self._lock = threading.Lock()
        self._counts: Counter = Counter()
        self._server = _Server((host, port), _handler(self), bind_and_activate=False)
        self._server.daemon_threads = True
        self._server.request_queue_size = 512  # the default backlog of 5 drops bursts
        self._server.allow_reuse_address = True
        self._server.server_bind()
        self._server.server_activate()
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def start(self) -> FakeOpenAI:
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> FakeOpenAI:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def record(self, body: dict[str, Any], headers: dict[str, str]) -> Seen:
        prompt, image, system = _read_messages(body)
        content_key = json.dumps(body.get("messages"), sort_keys=True)
        with self._lock:
            self._counts[content_key] += 1
            seen = Seen(
                body, headers, time.monotonic(), self._counts[content_key], prompt, image, system
            )
            self.requests.append(seen)
        return seen

    def seen_by_image(self) -> dict[str | None, list[Seen]]:
        """Requests grouped by the sha256 of their image."""
        grouped: dict[str | None, list[Seen]] = {}
        with self._lock:
            for seen in self.requests:
                grouped.setdefault(seen.image_sha256, []).append(seen)
        return grouped


class _Handler(BaseHTTPRequestHandler):
    """Serves one connection for ``fake``, the FakeOpenAI its subclass is bound to."""

    protocol_version = "HTTP/1.1"  # keep-alive, as the client expects
    fake: FakeOpenAI

    def setup(self) -> None:
        super().setup()
        # Headers and body go out in separate writes; without TCP_NODELAY, Nagle's
        # algorithm meets the client's delayed ACK and every answer waits ~40 ms.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def _send_bytes(
        self,
        status: int,
        data: bytes,
        headers: dict[str, str] | None = None,
        content_type: str = "application/json",
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def _send_raw(self, action: Raw) -> None:
        if not action.chunked:
            self._send_bytes(action.status, action.body, content_type=action.content_type)
            return
        self.send_response(action.status)
        self.send_header("Content-Type", action.content_type)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.close_connection = True
        for i in range(0, len(action.body), action.chunk):
            part = action.body[i : i + action.chunk]
            self.wfile.write(f"{len(part):x}\r\n".encode() + part + b"\r\n")
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _send_trickle(self, action: Trickle) -> None:
        data = json.dumps(completion(action.content)).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.close_connection = True
        for i in range(len(data)):
            self.wfile.write(data[i : i + 1])
            self.wfile.flush()
            time.sleep(action.every_s)

    def _send_json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        self._send_bytes(status, json.dumps(payload).encode(), headers)

    def do_GET(self) -> None:
        if self.path.rstrip("/").endswith("/stats") and self.fake.bucket is not None:
            self._send_json(200, self.fake.bucket.stats())
        else:
            self._send_json(404, {"error": {"message": f"no route {self.path}"}})

    def _throttled(self) -> bool:
        """Beyond the quota: a 429 at once, saying when the next token comes."""
        wait = 0.0 if self.fake.bucket is None else self.fake.bucket.take()
        if wait > 0:
            message = "Rate limit reached for requests. Please try again later."
            headers = {
                "Retry-After": str(math.ceil(wait)),
                "retry-after-ms": str(math.ceil(wait * 1000)),
            }
            error = {"message": message, "type": "requests", "code": "rate_limit_exceeded"}
            self._send_json(429, {"error": error}, headers)
        return wait > 0

    def _refused_key(self, seen: Seen) -> bool:
        """A key other than the expected one: a 401 that echoes it, as real services do."""
        key = self.headers.get("Authorization", "").removeprefix("Bearer ")
        if self.fake.expected_key is None or key == self.fake.expected_key:
            return False
        seen.action = "unauthorized"
        message = f"Incorrect API key provided: {key}."
        self._send_json(401, {"error": {"message": message, "type": "invalid_request_error"}})
        return True

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", 0))
        data = self.rfile.read(length)
        if self._throttled():
            return
        if self.fake.fixed_answer is not None:  # benchmark mode: nothing parsed or recorded
            time.sleep(self.fake.latency_s)
            self._send_bytes(200, self.fake.fixed_answer)
            return
        body = json.loads(data or b"{}")
        if not self.path.rstrip("/").endswith("/chat/completions"):
            self._send_json(404, {"error": {"message": f"no route {self.path}"}})
            return
        seen = self.fake.record(body, {k.lower(): v for k, v in self.headers.items()})
        if self._refused_key(seen):
            return
        action = self.fake.script(seen)
        seen.action = type(action).__name__
        if isinstance(action, Reset):
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.connection.close()
            self.close_connection = True
            return
        if isinstance(action, Hang):
            time.sleep(action.seconds)
            self.close_connection = True
            return
        time.sleep(self.fake.latency_s + getattr(action, "delay_s", 0.0))
        if not self._misbehaved(action):
            self._answer(action, seen, body)

    def _misbehaved(self, action: Action) -> bool:
        """Sends what an action other than a plain answer asks for; False for a Reply."""
        if isinstance(action, Fail):
            headers = {} if action.retry_after is None else {"Retry-After": action.retry_after}
            self._send_json(action.status, {"error": {"message": action.message}}, headers)
        elif isinstance(action, Garbage):
            self._send_bytes(200, action.body.encode(), content_type=action.content_type)
        elif isinstance(action, Redirect):
            self._send_bytes(action.status, b"", {"Location": action.location})
        elif isinstance(action, Raw):
            self._send_raw(action)
        elif isinstance(action, Trickle):
            self._send_trickle(action)
        else:
            return False
        return True

    def _answer(self, action: Reply, seen: Seen, body: dict) -> None:
        content = action.content
        usage = usage_for(seen, content if content is not None else action.refusal)
        model = action.served_model or body.get("model", "unknown")
        reply = completion(content, action.refusal, model, usage, action.system_fingerprint)
        self._send_json(200, reply)
        seen.answered = time.monotonic()


def _handler(server: FakeOpenAI) -> type[BaseHTTPRequestHandler]:
    """The handler class bound to ``server``."""
    return type("Handler", (_Handler,), {"fake": server})


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--latency-ms", type=float, default=100.0)
    parser.add_argument(
        "--answer", default='[{"bbox_2d": [100, 120, 160, 160], "label": "lesion"}]'
    )
    parser.add_argument("--rate-per-s", type=float, help="admit this many requests a second")
    parser.add_argument("--burst-s", type=float, default=1.0, help="the bucket holds this long")
    args = parser.parse_args(argv)
    rate_limit = None
    if args.rate_per_s:
        rate_limit = (args.rate_per_s, args.rate_per_s * args.burst_s)
    server = FakeOpenAI(
        fixed_answer=args.answer,
        latency_s=args.latency_ms / 1000,
        rate_limit=rate_limit,
        port=args.port,
    )
    print(f"port {server._server.server_address[1]}", flush=True)
    try:
        server._server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server._server.server_close()
        sys.exit(0)


if __name__ == "__main__":
    main()
