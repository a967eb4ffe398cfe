"""How fast to send requests to a service that throttles: an adaptive window with pacing.

Providers cap requests (and tokens) per minute and answer ``429 Too Many Requests``, often
with ``Retry-After``, beyond the cap. Rather than asking the user to guess a concurrency that
stays under the quota, the client finds it, as TCP finds a link's capacity.
:class:`AdaptiveWindow` holds the logic, driven by explicit events and times (so it is
tested without clocks); :class:`Pacer` applies it to asyncio tasks.

- The **window** is how many requests may be in flight; ``concurrency`` is its upper bound.
  It grows by one per answer until the first throttling (slow start, doubling per
  latency). A 429 cuts it to ``decrease`` times its size, at most once per window: a 429
  for a request sent before the cut says nothing new, and only takes one place off (the
  server took one request fewer); slow start then climbs back to the size of the cut. From
  there the window grows by ``increase`` of a place per answer, which is 2% per latency at
  any size, until it is back at the size it was cut at; then slow start again (the quota
  that refused that size has taken it this time: there may be new room, another job having
  finished or the quota grown, and it is found fast; if not, the next 429 comes at once).
- Sends are also **paced**: spaced evenly at window / smoothed latency per second once
  throttled, and at four times that before. Without pacing, requests sent together come
  back together and are sent again together: a token-bucket quota rejects such bursts even
  when the mean rate fits, and a whole window (or slow start's doubling of it) is on the wire
  before the first 429 comes back. Spread over a quarter of a latency, the first 429 stops
  a burst after a few sends, while the window, not the pace, still bounds an unthrottled
  job's rate.
- ``Retry-After`` holds every new send until it has passed (a quota is per key, not per
  request), and an optional ``requests_per_minute`` cap spaces sends at most that fast.

Written here rather than taken from a library: the limiters on PyPI (aiolimiter,
pyrate-limiter) enforce a known rate and none adapts to 429s; botocore's adaptive retry mode
(the same idea, with a cubic increase) is bound to its own, thread-blocking client.
"""

from __future__ import annotations

import asyncio
import collections
import math
import time
from collections.abc import Callable

# Cut to this fraction of the window on throttling. Gentler than TCP's 0.5: a token-bucket
# quota refills at a steady rate, so a deep cut only wastes the quota it leaves unused.
DECREASE = 0.7
# Growth in places per answer once throttled: a window of W places gets W answers per
# latency, so it grows by 2% per latency whatever its size, and a cut is made good in about
# 18 latencies. Each return to the quota costs about one rejected request, so rejections stay
# at a few percent of the requests for a job alone. Not TCP's one place per window (too fast
# for a quota of a few requests per latency, too slow for hundreds), and not a share of the
# window per answer either: then a job sending more grows faster, and of several jobs on one
# quota the smaller ones starve. Growing at the same relative pace, while the job sending
# most is the one throttled most, none does.
INCREASE = 0.02
# Weight of a new latency in the smoothed latency (TCP's SRTT uses 1/8).
LATENCY_WEIGHT = 0.125
# Before the first throttling, sends are paced this much faster than the window's rate: a
# burst is spread (TCP paces slow start at twice its rate) but the window still binds.
UNTHROTTLED_PACE = 4.0
# The smallest window: one send per 16 latencies. Below one, the window still paces (a free
# tier may allow fewer requests per minute than one at a time would send).
MIN_LIMIT = 1 / 16


