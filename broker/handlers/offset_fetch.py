"""OffsetFetch (key 9), v1-v10 (Kafka 4 removed v0).

v2 adds a top-level error_code and a null topic list meaning "all"; v3 adds throttle_time; v5 adds
committed_leader_epoch; v6 is flexible; v7 adds require_stable (no pending transactional offsets
exist in Samsa, so it changes nothing); v8 batches several groups (KIP-709); v9 adds member_id and
member_epoch, which only the new consumer protocol checks; v10 names topics by topic_id instead of name (Kafka
4.4): an id no topic has (or the zero id) answers UNKNOWN_TOPIC_ID on each of its partitions, and the answer
for all topics leaves out a topic with offsets but no id any more (deleted), as Kafka cannot name it either.
As Kafka's KafkaApis, the coordinator's topics come first, then the topics it was not asked about (unknown ids,
then those without DESCRIBE), and a group error answers no topics at all.  A partition without a committed offset
answers offset -1. A group named twice in one v8+ request answers INVALID_REQUEST the second time.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from samsa.broker.context import ApiSpec, RequestContext
from samsa.broker.security.acl import AclOperation
from samsa.broker.security.acl_requests import group_error, topic_authorization
from samsa.broker.wire import build, field
from samsa.kproto.errors import ErrorCode
from samsa.kproto.messages import response_class

if TYPE_CHECKING:
    from kio.schema.offset_fetch import v1, v2, v3, v4, v5, v6, v7, v8, v9, v10
    OffsetFetchRequest = (v1.OffsetFetchRequest | v2.OffsetFetchRequest | v3.OffsetFetchRequest | v4.OffsetFetchRequest
                          | v5.OffsetFetchRequest | v6.OffsetFetchRequest | v7.OffsetFetchRequest
                          | v8.OffsetFetchRequest | v9.OffsetFetchRequest | v10.OffsetFetchRequest)
    OffsetFetchResponse = (v1.OffsetFetchResponse | v2.OffsetFetchResponse | v3.OffsetFetchResponse
                           | v4.OffsetFetchResponse | v5.OffsetFetchResponse | v6.OffsetFetchResponse
                           | v7.OffsetFetchResponse | v8.OffsetFetchResponse | v9.OffsetFetchResponse
                           | v10.OffsetFetchResponse)

API = ApiSpec(key=9, min_version=1, max_version=10)



def _failed(partition: int, error: ErrorCode) -> dict[str, Any]:
    return {"partition_index": partition, "committed_offset": -1, "committed_leader_epoch": -1, "metadata": "",
            "error_code": error}


def _group(ctx: RequestContext, group_id: str, topics: Any, member: tuple[str | None, int] = (None, -1)
           ) -> tuple[ErrorCode, list[dict[str, Any]]]:
    groups = ctx.broker.groups
    # KafkaApis: DESCRIBE on the group; DESCRIBE per topic (all topics: the others are left out silently).
    error = group_error(ctx, AclOperation.DESCRIBE, group_id) or groups.coordinator_error(group_id)
    if error == ErrorCode.none and groups.consumer.is_consumer_group(group_id):
        error = groups.consumer.validate_offset_fetch(group_id, *member)  # v9: the member's epoch (KIP-848)
    elif error == ErrorCode.none and groups.streams.is_streams_group(group_id):
        error = groups.streams.validate_offset_fetch(group_id, *member)
    if error != ErrorCode.none:
        return error, []
    describable = topic_authorization(ctx, AclOperation.DESCRIBE, log_if_denied=topics is not None)
    committed = groups.committed_offsets(group_id)  # as of the high watermark
    by_id = ctx.version >= 10
    image = ctx.broker.image
    wanted: dict[object, tuple[str, uuid.UUID | None, list[int]]] = {}
    unknown_ids: list[dict[str, Any]] = []
    denied: list[dict[str, Any]] = []
    if topics is None:
        for topic, partition in sorted(committed):
            if describable(topic):
                known = image.topics_by_name.get(topic)
                if by_id and known is None:
                    continue  # v10 names topics by id: one without an id cannot be answered
                topic_id = uuid.UUID(known.topic_id) if by_id and known is not None else None
                wanted.setdefault(topic, (topic, topic_id, []))[2].append(partition)
    else:
        for t in topics:
            name, topic_id = t.name if not by_id else None, field(t, "topic_id")
            if by_id:
                found = image.topics_by_id.get(str(topic_id)) if topic_id is not None else None
                if found is None:
                    unknown_ids.append({"name": "", "topic_id": topic_id, "partitions": [
                        _failed(p, ErrorCode.unknown_topic_id) for p in t.partition_indexes]})
                    continue
                name = found.name
            assert name is not None
            if not describable(name):
                denied.append({"name": name, "topic_id": topic_id, "partitions": [
                    _failed(p, ErrorCode.topic_authorization_failed) for p in t.partition_indexes]})
                continue
            wanted.setdefault(topic_id if by_id else name, (name, topic_id, []))[2].extend(t.partition_indexes)
    out = []
    for name, topic_id, partitions in wanted.values():
        parts = []
        for partition in partitions:
            o = committed.get((name, partition))
            parts.append({"partition_index": partition, "committed_offset": o.offset if o else -1,
                          "committed_leader_epoch": o.leader_epoch if o else -1,
                          "metadata": o.metadata if o else "", "error_code": ErrorCode.none})
        out.append({"name": name, "topic_id": topic_id, "partitions": parts})
    out.extend(unknown_ids + denied)
    return ErrorCode.none, out


def handle_offset_fetch(request: OffsetFetchRequest, ctx: RequestContext) -> OffsetFetchResponse:
    cls: type[OffsetFetchResponse] = response_class(9, ctx.version)
    if ctx.version >= 8:  # v8+ carries a batch of groups, v1-v7 a single group_id and its topics
        results = []
        seen: set[str] = set()
        for g in field(request, "groups"):
            if g.group_id in seen:
                # Stricter than Kafka, which answers every entry: a group named again would repeat its
                # whole answer (all its offsets, for null topics) for a few bytes of request.
                results.append({"group_id": g.group_id, "topics": (), "error_code": ErrorCode.invalid_request})
                continue
            seen.add(g.group_id)
            error, topics = _group(ctx, g.group_id, g.topics,
                                   (field(g, "member_id"), int(field(g, "member_epoch", -1))))
            results.append({"group_id": g.group_id, "topics": topics, "error_code": error})
        return build(cls, {"groups": results})
    group_id: str = field(request, "group_id")
    requested_topics = field(request, "topics")
    error, topics = _group(ctx, group_id, requested_topics)
    if error != ErrorCode.none and ctx.version < 2:
        # v1 has no top-level error: report it on every requested partition.
        topics = [{"name": t.name, "partitions": [
            {"partition_index": p, "committed_offset": -1, "metadata": "", "error_code": error}
            for p in t.partition_indexes]} for t in requested_topics or ()]
    return build(cls, {"topics": topics, "error_code": error})
