"""Members using the classic protocol (JoinGroup, SyncGroup, Heartbeat, LeaveGroup) in a KIP-848 consumer group:
KIP-848's online migration, Kafka 4's GroupMetadataManager.classicGroupJoinToConsumerGroup,
classicGroupSyncToConsumerGroup, classicGroupHeartbeatToConsumerGroup and classicGroupLeaveToConsumerGroup.

A classic member is a consumer group member like the others, with its JoinGroup protocols and session timeout
kept beside it (ClassicMemberMetadata). Its JoinGroup is its heartbeat: the subscription and the owned
partitions in its protocol metadata update the member, bump the group epoch, and reconcile it towards its
target; the answer comes at once, with the member's epoch as the generation and no leader, so the member
syncs as a follower and its SyncGroup returns the partitions it owns now, as ConsumerProtocolAssignment bytes.
A rebalance reaches it through REBALANCE_IN_PROGRESS on its Heartbeat (the group epoch moved past its epoch,
or it still has partitions to revoke, or partitions it waited for are free); it then revokes and rejoins,
and the same rule as for the consumer protocol keeps a partition from having two owners. Instead of the
consumer protocol's rebalance timeout it has two timers: rejoin within its rebalance timeout once told to,
and sync within it after joining.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Protocol

from samsa.broker.group.classic_group import JoinRequest, JoinResult, SyncResult
from samsa.broker.group.consumer_group import (
    ClassicMemberMetadata,
    ConsumerGroup,
    ConsumerGroupMember,
    MemberState,
)
from samsa.broker.group.consumer_protocol import encode_assignment, parse_subscription
from samsa.broker.group.reconciliation import Owned
from samsa.broker.group.records import TopicPartitions
from samsa.kproto.errors import ErrorCode

CONSUMER_PROTOCOL_TYPE = "consumer"


class TopicView(Protocol):
    @property
    def topic_id(self) -> str: ...
    @property
    def partitions(self) -> Mapping[int, object]: ...


class TopicCatalog(Protocol):
    """What the coordinator reads of the metadata image (samsa.broker.metadata.image.MetadataImage is one)."""

    @property
    def topics_by_name(self) -> Mapping[str, TopicView]: ...


TopicIds = TopicCatalog


class ClassicMemberError(Exception):
    """A request a coordinator answers with `error` (ConsumerGroupCoordinator's HeartbeatError is one)."""

    def __init__(self, error: ErrorCode) -> None:
        super().__init__(error.name)
        self.error = error


def topic_ids(catalog: TopicIds, partitions: tuple[tuple[str, tuple[int, ...]], ...] | list[tuple[str, list[int]]]
              ) -> TopicPartitions:
    """Partitions by topic name -> by topic id; topics the image does not know are left out (Kafka's
    toTopicPartitions / toTopicPartitionMap)."""
    out: dict[str, frozenset[int]] = {}
    for name, ps in partitions:
        topic = catalog.topics_by_name.get(name)
        if topic is not None and ps:
            topic_id = topic.topic_id
            out[topic_id] = out.get(topic_id, frozenset()) | frozenset(ps)
    return out


def assignment_bytes(catalog: TopicIds, classic: ClassicMemberMetadata | None, protocol_name: str | None,
                     partitions: TopicPartitions) -> bytes:
    """A member's partitions as ConsumerProtocolAssignment bytes, in the version of the subscription it sent
    for `protocol_name` (Kafka's prepareAssignment / ClassicGroup.fromConsumerGroup)."""
    names = {t.topic_id: name for name, t in catalog.topics_by_name.items()}
    metadata = b""
    if classic is not None:
        chosen = [m for n, m in classic.supported_protocols if n == protocol_name] or [
            m for _, m in classic.supported_protocols]
        metadata = chosen[0] if chosen else b""
    version = int.from_bytes(metadata[:2], "big", signed=True) if len(metadata) >= 2 else 0
    by_name = sorted((names[topic_id], sorted(ps)) for topic_id, ps in partitions.items() if topic_id in names)
    return encode_assignment(version, by_name)


class ClassicMembers:
    """The classic protocol's requests against a consumer group; ConsumerGroupCoordinator inherits them."""

    groups: dict[str, ConsumerGroup]
    _downgrade: Callable[[ConsumerGroup, str | None, int], bool] | None

    # Provided by ConsumerGroupCoordinator.
    def update_and_reconcile(self, group: ConsumerGroup, member: ConsumerGroupMember, updated: ConsumerGroupMember,
                             owned: Owned, catalog: TopicIds, now_ms: int) -> ConsumerGroupMember:
        raise NotImplementedError

    def _remove_member(self, group: ConsumerGroup, member_id: str) -> None: ...
    def _bump_group_epoch(self, group: ConsumerGroup) -> None: ...
    def _emit_member(self, group: ConsumerGroup, member: ConsumerGroupMember) -> None: ...
    def _emit_target(self, group: ConsumerGroup, member_id: str) -> None: ...
    def _emit_current(self, group: ConsumerGroup, member: ConsumerGroupMember) -> None: ...
    def refresh_metadata(self, group: ConsumerGroup, catalog: TopicIds) -> bool:
        raise NotImplementedError

    def _max_size(self) -> int:
        raise NotImplementedError

    def has_members(self, group_id: str) -> bool:
        group = self.groups.get(group_id)
        return group is not None and bool(group.members)

    # --- JoinGroup ----------------------------------------------------------------------------

    def classic_join(self, req: JoinRequest, catalog: TopicIds, now_ms: int) -> JoinResult:
        """A classic member's JoinGroup to a consumer group with members (answered at once)."""
        group = self.groups[req.group_id]
        member_id = req.member_id or str(uuid.uuid4())
        unknown = not req.member_id
        if member_id not in group.members and len(group.members) >= self._max_size():
            return JoinResult(ErrorCode.group_max_size_reached, req.member_id)
        if not group.supports_classic_protocols(req.protocol_type, {name for name, _ in req.protocols}):
            return JoinResult(ErrorCode.inconsistent_group_protocol, req.member_id)
        if unknown and req.require_known_member_id and req.group_instance_id is None:
            # KIP-394 as for a classic group: the id first; any id the member comes back with is taken.
            return JoinResult(ErrorCode.member_id_required, member_id)
        subscription = parse_subscription(req.protocols[0][1]) if req.protocols else None
        if subscription is None:
            return JoinResult(ErrorCode.inconsistent_group_protocol, req.member_id)
        try:
            member, replaced = self._joining_member(group, member_id, req.group_instance_id, unknown)
        except ClassicMemberError as e:
            return JoinResult(e.error, req.member_id)
        updated = replace(
            member,
            instance_id=req.group_instance_id if req.group_instance_id is not None else member.instance_id,
            rack_id=subscription.rack_id if subscription.rack_id is not None else member.rack_id,
            rebalance_timeout_ms=req.rebalance_timeout_ms if req.rebalance_timeout_ms != -1
            else member.rebalance_timeout_ms,
            subscribed_topic_names=tuple(sorted(set(subscription.topics))),
            client_id=req.client_id, client_host=req.client_host,
            classic=ClassicMemberMetadata(req.session_timeout_ms, req.protocols))
        owned = topic_ids(catalog, subscription.owned_partitions)
        try:
            final = self.update_and_reconcile(group, member, updated, owned, catalog, now_ms)
        except ClassicMemberError as e:  # a HeartbeatError of the reconciliation
            return JoinResult(e.error, req.member_id)
        # Kafka's validateOnlineDowngradeWithReplacedMemberId: this static member took the place of the last
        # member using the consumer protocol, so the group is all classic now and becomes a classic group.
        downgraded = (replaced is not None and replaced.classic is None and self._downgrade is not None
                      and all(m.classic is not None for m in group.members.values())
                      and self._downgrade(group, None, now_ms))
        if not downgraded:
            group.join_deadlines_ms.pop(member_id, None)
            group.session_deadlines_ms[member_id] = now_ms + req.session_timeout_ms
            group.sync_deadlines_ms[member_id] = now_ms + max(req.rebalance_timeout_ms, 0)
        assert final.classic is not None
        return JoinResult(ErrorCode.none, member_id, final.member_epoch, CONSUMER_PROTOCOL_TYPE,
                          final.classic.protocol_name, "")

    def _joining_member(self, group: ConsumerGroup, member_id: str, instance_id: str | None,
                        unknown: bool) -> tuple[ConsumerGroupMember, ConsumerGroupMember | None]:
        """Kafka's getOrMaybeSubscribe{Dynamic,Static}ConsumerGroupMember for a classic member: a static member
        joining without an id takes its instance's place (whichever protocol the old one used). Returns the
        member and the one it replaced."""
        if instance_id is None:
            return group.members.get(member_id) or ConsumerGroupMember(member_id), None
        existing = group.static_member(instance_id)
        if not unknown:
            if existing is None:
                raise ClassicMemberError(ErrorCode.unknown_member_id)
            if existing.member_id != member_id:
                raise ClassicMemberError(ErrorCode.fenced_instance_id)
            return existing, None
        if existing is None:
            return ConsumerGroupMember(member_id), None
        member = replace(existing, member_id=member_id, member_epoch=0, previous_member_epoch=0)
        target = group.target_assignment.get(existing.member_id)
        self._remove_member(group, existing.member_id)
        group.update_member(member)
        self._emit_member(group, member)
        if target is not None:
            group.target_assignment[member_id] = target
            self._emit_target(group, member_id)
        self._emit_current(group, member)
        return member, existing

    # --- SyncGroup, Heartbeat -----------------------------------------------------------------

    def _classic_member(self, group: ConsumerGroup, member_id: str, instance_id: str | None) -> ConsumerGroupMember:
        """Kafka's validateConsumerGroupMember, then throwIfMemberDoesNotUseClassicProtocol."""
        if instance_id is None:
            member = group.members.get(member_id)
        else:
            member = group.static_member(instance_id)
            if member is not None and member.member_id != member_id:
                raise ClassicMemberError(ErrorCode.fenced_instance_id)
        if member is None or member.classic is None:
            raise ClassicMemberError(ErrorCode.unknown_member_id)
        return member

    def classic_sync(self, group_id: str, generation_id: int, member_id: str, instance_id: str | None,
                     protocol_type: str | None, protocol_name: str | None, catalog: TopicIds,
                     now_ms: int) -> SyncResult:
        group = self.groups[group_id]
        try:
            member = self._classic_member(group, member_id, instance_id)
        except ClassicMemberError as e:
            return SyncResult(e.error)
        assert member.classic is not None
        if generation_id != member.member_epoch:
            return SyncResult(ErrorCode.illegal_generation)
        if ((protocol_type is not None and protocol_type != CONSUMER_PROTOCOL_TYPE)
                or (protocol_name is not None and protocol_name != member.classic.protocol_name)):
            return SyncResult(ErrorCode.inconsistent_group_protocol)
        if group.assignment_epoch > member.member_epoch and member.state is not MemberState.UNREVOKED_PARTITIONS:
            # A newer target assignment is out (Kafka 4.3+, KAFKA-20272: not merely a newer group epoch):
            # rejoin first (unless the member still has partitions to give up).
            group.join_deadlines_ms.setdefault(member.member_id, now_ms + max(member.rebalance_timeout_ms, 0))
            return SyncResult(ErrorCode.rebalance_in_progress)
        group.sync_deadlines_ms.pop(member.member_id, None)
        group.session_deadlines_ms[member.member_id] = now_ms + member.classic.session_timeout_ms
        return SyncResult(ErrorCode.none, protocol_type, protocol_name,
                          assignment_bytes(catalog, member.classic, member.classic.protocol_name,
                                           member.assigned_partitions))

    def classic_heartbeat(self, group_id: str, generation_id: int, member_id: str, instance_id: str | None,
                          now_ms: int) -> ErrorCode:
        group = self.groups[group_id]
        try:
            member = self._classic_member(group, member_id, instance_id)
        except ClassicMemberError as e:
            return e.error
        assert member.classic is not None
        if generation_id != member.member_epoch:
            return ErrorCode.illegal_generation
        group.session_deadlines_ms[member.member_id] = now_ms + member.classic.session_timeout_ms
        if (member.member_epoch < group.assignment_epoch or member.state is MemberState.UNREVOKED_PARTITIONS
                or (member.state is MemberState.UNRELEASED_PARTITIONS
                    and not group.waiting_on_unreleased_partition(member))):
            group.join_deadlines_ms.setdefault(member.member_id, now_ms + max(member.rebalance_timeout_ms, 0))
            return ErrorCode.rebalance_in_progress
        return ErrorCode.none

    # --- LeaveGroup ---------------------------------------------------------------------------

    def classic_leave(self, group_id: str, members: list[tuple[str, str | None]], catalog: TopicIds
                      ) -> list[tuple[str, str | None, ErrorCode]]:
        """Remove classic members; the group epoch is bumped once for them all (no downgrade: that follows
        only a consumer-protocol member's departure)."""
        group = self.groups[group_id]
        results: list[tuple[str, str | None, ErrorCode]] = []
        removed = False
        for member_id, instance_id in members:
            if instance_id is None:
                member = group.members.get(member_id)
            else:
                member = group.static_member(instance_id)
                if member is not None and member_id and member.member_id != member_id:
                    results.append((member_id, instance_id, ErrorCode.fenced_instance_id))
                    continue
            if member is None or member.classic is None:
                results.append((member_id, instance_id, ErrorCode.unknown_member_id))
                continue
            self._remove_member(group, member.member_id)
            results.append((member.member_id, instance_id, ErrorCode.none))
            removed = True
        if removed:
            self.refresh_metadata(group, catalog)
            self._bump_group_epoch(group)
        return results
