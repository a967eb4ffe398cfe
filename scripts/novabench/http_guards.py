"""What the chat-completions client refuses from a server: redirects to another host, and
answers larger than a cap.

Both are httpx event hooks (``httpx2.AsyncClient(event_hooks=...)``), so that they apply
on every hop and through the proxies the environment configures:

- a request hook runs before each send, redirects included: one to an origin (scheme,
  host, port) other than ``base_url``'s raises :class:`Refused` before anything is sent
  there. httpx follows redirects and, across hosts, drops only the ``Authorization``
  header: the prompt and the image would go to a host nobody configured, and its answer
  would be scored and cached as the model's. Redirects within the origin still work;
- a response hook refuses a ``Content-Length`` over the cap at once and counts the bytes
  of the body as they arrive (chunked answers have no length), raising :class:`Refused`
  past the cap, so that a runaway or hostile server never fills memory, the cache or a
  prediction line.

:class:`Refused` is not an ``httpx`` error, so the ``openai`` client lets it through
unwrapped and the adapter records it as one failed request with its one-line reason.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx2


class Refused(Exception):
    """A response the client will not take; the message says why, in one line."""

    # Not worth another try: a server that redirects, or answers megabytes where a model
    # answers kilobytes, does it again (and may bill each try).


def origin(url: httpx2.URL | str) -> str:
    """``scheme://host:port`` with the scheme's default port spelled out."""
    url = httpx2.URL(url)
    port = url.port or {"http": 80, "https": 443}.get(url.scheme, 0)
    return f"{url.scheme}://{url.host}:{port}"


def event_hooks(base_url: str, max_bytes: int) -> dict[str, list[Callable[[Any], Awaitable]]]:
    """The hooks that keep a client on ``base_url``'s origin and answers under ``max_bytes``."""
    allowed = origin(base_url)

    async def same_origin(request: httpx2.Request) -> None:
        target = origin(request.url)
        if target != allowed:
            raise Refused(
                f"refused a redirect from {allowed} to {target}: requests go to base_url's "
                "host only (set base_url to the server that answers)"
            )

    async def capped(response: httpx2.Response) -> None:
        length = response.headers.get("content-length", "")
        if length.isdigit() and int(length) > max_bytes:
            await response.aclose()
            raise Refused(_too_large(f"{int(length)} bytes", max_bytes))
        response.stream = _CappedStream(response.stream, max_bytes)

    return {"request": [same_origin], "response": [capped]}


class _CappedStream(httpx2.AsyncByteStream):
    """A response body that raises :class:`Refused` once more than ``limit`` bytes came."""

    def __init__(self, stream: Any, limit: int):
        self.stream, self.limit = stream, limit

    async def __aiter__(self) -> AsyncIterator[bytes]:
        received = 0
        async for chunk in self.stream:
            received += len(chunk)
            if received > self.limit:
                raise Refused(_too_large(f"over {self.limit} bytes", self.limit))
            yield chunk

    async def aclose(self) -> None:
        await self.stream.aclose()


def _too_large(size: str, limit: int) -> str:
    return (
        f"answer too large: {size} (max_response_mb allows {limit / 1e6:g} MB; raise it "
        "if the model's answers are really that long)"
    )
