"""The adaptive window that paces requests to a throttling server: its rules event by event,
its convergence against a simulated token-bucket quota (virtual time), and the asyncio
pacer that applies it. No test here reads a clock."""

from __future__ import annotations

import asyncio
import heapq
import itertools
import math
import random

import pytest

from novabench.pacing import (
    DECREASE,
    INCREASE,
    LATENCY_WEIGHT,
    MIN_LIMIT,
    UNTHROTTLED_PACE,
    AdaptiveWindow,
    Pacer,
)

# --- the window's rules ---------------------------------------------------------------------


def test_slow_start_adds_one_place_per_answer_up_to_the_maximum():
    window = AdaptiveWindow(1, 5)
    assert window.wait(0.0) == 0 and window.interval == 0  # no latency known: no pacing
    sizes = []
    for now in range(8):
        assert window.wait(now) == 0  # a second apart: never waits
        ticket = window.send(now)
        window.answered(ticket, latency=0.5)
        sizes.append(window.size)
    assert sizes == [2, 3, 4, 5, 5, 5, 5, 5]
    assert window.sent == 8 and window.throttles == window.cuts == 0
    # Never throttled: paced at four times the window's rate, 5 per 0.5 s latency, so a
    # send every 25 ms at most (bursts spread; the window still bounds the rate).
    assert window.interval == pytest.approx(0.5 / (UNTHROTTLED_PACE * 5)) == 0.025


def test_a_throttling_cuts_once_per_window_and_each_earlier_send_takes_one_place():
    window = AdaptiveWindow(10, 10)
    early = [window.send(0.0) for _ in range(4)]  # tickets 1-4, in flight together
    assert window.throttled(early[0], now=0.0, retry_after=None) is True
    assert window.limit == pytest.approx(10 * DECREASE)
    # The other three left before the cut: no second cut, but one place fewer each.
    for ticket in early[1:]:
        assert window.throttled(ticket, now=0.0, retry_after=None) is False
    assert window.limit == pytest.approx(10 * DECREASE - 3)
    assert window.threshold == pytest.approx(10 * DECREASE)
    later = window.send(0.0)  # sent after the cut: its throttling is news
    assert window.throttled(later, now=0.0, retry_after=None) is True
    assert window.limit == pytest.approx((10 * DECREASE - 3) * DECREASE)
    assert (window.cuts, window.throttles) == (2, 5)


def test_after_a_cut_slow_start_returns_to_it_then_slow_growth_then_fast_past_the_peak():
    window = AdaptiveWindow(20, 32)
    first, second = window.send(0.0), window.send(0.0)
    window.throttled(first, now=0.0, retry_after=None)
    window.throttled(second, now=0.0, retry_after=None)
    cut = 20 * DECREASE  # 14, then one place off for the earlier send: 13
    assert (window.limit, window.threshold) == (pytest.approx(cut - 1), pytest.approx(cut))
    window.answered(window.send(0.0), 1.0)  # below the threshold: one place
    assert window.limit == pytest.approx(cut)
    # Then INCREASE of a place per answer: 2% per latency (W answers) at any size W. Back
    # at the size it was cut at, 20, after (20 - 14) / 0.02 = 300 answers ...
    answers = 0
    while window.limit < 20:
        before = window.limit
        window.answered(window.send(0.0), 1.0)
        assert window.limit == pytest.approx(before + INCREASE)
        answers += 1
    assert answers == pytest.approx((20 - cut) / INCREASE, abs=1)
    # ... past which it probes fast again: one place per answer.
    before = window.limit
    window.answered(window.send(0.0), 1.0)
    assert window.limit == pytest.approx(before + 1)


def test_once_throttled_sends_are_spaced_by_the_smoothed_latency_over_the_window():
    window = AdaptiveWindow(4, 8)
    latencies = [1.0, 2.0, 0.5]
    for latency in latencies:
        window.answered(window.send(0.0), latency)
    smoothed = latencies[0]
    for latency in latencies[1:]:
        smoothed += LATENCY_WEIGHT * (latency - smoothed)
    assert window.latency == pytest.approx(smoothed)
    assert window.limit == 7 and window.interval == pytest.approx(smoothed / (UNTHROTTLED_PACE * 7))
    window.throttled(window.send(10.0), now=10.0, retry_after=None)
    interval = smoothed / window.limit
    assert window.interval == pytest.approx(interval)
    window.send(10.0)
    assert window.wait(10.0) == pytest.approx(interval)
    assert window.wait(10.0 + interval / 2) == pytest.approx(interval / 2)
    assert window.wait(10.0 + interval) == 0


