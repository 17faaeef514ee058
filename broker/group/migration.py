"""KIP-848's online migration between a classic group and a consumer group, as Kafka 4's GroupMetadataManager does
it (validateOnlineUpgrade / convertToConsumerGroup, validateOnlineDowngradeWithFencedMember /
convertToClassicGroup), under `group.consumer.migration.policy` (bidirectional, upgrade, downgrade, disabled).

Upgrade: the first consumer-protocol member to join a classic group with members turns it into a consumer
group. Every classic member becomes a member at the classic generation, Stable, owning the partitions of its
last assignment, which is also its target; the group epoch and target assignment epoch are the generation.
The classic group's record is tombstoned and the consumer group's records written. The joining member then
bumps the group epoch, and the classic members learn of the rebalance from their heartbeats.

Downgrade: when the last consumer-protocol member leaves (or is fenced) and only classic members remain,
the consumer group's records are tombstoned and a classic group is written in their place, at the group
epoch as generation, Stable, each member holding its target assignment, then rebalanced so every member
rejoins the classic way.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from samsa.broker.group import consumer_group_records as cg_records
from samsa.broker.group.classic_group import Group, GroupRecord, Member
from samsa.broker.group.classic_members import CONSUMER_PROTOCOL_TYPE, TopicIds, assignment_bytes, topic_ids
from samsa.broker.group.consumer_coordinator import ConsumerGroupCoordinator, HeartbeatError
from samsa.broker.group.consumer_group import (
    ClassicMemberMetadata,
    ConsumerGroup,
    ConsumerGroupMember,
    MemberState,
    uniform_epochs,
)
from samsa.broker.group.consumer_protocol import assigned_partitions, parse_subscription
from samsa.broker.group.state import GroupState
from samsa.kproto.errors import ErrorCode

if TYPE_CHECKING:
    from samsa.broker.group.coordinator import GroupCoordinator

logger = logging.getLogger(__name__)


class MigrationPolicy(enum.Enum):
    """Kafka's ConsumerGroupMigrationPolicy (group.consumer.migration.policy)."""

    BIDIRECTIONAL = "bidirectional"
    UPGRADE = "upgrade"
    DOWNGRADE = "downgrade"
    DISABLED = "disabled"

    @property
    def upgrade_enabled(self) -> bool:
        return self in (MigrationPolicy.BIDIRECTIONAL, MigrationPolicy.UPGRADE)

    @property
    def downgrade_enabled(self) -> bool:
        return self in (MigrationPolicy.BIDIRECTIONAL, MigrationPolicy.DOWNGRADE)

    @classmethod
    def parse(cls, value: str) -> MigrationPolicy:
        try:
            return cls(value.strip().lower())
        except ValueError:
            return cls.BIDIRECTIONAL


def consumer_group_from_classic(classic: Group, catalog: TopicIds) -> ConsumerGroup | None:
    """Kafka's ConsumerGroup.fromClassicGroup; None when a member's embedded consumer protocol is malformed."""
    group = ConsumerGroup(classic.group_id)
    group.group_epoch = group.assignment_epoch = classic.generation_id
    for m in classic.members.values():
        metadata = m.metadata(classic.protocol_name) if classic.protocol_name else (
            m.protocols[0][1] if m.protocols else b"")
        subscription = parse_subscription(metadata)
        assignment = assigned_partitions(m.assignment)
        if subscription is None or assignment is None:
            return None
        assigned = topic_ids(catalog, assignment)
        member = ConsumerGroupMember(
            m.member_id, member_epoch=classic.generation_id, previous_member_epoch=classic.generation_id,
            state=MemberState.STABLE, instance_id=m.group_instance_id, rack_id=subscription.rack_id,
            client_id=m.client_id, client_host=m.client_host,
            subscribed_topic_names=tuple(sorted(set(subscription.topics))),
            rebalance_timeout_ms=m.rebalance_timeout_ms, assigned_partitions=assigned,
            assignment_epochs=uniform_epochs(assigned, classic.generation_id),
            classic=ClassicMemberMetadata(m.session_timeout_ms, m.protocols))
        group.target_assignment[m.member_id] = assigned
        group.update_member(member)
    return group


