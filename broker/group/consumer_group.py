"""A KIP-848 consumer group and its members (Kafka's ConsumerGroup and ConsumerGroupMember).

Three epochs drive the group (KIP-848):

- the group epoch, bumped whenever what the assignor sees changes (a member joins, leaves, changes its
  subscription, or a subscribed topic's partitions change);
- the target assignment epoch, the group epoch the current target assignment was computed for;
- each member's epoch: the target assignment epoch the member has reconciled to (it acknowledged all
  the revocations it was asked for, then got its new partitions).

Group states (Kafka's ConsumerGroupState): Empty (no members), Assigning (group epoch > target
assignment epoch), Reconciling (some member not yet at the target), Stable.

Every partition has at most one owner at any time: a member only gets a partition no other member
holds (assigned or pending revocation), which `partition_epochs` tracks (Kafka's currentPartitionEpoch).

KIP-1251 (Kafka 4.3+): each partition a member holds also carries the epoch at which it was assigned to
that member (`ConsumerGroupMember.assignment_epochs`); an offset commit with an epoch older than the
member's is accepted for a partition assigned at or before that epoch (offset_validation.py).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field

from samsa.broker.group.records import TopicPartitions

LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2


class MemberState(enum.IntEnum):
    """Kafka's org.apache.kafka.coordinator.group.modern.MemberState (stored as an int8)."""

    STABLE = 0
    UNREVOKED_PARTITIONS = 1
    UNRELEASED_PARTITIONS = 2
    UNKNOWN = 127


class ConsumerGroupState(enum.Enum):
    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(frozen=True, slots=True)
class ClassicMemberMetadata:
    """What a member using the classic protocol in a consumer group joined with (KIP-848's online migration;
    Kafka's ConsumerGroupMemberMetadataValue.ClassicMemberMetadata): its session timeout and its JoinGroup
    protocols (name, ConsumerProtocolSubscription bytes), the first being the one it is answered with."""

    session_timeout_ms: int
    supported_protocols: tuple[tuple[str, bytes], ...]

    @property
    def protocol_name(self) -> str:
        return self.supported_protocols[0][0] if self.supported_protocols else ""


@dataclass(frozen=True, slots=True)
class ConsumerGroupMember:
    member_id: str
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: MemberState = MemberState.STABLE
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    rebalance_timeout_ms: int = -1
    server_assignor: str | None = None
    assigned_partitions: TopicPartitions = field(default_factory=dict)
    partitions_pending_revocation: TopicPartitions = field(default_factory=dict)
    classic: ClassicMemberMetadata | None = None  # set while the member uses the classic protocol
    # KIP-1251: (topic id, partition) -> the epoch at which the member was assigned it, for every partition in
    # assigned_partitions and partitions_pending_revocation (Kafka's ConsumerGroupMember maps partition -> epoch).
    assignment_epochs: Mapping[tuple[str, int], int] = field(default_factory=dict)

    def assignment_epoch(self, topic_id: str, partition: int) -> int | None:
        """Kafka's assignmentEpoch, then pendingRevocationEpoch: None when the member holds no such partition."""
        if partition in self.assigned_partitions.get(topic_id, ()) or partition in \
                self.partitions_pending_revocation.get(topic_id, ()):
            return self.assignment_epochs.get((topic_id, partition))
        return None

    @property
    def uses_classic_protocol(self) -> bool:
        return self.classic is not None

    def is_reconciled_to(self, target_assignment_epoch: int) -> bool:
        return self.state is MemberState.STABLE and self.member_epoch == target_assignment_epoch


def epochs_for(member: ConsumerGroupMember, assigned: TopicPartitions, pending: TopicPartitions,
               new_epoch: int) -> dict[tuple[str, int], int]:
    """The assignment epochs of a member that now holds `assigned` and `pending`: a partition it held already keeps
    the epoch it was assigned at, a new one gets `new_epoch` (Kafka's CurrentAssignmentBuilder)."""
    old = member.assignment_epochs
    return {(topic_id, p): old.get((topic_id, p), new_epoch)
            for partitions in (assigned, pending) for topic_id, ps in partitions.items() for p in ps}


def uniform_epochs(partitions: TopicPartitions, epoch: int) -> dict[tuple[str, int], int]:
    """Every partition assigned at `epoch` (Kafka's Utils.toAssignmentWithEpochs)."""
    return {(topic_id, p): epoch for topic_id, ps in partitions.items() for p in ps}


def partition_count(partitions: TopicPartitions) -> int:
    return sum(len(ps) for ps in partitions.values())


def without_empty(partitions: dict[str, set[int]] | TopicPartitions) -> TopicPartitions:
    return {t: frozenset(ps) for t, ps in partitions.items() if ps}


