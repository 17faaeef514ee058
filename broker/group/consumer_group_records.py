"""The `__consumer_offsets` records of a consumer group: built from the group's state, and replayed
into it at load (Kafka's GroupCoordinatorRecordHelpers and GroupMetadataManager.replay). The byte
formats are in records.py."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from samsa.broker.group import records as r
from samsa.broker.group.assignment_records import (
    ConsumerGroupCurrentMemberAssignmentValue,
    decode_current_member_assignment_value,
    encode_current_member_assignment_value,
)
from samsa.broker.group.classic_group import GroupRecord
from samsa.broker.group.consumer_group import ClassicMemberMetadata, ConsumerGroup, ConsumerGroupMember, MemberState

GROUP_METADATA = r.CONSUMER_GROUP_METADATA_KEY
PARTITION_METADATA = r.CONSUMER_GROUP_PARTITION_METADATA_KEY
MEMBER_METADATA = r.CONSUMER_GROUP_MEMBER_METADATA_KEY
TARGET_METADATA = r.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_KEY
TARGET_MEMBER = r.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY
CURRENT_ASSIGNMENT = r.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY
REGULAR_EXPRESSION = r.CONSUMER_GROUP_REGULAR_EXPRESSION_KEY


def _key(group_id: str, record_type: int, member_id: str = "") -> bytes:
    return r.encode_consumer_group_key(r.ConsumerGroupKey(record_type, group_id, member_id))


def tombstone(group_id: str, record_type: int, member_id: str = "") -> GroupRecord:
    return GroupRecord(group_id, _key(group_id, record_type, member_id), None)


def group_epoch(group: ConsumerGroup) -> GroupRecord:
    return GroupRecord(group.group_id, _key(group.group_id, GROUP_METADATA),
                       r.encode_consumer_group_metadata_value(group.group_epoch, group.metadata_hash))


def assignment_epoch(group: ConsumerGroup) -> GroupRecord:
    return GroupRecord(group.group_id, _key(group.group_id, TARGET_METADATA),
                       r.encode_target_metadata_value(group.assignment_epoch, group.assignment_timestamp_ms))


def member_metadata(group_id: str, m: ConsumerGroupMember) -> GroupRecord:
    value = r.ConsumerGroupMemberMetadataValue(m.instance_id, m.rack_id, m.client_id, m.client_host,
                                               m.subscribed_topic_names, m.subscribed_topic_regex,
                                               m.rebalance_timeout_ms, m.server_assignor,
                                               None if m.classic is None
                                               else (m.classic.session_timeout_ms, m.classic.supported_protocols))
    return GroupRecord(group_id, _key(group_id, MEMBER_METADATA, m.member_id), r.encode_member_metadata_value(value))


def target_member(group_id: str, member_id: str, partitions: r.TopicPartitions) -> GroupRecord:
    return GroupRecord(group_id, _key(group_id, TARGET_MEMBER, member_id),
                       r.encode_target_assignment_member_value(partitions))


def current_assignment(group_id: str, m: ConsumerGroupMember) -> GroupRecord:
    value = ConsumerGroupCurrentMemberAssignmentValue(m.member_epoch, m.previous_member_epoch, int(m.state),
                                                      m.assigned_partitions, m.partitions_pending_revocation,
                                                      m.assignment_epochs)
    return GroupRecord(group_id, _key(group_id, CURRENT_ASSIGNMENT, m.member_id),
                       encode_current_member_assignment_value(value))


def regular_expressions(group: ConsumerGroup, resolve: Callable[[str], frozenset[str]], version: int,
                        now_ms: int) -> list[GroupRecord]:
    """Kafka 4's ConsumerGroupRegularExpression records for the group's regex subscriptions as they resolve now:
    one for each regex whose topics changed (or is new), a tombstone for each no member uses any more."""
    used = {m.subscribed_topic_regex for m in group.members.values() if m.subscribed_topic_regex}
    records = []
    for regex in sorted(used):
        topics = resolve(regex)
        if group.resolved_regexes.get(regex) != topics:
            group.resolved_regexes[regex] = topics
            records.append(GroupRecord(group.group_id, _key(group.group_id, REGULAR_EXPRESSION, regex),
                                       r.encode_regular_expression_value(tuple(topics), version, now_ms)))
    for regex in sorted(set(group.resolved_regexes) - used):
        del group.resolved_regexes[regex]
        records.append(tombstone(group.group_id, REGULAR_EXPRESSION, regex))
    return records


def _member(group: ConsumerGroup, member_id: str) -> ConsumerGroupMember:
    return group.members.get(member_id) or ConsumerGroupMember(member_id)


def replay(groups: dict[str, ConsumerGroup], record_type: int, group_id: str, member_id: str,
           value: bytes | None) -> None:
    """Apply one record (None: tombstone) in log order; records of one group may come in any order a
    crash or compaction leaves them, so a member is created by whichever of its records comes first."""
    group = groups.get(group_id)
    if value is None:
        if group is None:
            return
        if record_type == GROUP_METADATA:
            del groups[group_id]
        elif record_type == MEMBER_METADATA:
            group.remove_member(member_id)
        elif record_type == TARGET_MEMBER:
            group.target_assignment.pop(member_id, None)
        elif record_type == REGULAR_EXPRESSION:
            group.resolved_regexes.pop(member_id, None)
        elif record_type == CURRENT_ASSIGNMENT and member_id in group.members:
            group.update_member(replace(group.members[member_id], member_epoch=0, previous_member_epoch=0,
                                        state=MemberState.STABLE, assigned_partitions={},
                                        partitions_pending_revocation={}, assignment_epochs={}))
        return
    if group is None:
        group = groups[group_id] = ConsumerGroup(group_id)
    if record_type == GROUP_METADATA:
        group.group_epoch, group.metadata_hash = r.decode_target_metadata_value(value)
    elif record_type == TARGET_METADATA:
        group.assignment_epoch, group.assignment_timestamp_ms = r.decode_target_metadata_value(value)
    elif record_type == TARGET_MEMBER:
        group.target_assignment[member_id] = r.decode_target_assignment_member_value(value)
    elif record_type == REGULAR_EXPRESSION:
        group.resolved_regexes[member_id] = frozenset(r.decode_regular_expression_value(value)[0])
    elif record_type == MEMBER_METADATA:
        v = r.decode_member_metadata_value(value)
        group.update_member(replace(_member(group, member_id), instance_id=v.instance_id, rack_id=v.rack_id,
                                    client_id=v.client_id, client_host=v.client_host,
                                    subscribed_topic_names=v.subscribed_topic_names,
                                    subscribed_topic_regex=v.subscribed_topic_regex,
                                    rebalance_timeout_ms=v.rebalance_timeout_ms, server_assignor=v.server_assignor,
                                    classic=None if v.classic is None else ClassicMemberMetadata(*v.classic)))
    elif record_type == CURRENT_ASSIGNMENT:
        c = decode_current_member_assignment_value(value)
        try:
            state = MemberState(c.state)
        except ValueError:
            state = MemberState.UNKNOWN
        group.update_member(replace(_member(group, member_id), member_epoch=c.member_epoch,
                                    previous_member_epoch=c.previous_member_epoch, state=state,
                                    assigned_partitions=c.assigned_partitions,
                                    partitions_pending_revocation=c.partitions_pending_revocation,
                                    assignment_epochs=c.assignment_epochs))
