"""LeaveGroup (key 13), v0-v5.

v1 adds throttle_time; v3 replaces member_id with a batch of members (member_id,
group_instance_id) and answers per member (KIP-345); v4 is flexible; v5 adds a reason per member.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from samsa.broker.context import ApiSpec, RequestContext
from samsa.broker.security.acl import AclOperation
from samsa.broker.security.acl_requests import group_error
from samsa.broker.wire import build, field
from samsa.kproto.errors import ErrorCode
from samsa.kproto.messages import response_class

if TYPE_CHECKING:
    from kio.schema.leave_group import v0, v1, v2, v3, v4, v5
    LeaveGroupRequest = (v0.LeaveGroupRequest | v1.LeaveGroupRequest | v2.LeaveGroupRequest | v3.LeaveGroupRequest
                         | v4.LeaveGroupRequest | v5.LeaveGroupRequest)
    LeaveGroupResponse = (v0.LeaveGroupResponse | v1.LeaveGroupResponse | v2.LeaveGroupResponse | v3.LeaveGroupResponse
                          | v4.LeaveGroupResponse | v5.LeaveGroupResponse)

API = ApiSpec(key=13, min_version=0, max_version=5)



async def handle_leave_group(request: LeaveGroupRequest, ctx: RequestContext) -> LeaveGroupResponse:
    groups = ctx.broker.groups
    cls: type[LeaveGroupResponse] = response_class(13, ctx.version)
    members: list[tuple[str, str | None]]
    if ctx.version >= 3:  # v3+ carries a batch of members, v0-v2 a single member_id
        members = [(m.member_id or "", field(m, "group_instance_id")) for m in field(request, "members")]
    else:
        members = [(field(request, "member_id"), None)]
    error = group_error(ctx, AclOperation.READ, request.group_id) or groups.coordinator_error(request.group_id)
    results: list[tuple[str, str | None, ErrorCode]] = []
    if error == ErrorCode.none and groups.classic_request_to_consumer_group(request.group_id, ctx.now_ms):
        # Classic members of a KIP-848 consumer group (online migration).
        consumer_before = groups.consumer_snapshot(request.group_id)
        results = groups.consumer.classic_leave(request.group_id, members, ctx.broker.image)
        persisted = await groups.persist_replicated(consumer_before)
        if persisted != ErrorCode.none:
            error, results = persisted, []
    elif error == ErrorCode.none:
        # The group's last members leaving write its Empty record. That write is the request's: not
        # written, the members are put back and the client is answered the error alone (Kafka 4's
        # CoordinatorRuntime fails the whole write and answers the normalized error, no member results);
        # they stay until they leave again or their sessions expire. The timers' writes go first,
        # outside the snapshot, and are retried on their own.
        # (Only a request naming as many members as the group has can empty it; the snapshot copies every
        # member, so the others take none.)
        groups.fire_timers(request.group_id, ctx.now_ms)
        group = groups.coordinator.groups.get(request.group_id)
        emptying = group is not None and len(members) >= len(group.members)
        before = groups.snapshot([request.group_id], membership=True) if emptying else None
        error, results = groups.coordinator.leave_group(request.group_id, members, ctx.now_ms)
        persisted = await groups.persist_replicated(before)
        if persisted != ErrorCode.none:
            error, results = persisted, []
    if ctx.version < 3:
        if error == ErrorCode.none and results:
            error = results[0][2]
        return build(cls, {"error_code": error})
    return build(cls, {"error_code": error, "members": [
        {"member_id": m, "group_instance_id": i, "error_code": e} for m, i, e in results]})