class AdaptiveWindow:
    """Requests in flight and when the next may leave; all times in seconds from any origin."""

    def __init__(
        self,
        start: float,
        maximum: int,
        *,
        requests_per_second: float | None = None,
        decrease: float = DECREASE,
        increase: float = INCREASE,
    ):
        if maximum < 1 or not 0 < decrease < 1 or increase <= 0:
            raise ValueError(
                f"need maximum >= 1, 0 < decrease < 1, increase > 0; "
                f"got {maximum}, {decrease}, {increase}"
            )
        if requests_per_second is not None and requests_per_second <= 0:
            raise ValueError(f"requests_per_second must be positive, got {requests_per_second}")
        self.maximum, self.decrease, self.increase = maximum, decrease, increase
        self.limit = float(min(max(start, MIN_LIMIT), maximum))
        self.threshold = float(maximum)  # slow start below it (TCP's ssthresh)
        self.peak = math.inf  # the window when it was last cut
        self.cap_interval = None if requests_per_second is None else 1.0 / requests_per_second
        self.latency: float | None = None  # smoothed latency of answers
        self.throttled_once = False
        self.sent = self.cuts = self.throttles = 0
        self._cut_at = 0  # the last ticket sent before the latest cut
        self._last_send = -math.inf
        self._hold_until = -math.inf

    @property
    def size(self) -> int:
        """Requests that may be in flight."""
        return min(self.maximum, math.ceil(self.limit))  # at least 1: limit > 0

    @property
    def interval(self) -> float:
        """Seconds between sends (once a latency is known), and never under the cap's."""
        paced = 0.0
        if self.latency is not None:
            gain = 1.0 if self.throttled_once else UNTHROTTLED_PACE
            paced = self.latency / (gain * self.limit)
        return max(paced, self.cap_interval or 0.0)

    def wait(self, now: float) -> float:
        """Seconds until the next send may leave (0: now), at today's pace and holds."""
        return max(self._hold_until, self._last_send + self.interval, now) - now

    def send(self, now: float) -> int:
        """A send leaves now; its ticket orders it against the window's cuts."""
        self.sent += 1
        self._last_send = now
        return self.sent

    def answered(self, ticket: int, latency: float) -> None:
        """A send got an answer (any that is not a throttling)."""
        if self.latency is None:
            self.latency = latency
        else:
            self.latency += LATENCY_WEIGHT * (latency - self.latency)
        # Slow start (one place per answer) below the threshold (the size after the last
        # cut), and again once back at the size that was cut without a 429 on the way: the
        # quota takes it now, so look fast for room above (another job finished, the quota
        # grew); if there is none, the next 429 says so at once.
        fast = self.limit < self.threshold or self.limit >= self.peak
        self.limit = min(float(self.maximum), self.limit + (1.0 if fast else self.increase))

    def throttled(self, ticket: int, now: float, retry_after: float | None) -> bool:
        """A send was throttled (429); True if that cut the window."""
        self.throttles += 1
        self.throttled_once = True
        if retry_after is not None:
            self._hold_until = max(self._hold_until, now + retry_after)
        if ticket <= self._cut_at:
            # Sent before the cut: one request more than the quota took, one place fewer
            # (but not below one place: only a cut goes that low).
            self.limit = max(min(self.limit, 1.0), self.limit - 1)
            return False
        self.peak = self.limit
        self.limit = self.threshold = max(MIN_LIMIT, self.limit * self.decrease)
        self._cut_at = self.sent
        self.cuts += 1
        return True


class Pacer:
    """Admits asyncio tasks to send under an :class:`AdaptiveWindow`, first come first
    served. Call :meth:`release` once for every ticket :meth:`acquire` gave."""

    def __init__(self, window: AdaptiveWindow, clock: Callable[[], float] = time.monotonic):
        self.window, self.clock = window, clock
        self.in_flight = 0
        self._waiting: collections.deque[asyncio.Future[None]] = collections.deque()
        self._turn = asyncio.Lock()

    async def acquire(self) -> int:
        """Wait for a place in the window, then for the send's turn; the send's ticket."""
        if self._waiting or self.in_flight >= self.window.size:
            place = asyncio.get_running_loop().create_future()
            self._waiting.append(place)
            try:
                await place  # the place is handed over, already counted in flight
            except asyncio.CancelledError:
                if place.cancelled():
                    # A release may have dropped it already (it skips cancelled places).
                    if place in self._waiting:
                        self._waiting.remove(place)
                else:
                    self._leave()
                raise
        else:
            self.in_flight += 1
        try:
            # One task at a time waits for the next send time, and looks again when it
            # wakes: a cut or a Retry-After while it slept may have moved that time.
            async with self._turn:
                while (wait := self.window.wait(self.clock())) > 0:
                    await asyncio.sleep(wait)
                return self.window.send(self.clock())
        except BaseException:
            self._leave()
            raise

    def release(
        self, ticket: int, *, latency: float | None, throttled: bool, retry_after: float | None
    ) -> None:
        """The send of ``ticket`` ended: answered (``latency`` known), throttled, or failed
        otherwise (neither: a timeout or a server error says nothing about the quota)."""
        if throttled:
            self.window.throttled(ticket, self.clock(), retry_after)
        elif latency is not None:
            self.window.answered(ticket, latency)
        self._leave()

    def _leave(self) -> None:
        self.in_flight -= 1
        while self._waiting and self.in_flight < self.window.size:
            place = self._waiting.popleft()
            if not place.done():
                self.in_flight += 1
                place.set_result(None)
