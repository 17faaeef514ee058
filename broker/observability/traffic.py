"""Scrape-time families of what the request path and the replica manager count: bytes and records in and out
per topic (BrokerTopicMetrics), ISR shrinks and expands (ReplicaManager), and the metadata quorum's commit
latency (raft-metrics commit-latency)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily

from samsa.broker.observability.series import Family

if TYPE_CHECKING:
    from samsa.broker.observability.observed_broker import ObservabilityBroker


class TrafficCollector:
    """A SteppedCollector (collectors.py). Per-topic series follow samsa.metrics.per.partition.enable (`per_topic`):
    they are off with the per-partition ones (a broker with very many partitions may have very many topics)."""

    def __init__(self, broker: ObservabilityBroker, per_topic: bool) -> None:
        self._broker = broker
        self._per_topic = per_topic

    def steps(self) -> Iterator[Family | None]:
        broker = self._broker
        topics = broker.request_metrics.topics
        topics.forget_topics_except(broker.image.topics_by_name)
        yield from topics.families(self._per_topic)
        replicas = broker.replica_manager
        shrinks = CounterMetricFamily("kafka_server_replicamanager_isrshrinks",
                                      "ISR shrinks this broker asked for as leader and the controller committed.")
        shrinks.add_metric([], float(replicas.isr_shrinks))
        expands = CounterMetricFamily("kafka_server_replicamanager_isrexpands",
                                      "ISR expansions this broker asked for as leader and the controller committed.")
        expands.add_metric([], float(replicas.isr_expands))
        commit = HistogramMetricFamily(
            "kafka_server_raftmetrics_commit_latency_seconds",
            "Time from a metadata write's propose to its commit (the high watermark passing it), on the leader.")
        broker.quorum.commit_latency.add_to(commit, [])
        yield from (shrinks, expands, commit)
