"""A classic group's committed offsets: validate, commit, delete and expire them (Kafka's OffsetMetadataManager).

Pure functions over one Group: each returns the `__consumer_offsets` records the coordinator must
append, and the coordinator keeps the list of groups and the records in order.  A change whose
records could not be appended is reverted with `GroupSnapshot`, so memory never holds what the log
does not.
"""

from __future__ import annotations

from dataclasses import dataclass

from samsa.broker.group.classic_group import Group, GroupRecord, Membership, OffsetAndMetadata
from samsa.broker.group.records import (
    GroupMetadataKey,
    OffsetCommitKey,
    OffsetCommitValue,
    encode_key,
    encode_offset_commit_value,
)
from samsa.broker.group.state import GroupEvent, GroupState
from samsa.kproto.errors import ErrorCode

TopicPartition = tuple[str, int]


def validate_offset_commit(group: Group | None, generation_id: int, member_id: str, group_instance_id: str | None,
                           api_version: int, transactional: bool = False) -> ErrorCode:
    """Kafka's ClassicGroup.validateOffsetCommit, before anything is written (timers already fired).
    `transactional` (TxnOffsetCommit): the offsets wait for the transaction, so a commit while the group
    completes a rebalance is not refused."""
    if group is None:
        if generation_id < 0:
            return ErrorCode.none  # a "simple" group (admin tools, assign-only consumers)
        return ErrorCode.group_id_not_found if api_version >= 9 else ErrorCode.illegal_generation
    if generation_id < 0 and group.state is GroupState.EMPTY:
        return ErrorCode.none
    if generation_id >= 0 or member_id or group_instance_id is not None:
        error = group.validate_member(member_id, group_instance_id)
        if error != ErrorCode.none:
            return error
        if generation_id != group.generation_id:
            return ErrorCode.illegal_generation
    elif group.state is not GroupState.EMPTY:
        return ErrorCode.unknown_member_id
    if group.state is GroupState.COMPLETING_REBALANCE and not transactional:
        return ErrorCode.rebalance_in_progress
    return ErrorCode.none


def offset_tombstone(group_id: str, tp: TopicPartition) -> GroupRecord:
    return GroupRecord(group_id, encode_key(OffsetCommitKey(group_id, *tp)), None)


def commit_offsets(group: Group, offsets: dict[TopicPartition, OffsetAndMetadata],
                   offset_metadata_max_bytes: int) -> tuple[dict[TopicPartition, ErrorCode], list[GroupRecord]]:
    """Store validated offsets: the per-partition error (metadata too large) and the records to append."""
    errors: dict[TopicPartition, ErrorCode] = {}
    records: list[GroupRecord] = []
    for tp, value in offsets.items():
        if len(value.metadata.encode()) > offset_metadata_max_bytes:
            errors[tp] = ErrorCode.offset_metadata_too_large
            continue
        group.offsets[tp] = value
        records.append(GroupRecord(
            group.group_id, encode_key(OffsetCommitKey(group.group_id, tp[0], tp[1])),
            encode_offset_commit_value(OffsetCommitValue(value.offset, value.leader_epoch, value.metadata,
                                                         value.commit_timestamp_ms, value.expire_timestamp_ms))))
        errors[tp] = ErrorCode.none
    # Unlike Kafka's old (Scala) coordinator, Kafka 4's does not count a commit as a heartbeat: a
    # member that commits but stops heartbeating is still expired after session.timeout.ms.
    return errors, records


def delete_offsets(group: Group,
                   partitions: list[TopicPartition]) -> tuple[dict[TopicPartition, ErrorCode], list[GroupRecord]]:
    """OffsetDelete: refused per partition while the group is subscribed to its topic."""
    subscribed = group.subscribed_topics() if group.state is not GroupState.EMPTY else set()
    errors: dict[TopicPartition, ErrorCode] = {}
    records: list[GroupRecord] = []
    for tp in partitions:
        if subscribed is None or tp[0] in subscribed:
            errors[tp] = ErrorCode.group_subscribed_to_topic
            continue
        if group.offsets.pop(tp, None) is not None:
            records.append(offset_tombstone(group.group_id, tp))
        errors[tp] = ErrorCode.none
    return errors, records


def delete_all_offsets(group: Group) -> list[GroupRecord]:
    """DeleteGroups: every offset goes; their tombstones."""
    records = [offset_tombstone(group.group_id, tp) for tp in group.offsets]
    group.offsets.clear()
    return records


