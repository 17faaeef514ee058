"""OffsetCommit (key 8), v2-v10 (Kafka 4 removed v0-v1).

v2-v4 carry retention_time (-1: the broker's offsets.retention.minutes); v3 adds throttle_time;
v5 drops retention_time; v6 adds committed_leader_epoch; v7 adds group_instance_id; v8 is flexible;
v9 only allows the new consumer protocol's member epochs too (KIP-848), and answers a commit to an
unknown group with GROUP_ID_NOT_FOUND instead of ILLEGAL_GENERATION; v10 names each topic by its topic_id
instead of its name, in the request and in the response (Kafka 4.4), and answers an id no topic has (or the zero
id) with UNKNOWN_TOPIC_ID, before any topic authorization (the id names no topic to authorize).

As Kafka's KafkaApis: without READ on the group every partition answers GROUP_AUTHORIZATION_FAILED. Otherwise each
topic, in request order, answers UNKNOWN_TOPIC_ID (v10), TOPIC_AUTHORIZATION_FAILED (no READ on it) or
UNKNOWN_TOPIC_OR_PARTITION for all its partitions, or UNKNOWN_TOPIC_OR_PARTITION for each partition it lacks;
those answers come first, then the group coordinator's for the other partitions (a group error such as
GROUP_ID_NOT_FOUND or STALE_MEMBER_EPOCH only reaches these), appended to their topic's entry.

A commit with generation -1 and no member id to an empty consumer group is how admin tools reset
offsets; Samsa writes an audit record (who, when, what moved from where to where, why: the commit
metadata string, which `samsa groups reset-offsets --reason` fills) next to the offsets. A commit whose
metadata is a poison-record skip descriptor (`samsa-skip:{...}`, from `samsa groups skip` as an admin or
from `samsa.broker.poison` inside the member that owns the partition) is audited too, with kind "skip".

Stricter than Kafka (the seeds): any other commit of an offset past the partition's log end is refused
with OFFSET_OUT_OF_RANGE (broker/commit_bounds.py; `samsa.offset.commit.past.log.end.enable` turns it off).
"""

from __future__ import annotations

import datetime
import logging
import uuid
from typing import TYPE_CHECKING, Any

from samsa.broker.commit_bounds import is_administrative_reset
from samsa.broker.commit_topics import TopicAnswers, check_topics, named_topic
from samsa.broker.context import ApiSpec, RequestContext
from samsa.broker.group.coordinator import OffsetAndMetadata
from samsa.broker.group.records import ResetAuditKey, decode_skip_metadata, encode_audit_value
from samsa.broker.group.state import GroupState
from samsa.broker.security.acl import AclOperation
from samsa.broker.security.acl_requests import group_error
from samsa.broker.wire import build, field, ms
from samsa.kproto.errors import ErrorCode
from samsa.kproto.messages import response_class

if TYPE_CHECKING:
    from kio.schema.offset_commit import v2, v3, v4, v5, v6, v7, v8, v9, v10
    OffsetCommitRequest = (v2.OffsetCommitRequest | v3.OffsetCommitRequest | v4.OffsetCommitRequest
                           | v5.OffsetCommitRequest | v6.OffsetCommitRequest | v7.OffsetCommitRequest
                           | v8.OffsetCommitRequest | v9.OffsetCommitRequest | v10.OffsetCommitRequest)
    OffsetCommitResponse = (v2.OffsetCommitResponse | v3.OffsetCommitResponse | v4.OffsetCommitResponse
                            | v5.OffsetCommitResponse | v6.OffsetCommitResponse | v7.OffsetCommitResponse
                            | v8.OffsetCommitResponse | v9.OffsetCommitResponse | v10.OffsetCommitResponse)

API = ApiSpec(key=8, min_version=2, max_version=10)

logger = logging.getLogger(__name__)


DEFAULT_RETENTION = -1


def _skip(offsets: dict[tuple[str, int], OffsetAndMetadata]) -> dict[str, object] | None:
    return next((d for d in map(decode_skip_metadata, (o.metadata for o in offsets.values())) if d), None)


def _audit(ctx: RequestContext, group_id: str, offsets: dict[tuple[str, int], OffsetAndMetadata]) -> None:
    groups = ctx.broker.groups
    before = groups.coordinator.committed_offsets(group_id)
    changes = [{"topic": t, "partition": p, "from": before[(t, p)].offset if (t, p) in before else None,
                "to": o.offset} for (t, p), o in sorted(offsets.items())]
    if not changes:
        return
    reasons = sorted({o.metadata for o in offsets.values() if o.metadata})
    audit: dict[str, object] = {
        "group": group_id,
        "who": f"{ctx.header.client_id or ''}@{ctx.client_host}",
        "when_ms": ctx.now_ms,
        "when": datetime.datetime.fromtimestamp(ctx.now_ms / 1000, datetime.UTC).isoformat(timespec="seconds"),
        "why": "; ".join(reasons),
        "changes": changes,
    }
    skip = _skip(offsets)
    if skip is not None:
        audit.update({**skip, "kind": "skip", "why": str(skip.get("reason", ""))})
    key = ResetAuditKey(group_id, ctx.now_ms, uuid.uuid4().hex)
    groups.append_audit(group_id, key, encode_audit_value(audit))


