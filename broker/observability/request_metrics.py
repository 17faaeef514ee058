"""Requests per API and their times (Kafka's kafka.network RequestMetrics: RequestsPerSec, TotalTimeMs,
RequestQueueTimeMs, LocalTimeMs, RemoteTimeMs, ResponseSendTimeMs, ErrorsPerSec), and the per-topic traffic
of BrokerTopicStats (topic_metrics.py), counted on every request whether or not /metrics is served.

Kept as plain integers and floats per API key (a bisect and three increments, ~0.4 us a request), and turned
into Prometheus families only when scraped, so prometheus-client stays off the request path and out of a
broker's start-up. Total time runs from the frame's decode to the response handed to the connection (for a
long-poll Fetch or an acks=all Produce, the wait included, as Kafka's TotalTimeMs).

The phases are timed by the connection (broker/connection.py), as Kafka's RequestChannel times them:
- request queue: from the read that completed the frame to the dispatch of the request (time behind earlier
  requests of the same connection, which is muted while one waits, or behind queued.max.requests);
- local: the dispatch itself: decode, handler, encode (for a request that waits, until the handler hands
  back its wait);
- remote: the wait: an acks=all Produce for its replicas, a long-poll Fetch for data, a forwarded request
  for the controller, a large batch validated on a worker thread;
- response send: from the response handed to the connection to its last byte handed to the transport (for
  a response sent from a segment file, the last chunk, which is read only once the socket took the one
  before). Bytes the transport buffers past that are not waited for: asyncio says when its buffer is
  empty only for a connection above its high-water mark, so this is a lower bound for a slow reader.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING

from samsa.broker.observability.histogram import BUCKETS_S, Histogram
from samsa.broker.observability.topic_metrics import BrokerTopicMetrics

if TYPE_CHECKING:
    from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily

__all__ = ["BUCKETS_S", "RequestMetrics"]

# (name suffix, help) of the phase histograms, in the order record_phases takes them.
PHASES = (
    ("requestqueuetime", "Time from the read that completed a request's frame to its dispatch, per API."),
    ("localtime", "Time the request was handled on the event loop (decode, handler, encode), per API."),
    ("remotetime", "Time a request waited (acks=all replication, long-poll fetch, forwarding), per API."),
    ("responsesendtime", "Time from the response handed to the connection to its last byte handed to the "
                         "transport, per API."),
)


_BUCKET_COUNT = len(BUCKETS_S) + 1  # the last one is +Inf


class RequestMetrics:
    def __init__(self) -> None:
        self._total: dict[int, Histogram] = {}  # api key -> total time
        # api key -> (bucket counts of the four phases one after the other, the four sums): flat lists, as
        # this runs for every request
        self._phases: dict[int, tuple[list[int], list[float]]] = {}
        self.errors: dict[tuple[int, int], int] = {}  # (api key, error code) -> responses or partitions
        self.topics = BrokerTopicMetrics()

    def record(self, api_key: int, seconds: float) -> None:
        total = self._total.get(api_key)
        if total is None:
            total = self._total[api_key] = Histogram()
        total.observe(seconds)

    def record_phases(self, api_key: int, queue_s: float, local_s: float, remote_s: float, send_s: float) -> None:
        phases = self._phases.get(api_key)
        if phases is None:
            phases = self._phases[api_key] = ([0] * (4 * _BUCKET_COUNT), [0.0] * 4)
        counts, sums = phases
        counts[bisect_left(BUCKETS_S, queue_s)] += 1
        counts[_BUCKET_COUNT + bisect_left(BUCKETS_S, local_s)] += 1
        # (most requests wait for nothing: remote time 0 needs no search)
        counts[2 * _BUCKET_COUNT + (bisect_left(BUCKETS_S, remote_s) if remote_s else 0)] += 1
        counts[3 * _BUCKET_COUNT + bisect_left(BUCKETS_S, send_s)] += 1
        sums[0] += queue_s
        sums[1] += local_s
        sums[2] += remote_s
        sums[3] += send_s

    def count_produce(self, topic: str, error_code: int) -> None:
        """A partition of a Produce request answered: ErrorsPerSec and Total/FailedProduceRequestsPerSec."""
        key = (0, error_code)
        errors = self.errors
        errors[key] = errors.get(key, 0) + 1
        self.topics.record_produce(topic, error_code != 0)

    def count_error(self, api_key: int, error_code: int) -> None:
        """One error code answered (Kafka's ErrorsPerSec counts NONE too: per partition for Produce and
        Fetch, per response for the APIs whose answer has one top-level error code)."""
        key = (api_key, error_code)
        self.errors[key] = self.errors.get(key, 0) + 1

    def requests(self, api_key: int) -> int:
        total = self._total.get(api_key)
        return 0 if total is None else total.count

    def families(self) -> Iterator[CounterMetricFamily | HistogramMetricFamily]:
        from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily

        from samsa.kproto.errors import ErrorCode
        from samsa.kproto.messages import API_NAMES

        requests = CounterMetricFamily("kafka_network_requestmetrics_requests", "Requests answered, per API.",
                                       labels=("request",))
        total = HistogramMetricFamily("kafka_network_requestmetrics_totaltime_seconds",
                                      "Time from a request's decode to its response, per API.", labels=("request",))
        for api_key in sorted(self._total):
            name = _api_name(api_key, API_NAMES)
            histogram = self._total[api_key]
            requests.add_metric([name], float(histogram.count))
            histogram.add_to(total, [name])
        yield requests
        yield total
        phases = [HistogramMetricFamily(f"kafka_network_requestmetrics_{suffix}_seconds", doc, labels=("request",))
                  for suffix, doc in PHASES]
        for api_key in sorted(self._phases):
            name = _api_name(api_key, API_NAMES)
            counts, sums = self._phases[api_key]
            for i, family in enumerate(phases):
                histogram = Histogram()
                histogram.counts = counts[i * _BUCKET_COUNT:(i + 1) * _BUCKET_COUNT]
                histogram.sum_s = sums[i]
                histogram.add_to(family, [name])
        yield from phases
        errors = CounterMetricFamily(
            "kafka_network_requestmetrics_errors",
            "Error codes answered (NONE included), per API: per partition for Produce and Fetch, per response for "
            "APIs with a top-level error code.", labels=("request", "error"))
        for (api_key, code), count in sorted(self.errors.items()):
            try:
                error = ErrorCode(code).name.upper()
            except ValueError:
                error = str(code)
            errors.add_metric([_api_name(api_key, API_NAMES), error], float(count))
        yield errors


def _api_name(api_key: int, names: Mapping[int, str]) -> str:
    """Kafka's request name as RequestMetrics labels it: list_offsets -> ListOffsets."""
    raw = names.get(api_key)
    return str(api_key) if raw is None else "".join(part.capitalize() for part in raw.split("_"))
