"""DeleteGroups (key 42), v0-v3.

v1 changes nothing on the wire; v2 is flexible; v3 adds an error_message to each group's result.  Only an
Empty group can be deleted (NON_EMPTY_GROUP otherwise); deleting writes tombstones for its offsets and
metadata and never touches topic data.  A group named twice is answered once (Kafka's handler takes the
distinct names).

Kafka 4.4 leaves error_message null for every outcome (deleted, GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP,
GROUP_AUTHORIZATION_FAILED, NOT_COORDINATOR, ...): only its streams-group topology description plugin's
failures (GROUP_DELETION_FAILED, 134, which older versions read as UNKNOWN_SERVER_ERROR) carry one, and
Samsa has no such plugin.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from samsa.broker.context import ApiSpec, RequestContext
from samsa.broker.security.acl import AclOperation
from samsa.broker.security.acl_requests import group_error
from samsa.broker.wire import build
from samsa.kproto.errors import ErrorCode
from samsa.kproto.messages import response_class

if TYPE_CHECKING:
    from kio.schema.delete_groups import v0, v1, v2

    from samsa.kproto.schema.delete_groups import v3
    DeleteGroupsRequest = (v0.DeleteGroupsRequest | v1.DeleteGroupsRequest | v2.DeleteGroupsRequest
                           | v3.DeleteGroupsRequest)
    DeleteGroupsResponse = (v0.DeleteGroupsResponse | v1.DeleteGroupsResponse | v2.DeleteGroupsResponse
                            | v3.DeleteGroupsResponse)

API = ApiSpec(key=42, min_version=0, max_version=3)


async def handle_delete_groups(request: DeleteGroupsRequest, ctx: RequestContext) -> DeleteGroupsResponse:
    groups = ctx.broker.groups
    names = list(dict.fromkeys(request.groups_names))
    results: dict[str, ErrorCode] = {}
    deletable: list[str] = []
    for group_id in names:
        error = group_error(ctx, AclOperation.DELETE, group_id) or groups.coordinator_error(group_id)
        if error != ErrorCode.none:
            results[group_id] = error
        else:
            deletable.append(group_id)
    # A group whose tombstones cannot be appended is put back and answered the error; the others of the
    # request are deleted (Kafka 4 writes each __consumer_offsets partition's deletions separately).
    before = groups.snapshot(deletable)
    results.update(groups.delete_groups(deletable, ctx.now_ms))
    persisted = await groups.persist_replicated_by_partition(before)
    for name in deletable:
        error = persisted.get(groups.partition_for(name), ErrorCode.none)
        if error != ErrorCode.none and results[name] == ErrorCode.none:
            results[name] = error
    cls: type[DeleteGroupsResponse] = response_class(42, ctx.version)
    return build(cls, {"results": [
        {"group_id": g, "error_code": results[g]} for g in names]})
