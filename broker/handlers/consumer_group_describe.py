"""ConsumerGroupDescribe (key 69), v0-v1: a KIP-848 consumer group, its epochs and each member's current
and target assignment (what `kafka-consumer-groups.sh --describe` reads for such a group).

v1 adds member_type (1: a member of the consumer protocol). A group id that is not a consumer group
(unknown, or a classic group) is GROUP_ID_NOT_FOUND, as Kafka answers; admin clients then fall back to
DescribeGroups for a classic group.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from samsa.broker.context import ApiSpec, RequestContext
from samsa.broker.group.records import TopicPartitions
from samsa.broker.handlers.describe_groups import GROUP_OPERATIONS, NO_AUTHORIZED_OPERATIONS
from samsa.broker.security.acl import AclOperation, ResourceType
from samsa.broker.security.acl_requests import group_error
from samsa.broker.security.authorizer import authorized_operations, enabled
from samsa.broker.wire import build
from samsa.kproto.errors import ErrorCode
from samsa.kproto.messages import response_class

if TYPE_CHECKING:
    from kio.schema.consumer_group_describe import v0, v1
    ConsumerGroupDescribeRequest = v0.ConsumerGroupDescribeRequest | v1.ConsumerGroupDescribeRequest
    ConsumerGroupDescribeResponse = v0.ConsumerGroupDescribeResponse | v1.ConsumerGroupDescribeResponse

API = ApiSpec(key=69, min_version=0, max_version=1)
CONSUMER_MEMBER_TYPE = 1
CLASSIC_MEMBER_TYPE = 0  # a classic member of a consumer group (KIP-848's online migration)


def _assignment(ctx: RequestContext, partitions: TopicPartitions) -> dict[str, Any]:
    by_id = ctx.broker.image.topics_by_id
    return {"topic_partitions": [
        {"topic_id": uuid.UUID(topic_id), "topic_name": by_id[topic_id].name if topic_id in by_id else "",
         "partitions": sorted(ps)} for topic_id, ps in sorted(partitions.items())]}


def _describe(ctx: RequestContext, group_id: str, include_operations: bool) -> dict[str, Any]:
    groups = ctx.broker.groups
    error = group_error(ctx, AclOperation.DESCRIBE, group_id)  # KafkaApis: DESCRIBE on the group
    if error != ErrorCode.none:
        return {"group_id": group_id, "error_code": error, "group_state": "", "group_epoch": -1,
                "assignment_epoch": -1, "assignor_name": "", "members": (),
                "authorized_operations": NO_AUTHORIZED_OPERATIONS}
    ops = NO_AUTHORIZED_OPERATIONS if not include_operations else (
        authorized_operations(ctx, ResourceType.GROUP, group_id) if enabled(ctx) else GROUP_OPERATIONS)
    error = groups.coordinator_error(group_id)
    if error != ErrorCode.none:
        return {"group_id": group_id, "error_code": error, "group_state": "", "group_epoch": -1,
                "assignment_epoch": -1, "assignor_name": "", "members": (), "authorized_operations": ops}
    consumer = groups.consumer
    group = consumer.groups.get(group_id)
    if group is None:
        classic = (groups.coordinator.describe_group(group_id) is not None
                   or groups.streams.is_streams_group(group_id))
        message = f"Group {group_id} is not a consumer group." if classic else f"Group {group_id} not found."
        return {"group_id": group_id, "error_code": ErrorCode.group_id_not_found, "error_message": message,
                "group_state": "", "group_epoch": -1, "assignment_epoch": -1, "assignor_name": "",
                "members": (), "authorized_operations": ops}
    members = [{
        "member_id": m.member_id, "instance_id": m.instance_id, "rack_id": m.rack_id, "member_epoch": m.member_epoch,
        "client_id": m.client_id, "client_host": m.client_host,
        "subscribed_topic_names": sorted(m.subscribed_topic_names), "subscribed_topic_regex": m.subscribed_topic_regex,
        # Kafka 4.4's asConsumerGroupDescribeMember: what the member holds, partitions it must still revoke too.
        "assignment": _assignment(ctx, _held(m.assigned_partitions, m.partitions_pending_revocation)),
        "target_assignment": _assignment(ctx, group.target_assignment.get(m.member_id, {})),
        "member_type": CLASSIC_MEMBER_TYPE if m.uses_classic_protocol else CONSUMER_MEMBER_TYPE,
    } for m in group.members.values()]
    return {"group_id": group_id, "error_code": ErrorCode.none, "group_state": group.state.value,
            "group_epoch": group.group_epoch, "assignment_epoch": group.assignment_epoch,
            "assignor_name": consumer.assignor_name(group), "members": members, "authorized_operations": ops}


def _held(assigned: TopicPartitions, pending_revocation: TopicPartitions) -> TopicPartitions:
    held = dict(assigned)
    for topic_id, partitions in pending_revocation.items():
        held[topic_id] = held.get(topic_id, frozenset()) | partitions
    return held


def handle_consumer_group_describe(request: ConsumerGroupDescribeRequest,
                                   ctx: RequestContext) -> ConsumerGroupDescribeResponse:
    cls: type[ConsumerGroupDescribeResponse] = response_class(69, ctx.version)
    include = bool(request.include_authorized_operations)
    described = [_describe(ctx, g, include) for g in request.group_ids]
    for group in described:
        if group["error_code"] != ErrorCode.none:  # KafkaApis: only a described group gets its operations
            group["authorized_operations"] = NO_AUTHORIZED_OPERATIONS
    return build(cls, {"groups": described})
