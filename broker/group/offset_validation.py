"""Whether a member of a KIP-848 consumer group may commit or fetch offsets (Kafka 4.4's
ConsumerGroup.validateOffsetCommit and validateOffsetFetch, and OffsetMetadataManager's mapping of their
errors for TxnOffsetCommit).

KIP-1251 (Kafka 4.3+) relaxes the commit check from "the request's epoch is the member's epoch" to, for
each committed partition,

    epoch at which the member was assigned the partition <= request's epoch <= member's epoch

so a member whose epoch was bumped (a partition added) while its commit was on the way is not fenced for
the partitions it already held. A partition the member does not hold (assigned or pending revocation)
fails the check. One failing partition fails the whole request, as Kafka's validator throws.

The errors: a member using the classic protocol is told ILLEGAL_GENERATION, a consumer-protocol member
STALE_MEMBER_EPOCH; a TxnOffsetCommit below v6 gets ILLEGAL_GENERATION for STALE_MEMBER_EPOCH.
"""

from __future__ import annotations

from collections.abc import Iterable

from samsa.broker.group.consumer_group import ConsumerGroup, ConsumerGroupMember
from samsa.kproto.errors import ErrorCode

# TxnOffsetCommitRequest.supportsStaleMemberEpochError: v6+.
TXN_STALE_MEMBER_EPOCH_VERSION = 6


def validate_offset_commit(group: ConsumerGroup, member_id: str, instance_id: str | None, member_epoch: int,
                           api_version: int, partitions: Iterable[tuple[str, int]],
                           transactional: bool = False) -> ErrorCode:
    """`partitions`: the committed (topic id, partition) pairs; a topic id is the str of its UUID."""
    error = _validate(group, member_id, instance_id, member_epoch, api_version, partitions, transactional)
    if transactional and error == ErrorCode.stale_member_epoch and api_version < TXN_STALE_MEMBER_EPOCH_VERSION:
        return ErrorCode.illegal_generation
    return error


def _validate(group: ConsumerGroup, member_id: str, instance_id: str | None, member_epoch: int, api_version: int,
              partitions: Iterable[tuple[str, int]], transactional: bool) -> ErrorCode:
    if member_epoch < 0 and not group.members:
        return ErrorCode.none  # an administrative commit to an empty group
    if transactional and member_epoch == -1 and member_id == "" and instance_id is None:
        return ErrorCode.none  # a producer's commit without the group's membership
    member = group.members.get(member_id)
    if member is None:
        return ErrorCode.unknown_member_id
    if not transactional and not member.uses_classic_protocol and api_version < 9:
        return ErrorCode.unsupported_version
    if member_epoch == member.member_epoch:
        return ErrorCode.none
    if member_epoch > member.member_epoch:
        return _epoch_error(member)
    for topic_id, partition in partitions:
        assigned_at = member.assignment_epoch(topic_id, partition)
        if assigned_at is None or member_epoch < assigned_at:
            return _epoch_error(member)
    return ErrorCode.none


def _epoch_error(member: ConsumerGroupMember) -> ErrorCode:
    """A classic member is told of its generation as the classic protocol does (Kafka's validateMemberEpoch)."""
    return ErrorCode.illegal_generation if member.uses_classic_protocol else ErrorCode.stale_member_epoch


def validate_offset_fetch(group: ConsumerGroup, member_id: str | None, member_epoch: int) -> ErrorCode:
    """Kafka's ConsumerGroup.validateOffsetFetch: the member's epoch exactly (KIP-1251 leaves fetches alone)."""
    if member_id is None and member_epoch < 0:
        return ErrorCode.none
    member = group.members.get(member_id or "")
    if member is None:
        return ErrorCode.unknown_member_id
    return ErrorCode.none if member_epoch == member.member_epoch else _epoch_error(member)
