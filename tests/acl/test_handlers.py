"""Every API under ACLs: a table of (request, the ACLs that allow it, where its error is). Each row is sent by a
principal without ACLs (it must get Kafka's authorization error, with nothing else answered) and by one
holding exactly the ACLs the row names (it must get past authorization: any other answer is the API's own).
Topic rows also name a topic that does not exist: the unauthorized answer must be the same, so it cannot
tell whether the topic exists.

Principals are names in the request context; pointed at a broker with authentication, the same table
runs as named users."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from samsa.broker.broker import Broker
from samsa.broker.security.acl import CLUSTER_NAME, AclOperation, ResourceType
from samsa.kproto.errors import ErrorCode
from tests.acl.harness import ADMIN, ALICE, MALLORY, allow, call, create_topic

Op = AclOperation
TOPIC, GROUP, CLUSTER, TXN = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER, ResourceType.TRANSACTIONAL_ID
TOPIC_DENIED = ErrorCode.topic_authorization_failed
GROUP_DENIED = ErrorCode.group_authorization_failed
CLUSTER_DENIED = ErrorCode.cluster_authorization_failed
TXN_DENIED = ErrorCode.transactional_id_authorization_failed
ZERO = uuid.UUID(int=0)
EXISTING, MISSING = "orders", "no-such-topic"

Grant = tuple[AclOperation, ResourceType, str]


@dataclass(frozen=True)
class Row:
    name: str
    api_key: int
    version: int
    values: Callable[[str], dict[str, Any]]  # the request, for a topic name
    errors: Callable[[Any], list[ErrorCode]]  # every error code the answer holds
    denied: ErrorCode
    grants: tuple[Grant, ...]
    topic: bool = False  # the request names a topic: also ask about a missing one


def top(r: Any) -> list[ErrorCode]:
    return [r.error_code]


def topic_partitions(field: str, partitions: str = "partitions", code: str = "error_code") -> Callable[[Any], list]:
    return lambda r: [getattr(p, code) for t in getattr(r, field) for p in getattr(t, partitions)]


def each(field: str, code: str = "error_code") -> Callable[[Any], list[ErrorCode]]:
    return lambda r: [getattr(x, code) for x in getattr(r, field)]


def _offset_commit(topic: str) -> dict[str, Any]:
    return {"group_id": "g", "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
            "topics": [{"name": topic, "partitions": [{"partition_index": 0, "committed_offset": 0,
                                                       "committed_leader_epoch": -1, "committed_metadata": ""}]}]}


ROWS = [
    Row("JoinGroup", 11, 7, lambda t: {"group_id": "g", "session_timeout": 10000, "rebalance_timeout": 10000,
                                       "member_id": "", "group_instance_id": None, "protocol_type": "consumer",
                                       "protocols": [{"name": "range", "metadata": b""}]},
        top, GROUP_DENIED, ((Op.READ, GROUP, "g"),)),
    Row("SyncGroup", 14, 5, lambda t: {"group_id": "g", "generation_id": 1, "member_id": "m", "group_instance_id": None,
                                       "protocol_type": "consumer", "protocol_name": "range", "assignments": []},
        top, GROUP_DENIED, ((Op.READ, GROUP, "g"),)),
    Row("Heartbeat", 12, 4, lambda t: {"group_id": "g", "generation_id": 1, "member_id": "m",
                                       "group_instance_id": None}, top, GROUP_DENIED, ((Op.READ, GROUP, "g"),)),
    Row("LeaveGroup", 13, 4, lambda t: {"group_id": "g", "members": [{"member_id": "m", "group_instance_id": None}]},
        top, GROUP_DENIED, ((Op.READ, GROUP, "g"),)),
    Row("OffsetCommit/group", 8, 8, _offset_commit, topic_partitions("topics"), GROUP_DENIED,
        ((Op.READ, TOPIC, EXISTING), (Op.READ, GROUP, "g"))),
    Row("OffsetCommit/topic", 8, 8, _offset_commit, topic_partitions("topics"), TOPIC_DENIED,
        ((Op.READ, GROUP, "g"), (Op.READ, TOPIC, EXISTING)), topic=True),
    Row("OffsetFetch/group", 9, 7, lambda t: {"group_id": "g", "topics": None, "require_stable": False}, top,
        GROUP_DENIED, ((Op.DESCRIBE, GROUP, "g"),)),
    Row("OffsetFetch/topic", 9, 7, lambda t: {"group_id": "g", "require_stable": False, "topics": [
        {"name": t, "partition_indexes": [0]}]}, topic_partitions("topics"), TOPIC_DENIED,
        ((Op.DESCRIBE, GROUP, "g"), (Op.DESCRIBE, TOPIC, EXISTING)), topic=True),
    Row("DescribeGroups", 15, 5, lambda t: {"groups": ["g"], "include_authorized_operations": True},
        each("groups"), GROUP_DENIED, ((Op.DESCRIBE, GROUP, "g"),)),
    Row("DeleteGroups", 42, 2, lambda t: {"groups_names": ["g"]}, each("results"), GROUP_DENIED,
        ((Op.DELETE, GROUP, "g"),)),
    Row("OffsetDelete/group", 47, 0, lambda t: {"group_id": "g", "topics": [
        {"name": t, "partitions": [{"partition_index": 0}]}]}, top, GROUP_DENIED, ((Op.DELETE, GROUP, "g"),)),
    Row("FindCoordinator/group", 10, 3, lambda t: {"key": "g", "key_type": 0}, top, GROUP_DENIED,
        ((Op.DESCRIBE, GROUP, "g"),)),
    Row("FindCoordinator/txn", 10, 3, lambda t: {"key": "tx", "key_type": 1}, top, TXN_DENIED,
        ((Op.DESCRIBE, TXN, "tx"),)),
    Row("CreateTopics", 19, 7, lambda t: {"timeout": 5000, "validate_only": True, "topics": [
        {"name": t, "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}]},
        each("topics"), TOPIC_DENIED, ((Op.CREATE, TOPIC, MISSING),)),
    Row("DeleteTopics", 20, 6, lambda t: {"timeout": 5000, "topics": [{"name": t, "topic_id": ZERO}]},
        each("responses"), TOPIC_DENIED, ((Op.DELETE, TOPIC, EXISTING),), topic=True),
    Row("CreatePartitions", 37, 3, lambda t: {"timeout": 5000, "validate_only": True, "topics": [
        {"name": t, "count": 2, "assignments": None}]}, each("results"), TOPIC_DENIED,
        ((Op.ALTER, TOPIC, EXISTING),), topic=True),
    Row("DescribeConfigs/topic", 32, 4, lambda t: {"include_synonyms": False, "include_documentation": False,
                                                   "resources": [{"resource_type": 2, "resource_name": t,
                                                                  "configuration_keys": None}]},
        each("results"), TOPIC_DENIED, ((Op.DESCRIBE_CONFIGS, TOPIC, EXISTING),), topic=True),
    Row("DescribeConfigs/broker", 32, 4, lambda t: {"include_synonyms": False, "include_documentation": False,
                                                    "resources": [{"resource_type": 4, "resource_name": "1",
                                                                   "configuration_keys": None}]},
        each("results"), CLUSTER_DENIED, ((Op.DESCRIBE_CONFIGS, CLUSTER, CLUSTER_NAME),)),
    Row("AlterConfigs/topic", 33, 2, lambda t: {"validate_only": True, "resources": [
        {"resource_type": 2, "resource_name": t, "configs": [{"name": "retention.ms", "value": "1000"}]}]},
        each("responses"), TOPIC_DENIED, ((Op.ALTER_CONFIGS, TOPIC, EXISTING),), topic=True),
    Row("IncrementalAlterConfigs/broker", 44, 1, lambda t: {"validate_only": True, "resources": [
        {"resource_type": 4, "resource_name": "", "configs": [
            {"name": "log.retention.ms", "config_operation": 0, "value": "360000000"}]}]},
        each("responses"), CLUSTER_DENIED, ((Op.ALTER_CONFIGS, CLUSTER, CLUSTER_NAME),)),
    # Kafka 4.4.0 authorizes before refusing a static broker config (node.id) in IncrementalAlterConfigs.
    Row("IncrementalAlterConfigs/broker-static", 44, 1, lambda t: {"validate_only": True, "resources": [
        {"resource_type": 4, "resource_name": "", "configs": [
            {"name": "node.id", "config_operation": 0, "value": "1"}]}]},
        each("responses"), CLUSTER_DENIED, ((Op.ALTER_CONFIGS, CLUSTER, CLUSTER_NAME),)),
    Row("DeleteRecords", 21, 2, lambda t: {"timeout": 5000, "topics": [
        {"name": t, "partitions": [{"partition_index": 0, "offset": 0}]}]}, topic_partitions("topics"),
        TOPIC_DENIED, ((Op.DELETE, TOPIC, EXISTING),), topic=True),
    Row("DescribeLogDirs", 35, 4, lambda t: {"topics": None}, top, CLUSTER_DENIED,
        ((Op.DESCRIBE, CLUSTER, CLUSTER_NAME),)),
    Row("ElectLeaders", 43, 2, lambda t: {"election_type": 0, "timeout": 5000, "topic_partitions": [
        {"topic": EXISTING, "partitions": [0]}]}, top, CLUSTER_DENIED, ((Op.ALTER, CLUSTER, CLUSTER_NAME),)),
    Row("AlterPartitionReassignments", 45, 0, lambda t: {"timeout": 5000, "topics": [
        {"name": EXISTING, "partitions": [{"partition_index": 0, "replicas": None}]}]}, top, CLUSTER_DENIED,
        ((Op.ALTER, CLUSTER, CLUSTER_NAME),)),
    Row("ListPartitionReassignments", 46, 0, lambda t: {"timeout": 5000, "topics": None}, top, CLUSTER_DENIED,
        ((Op.DESCRIBE, CLUSTER, CLUSTER_NAME),)),
    Row("DescribeUserScramCredentials", 50, 0, lambda t: {"users": [{"name": "alice"}]},
        lambda r: [r.error_code, *(x.error_code for x in r.results)], CLUSTER_DENIED,
        ((Op.DESCRIBE, CLUSTER, CLUSTER_NAME),)),
    Row("AlterReplicaLogDirs", 34, 2, lambda t: {"dirs": [{"path": "/x", "topics": [
        {"name": EXISTING, "partitions": [0]}]}]}, lambda r: [p.error_code for x in r.results for p in x.partitions],
        CLUSTER_DENIED, ((Op.ALTER, CLUSTER, CLUSTER_NAME),)),
    Row("DescribeClientQuotas", 48, 1, lambda t: {"components": [], "strict": False}, top, CLUSTER_DENIED,
        ((Op.DESCRIBE_CONFIGS, CLUSTER, CLUSTER_NAME),)),
    Row("AlterUserScramCredentials", 51, 0, lambda t: {"deletions": [{"name": "carol", "mechanism": 2}],
                                                       "upsertions": []}, each("results"), CLUSTER_DENIED,
        ((Op.ALTER, CLUSTER, CLUSTER_NAME),)),
    Row("DescribeQuorum", 55, 1, lambda t: {"topics": [{"topic_name": "__cluster_metadata", "partitions": [
        {"partition_index": 0}]}]}, top, CLUSTER_DENIED, ((Op.DESCRIBE, CLUSTER, CLUSTER_NAME),)),
    Row("AddPartitionsToTxn", 24, 3, lambda t: {
        "v3_and_below_transactional_id": "tx", "v3_and_below_producer_id": 1, "v3_and_below_producer_epoch": 0,
        "v3_and_below_topics": [{"name": t, "partitions": [0]}]},
        topic_partitions("results_by_topic_v3_and_below", "results_by_partition", "partition_error_code"),
        TXN_DENIED, ((Op.WRITE, TXN, "tx"),)),
    Row("AddPartitionsToTxn/topic", 24, 3, lambda t: {
        "v3_and_below_transactional_id": "tx", "v3_and_below_producer_id": 1, "v3_and_below_producer_epoch": 0,
        "v3_and_below_topics": [{"name": t, "partitions": [0]}]},
        topic_partitions("results_by_topic_v3_and_below", "results_by_partition", "partition_error_code"),
        TOPIC_DENIED, ((Op.WRITE, TXN, "tx"), (Op.WRITE, TOPIC, EXISTING)), topic=True),
    Row("AddOffsetsToTxn", 25, 3, lambda t: {"transactional_id": "tx", "producer_id": 1, "producer_epoch": 0,
                                             "group_id": "g"}, top, TXN_DENIED, ((Op.WRITE, TXN, "tx"),)),
    Row("AddOffsetsToTxn/group", 25, 3, lambda t: {"transactional_id": "tx", "producer_id": 1, "producer_epoch": 0,
                                                   "group_id": "g"}, top, GROUP_DENIED,
        ((Op.WRITE, TXN, "tx"), (Op.READ, GROUP, "g"))),
    Row("EndTxn", 26, 3, lambda t: {"transactional_id": "tx", "producer_id": 1, "producer_epoch": 0,
                                    "committed": True}, top, TXN_DENIED, ((Op.WRITE, TXN, "tx"),)),
    Row("TxnOffsetCommit/topic", 28, 3, lambda t: {
        "transactional_id": "tx", "group_id": "g", "producer_id": 1, "producer_epoch": 0, "generation_id": -1,
        "member_id": "", "group_instance_id": None, "topics": [
            {"name": t, "partitions": [{"partition_index": 0, "committed_offset": 0, "committed_leader_epoch": -1,
                                        "committed_metadata": ""}]}]}, topic_partitions("topics"), TOPIC_DENIED,
        ((Op.WRITE, TXN, "tx"), (Op.READ, GROUP, "g"), (Op.READ, TOPIC, EXISTING)), topic=True),
    Row("TxnOffsetCommit/txn", 28, 3, lambda t: {
        "transactional_id": "tx", "group_id": "g", "producer_id": 1, "producer_epoch": 0, "generation_id": -1,
        "member_id": "", "group_instance_id": None, "topics": [
            {"name": t, "partitions": [{"partition_index": 0, "committed_offset": 0, "committed_leader_epoch": -1,
                                        "committed_metadata": ""}]}]}, topic_partitions("topics"), TXN_DENIED,
        ((Op.READ, GROUP, "g"), (Op.READ, TOPIC, EXISTING), (Op.WRITE, TXN, "tx"))),
    Row("TxnOffsetCommit/group", 28, 3, lambda t: {
        "transactional_id": "tx", "group_id": "g", "producer_id": 1, "producer_epoch": 0, "generation_id": -1,
        "member_id": "", "group_instance_id": None, "topics": [
            {"name": t, "partitions": [{"partition_index": 0, "committed_offset": 0, "committed_leader_epoch": -1,
                                        "committed_metadata": ""}]}]}, topic_partitions("topics"), GROUP_DENIED,
        ((Op.WRITE, TXN, "tx"), (Op.READ, TOPIC, EXISTING), (Op.READ, GROUP, "g"))),
    Row("AddPartitionsToTxn/v4", 24, 4, lambda t: {"transactions": [
        {"transactional_id": "tx", "producer_id": 1, "producer_epoch": 0, "verify_only": True,
         "topics": [{"name": t, "partitions": [0]}]}]}, top, CLUSTER_DENIED,
        ((Op.CLUSTER_ACTION, CLUSTER, CLUSTER_NAME),)),
    Row("OffsetForLeaderEpoch/follower", 23, 4, lambda t: {"replica_id": 2, "topics": [
        {"topic": t, "partitions": [{"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}]}]},
        topic_partitions("topics"), TOPIC_DENIED, ((Op.CLUSTER_ACTION, CLUSTER, CLUSTER_NAME),)),
    Row("WriteTxnMarkers", 27, 1, lambda t: {"markers": [
        {"producer_id": 1, "producer_epoch": 0, "transaction_result": True, "coordinator_epoch": 0,
         "topics": [{"name": EXISTING, "partition_indexes": [0]}]}]},
        lambda r: [p.error_code for m in r.markers for t in m.topics for p in t.partitions], CLUSTER_DENIED,
        ((Op.CLUSTER_ACTION, CLUSTER, CLUSTER_NAME),)),
    Row("DescribeTransactions", 65, 0, lambda t: {"transactional_ids": ["tx"]}, each("transaction_states"),
        TXN_DENIED, ((Op.DESCRIBE, TXN, "tx"),)),
    Row("DescribeProducers", 61, 0, lambda t: {"topics": [{"name": t, "partition_indexes": [0]}]},
        topic_partitions("topics"), TOPIC_DENIED, ((Op.READ, TOPIC, EXISTING),), topic=True),
    Row("OffsetForLeaderEpoch", 23, 4, lambda t: {"replica_id": -1, "topics": [
        {"topic": t, "partitions": [{"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}]}]},
        topic_partitions("topics"), TOPIC_DENIED, ((Op.DESCRIBE, TOPIC, EXISTING),), topic=True),
    Row("DescribeAcls", 29, 3, lambda t: {"resource_type_filter": 1, "resource_name_filter": None,
                                          "pattern_type_filter": 1, "principal_filter": None, "host_filter": None,
                                          "operation": 1, "permission_type": 1}, top, CLUSTER_DENIED,
        ((Op.DESCRIBE, CLUSTER, CLUSTER_NAME),)),
    Row("CreateAcls", 30, 3, lambda t: {"creations": [
        {"resource_type": 2, "resource_name": "x", "resource_pattern_type": 3, "principal": "User:bob",
         "host": "*", "operation": 3, "permission_type": 3}]}, each("results"), CLUSTER_DENIED,
        ((Op.ALTER, CLUSTER, CLUSTER_NAME),)),
    Row("DeleteAcls", 31, 3, lambda t: {"filters": [
        {"resource_type_filter": 1, "resource_name_filter": None, "pattern_type_filter": 1, "principal_filter": None,
         "host_filter": None, "operation": 1, "permission_type": 1}]}, each("filter_results"), CLUSTER_DENIED,
        ((Op.ALTER, CLUSTER, CLUSTER_NAME),)),
]


@pytest.mark.parametrize("row", ROWS, ids=[r.name for r in ROWS])
def test_denied_then_allowed(broker: Broker, row: Row) -> None:
    create_topic(broker, EXISTING)
    # the denied row's other resources are allowed, so the answer names the row's own check
    for op, rt, name in row.grants[:-1]:
        allow(broker, MALLORY, op, rt, name)
    denied = row.errors(call(broker, row.api_key, row.version, row.values(EXISTING), MALLORY))
    assert denied and set(denied) == {row.denied}, denied
    if row.topic:
        missing = row.errors(call(broker, row.api_key, row.version, row.values(MISSING), MALLORY))
        assert set(missing) == {row.denied}, f"a missing topic answered {missing}: existence leaks"
    for op, rt, name in row.grants:
        allow(broker, ALICE, op, rt, name)
    allowed = row.errors(call(broker, row.api_key, row.version, row.values(EXISTING if row.name != "CreateTopics"
                                                                                   else MISSING), ALICE))
    assert row.denied not in allowed, allowed


def test_api_versions_needs_no_acl(broker: Broker) -> None:
    assert call(broker, 18, 3, {"client_software_name": "t", "client_software_version": "1"}, MALLORY).error_code \
        == ErrorCode.none


def test_an_unauthorized_join_is_answered_without_a_member_id(broker: Broker) -> None:
    r = call(broker, 11, 7, {"group_id": "g", "session_timeout": 10000, "rebalance_timeout": 10000,
                             "member_id": "someone", "group_instance_id": None, "protocol_type": "consumer",
                             "protocols": [{"name": "range", "metadata": b""}]}, MALLORY)
    assert r.error_code == GROUP_DENIED and r.member_id == "" and r.generation_id == -1


def test_list_groups_and_list_transactions_show_only_what_may_be_described(broker: Broker) -> None:
    assert call(broker, 10, 3, {"key": "g", "key_type": 0}, ADMIN).error_code == ErrorCode.none
    joined = call(broker, 11, 7, {"group_id": "g", "session_timeout": 10000, "rebalance_timeout": 10000,
                                  "member_id": "", "group_instance_id": None, "protocol_type": "consumer",
                                  "protocols": [{"name": "range", "metadata": b""}]}, ADMIN)
    assert joined.error_code == ErrorCode.member_id_required  # the group exists now
    assert [g.group_id for g in call(broker, 16, 4, {"states_filter": []}, ADMIN).groups] == ["g"]
    assert list(call(broker, 16, 4, {"states_filter": []}, MALLORY).groups) == []
    allow(broker, ALICE, Op.DESCRIBE, GROUP, "g")
    assert [g.group_id for g in call(broker, 16, 4, {"states_filter": []}, ALICE).groups] == ["g"]
    allow(broker, MALLORY, Op.DESCRIBE, CLUSTER, CLUSTER_NAME)  # DESCRIBE on the cluster: every group
    assert [g.group_id for g in call(broker, 16, 4, {"states_filter": []}, MALLORY).groups] == ["g"]
    r = call(broker, 66, 1, {"state_filters": [], "producer_id_filters": [], "duration_filter": -1}, MALLORY)
    assert r.error_code == ErrorCode.none and list(r.transaction_states) == []


def test_describe_cluster_authorized_operations(broker: Broker) -> None:
    r = call(broker, 60, 1, {"include_cluster_authorized_operations": True, "endpoint_type": 1}, MALLORY)
    assert r.error_code == ErrorCode.none and r.cluster_authorized_operations == 0
    allow(broker, ALICE, Op.ALTER, CLUSTER, CLUSTER_NAME)  # ALTER implies DESCRIBE
    r = call(broker, 60, 1, {"include_cluster_authorized_operations": True, "endpoint_type": 1}, ALICE)
    assert r.cluster_authorized_operations == (1 << Op.ALTER) | (1 << Op.DESCRIBE)


def test_create_topics_without_describe_configs_hides_the_configs(broker: Broker) -> None:
    allow(broker, ALICE, Op.CREATE, CLUSTER, CLUSTER_NAME)
    r = call(broker, 19, 7, {"timeout": 5000, "validate_only": False, "topics": [
        {"name": "fresh", "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}]})
    (t,) = r.topics
    assert t.error_code == ErrorCode.none and t.topic_config_error_code == TOPIC_DENIED
    assert not t.configs and t.num_partitions == -1
    allow(broker, ALICE, Op.DESCRIBE_CONFIGS, TOPIC, "other")
    (t,) = call(broker, 19, 7, {"timeout": 5000, "validate_only": False, "topics": [
        {"name": "other", "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}]}).topics
    assert t.topic_config_error_code == ErrorCode.none and t.configs and t.num_partitions == 1


def test_delete_topics_by_id_keeps_the_id_but_not_the_name(broker: Broker) -> None:
    create_topic(broker, EXISTING)
    topic_id = uuid.UUID(broker.image.topics_by_name[EXISTING].topic_id)
    (r,) = call(broker, 20, 6, {"timeout": 5000, "topics": [{"name": None, "topic_id": topic_id}]}, MALLORY).responses
    assert r.error_code == TOPIC_DENIED and r.name is None and r.topic_id == topic_id
    assert EXISTING in broker.image.topics_by_name


def test_offset_fetch_of_all_topics_leaves_out_the_ones_not_describable(broker: Broker) -> None:
    for name in ("orders", "hidden"):
        create_topic(broker, name)
    assert call(broker, 10, 3, {"key": "g", "key_type": 0}, ADMIN).error_code == ErrorCode.none
    committed = call(broker, 8, 8, {"group_id": "g", "generation_id_or_member_epoch": -1, "member_id": "",
                                    "group_instance_id": None, "topics": [
        {"name": name, "partitions": [{"partition_index": 0, "committed_offset": 0, "committed_leader_epoch": -1,
                                       "committed_metadata": ""}]} for name in ("orders", "hidden")]}, ADMIN)
    assert {p.error_code for t in committed.topics for p in t.partitions} == {ErrorCode.none}
    allow(broker, ALICE, Op.DESCRIBE, GROUP, "g")
    allow(broker, ALICE, Op.DESCRIBE, TOPIC, "orders")
    everything = call(broker, 9, 7, {"group_id": "g", "topics": None, "require_stable": False}, ALICE)
    assert everything.error_code == ErrorCode.none and [t.name for t in everything.topics] == ["orders"]
    named = call(broker, 9, 7, {"group_id": "g", "require_stable": False, "topics": [
        {"name": "orders", "partition_indexes": [0]}, {"name": "hidden", "partition_indexes": [0]}]}, ALICE)
    assert {t.name: t.partitions[0].error_code for t in named.topics} == {"orders": ErrorCode.none,
                                                                          "hidden": TOPIC_DENIED}


def test_offset_delete_answers_each_topic_not_readable(broker: Broker) -> None:
    for name in ("orders", "hidden"):
        create_topic(broker, name)
    assert call(broker, 10, 3, {"key": "g", "key_type": 0}, ADMIN).error_code == ErrorCode.none
    call(broker, 8, 8, {"group_id": "g", "generation_id_or_member_epoch": -1, "member_id": "",
                        "group_instance_id": None, "topics": [
        {"name": name, "partitions": [{"partition_index": 0, "committed_offset": 0, "committed_leader_epoch": -1,
                                       "committed_metadata": ""}]} for name in ("orders", "hidden")]}, ADMIN)
    allow(broker, ALICE, Op.DELETE, GROUP, "g")
    allow(broker, ALICE, Op.READ, TOPIC, "orders")
    r = call(broker, 47, 0, {"group_id": "g", "topics": [
        {"name": name, "partitions": [{"partition_index": 0}]} for name in ("orders", "hidden", MISSING)]})
    assert r.error_code == ErrorCode.none
    assert {t.name: t.partitions[0].error_code for t in r.topics} == {
        "orders": ErrorCode.none, "hidden": TOPIC_DENIED, MISSING: TOPIC_DENIED}
    left = call(broker, 9, 7, {"group_id": "g", "topics": None, "require_stable": False}, ADMIN)
    assert [t.name for t in left.topics] == ["hidden"]  # the denied topic's offset is still there
