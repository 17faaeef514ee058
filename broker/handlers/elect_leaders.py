"""ElectLeaders (key 43), v0-v2: kafka-leader-election.sh.

v0 elects preferred leaders only; v1 adds election_type (KIP-460: 0 preferred, 1 unclean) and a
top-level error_code; v2 is the first flexible version. A null topic_partitions means every
partition, and then the answer leaves out partitions that need no election (as Kafka does).
Controller-only: other brokers forward it to the active controller (broker.forwarding); the election
itself is broker.reassignment's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from samsa.broker.context import ApiSpec, RequestContext
from samsa.broker.controller_types import TooManyRecordsError
from samsa.broker.forwarding import error_response
from samsa.broker.reassignment import ElectionType, PartitionResult, TopicResults
from samsa.broker.security.acl import AclOperation
from samsa.broker.security.acl_requests import cluster_error
from samsa.broker.wire import build, field
from samsa.kproto.errors import ErrorCode
from samsa.kproto.messages import response_class

if TYPE_CHECKING:
    from kio.schema.elect_leaders import v0, v1, v2
    ElectLeadersRequest = v0.ElectLeadersRequest | v1.ElectLeadersRequest | v2.ElectLeadersRequest
    ElectLeadersResponse = v0.ElectLeadersResponse | v1.ElectLeadersResponse | v2.ElectLeadersResponse

API = ApiSpec(key=43, min_version=0, max_version=2)


async def handle_elect_leaders(request: ElectLeadersRequest, ctx: RequestContext) -> ElectLeadersResponse:
    denied = cluster_error(ctx, AclOperation.ALTER)  # ControllerApis: ALTER on the cluster
    if denied:
        refused_whole: ElectLeadersResponse = error_response(43, ctx.version, request, denied,
                                                             "Cluster authorization failed.")
        return refused_whole
    raw_type = int(field(request, "election_type", ElectionType.PREFERRED))  # v1+
    requested = request.topic_partitions
    if raw_type not in tuple(ElectionType):
        message = f"Unknown election type {raw_type}"
        return _response(ctx, ErrorCode.invalid_request, [
            TopicResults(t.topic, tuple(PartitionResult(p, ErrorCode.invalid_request, message) for p in t.partitions))
            for t in requested or ()])
    partitions = None if requested is None else [(str(t.topic), [int(p) for p in t.partitions]) for t in requested]
    try:
        pending = ctx.broker.controller.reassignments.elect_leaders(ElectionType(raw_type), partitions)
    except TooManyRecordsError as e:  # more elections than one operation may write (Kafka's bound)
        refused: ElectLeadersResponse = error_response(43, ctx.version, request, e.error_code, e.message)
        return refused
    return _response(ctx, ErrorCode.none, await pending)


def _response(ctx: RequestContext, error: ErrorCode, results: list[TopicResults]) -> ElectLeadersResponse:
    """The one place the answers become the kio response of the request's version (v0 has no top-level
    error_code)."""
    cls: type[ElectLeadersResponse] = response_class(43, ctx.version)
    return build(cls, {"throttle_time": 0, "error_code": error, "replica_election_results": [
        {"topic": r.topic, "partition_result": [
            {"partition_id": p.partition_id, "error_code": p.error_code, "error_message": p.error_message}
            for p in r.partitions]} for r in results]})
