"""The broker's Prometheus metrics, computed from its state when /metrics is scraped (stepped collectors).

Nothing here runs on the request path: every figure is read from the replica manager, the logs, the
metadata quorum and image, and the group coordinator at scrape time. Names follow Kafka's JMX names as
the Prometheus JMX exporter spells them (kafka.server:type=ReplicaManager,name=PartitionCount ->
kafka_server_replicamanager_partitioncount); consumer lag follows kafka_exporter's kafka_consumergroup_*;
figures Kafka has no name for are samsa_*. Small families are prometheus-client's GaugeMetricFamily;
per-partition ones are SeriesFamily (series.py says why).

Per-partition series (kafka_log_log_*, kafka_cluster_partition_*) and per group/partition series
(kafka_consumergroup_*, samsa_consumergroup_*) can each be switched off for brokers with very many
partitions (samsa.metrics.per.partition.enable, samsa.metrics.per.group.enable).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from prometheus_client.core import GaugeMetricFamily

from samsa.broker.group.classic_group import Group
from samsa.broker.group.consumer_group import ConsumerGroupState
from samsa.broker.group.state import GroupState
from samsa.broker.metadata.log import METADATA_TOPIC
from samsa.broker.observability.cleaner_metrics import CleanerCollector
from samsa.broker.observability.lag import partition_lag
from samsa.broker.observability.series import Family, SeriesFamily, labels_text
from samsa.broker.observability.traffic import TrafficCollector
from samsa.kproto.batch import CorruptBatchError
from samsa.storage.errors import StorageError

if TYPE_CHECKING:
    from samsa.broker.observability.observed_broker import ObservabilityBroker

logger = logging.getLogger(__name__)

PER_PARTITION_KEY = "samsa.metrics.per.partition.enable"
PER_GROUP_KEY = "samsa.metrics.per.group.enable"
MIN_FREE_DISK_KEY = "samsa.min.free.disk.bytes"

Clock = Callable[[], int]  # wall-clock milliseconds
PARTITION_LABELS = ("topic", "partition")
GROUP_PARTITION_LABELS = ("group", "topic", "partition")


def wall_clock_ms() -> int:
    return int(time.time() * 1000)


# The scrape runs on the event loop (the state it reads is the loop's) and gives the loop back every
# this many partitions or committed offsets (~5 ms of work here), so no scrape holds it for long.
PARTITIONS_PER_STEP = 200
OFFSETS_PER_STEP = 100


class SteppedCollector(Protocol):
    """A collector whose work comes in steps: steps() yields a metric family, or None where the caller
    may let other work run (ObservabilityServer does, between steps)."""

    def steps(self) -> Iterator[Family | None]: ...


def collect_all(collectors: Iterable[SteppedCollector]) -> list[Family]:
    """Every family of every collector, in one go (tests, benchmarks)."""
    return [f for c in collectors for f in c.steps() if f is not None]


def _enabled(broker: ObservabilityBroker, key: str) -> bool:
    return broker.config.get_bool(key)


def _gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc, value=value)


@dataclass(frozen=True, slots=True)
class MetricsOptions:
    per_partition: bool = True
    per_group: bool = True

    @classmethod
    def from_broker(cls, broker: ObservabilityBroker) -> MetricsOptions:
        return cls(per_partition=_enabled(broker, PER_PARTITION_KEY), per_group=_enabled(broker, PER_GROUP_KEY))


class ReplicaCollector(SteppedCollector):
    """ReplicaManager, Partition and Log figures of the partitions this broker hosts."""

    def __init__(self, broker: ObservabilityBroker, options: MetricsOptions) -> None:
        self._broker = broker
        self._options = options

    def steps(self) -> Iterator[Family | None]:
        broker = self._broker
        node = broker.node_id
        per_partition = self._options.per_partition
        size = SeriesFamily("kafka_log_log_size", "Bytes of the partition's log segments.")
        segments = SeriesFamily("kafka_log_log_numlogsegments", "Segments of the partition's log.")
        start = SeriesFamily("kafka_log_log_logstartoffset", "The partition's log start offset.")
        end = SeriesFamily("kafka_log_log_logendoffset", "The partition's log end offset.")
        hw = SeriesFamily("samsa_log_high_watermark", "The partition's high watermark (this replica's view).")
        under_rep = SeriesFamily("kafka_cluster_partition_underreplicated",
                                 "1 if this leader's ISR is smaller than the replica set.")
        under_min = SeriesFamily("kafka_cluster_partition_underminisr",
                                 "1 if this leader's ISR is smaller than min.insync.replicas.")
        isr_count = SeriesFamily("kafka_cluster_partition_insyncreplicascount", "Members of the ISR (on the leader).")
        partitions = leaders = under_replicated = under_min_isr = offline = 0
        for p in list(broker.replica_manager.partitions()):  # a copy: partitions may come and go between steps
            partitions += 1
            if partitions % PARTITIONS_PER_STEP == 0:
                yield None
            log = p.log
            if log.offline_reason is not None:
                offline += 1
            leader = p.leader_id == node
            is_under_rep = is_under_min = False
            if leader:
                leaders += 1
                is_under_rep = len(p.isr) < len(p.replicas)
                min_isr = broker.topic_settings(p.topic).min_insync_replicas
                is_under_min = len(p.isr) < min_isr
                under_replicated += is_under_rep
                under_min_isr += is_under_min
            if per_partition:
                key = labels_text(PARTITION_LABELS, (p.topic, str(p.partition_id)))
                size.add(key, log.size_bytes)
                segments.add(key, len(log.segments))
                start.add(key, log.log_start_offset)
                end.add(key, log.log_end_offset)
                hw.add(key, log.high_watermark)
                if leader:
                    under_rep.add(key, int(is_under_rep))
                    under_min.add(key, int(is_under_min))
                    isr_count.add(key, len(p.isr))
        yield _gauge("kafka_server_replicamanager_partitioncount", "Partitions hosted by this broker.", partitions)
        yield _gauge("kafka_server_replicamanager_leadercount", "Partitions this broker leads.", leaders)
        yield _gauge("kafka_server_replicamanager_underreplicatedpartitions",
                     "Partitions this broker leads whose ISR is smaller than the replica set.", under_replicated)
        yield _gauge("kafka_server_replicamanager_underminisrpartitioncount",
                     "Partitions this broker leads whose ISR is below min.insync.replicas.", under_min_isr)
        yield _gauge("kafka_server_replicamanager_offlinereplicacount",
                     "Hosted partitions whose log is offline (a storage error).", offline)
        if per_partition:
            yield from (size, segments, start, end, hw, under_rep, under_min, isr_count)


class ClusterCollector(SteppedCollector):
    """The controller's and the metadata quorum's figures (KafkaController, raft-metrics)."""

    def __init__(self, broker: ObservabilityBroker) -> None:
        self._broker = broker

    def steps(self) -> Iterator[Family | None]:
        broker = self._broker
        active = broker.is_active_controller
        image = broker.image
        yield _gauge("kafka_controller_kafkacontroller_activecontrollercount",
                     "1 on the active controller, else 0.", int(active))
        offline = global_partitions = 0
        live = set(image.live_brokers())
        for topic in image.topics_by_name.values():
            for p in topic.partitions.values():
                global_partitions += 1
                offline += p.leader < 0 or p.leader not in live
        # Kafka reports these on the active controller only (0 elsewhere), so sum() over brokers is right.
        yield _gauge("kafka_controller_kafkacontroller_offlinepartitionscount",
                     "Partitions without a live leader (on the active controller).", offline if active else 0)
        yield _gauge("kafka_controller_kafkacontroller_globalpartitioncount",
                     "Partitions in the cluster (on the active controller).", global_partitions if active else 0)
        yield _gauge("kafka_controller_kafkacontroller_globaltopiccount",
                     "Topics in the cluster (on the active controller).", len(image.topics_by_name) if active else 0)
        fenced = sum(1 for b in image.brokers.values() if b.fenced)
        yield _gauge("kafka_controller_kafkacontroller_fencedbrokercount",
                     "Registered brokers that are fenced (on the active controller).", fenced if active else 0)
        yield _gauge("kafka_controller_kafkacontroller_activebrokercount",
                     "Registered brokers that are unfenced (on the active controller).",
                     len(image.brokers) - fenced if active else 0)
        quorum = broker.quorum
        leader = quorum.leader_id if not quorum.is_leader else broker.node_id
        yield _gauge("kafka_server_raftmetrics_current_leader", "The metadata quorum's leader id, -1 if unknown.",
                     -1 if leader is None else leader)
        yield _gauge("kafka_server_raftmetrics_current_epoch", "The metadata quorum's epoch.", quorum.epoch)
        yield _gauge("kafka_server_raftmetrics_high_watermark", "The metadata log's high watermark known here.",
                     quorum.high_watermark)
        metadata_log = broker.log_manager.get_log(METADATA_TOPIC, 0)
        if metadata_log is not None:
            yield _gauge("kafka_server_raftmetrics_log_end_offset", "The metadata log's end offset on this node.",
                         metadata_log.log_end_offset)
        yield _gauge("kafka_server_raftmetrics_applied_offset",
                     "Metadata entries below this offset are in this node's image.", quorum.applied_offset)
        yield _gauge("kafka_server_raftmetrics_lag",
                     "Committed metadata entries this node has not applied yet.",
                     max(0, quorum.high_watermark - quorum.applied_offset))
        yield _gauge("kafka_server_raftmetrics_is_leader", "1 if this node leads the metadata quorum.",
                     int(quorum.is_leader))


class DiskCollector(SteppedCollector):
    """Free space of the data directory against the append reserve (samsa.min.free.disk.bytes)."""

    def __init__(self, broker: ObservabilityBroker) -> None:
        self._broker = broker

    def steps(self) -> Iterator[Family | None]:
        broker = self._broker
        data_dir = broker.log_manager.data_dir
        labels = ["log_dir"]
        key = [str(data_dir.resolve())]
        free = GaugeMetricFamily("samsa_log_dir_free_bytes", "Free bytes of the data directory's volume.",
                                 labels=labels)
        total = GaugeMetricFamily("samsa_log_dir_total_bytes", "Size of the data directory's volume.", labels=labels)
        reserve = GaugeMetricFamily("samsa_log_dir_min_free_bytes",
                                    "The free-disk reserve below which appends are refused.", labels=labels)
        try:
            free.add_metric(key, broker.log_manager.file_io.disk_free_bytes(data_dir))
            st = os.statvfs(data_dir)
            total.add_metric(key, st.f_blocks * st.f_frsize)
        except OSError as e:
            logger.warning("cannot read free space of %s: %s", data_dir, e)
        reserve.add_metric(key, broker.config.get_int(MIN_FREE_DISK_KEY))
        yield from (free, total, reserve)


COORDINATOR_METRICS = "kafka_server_group_coordinator_metrics"
GROUP_STATE_METRICS = {
    GroupState.STABLE: "kafka_coordinator_group_groupmetadatamanager_numgroupsstable",
    GroupState.PREPARING_REBALANCE: "kafka_coordinator_group_groupmetadatamanager_numgroupspreparingrebalance",
    GroupState.COMPLETING_REBALANCE: "kafka_coordinator_group_groupmetadatamanager_numgroupscompletingrebalance",
    GroupState.EMPTY: "kafka_coordinator_group_groupmetadatamanager_numgroupsempty",
    GroupState.DEAD: "kafka_coordinator_group_groupmetadatamanager_numgroupsdead",
}


class GroupCollector(SteppedCollector):
    """Groups this broker coordinates: counts by state, and lag per group and partition.

    Lag is computed for the partitions whose log this broker holds (all of them on a single node; in a
    cluster, those whose replica is here: the high watermark is this replica's view of it)."""

    def __init__(self, broker: ObservabilityBroker, options: MetricsOptions, clock: Clock = wall_clock_ms) -> None:
        self._broker = broker
        self._options = options
        self._clock = clock

    def steps(self) -> Iterator[Family | None]:
        groups = self._broker.groups.coordinator.groups
        counts = dict.fromkeys(GroupState, 0)
        offsets = 0
        for group in list(groups.values()):
            counts[group.state] += 1
            offsets += len(group.offsets)
        yield _gauge("kafka_coordinator_group_groupmetadatamanager_numgroups", "Groups this broker coordinates.",
                     len(groups))
        for state, name in GROUP_STATE_METRICS.items():
            yield _gauge(name, f"Groups in state {state.value}.", counts[state])
        yield _gauge("kafka_coordinator_group_groupmetadatamanager_numoffsets",
                     "Committed offsets held by this broker's groups.", offsets)
        yield from self._broker.groups.coordinator.rebalances.families()
        yield from self._coordinator_metrics(set(groups))
        if self._options.per_group:
            yield from self._lag(list(groups.items()))

    def _coordinator_metrics(self, classic_ids: set[str]) -> Iterator[Family]:
        """Kafka's GroupCoordinatorMetrics (kafka.server:type=group-coordinator-metrics): groups by protocol,
        consumer groups by state, and the rebalance meters of both protocols."""
        service = self._broker.groups
        consumer = service.consumer.list_groups()
        consumer_states = [state for _, state in consumer]
        classic_groups = len(classic_ids - {group_id for group_id, _ in consumer})  # as ListGroups lists them
        by_protocol = GaugeMetricFamily(f"{COORDINATOR_METRICS}_group_count", "Groups by rebalance protocol.",
                                        labels=("protocol",))
        by_protocol.add_metric(["classic"], classic_groups)
        by_protocol.add_metric(["consumer"], len(consumer_states))
        yield by_protocol
        by_state = GaugeMetricFamily(f"{COORDINATOR_METRICS}_consumer_group_count", "Consumer groups by state.",
                                     labels=("state",))
        for state in ConsumerGroupState:
            by_state.add_metric([state.value], consumer_states.count(state))
        yield by_state
        for prefix, meter, what in (("group_completed_rebalance", service.coordinator.rebalances.meter,
                                     "classic group completed rebalances"),
                                    ("consumer_group_rebalance", service.consumer.rebalances,
                                     "consumer group rebalances (group epoch bumps by a heartbeat)")):
            yield _gauge(f"{COORDINATOR_METRICS}_{prefix}_rate", f"The rate of {what} (per second, last minute).",
                         meter.rate())
            yield _gauge(f"{COORDINATOR_METRICS}_{prefix}_count", f"The total number of {what}.", meter.count)

    def _lag(self, groups: Iterable[tuple[str, Group]]) -> Iterator[Family | None]:
        current = SeriesFamily("kafka_consumergroup_current_offset", "The group's committed offset.")
        lag = SeriesFamily("kafka_consumergroup_lag", "High watermark minus committed offset (records).")
        lag_bytes = SeriesFamily("samsa_consumergroup_lag_bytes",
                                 "Log bytes from the committed offset to the high watermark.")
        lag_seconds = SeriesFamily("samsa_consumergroup_lag_seconds",
                                   "Age of the group's next unconsumed record (0 when caught up).")
        retention_s = SeriesFamily(
            "samsa_consumergroup_retention_remaining_seconds",
            "Time until retention.ms may delete the segment holding the group's oldest unread record "
            "(+Inf: nothing unread or no time limit; 0: already deleted).")
        retention_b = SeriesFamily(
            "samsa_consumergroup_retention_remaining_bytes",
            "Bytes the partition may still grow before retention.bytes deletes the group's oldest unread "
            "record (+Inf: nothing unread or no size limit; 0: already deleted).")
        now = self._clock()
        replicas = self._broker.replica_manager
        done = 0
        for group_id, group in groups:
            for (topic, partition_id), committed in list(group.offsets.items()):
                done += 1
                if done % OFFSETS_PER_STEP == 0:
                    yield None
                p = replicas.get_partition(topic, partition_id)
                if p is None or p.log.offline_reason is not None or p.log.closed:
                    continue
                try:
                    figures = partition_lag(p.log, committed.offset, now)
                except (StorageError, CorruptBatchError, OSError) as e:  # damaged: left out of this scrape
                    logger.warning("lag of %s on %s-%d: %s", group_id, topic, partition_id, e)
                    continue
                key = labels_text(GROUP_PARTITION_LABELS, (group_id, topic, str(partition_id)))
                current.add(key, committed.offset)
                lag.add(key, figures.lag_records)
                lag_bytes.add(key, figures.lag_bytes)
                lag_seconds.add(key, figures.lag_ms / 1000)
                retention_s.add(key, figures.retention_remaining_ms / 1000)
                retention_b.add(key, figures.retention_remaining_bytes)
        yield from (current, lag, lag_bytes, lag_seconds, retention_s, retention_b)


class RequestCollector(SteppedCollector):
    """Requests and their total time per API (broker.observability.request_metrics)."""

    def __init__(self, broker: ObservabilityBroker) -> None:
        self._broker = broker

    def steps(self) -> Iterator[Family | None]:
        yield from self._broker.request_metrics.families()
        per_listener: dict[str, int] = {}
        for connection in self._broker.connections:
            per_listener[connection.listener] = per_listener.get(connection.listener, 0) + 1
        connections = GaugeMetricFamily("kafka_server_socket_server_metrics_connection_count",
                                        "Open connections, per listener.", labels=("listener",))
        for listener, count in sorted(per_listener.items()):
            connections.add_metric([listener], count)
        yield connections


def broker_collectors(broker: ObservabilityBroker, clock: Clock = wall_clock_ms,
                      options: MetricsOptions | None = None) -> list[SteppedCollector]:
    opts = options if options is not None else MetricsOptions.from_broker(broker)
    return [ReplicaCollector(broker, opts), ClusterCollector(broker), DiskCollector(broker),
            GroupCollector(broker, opts, clock), RequestCollector(broker),
            TrafficCollector(broker, opts.per_partition), CleanerCollector(broker)]
