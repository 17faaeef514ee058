"""TxnOffsetCommit (key 28), v0-v5.

Offsets a transactional producer commits for a group; they become the group's committed offsets
only when the transaction commits (an abort drops them).  v2 adds committed_leader_epoch; v3 adds
generation_id, member_id and group_instance_id (KIP-447: the commit is fenced like a consumer's
OffsetCommit when they are given) and is flexible; v4 only allows TRANSACTION_ABORTABLE.  v5
is transactions V2: the group's __consumer_offsets partition is added to the transaction here (the
client sends no AddOffsetsToTxn).

Stricter than Kafka (the seeds): an offset past the partition's log end gets OFFSET_OUT_OF_RANGE
(broker/commit_bounds.py; `samsa.offset.commit.past.log.end.enable` turns it off).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from samsa.broker.context import ApiSpec, RequestContext
from samsa.broker.group.coordinator import OffsetAndMetadata
from samsa.broker.security.acl import AclOperation
from samsa.broker.security.acl_requests import group_error, topic_authorization, transactional_id_error
from samsa.broker.txn.service import OFFSETS_TOPIC
from samsa.broker.wire import build, field
from samsa.kproto.errors import ErrorCode
from samsa.kproto.messages import response_class

if TYPE_CHECKING:
    from kio.schema.txn_offset_commit import v0, v1, v2, v3, v4, v5
    TxnOffsetCommitRequest = (v0.TxnOffsetCommitRequest | v1.TxnOffsetCommitRequest | v2.TxnOffsetCommitRequest
                              | v3.TxnOffsetCommitRequest | v4.TxnOffsetCommitRequest | v5.TxnOffsetCommitRequest)
    TxnOffsetCommitResponse = (v0.TxnOffsetCommitResponse | v1.TxnOffsetCommitResponse | v2.TxnOffsetCommitResponse
                               | v3.TxnOffsetCommitResponse | v4.TxnOffsetCommitResponse
                               | v5.TxnOffsetCommitResponse)

API = ApiSpec(key=28, min_version=0, max_version=5)


NO_GENERATION = -1


async def handle_txn_offset_commit(request: TxnOffsetCommitRequest, ctx: RequestContext) -> TxnOffsetCommitResponse:
    broker = ctx.broker
    groups = broker.groups
    group_id = request.group_id
    # KafkaApis: WRITE on the transactional id, READ on the group (both: every partition), READ per topic.
    error = (transactional_id_error(ctx, AclOperation.WRITE, request.transactional_id)
             or group_error(ctx, AclOperation.READ, group_id) or groups.coordinator_error(group_id))
    readable = topic_authorization(ctx, AclOperation.READ)
    past_end: dict[tuple[str, int], int] = {}
    if error == ErrorCode.none:
        # Before the checks below, which then stay in one step of the event loop with the commit.
        past_end = await broker.commit_bounds.past_log_end(
            {(t.name, p.partition_index): p.committed_offset for t in request.topics for p in t.partitions})
        if ctx.version >= 5 and not broker.txn.is_local_coordinator(request.transactional_id):
            # v5 adds the group's partition to the transaction another broker coordinates: wait for its answer
            # (Kafka's AddPartitionsToTxnManager) rather than have the client retry.
            await broker.txn.remote.wait_added(request.transactional_id, request.producer_id,
                                               request.producer_epoch, OFFSETS_TOPIC, groups.partition_for(group_id))
    generation = int(field(request, "generation_id", NO_GENERATION))
    member_id = field(request, "member_id", "") or ""
    instance_id = field(request, "group_instance_id")
    if error == ErrorCode.none and groups.streams.is_streams_group(group_id):
        # A KIP-1071 group: an older member epoch checked per task, as Kafka 4.4 does.
        error = groups.streams.validate_offset_commit(group_id, member_id, generation, ctx.version,
                                                      [(t.name, p.partition_index) for t in request.topics
                                                       for p in t.partitions], True, instance_id)
    elif error == ErrorCode.none and groups.consumer.is_consumer_group(group_id):
        # A KIP-848 group (its members of either protocol commit with their member epoch as the generation),
        # checked per partition against the epoch it was assigned at (KIP-1251).
        topics_by_name = broker.image.topics_by_name
        committed = [(topics_by_name[t.name].topic_id if t.name in topics_by_name else "", p.partition_index)
                     for t in request.topics for p in t.partitions]
        error = groups.consumer.validate_offset_commit(group_id, member_id, instance_id, generation, ctx.version,
                                                       ctx.now_ms, committed, True)
    elif error == ErrorCode.none and (generation >= 0 or member_id):
        error = groups.coordinator.validate_offset_commit(group_id, generation, member_id, instance_id, 8,
                                                          ctx.now_ms)
    image = broker.image
    errors: dict[tuple[str, int], ErrorCode] = {}
    offsets: dict[tuple[str, int], OffsetAndMetadata] = {}
    for topic in request.topics:
        known = image.topics_by_name.get(topic.name)
        for p in topic.partitions:
            tp = (topic.name, p.partition_index)
            if error != ErrorCode.none:
                errors[tp] = error
            elif not readable(topic.name):
                errors[tp] = ErrorCode.topic_authorization_failed
            elif known is None or p.partition_index not in known.partitions:
                errors[tp] = ErrorCode.unknown_topic_or_partition
            elif tp in past_end:
                errors[tp] = ErrorCode.offset_out_of_range  # never an administrative reset: a producer's commit
            else:
                offsets[tp] = OffsetAndMetadata(p.committed_offset, int(field(p, "committed_leader_epoch", -1)),
                                                p.committed_metadata or "", ctx.now_ms, None)
    if offsets:
        result = broker.txn.txn_offset_commit(request.transactional_id, group_id, request.producer_id,
                                              request.producer_epoch, offsets, ctx.version >= 5)
        if result == ErrorCode.producer_fenced and ctx.version < 3:
            result = ErrorCode.invalid_producer_epoch
        errors.update({tp: result for tp in offsets})
    topics: dict[str, list[dict[str, Any]]] = {}
    for topic in request.topics:
        topics.setdefault(topic.name, []).extend(
            {"partition_index": p.partition_index, "error_code": errors[(topic.name, p.partition_index)]}
            for p in topic.partitions)
    cls: type[TxnOffsetCommitResponse] = response_class(28, ctx.version)
    return build(cls, {"throttle_time": 0, "topics": [{"name": n, "partitions": ps} for n, ps in topics.items()]})
