"""Requests per API and their total time (Kafka's kafka.network RequestMetrics: RequestsPerSec, TotalTimeMs),
counted on every request whether or not /metrics is served.

Kept as plain integers and floats per API key (a bisect and three increments, ~0.4 us a request), and turned
into Prometheus families only when scraped, so prometheus-client stays off the request path and out of a
broker's start-up. Total time runs from the frame's decode to the response handed to the connection (for a
long-poll Fetch or an acks=all Produce, the wait included, as Kafka's TotalTimeMs).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily

BUCKETS_S = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class RequestMetrics:
    def __init__(self) -> None:
        self._counts: dict[int, list[int]] = {}  # api key -> requests per bucket (last: +Inf)
        self._sums_s: dict[int, float] = {}

    def record(self, api_key: int, seconds: float) -> None:
        counts = self._counts.get(api_key)
        if counts is None:
            counts = self._counts[api_key] = [0] * (len(BUCKETS_S) + 1)
            self._sums_s[api_key] = 0.0
        counts[bisect.bisect_left(BUCKETS_S, seconds)] += 1
        self._sums_s[api_key] += seconds

    def requests(self, api_key: int) -> int:
        return sum(self._counts.get(api_key, ()))

    def families(self) -> Iterator[CounterMetricFamily | HistogramMetricFamily]:
        from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily

        from samsa.kproto.messages import API_NAMES

        requests = CounterMetricFamily("kafka_network_requestmetrics_requests", "Requests answered, per API.",
                                       labels=("request",))
        total = HistogramMetricFamily("kafka_network_requestmetrics_totaltime_seconds",
                                      "Time from a request's decode to its response, per API.", labels=("request",))
        for api_key in sorted(self._counts):
            name = _api_name(api_key, API_NAMES)
            counts = self._counts[api_key]
            cumulative, buckets = 0, []
            for bound, n in zip((*[str(b) for b in BUCKETS_S], "+Inf"), counts, strict=True):
                cumulative += n
                buckets.append((bound, float(cumulative)))
            requests.add_metric([name], float(cumulative))
            total.add_metric([name], buckets, self._sums_s[api_key])
        yield requests
        yield total


def _api_name(api_key: int, names: Mapping[int, str]) -> str:
    """Kafka's request name as RequestMetrics labels it: list_offsets -> ListOffsets."""
    raw = names.get(api_key)
    return str(api_key) if raw is None else "".join(part.capitalize() for part in raw.split("_"))