def consumer_group_records(group: ConsumerGroup) -> list[GroupRecord]:
    """Kafka's ConsumerGroup.createConsumerGroupRecords."""
    gid = group.group_id
    return [*(cg_records.member_metadata(gid, m) for m in group.members.values()),
            cg_records.group_epoch(group),
            *(cg_records.target_member(gid, mid, group.target_assignment.get(mid, {})) for mid in group.members),
            cg_records.assignment_epoch(group),
            *(cg_records.current_assignment(gid, m) for m in group.members.values())]


def consumer_group_tombstones(group: ConsumerGroup) -> list[GroupRecord]:
    """Kafka's ConsumerGroup.createGroupTombstoneRecords."""
    gid = group.group_id
    return [*(cg_records.tombstone(gid, cg_records.CURRENT_ASSIGNMENT, mid) for mid in group.members),
            *(cg_records.tombstone(gid, cg_records.TARGET_MEMBER, mid) for mid in group.members),
            cg_records.tombstone(gid, cg_records.TARGET_METADATA),
            *(cg_records.tombstone(gid, cg_records.MEMBER_METADATA, mid) for mid in group.members),
            *(cg_records.tombstone(gid, cg_records.REGULAR_EXPRESSION, regex) for regex in group.resolved_regexes),
            cg_records.tombstone(gid, cg_records.PARTITION_METADATA),
            cg_records.tombstone(gid, cg_records.GROUP_METADATA)]


def validate_online_upgrade(classic: Group, policy: MigrationPolicy, consumer_max_size: int) -> bool:
    """Kafka's validateOnlineUpgrade."""
    if not policy.upgrade_enabled:
        logger.info("cannot upgrade classic group %s to a consumer group: the online upgrade is disabled",
                    classic.group_id)
        return False
    if classic.state is GroupState.DEAD or classic.protocol_type != CONSUMER_PROTOCOL_TYPE:
        logger.info("cannot upgrade classic group %s to a consumer group: it does not use the consumer protocol",
                    classic.group_id)
        return False
    if len(classic.members) > consumer_max_size:
        logger.info("cannot upgrade classic group %s to a consumer group: it has more members than "
                    "group.consumer.max.size", classic.group_id)
        return False
    return True


def classic_group_from_consumer(group: ConsumerGroup, leaving_member_id: str | None, catalog: TopicIds,
                                now_ms: int) -> Group:
    """Kafka's ClassicGroup.fromConsumerGroup: every member but the leaving one, Stable at the group epoch, each
    with its target assignment encoded for the selected protocol."""
    classic = Group(group.group_id, state=GroupState.STABLE, previous_state=GroupState.STABLE,
                    state_timestamp_ms=now_ms, generation_id=group.group_epoch,
                    protocol_type=CONSUMER_PROTOCOL_TYPE)
    for member_id, m in group.members.items():
        if member_id == leaving_member_id or m.classic is None:
            continue
        classic.members[member_id] = Member(member_id, m.instance_id, m.client_id, m.client_host,
                                            m.rebalance_timeout_ms, m.classic.session_timeout_ms,
                                            CONSUMER_PROTOCOL_TYPE, m.classic.supported_protocols)
        if m.instance_id is not None:
            classic.static_members[m.instance_id] = member_id
        if classic.leader_id is None:
            classic.leader_id = member_id
    classic.protocol_name = classic.select_protocol()
    for member_id, member in classic.members.items():
        member.assignment = assignment_bytes(catalog, group.members[member_id].classic, classic.protocol_name,
                                             group.target_assignment.get(member_id, {}))
    return classic


