"""The typed handlers' request and response unions cover exactly the versions their module declares."""

from __future__ import annotations

import ast
import inspect
import time
import typing
import uuid
from types import ModuleType

import pytest

from samsa.broker.client import Connection
from samsa.broker.context import ApiSpec
from samsa.broker.handlers import (
    CONTROLLER_HANDLERS,
    HANDLERS,
    add_offsets_to_txn,
    add_partitions_to_txn,
    alter_configs,
    alter_replica_log_dirs,
    alter_user_scram_credentials,
    api_versions,
    consumer_group_describe,
    consumer_group_heartbeat,
    create_acls,
    create_partitions,
    create_topics,
    delete_acls,
    delete_groups,
    delete_records,
    delete_topics,
    describe_acls,
    describe_client_quotas,
    describe_cluster,
    describe_configs,
    describe_groups,
    describe_log_dirs,
    describe_producers,
    describe_topic_partitions,
    describe_transactions,
    describe_user_scram_credentials,
    elect_leaders,
    end_txn,
    envelope,
    fetch,
    find_coordinator,
    heartbeat,
    init_producer_id,
    join_group,
    leave_group,
    list_config_resources,
    list_groups,
    list_offsets,
    list_transactions,
    metadata,
    offset_commit,
    offset_delete,
    offset_fetch,
    offset_for_leader_epoch,
    partition_reassignments,
    produce,
    quorum,
    raft_voters,
    sasl_authenticate,
    sasl_handshake,
    streams_group_describe,
    streams_group_heartbeat,
    streams_group_topology_description_update,
    sync_group,
    txn_offset_commit,
    unregister_broker,
    unregister_controller,
    update_features,
    write_txn_markers,
)
from samsa.kproto.errors import ErrorCode
from samsa.kproto.messages import request_class, response_class

TYPED = [
    (produce, "ProduceRequest", "ProduceResponse"),
    (list_offsets, "ListOffsetsRequest", "ListOffsetsResponse"),
    (heartbeat, "HeartbeatRequest", "HeartbeatResponse"),
    (describe_cluster, "DescribeClusterRequest", "DescribeClusterResponse"),
    (end_txn, "EndTxnRequest", "EndTxnResponse"),
    (add_offsets_to_txn, "AddOffsetsToTxnRequest", "AddOffsetsToTxnResponse"),
    (delete_groups, "DeleteGroupsRequest", "DeleteGroupsResponse"),
    (offset_delete, "OffsetDeleteRequest", "OffsetDeleteResponse"),
    (delete_records, "DeleteRecordsRequest", "DeleteRecordsResponse"),
    (offset_for_leader_epoch, "OffsetForLeaderEpochRequest", "OffsetForLeaderEpochResponse"),
    (init_producer_id, "InitProducerIdRequest", "InitProducerIdResponse"),
    (find_coordinator, "FindCoordinatorRequest", "FindCoordinatorResponse"),
    (create_partitions, "CreatePartitionsRequest", "CreatePartitionsResponse"),
    (delete_topics, "DeleteTopicsRequest", "DeleteTopicsResponse"),
    (leave_group, "LeaveGroupRequest", "LeaveGroupResponse"),
    (list_groups, "ListGroupsRequest", "ListGroupsResponse"),
    (describe_transactions, "DescribeTransactionsRequest", "DescribeTransactionsResponse"),
    (list_transactions, "ListTransactionsRequest", "ListTransactionsResponse"),
    (sync_group, "SyncGroupRequest", "SyncGroupResponse"),
    (write_txn_markers, "WriteTxnMarkersRequest", "WriteTxnMarkersResponse"),
    (describe_producers, "DescribeProducersRequest", "DescribeProducersResponse"),
    (join_group, "JoinGroupRequest", "JoinGroupResponse"),
    (describe_groups, "DescribeGroupsRequest", "DescribeGroupsResponse"),
    (txn_offset_commit, "TxnOffsetCommitRequest", "TxnOffsetCommitResponse"),
    (offset_commit, "OffsetCommitRequest", "OffsetCommitResponse"),
    (offset_fetch, "OffsetFetchRequest", "OffsetFetchResponse"),
    (add_partitions_to_txn, "AddPartitionsToTxnRequest", "AddPartitionsToTxnResponse"),
    (metadata, "MetadataRequest", "MetadataResponse"),
    (fetch, "FetchRequest", "FetchResponse"),
    (create_topics, "CreateTopicsRequest", "CreateTopicsResponse"),
    (describe_configs, "DescribeConfigsRequest", "DescribeConfigsResponse"),
    (api_versions, "ApiVersionsRequest", "ApiVersionsResponse"),
    (describe_log_dirs, "DescribeLogDirsRequest", "DescribeLogDirsResponse"),
    (elect_leaders, "ElectLeadersRequest", "ElectLeadersResponse"),
    (create_acls, "CreateAclsRequest", "CreateAclsResponse"),
    (describe_acls, "DescribeAclsRequest", "DescribeAclsResponse"),
    (delete_acls, "DeleteAclsRequest", "DeleteAclsResponse"),
    (envelope, "EnvelopeRequest", "EnvelopeResponse"),
    (consumer_group_heartbeat, "ConsumerGroupHeartbeatRequest", "ConsumerGroupHeartbeatResponse"),
    (consumer_group_describe, "ConsumerGroupDescribeRequest", "ConsumerGroupDescribeResponse"),
    (sasl_handshake, "SaslHandshakeRequest", "SaslHandshakeResponse"),
    (sasl_authenticate, "SaslAuthenticateRequest", "SaslAuthenticateResponse"),
    (describe_user_scram_credentials, "DescribeUserScramCredentialsRequest", "DescribeUserScramCredentialsResponse"),
    (alter_user_scram_credentials, "AlterUserScramCredentialsRequest", "AlterUserScramCredentialsResponse"),
    (list_config_resources, "ListConfigResourcesRequest", "ListConfigResourcesResponse"),
    (describe_topic_partitions, "DescribeTopicPartitionsRequest", "DescribeTopicPartitionsResponse"),
    (update_features, "UpdateFeaturesRequest", "UpdateFeaturesResponse"),
    (describe_client_quotas, "DescribeClientQuotasRequest", "DescribeClientQuotasResponse"),
    (alter_replica_log_dirs, "AlterReplicaLogDirsRequest", "AlterReplicaLogDirsResponse"),
    (unregister_broker, "UnregisterBrokerRequest", "UnregisterBrokerResponse"),
    (unregister_controller, "UnregisterControllerRequest", "UnregisterControllerResponse"),
    (streams_group_heartbeat, "StreamsGroupHeartbeatRequest", "StreamsGroupHeartbeatResponse"),
    (streams_group_describe, "StreamsGroupDescribeRequest", "StreamsGroupDescribeResponse"),
    (streams_group_topology_description_update, "StreamsGroupTopologyDescriptionUpdateRequest",
     "StreamsGroupTopologyDescriptionUpdateResponse"),
]