class ConsumerGroup:
    """One consumer group's state; the coordinator (consumer_coordinator.py) changes it and writes the
    records that say so."""

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        # Kafka 4.3+ (KAFKA-20268) starts a group at epoch 1 with an empty target at epoch 1, so the first
        # computed target is epoch 2 and a member joining before it is computed reconciles to epoch 1.
        self.group_epoch = 1
        self.assignment_epoch = 1
        # When the target was last computed (0: never, or reset when the group emptied); a new target is
        # computed at most once per consumer.assignment.interval.ms after it (KIP-1263 batching).
        self.assignment_timestamp_ms = 0
        # KIP-1101: the hash of the subscribed topics at the last group epoch bump (metadata_hash.py); 0: none.
        self.metadata_hash = 0
        self.members: dict[str, ConsumerGroupMember] = {}
        self.target_assignment: dict[str, TopicPartitions] = {}
        self.static_members: dict[str, str] = {}  # instance id -> member id
        # (topic id, partition) -> epoch of the member that holds it (assigned or pending revocation).
        self.partition_epochs: dict[tuple[str, int], int] = {}
        # Subscription metadata the target was computed from: topic name -> (topic id, partitions).
        self.subscription_metadata: dict[str, tuple[str, int]] = {}
        # Regex subscriptions -> the topics each resolved to when last written (ConsumerGroupRegularExpression).
        self.resolved_regexes: dict[str, frozenset[str]] = {}
        # Timers: member id -> session deadline; member id -> (epoch, deadline) of a pending revocation.
        self.session_deadlines_ms: dict[str, int] = {}
        self.rebalance_deadlines_ms: dict[str, tuple[int, int]] = {}
        # Classic members: member id -> deadline to rejoin after REBALANCE_IN_PROGRESS, to sync after joining.
        self.join_deadlines_ms: dict[str, int] = {}
        self.sync_deadlines_ms: dict[str, int] = {}

    @property
    def state(self) -> ConsumerGroupState:
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        if any(not m.is_reconciled_to(self.assignment_epoch) for m in self.members.values()):
            return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    def current_partition_epoch(self, topic_id: str, partition: int) -> int:
        return self.partition_epochs.get((topic_id, partition), -1)

    def update_member(self, member: ConsumerGroupMember) -> None:
        """Put `member` in place of its previous version, keeping the partition owners in step."""
        old = self.members.get(member.member_id)
        if old is not None:
            self._release(old)
        self.members[member.member_id] = member
        if member.instance_id is not None:
            self.static_members[member.instance_id] = member.member_id
        self._hold(member)

    def remove_member(self, member_id: str) -> ConsumerGroupMember | None:
        old = self.members.pop(member_id, None)
        if old is None:
            return None
        self._release(old)
        if old.instance_id is not None and self.static_members.get(old.instance_id) == member_id:
            del self.static_members[old.instance_id]
        for timers in (self.session_deadlines_ms, self.rebalance_deadlines_ms, self.join_deadlines_ms,
                       self.sync_deadlines_ms):
            timers.pop(member_id, None)
        return old

    def _hold(self, member: ConsumerGroupMember) -> None:
        for partitions in (member.assigned_partitions, member.partitions_pending_revocation):
            for topic_id, ps in partitions.items():
                for p in ps:
                    self.partition_epochs[(topic_id, p)] = member.member_epoch

    def _release(self, member: ConsumerGroupMember) -> None:
        for partitions in (member.assigned_partitions, member.partitions_pending_revocation):
            for topic_id, ps in partitions.items():
                for p in ps:
                    if self.partition_epochs.get((topic_id, p)) == member.member_epoch:
                        del self.partition_epochs[(topic_id, p)]

    def subscribed_topic_names(self) -> set[str]:
        return {name for m in self.members.values() for name in m.subscribed_topic_names}

    def copy(self) -> ConsumerGroup:
        """A copy to put back if a change's records cannot be written (members and assignments are
        immutable values, so copying the dicts is enough)."""
        other = ConsumerGroup(self.group_id)
        other.group_epoch, other.assignment_epoch = self.group_epoch, self.assignment_epoch
        other.assignment_timestamp_ms, other.metadata_hash = self.assignment_timestamp_ms, self.metadata_hash
        other.members, other.target_assignment = dict(self.members), dict(self.target_assignment)
        other.static_members, other.partition_epochs = dict(self.static_members), dict(self.partition_epochs)
        other.subscription_metadata = dict(self.subscription_metadata)
        other.resolved_regexes = dict(self.resolved_regexes)
        other.session_deadlines_ms = dict(self.session_deadlines_ms)
        other.rebalance_deadlines_ms = dict(self.rebalance_deadlines_ms)
        other.join_deadlines_ms, other.sync_deadlines_ms = dict(self.join_deadlines_ms), dict(self.sync_deadlines_ms)
        return other

    def is_subscribed_to(self, topic: str) -> bool:
        """Kafka's ConsumerGroup.isSubscribedToTopic: by name or through a member's regex."""
        return topic in self.subscription_metadata or any(topic in m.subscribed_topic_names
                                                           for m in self.members.values())

    def classic_member_count(self) -> int:
        return sum(1 for m in self.members.values() if m.classic is not None)

    def all_members_use_classic_protocol_except(self, member_id: str) -> bool:
        """Kafka's ConsumerGroup.allMembersUseClassicProtocolExcept: `member_id` is the last consumer-protocol
        member."""
        member = self.members.get(member_id)
        return (member is not None and member.classic is None
                and self.classic_member_count() == len(self.members) - 1)

    def supports_classic_protocols(self, protocol_type: str, names: set[str]) -> bool:
        """Kafka's ConsumerGroup.supportsClassicProtocols: the consumer protocol type, and (once the group has
        members) one of `names` every classic member supports."""
        if protocol_type != "consumer":
            return False
        if not self.members:
            return bool(names)
        classic = [m.classic for m in self.members.values() if m.classic is not None]
        return any(all(name in {p for p, _ in c.supported_protocols} for c in classic) for name in names)

    def waiting_on_unreleased_partition(self, member: ConsumerGroupMember) -> bool:
        """Kafka's ConsumerGroup.waitingOnUnreleasedPartition: a partition of its target another member holds."""
        if member.state is not MemberState.UNRELEASED_PARTITIONS:
            return False
        for topic_id, ps in self.target_assignment.get(member.member_id, {}).items():
            assigned = member.assigned_partitions.get(topic_id, frozenset())
            if any(p not in assigned and self.current_partition_epoch(topic_id, p) != -1 for p in ps):
                return True
        return False

    def static_member(self, instance_id: str) -> ConsumerGroupMember | None:
        member_id = self.static_members.get(instance_id)
        return None if member_id is None else self.members.get(member_id)
