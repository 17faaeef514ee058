"""A group's authorized operations without an authorizer: every operation Kafka supports on a GROUP
(AclEntry.supportedOperations: READ, DELETE, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS), 3400 as Kafka
4.1.2 reports in DescribeGroups and ConsumerGroupDescribe for a group it describes; INT32 min when not
asked for, and for a group answered with an error (KafkaApis sets them only on a described group)."""

from __future__ import annotations

import time

from samsa.broker.client import Connection
from samsa.kproto.errors import ErrorCode

KAFKA_GROUP_OPERATIONS = (1 << 3) | (1 << 6) | (1 << 8) | (1 << 10) | (1 << 11)
OMITTED = -(2**31)


def _coordinator_ready(conn: Connection, group: str) -> None:
    for _ in range(200):
        if conn.request(10, {"key_type": 0, "coordinator_keys": [group]}).coordinators[0].error_code == 0:
            return
        time.sleep(0.05)
    raise AssertionError("no group coordinator")


def _describe(conn: Connection, group: str, version: int, include: bool = True) -> tuple[ErrorCode, int]:
    r = conn.request(15, {"groups": [group], "include_authorized_operations": include}, version=version)
    return r.groups[0].error_code, r.groups[0].authorized_operations


def test_describe_groups_reports_kafkas_group_operations(conn: Connection) -> None:
    assert KAFKA_GROUP_OPERATIONS == 3400
    r = conn.request(19, {"topics": [{"name": "ops-t", "num_partitions": 1, "replication_factor": 1}],
                          "timeout": 30000})
    assert r.topics[0].error_code == ErrorCode.none
    _coordinator_ready(conn, "ops-g")
    committed = conn.request(8, {"group_id": "ops-g", "generation_id_or_member_epoch": -1, "member_id": "",
                                 "group_instance_id": None, "topics": [{"name": "ops-t", "partitions": [
                                     {"partition_index": 0, "committed_offset": 0, "committed_metadata": ""}]}]},
                             version=8)
    assert committed.topics[0].partitions[0].error_code == ErrorCode.none  # an Empty group holding an offset
    for version in (3, 5, 6):
        assert _describe(conn, "ops-g", version) == (ErrorCode.none, KAFKA_GROUP_OPERATIONS), version
        assert _describe(conn, "ops-g", version, include=False) == (ErrorCode.none, OMITTED), version
    # An unknown group: Dead without an error before v6 (described), GROUP_ID_NOT_FOUND from v6 (not).
    assert _describe(conn, "ops-none", 5) == (ErrorCode.none, KAFKA_GROUP_OPERATIONS)
    assert _describe(conn, "ops-none", 6) == (ErrorCode.group_id_not_found, OMITTED)


def test_consumer_group_describe_reports_kafkas_group_operations(conn: Connection) -> None:
    r = conn.request(19, {"topics": [{"name": "ops-ct", "num_partitions": 1, "replication_factor": 1}],
                          "timeout": 30000})
    assert r.topics[0].error_code == ErrorCode.none
    _coordinator_ready(conn, "ops-cg")
    joined = conn.request(68, {"group_id": "ops-cg", "member_id": "m", "member_epoch": 0, "instance_id": None,
                               "rack_id": None, "rebalance_timeout": 30000, "subscribed_topic_names": ["ops-ct"],
                               "subscribed_topic_regex": None, "server_assignor": None, "topic_partitions": []},
                          version=1)
    assert joined.error_code == ErrorCode.none
    described = conn.request(69, {"group_ids": ["ops-cg", "ops-none"], "include_authorized_operations": True},
                             version=0)
    found, missing = described.groups
    assert (found.error_code, found.authorized_operations) == (ErrorCode.none, KAFKA_GROUP_OPERATIONS)
    assert (missing.error_code, missing.authorized_operations) == (ErrorCode.group_id_not_found, OMITTED)