# Modules serving several APIs: the ApiSpec's name in the module, and that API's unions.
TYPED_APIS: list[tuple[ModuleType, str, str, str]] = [
    (alter_configs, "ALTER_CONFIGS", "AlterConfigsRequest", "AlterConfigsResponse"),
    (alter_configs, "INCREMENTAL_ALTER_CONFIGS", "IncrementalAlterConfigsRequest", "IncrementalAlterConfigsResponse"),
    (partition_reassignments, "ALTER_PARTITION_REASSIGNMENTS", "AlterPartitionReassignmentsRequest",
     "AlterPartitionReassignmentsResponse"),
    (partition_reassignments, "LIST_PARTITION_REASSIGNMENTS", "ListPartitionReassignmentsRequest",
     "ListPartitionReassignmentsResponse"),
    (quorum, "RAFT_FETCH", "RaftFetchRequest", "RaftFetchResponse"),
    (quorum, "VOTE", "VoteRequest", "VoteResponse"),
    (quorum, "BEGIN_QUORUM_EPOCH", "BeginQuorumEpochRequest", "BeginQuorumEpochResponse"),
    (quorum, "END_QUORUM_EPOCH", "EndQuorumEpochRequest", "EndQuorumEpochResponse"),
    (quorum, "FETCH_SNAPSHOT", "FetchSnapshotRequest", "FetchSnapshotResponse"),
    (quorum, "DESCRIBE_QUORUM", "DescribeQuorumRequest", "DescribeQuorumResponse"),
    (quorum, "ALTER_PARTITION", "AlterPartitionRequest", "AlterPartitionResponse"),
    (quorum, "BROKER_REGISTRATION", "BrokerRegistrationRequest", "BrokerRegistrationResponse"),
    (quorum, "BROKER_HEARTBEAT", "BrokerHeartbeatRequest", "BrokerHeartbeatResponse"),
    (quorum, "ALLOCATE_PRODUCER_IDS", "AllocateProducerIdsRequest", "AllocateProducerIdsResponse"),
    (raft_voters, "ADD_RAFT_VOTER", "AddRaftVoterRequest", "AddRaftVoterResponse"),
    (raft_voters, "REMOVE_RAFT_VOTER", "RemoveRaftVoterRequest", "RemoveRaftVoterResponse"),
    (raft_voters, "UPDATE_RAFT_VOTER", "UpdateRaftVoterRequest", "UpdateRaftVoterResponse"),
]

# Every typed API once: (module, its ApiSpec's name, request union, response union).
_ALL = [(module, "API", request, response) for module, request, response in TYPED] + TYPED_APIS