def can_downgrade(group: ConsumerGroup, leaving_member_id: str | None, policy: MigrationPolicy,
                  classic_max_size: int) -> bool:
    """Kafka's validateOnlineDowngradeWithFencedMember, or (`leaving_member_id` None: a classic static member
    took the last consumer-protocol member's place) validateOnlineDowngradeWithReplacedMemberId; the caller
    checked that only classic members remain."""
    if not policy.downgrade_enabled:
        logger.info("cannot downgrade consumer group %s to a classic group: the online downgrade is disabled",
                    group.group_id)
        return False
    if len(group.members) - (leaving_member_id is not None) > classic_max_size:
        logger.info("cannot downgrade consumer group %s to a classic group: it has more members than "
                    "group.max.size", group.group_id)
        return False
    classic = [m.classic for mid, m in group.members.items() if mid != leaving_member_id and m.classic is not None]
    # A common protocol is needed to select one (the members all joined a group that required it).
    common = set.intersection(*({name for name, _ in c.supported_protocols} for c in classic)) if classic else set()
    return bool(common)


def emit_all(emit: Callable[[GroupRecord], None], records: list[GroupRecord]) -> None:
    for record in records:
        emit(record)


def upgrade(classic: GroupCoordinator, consumer: ConsumerGroupCoordinator, group_id: str, catalog: TopicIds,
            policy: MigrationPolicy, now_ms: int) -> ConsumerGroup | None:
    """A consumer-protocol member joins the classic group `group_id`, which has members: the group converted
    (its records queued, the classic members' sessions started), or None when it may not be."""
    old = classic.groups[group_id]
    if not validate_online_upgrade(old, policy, consumer.config.max_size):
        return None
    if len(old.members) >= consumer.config.max_size:
        # Kafka converts, then finds the group full and drops the conversion with the rest of the request.
        raise HeartbeatError(ErrorCode.group_max_size_reached, "The consumer group has reached its maximum capacity "
                             f"of {consumer.config.max_size} members.")
    group = consumer_group_from_classic(old, catalog)
    if group is None:
        logger.warning("cannot upgrade classic group %s to a consumer group: a member's embedded consumer protocol "
                       "is malformed", group_id)
        return None
    consumer.refresh_metadata(group, catalog)  # fromClassicGroup's metadata hash, in the group epoch record
    classic.hand_over(group_id, now_ms)
    emit_all(classic.emit, consumer_group_records(group))
    for member in group.members.values():
        group.session_deadlines_ms[member.member_id] = now_ms + consumer.session_timeout_ms(group.group_id, member)
    consumer.groups[group_id] = group
    logger.info("group %s: upgraded from classic to consumer at epoch %d with %d classic members", group_id,
                group.group_epoch, len(group.members))
    return group


def downgrade(classic: GroupCoordinator, consumer: ConsumerGroupCoordinator, group: ConsumerGroup,
              leaving_member_id: str | None, catalog: TopicIds, policy: MigrationPolicy, now_ms: int) -> bool:
    """The last consumer-protocol member `leaving_member_id` goes and classic members remain: the group becomes
    a classic group that rebalances (True), or stays a consumer group (False). `leaving_member_id` None: a
    classic static member has just replaced the last consumer-protocol member (its records already say so);
    the group becomes a Stable classic group, the newcomer holding its predecessor's target, no rebalance."""
    if not can_downgrade(group, leaving_member_id, policy, classic.config.max_size):
        return False
    converted = classic_group_from_consumer(group, leaving_member_id, catalog, now_ms)
    emit_all(classic.emit, consumer_group_tombstones(group))
    del consumer.groups[group.group_id]
    classic.take_back(converted)
    if leaving_member_id is None:
        classic.schedule_heartbeats(converted, now_ms)
    else:
        classic.prepare_rebalance(converted, now_ms, f"Downgrade group {group.group_id} from consumer to classic.")
    logger.info("group %s: downgraded from consumer to classic at generation %d with %d members", group.group_id,
                converted.generation_id, len(converted.members))
    return True
