"""TxnOffsetCommit (key 28), v0-v6.

Offsets a transactional producer commits for a group; they become the group's committed offsets
only when the transaction commits (an abort drops them).  v2 adds committed_leader_epoch; v3 adds
generation_id, member_id and group_instance_id (KIP-447: the commit is fenced like a consumer's
OffsetCommit when they are given) and is flexible; v4 only allows TRANSACTION_ABORTABLE.  v5
is transactions V2: the group's __consumer_offsets partition is added to the transaction here (the
client sends no AddOffsetsToTxn).  v6 (KIP-1319, Kafka 4.4) names each topic by its topic_id instead of its
name, in the request and in the response, and answers an id no topic has (or the zero id) with UNKNOWN_TOPIC_ID;
it also tells a member of its group's errors as they are: GROUP_ID_NOT_FOUND (a generation or member epoch for
a group that does not exist) and STALE_MEMBER_EPOCH (a KIP-848 or streams member's epoch), where v0-v5 are told
ILLEGAL_GENERATION.  The offsets are stored by topic name (the id resolved by the broker), as before.

As Kafka 4.4's KafkaApis: without WRITE on the transactional id, or READ on the group, every partition answers
that error (one entry per request topic).  Otherwise each topic, in request order, answers UNKNOWN_TOPIC_ID (v6),
TOPIC_AUTHORIZATION_FAILED (no READ on it) or UNKNOWN_TOPIC_OR_PARTITION for all its partitions, or
UNKNOWN_TOPIC_OR_PARTITION for each partition it lacks; those answers come first, then the group coordinator's for
the other partitions (NOT_COORDINATOR, INVALID_GROUP_ID, the group's errors, the transaction's), appended to their
topic's entry.  The transaction is checked first (v5+: the group's partition added to it), then the group, as
Kafka's CoordinatorRuntime verifies the transaction before the group coordinator's write: a commit the group
refuses has still added the partition.  As Kafka's OffsetMetadataManager, a partition whose metadata is too long
is answered OFFSET_METADATA_TOO_LARGE and the others are committed; a commit whose member check fails (for a
KIP-848 member, per partition against the epoch it was assigned at, KIP-1251) fails for all of them.  v0-v1 are
told COORDINATOR_LOAD_IN_PROGRESS as COORDINATOR_NOT_AVAILABLE.

Stricter than Kafka (the seeds): an offset past the partition's log end gets OFFSET_OUT_OF_RANGE
(broker/commit_bounds.py; `samsa.offset.commit.past.log.end.enable` turns it off).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from samsa.broker.commit_topics import TopicAnswers, check_topics
from samsa.broker.context import ApiSpec, RequestContext
from samsa.broker.group.coordinator import OffsetAndMetadata
from samsa.broker.security.acl import AclOperation
from samsa.broker.security.acl_requests import group_error, transactional_id_error
from samsa.broker.txn.service import OFFSETS_TOPIC
from samsa.broker.wire import build, field
from samsa.kproto.errors import ErrorCode
from samsa.kproto.messages import response_class

if TYPE_CHECKING:
    from kio.schema.txn_offset_commit import v0, v1, v2, v3, v4, v5

    from samsa.kproto.schema.txn_offset_commit import v6
    TxnOffsetCommitRequest = (v0.TxnOffsetCommitRequest | v1.TxnOffsetCommitRequest | v2.TxnOffsetCommitRequest
                              | v3.TxnOffsetCommitRequest | v4.TxnOffsetCommitRequest | v5.TxnOffsetCommitRequest
                              | v6.TxnOffsetCommitRequest)
    TxnOffsetCommitResponse = (v0.TxnOffsetCommitResponse | v1.TxnOffsetCommitResponse | v2.TxnOffsetCommitResponse
                               | v3.TxnOffsetCommitResponse | v4.TxnOffsetCommitResponse
                               | v5.TxnOffsetCommitResponse | v6.TxnOffsetCommitResponse)

API = ApiSpec(key=28, min_version=0, max_version=6)


NO_GENERATION = -1
# TxnOffsetCommitRequest.useTopicIds, supportsGroupIdNotFoundError and supportsStaleMemberEpochError: v6+.
TOPIC_IDS_VERSION = 6
# The classic group's check answers an unknown group as OffsetCommit v9+ does (GROUP_ID_NOT_FOUND), or as v8.
_CLASSIC_VERSION = {False: 8, True: 9}


def _response(ctx: RequestContext, topics: list[dict[str, Any]]) -> TxnOffsetCommitResponse:
    if ctx.version < 2:
        for t in topics:
            for p in t["partitions"]:
                if p["error_code"] == ErrorCode.coordinator_load_in_progress:
                    p["error_code"] = ErrorCode.coordinator_not_available
    cls: type[TxnOffsetCommitResponse] = response_class(28, ctx.version)
    return build(cls, {"throttle_time": 0, "topics": topics})


async def handle_txn_offset_commit(request: TxnOffsetCommitRequest, ctx: RequestContext) -> TxnOffsetCommitResponse:
    denied = (transactional_id_error(ctx, AclOperation.WRITE, request.transactional_id)
              or group_error(ctx, AclOperation.READ, request.group_id))
    if denied != ErrorCode.none:  # Kafka's getErrorResponse: an entry per request topic, as the request names it
        return _response(ctx, [{"name": getattr(t, "name", ""), "topic_id": getattr(t, "topic_id", None),
                                "partitions": [{"partition_index": p.partition_index, "error_code": denied}
                                               for p in t.partitions]} for t in request.topics])
    answers = TopicAnswers(by_id=ctx.version >= TOPIC_IDS_VERSION)
    forwarded = check_topics(ctx, request.topics, answers, TOPIC_IDS_VERSION)
    if forwarded:
        errors = await _commit(request, ctx, [(name, p) for name, _, p in forwarded])
        for name, topic_id, p in forwarded:
            answers.add(name, topic_id, p.partition_index, errors[(name, p.partition_index)])
    return _response(ctx, list(answers.topics.values()))


async def _commit(request: TxnOffsetCommitRequest, ctx: RequestContext, partitions: list[tuple[str, Any]]
                  ) -> dict[tuple[str, int], ErrorCode]:
    """The group coordinator's part (Kafka's OffsetMetadataManager.commitTransactionalOffset): the group's
    generation or member epoch, then the offsets, pending until the transaction ends."""
    broker = ctx.broker
    groups = broker.groups
    group_id = request.group_id
    error = ErrorCode.invalid_group_id if not group_id else groups.coordinator_error(group_id)
    past_end: dict[tuple[str, int], int] = {}
    if error == ErrorCode.none:
        # Before the checks below, which then stay in one step of the event loop with the commit.
        past_end = await broker.commit_bounds.past_log_end(
            {(name, p.partition_index): p.committed_offset for name, p in partitions})
        if ctx.version >= 5 and not broker.txn.is_local_coordinator(request.transactional_id):
            # v5 adds the group's partition to the transaction another broker coordinates: wait for its answer
            # (Kafka's AddPartitionsToTxnManager) rather than have the client retry.
            await broker.txn.remote.wait_added(request.transactional_id, request.producer_id,
                                               request.producer_epoch, OFFSETS_TOPIC, groups.partition_for(group_id))
    if error == ErrorCode.none:
        # The transaction first (v5+: the group's partition added to it), then the group, as Kafka's coordinator.
        error = _producer_error(ctx, broker.txn.verify_txn_offset_commit(
            request.transactional_id, group_id, request.producer_id, request.producer_epoch, ctx.version >= 5))
    max_bytes = groups.coordinator.config.offset_metadata_max_bytes
    too_large = {(name, p.partition_index) for name, p in partitions
                 if len((p.committed_metadata or "").encode()) > max_bytes}
    if error == ErrorCode.none:
        error = _validate(request, ctx, [(name, p.partition_index) for name, p in partitions
                                         if (name, p.partition_index) not in too_large])
    errors: dict[tuple[str, int], ErrorCode] = {}
    offsets: dict[tuple[str, int], OffsetAndMetadata] = {}
    for name, p in partitions:
        tp = (name, p.partition_index)
        if error != ErrorCode.none:
            errors[tp] = error
        elif tp in too_large:
            errors[tp] = ErrorCode.offset_metadata_too_large
        elif tp in past_end:
            errors[tp] = ErrorCode.offset_out_of_range  # never an administrative reset: a producer's commit
        else:
            offsets[tp] = OffsetAndMetadata(p.committed_offset, int(field(p, "committed_leader_epoch", -1)),
                                            p.committed_metadata or "", ctx.now_ms, None)
    if offsets:
        result = _producer_error(ctx, broker.txn.txn_offset_commit(request.transactional_id, group_id,
                                                                   request.producer_id, request.producer_epoch,
                                                                   offsets))
        errors.update({tp: result for tp in offsets})
    return errors


def _producer_error(ctx: RequestContext, error: ErrorCode) -> ErrorCode:
    """PRODUCER_FENCED is new in v3: older clients are told INVALID_PRODUCER_EPOCH."""
    return ErrorCode.invalid_producer_epoch if error == ErrorCode.producer_fenced and ctx.version < 3 else error


def _validate(request: TxnOffsetCommitRequest, ctx: RequestContext, committed: list[tuple[str, int]]) -> ErrorCode:
    """Kafka's OffsetMetadataManager.validateTransactionalOffsetCommit, with its version mapping: below v6 a
    STALE_MEMBER_EPOCH or GROUP_ID_NOT_FOUND is told as ILLEGAL_GENERATION."""
    groups = ctx.broker.groups
    group_id = request.group_id
    # v3-v5 name it generation_id; v6 generation_id_or_member_epoch.
    generation = int(field(request, "generation_id_or_member_epoch", field(request, "generation_id", NO_GENERATION)))
    member_id = field(request, "member_id", "") or ""
    instance_id = field(request, "group_instance_id")
    new_errors = ctx.version >= TOPIC_IDS_VERSION
    if groups.streams.is_streams_group(group_id):
        # A KIP-1071 group: an older member epoch checked per task, as Kafka 4.4 does.
        error = groups.streams.validate_offset_commit(group_id, member_id, generation, ctx.version, committed, True,
                                                      instance_id)
    elif groups.consumer.is_consumer_group(group_id):
        # A KIP-848 group (its members of either protocol commit with their member epoch as the generation),
        # checked per partition against the epoch it was assigned at (KIP-1251).
        topics_by_name = ctx.broker.image.topics_by_name
        error = groups.consumer.validate_offset_commit(
            group_id, member_id, instance_id, generation, ctx.version, ctx.now_ms,
            [(topics_by_name[t].topic_id if t in topics_by_name else "", p) for t, p in committed], True)
    elif generation >= 0 or member_id or instance_id is not None:
        error = groups.coordinator.validate_offset_commit(group_id, generation, member_id, instance_id,
                                                          _CLASSIC_VERSION[new_errors], ctx.now_ms, transactional=True)
    else:
        error = ErrorCode.none  # a producer's commit without the group's membership
    if not new_errors and error in (ErrorCode.stale_member_epoch, ErrorCode.group_id_not_found):
        return ErrorCode.illegal_generation
    return error
