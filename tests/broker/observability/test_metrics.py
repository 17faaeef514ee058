"""The scrape-time collectors against a broker in this process: gauges follow what was appended and
committed, and the time figures follow the records' timestamps under a fake clock."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from samsa.broker.broker import Broker
from samsa.broker.config import BrokerConfig
from samsa.broker.controller import TopicSpec
from samsa.broker.group.classic_group import OffsetAndMetadata
from samsa.broker.observability.collectors import MetricsOptions, broker_collectors, collect_all
from samsa.broker.observability.health import readiness
from samsa.broker.observability.series import exposition
from samsa.broker.replica_manager import Partition
from samsa.kproto.errors import ErrorCode
from samsa.kproto.records import encode_batch

T0_MS = 1_700_000_000_000
RETENTION_MS = 3_600_000
RECORD_BYTES = 100


class FakeClock:
    def __init__(self, now_ms: int) -> None:
        self.now_ms = now_ms

    def __call__(self) -> int:
        return self.now_ms


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    b = Broker(BrokerConfig(overrides={"offsets.topic.num.partitions": "1"}, data_dir=tmp_path / "data"))
    yield b
    b.close()


def create(broker: Broker, topic: str, partitions: int, configs: dict[str, str | None] | None = None) -> None:
    (result,) = broker.controller.create_topics([TopicSpec(topic, partitions, 1, configs=configs or {})],
                                                validate_only=False).result()
    assert result.error_code == ErrorCode.none


def partition(broker: Broker, topic: str, index: int = 0) -> Partition:
    p = broker.replica_manager.get_partition(topic, index)
    assert p is not None
    return p


def append(p: Partition, count: int, timestamp_ms: int, step_ms: int = 1000) -> list[int]:
    """`count` batches of one RECORD_BYTES-byte record each; returns each batch's size on disk."""
    sizes = []
    for i in range(count):
        batch = encode_batch([(None, bytes(RECORD_BYTES), ())], timestamp_ms=timestamp_ms + i * step_ms)
        p.append_as_leader(bytearray(batch), timestamp_ms + i * step_ms)
        sizes.append(len(batch))
    return sizes


def commit(broker: Broker, group: str, topic: str, index: int, offset: int) -> None:
    errors = broker.groups.coordinator.commit_offsets(
        group, "", {(topic, index): OffsetAndMetadata(offset, -1, "", T0_MS)}, T0_MS)
    assert set(errors.values()) <= {ErrorCode.none}


def scrape(broker: Broker, clock: FakeClock | None = None, options: MetricsOptions | None = None
           ) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = exposition(collect_all(broker_collectors(broker, clock or FakeClock(T0_MS), options or MetricsOptions())
                                  )).decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def value(samples: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str, **labels: str) -> float:
    return samples[(name, tuple(sorted(labels.items())))]


def test_size_and_offset_gauges_move_with_what_was_appended(broker: Broker) -> None:
    create(broker, "sized", 2)
    before = scrape(broker)
    assert value(before, "kafka_log_log_size", topic="sized", partition="0") == 0
    assert value(before, "kafka_log_log_logendoffset", topic="sized", partition="0") == 0
    n = 25
    sizes = append(partition(broker, "sized", 0), n, T0_MS)
    after = scrape(broker)
    assert value(after, "kafka_log_log_size", topic="sized", partition="0") == sum(sizes)
    assert sum(sizes) >= n * RECORD_BYTES  # each batch holds its 100-byte value plus framing
    assert value(after, "kafka_log_log_logendoffset", topic="sized", partition="0") == n
    assert value(after, "samsa_log_high_watermark", topic="sized", partition="0") == n
    assert value(after, "kafka_log_log_logstartoffset", topic="sized", partition="0") == 0
    assert value(after, "kafka_log_log_size", topic="sized", partition="1") == 0
    assert value(after, "kafka_log_log_numlogsegments", topic="sized", partition="0") == 1
    partition(broker, "sized", 0).log.roll(T0_MS)
    append(partition(broker, "sized", 0), 1, T0_MS)
    assert value(scrape(broker), "kafka_log_log_numlogsegments", topic="sized", partition="0") == 2
    # Broker-level figures: 2 partitions of "sized", all led here, fully replicated (one replica).
    hosted = sum(1 for _ in broker.replica_manager.partitions())
    assert value(after, "kafka_server_replicamanager_partitioncount") == hosted >= 2
    assert value(after, "kafka_server_replicamanager_leadercount") == hosted
    assert value(after, "kafka_server_replicamanager_underreplicatedpartitions") == 0
    assert value(after, "kafka_controller_kafkacontroller_activecontrollercount") == 1
    assert value(after, "kafka_controller_kafkacontroller_offlinepartitionscount") == 0
    assert value(after, "kafka_server_raftmetrics_current_leader") == broker.node_id
    assert value(after, "kafka_server_raftmetrics_high_watermark") == broker.quorum.high_watermark > 0