async def handle_offset_commit(request: OffsetCommitRequest, ctx: RequestContext) -> OffsetCommitResponse:
    answers = TopicAnswers(by_id=ctx.version >= 10)
    cls: type[OffsetCommitResponse] = response_class(8, ctx.version)
    denied = group_error(ctx, AclOperation.READ, request.group_id)
    if denied != ErrorCode.none:
        for topic in request.topics:
            name, topic_id = named_topic(ctx, topic, 10)
            for p in topic.partitions:
                answers.add(name or "", topic_id, p.partition_index, denied)
        return build(cls, {"topics": list(answers.topics.values())})
    forwarded = check_topics(ctx, request.topics, answers, 10)
    if forwarded:
        errors = await _commit(request, ctx, [(name, p) for name, _, p in forwarded])
        for name, topic_id, p in forwarded:
            answers.add(name, topic_id, p.partition_index, errors[(name, p.partition_index)])
    return build(cls, {"topics": list(answers.topics.values())})


def _topic_ids(ctx: RequestContext, partitions: list[tuple[str, Any]]) -> list[tuple[str, int]]:
    """The committed partitions as (topic id, partition), the topic ids of the names as the image has them
    (Kafka's KafkaApis sets them before the group coordinator validates the commit); a partition whose metadata
    is too large is answered OFFSET_METADATA_TOO_LARGE unchecked, as Kafka's OffsetMetadataManager does."""
    topics = ctx.broker.image.topics_by_name
    max_bytes = ctx.broker.groups.coordinator.config.offset_metadata_max_bytes
    return [(topics[name].topic_id if name in topics else "", p.partition_index) for name, p in partitions
            if len((p.committed_metadata or "").encode()) <= max_bytes]


def _names(ctx: RequestContext, partitions: list[tuple[str, Any]]) -> list[tuple[str, int]]:
    """The committed partitions a streams group checks, by topic name; as `_topic_ids`, a partition whose
    metadata is too large is answered OFFSET_METADATA_TOO_LARGE unchecked."""
    max_bytes = ctx.broker.groups.coordinator.config.offset_metadata_max_bytes
    return [(name, p.partition_index) for name, p in partitions
            if len((p.committed_metadata or "").encode()) <= max_bytes]


async def _commit(request: OffsetCommitRequest, ctx: RequestContext, partitions: list[tuple[str, Any]]
                  ) -> dict[tuple[str, int], ErrorCode]:
    """The group coordinator's part: the group's generation or member epoch, then the commit itself."""
    groups = ctx.broker.groups
    group_id = request.group_id
    generation = request.generation_id_or_member_epoch
    member_id = request.member_id or ""
    instance_id = field(request, "group_instance_id")
    error = groups.coordinator_error(group_id)
    past_end: dict[tuple[str, int], int] = {}
    if error == ErrorCode.none:
        group = groups.coordinator.groups.get(group_id)
        empty = group is None or group.state in (GroupState.EMPTY, GroupState.DEAD)
        consumer_group = groups.consumer.groups.get(group_id)  # KIP-848: member epochs, not generations
        if consumer_group is not None:
            empty = not consumer_group.members
        streams_group = groups.streams.groups.get(group_id)  # KIP-1071: member epochs too
        if streams_group is not None:
            empty = not streams_group.members
        if not is_administrative_reset(generation, member_id, empty):
            # Before the generation is checked: the check and the commit stay in one step of the event loop.
            past_end = await ctx.broker.commit_bounds.past_log_end(
                {(name, p.partition_index): p.committed_offset for name, p in partitions})
        if streams_group is not None:  # KIP-1071: an older epoch checked per task, as Kafka 4.4 does
            error = groups.streams.validate_offset_commit(group_id, member_id, generation, ctx.version,
                                                          _names(ctx, partitions))
        elif consumer_group is not None:  # KIP-1251: per partition, against the epoch it was assigned at
            error = groups.consumer.validate_offset_commit(group_id, member_id, instance_id, generation, ctx.version,
                                                           ctx.now_ms, _topic_ids(ctx, partitions))
        else:
            error = groups.coordinator.validate_offset_commit(group_id, generation, member_id, instance_id,
                                                               ctx.version, ctx.now_ms)
    retention_ms = ms(field(request, "retention_time"), DEFAULT_RETENTION)
    errors: dict[tuple[str, int], ErrorCode] = {}
    offsets: dict[tuple[str, int], OffsetAndMetadata] = {}
    for name, p in partitions:
        tp: tuple[str, int] = (name, p.partition_index)
        if error != ErrorCode.none:
            errors[tp] = error
        elif tp in past_end:
            errors[tp] = ErrorCode.offset_out_of_range
            logger.info("group %s: commit of %s-%d at %d refused, past the log end %d (client %s@%s)", group_id,
                        name, p.partition_index, p.committed_offset, past_end[tp],
                        ctx.header.client_id or "", ctx.client_host)
        else:
            expire = ctx.now_ms + retention_ms if retention_ms >= 0 else None
            offsets[tp] = OffsetAndMetadata(p.committed_offset, int(field(p, "committed_leader_epoch", -1)),
                                            p.committed_metadata or "", ctx.now_ms, expire)
    if offsets:
        # Reverted if the records cannot be appended, so OffsetFetch never answers an offset no log holds.
        before = groups.snapshot([group_id])
        group = groups.coordinator.groups.get(group_id)
        consumer_group = groups.consumer.groups.get(group_id)
        if consumer_group is not None:  # an admin's commit to an empty KIP-848 group is audited as a classic one's
            managed_and_empty = not consumer_group.members
        else:
            managed_and_empty = group is not None and bool(group.protocol_type) and group.state is GroupState.EMPTY
        if (generation < 0 and not member_id and managed_and_empty) or _skip(offsets) is not None:
            _audit(ctx, group_id, offsets)
        errors.update(groups.coordinator.commit_offsets(group_id, member_id, offsets, ctx.now_ms))
        # Answered once the commit is on every in-sync replica (Kafka writes offsets with acks=-1).
        persisted = await groups.persist_replicated(before)
        if persisted != ErrorCode.none:
            for tp in offsets:
                errors[tp] = persisted
    return errors
