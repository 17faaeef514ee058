"""The controller listener's APIs: the KRaft RPCs and the brokers' requests to the active controller.

Vote (key 52), v0-v2; BeginQuorumEpoch (key 53), v0-v1; EndQuorumEpoch (key 54), v0-v1; Fetch
(key 1), v13-v17, replica fetches of `__cluster_metadata`; and FetchSnapshot (key 59), v0-v1 go to
the metadata quorum's driver. DescribeQuorum (key 55), v0-v2 answers kafka-metadata-quorum.sh (on
both listeners). AlterPartition (key 56), v2-v3; BrokerRegistration (key 62), v0-v4; BrokerHeartbeat
(key 63), v0-v1; and AllocateProducerIds (key 67), v0 go to the controller, which answers
NOT_CONTROLLER unless it is active.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Awaitable
from typing import TYPE_CHECKING, cast

from samsa.broker.context import ApiSpec, RequestContext
from samsa.broker.controller import AlterPartitionChange
from samsa.broker.controller_types import AlterPartitionResult
from samsa.broker.metadata.quorum import NotControllerError
from samsa.broker.node_client import NodeUnavailableError
from samsa.broker.security.acl import AclOperation
from samsa.broker.security.acl_requests import cluster_error
from samsa.broker.wire import build
from samsa.kproto.errors import ErrorCode
from samsa.kproto.messages import response_class
from samsa.raft import codec

if TYPE_CHECKING:
    from kio.schema.allocate_producer_ids import v0 as allocate0
    from kio.schema.alter_partition import v2 as alter2
    from kio.schema.alter_partition import v3 as alter3
    from kio.schema.begin_quorum_epoch import v0 as begin0
    from kio.schema.begin_quorum_epoch import v1 as begin1
    from kio.schema.broker_heartbeat import v0 as heartbeat0
    from kio.schema.broker_heartbeat import v1 as heartbeat1
    from kio.schema.broker_registration import v0 as registration0
    from kio.schema.broker_registration import v1 as registration1
    from kio.schema.broker_registration import v2 as registration2
    from kio.schema.broker_registration import v3 as registration3
    from kio.schema.broker_registration import v4 as registration4
    from kio.schema.describe_quorum import v0 as describe0
    from kio.schema.describe_quorum import v1 as describe1
    from kio.schema.describe_quorum import v2 as describe2
    from kio.schema.end_quorum_epoch import v0 as end0
    from kio.schema.end_quorum_epoch import v1 as end1
    from kio.schema.fetch import v13 as fetch13
    from kio.schema.fetch import v14 as fetch14
    from kio.schema.fetch import v15 as fetch15
    from kio.schema.fetch import v16 as fetch16
    from kio.schema.fetch import v17 as fetch17
    from kio.schema.fetch_snapshot import v0 as snapshot0
    from kio.schema.fetch_snapshot import v1 as snapshot1
    from kio.schema.vote import v0 as vote0
    from kio.schema.vote import v1 as vote1
    from kio.schema.vote import v2 as vote2

    from samsa.broker.controller_types import Pending
    RaftFetchRequest = (fetch13.FetchRequest | fetch14.FetchRequest | fetch15.FetchRequest | fetch16.FetchRequest
                        | fetch17.FetchRequest)
    RaftFetchResponse = (fetch13.FetchResponse | fetch14.FetchResponse | fetch15.FetchResponse | fetch16.FetchResponse
                         | fetch17.FetchResponse)
    VoteRequest = vote0.VoteRequest | vote1.VoteRequest | vote2.VoteRequest
    VoteResponse = vote0.VoteResponse | vote1.VoteResponse | vote2.VoteResponse
    BeginQuorumEpochRequest = begin0.BeginQuorumEpochRequest | begin1.BeginQuorumEpochRequest
    BeginQuorumEpochResponse = begin0.BeginQuorumEpochResponse | begin1.BeginQuorumEpochResponse
    EndQuorumEpochRequest = end0.EndQuorumEpochRequest | end1.EndQuorumEpochRequest
    EndQuorumEpochResponse = end0.EndQuorumEpochResponse | end1.EndQuorumEpochResponse
    FetchSnapshotRequest = snapshot0.FetchSnapshotRequest | snapshot1.FetchSnapshotRequest
    FetchSnapshotResponse = snapshot0.FetchSnapshotResponse | snapshot1.FetchSnapshotResponse
    DescribeQuorumRequest = (describe0.DescribeQuorumRequest | describe1.DescribeQuorumRequest
                             | describe2.DescribeQuorumRequest)
    DescribeQuorumResponse = (describe0.DescribeQuorumResponse | describe1.DescribeQuorumResponse
                              | describe2.DescribeQuorumResponse)
    AlterPartitionRequest = alter2.AlterPartitionRequest | alter3.AlterPartitionRequest
    AlterPartitionResponse = alter2.AlterPartitionResponse | alter3.AlterPartitionResponse
    BrokerRegistrationRequest = (registration0.BrokerRegistrationRequest | registration1.BrokerRegistrationRequest
                                 | registration2.BrokerRegistrationRequest | registration3.BrokerRegistrationRequest
                                 | registration4.BrokerRegistrationRequest)
    BrokerRegistrationResponse = (registration0.BrokerRegistrationResponse | registration1.BrokerRegistrationResponse
                                  | registration2.BrokerRegistrationResponse | registration3.BrokerRegistrationResponse
                                  | registration4.BrokerRegistrationResponse)
    BrokerHeartbeatRequest = heartbeat0.BrokerHeartbeatRequest | heartbeat1.BrokerHeartbeatRequest
    BrokerHeartbeatResponse = heartbeat0.BrokerHeartbeatResponse | heartbeat1.BrokerHeartbeatResponse
    AllocateProducerIdsRequest = allocate0.AllocateProducerIdsRequest
    AllocateProducerIdsResponse = allocate0.AllocateProducerIdsResponse
    # What the metadata quorum's driver answers (Kafka's KafkaRaftClient handles these five APIs).
    RaftRequest = (RaftFetchRequest | VoteRequest | BeginQuorumEpochRequest | EndQuorumEpochRequest
                   | FetchSnapshotRequest)
    RaftResponse = (RaftFetchResponse | VoteResponse | BeginQuorumEpochResponse | EndQuorumEpochResponse
                    | FetchSnapshotResponse)

RAFT_FETCH = ApiSpec(key=1, min_version=13, max_version=17)
VOTE = ApiSpec(key=52, min_version=0, max_version=2)
BEGIN_QUORUM_EPOCH = ApiSpec(key=53, min_version=0, max_version=1)
END_QUORUM_EPOCH = ApiSpec(key=54, min_version=0, max_version=1)
DESCRIBE_QUORUM = ApiSpec(key=55, min_version=0, max_version=2)
ALTER_PARTITION = ApiSpec(key=56, min_version=2, max_version=3)
FETCH_SNAPSHOT = ApiSpec(key=59, min_version=0, max_version=1)
BROKER_REGISTRATION = ApiSpec(key=62, min_version=0, max_version=4)
BROKER_HEARTBEAT = ApiSpec(key=63, min_version=0, max_version=1)
ALLOCATE_PRODUCER_IDS = ApiSpec(key=67, min_version=0, max_version=0)


def _monotonic_ms() -> float:
    return time.monotonic() * 1000


async def handle_raft(request: RaftRequest, ctx: RequestContext) -> RaftResponse:
    response: RaftResponse = await ctx.broker.quorum.handle_request(request, ctx.header.api_key, ctx.version)
    return response


def handle_describe_quorum(request: DescribeQuorumRequest, ctx: RequestContext) -> DescribeQuorumResponse:
    broker = ctx.broker
    nodes = [(node_id, e.host, e.port) for node_id, e in sorted(broker.quorum.voters.items())]
    # raft.codec builds the kio response of `ctx.version` (raft does not name the broker's unions).
    return cast("DescribeQuorumResponse", codec.describe_quorum_response(broker.quorum.describe(), ctx.version,
                                                                         nodes=nodes))


def handle_broker_registration(request: BrokerRegistrationRequest, ctx: RequestContext
                               ) -> BrokerRegistrationResponse | Awaitable[BrokerRegistrationResponse]:
    broker = ctx.broker
    cls: type[BrokerRegistrationResponse] = response_class(62, ctx.version)
    if request.cluster_id != broker.cluster_id:
        return build(cls, {"throttle_time": 0, "error_code": ErrorCode.inconsistent_cluster_id, "broker_epoch": -1})
    listener = request.listeners[0] if request.listeners else None
    if listener is None:
        return build(cls, {"throttle_time": 0, "error_code": ErrorCode.invalid_request, "broker_epoch": -1})
    try:
        # The first listener is the inter-broker one (what followers and coordinators connect to); all of
        # them are kept, so Metadata can answer each client with the listener it came in on.
        listeners = ",".join(f"{e.name.upper()}://{e.host}:{int(e.port)}" for e in request.listeners)
        pending = broker.controller.register_broker(
            int(request.broker_id), str(request.incarnation_id), listener.host, int(listener.port), request.rack,
            _monotonic_ms(), listeners)
    except NotControllerError:
        return build(cls, {"throttle_time": 0, "error_code": ErrorCode.not_controller, "broker_epoch": -1})
    return _answer_registration(cls, pending)


async def _answer_registration(cls: type[BrokerRegistrationResponse],
                               pending: Pending[int]) -> BrokerRegistrationResponse:
    try:
        epoch = await pending
    except NotControllerError:
        return build(cls, {"throttle_time": 0, "error_code": ErrorCode.not_controller, "broker_epoch": -1})
    return build(cls, {"throttle_time": 0, "error_code": ErrorCode.none, "broker_epoch": epoch})


async def handle_broker_heartbeat(request: BrokerHeartbeatRequest, ctx: RequestContext) -> BrokerHeartbeatResponse:
    cls: type[BrokerHeartbeatResponse] = response_class(63, ctx.version)

    def error(code: ErrorCode) -> BrokerHeartbeatResponse:
        return build(cls, {"throttle_time": 0, "error_code": code, "is_caught_up": False, "is_fenced": True,
                           "should_shut_down": False})

    try:
        code, pending = ctx.broker.controller.heartbeat(
            int(request.broker_id), int(request.broker_epoch), int(request.current_metadata_offset),
            bool(request.want_fence), bool(request.want_shut_down), _monotonic_ms())
        if pending is None:
            return error(code)
        result = await pending
    except NotControllerError:
        return error(ErrorCode.not_controller)
    return build(cls, {"throttle_time": 0, "error_code": ErrorCode.none, "is_caught_up": result.is_caught_up,
                       "is_fenced": result.is_fenced, "should_shut_down": result.should_shut_down})


async def handle_allocate_producer_ids(request: AllocateProducerIdsRequest,
                                       ctx: RequestContext) -> AllocateProducerIdsResponse:
    cls: type[AllocateProducerIdsResponse] = response_class(67, ctx.version)
    try:
        start, length = await ctx.broker.controller.allocate_producer_ids(int(request.broker_id),
                                                                          int(request.broker_epoch))
    except NotControllerError:
        return build(cls, {"throttle_time": 0, "error_code": ErrorCode.not_controller, "producer_id_start": -1,
                           "producer_id_len": 0})
    return build(cls, {"throttle_time": 0, "error_code": ErrorCode.none, "producer_id_start": start,
                       "producer_id_len": length})


async def handle_describe_quorum_on_broker(request: DescribeQuorumRequest,
                                           ctx: RequestContext) -> DescribeQuorumResponse:
    """kafka-metadata-quorum.sh --bootstrap-server asks a broker, which asks the active controller."""
    broker = ctx.broker
    denied = cluster_error(ctx, AclOperation.DESCRIBE)  # ControllerApis: DESCRIBE on the cluster
    if denied:
        cls: type[DescribeQuorumResponse] = response_class(55, ctx.version)
        return build(cls, {"error_code": denied, "error_message": "Cluster authorization failed.", "topics": (),
                           "nodes": ()})
    if broker.quorum.is_leader or broker.controller_endpoint() is None:
        return handle_describe_quorum(request, ctx)
    try:
        forwarded: DescribeQuorumResponse = await broker.lifecycle.channel.forward(request, timeout_s=5.0)
    except (NotControllerError, NodeUnavailableError, TimeoutError):
        return handle_describe_quorum(request, ctx)  # NOT_LEADER_OR_FOLLOWER from a follower
    return forwarded


async def handle_alter_partition(request: AlterPartitionRequest, ctx: RequestContext) -> AlterPartitionResponse:
    """AlterPartition (56), v2-v3: a partition leader changes its ISR through the controller."""
    changes = []
    if ctx.version >= 3:  # v3 names each ISR member with its broker epoch (KIP-903); decoded with v3's class
        for t in cast("alter3.AlterPartitionRequest", request).topics:
            for p in t.partitions:
                changes.append(AlterPartitionChange(str(t.topic_id), int(p.partition_index), int(p.leader_epoch),
                                                    int(p.partition_epoch),
                                                    tuple(int(b.broker_id) for b in p.new_isr_with_epochs)))
    else:
        for t2 in cast("alter2.AlterPartitionRequest", request).topics:
            for p2 in t2.partitions:
                changes.append(AlterPartitionChange(str(t2.topic_id), int(p2.partition_index), int(p2.leader_epoch),
                                                    int(p2.partition_epoch), tuple(int(b) for b in p2.new_isr)))
    results: list[AlterPartitionResult]
    try:
        error, pending = ctx.broker.controller.alter_partition(int(request.broker_id), int(request.broker_epoch),
                                                               changes)
        results = await pending if pending is not None else []
    except NotControllerError:
        error, results = ErrorCode.not_controller, []
    return _alter_partition_response(ctx, error, results)


def _alter_partition_response(ctx: RequestContext, error: ErrorCode,
                              results: list[AlterPartitionResult]) -> AlterPartitionResponse:
    """The one place AlterPartition's answers become the kio response of the request's version: partitions
    grouped by topic id, in the order the results name them."""
    by_topic: dict[str, list[AlterPartitionResult]] = {}
    for r in results:
        by_topic.setdefault(r.change.topic_id, []).append(r)
    cls: type[AlterPartitionResponse] = response_class(56, ctx.version)
    return build(cls, {"throttle_time": 0, "error_code": error, "topics": [
        {"topic_id": uuid.UUID(topic_id), "partitions": [
            {"partition_index": r.change.partition_id, "error_code": r.error_code, "leader_id": r.leader_id,
             "leader_epoch": r.leader_epoch, "isr": r.isr, "leader_recovery_state": 0,
             "partition_epoch": r.partition_epoch} for r in rows]}
        for topic_id, rows in by_topic.items()]})