def test_a_retry_after_holds_every_send_until_it_has_passed():
    window = AdaptiveWindow(8, 8)
    ticket = window.send(100.0)
    window.throttled(ticket, now=100.0, retry_after=3.0)
    assert window.latency is None  # no answer yet, so no pacing: only the hold
    assert window.wait(101.0) == pytest.approx(2.0)
    assert window.wait(103.0) == 0
    # A shorter Retry-After never shortens a longer hold.
    window.throttled(window.send(103.0), now=103.0, retry_after=5.0)
    window.throttled(window.send(104.0), now=104.0, retry_after=1.0)
    assert window.wait(104.0) == pytest.approx(4.0)


def test_the_requests_per_minute_cap_spaces_sends_even_when_never_throttled():
    window = AdaptiveWindow(8, 8, requests_per_second=120 / 60)
    assert window.wait(0.0) == 0
    window.send(0.0)
    assert window.wait(0.0) == pytest.approx(0.5)
    assert window.wait(0.3) == pytest.approx(0.2)
    window.send(0.7)  # late: the next slot counts from this send
    assert window.wait(0.7) == pytest.approx(0.5)


def test_the_window_stays_between_its_floor_and_the_maximum():
    window = AdaptiveWindow(3, 3)
    window.answered(window.send(0.0), 2.0)  # a latency: 2 s
    for _ in range(40):
        window.throttled(window.send(0.0), now=0.0, retry_after=None)
    assert window.limit == pytest.approx(MIN_LIMIT) and window.size == 1
    # Below one place the window still paces: one send per 16 latencies at the floor.
    assert window.interval == pytest.approx(2.0 / MIN_LIMIT) == 32.0
    # Cut down to the floor, it probes fast as soon as it passes the size of its last cut:
    # back to all three places within a few answers, and no further.
    for _ in range(4):
        window.answered(window.send(0.0), 2.0)
    assert window.limit == 3 and window.size == 3
    assert AdaptiveWindow(500, 64).size == 64 and AdaptiveWindow(0, 64).size == 1


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"maximum": 0}, "need maximum >= 1"),
        ({"decrease": 1.0}, "0 < decrease < 1"),
        ({"increase": 0.0}, "increase > 0"),
        ({"requests_per_second": 0.0}, "requests_per_second must be positive, got 0.0"),
    ],
)
def test_impossible_settings_are_refused(settings, message):
    with pytest.raises(ValueError, match=message):
        AdaptiveWindow(**{"start": 1, "maximum": 4, **settings})


# --- convergence against a simulated quota (virtual time) -----------------------------------


class Flow:
    """One job's requests and window, as Pacer drives them (a place, then the send's turn)."""

    def __init__(self, start: int, n: int):
        self.window = AdaptiveWindow(start, 64)
        self.queue, self.ready, self.in_flight = list(range(n)), [], 0
        self.timer = math.inf

    def pump(self, now: float, push) -> None:
        while self.queue and self.in_flight < self.window.size:
            self.ready.append(self.queue.pop(0))
            self.in_flight += 1
        while self.ready:
            wait = self.window.wait(now)
            if wait > 0:
                if now + wait < self.timer:
                    self.timer = now + wait
                    push(now + wait, "turn", self, None)
                return
            push(now, "arrive", self, (self.ready.pop(0), self.window.send(now)))


