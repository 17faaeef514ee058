"""Bytes and records in and out per topic (Kafka's BrokerTopicStats / BrokerTopicMetrics), counted as plain
integers on the request path (a few dict updates per partition) and turned into Prometheus families at
scrape time.

What is counted, as Kafka's ReplicaManager and KafkaApis count it:
- bytes in / messages in: a batch appended by a leader for a Produce request: its size as appended to the
  log (the producer's batch, or the batch written again when the topic's compression differs) and its
  records (last offset - first offset + 1). An idempotent retry answered from producer state appends
  nothing and counts nothing; followers' appends and the coordinators' own writes are not client traffic.
- bytes out: the record bytes of each partition in a consumer's Fetch response as sent (after a long poll,
  the final read only). A follower's fetch counts in replication bytes out instead, with no topic, as
  Kafka's updateBytesOut does for isFromFollower.
- total/failed produce and fetch requests: per partition of a request, failed when answered with an error.

The "all topics" figures (Kafka's allTopicsStats) are separate counters, kept when a topic is deleted and
its own series dropped, so they never go backwards.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from prometheus_client.core import CounterMetricFamily

PREFIX = "kafka_server_brokertopicmetrics_"
# (counter, help) of the per-topic counters, in BrokerTopicMetrics' order of fields.
TOPIC_COUNTERS = (
    ("bytesin", "Record batch bytes appended for producers."),
    ("messagesin", "Records appended for producers."),
    ("bytesout", "Record bytes sent to consumers (follower fetches excluded)."),
    ("totalproducerequests", "Partitions of Produce requests."),
    ("failedproducerequests", "Partitions of Produce requests answered with an error."),
    ("totalfetchrequests", "Partitions of consumer Fetch requests."),
    ("failedfetchrequests", "Partitions of consumer Fetch requests answered with an error."),
)


class BrokerTopicMetrics:
    """Per-topic counters (one dict per figure) and their all-topics totals."""

    __slots__ = ("by_topic", "replication_bytes_out", "totals")

    def __init__(self) -> None:
        # one dict per TOPIC_COUNTERS entry, in that order: topic -> count
        self.by_topic: tuple[dict[str, int], ...] = tuple({} for _ in TOPIC_COUNTERS)
        self.totals = [0] * len(TOPIC_COUNTERS)
        self.replication_bytes_out = 0

    def _add(self, index: int, topic: str, amount: int) -> None:
        counts = self.by_topic[index]
        counts[topic] = counts.get(topic, 0) + amount
        self.totals[index] += amount

    def record_append(self, topic: str, size_bytes: int, records: int) -> None:
        """A leader appended a producer's batch."""
        self._add(0, topic, size_bytes)
        self._add(1, topic, records)

    def record_produce(self, topic: str, failed: bool) -> None:
        """A partition of a Produce request was answered."""
        self._add(3, topic, 1)
        if failed:
            self._add(4, topic, 1)

    def record_fetch(self, topic: str, failed: bool, size_bytes: int) -> None:
        """A partition of a consumer's Fetch response, with `size_bytes` of records."""
        self._add(5, topic, 1)
        if failed:
            self._add(6, topic, 1)
        if size_bytes:
            self._add(2, topic, size_bytes)

    def value(self, counter: str, topic: str | None = None) -> int:
        """One figure, for one topic or (None) all topics: `counter` as in TOPIC_COUNTERS ("bytesin")."""
        index = next(i for i, (name, _) in enumerate(TOPIC_COUNTERS) if name == counter)
        return self.totals[index] if topic is None else self.by_topic[index].get(topic, 0)

    def forget_topics_except(self, live: Collection[str]) -> None:
        """Drop the series of deleted topics (Kafka removes a deleted topic's metrics); totals stay."""
        for counts in self.by_topic:
            for topic in [t for t in counts if t not in live]:
                del counts[topic]

    def families(self, per_topic: bool) -> Iterator[CounterMetricFamily]:
        """Each counter with the all-topics figure as the series without a topic (the JMX exporter's shape of
        Kafka's BrokerTopicMetrics), and one series per topic unless per_topic is off."""
        from prometheus_client.core import CounterMetricFamily

        for (name, doc), counts, total in zip(TOPIC_COUNTERS, self.by_topic, self.totals, strict=True):
            family = CounterMetricFamily(PREFIX + name, doc + " topic=\"\": all topics.", labels=("topic",))
            family.add_metric([""], float(total))
            if per_topic:
                for topic in sorted(counts):
                    family.add_metric([topic], float(counts[topic]))
            yield family
        replication = CounterMetricFamily(PREFIX + "replicationbytesout",
                                          "Record bytes sent to followers (Kafka's ReplicationBytesOutPerSec).")
        replication.add_metric([], float(self.replication_bytes_out))
        yield replication