def expiring_offsets(group: Group, now_ms: int, retention_ms: int) -> list[TopicPartition]:
    """The offsets past offsets.retention.ms (Kafka's cleanupExpiredOffsets). Nothing is removed here:
    the timer removes them once their tombstones are written (`expire`), so an offset the log still
    holds is still answered, and the next expiry run tries again."""
    # Kafka's ClassicGroup.offsetExpirationCondition: an empty consumer group counts from when it
    # became empty; a simple group, or a stable group's unsubscribed topics, from the commit.
    since_empty = False
    if not group.protocol_type:
        candidates = list(group.offsets)
    elif group.state is GroupState.EMPTY:
        since_empty = group.state_timestamp_ms >= 0
        candidates = list(group.offsets)
    elif group.state is GroupState.STABLE and (topics := group.subscribed_topics()) is not None:
        candidates = [tp for tp in group.offsets if tp[0] not in topics]
    else:
        return []
    expiring: list[TopicPartition] = []
    for tp in candidates:
        o = group.offsets[tp]
        base_ms = group.state_timestamp_ms if since_empty else o.commit_timestamp_ms
        due = now_ms >= o.expire_timestamp_ms if o.expire_timestamp_ms is not None else now_ms - base_ms >= retention_ms
        if due:
            expiring.append(tp)
    return expiring


@dataclass(frozen=True, slots=True)
class OffsetExpiry:
    """What one expiry run removes from a group once its tombstones are written."""

    group_id: str
    partitions: tuple[TopicPartition, ...]
    delete_group: bool  # the group is Empty and loses its last offsets: its metadata goes too


def plan_expiry(groups: dict[str, Group], now_ms: int,
                retention_ms: int) -> tuple[list[OffsetExpiry], list[GroupRecord]]:
    """Every group's expiring offsets, and the tombstones to write before `apply_expiry` removes them."""
    expiries: list[OffsetExpiry] = []
    records: list[GroupRecord] = []
    for group in groups.values():
        if group.state is GroupState.DEAD:
            continue
        expiring = expiring_offsets(group, now_ms, retention_ms)
        records.extend(offset_tombstone(group.group_id, tp) for tp in expiring)
        delete = group.state is GroupState.EMPTY and len(expiring) == len(group.offsets)
        if delete:
            records.append(GroupRecord(group.group_id, encode_key(GroupMetadataKey(group.group_id)), None))
        if expiring or delete:
            expiries.append(OffsetExpiry(group.group_id, tuple(expiring), delete))
    return expiries, records


def apply_expiry(groups: dict[str, Group], expiry: OffsetExpiry, now_ms: int) -> None:
    """Remove what `plan_expiry` planned, now that its tombstones are in the log."""
    group = groups.get(expiry.group_id)
    if group is None or group.state is GroupState.DEAD:
        return
    for tp in expiry.partitions:
        group.offsets.pop(tp, None)
    if expiry.delete_group and group.state is GroupState.EMPTY and not group.offsets:
        group.transition(GroupEvent.DELETED, now_ms)
        del groups[group.group_id]


def replay_offset(group: Group, tp: TopicPartition, value: OffsetCommitValue) -> None:
    """Take one OffsetCommit record from `__consumer_offsets`."""
    group.offsets[tp] = OffsetAndMetadata(value.offset, value.leader_epoch, value.metadata,
                                          value.commit_timestamp_ms, value.expire_timestamp_ms)


@dataclass(frozen=True, slots=True)
class GroupSnapshot:
    """What an offset change (OffsetCommit, OffsetDelete, DeleteGroups) may alter of one group, taken
    before the change: put back when its records could not be appended. Kafka 4's CoordinatorRuntime
    does the same for any write (it reverts its SnapshotRegistry to the last written offset when the
    append throws); the old GroupMetadataManager kept such commits "pending" until the append callback."""

    group_id: str
    group: Group | None  # None: the group did not exist (a commit may create it)
    offsets: dict[TopicPartition, OffsetAndMetadata]
    state: GroupState
    previous_state: GroupState
    state_timestamp_ms: int
    membership: Membership | None = None  # JoinGroup/LeaveGroup: the members and the rebalance too


def snapshot(groups: dict[str, Group], group_id: str, membership: bool = False) -> GroupSnapshot:
    group = groups.get(group_id)
    if group is None:
        return GroupSnapshot(group_id, None, {}, GroupState.DEAD, GroupState.DEAD, -1)
    return GroupSnapshot(group_id, group, dict(group.offsets), group.state, group.previous_state,
                         group.state_timestamp_ms, group.membership() if membership else None)


def revert(groups: dict[str, Group], before: GroupSnapshot) -> None:
    """Put a group back as `snapshot` saw it.  Only sound right after the change: the change and its
    append run in one step of the event loop, so nothing else touched the group in between."""
    group = before.group
    if group is None:
        groups.pop(before.group_id, None)
        return
    groups[before.group_id] = group
    group.offsets.clear()
    group.offsets.update(before.offsets)
    group.state = before.state
    group.previous_state = before.previous_state
    group.state_timestamp_ms = before.state_timestamp_ms
    if before.membership is not None:
        group.restore(before.membership)
