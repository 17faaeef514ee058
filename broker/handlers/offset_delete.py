"""OffsetDelete (key 47), v0 (KIP-496).

Deletes a group's committed offsets for some partitions; refused per partition with
GROUP_SUBSCRIBED_TO_TOPIC while a member of the group is subscribed to that topic.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from samsa.broker.context import ApiSpec, RequestContext
from samsa.broker.security.acl import AclOperation
from samsa.broker.security.acl_requests import group_error, topic_authorization
from samsa.broker.wire import build
from samsa.kproto.errors import ErrorCode
from samsa.kproto.messages import response_class

if TYPE_CHECKING:
    from kio.schema.offset_delete import v0
    OffsetDeleteRequest = v0.OffsetDeleteRequest
    OffsetDeleteResponse = v0.OffsetDeleteResponse

API = ApiSpec(key=47, min_version=0, max_version=0)



async def handle_offset_delete(request: OffsetDeleteRequest, ctx: RequestContext) -> OffsetDeleteResponse:
    groups = ctx.broker.groups
    cls: type[OffsetDeleteResponse] = response_class(47, ctx.version)
    # KafkaApis: DELETE on the group; READ on each topic (the others answer TOPIC_AUTHORIZATION_FAILED).
    error = group_error(ctx, AclOperation.DELETE, request.group_id) or groups.coordinator_error(request.group_id)
    if error != ErrorCode.none:
        return build(cls, {"error_code": error})
    readable = topic_authorization(ctx, AclOperation.READ)
    partitions: list[tuple[str, int]] = [(t.name, p.partition_index) for t in request.topics for p in t.partitions
                                         if readable(t.name)]
    before = groups.snapshot([request.group_id])  # put back if the tombstones cannot be appended
    error, per_partition = groups.delete_offsets(request.group_id, partitions, ctx.now_ms)
    if error != ErrorCode.none:
        return build(cls, {"error_code": error})
    persisted = await groups.persist_replicated(before)
    if persisted != ErrorCode.none:
        return build(cls, {"error_code": persisted})
    return build(cls, {"error_code": ErrorCode.none, "topics": [
        {"name": t.name, "partitions": [{"partition_index": p.partition_index,
                                         "error_code": per_partition.get((t.name, p.partition_index),
                                                                         ErrorCode.topic_authorization_failed)}
                                        for p in t.partitions]} for t in request.topics]})
