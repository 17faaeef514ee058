"""ConsumerGroupHeartbeat (key 68), v0-v1: the KIP-848 consumer protocol (group.protocol=consumer).

v0 (Kafka 3.7+) let the coordinator pick a member id for a member joining with an empty one; v1 (Kafka
4.0) requires the client to generate it (an empty member id is INVALID_REQUEST). A member joins with
epoch 0, heartbeats with the epoch it was given, leaves with -1 (a static member that will come back:
-2). The answer carries the member's epoch, the heartbeat interval and, when it changed (or the request
was a full one), the partitions the member owns now. The coordinator logic is in
samsa.broker.group.consumer_coordinator; a change is answered once its records are replicated.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from samsa.broker.context import ApiSpec, RequestContext
from samsa.broker.group.consumer_coordinator import HeartbeatRequest, HeartbeatResult
from samsa.broker.security.acl import AclOperation
from samsa.broker.security.acl_requests import authorized_topics, group_error
from samsa.broker.wire import build, field
from samsa.kproto.errors import ErrorCode
from samsa.kproto.messages import response_class

if TYPE_CHECKING:
    from kio.schema.consumer_group_heartbeat import v0, v1
    ConsumerGroupHeartbeatRequest = v0.ConsumerGroupHeartbeatRequest | v1.ConsumerGroupHeartbeatRequest
    ConsumerGroupHeartbeatResponse = v0.ConsumerGroupHeartbeatResponse | v1.ConsumerGroupHeartbeatResponse

API = ApiSpec(key=68, min_version=0, max_version=1)


def _request(request: ConsumerGroupHeartbeatRequest, ctx: RequestContext) -> HeartbeatRequest:
    owned: dict[str, frozenset[int]] | None = None
    if request.topic_partitions is not None:
        owned = {}
        for t in request.topic_partitions:
            if t.topic_id is not None:
                owned[str(t.topic_id)] = owned.get(str(t.topic_id), frozenset()) | frozenset(t.partitions)
    names = None if request.subscribed_topic_names is None else tuple(request.subscribed_topic_names)
    return HeartbeatRequest(
        group_id=request.group_id, member_id=request.member_id, member_epoch=request.member_epoch,
        instance_id=request.instance_id, rack_id=request.rack_id,
        rebalance_timeout_ms=int(request.rebalance_timeout.total_seconds() * 1000),
        subscribed_topic_names=names, subscribed_topic_regex=field(request, "subscribed_topic_regex"),  # v1+
        server_assignor=request.server_assignor, owned=owned, client_id=ctx.header.client_id or "",
        client_host=f"/{ctx.client_host}", api_version=ctx.version)


def _response(result: HeartbeatResult) -> dict[str, Any]:
    out: dict[str, Any] = {"error_code": result.error, "error_message": result.error_message,
                           "member_id": result.member_id, "member_epoch": result.member_epoch,
                           "heartbeat_interval": result.heartbeat_interval_ms}
    if result.assignment is not None:
        out["assignment"] = {"topic_partitions": [
            {"topic_id": uuid.UUID(topic_id), "partitions": sorted(ps)}
            for topic_id, ps in sorted(result.assignment.items())]}
    return out


async def handle_consumer_group_heartbeat(request: ConsumerGroupHeartbeatRequest,
                                          ctx: RequestContext) -> ConsumerGroupHeartbeatResponse:
    cls: type[ConsumerGroupHeartbeatResponse] = response_class(68, ctx.version)
    groups = ctx.broker.groups
    # KafkaApis: READ on the group, then DESCRIBE on every topic named in the subscription (a client may not
    # learn of topics it cannot describe).
    error = group_error(ctx, AclOperation.READ, request.group_id)
    names = set(request.subscribed_topic_names or ())
    if error == ErrorCode.none and names and authorized_topics(ctx, AclOperation.DESCRIBE, names) != names:
        error = ErrorCode.topic_authorization_failed
    if error == ErrorCode.none:
        error = groups.coordinator_error(request.group_id)
    if error != ErrorCode.none:
        return build(cls, {"error_code": error})
    if groups.streams.is_streams_group(request.group_id):  # Kafka 4.4: the id is taken by a streams group
        return build(cls, {"error_code": ErrorCode.group_id_not_found,
                           "error_message": f"Group {request.group_id} is not a consumer group."})
    req = _request(request, ctx)
    if ctx.version == 0 and not req.member_id and req.member_epoch == 0:
        req = HeartbeatRequest(**{**{f: getattr(req, f) for f in HeartbeatRequest.__dataclass_fields__},
                                  "member_id": str(uuid.uuid4())})
    # Timers first, written on their own, so a refused append of this request's records reverts only them.
    groups.consumer.fire_timers(req.group_id, ctx.now_ms)
    groups.persist()
    before = groups.consumer_snapshot(req.group_id)
    result = groups.consumer.heartbeat(req, ctx.broker.image, ctx.now_ms)
    persisted = await groups.persist_replicated(before)
    if persisted != ErrorCode.none and result.error == ErrorCode.none:
        result = HeartbeatResult(persisted)
    return build(cls, _response(result))
