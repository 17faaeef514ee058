"""Heartbeat (key 12), v0-v4.

v1 adds throttle_time; v3 adds group_instance_id; v4 is flexible.  During a rebalance the answer
is REBALANCE_IN_PROGRESS, which tells the member to rejoin.
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
    from kio.schema.heartbeat import v0, v1, v2, v3, v4
    HeartbeatRequest = (v0.HeartbeatRequest | v1.HeartbeatRequest | v2.HeartbeatRequest | v3.HeartbeatRequest
                        | v4.HeartbeatRequest)
    HeartbeatResponse = (v0.HeartbeatResponse | v1.HeartbeatResponse | v2.HeartbeatResponse | v3.HeartbeatResponse
                         | v4.HeartbeatResponse)

API = ApiSpec(key=12, min_version=0, max_version=4)



def handle_heartbeat(request: HeartbeatRequest, ctx: RequestContext) -> HeartbeatResponse:
    groups = ctx.broker.groups
    error = group_error(ctx, AclOperation.READ, request.group_id) or groups.coordinator_error(request.group_id)
    if error == ErrorCode.none:
        group_instance_id: str | None = field(request, "group_instance_id")  # v3+
        if groups.classic_request_to_consumer_group(request.group_id, ctx.now_ms):  # KIP-848 online migration
            error = groups.consumer.classic_heartbeat(request.group_id, request.generation_id, request.member_id,
                                                      group_instance_id, ctx.now_ms)
        else:
            error = groups.coordinator.heartbeat(request.group_id, request.generation_id, request.member_id,
                                                 group_instance_id, ctx.now_ms)
        groups.persist()
    cls: type[HeartbeatResponse] = response_class(12, ctx.version)
    return build(cls, {"error_code": error})
