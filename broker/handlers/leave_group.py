"""LeaveGroup (key 13), v0-v5.

v1 adds throttle_time; v3 replaces member_id with a batch of members (member_id,
group_instance_id) and answers per member (KIP-345); v4 is flexible; v5 adds a reason per member.
"""

from __future__ import annotations

from typing import Any

from samsa.broker.context import ApiSpec, RequestContext
from samsa.broker.wire import build, field
from samsa.kproto.errors import ErrorCode
from samsa.kproto.messages import response_class

API = ApiSpec(key=13, min_version=0, max_version=5)


async def handle_leave_group(request: Any, ctx: RequestContext) -> Any:
    groups = ctx.broker.groups
    cls = response_class(13, ctx.version)
    if ctx.version >= 3:
        members = [(m.member_id or "", field(m, "group_instance_id")) for m in request.members]
    else:
        members = [(request.member_id, None)]
    error = groups.coordinator_error(request.group_id)
    results: list[tuple[str, str | None, ErrorCode]] = []
    if error == ErrorCode.none:
        error, results = groups.coordinator.leave_group(request.group_id, members, ctx.now_ms)
        persisted = await groups.persist_replicated()
        if persisted != ErrorCode.none:
            error = persisted
    if ctx.version < 3:
        if error == ErrorCode.none and results:
            error = results[0][2]
        return build(cls, {"error_code": error})
    return build(cls, {"error_code": error, "members": [
        {"member_id": m, "group_instance_id": i, "error_code": e} for m, i, e in results]})
