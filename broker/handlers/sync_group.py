"""SyncGroup (key 14), v0-v5 — a delayed operation: followers wait for the leader's assignment.

v1 adds throttle_time; v3 adds group_instance_id; v4 is flexible; v5 adds protocol_type and
protocol_name to request and response (checked against the group's, KIP-559).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from samsa.broker.context import ApiSpec, RequestContext
from samsa.broker.group.coordinator import SyncResult
from samsa.broker.group.service import now_ms
from samsa.broker.security.acl import AclOperation
from samsa.broker.security.acl_requests import group_error
from samsa.broker.wire import build, field
from samsa.kproto.errors import ErrorCode
from samsa.kproto.messages import response_class

if TYPE_CHECKING:
    from kio.schema.sync_group import v0, v1, v2, v3, v4, v5
    SyncGroupRequest = (v0.SyncGroupRequest | v1.SyncGroupRequest | v2.SyncGroupRequest | v3.SyncGroupRequest
                        | v4.SyncGroupRequest | v5.SyncGroupRequest)
    SyncGroupResponse = (v0.SyncGroupResponse | v1.SyncGroupResponse | v2.SyncGroupResponse | v3.SyncGroupResponse
                         | v4.SyncGroupResponse | v5.SyncGroupResponse)

API = ApiSpec(key=14, min_version=0, max_version=5)



def _response(ctx: RequestContext, result: SyncResult) -> SyncGroupResponse:
    """The one place a SyncResult becomes the kio response of the request's version."""
    cls: type[SyncGroupResponse] = response_class(14, ctx.version)
    return build(cls, {
        "error_code": result.error,
        "protocol_type": result.protocol_type,
        "protocol_name": result.protocol_name,
        "assignment": result.assignment,
    })


async def handle_sync_group(request: SyncGroupRequest, ctx: RequestContext) -> SyncGroupResponse:
    groups = ctx.broker.groups
    error = group_error(ctx, AclOperation.READ, request.group_id) or groups.coordinator_error(request.group_id)
    if error != ErrorCode.none:
        return _response(ctx, SyncResult(error))
    if groups.classic_request_to_consumer_group(request.group_id, ctx.now_ms):
        return _response(ctx, groups.consumer.classic_sync(
            request.group_id, request.generation_id, request.member_id, field(request, "group_instance_id"),
            field(request, "protocol_type"), field(request, "protocol_name"), ctx.broker.image, ctx.now_ms))
    assignments = {a.member_id: bytes(a.assignment) for a in request.assignments}
    pending = groups.coordinator.sync_group(
        request.group_id, request.generation_id, request.member_id, field(request, "group_instance_id"),
        field(request, "protocol_type"), field(request, "protocol_name"), assignments, ctx.now_ms)
    # The leader's assignment is handed out once it is on every in-sync replica (acks=-1, as in Kafka);
    # not written, every member gets the error and the group rebalances (on_assignment_stored).
    try:
        persisted = await groups.persist_replicated()
    except BaseException:
        # Cancelled (the connection went) before the write's outcome is known: rebalance rather than leave
        # the group waiting on an assignment that may not be in the log.
        groups.coordinator.on_assignment_stored(request.group_id, request.member_id, request.generation_id,
                                                ErrorCode.coordinator_not_available, now_ms())
        raise
    groups.coordinator.on_assignment_stored(request.group_id, request.member_id, request.generation_id, persisted,
                                            now_ms())
    if persisted != ErrorCode.none and not pending.done:
        pending.complete(SyncResult(persisted))
    result = await groups.wait(pending, lambda: SyncResult(ErrorCode.rebalance_in_progress))
    return _response(ctx, result)
