"""JoinGroup (key 11), v0-v9 — a delayed operation: the response waits for the join phase to end.

v1 adds rebalance_timeout (v0 uses the session timeout); v2 adds throttle_time; v4: a new member
without an id first gets MEMBER_ID_REQUIRED and its id (KIP-394); v5 adds group_instance_id
(static membership, KIP-345); v6 is flexible; v7 adds protocol_type/protocol_name (nullable) to the
response; v8 adds reason (KIP-800); v9 adds skip_assignment for a rejoining static leader (KIP-814).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from samsa.broker.context import ApiSpec, RequestContext
from samsa.broker.group.coordinator import JoinRequest, JoinResult
from samsa.broker.security.acl import AclOperation
from samsa.broker.security.acl_requests import group_error
from samsa.broker.wire import build, field, ms
from samsa.kproto.errors import ErrorCode
from samsa.kproto.messages import response_class

if TYPE_CHECKING:
    from kio.schema.join_group import v0, v1, v2, v3, v4, v5, v6, v7, v8, v9
    JoinGroupRequest = (v0.JoinGroupRequest | v1.JoinGroupRequest | v2.JoinGroupRequest | v3.JoinGroupRequest
                        | v4.JoinGroupRequest | v5.JoinGroupRequest | v6.JoinGroupRequest | v7.JoinGroupRequest
                        | v8.JoinGroupRequest | v9.JoinGroupRequest)
    JoinGroupResponse = (v0.JoinGroupResponse | v1.JoinGroupResponse | v2.JoinGroupResponse | v3.JoinGroupResponse
                         | v4.JoinGroupResponse | v5.JoinGroupResponse | v6.JoinGroupResponse | v7.JoinGroupResponse
                         | v8.JoinGroupResponse | v9.JoinGroupResponse)

API = ApiSpec(key=11, min_version=0, max_version=9)



def _response(ctx: RequestContext, result: JoinResult) -> JoinGroupResponse:
    """The one place a JoinResult becomes the kio response of the request's version."""
    version = ctx.version
    protocol_name = result.protocol_name
    if protocol_name is None and version < 7:
        protocol_name = ""
    cls: type[JoinGroupResponse] = response_class(11, version)
    return build(cls, {
        "error_code": result.error,
        "generation_id": result.generation_id,
        "protocol_type": result.protocol_type,
        "protocol_name": protocol_name,
        "leader": result.leader_id,
        "skip_assignment": result.skip_assignment,
        "member_id": result.member_id,
        "members": [{"member_id": m.member_id, "group_instance_id": m.group_instance_id, "metadata": m.metadata}
                    for m in result.members],
    })


async def handle_join_group(request: JoinGroupRequest, ctx: RequestContext) -> JoinGroupResponse:
    groups = ctx.broker.groups
    group_id = request.group_id
    member_id = request.member_id or ""
    error = group_error(ctx, AclOperation.READ, group_id) or groups.coordinator_error(group_id)
    if error != ErrorCode.none:
        # Kafka's JoinGroupRequest.getErrorResponse answers an authorization failure with no member id.
        return _response(ctx, JoinResult(error, "" if error == ErrorCode.group_authorization_failed else member_id))
    session_timeout_ms = ms(request.session_timeout)
    rebalance_timeout_ms = ms(field(request, "rebalance_timeout"), session_timeout_ms)
    join = JoinRequest(
        group_id=group_id,
        member_id=member_id,
        group_instance_id=field(request, "group_instance_id"),
        client_id=ctx.header.client_id or "",
        client_host="/" + ctx.client_host,
        session_timeout_ms=session_timeout_ms,
        rebalance_timeout_ms=rebalance_timeout_ms,
        protocol_type=request.protocol_type,
        protocols=tuple((p.name, bytes(p.metadata)) for p in request.protocols),
        require_known_member_id=ctx.version >= 4,
        supports_skip_assignment=ctx.version >= 9,
        reason=field(request, "reason"),
    )
    if groups.streams.is_streams_group(group_id):
        # Kafka 4.4: a classic member cannot join a streams group.
        return _response(ctx, JoinResult(ErrorCode.inconsistent_group_protocol, member_id))
    if groups.classic_join_to_consumer_group(group_id, ctx.now_ms):
        # KIP-848's online migration: a classic member of a consumer group, answered at once.
        consumer_before = groups.consumer_snapshot(group_id)
        result = groups.consumer.classic_join(join, ctx.broker.image, ctx.now_ms)
        persisted = await groups.persist_replicated(consumer_before)
        if persisted != ErrorCode.none and result.error == ErrorCode.none:
            result = JoinResult(persisted, member_id)
        return _response(ctx, result)
    # Only a static member replacing another in a Stable group writes a record here (Kafka's
    # classicGroupJoinExistingStaticMember). Its write is the request's: not written, the replacement is
    # reverted (the old member id is the instance's again) and the client is answered the error with no
    # member id, as Kafka does; so the timers' own writes go first, outside the snapshot.
    # (The snapshot copies every member, so it is taken only for that case, not for each join of a rebalance.)
    groups.fire_timers(group_id, ctx.now_ms)
    group = groups.coordinator.groups.get(group_id)
    replacing = group is not None and group.may_replace_static_member(join.member_id, join.group_instance_id)
    before = groups.snapshot([group_id], membership=True) if replacing else None
    pending = groups.coordinator.join_group(join, ctx.now_ms)
    persisted = (await groups.persist_replicated_by_partition(before)).get(groups.partition_for(group_id),
                                                                          ErrorCode.none)
    if replacing and persisted != ErrorCode.none:
        group = groups.coordinator.groups.get(group_id)
        return _response(ctx, JoinResult(persisted, "") if group is None else group.join_error(persisted))
    result = await groups.wait(pending, lambda: JoinResult(ErrorCode.rebalance_in_progress, member_id))
    return _response(ctx, result)
