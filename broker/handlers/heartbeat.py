"""Heartbeat (key 12), v0-v4.

v1 adds throttle_time; v3 adds group_instance_id; v4 is flexible.  During a rebalance the answer
is REBALANCE_IN_PROGRESS, which tells the member to rejoin.
"""

from __future__ import annotations

from typing import Any

from samsa.broker.context import ApiSpec, RequestContext
from samsa.broker.wire import build, field
from samsa.kproto.errors import ErrorCode
from samsa.kproto.messages import response_class

API = ApiSpec(key=12, min_version=0, max_version=4)


def handle_heartbeat(request: Any, ctx: RequestContext) -> Any:
    groups = ctx.broker.groups
    error = groups.coordinator_error(request.group_id)
    if error == ErrorCode.none:
        error = groups.coordinator.heartbeat(request.group_id, request.generation_id, request.member_id,
                                             field(request, "group_instance_id"), ctx.now_ms)
        groups.persist()
    return build(response_class(12, ctx.version), {"error_code": error})
