"""The typed handlers' request and response unions cover exactly the versions their module declares."""

from __future__ import annotations

import typing

import pytest

from samsa.broker.context import ApiSpec
from samsa.broker.handlers import (
    add_offsets_to_txn,
    add_partitions_to_txn,
    delete_groups,
    delete_records,
    describe_cluster,
    describe_groups,
    describe_producers,
    describe_transactions,
    end_txn,
    heartbeat,
    join_group,
    leave_group,
    list_groups,
    list_offsets,
    list_transactions,
    offset_commit,
    offset_delete,
    offset_fetch,
    produce,
    sync_group,
    txn_offset_commit,
    write_txn_markers,
)
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
    (leave_group.API, leave_group.LeaveGroupRequest, leave_group.LeaveGroupResponse),
    (list_groups.API, list_groups.ListGroupsRequest, list_groups.ListGroupsResponse),
    (describe_transactions.API, describe_transactions.DescribeTransactionsRequest,
     describe_transactions.DescribeTransactionsResponse),
    (list_transactions.API, list_transactions.ListTransactionsRequest, list_transactions.ListTransactionsResponse),
    (sync_group.API, sync_group.SyncGroupRequest, sync_group.SyncGroupResponse),
    (write_txn_markers.API, write_txn_markers.WriteTxnMarkersRequest, write_txn_markers.WriteTxnMarkersResponse),
    (describe_producers.API, describe_producers.DescribeProducersRequest,
     describe_producers.DescribeProducersResponse),
    (join_group.API, join_group.JoinGroupRequest, join_group.JoinGroupResponse),
    (describe_groups.API, describe_groups.DescribeGroupsRequest, describe_groups.DescribeGroupsResponse),
    (txn_offset_commit.API, txn_offset_commit.TxnOffsetCommitRequest, txn_offset_commit.TxnOffsetCommitResponse),
    (offset_commit.API, offset_commit.OffsetCommitRequest, offset_commit.OffsetCommitResponse),
    (offset_fetch.API, offset_fetch.OffsetFetchRequest, offset_fetch.OffsetFetchResponse),
    (add_partitions_to_txn.API, add_partitions_to_txn.AddPartitionsToTxnRequest,
     add_partitions_to_txn.AddPartitionsToTxnResponse),
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
