"""The requests Kafka UI (kafbat/kafka-ui) and Redpanda Console send when they connect to a cluster, replayed
against a real `samsa serve` with the versions a current client picks (the highest both sides support): each
is answered, on the same connection, with data that matches the cluster.

Read from their sources:
- Kafka UI's ReactiveAdminClient.create and StatisticsService/ScrapedClusterState.scrape (Java AdminClient):
  DescribeCluster; DescribeConfigs of the controller broker (its version guess reads inter.broker.protocol.version,
  removed in Kafka 4, so it shows "1.0-UNKNOWN" against Kafka 4 and Samsa alike); DescribeAcls(ANY) to see
  whether an authorizer is on (UnsupportedVersionException is taken as "off"); DescribeLogDirs of every broker;
  ListGroups; Metadata of every topic (describeTopics falls back to Metadata without DescribeTopicPartitions);
  DescribeConfigs of every topic with synonyms; ListOffsets latest and earliest; FindCoordinator, DescribeGroups
  (the client falls back to it without ConsumerGroupDescribe) and OffsetFetch of every group.
- Redpanda Console's kafka.NewService/testConnection and console getKafkaOverview / GetClusterInfo /
  GetEndpointCompatibility (franz-go kmsg/kadm): Metadata, ApiVersions of every broker, DescribeACLs (franz-go
  refuses locally an API the broker does not list), DescribeLogDirs, DescribeConfigs of every broker, and which
  optional endpoints ApiVersions enables.
"""

from __future__ import annotations

import time
from typing import Any

from samsa.broker.client import Connection
from samsa.kproto.errors import ErrorCode
from samsa.kproto.records import encode_batch

TOPIC = "console-startup"
GROUP = "console-group"
BROKER_RESOURCE, TOPIC_RESOURCE = 4, 2
# What the startup paths cannot do without: they fail or show nothing.
REQUIRED = {18: "ApiVersions", 3: "Metadata", 60: "DescribeCluster", 32: "DescribeConfigs", 35: "DescribeLogDirs",
            16: "ListGroups", 15: "DescribeGroups", 10: "FindCoordinator", 9: "OffsetFetch", 2: "ListOffsets"}
# What they ask for and degrade gracefully without (a feature shown as disabled).
OPTIONAL = {29: "DescribeAcls", 48: "DescribeClientQuotas", 50: "DescribeUserScramCredentials",
            51: "AlterUserScramCredentials", 69: "ConsumerGroupDescribe", 75: "DescribeTopicPartitions",
            44: "IncrementalAlterConfigs", 46: "ListPartitionReassignments", 45: "AlterPartitionReassignments",
            21: "DeleteRecords", 42: "DeleteGroups", 47: "OffsetDelete", 8: "OffsetCommit"}


def _setup(conn: Connection) -> None:
    r = conn.request(19, {"topics": [{"name": TOPIC, "num_partitions": 1, "replication_factor": 1}],
                          "timeout": 10000})
    assert r.topics[0].error_code == ErrorCode.none
    batch = encode_batch([(None, b"v", ())], timestamp_ms=int(time.time() * 1000))
    r = conn.request(0, {"transactional_id": None, "acks": 1, "timeout": 10000, "topic_data": [
        {"name": TOPIC, "partition_data": [{"index": 0, "records": batch}]}]})
    assert r.responses[0].partition_responses[0].error_code == ErrorCode.none
    for _ in range(200):  # the first FindCoordinator creates __consumer_offsets
        if conn.request(10, {"key_type": 0, "coordinator_keys": [GROUP]}).coordinators[0].error_code == 0:
            break
        time.sleep(0.05)
    r = conn.request(8, {"group_id": GROUP, "generation_id_or_member_epoch": -1, "member_id": "",
                         "topics": [{"name": TOPIC, "partitions": [{"partition_index": 0, "committed_offset": 1,
                                                                     "committed_metadata": ""}]}]})
    assert r.topics[0].partitions[0].error_code == ErrorCode.none