def test_under_min_isr_follows_the_topic_config(broker: Broker) -> None:
    create(broker, "strict", 1, {"min.insync.replicas": "2"})
    samples = scrape(broker)
    assert value(samples, "kafka_cluster_partition_underminisr", topic="strict", partition="0") == 1
    assert value(samples, "kafka_server_replicamanager_underminisrpartitioncount") == 1


def test_disk_gauges_report_the_reserve(broker: Broker) -> None:
    samples = scrape(broker)
    log_dir = str(broker.log_manager.data_dir.resolve())
    assert value(samples, "samsa_log_dir_min_free_bytes", log_dir=log_dir) == broker.config.get_int(
        "samsa.min.free.disk.bytes")
    free = value(samples, "samsa_log_dir_free_bytes", log_dir=log_dir)
    assert 0 < free <= value(samples, "samsa_log_dir_total_bytes", log_dir=log_dir)


def test_lag_in_records_bytes_and_time_with_a_fake_clock(broker: Broker) -> None:
    create(broker, "lagged", 1, {"retention.ms": str(RETENTION_MS)})
    p = partition(broker, "lagged")
    sizes = append(p, 10, T0_MS)  # offsets 0..9, timestamps T0 + i s
    p.log.roll(T0_MS + 10_000)
    sizes += append(p, 5, T0_MS + 10_000)  # offsets 10..14 in a second segment, T0 + 10..14 s
    commit(broker, "g", "lagged", 0, 4)
    clock = FakeClock(T0_MS + 60_000)
    samples = scrape(broker, clock)
    labels = {"group": "g", "topic": "lagged", "partition": "0"}
    assert value(samples, "kafka_consumergroup_current_offset", **labels) == 4
    assert value(samples, "kafka_consumergroup_lag", **labels) == 15 - 4
    assert value(samples, "samsa_consumergroup_lag_bytes", **labels) == sum(sizes[4:])
    # The next unconsumed record (offset 4) was written at T0 + 4 s: 56 s old at T0 + 60 s.
    assert value(samples, "samsa_consumergroup_lag_seconds", **labels) == 56.0
    # Its segment's newest record is T0 + 9 s: retention.ms may delete it at T0 + 9 s + 1 h.
    assert value(samples, "samsa_consumergroup_retention_remaining_seconds", **labels) == (
        9_000 + RETENTION_MS - 60_000) / 1000
    assert math.isinf(value(samples, "samsa_consumergroup_retention_remaining_bytes", **labels))
    clock.now_ms += 30_000  # time passes, nothing is consumed: the age grows, the headroom shrinks
    later = scrape(broker, clock)
    assert value(later, "samsa_consumergroup_lag_seconds", **labels) == 86.0
    assert value(later, "samsa_consumergroup_retention_remaining_seconds", **labels) == (
        9_000 + RETENTION_MS - 90_000) / 1000
    # Once the group reads into the second segment, its headroom is counted from that segment.
    commit(broker, "g", "lagged", 0, 12)
    moved = scrape(broker, clock)
    assert value(moved, "kafka_consumergroup_lag", **labels) == 3
    assert value(moved, "samsa_consumergroup_lag_bytes", **labels) == sum(sizes[12:])
    assert value(moved, "samsa_consumergroup_lag_seconds", **labels) == 90 - 12
    assert value(moved, "samsa_consumergroup_retention_remaining_seconds", **labels) == (
        14_000 + RETENTION_MS - 90_000) / 1000