def _members(alias: object) -> set[type]:
    """The classes of a union alias; an API with one version's alias is that class itself."""
    return {alias} if isinstance(alias, type) else set(typing.get_args(alias))


def _type_checking_names(module: ModuleType) -> dict[str, object]:
    """What the module's `if TYPE_CHECKING:` block defines, evaluated here: the unions are for mypy only, so
    the broker never imports every version's kio schema at start-up, and this test evaluates them instead."""
    tree = ast.parse(inspect.getsource(module))
    namespace: dict[str, object] = dict(vars(module))  # the block may use the module's own imports
    for node in tree.body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            exec(compile(ast.Module(body=node.body, type_ignores=[]), module.__name__, "exec"), namespace)
    return namespace


@pytest.mark.parametrize(("module", "spec_name", "request_alias", "response_alias"), _ALL,
                         ids=lambda v: getattr(v, "__name__", v))
def test_unions_are_the_declared_versions_classes(module: ModuleType, spec_name: str, request_alias: str,
                                                  response_alias: str) -> None:
    spec: ApiSpec = getattr(module, spec_name)
    names = _type_checking_names(module)
    versions = range(spec.min_version, spec.max_version + 1)
    assert _members(names[request_alias]) == {request_class(spec.key, v) for v in versions}
    assert _members(names[response_alias]) == {response_class(spec.key, v) for v in versions}


def test_typed_handlers_import_no_kio_schema_at_run_time() -> None:
    """Importing every version's schema at start-up cost ~100 ms of a broker's start: they stay under
    TYPE_CHECKING, and the kio classes load on the first request of each version."""
    for module in {m for m, _, _, _ in _ALL}:
        tree = ast.parse(inspect.getsource(module))
        runtime = [n for n in tree.body if isinstance(n, ast.ImportFrom) and (n.module or "").startswith("kio.schema")]
        assert runtime == [], module.__name__


def test_every_served_api_is_typed() -> None:
    """Every handler either listener serves is listed above, and takes and returns its API's kio unions
    (the annotations are strings: the modules postpone them)."""
    listed = {(module.__name__, getattr(module, spec_name)) for module, spec_name, _, _ in _ALL}
    for api in [*HANDLERS.values(), *CONTROLLER_HANDLERS.values()]:
        assert (api.handler.__module__, api.spec) in listed, (api.handler.__name__, api.spec)
        annotations = api.handler.__annotations__
        assert "Any" not in annotations["request"] and "Any" not in annotations["return"], api.handler.__name__


def test_delete_topics_answers_by_name_before_v6_and_by_id_in_v6(conn: Connection) -> None:
    for name in ("typed-del-v1", "typed-del-v5"):
        conn.request(19, {"topics": [{"name": name, "num_partitions": 1, "replication_factor": 1, "assignments": (),
                                      "configs": ()}], "timeout": 10000, "validate_only": False})
    v1 = conn.request(20, {"topic_names": ["typed-del-v1"], "timeout": 1000}, version=1)
    assert [(r.name, r.error_code) for r in v1.responses] == [("typed-del-v1", ErrorCode.none)]
    v5 = conn.request(20, {"topic_names": ["typed-del-v5", "typed-del-v5-missing"], "timeout": 1000}, version=5)
    assert [(r.name, r.error_code, r.error_message) for r in v5.responses] == [
        ("typed-del-v5", ErrorCode.none, None), ("typed-del-v5-missing", ErrorCode.unknown_topic_or_partition, None)]
    unknown = uuid.uuid4()
    v6 = conn.request(20, {"topics": [{"name": None, "topic_id": unknown}], "timeout": 1000}, version=6)
    assert [(r.name, r.topic_id, r.error_code) for r in v6.responses] == [(None, unknown, ErrorCode.unknown_topic_id)]


def test_find_coordinator_answers_one_key_before_v4_and_each_key_from_v4(conn: Connection) -> None:
    v3 = conn.request(10, {"key": "typed-group", "key_type": 0}, version=3)
    for _ in range(100):  # the first ask creates __consumer_offsets: COORDINATOR_NOT_AVAILABLE until it has a leader
        if v3.error_code != ErrorCode.coordinator_not_available:
            break
        time.sleep(0.1)
        v3 = conn.request(10, {"key": "typed-group", "key_type": 0}, version=3)
    assert v3.error_code == ErrorCode.none and v3.node_id >= 0 and v3.port > 0
    v4 = conn.request(10, {"key_type": 0, "coordinator_keys": ["typed-group", ""]}, version=4)
    assert [(c.key, c.error_code, c.node_id, c.port) for c in v4.coordinators] == [
        ("typed-group", ErrorCode.none, v3.node_id, v3.port), ("", ErrorCode.invalid_request, -1, -1)]
