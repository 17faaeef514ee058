"""Bytes and records in and out per topic (Kafka's BrokerTopicStats / BrokerTopicMetrics), counted as plain
integers on the request path (a few dict updates per partition) and turned into Prometheus families at
scrape time.

What is counted, as Kafka's ReplicaManager and KafkaApis count it:
- bytes in / messages in: a batch appended by a leader for a Produce request: the size of the producer's
  batch as it came in the request (Kafka's records.sizeInBytes: what the log holds, unless the topic's
  compression.type made the broker write it again) and its records (last offset - first offset + 1). An
  idempotent retry answered from producer state appends nothing and counts nothing; followers' appends
  and the coordinators' own writes are not client traffic.
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
    """Per-topic counters (one list per topic, in TOPIC_COUNTERS' order) and their all-topics totals.

    One dict lookup per partition and plain list increments: this runs for every partition of every Produce
    and Fetch."""

    __slots__ = ("by_topic", "replication_bytes_out", "totals")

    def __init__(self) -> None:
        self.by_topic: dict[str, list[int]] = {}
        self.totals = [0] * len(TOPIC_COUNTERS)
        self.replication_bytes_out = 0

    def _topic(self, topic: str) -> list[int]:
        counts = self.by_topic[topic] = [0] * len(TOPIC_COUNTERS)
        return counts

    def record_append(self, topic: str, size_bytes: int, records: int) -> None:
        """A leader appended a producer's batch."""
        counts = self.by_topic.get(topic) or self._topic(topic)
        totals = self.totals
        counts[0] += size_bytes
        counts[1] += records
        totals[0] += size_bytes
        totals[1] += records

    def record_produce(self, topic: str, failed: bool) -> None:
        """A partition of a Produce request was answered."""
        counts = self.by_topic.get(topic) or self._topic(topic)
        totals = self.totals
        counts[3] += 1
        totals[3] += 1
        if failed:
            counts[4] += 1
            totals[4] += 1

    def record_fetch(self, topic: str, failed: bool, size_bytes: int) -> None:
        """A partition of a consumer's Fetch response, with `size_bytes` of records."""
        counts = self.by_topic.get(topic) or self._topic(topic)
        totals = self.totals
        counts[2] += size_bytes
        totals[2] += size_bytes
        counts[5] += 1
        totals[5] += 1
        if failed:
            counts[6] += 1
            totals[6] += 1

    def value(self, counter: str, topic: str | None = None) -> int:
        """One figure, for one topic or (None) all topics: `counter` as in TOPIC_COUNTERS ("bytesin")."""
        index = next(i for i, (name, _) in enumerate(TOPIC_COUNTERS) if name == counter)
        if topic is None:
            return self.totals[index]
        counts = self.by_topic.get(topic)
        return 0 if counts is None else counts[index]

    def forget_topics_except(self, live: Collection[str]) -> None:
        """Drop the series of deleted topics (Kafka removes a deleted topic's metrics); totals stay."""
        for topic in [t for t in self.by_topic if t not in live]:
            del self.by_topic[topic]

    def families(self, per_topic: bool) -> Iterator[CounterMetricFamily]:
        """Each counter with the all-topics figure as the series without a topic (the JMX exporter's shape of
        Kafka's BrokerTopicMetrics), and one series per topic unless per_topic is off."""
        from prometheus_client.core import CounterMetricFamily

        topics = sorted(self.by_topic.items()) if per_topic else []
        for index, (name, doc) in enumerate(TOPIC_COUNTERS):
            family = CounterMetricFamily(PREFIX + name, doc + " topic=\"\": all topics.", labels=("topic",))
            family.add_metric([""], float(self.totals[index]))
            for topic, counts in topics:
                family.add_metric([topic], float(counts[index]))
            yield family
        replication = CounterMetricFamily(PREFIX + "replicationbytesout",
                                          "Record bytes sent to followers (Kafka's ReplicationBytesOutPerSec).")
        replication.add_metric([], float(self.replication_bytes_out))
        yield replication
