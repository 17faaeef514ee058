"""How long classic-group rebalances take, from entering PreparingRebalance to the new generation's join.

Observed by the group coordinator whether or not /metrics is served, as plain bucket counts (prometheus-client
stays out of the coordinator and of a broker's start-up), and turned into a histogram family when scraped.
Kafka exports only a rebalance rate and count (GroupCoordinatorMetrics); the duration is samsa_*.
`RebalanceMeter` is that rate and count (Kafka's Meter: group-completed-rebalance-* for classic groups,
consumer-group-rebalance-* for consumer groups), exported by the group collector.
"""

from __future__ import annotations

import bisect
import time
from collections import deque
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from prometheus_client.core import HistogramMetricFamily

# A rebalance lasts from a few ms (one member) through group.initial.rebalance.delay.ms (3 s by default)
# up to the rebalance timeout (max.poll.interval.ms, 5 minutes by default).
BUCKETS_S = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
DURATION_METRIC = "samsa_group_rebalance_duration_seconds"


# Kafka's Meter rate: metrics.num.samples (2) windows of metrics.sample.window.ms (30 s).
RATE_WINDOW_S = 60.0
RATE_MIN_WINDOW_S = 30.0


class RebalanceMeter:
    """A count of rebalances and their rate per second over the last minute (Kafka's Meter: the events in
    its sample windows over the time they span, at least one window)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._started = clock()
        self._recent: deque[float] = deque()
        self.count = 0

    def record(self) -> None:
        now = self._clock()
        self.count += 1
        self._recent.append(now)
        self._forget(now)

    def _forget(self, now: float) -> None:
        while self._recent and self._recent[0] <= now - RATE_WINDOW_S:
            self._recent.popleft()

    def rate(self) -> float:
        now = self._clock()
        self._forget(now)
        window = min(max(now - self._started, RATE_MIN_WINDOW_S), RATE_WINDOW_S)
        return len(self._recent) / window


class RebalanceMetrics:
    def __init__(self) -> None:
        self._counts = [0] * (len(BUCKETS_S) + 1)  # per bucket; the last is +Inf
        self._sum_s = 0.0
        self.meter = RebalanceMeter()  # group-completed-rebalance-rate/count

    def observe(self, duration_ms: int) -> None:
        seconds = max(duration_ms, 0) / 1000
        self._counts[bisect.bisect_left(BUCKETS_S, seconds)] += 1
        self._sum_s += seconds
        self.meter.record()

    @property
    def count(self) -> int:
        return sum(self._counts)

    def families(self) -> Iterator[HistogramMetricFamily]:
        from prometheus_client.core import HistogramMetricFamily

        cumulative, buckets = 0, []
        for bound, n in zip((*[str(b) for b in BUCKETS_S], "+Inf"), self._counts, strict=True):
            cumulative += n
            buckets.append((bound, float(cumulative)))
        family = HistogramMetricFamily(DURATION_METRIC, "Classic group rebalances this broker coordinated, by "
                                       "time from PreparingRebalance to the new generation.")
        family.add_metric([], buckets, self._sum_s)
        yield family
