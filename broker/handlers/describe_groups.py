"""DescribeGroups (key 15), v0-v6.

v1 adds throttle_time; v3 adds include_authorized_operations; v4 adds group_instance_id per member;
v5 is flexible; v6 adds error_message and answers an unknown group with GROUP_ID_NOT_FOUND (older
versions: state "Dead", no error).  Member metadata and assignment are only filled in while the
group is Stable, as in Kafka. A group named twice in one request answers INVALID_REQUEST the second
time (Kafka repeats the whole description).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from samsa.broker.context import ApiSpec, RequestContext
from samsa.broker.security.acl import SUPPORTED_OPERATIONS, AclOperation, ResourceType
from samsa.broker.security.acl_requests import group_error
from samsa.broker.security.authorizer import authorized_operations, enabled
from samsa.broker.wire import build, field
from samsa.kproto.errors import ErrorCode
from samsa.kproto.messages import response_class

if TYPE_CHECKING:
    from kio.schema.describe_groups import v0, v1, v2, v3, v4, v5, v6
    DescribeGroupsRequest = (v0.DescribeGroupsRequest | v1.DescribeGroupsRequest | v2.DescribeGroupsRequest
                             | v3.DescribeGroupsRequest | v4.DescribeGroupsRequest | v5.DescribeGroupsRequest
                             | v6.DescribeGroupsRequest)
    DescribeGroupsResponse = (v0.DescribeGroupsResponse | v1.DescribeGroupsResponse | v2.DescribeGroupsResponse
                              | v3.DescribeGroupsResponse | v4.DescribeGroupsResponse | v5.DescribeGroupsResponse
                              | v6.DescribeGroupsResponse)

API = ApiSpec(key=15, min_version=0, max_version=6)


NO_AUTHORIZED_OPERATIONS = -(2**31)
# Without an authorizer, every operation Kafka supports on a group (AclEntry.supportedOperations(GROUP)):
# READ 3, DELETE 6, DESCRIBE 8, and since the GROUP config resource DESCRIBE_CONFIGS 10 and ALTER_CONFIGS 11
# -- 3400, as Kafka 4.1.2 reports.
GROUP_OPERATIONS = sum(1 << op for op in SUPPORTED_OPERATIONS[ResourceType.GROUP])


def _describe(ctx: RequestContext, group_id: str, include_ops: bool) -> dict[str, Any]:
    groups = ctx.broker.groups
    denied = group_error(ctx, AclOperation.DESCRIBE, group_id)  # KafkaApis: DESCRIBE on the group
    if denied:
        return {"group_id": group_id, "error_code": denied, "group_state": "",
                "authorized_operations": NO_AUTHORIZED_OPERATIONS}
    ops = NO_AUTHORIZED_OPERATIONS if not include_ops else (
        authorized_operations(ctx, ResourceType.GROUP, group_id) if enabled(ctx) else GROUP_OPERATIONS)
    error = groups.coordinator_error(group_id)
    if error != ErrorCode.none:
        return {"group_id": group_id, "error_code": error, "group_state": "", "authorized_operations": ops}
    if groups.streams.is_streams_group(group_id):
        # Kafka 4.4: a streams group is Dead to DescribeGroups (StreamsGroupDescribe describes it).
        error = ErrorCode.group_id_not_found if ctx.version >= 6 else ErrorCode.none
        return {"group_id": group_id, "error_code": error, "group_state": "Dead", "protocol_type": "",
                "protocol_data": "", "authorized_operations": ops,
                "error_message": f"Group {group_id} is not a classic group." if ctx.version >= 6 else None}
    if groups.consumer.is_consumer_group(group_id):
        # Kafka 4: a KIP-848 group is Dead to DescribeGroups, with an error from v6 on (ConsumerGroupDescribe
        # describes it).
        error = ErrorCode.group_id_not_found if ctx.version >= 6 else ErrorCode.none
        return {"group_id": group_id, "error_code": error, "group_state": "Dead", "protocol_type": "",
                "protocol_data": "", "authorized_operations": ops,
                "error_message": f"Group {group_id} is not a classic group." if ctx.version >= 6 else None}
    d = groups.coordinator.describe_group(group_id)
    if d is None:
        missing = ErrorCode.group_id_not_found if ctx.version >= 6 else ErrorCode.none
        return {"group_id": group_id, "error_code": missing,
                "error_message": f"Group {group_id} not found." if ctx.version >= 6 else None,
                "group_state": "Dead", "protocol_type": "", "protocol_data": "", "authorized_operations": ops}
    return {
        "group_id": group_id, "error_code": ErrorCode.none, "group_state": d.state.value,
        "protocol_type": d.protocol_type, "protocol_data": d.protocol_name, "authorized_operations": ops,
        "members": [{"member_id": m.member_id, "group_instance_id": m.group_instance_id, "client_id": m.client_id,
                     "client_host": m.client_host, "member_metadata": m.metadata,
                     "member_assignment": m.assignment} for m in d.members],
    }


def handle_describe_groups(request: DescribeGroupsRequest, ctx: RequestContext) -> DescribeGroupsResponse:
    include_ops = bool(field(request, "include_authorized_operations", False))
    described: list[dict[str, Any]] = []
    seen: set[str] = set()
    for group_id in request.groups:
        if group_id in seen:
            # Stricter than Kafka, which answers every entry: a group named again would repeat every
            # member's metadata and assignment for a few bytes of request.
            described.append({"group_id": group_id, "error_code": ErrorCode.invalid_request,
                              "error_message": "The group is named more than once in the request." if
                              ctx.version >= 6 else None, "group_state": "",
                              "authorized_operations": NO_AUTHORIZED_OPERATIONS})
            continue
        seen.add(group_id)
        group = _describe(ctx, group_id, include_ops)
        if group["error_code"] != ErrorCode.none:  # KafkaApis: only a described group gets its operations
            group["authorized_operations"] = NO_AUTHORIZED_OPERATIONS
        described.append(group)
    cls: type[DescribeGroupsResponse] = response_class(15, ctx.version)
    return build(cls, {"groups": described})
