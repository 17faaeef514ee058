"""Event-loop lag: how late the broker's single event loop runs, as a Prometheus histogram.

A task asks to wake every `interval_s` and records by how much it woke late: the time other work held
the loop (a long request, a slow disk call on the loop, a GC pause). Its own cost is one wake-up per
interval. Exported as samsa_event_loop_lag_seconds (histogram: _bucket, _sum, _count), so PromQL's
histogram_quantile gives p99 lateness over any window; stateless for the scrapers.
"""

from __future__ import annotations

import asyncio
import bisect
import time
from collections.abc import Callable, Iterator

from prometheus_client.core import HistogramMetricFamily

BUCKETS_S = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
DEFAULT_INTERVAL_S = 0.1


class LoopLagMonitor:
    def __init__(self, interval_s: float = DEFAULT_INTERVAL_S, clock: Callable[[], float] = time.monotonic) -> None:
        self.interval_s = interval_s
        self._clock = clock
        self._counts = [0] * (len(BUCKETS_S) + 1)  # per bucket, the last one is +Inf
        self.sum_s = 0.0
        self.count = 0
        self.max_s = 0.0

    def observe(self, late_s: float) -> None:
        late_s = max(0.0, late_s)
        self._counts[bisect.bisect_left(BUCKETS_S, late_s)] += 1
        self.sum_s += late_s
        self.count += 1
        self.max_s = max(self.max_s, late_s)

    async def run(self) -> None:
        while True:
            asked = self._clock()
            await asyncio.sleep(self.interval_s)
            self.observe(self._clock() - asked - self.interval_s)

    def collect(self) -> Iterator[HistogramMetricFamily]:
        cumulative, buckets = 0, []
        for bound, n in zip((*[str(b) for b in BUCKETS_S], "+Inf"), self._counts, strict=True):
            cumulative += n
            buckets.append((bound, float(cumulative)))
        yield HistogramMetricFamily("samsa_event_loop_lag_seconds",
                                    "How late the event loop woke a task that asked to sleep a fixed interval.",
                                    buckets=buckets, sum_value=self.sum_s)
