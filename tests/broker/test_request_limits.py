"""Kafka's bound on one controller operation (QuorumController.MAX_RECORDS_PER_USER_OP = 10,000
records, else POLICY_VIOLATION for the whole request and nothing written), over the wire of one
`samsa serve` and on an in-process controller with four brokers; after each refused request the
broker still serves another client's produce and consume, and its RSS has grown by less than
MAX_RSS_GROWTH_MIB since it started.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from samsa.broker.client import Connection
from samsa.broker.config import BrokerConfig
from samsa.broker.controller import Controller, TopicSpec
from samsa.broker.controller_types import (
    EXCESSIVE_BATCH_MESSAGE,
    MAX_RECORDS_PER_USER_OP,
    PartitionsSpec,
    TooManyRecordsError,
)
from samsa.broker.log_pacer import INLINE_LOG_CHANGES
from samsa.broker.metadata.log import METADATA_LOG_CONFIG
from samsa.broker.metadata.quorum import Endpoint, MetadataQuorum
from samsa.broker.metadata.records import PartitionRecord, TopicRecord
from samsa.broker.reassignment import ElectionType
from samsa.kproto.errors import ErrorCode
from samsa.kproto.records import decode_batches, encode_batch
from samsa.storage.log import Log

POLICY_VIOLATION = ErrorCode.policy_violation.value


def create(conn: Connection, name: str, partitions: int, *, validate_only: bool = False,
           configs: tuple[tuple[str, str], ...] = ()) -> Any:
    return conn.request(19, {"topics": [{"name": name, "num_partitions": partitions, "replication_factor": 1,
                                         "assignments": (), "configs": [{"name": k, "value": v} for k, v in configs]}],
                             "timeout": 30000, "validate_only": validate_only})


def topic_names(conn: Connection) -> set[str]:
    r = conn.request(3, {"topics": None, "allow_auto_topic_creation": False,
                         "include_topic_authorized_operations": False})
    return {t.name for t in r.topics}


# Generous on purpose (a shared machine, allocator arenas): the point is that a hostile request cannot
# make memory grow without bound, not a tight figure.
MAX_RSS_GROWTH_MIB = 200
_rss_before_mib: dict[int, float] = {}  # broker pid -> VmRSS before any hostile request


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmRSS for pid {pid}")


@pytest.fixture(autouse=True)
def _rss_before_hostile_requests(request: pytest.FixtureRequest) -> Iterator[None]:
    if "samsa" in request.fixturenames:
        pid = request.getfixturevalue("samsa").proc.pid
        _rss_before_mib[pid] = rss_mib(pid)
    yield
    _rss_before_mib.clear()


def assert_serves_others(samsa: Any, topic: str) -> None:
    """Another client creates a topic, produces a record and reads it back; the broker's RSS is bounded."""
    assert_rss_bounded(samsa, topic)
    with Connection("127.0.0.1", samsa.port) as other:
        assert create(other, topic, 1).topics[0].error_code.value == 0
        value = f"still serving {topic}".encode()
        batch = encode_batch([(None, value, ())], timestamp_ms=int(time.time() * 1000))
        r = other.request(0, {"transactional_id": None, "acks": -1, "timeout": 10000,
                              "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}]})
        assert r.responses[0].partition_responses[0].error_code.value == 0
        f = other.request(1, {"max_wait": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": 0,
                              "session_id": 0, "session_epoch": -1, "replica_id": -1,
                              "topics": [{"topic": topic, "partitions": [{"partition": 0, "fetch_offset": 0,
                                                                          "partition_max_bytes": 1 << 20}]}],
                              "forgotten_topics_data": (), "rack_id": ""}, version=12)
        part = f.responses[0].partitions[0]
        assert part.error_code.value == 0
        values = [rec.value for _, recs in decode_batches(part.records, max_decompressed_bytes=1 << 20)
                  for rec in recs]
        assert values == [value]
    assert_rss_bounded(samsa, topic)


def assert_rss_bounded(samsa: Any, what: str) -> None:
    pid = samsa.proc.pid
    assert pid in _rss_before_mib, "no RSS was taken before the hostile request"
    growth_mib = rss_mib(pid) - _rss_before_mib[pid]
    assert growth_mib < MAX_RSS_GROWTH_MIB, f"broker RSS grew by {growth_mib:.0f} MiB ({what})"


# --- over the wire ----------------------------------------------------------------------------------


def test_create_topics_of_100000_partitions_is_refused_whole_and_creates_nothing(samsa: Any) -> None:
    data_dir = samsa.data_dir
    dirs_before = sorted(p.name for p in data_dir.iterdir())
    with samsa.connect() as conn:
        r = conn.request(19, {"topics": [
            {"name": "huge", "num_partitions": 100_000, "replication_factor": 1, "assignments": (), "configs": ()},
            {"name": "small-beside-it", "num_partitions": 1, "replication_factor": 1, "assignments": (),
             "configs": ()}], "timeout": 30000, "validate_only": False})
        assert [(t.name, t.error_code.value, t.error_message) for t in r.topics] == [
            ("huge", POLICY_VIOLATION, EXCESSIVE_BATCH_MESSAGE),
            ("small-beside-it", POLICY_VIOLATION, EXCESSIVE_BATCH_MESSAGE)]
        assert not {"huge", "small-beside-it"} & topic_names(conn)
    assert sorted(p.name for p in data_dir.iterdir()) == dirs_before
    assert_serves_others(samsa, "after-huge-create")


def test_the_record_bound_counts_the_topic_its_configs_and_its_partitions(conn: Connection) -> None:
    """One TopicRecord + ConfigRecords + one PartitionRecord per partition, at most 10,000 in all
    (Kafka accepts 9,999 partitions and refuses 10,000); validate_only is bounded the same way."""
    assert MAX_RECORDS_PER_USER_OP == 10_000
    assert create(conn, "edge", 9_999, validate_only=True).topics[0].error_code.value == 0
    refused = create(conn, "edge", 10_000, validate_only=True).topics[0]
    assert (refused.error_code.value, refused.error_message) == (POLICY_VIOLATION, EXCESSIVE_BATCH_MESSAGE)
    with_config = (("retention.ms", "60000"),)
    assert create(conn, "edge", 9_998, validate_only=True, configs=with_config).topics[0].error_code.value == 0
    assert create(conn, "edge", 9_999, validate_only=True,
                  configs=with_config).topics[0].error_code.value == POLICY_VIOLATION
    # two topics share one operation's bound
    r = conn.request(19, {"topics": [
        {"name": f"half-{i}", "num_partitions": 5_000, "replication_factor": 1, "assignments": (), "configs": ()}
        for i in range(2)], "timeout": 30000, "validate_only": True})
    assert [t.error_code.value for t in r.topics] == [POLICY_VIOLATION, POLICY_VIOLATION]
    assert "edge" not in topic_names(conn)


def test_create_partitions_past_the_bound_is_refused_whole(samsa: Any) -> None:
    with samsa.connect() as conn:
        for name in ("grow-a", "grow-b"):
            assert create(conn, name, 1).topics[0].error_code.value == 0

        def grow(counts: dict[str, int], validate_only: bool) -> list[tuple[str, int, str | None]]:
            r = conn.request(37, {"topics": [{"name": n, "count": c, "assignments": None} for n, c in counts.items()],
                                  "timeout": 30000, "validate_only": validate_only})
            return [(t.name, t.error_code.value, t.error_message) for t in r.results]

        assert grow({"grow-a": 2**31 - 1}, False) == [("grow-a", POLICY_VIOLATION, EXCESSIVE_BATCH_MESSAGE)]
        # 6,000 new partitions each: under the bound alone, past it together
        assert grow({"grow-a": 6_001, "grow-b": 6_001}, False) == [
            ("grow-a", POLICY_VIOLATION, EXCESSIVE_BATCH_MESSAGE),
            ("grow-b", POLICY_VIOLATION, EXCESSIVE_BATCH_MESSAGE)]
        assert grow({"grow-a": 10_001}, True) == [("grow-a", 0, None)]  # exactly 10,000 new partitions
        assert grow({"grow-a": 3, "grow-b": 2}, False) == [("grow-a", 0, None), ("grow-b", 0, None)]
        r = conn.request(3, {"topics": [{"name": "grow-a"}, {"name": "grow-b"}], "allow_auto_topic_creation": False,
                             "include_topic_authorized_operations": False})
        assert sorted((t.name, len(t.partitions)) for t in r.topics) == [("grow-a", 3), ("grow-b", 2)]
    assert_serves_others(samsa, "after-create-partitions")


# --- on an in-process controller ------------------------------------------------------------------


class Cluster:
    """A one-voter controller with brokers 1-4 registered and unfenced."""

    def __init__(self, directory: Path) -> None:
        self.log = Log.open(directory / "__cluster_metadata-0", METADATA_LOG_CONFIG, now_ms=int(time.time() * 1000))
        self.quorum = MetadataQuorum(node_id=1, cluster_id="c", voters={1: Endpoint("127.0.0.1", 0)}, log=self.log)
        self.controller = Controller(BrokerConfig(overrides={"node.id": "1"}, data_dir=directory), self.quorum)
        epochs = {n: self.controller.register_broker(n, f"inc-{n}", "h", 9000 + n, None, 0).result()
                  for n in (1, 2, 3, 4)}
        for n, epoch in epochs.items():
            self.controller.heartbeat(n, epoch, self.controller.image.offset, False, False, 0)

    def topic(self, name: str, partitions: int, replicas: tuple[int, ...], leader: int) -> None:
        self.quorum.write_nowait([TopicRecord(name, f"id-{name}"), *(
            PartitionRecord(f"id-{name}", i, replicas, replicas, leader, 0, 0) for i in range(partitions))])


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    c = Cluster(tmp_path)
    yield c
    c.log.close()


def test_elect_leaders_past_the_bound_writes_nothing(cluster: Cluster) -> None:
    # 10,001 partitions whose preferred replica (1) does not lead: a preferred election for each
    cluster.topic("led-by-2", MAX_RECORDS_PER_USER_OP + 1, (1, 2), leader=2)
    offset = cluster.controller.image.offset
    with pytest.raises(TooManyRecordsError):
        cluster.controller.reassignments.elect_leaders(ElectionType.PREFERRED, None)
    with pytest.raises(TooManyRecordsError):
        cluster.controller.reassignments.elect_leaders(
            ElectionType.PREFERRED, [("led-by-2", list(range(MAX_RECORDS_PER_USER_OP + 1)))])
    assert cluster.controller.image.offset == offset
    results = cluster.controller.reassignments.elect_leaders(
        ElectionType.PREFERRED, [("led-by-2", list(range(MAX_RECORDS_PER_USER_OP)))]).result()
    assert {p.error_code for t in results for p in t.partitions} == {ErrorCode.none}
    parts = cluster.controller.image.topics_by_name["led-by-2"].partitions
    assert sum(1 for p in parts.values() if p.leader == 1) == MAX_RECORDS_PER_USER_OP


def test_alter_partition_reassignments_past_the_bound_writes_nothing(cluster: Cluster) -> None:
    cluster.topic("moving", MAX_RECORDS_PER_USER_OP + 1, (1, 2), leader=1)
    offset = cluster.controller.image.offset
    every = [(pid, (3, 4)) for pid in range(MAX_RECORDS_PER_USER_OP + 1)]
    with pytest.raises(TooManyRecordsError):
        cluster.controller.reassignments.alter([("moving", every)])
    assert cluster.controller.image.offset == offset
    # within the bound: a partition named twice sees its first change, and the second starts from
    # the union of replicas it made (3, 4, 1, 2): target (2, 3), replicas 1 and 4 leaving
    (topic,) = cluster.controller.reassignments.alter([("moving", [(0, (3, 4)), (0, (2, 3)), (1, (3, 4))])]).result()
    assert [p.error_code for p in topic.partitions] == [ErrorCode.none] * 3
    p0 = cluster.controller.image.topics_by_name["moving"].partitions[0]
    assert (p0.replicas, p0.adding_replicas, p0.removing_replicas) == ((2, 3, 1, 4), (), (1, 4))


def test_delete_topics_past_the_bound_deletes_nothing(cluster: Cluster) -> None:
    names = [f"t{i}" for i in range(MAX_RECORDS_PER_USER_OP + 1)]
    cluster.quorum.write_nowait([TopicRecord(n, f"id-{n}") for n in names])
    with pytest.raises(TooManyRecordsError):
        cluster.controller.delete_topics(names)
    assert len(cluster.controller.image.topics_by_name) == len(names)
    deleted = cluster.controller.delete_topics(names[:MAX_RECORDS_PER_USER_OP]).result()
    assert {e for _, _, e in deleted} == {ErrorCode.none}
    assert list(cluster.controller.image.topics_by_name) == [names[-1]]


def test_create_partitions_counts_before_it_places(cluster: Cluster) -> None:
    assert cluster.controller.create_topics([TopicSpec("p", 1, 1)], validate_only=False).result()[0].error_code == 0
    with pytest.raises(TooManyRecordsError):
        cluster.controller.create_partitions_many([PartitionsSpec("p", 2**31 - 1)], validate_only=False)
    assert cluster.controller.create_partitions("p", 2**31 - 1, None, validate_only=False).result() == (
        ErrorCode.policy_violation, EXCESSIVE_BATCH_MESSAGE)
    assert len(cluster.controller.image.topics_by_name["p"].partitions) == 1


def test_a_topic_of_thousands_of_partitions_is_created_and_deleted_in_steps(samsa: Any) -> None:
    """More new logs than INLINE_LOG_CHANGES: created (and deleted) in steps while others are served;
    every partition ends up writable, and every directory ends up gone."""
    count = INLINE_LOG_CHANGES * 4
    with samsa.connect() as conn:
        assert create(conn, "wide", count).topics[0].error_code.value == 0
        assert_serves_others(samsa, "beside-wide")
        batch = encode_batch([(None, b"x", ())], timestamp_ms=int(time.time() * 1000))
        deadline = time.monotonic() + 120
        pending = set(range(count))
        while pending and time.monotonic() < deadline:
            r = conn.request(0, {"transactional_id": None, "acks": 1, "timeout": 10000, "topic_data": [
                {"name": "wide", "partition_data": [{"index": i, "records": batch} for i in sorted(pending)]}]})
            codes = {p.index: p.error_code.value for p in r.responses[0].partition_responses}
            # a partition whose log is not made yet answers NOT_LEADER_OR_FOLLOWER, which clients retry
            assert set(codes.values()) <= {0, ErrorCode.not_leader_or_follower.value}
            pending = {i for i, c in codes.items() if c != 0}
            time.sleep(0.05)
        assert not pending
        r = conn.request(20, {"topic_names": ["wide"], "timeout": 30000}, version=4)
        assert r.responses[0].error_code.value == 0
        assert_serves_others(samsa, "after-wide")

    def left() -> list[str]:
        return [p.name for p in samsa.data_dir.iterdir() if p.name.startswith("wide-")]

    deadline = time.monotonic() + 120
    while left() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert left() == []


# --- siblings: a client-supplied count that repeats work or the answer -------------------------------


def test_list_offsets_answers_a_repeated_partition_once_with_invalid_request(samsa: Any) -> None:
    """Kafka's duplicatePartitions, across topic entries too: 100,000 repeats of one partition cost
    no lookup and get one answer."""
    with samsa.connect() as conn:
        assert create(conn, "offsets", 2).topics[0].error_code.value == 0
        repeated = [{"name": "offsets", "partitions": [
            {"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]} for _ in range(100_000)]
        alone = {"name": "offsets", "partitions": [{"partition_index": 1, "current_leader_epoch": -1,
                                                    "timestamp": -2}]}
        r = conn.request(2, {"replica_id": -1, "isolation_level": 0, "timeout": 1000,
                             "topics": [*repeated, alone]})
        assert [(t.name, [(p.partition_index, p.error_code.value, p.offset) for p in t.partitions])
                for t in r.topics] == [("offsets", [(0, ErrorCode.invalid_request.value, -1), (1, 0, 0)])]
    assert_serves_others(samsa, "after-list-offsets")


def commit_offset(conn: Connection, group: str, topic: str, offset: int) -> None:
    """A simple (memberless) commit, retried while the coordinator is not there yet: the first one creates
    __consumer_offsets, committed after an off-loop fsync (COORDINATOR_NOT_AVAILABLE until then, as Kafka)."""
    for _ in range(200):
        r = conn.request(8, {"group_id": group, "generation_id_or_member_epoch": -1, "member_id": "",
                             "group_instance_id": None, "retention_time_ms": -1, "topics": [
                                 {"name": topic, "partitions": [{"partition_index": 0, "committed_offset": offset,
                                                                 "committed_leader_epoch": -1,
                                                                 "committed_metadata": ""}]}]}, version=8)
        if r.topics[0].partitions[0].error_code != ErrorCode.coordinator_not_available:
            break
        time.sleep(0.05)
    assert r.topics[0].partitions[0].error_code.value == 0


def test_a_group_named_again_in_offset_fetch_or_describe_groups_is_answered_once(samsa: Any) -> None:
    """Stricter than Kafka: repeating a group would repeat its whole answer for a few bytes each."""
    with samsa.connect() as conn:
        assert create(conn, "committed", 1).topics[0].error_code.value == 0
        commit_offset(conn, "g1", "committed", 7)
        r = conn.request(9, {"groups": [{"group_id": "g1", "member_id": None, "member_epoch": -1, "topics": None}]
                             * 50_000, "require_stable": False}, version=8)
        assert len(r.groups) == 50_000
        first, *again = r.groups
        assert first.error_code.value == 0
        assert [(t.name, [p.committed_offset for p in t.partitions]) for t in first.topics] == [("committed", [7])]
        assert {(g.group_id, g.error_code.value, len(g.topics)) for g in again} == {
            ("g1", ErrorCode.invalid_request.value, 0)}
        d = conn.request(15, {"groups": ["g1", "g1", "nope"], "include_authorized_operations": False}, version=5)
        assert [(g.group_id, g.error_code.value) for g in d.groups] == [
            ("g1", 0), ("g1", ErrorCode.invalid_request.value), ("nope", 0)]
    assert_serves_others(samsa, "after-offset-fetch")


def test_metadata_answers_each_topic_once_and_auto_creation_is_bounded(samsa: Any) -> None:
    """Kafka takes Metadata's topics as a set: a topic named 20,000 times is answered once. Names that
    would auto-create more than one operation's records create nothing."""
    with samsa.connect() as conn:
        assert create(conn, "named-often", 300).topics[0].error_code.value == 0
        r = conn.request(3, {"topics": [{"name": "named-often"}] * 20_000 + [{"name": "not-there"}] * 3,
                             "allow_auto_topic_creation": False, "include_topic_authorized_operations": False})
        assert [(t.name, t.error_code.value, len(t.partitions)) for t in r.topics] == [
            ("named-often", 0, 300), ("not-there", ErrorCode.unknown_topic_or_partition.value, 0)]
        names = [f"auto-{i}" for i in range(MAX_RECORDS_PER_USER_OP)]  # 2 records each (topic, partition)
        r = conn.request(3, {"topics": [{"name": n} for n in names], "allow_auto_topic_creation": True,
                             "include_topic_authorized_operations": False})
        assert len(r.topics) == len(names)
        assert {t.error_code.value for t in r.topics} == {ErrorCode.unknown_topic_or_partition.value}
        assert not any(n.startswith("auto-") for n in topic_names(conn))
    assert_serves_others(samsa, "after-metadata")


def test_alter_configs_of_many_resources_is_one_bounded_write(cluster: Cluster) -> None:
    from samsa.broker.controller_types import ConfigChange

    c = cluster.controller
    names = [f"cfg-{i}" for i in range(MAX_RECORDS_PER_USER_OP + 1)]
    cluster.quorum.write_nowait([TopicRecord(n, f"id-{n}") for n in names])
    offset = c.image.offset
    every = [ConfigChange(2, n, {"retention.ms": "60000"}) for n in names]
    with pytest.raises(TooManyRecordsError):
        c.alter_configs(every, replace_all=False, validate_only=False)
    assert c.image.offset == offset and not c.image.topic_configs(names[0])
    results = c.alter_configs([ConfigChange(2, names[0], {"retention.ms": "60000"}),
                               ConfigChange(2, names[1], {"retention.ms": "70000"}),
                               ConfigChange(2, names[1], {"retention.ms": "80000"}),
                               ConfigChange(2, "missing", {"retention.ms": "1"}),
                               ConfigChange(2, names[2], {"retention.ms": "not a number"})],
                              replace_all=False, validate_only=False).result()
    assert [e for e, _ in results] == [ErrorCode.none, ErrorCode.invalid_request, ErrorCode.invalid_request,
                                       ErrorCode.unknown_topic_or_partition, ErrorCode.invalid_config]
    assert results[1][1] == "Duplicate resource."
    assert c.image.offset == offset + 1  # one entry for the whole request
    assert dict(c.image.topic_configs(names[0])) == {"retention.ms": "60000"}
    assert not c.image.topic_configs(names[1])


def test_create_topics_and_create_partitions_of_many_named_topics_answer_at_once(samsa: Any) -> None:
    """50,000 topics in one request (duplicates among them): one pass over the names, not one per name
    (list.count made it quadratic), then the record bound refuses the lot."""
    names = [f"many-{i}" for i in range(50_000)]
    with samsa.connect() as conn:
        r = conn.request(19, {"topics": [{"name": n, "num_partitions": 1, "replication_factor": 1,
                                          "assignments": (), "configs": ()} for n in names + names[:2]],
                              "timeout": 30000, "validate_only": False})
        assert len(r.topics) == 50_002
        assert {t.error_code.value for t in r.topics} == {POLICY_VIOLATION}
        r = conn.request(37, {"topics": [{"name": n, "count": 2, "assignments": None} for n in names + names[:2]],
                              "timeout": 30000, "validate_only": False})
        assert len(r.results) == 50_002
        assert {t.error_code.value for t in r.results} == {POLICY_VIOLATION}  # more topics than the bound
        assert not any(n.startswith("many-") for n in topic_names(conn))
    assert_serves_others(samsa, "after-many-topics")


def test_alter_partition_naming_a_partition_twice_writes_one_record(cluster: Cluster) -> None:
    from samsa.broker.controller import AlterPartitionChange

    cluster.topic("isr", 1, (1, 2), leader=1)
    c = cluster.controller
    p = c.image.topics_by_name["isr"].partitions[0]
    epoch = c.image.brokers[1].broker_epoch
    change = AlterPartitionChange("id-isr", 0, p.leader_epoch, p.partition_epoch, (1,))
    offset = c.image.offset
    error, pending = c.alter_partition(1, epoch, [change] * 10_000)
    assert error == ErrorCode.none and pending is not None
    results = pending.result()
    assert [r.error_code for r in results[:2]] == [ErrorCode.none, ErrorCode.invalid_request]
    assert {r.error_code for r in results[1:]} == {ErrorCode.invalid_request}
    assert c.image.offset == offset + 1
    assert c.image.topics_by_name["isr"].partitions[0].isr == (1,)


# --- AlterConfigs / IncrementalAlterConfigs: one operation for the whole request -----------------------

# Topic configs every resource may set to a valid value (30 of them: 340 resources pass 10,000 records).
_SETTABLE = {
    "cleanup.policy": "delete", "compression.type": "producer", "delete.retention.ms": "86400000",
    "file.delete.delay.ms": "60000", "flush.messages": "1000000", "flush.ms": "1000000",
    "index.interval.bytes": "4096", "max.compaction.lag.ms": "1000000", "max.message.bytes": "1048588",
    "message.timestamp.after.max.ms": "3600000", "message.timestamp.before.max.ms": "3600000",
    "message.timestamp.type": "CreateTime", "min.cleanable.dirty.ratio": "0.5", "min.compaction.lag.ms": "0",
    "min.insync.replicas": "1", "preallocate": "false", "retention.bytes": "-1", "retention.ms": "604800000",
    "segment.bytes": "1073741824", "segment.index.bytes": "10485760", "segment.jitter.ms": "0",
    "segment.ms": "604800000", "unclean.leader.election.enable": "false",
}


def _alter(conn: Connection, resources: dict[str, dict[str, str]], *, incremental: bool) -> Any:
    if incremental:
        return conn.request(44, {"resources": [
            {"resource_type": 2, "resource_name": name,
             "configs": [{"name": k, "config_operation": 0, "value": v} for k, v in configs.items()]}
            for name, configs in resources.items()], "validate_only": False})
    return conn.request(33, {"resources": [
        {"resource_type": 2, "resource_name": name, "configs": [{"name": k, "value": v} for k, v in configs.items()]}
        for name, configs in resources.items()], "validate_only": False})


def _overrides(conn: Connection, names: list[str]) -> dict[str, dict[str, str]]:
    r = conn.request(32, {"resources": [{"resource_type": 2, "resource_name": n, "configuration_keys": None}
                                        for n in names], "include_synonyms": False, "include_documentation": False})
    return {res.resource_name: {c.name: c.value for c in res.configs if c.config_source == 1} for res in r.results}


@pytest.mark.parametrize("incremental", [False, True])
def test_alter_configs_past_the_record_bound_is_refused_whole(samsa: Any, incremental: bool) -> None:
    per_resource = len(_SETTABLE)
    count = MAX_RECORDS_PER_USER_OP // per_resource + 1  # one resource too many
    names = [f"cfg-{incremental:d}-{i}" for i in range(count)]
    with samsa.connect() as conn:
        r = conn.request(19, {"topics": [{"name": n, "num_partitions": 1, "replication_factor": 1, "assignments": (),
                                          "configs": ()} for n in names], "timeout": 30000, "validate_only": False})
        assert {t.error_code.value for t in r.topics} == {0}
        r = _alter(conn, {n: _SETTABLE for n in names}, incremental=incremental)
        assert [x.error_code.value for x in r.responses] == [POLICY_VIOLATION] * count
        assert {x.error_message for x in r.responses} == {EXCESSIVE_BATCH_MESSAGE}
        assert _overrides(conn, names[:3]) == {n: {} for n in names[:3]}  # nothing was written
        # One resource fewer fits: every resource is answered and holds its overrides.
        r = _alter(conn, {n: _SETTABLE for n in names[:-1]}, incremental=incremental)
        assert {x.error_code.value for x in r.responses} == {0}
        assert _overrides(conn, [names[0], names[-2]]) == {names[0]: _SETTABLE, names[-2]: _SETTABLE}
    assert_serves_others(samsa, f"after-alter-{incremental:d}")


def test_create_topics_checks_the_configs_as_a_set(samsa: Any) -> None:
    with samsa.connect() as conn:
        r = create(conn, "lag-conflict", 1, configs=(("min.compaction.lag.ms", "10"), ("max.compaction.lag.ms", "5")))
        assert r.topics[0].error_code == ErrorCode.invalid_config
        assert "min.compaction.lag.ms (10) > max.compaction.lag.ms (5)" in (r.topics[0].error_message or "")
        assert "lag-conflict" not in topic_names(conn)


def test_describe_configs_answers_a_repeated_resource_once(samsa: Any) -> None:
    with samsa.connect() as conn:
        assert create(conn, "described", 1).topics[0].error_code.value == 0
        resources = [{"resource_type": 2, "resource_name": "described", "configuration_keys": None}] * 5000
        resources += [{"resource_type": 2, "resource_name": "described", "configuration_keys": ["retention.ms"]}]
        r = conn.request(32, {"resources": resources, "include_synonyms": True, "include_documentation": True})
        assert len(r.results) == len(resources)
        first, *again = r.results
        assert first.error_code.value == 0 and len(first.configs) > 1
        assert {(x.error_code.value, len(x.configs)) for x in again[:-1]} == {(ErrorCode.invalid_request.value, 0)}
        assert (again[-1].error_code.value, [c.name for c in again[-1].configs]) == (0, ["retention.ms"])
    assert_serves_others(samsa, "after-describe")