def simulate(rate, burst_s, start, n=906, latency=0.1, jitter=0.2, flows=1):
    """Drive AdaptiveWindows (maximum 64; ``flows`` jobs of ``n`` requests in all) against
    one token bucket of ``rate`` requests per second holding ``burst_s`` seconds of quota,
    as the adapter does: a 429 comes back at once with the wait for the next token, and its
    request is sent again after that wait. Latencies vary by ``jitter`` (0: answers to sends
    made together come back together). Returns (answers per second over the second half /
    rate, rejected share of sends)."""
    rng, order, events = random.Random(7), itertools.count(), []
    jobs = [Flow(start, n // flows) for _ in range(flows)]
    capacity = max(1.0, rate * burst_s)
    tokens, filled_at, answered_at, sends, rejected, now = capacity, 0.0, [], 0, 0, 0.0

    def push(at, kind, flow, data):
        heapq.heappush(events, (at, next(order), kind, flow, data))

    for job in jobs:
        job.pump(0.0, push)
    while events:
        now, _, kind, job, data = heapq.heappop(events)
        if kind == "turn":
            job.timer = math.inf
        elif kind == "arrive":
            sends += 1
            tokens, filled_at = min(capacity, tokens + (now - filled_at) * rate), now
            if tokens >= 1:
                tokens -= 1
                took = latency * rng.uniform(1 - jitter, 1 + jitter)
                push(now + took, "answer", job, (*data, took))
            else:
                push(now, "429", job, (*data, (1 - tokens) / rate))
        elif kind == "answer":
            job.in_flight -= 1
            job.window.answered(data[1], data[2])
            answered_at.append(now)
        elif kind == "429":
            job.in_flight -= 1
            rejected += 1
            job.window.throttled(data[1], now, data[2])
            push(now + data[2] + rng.uniform(0, max(0.1 * data[2], 0.05)), "retry", job, data[0])
        elif kind == "retry":
            job.queue.insert(0, data)
        job.pump(now, push)
    assert len(answered_at) == n // flows * flows
    half = now / 2
    steady = sum(t > half for t in answered_at) / (now - half)
    return steady / rate, rejected / sends


@pytest.mark.parametrize("rate", [50, 200])
@pytest.mark.parametrize("start", [1, 64])
@pytest.mark.parametrize("jitter", [0.0, 0.2])
def test_from_any_start_the_window_converges_on_the_quota_with_few_rejections(rate, start, jitter):
    throughput, rejected = simulate(rate, burst_s=1.0, start=start, jitter=jitter)
    assert throughput >= 0.9
    assert rejected <= 0.05


@pytest.mark.parametrize("rate", [50, 200])
def test_jobs_sharing_a_quota_share_it_without_one_starving(rate):
    # Two jobs of one provider at once (Snakemake runs up to api_<provider> of them), each
    # with its own window: together they use the quota, and neither is squeezed out.
    throughput, rejected = simulate(rate, burst_s=1.0, start=1, flows=2)
    assert throughput >= 0.9 and rejected <= 0.05


def test_a_quota_below_one_request_per_latency_is_mostly_used():
    # A free tier: 15 requests per minute, 3 s per answer. The window ends below one place,
    # so it paces; the bucket holds one request, so it smooths nothing. About 80% of the
    # quota is used, and more sends are rejected than with a larger quota (each probe above
    # the quota costs one, and there are few requests per probe).
    throughput, rejected = simulate(0.25, burst_s=1.0, start=1, n=200, latency=3.0)
    assert throughput >= 0.75 and rejected <= 0.15


# --- the asyncio pacer ------------------------------------------------------------------------


def later_each_time():
    """A clock that has always moved on a long way: no send ever waits for its turn."""
    return itertools.count(0.0, 1000.0).__next__


def test_the_pacer_admits_first_come_first_served_within_the_window():
    async def scenario():
        pacer = Pacer(AdaptiveWindow(6, 6), clock=later_each_time())
        admitted: list[int] = []
        tickets: dict[int, int] = {}

        async def request(i: int) -> None:
            tickets[i] = await pacer.acquire()
            admitted.append(i)
            assert pacer.in_flight <= pacer.window.size

        async def settle() -> None:
            for _ in range(5):
                await asyncio.sleep(0)

        tasks = [asyncio.create_task(request(i)) for i in range(8)]
        await settle()
        assert admitted == [0, 1, 2, 3, 4, 5]
        # A throttling cuts the window to 4.2 (5 places): five still in flight, none goes.
        pacer.release(tickets[0], latency=None, throttled=True, retry_after=None)
        await settle()
        assert admitted == [0, 1, 2, 3, 4, 5] and pacer.window.size == 5
        # A throttling of an earlier send takes one place (4), still none goes.
        pacer.release(tickets[1], latency=None, throttled=True, retry_after=None)
        await settle()
        assert admitted == [0, 1, 2, 3, 4, 5] and pacer.window.size == 4
        # Another failure frees a place and leaves the window as it is: the next one goes.
        pacer.release(tickets[2], latency=None, throttled=False, retry_after=None)
        await settle()
        assert admitted == [0, 1, 2, 3, 4, 5, 6] and pacer.window.size == 4
        # An answer (below the cut: slow start) adds a place and frees one: the last goes.
        pacer.release(tickets[3], latency=1.0, throttled=False, retry_after=None)
        await asyncio.gather(*tasks)
        assert admitted == list(range(8)) and pacer.window.size == 5
        assert sorted(tickets.values()) == list(range(1, 9))

    asyncio.run(scenario())


def test_a_cancelled_waiter_gives_its_place_back():
    async def scenario():
        pacer = Pacer(AdaptiveWindow(1, 1), clock=later_each_time())
        first = await pacer.acquire()
        waiting = asyncio.create_task(pacer.acquire())
        await asyncio.sleep(0)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        pacer.release(first, latency=1.0, throttled=False, retry_after=None)
        assert pacer.in_flight == 0
        assert await pacer.acquire() == 2  # the place is free again
        assert pacer.in_flight == 1

    asyncio.run(scenario())
