"""A latency histogram kept as plain integers (a bisect and two increments per observation), turned into a
Prometheus family only when /metrics is scraped, so prometheus-client stays off the request path."""

from __future__ import annotations

import bisect
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from prometheus_client.core import HistogramMetricFamily

# Seconds; the same buckets for every request-time histogram, so dashboards can compare phases.
BUCKETS_S = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
_BOUNDS = (*[str(b) for b in BUCKETS_S], "+Inf")


class Histogram:
    """Observations per bucket (the last one +Inf) and their sum; not cumulative until exported."""

    __slots__ = ("counts", "sum_s")

    def __init__(self) -> None:
        self.counts = [0] * (len(BUCKETS_S) + 1)
        self.sum_s = 0.0

    def observe(self, seconds: float) -> None:
        self.counts[bisect.bisect_left(BUCKETS_S, seconds)] += 1
        self.sum_s += seconds

    @property
    def count(self) -> int:
        return sum(self.counts)

    def add_to(self, family: HistogramMetricFamily, labels: list[str]) -> None:
        """This histogram as one labelled series of `family` (cumulative buckets, as Prometheus wants)."""
        cumulative, buckets = 0, []
        for bound, n in zip(_BOUNDS, self.counts, strict=True):
            cumulative += n
            buckets.append((bound, float(cumulative)))
        family.add_metric(labels, buckets, self.sum_s)