def test_a_caught_up_group_has_no_lag_and_infinite_headroom(broker: Broker) -> None:
    create(broker, "done", 1)
    append(partition(broker, "done"), 3, T0_MS)
    commit(broker, "g", "done", 0, 3)
    samples = scrape(broker, FakeClock(T0_MS + 10**9))
    labels = {"group": "g", "topic": "done", "partition": "0"}
    assert value(samples, "kafka_consumergroup_lag", **labels) == 0
    assert value(samples, "samsa_consumergroup_lag_seconds", **labels) == 0
    assert math.isinf(value(samples, "samsa_consumergroup_retention_remaining_seconds", **labels))


def test_retention_bytes_headroom_and_data_already_lost(broker: Broker) -> None:
    create(broker, "capped", 1, {"retention.bytes": "10000", "retention.ms": "-1"})
    p = partition(broker, "capped")
    first = append(p, 4, T0_MS)
    p.log.roll(T0_MS)
    second = append(p, 4, T0_MS)
    commit(broker, "g", "capped", 0, 1)
    labels = {"group": "g", "topic": "capped", "partition": "0"}
    samples = scrape(broker)
    # Segment 1 goes once the log exceeds retention.bytes by its whole size.
    assert value(samples, "samsa_consumergroup_retention_remaining_bytes", **labels) == 10000 + sum(first) - sum(
        first + second)
    assert math.isinf(value(samples, "samsa_consumergroup_retention_remaining_seconds", **labels))
    # The log start moves past what the group read (DeleteRecords): its unread data is gone.
    assert p.log.maybe_increment_log_start_offset(6)
    lost = scrape(broker)
    assert value(lost, "kafka_consumergroup_lag", **labels) == 8 - 1  # as kafka-consumer-groups shows it
    assert value(lost, "samsa_consumergroup_retention_remaining_bytes", **labels) == 0
    assert value(lost, "samsa_consumergroup_retention_remaining_seconds", **labels) == 0


def test_group_state_counts(broker: Broker) -> None:
    create(broker, "t", 1)
    commit(broker, "a", "t", 0, 0)
    commit(broker, "b", "t", 0, 0)
    samples = scrape(broker)
    assert value(samples, "kafka_coordinator_group_groupmetadatamanager_numgroups") == 2
    assert value(samples, "kafka_coordinator_group_groupmetadatamanager_numgroupsempty") == 2
    assert value(samples, "kafka_coordinator_group_groupmetadatamanager_numgroupsstable") == 0
    assert value(samples, "kafka_coordinator_group_groupmetadatamanager_numoffsets") == 2


def test_per_partition_and_per_group_series_can_be_switched_off(broker: Broker) -> None:
    create(broker, "many", 3)
    commit(broker, "g", "many", 0, 0)
    samples = scrape(broker, options=MetricsOptions(per_partition=False, per_group=False))
    names = {name for name, _ in samples}
    assert not any(n.startswith(("kafka_log_log_", "kafka_cluster_partition_", "kafka_consumergroup_",
                                 "samsa_consumergroup_")) for n in names)
    assert value(samples, "kafka_server_replicamanager_partitioncount") >= 3
    assert value(samples, "kafka_coordinator_group_groupmetadatamanager_numgroups") == 1


def test_readiness_names_what_is_missing(broker: Broker) -> None:
    not_yet = readiness(broker, listeners_open=False)
    assert not not_yet.ready and not_yet.checks["listeners_open"] is False
    assert not_yet.checks["registered"] and not_yet.checks["unfenced"] and not_yet.checks["caught_up"]
    assert readiness(broker, listeners_open=True).ready
    broker.lifecycle.fenced = True
    fenced = readiness(broker, listeners_open=True)
    assert not fenced.ready and fenced.checks["unfenced"] is False and "fenced" in fenced.reasons[0]
