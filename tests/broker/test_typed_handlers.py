"""The typed handlers' request and response unions cover exactly the versions their module declares."""

from __future__ import annotations

import time
import typing
import uuid

import pytest

from samsa.broker.client import Connection
from samsa.broker.context import ApiSpec
from samsa.broker.handlers import (
    add_offsets_to_txn,
    create_partitions,
    delete_groups,
    delete_records,
    delete_topics,
    describe_cluster,
    end_txn,
    find_coordinator,
    heartbeat,
    init_producer_id,
    list_offsets,
    offset_delete,
    offset_for_leader_epoch,
    produce,
)
from samsa.kproto.errors import ErrorCode
from samsa.kproto.messages import request_class, response_class

TYPED = [
    (produce.API, produce.ProduceRequest, produce.ProduceResponse),
    (list_offsets.API, list_offsets.ListOffsetsRequest, list_offsets.ListOffsetsResponse),
    (heartbeat.API, heartbeat.HeartbeatRequest, heartbeat.HeartbeatResponse),
    (describe_cluster.API, describe_cluster.DescribeClusterRequest, describe_cluster.DescribeClusterResponse),
    (end_txn.API, end_txn.EndTxnRequest, end_txn.EndTxnResponse),
    (add_offsets_to_txn.API, add_offsets_to_txn.AddOffsetsToTxnRequest, add_offsets_to_txn.AddOffsetsToTxnResponse),
    (delete_groups.API, delete_groups.DeleteGroupsRequest, delete_groups.DeleteGroupsResponse),
    (offset_delete.API, offset_delete.OffsetDeleteRequest, offset_delete.OffsetDeleteResponse),
    (delete_records.API, delete_records.DeleteRecordsRequest, delete_records.DeleteRecordsResponse),
    (offset_for_leader_epoch.API, offset_for_leader_epoch.OffsetForLeaderEpochRequest,
     offset_for_leader_epoch.OffsetForLeaderEpochResponse),
    (init_producer_id.API, init_producer_id.InitProducerIdRequest, init_producer_id.InitProducerIdResponse),
    (find_coordinator.API, find_coordinator.FindCoordinatorRequest, find_coordinator.FindCoordinatorResponse),
    (create_partitions.API, create_partitions.CreatePartitionsRequest, create_partitions.CreatePartitionsResponse),
    (delete_topics.API, delete_topics.DeleteTopicsRequest, delete_topics.DeleteTopicsResponse),
]


def _members(alias: object) -> set[type]:
    """The classes of a union alias; an API with one version's alias is that class itself."""
    return {alias} if isinstance(alias, type) else set(typing.get_args(alias))


@pytest.mark.parametrize(("spec", "request_alias", "response_alias"), TYPED, ids=lambda v: str(getattr(v, "key", "")))
def test_unions_are_the_declared_versions_classes(spec: ApiSpec, request_alias: object, response_alias: object) -> None:
    versions = range(spec.min_version, spec.max_version + 1)
    assert _members(request_alias) == {request_class(spec.key, v) for v in versions}
    assert _members(response_alias) == {response_class(spec.key, v) for v in versions}


def test_produce_recognises_each_of_its_response_classes() -> None:
    assert set(produce._ResponseTypes) == _members(produce.ProduceResponse)


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
