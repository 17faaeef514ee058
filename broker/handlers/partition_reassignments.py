"""AlterPartitionReassignments (key 45), v0-v1, and ListPartitionReassignments (key 46), v0 (KIP-455):
kafka-reassign-partitions.sh --execute / --cancel / --verify and --list.

Alter sets a partition's target replicas (null replicas cancels its reassignment); errors are per
partition. v1 adds allow_replication_factor_change (KIP-860, default true, which v0 means): false refuses
a target whose size differs from the partition's replica count (INVALID_REPLICATION_FACTOR;
`kafka-reassign-partitions.sh --disallow-replication-factor-change`). List answers the ongoing
reassignments, all of them when topics is null.
Controller-only: other brokers forward both to the active controller (broker.forwarding); the
decisions are broker.reassignment's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from samsa.broker.context import ApiSpec, RequestContext
from samsa.broker.controller_types import TooManyRecordsError
from samsa.broker.forwarding import error_response
from samsa.broker.reassignment import OngoingReassignment, TopicResults
from samsa.broker.security.acl import AclOperation
from samsa.broker.security.acl_requests import cluster_error
from samsa.broker.wire import build, field
from samsa.kproto.errors import ErrorCode
from samsa.kproto.messages import response_class

if TYPE_CHECKING:
    from kio.schema.alter_partition_reassignments import v0 as alter_v0
    from kio.schema.alter_partition_reassignments import v1 as alter_v1
    AlterPartitionReassignmentsRequest = (alter_v0.AlterPartitionReassignmentsRequest
                                          | alter_v1.AlterPartitionReassignmentsRequest)
    AlterPartitionReassignmentsResponse = (alter_v0.AlterPartitionReassignmentsResponse
                                           | alter_v1.AlterPartitionReassignmentsResponse)
    from kio.schema.list_partition_reassignments.v0 import (
        ListPartitionReassignmentsRequest,
        ListPartitionReassignmentsResponse,
    )

ALTER_PARTITION_REASSIGNMENTS = ApiSpec(key=45, min_version=0, max_version=1)
LIST_PARTITION_REASSIGNMENTS = ApiSpec(key=46, min_version=0, max_version=0)


async def handle_alter_partition_reassignments(request: AlterPartitionReassignmentsRequest,
                                               ctx: RequestContext) -> AlterPartitionReassignmentsResponse:
    denied = cluster_error(ctx, AclOperation.ALTER)  # ControllerApis: ALTER on the cluster
    if denied:
        refused_whole: AlterPartitionReassignmentsResponse = error_response(
            45, ctx.version, request, denied, "Cluster authorization failed.")
        return refused_whole
    topics = [(str(t.name), [(int(p.partition_index), None if p.replicas is None else [int(b) for b in p.replicas])
                             for p in t.partitions]) for t in request.topics]
    try:
        pending = ctx.broker.controller.reassignments.alter(
            topics, bool(field(request, "allow_replication_factor_change", True)))  # v1+
    except TooManyRecordsError as e:  # more changes than one operation may write (Kafka's bound)
        refused: AlterPartitionReassignmentsResponse = error_response(45, ctx.version, request, e.error_code,
                                                                      e.message)
        return refused
    return _alter_response(ctx, await pending)


def _alter_response(ctx: RequestContext, results: list[TopicResults]) -> AlterPartitionReassignmentsResponse:
    """The one place Alter's answers become the kio response of the request's version."""
    cls: type[AlterPartitionReassignmentsResponse] = response_class(45, ctx.version)
    return build(cls, {
        "throttle_time": 0, "error_code": ErrorCode.none, "error_message": None, "responses": [
            {"name": r.topic, "partitions": [
                {"partition_index": p.partition_id, "error_code": p.error_code, "error_message": p.error_message}
                for p in r.partitions]} for r in results]})


def handle_list_partition_reassignments(request: ListPartitionReassignmentsRequest,
                                        ctx: RequestContext) -> ListPartitionReassignmentsResponse:
    topics = None if request.topics is None else [(str(t.name), [int(p) for p in t.partition_indexes])
                                                  for t in request.topics]
    denied = cluster_error(ctx, AclOperation.DESCRIBE)  # ControllerApis: DESCRIBE on the cluster
    if denied:  # Kafka's error response echoes the topics and partitions asked about, with no replicas
        cls: type[ListPartitionReassignmentsResponse] = response_class(46, ctx.version)
        return build(cls, {
            "throttle_time": 0, "error_code": denied, "error_message": "Cluster authorization failed.", "topics": [
                {"name": name, "partitions": [{"partition_index": p, "replicas": [], "adding_replicas": [],
                                               "removing_replicas": []} for p in partitions]}
                for name, partitions in topics or []]})
    return _list_response(ctx, ctx.broker.controller.reassignments.list_ongoing(topics))


def _list_response(ctx: RequestContext, ongoing: list[tuple[str, list[OngoingReassignment]]]
                   ) -> ListPartitionReassignmentsResponse:
    """The one place List's answers become the kio response of the request's version."""
    cls: type[ListPartitionReassignmentsResponse] = response_class(46, ctx.version)
    return build(cls, {
        "throttle_time": 0, "error_code": ErrorCode.none, "error_message": None, "topics": [
            {"name": name, "partitions": [
                {"partition_index": o.partition_id, "replicas": o.replicas, "adding_replicas": o.adding_replicas,
                 "removing_replicas": o.removing_replicas} for o in rows]} for name, rows in ongoing]})
