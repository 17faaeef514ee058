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
from typing import Any

from samsa.broker.context import ApiSpec, RequestContext
from samsa.broker.controller import AlterPartitionChange
from samsa.broker.metadata.quorum import NotControllerError
from samsa.broker.node_client import NodeUnavailableError
from samsa.broker.wire import build
from samsa.kproto.errors import ErrorCode
from samsa.kproto.messages import response_class
from samsa.raft import codec

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


async def handle_raft(request: Any, ctx: RequestContext) -> Any:
    return await ctx.broker.quorum.handle_request(request, ctx.header.api_key, ctx.version)


def handle_describe_quorum(request: Any, ctx: RequestContext) -> Any:
    broker = ctx.broker
    nodes = [(node_id, e.host, e.port) for node_id, e in sorted(broker.quorum.voters.items())]
    return codec.describe_quorum_response(broker.quorum.describe(), ctx.version, nodes=nodes)


def handle_broker_registration(request: Any, ctx: RequestContext) -> Any:
    broker = ctx.broker
    cls = response_class(62, ctx.version)
    if request.cluster_id != broker.cluster_id:
        return build(cls, {"throttle_time": 0, "error_code": ErrorCode.inconsistent_cluster_id, "broker_epoch": -1})
    listener = request.listeners[0] if request.listeners else None
    if listener is None:
        return build(cls, {"throttle_time": 0, "error_code": ErrorCode.invalid_request, "broker_epoch": -1})
    try:
        pending = broker.controller.register_broker(
            int(request.broker_id), str(request.incarnation_id), listener.host, int(listener.port), request.rack,
            _monotonic_ms())
    except NotControllerError:
        return build(cls, {"throttle_time": 0, "error_code": ErrorCode.not_controller, "broker_epoch": -1})
    return _answer_registration(cls, pending)


async def _answer_registration(cls: Any, pending: Any) -> Any:
    try:
        epoch = await pending
    except NotControllerError:
        return build(cls, {"throttle_time": 0, "error_code": ErrorCode.not_controller, "broker_epoch": -1})
    return build(cls, {"throttle_time": 0, "error_code": ErrorCode.none, "broker_epoch": epoch})


async def handle_broker_heartbeat(request: Any, ctx: RequestContext) -> Any:
    cls = response_class(63, ctx.version)

    def error(code: ErrorCode) -> Any:
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


async def handle_allocate_producer_ids(request: Any, ctx: RequestContext) -> Any:
    cls = response_class(67, ctx.version)
    try:
        start, length = await ctx.broker.controller.allocate_producer_ids(int(request.broker_id),
                                                                          int(request.broker_epoch))
    except NotControllerError:
        return build(cls, {"throttle_time": 0, "error_code": ErrorCode.not_controller, "producer_id_start": -1,
                           "producer_id_len": 0})
    return build(cls, {"throttle_time": 0, "error_code": ErrorCode.none, "producer_id_start": start,
                       "producer_id_len": length})


async def handle_describe_quorum_on_broker(request: Any, ctx: RequestContext) -> Any:
    """kafka-metadata-quorum.sh --bootstrap-server asks a broker, which asks the active controller."""
    broker = ctx.broker
    if broker.quorum.is_leader or broker.controller_endpoint() is None:
        return handle_describe_quorum(request, ctx)
    try:
        return await broker.lifecycle.channel.forward(request, timeout_s=5.0)
    except (NotControllerError, NodeUnavailableError, TimeoutError):
        return handle_describe_quorum(request, ctx)  # NOT_LEADER_OR_FOLLOWER from a follower


async def handle_alter_partition(request: Any, ctx: RequestContext) -> Any:
    """AlterPartition (56), v2-v3: a partition leader changes its ISR through the controller."""
    cls = response_class(56, ctx.version)
    changes = []
    for t in request.topics:
        for p in t.partitions:
            isr = ([int(b.broker_id) for b in p.new_isr_with_epochs] if ctx.version >= 3
                   else [int(b) for b in p.new_isr])
            changes.append(AlterPartitionChange(str(t.topic_id), int(p.partition_index), int(p.leader_epoch),
                                                int(p.partition_epoch), tuple(isr)))
    try:
        error, pending = ctx.broker.controller.alter_partition(int(request.broker_id), int(request.broker_epoch),
                                                               changes)
        results = await pending if pending is not None else []
    except NotControllerError:
        error, results = ErrorCode.not_controller, []
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for r in results:
        by_topic.setdefault(r.change.topic_id, []).append({
            "partition_index": r.change.partition_id, "error_code": r.error_code, "leader_id": r.leader_id,
            "leader_epoch": r.leader_epoch, "isr": r.isr, "leader_recovery_state": 0,
            "partition_epoch": r.partition_epoch})
    return build(cls, {"throttle_time": 0, "error_code": error, "topics": [
        {"topic_id": uuid.UUID(topic_id), "partitions": parts} for topic_id, parts in by_topic.items()]})
