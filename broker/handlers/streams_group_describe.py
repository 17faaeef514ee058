"""StreamsGroupDescribe (key 89), v0: a KIP-1071 streams group, its epochs, its topology (internal
topics with the partitions the broker decided) and each member's tasks and target tasks (what
`kafka-streams-groups.sh --describe` reads). A group id that is not a streams group is
GROUP_ID_NOT_FOUND, as Kafka answers.

v1 (Kafka 4.4) is not offered: kio 0.6.5 has no schema for it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from samsa.broker.context import ApiSpec, RequestContext
from samsa.broker.group.streams_group import StreamsGroup, Tasks, TasksTuple, TopicInfo
from samsa.broker.group.streams_topology import ConfiguredTopology
from samsa.broker.handlers.describe_groups import GROUP_OPERATIONS, NO_AUTHORIZED_OPERATIONS
from samsa.broker.security.acl import AclOperation, ResourceType
from samsa.broker.security.acl_requests import group_error
from samsa.broker.security.authorizer import authorized_operations, enabled
from samsa.broker.wire import build
from samsa.kproto.errors import ErrorCode
from samsa.kproto.messages import response_class

if TYPE_CHECKING:
    from kio.schema.streams_group_describe.v0.request import StreamsGroupDescribeRequest
    from kio.schema.streams_group_describe.v0.response import StreamsGroupDescribeResponse

API = ApiSpec(key=89, min_version=0, max_version=0)


def _task_ids(tasks: Tasks) -> list[dict[str, Any]]:
    return [{"subtopology_id": s, "partitions": sorted(ps)} for s, ps in sorted(tasks.items())]


def _assignment(tasks: TasksTuple) -> dict[str, Any]:
    return {"active_tasks": _task_ids(tasks.active), "standby_tasks": _task_ids(tasks.standby),
            "warmup_tasks": _task_ids(tasks.warmup)}


def _topic(info: TopicInfo, partitions: int) -> dict[str, Any]:
    return {"name": info.name, "partitions": partitions, "replication_factor": info.replication_factor,
            "topic_configs": [{"key": k, "value": v} for k, v in info.configs]}


def _topology(group: StreamsGroup) -> dict[str, Any] | None:
    if group.topology is None:
        return None
    configured = group.configured if isinstance(group.configured, ConfiguredTopology) else None
    # As Kafka: the partitions the broker decided once the topology is ready, the declared ones (0) before.
    decided = configured.internal_partitions if configured is not None and configured.ready else {}
    return {"epoch": group.topology.epoch, "subtopologies": [{
        "subtopology_id": s.subtopology_id, "source_topics": list(s.source_topics),
        "repartition_sink_topics": list(s.repartition_sink_topics),
        "state_changelog_topics": [_topic(t, decided.get(t.name, t.partitions)) for t in s.state_changelog_topics],
        "repartition_source_topics": [_topic(t, decided.get(t.name, t.partitions))
                                      for t in s.repartition_source_topics],
    } for s in group.topology.subtopologies]}


def _error(group_id: str, error: ErrorCode, ops: int, message: str | None = None) -> dict[str, Any]:
    return {"group_id": group_id, "error_code": error, "error_message": message, "group_state": "",
            "group_epoch": 0, "assignment_epoch": 0, "topology": None, "members": (),
            "authorized_operations": ops}


def _describe(ctx: RequestContext, group_id: str, include_operations: bool) -> dict[str, Any]:
    groups = ctx.broker.groups
    error = group_error(ctx, AclOperation.DESCRIBE, group_id)  # KafkaApis: DESCRIBE on the group
    if error != ErrorCode.none:
        return _error(group_id, error, NO_AUTHORIZED_OPERATIONS)
    ops = NO_AUTHORIZED_OPERATIONS if not include_operations else (
        authorized_operations(ctx, ResourceType.GROUP, group_id) if enabled(ctx) else GROUP_OPERATIONS)
    error = groups.coordinator_error(group_id)
    if error != ErrorCode.none:
        return _error(group_id, error, ops)
    group = groups.streams.groups.get(group_id)
    if group is None:
        other = groups.consumer.is_consumer_group(group_id) or groups.coordinator.describe_group(group_id) is not None
        message = f"Group {group_id} is not a streams group." if other else f"Group {group_id} not found."
        return _error(group_id, ErrorCode.group_id_not_found, ops, message)
    members = [{
        "member_id": m.member_id, "member_epoch": m.member_epoch, "instance_id": m.instance_id, "rack_id": m.rack_id,
        "client_id": m.client_id, "client_host": m.client_host, "topology_epoch": m.topology_epoch,
        "process_id": m.process_id,
        "user_endpoint": None if m.user_endpoint is None else {"host": m.user_endpoint[0],
                                                              "port": m.user_endpoint[1]},
        "client_tags": [{"key": k, "value": v} for k, v in m.client_tags], "task_offsets": [],
        "task_end_offsets": [],
        # As Kafka: what the member holds, tasks it must still revoke included.
        "assignment": _assignment(m.assigned.merge(m.pending_revocation)),
        "target_assignment": _assignment(group.target_assignment.get(m.member_id, TasksTuple())),
        "is_classic": False,
    } for m in group.members.values()]
    return {"group_id": group_id, "error_code": ErrorCode.none, "error_message": None,
            "group_state": group.state.value, "group_epoch": group.group_epoch,
            "assignment_epoch": group.assignment_epoch, "topology": _topology(group), "members": members,
            "authorized_operations": ops}


def handle_streams_group_describe(request: StreamsGroupDescribeRequest,
                                  ctx: RequestContext) -> StreamsGroupDescribeResponse:
    cls: type[StreamsGroupDescribeResponse] = response_class(89, ctx.version)
    include = bool(request.include_authorized_operations)
    if ctx.broker.image.feature_level("streams.version") < 1:  # Kafka 4.4: streams groups off
        return build(cls, {"groups": [_error(g, ErrorCode.unsupported_version, NO_AUTHORIZED_OPERATIONS)
                                      for g in request.group_ids]})
    described = [_describe(ctx, g, include) for g in request.group_ids]
    for group in described:
        if group["error_code"] != ErrorCode.none:
            group["authorized_operations"] = NO_AUTHORIZED_OPERATIONS
    return build(cls, {"groups": described})
