"""StreamsGroupHeartbeat (key 88), v0: the KIP-1071 streams rebalance protocol (Kafka Streams with
group.protocol=streams).

A member joins with epoch 0 and the application's topology, heartbeats with the epoch it was given and
the tasks it owns, leaves with -1 (a static member that will come back: -2). The answer carries the
member's epoch, the heartbeat interval, the group's statuses (missing source or internal topics, an
assignment delayed, a requested shutdown...) and, when they changed, its active, standby and warm-up
tasks. Internal topics the topology needs (repartition and changelog topics) that do not exist are
created by the broker, as Kafka 4.4's KafkaApis does with the coordinator's creatable topics, when the
principal may create them. The coordinator logic is in samsa.broker.group.streams_coordinator.

v1 (Kafka 4.4) is not offered: kio 0.6.5 has no schema for it.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from samsa.broker.context import ApiSpec, RequestContext
from samsa.broker.controller_types import TopicSpec
from samsa.broker.group.streams_coordinator import StreamsHeartbeatRequest, StreamsHeartbeatResult
from samsa.broker.group.streams_group import Subtopology, Tasks, TasksTuple, TopicInfo, Topology, tasks_of
from samsa.broker.security.acl import AclOperation
from samsa.broker.security.acl_requests import create_topics_authorization, group_error
from samsa.broker.wire import build
from samsa.kproto.errors import ErrorCode
from samsa.kproto.messages import response_class

if TYPE_CHECKING:
    from kio.schema.streams_group_heartbeat.v0.request import StreamsGroupHeartbeatRequest
    from kio.schema.streams_group_heartbeat.v0.request import Subtopology as WireSubtopology
    from kio.schema.streams_group_heartbeat.v0.request import TaskIds as WireTaskIds
    from kio.schema.streams_group_heartbeat.v0.request import TopicInfo as WireTopicInfo
    from kio.schema.streams_group_heartbeat.v0.request import Topology as WireTopology
    from kio.schema.streams_group_heartbeat.v0.response import StreamsGroupHeartbeatResponse

API = ApiSpec(key=88, min_version=0, max_version=0)
logger = logging.getLogger(__name__)


def _topic_info(t: WireTopicInfo) -> TopicInfo:
    return TopicInfo(t.name, int(t.partitions), int(t.replication_factor),
                     tuple((kv.key, kv.value) for kv in t.topic_configs))


def _subtopology(s: WireSubtopology) -> Subtopology:
    sources = tuple(str(t) for t in s.source_topics)
    repartition = tuple(_topic_info(t) for t in s.repartition_source_topics)
    names = [*sources, *(t.name for t in repartition)]
    groups = []
    for g in s.copartition_groups:  # indexes into the subtopology's source and repartition source topics
        members: set[str] = {str(sources[i]) for i in g.source_topics if 0 <= i < len(sources)}
        members |= {repartition[i].name for i in g.repartition_source_topics if 0 <= i < len(repartition)}
        if members and all(m in names for m in members):
            groups.append(frozenset(members))
    return Subtopology(s.subtopology_id, sources, tuple(s.repartition_sink_topics),
                       tuple(_topic_info(t) for t in s.state_changelog_topics), repartition, tuple(groups))


def _topology(t: WireTopology | None) -> Topology | None:
    return None if t is None else Topology(int(t.epoch), tuple(_subtopology(s) for s in t.subtopologies))


def _invalid_changelog(t: WireTopology | None) -> str | None:
    for s in () if t is None else t.subtopologies:
        for c in s.state_changelog_topics:
            if c.partitions != 0:
                return (f"Changelog topic {c.name} must have an undefined partition count, but it is set to "
                        f"{c.partitions}.")
    return None


def _tasks(ids: tuple[WireTaskIds, ...] | None) -> Tasks:
    out: dict[str, set[int]] = {}
    for t in ids or ():
        out.setdefault(t.subtopology_id, set()).update(int(p) for p in t.partitions)
    return tasks_of(out)


def _request(request: StreamsGroupHeartbeatRequest, ctx: RequestContext) -> StreamsHeartbeatRequest:
    owned = None
    if request.active_tasks is not None and request.standby_tasks is not None and request.warmup_tasks is not None:
        owned = TasksTuple(_tasks(request.active_tasks), _tasks(request.standby_tasks), _tasks(request.warmup_tasks))
    endpoint = None if request.user_endpoint is None else (request.user_endpoint.host, int(request.user_endpoint.port))
    tags = None if request.client_tags is None else tuple((kv.key, kv.value) for kv in request.client_tags)
    return StreamsHeartbeatRequest(
        group_id=request.group_id, member_id=request.member_id, member_epoch=int(request.member_epoch),
        endpoint_information_epoch=int(request.endpoint_information_epoch), instance_id=request.instance_id,
        rack_id=request.rack_id, rebalance_timeout_ms=int(request.rebalance_timeout.total_seconds() * 1000),
        topology=_topology(request.topology), owned=owned, process_id=request.process_id, user_endpoint=endpoint,
        client_tags=tags, shutdown_application=bool(request.shutdown_application),
        client_id=ctx.header.client_id or "", client_host=f"/{ctx.client_host}",
        source_topic_regex_used=any(s.source_topic_regex for s in (request.topology.subtopologies
                                                                    if request.topology is not None else ())),
        invalid_changelog=_invalid_changelog(request.topology))


def _task_ids(tasks: Tasks) -> list[dict[str, Any]]:
    return [{"subtopology_id": s, "partitions": sorted(ps)} for s, ps in sorted(tasks.items())]


def _response(result: StreamsHeartbeatResult) -> dict[str, Any]:
    out: dict[str, Any] = {
        "error_code": result.error, "error_message": result.error_message, "member_id": result.member_id,
        "member_epoch": result.member_epoch, "heartbeat_interval": result.heartbeat_interval_ms,
        "acceptable_recovery_lag": result.acceptable_recovery_lag,
        "task_offset_interval": result.task_offset_interval_ms,
        "status": [{"status_code": code, "status_detail": detail} for code, detail in result.statuses],
        "active_tasks": None, "standby_tasks": None, "warmup_tasks": None,
        "endpoint_information_epoch": result.endpoint_information_epoch, "partitions_by_user_endpoint": None}
    if result.tasks is not None:
        out["active_tasks"] = _task_ids(result.tasks.active)
        out["standby_tasks"] = _task_ids(result.tasks.standby)
        out["warmup_tasks"] = _task_ids(result.tasks.warmup)
    if result.endpoints is not None:
        out["partitions_by_user_endpoint"] = [{
            "user_endpoint": {"host": host, "port": port},
            "active_partitions": [{"topic": t, "partitions": list(ps)} for t, ps in active],
            "standby_partitions": [{"topic": t, "partitions": list(ps)} for t, ps in standby],
        } for (host, port), active, standby in result.endpoints]
    return out


def _create_internal_topics(ctx: RequestContext, result: StreamsHeartbeatResult) -> None:
    """Kafka 4.4's KafkaApis: the coordinator's creatable topics are created on the principal's behalf when
    it may create them (CREATE on the cluster or the topic); the members see MISSING_INTERNAL_TOPICS until
    they exist."""
    may_create = create_topics_authorization(ctx)
    specs = [TopicSpec(t.name, t.partitions, t.replication_factor, configs=dict(t.configs))
             for t in result.to_create if may_create(t.name)]
    if specs:
        logger.info("streams group: creating internal topics %s", ", ".join(s.name for s in specs))
        ctx.broker.create_topics_soon(specs)


async def handle_streams_group_heartbeat(request: StreamsGroupHeartbeatRequest,
                                         ctx: RequestContext) -> StreamsGroupHeartbeatResponse:
    cls: type[StreamsGroupHeartbeatResponse] = response_class(88, ctx.version)
    groups = ctx.broker.groups
    if ctx.broker.image.feature_level("streams.version") < 1:  # Kafka 4.4: streams groups off, API still listed
        return build(cls, _response(StreamsHeartbeatResult(ErrorCode.unsupported_version)))
    error = group_error(ctx, AclOperation.READ, request.group_id)  # KafkaApis: READ on the group
    if error == ErrorCode.none:
        error = groups.coordinator_error(request.group_id)
    if error != ErrorCode.none:
        return build(cls, _response(StreamsHeartbeatResult(error)))
    # Timers first, written on their own, so a refused append of this request's record reverts only it.
    groups.streams.fire_timers(request.group_id, ctx.broker.image, ctx.now_ms)
    groups.persist()
    before = groups.streams_snapshot(request.group_id)
    result = groups.streams.heartbeat(_request(request, ctx), ctx.broker.image, ctx.now_ms)
    persisted = await groups.persist_replicated(before)
    if persisted != ErrorCode.none and result.error == ErrorCode.none:
        result = StreamsHeartbeatResult(persisted)
    if result.to_create:
        _create_internal_topics(ctx, result)
    return build(cls, _response(result))