def test_kafka_ui_startup_calls_are_answered(conn: Connection) -> None:
    _setup(conn)
    missing = sorted(name for key, name in REQUIRED.items() if key not in conn.versions)
    assert missing == [], missing

    for include_ops in (False, True):  # the first call knows no features yet; later ones include operations
        cluster = conn.request(60, {"include_cluster_authorized_operations": include_ops})
        assert cluster.error_code == ErrorCode.none and [b.broker_id for b in cluster.brokers] == [1]
    controller = str(cluster.controller_id)

    configs = conn.request(32, {"resources": [{"resource_type": BROKER_RESOURCE, "resource_name": controller,
                                               "configuration_keys": None}],
                                "include_synonyms": False, "include_documentation": False})
    (broker_configs,) = configs.results
    assert broker_configs.error_code == ErrorCode.none
    names = {c.name for c in broker_configs.configs}
    assert "delete.topic.enable" in names  # Kafka UI enables topic deletion from it

    log_dirs = conn.request(35, {"topics": None})
    (log_dir,) = log_dirs.results
    assert log_dir.error_code == ErrorCode.none
    assert TOPIC in {t.name for t in log_dir.topics}

    groups = conn.request(16, {"states_filter": [], "types_filter": []})
    assert groups.error_code == ErrorCode.none and GROUP in {g.group_id for g in groups.groups}

    metadata = conn.request(3, {"topics": None, "allow_auto_topic_creation": False,
                                "include_topic_authorized_operations": False})
    topics = {t.name for t in metadata.topics}
    assert TOPIC in topics
    described = conn.request(3, {"topics": [{"name": TOPIC, "topic_id": None}], "allow_auto_topic_creation": False,
                                 "include_topic_authorized_operations": True})
    assert described.topics[0].error_code == ErrorCode.none and len(described.topics[0].partitions) == 1

    topic_configs = conn.request(32, {"resources": [{"resource_type": TOPIC_RESOURCE, "resource_name": t,
                                                     "configuration_keys": None} for t in sorted(topics)],
                                      "include_synonyms": True, "include_documentation": False})
    assert all(r.error_code == ErrorCode.none and r.configs for r in topic_configs.results)

    def offset(timestamp: int) -> Any:
        partition = {"partition_index": 0, "timestamp": timestamp, "current_leader_epoch": -1}
        r = conn.request(2, {"replica_id": -1, "isolation_level": 0,
                             "topics": [{"name": TOPIC, "partitions": [partition]}]})
        p = r.topics[0].partitions[0]
        assert p.error_code == ErrorCode.none
        return p.offset

    assert (offset(-1), offset(-2)) == (1, 0)  # latest, earliest

    coordinators = conn.request(10, {"key_type": 0, "coordinator_keys": [GROUP]})
    assert coordinators.coordinators[0].error_code == ErrorCode.none
    described_groups = conn.request(15, {"groups": [GROUP], "include_authorized_operations": True})
    assert described_groups.groups[0].error_code == ErrorCode.none
    assert described_groups.groups[0].group_state == "Empty"
    fetched = conn.request(9, {"groups": [{"group_id": GROUP, "topics": None}], "require_stable": False})
    (group,) = fetched.groups
    assert group.error_code == ErrorCode.none
    assert [(t.name, p.partition_index, p.committed_offset) for t in group.topics for p in t.partitions] == [
        (TOPIC, 0, 1)]


def test_redpanda_console_startup_calls_are_answered(conn: Connection) -> None:
    _setup(conn)
    metadata = conn.request(3, {"topics": None, "allow_auto_topic_creation": False,
                                "include_topic_authorized_operations": False})
    assert metadata.controller_id == 1 and [b.node_id for b in metadata.brokers] == [1]
    assert TOPIC in {t.name for t in metadata.topics}
    versions = conn.request(18, {"client_software_name": "console", "client_software_version": "3"})
    assert versions.error_code == ErrorCode.none
    advertised = {k.api_key for k in versions.api_keys}
    log_dirs = conn.request(35, {"topics": None})
    assert log_dirs.results[0].error_code == ErrorCode.none and log_dirs.results[0].total_bytes > 0
    configs = conn.request(32, {"resources": [{"resource_type": BROKER_RESOURCE, "resource_name": "1",
                                               "configuration_keys": None}],
                                "include_synonyms": False, "include_documentation": False})
    assert configs.results[0].error_code == ErrorCode.none and configs.results[0].configs
    # Every endpoint Console's compatibility check needs from Kafka's API (consumer groups, offsets, records,
    # reassignments, configs) is enabled; what is not advertised only disables a page.
    needed = {32, 15, 16, 21, 8, 42, 47, 46, 44, 45}
    assert needed <= advertised, sorted(needed - advertised)
    lacking = sorted(name for key, name in OPTIONAL.items() if key not in advertised)
    print(f"advertised by Samsa: {len(advertised)} APIs; asked for by the consoles but not there: {lacking}")
    # The connection is still good after all of them.
    assert conn.request(18, {}, version=0).error_code == ErrorCode.none
