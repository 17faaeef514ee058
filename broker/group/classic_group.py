"""A classic group and its members, and the values the coordinator takes and answers with (Kafka's ClassicGroup).

A Group changes state only through `transition(event)`, which the table in `state.py` checks. What a group
can decide about itself (its protocol, its leader, removing or replacing a member, the record that stores it,
its description) lives here; the coordinator (`coordinator.py`) drives the rebalance protocol over many groups.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Generic, TypeVar

from samsa.broker.group.consumer_protocol import subscribed_topics
from samsa.broker.group.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    encode_group_metadata_value,
    encode_key,
)
from samsa.broker.group.state import GroupEvent, GroupState, next_state
from samsa.kproto.errors import ErrorCode

T = TypeVar("T")

CONSUMER_PROTOCOL_TYPE = "consumer"
NO_GENERATION = -1


class Pending(Generic[T]):
    """The eventual answer of a delayed operation; the shell registers a callback to wake its waiter."""

    __slots__ = ("_callbacks", "result")

    def __init__(self, result: T | None = None) -> None:
        self.result: T | None = result
        self._callbacks: list[Callable[[], None]] = []

    @property
    def done(self) -> bool:
        return self.result is not None

    def complete(self, result: T) -> None:
        if self.result is not None:
            return
        self.result = result
        callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback()

    def on_done(self, callback: Callable[[], None]) -> None:
        if self.result is not None:
            callback()
        else:
            self._callbacks.append(callback)


@dataclass(frozen=True, slots=True)
class JoinedMember:
    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True, slots=True)
class JoinResult:
    error: ErrorCode
    member_id: str
    generation_id: int = NO_GENERATION
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str = ""
    skip_assignment: bool = False
    members: tuple[JoinedMember, ...] = ()


@dataclass(frozen=True, slots=True)
class SyncResult:
    error: ErrorCode
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclass(frozen=True, slots=True)
class JoinRequest:
    group_id: str
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]
    require_known_member_id: bool = True  # JoinGroup v4+
    supports_skip_assignment: bool = True  # JoinGroup v9+
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class OffsetAndMetadata:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp_ms: int
    expire_timestamp_ms: int | None = None


@dataclass(frozen=True, slots=True)
class GroupRecord:
    """A record for the group's `__consumer_offsets` partition; value None is a tombstone."""

    group_id: str
    key: bytes
    value: bytes | None
    # Written by a timer (a session expired, a join deadline passed) rather than for a request: no
    # client is there to be answered an error, so a failed write is retried (Kafka's CoordinatorTimer
    # reschedules a failed timer write) instead of reverted.
    by_timer: bool = False


@dataclass(frozen=True, slots=True)
class MemberDescription:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupDescription:
    group_id: str
    state: GroupState
    protocol_type: str
    protocol_name: str
    members: tuple[MemberDescription, ...]


@dataclass(eq=False, slots=True)
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]
    assignment: bytes = b""
    join_waiter: Pending[JoinResult] | None = None
    sync_waiter: Pending[SyncResult] | None = None
    heartbeat_deadline_ms: int = 0
    is_new: bool = False

    def metadata(self, protocol_name: str | None) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol_name:
                return metadata
        return b""

    def matches(self, protocols: tuple[tuple[str, bytes], ...]) -> bool:
        return self.protocols == protocols

    @property
    def awaiting_join(self) -> bool:
        return self.join_waiter is not None

    @property
    def awaiting_sync(self) -> bool:
        return self.sync_waiter is not None


@dataclass(frozen=True, slots=True)
class Membership:
    """Who is in a group and where its rebalance stands, taken before a JoinGroup or LeaveGroup whose
    record may not be written: `Group.restore` puts it back (Kafka 4 reverts a failed static-member
    replacement, and its CoordinatorRuntime reverts any failed request write)."""

    state: GroupState
    previous_state: GroupState
    state_timestamp_ms: int
    generation_id: int
    protocol_type: str | None
    protocol_name: str | None
    leader_id: str | None
    members: tuple[Member, ...]  # copies: a change mutates the member objects (assignment, waiters)
    static_members: dict[str, str]
    pending_members: dict[str, int]
    pending_sync_members: frozenset[str]
    join_deadline_ms: int | None
    initial_delay_remaining_ms: int | None
    new_member_added: bool
    sync_deadline_ms: int | None


@dataclass(eq=False, slots=True)
class Group:
    group_id: str
    state: GroupState = GroupState.EMPTY
    previous_state: GroupState = GroupState.EMPTY
    state_timestamp_ms: int = -1
    generation_id: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)  # group.instance.id -> member id
    pending_members: dict[str, int] = field(default_factory=dict)  # member id -> expiry (MEMBER_ID_REQUIRED)
    pending_sync_members: set[str] = field(default_factory=set)
    offsets: dict[tuple[str, int], OffsetAndMetadata] = field(default_factory=dict)
    # timers
    join_deadline_ms: int | None = None
    initial_delay_remaining_ms: int | None = None  # set while the first rebalance is being delayed
    new_member_added: bool = False
    sync_deadline_ms: int | None = None
    # The leader's assignment (generation, member id -> assignment) while its record is being written.
    assignment_in_flight: tuple[int, dict[str, bytes]] | None = None

    def transition(self, event: GroupEvent, now_ms: int) -> None:
        """Move by the table in state.py; an event it does not allow there raises IllegalGroupTransition."""
        target = next_state(self.state, event)
        self.previous_state = self.state
        self.state = target
        self.state_timestamp_ms = now_ms

    @property
    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def has_all_members_joined(self) -> bool:
        return all(m.awaiting_join for m in self.members.values()) and not self.pending_members

    def supports_protocols(self, protocol_type: str, protocols: Iterable[str]) -> bool:
        names = list(protocols)
        if not self.members:
            return bool(protocol_type) and bool(names)
        if protocol_type != self.protocol_type:
            return False
        common = self.candidate_protocols()
        return any(name in common for name in names)

    def candidate_protocols(self) -> list[str]:
        """Protocols every member supports, in the order of some member's preference."""
        members = list(self.members.values())
        if not members:
            return []
        supported = set.intersection(*({name for name, _ in m.protocols} for m in members))
        return [name for name, _ in members[0].protocols if name in supported]

    def select_protocol(self) -> str:
        # Kafka's ClassicGroup.selectProtocol: every member votes for its most preferred candidate.
        candidates = self.candidate_protocols()
        assert candidates, f"group {self.group_id} has no common protocol"
        votes = dict.fromkeys(candidates, 0)
        for m in self.members.values():
            for name, _ in m.protocols:
                if name in votes:
                    votes[name] += 1
                    break
        return max(candidates, key=lambda name: votes[name])

    def subscribed_topics(self) -> set[str] | None:
        """The union of the members' consumer subscriptions, None when unknown (not a consumer group)."""
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE or self.protocol_name is None:
            return None
        topics: set[str] = set()
        for m in self.members.values():
            subscribed = subscribed_topics(m.metadata(self.protocol_name))
            if subscribed is None:
                return None
            topics |= subscribed
        return topics

    def validate_member(self, member_id: str, group_instance_id: str | None) -> ErrorCode:
        """Kafka's ClassicGroup.validateMember."""
        if group_instance_id is not None:
            existing = self.static_members.get(group_instance_id)
            if existing is None:
                return ErrorCode.unknown_member_id
            if existing != member_id:
                return ErrorCode.fenced_instance_id
            return ErrorCode.none
        return ErrorCode.none if member_id in self.members else ErrorCode.unknown_member_id

    def remove_member(self, member: Member, error: ErrorCode) -> None:
        """Kafka's ClassicGroup.remove: the member goes, its waiters are answered with `error`."""
        del self.members[member.member_id]
        instance_id = member.group_instance_id
        if instance_id is not None and self.static_members.get(instance_id) == member.member_id:
            del self.static_members[instance_id]
        self.pending_sync_members.discard(member.member_id)
        if member.join_waiter is not None:
            waiter, member.join_waiter = member.join_waiter, None
            waiter.complete(JoinResult(error, member.member_id))
        if member.sync_waiter is not None:
            sync, member.sync_waiter = member.sync_waiter, None
            sync.complete(SyncResult(error))
        if self.leader_id == member.member_id:
            self.leader_id = next(iter(self.members), None)

    def remove_pending_sync_members(self) -> None:
        """Members that never sent SyncGroup after the join phase are gone (Kafka's pending sync timeout)."""
        for member_id in list(self.pending_sync_members):
            late = self.members.get(member_id)
            if late is not None:
                self.remove_member(late, ErrorCode.unknown_member_id)
        self.pending_sync_members.clear()

    def leaving_members(self, members: list[tuple[str, str | None]]
                        ) -> tuple[list[tuple[str, str | None, ErrorCode]], list[Member], bool]:
        """LeaveGroup's (member_id, group_instance_id) pairs resolved against the group: the answer for
        each, the members to remove, and whether a pending member left (it goes here)."""
        results: list[tuple[str, str | None, ErrorCode]] = []
        leaving: list[Member] = []
        pending_left = False
        for member_id, instance_id in members:
            if member_id in self.pending_members:
                del self.pending_members[member_id]
                pending_left = True
                results.append((member_id, instance_id, ErrorCode.none))
                continue
            if instance_id is not None:
                existing = self.static_members.get(instance_id)
                if existing is None:
                    results.append((member_id, instance_id, ErrorCode.unknown_member_id))
                    continue
                if member_id and existing != member_id:
                    results.append((member_id, instance_id, ErrorCode.fenced_instance_id))
                    continue
                member_id = existing
            member = self.members.get(member_id)
            if member is None:
                results.append((member_id, instance_id, ErrorCode.unknown_member_id))
                continue
            if member not in leaving:
                leaving.append(member)
            results.append((member_id, instance_id, ErrorCode.none))
        return results, leaving, pending_left

    def may_replace_static_member(self, member_id: str, group_instance_id: str | None) -> bool:
        """Whether a JoinGroup may replace a static member of this Stable group, the one join that writes
        a record (KIP-345: the instance comes back without its member id)."""
        return (not member_id and group_instance_id is not None and self.state is GroupState.STABLE
                and group_instance_id in self.static_members)

    def replace_static_member(self, group_instance_id: str, member: Member) -> None:
        """Kafka's ClassicGroup.replaceStaticMember (KIP-345): `member` takes the old member's place
        (assignment, leadership, pending sync) and the old member id is fenced."""
        old_id = self.static_members[group_instance_id]
        old = self.members.pop(old_id)
        if old.join_waiter is not None:
            old.join_waiter.complete(JoinResult(ErrorCode.fenced_instance_id, old_id))
            old.join_waiter = None
        if old.sync_waiter is not None:
            old.sync_waiter.complete(SyncResult(ErrorCode.fenced_instance_id))
            old.sync_waiter = None
        member.assignment = old.assignment
        self.members[member.member_id] = member
        self.static_members[group_instance_id] = member.member_id
        if self.leader_id == old_id:
            self.leader_id = member.member_id
        if old_id in self.pending_sync_members:
            self.pending_sync_members.discard(old_id)
            self.pending_sync_members.add(member.member_id)

    def maybe_elect_joined_leader(self) -> bool:
        """Keep the leader if it rejoined, else make the first rejoined member leader; False if nobody did."""
        leader = self.members.get(self.leader_id) if self.leader_id else None
        if leader is not None and leader.awaiting_join:
            return True
        for member in self.members.values():
            if member.awaiting_join:
                self.leader_id = member.member_id
                return True
        return False

    def membership(self) -> Membership:
        return Membership(self.state, self.previous_state, self.state_timestamp_ms, self.generation_id,
                          self.protocol_type, self.protocol_name, self.leader_id,
                          tuple(replace(m) for m in self.members.values()), dict(self.static_members),
                          dict(self.pending_members), frozenset(self.pending_sync_members), self.join_deadline_ms,
                          self.initial_delay_remaining_ms, self.new_member_added, self.sync_deadline_ms)

    def restore(self, before: Membership) -> None:
        """Put back what `membership` took. A waiter answered since (the change fenced or removed its
        member) stays answered: its client was told, so the restored member no longer waits."""
        self.state, self.previous_state = before.state, before.previous_state
        self.state_timestamp_ms, self.generation_id = before.state_timestamp_ms, before.generation_id
        self.protocol_type, self.protocol_name, self.leader_id = before.protocol_type, before.protocol_name, \
            before.leader_id
        self.members = {}
        for copy in before.members:
            member = replace(copy)
            if member.join_waiter is not None and member.join_waiter.done:
                member.join_waiter = None
            if member.sync_waiter is not None and member.sync_waiter.done:
                member.sync_waiter = None
            self.members[member.member_id] = member
        self.static_members = dict(before.static_members)
        self.pending_members = dict(before.pending_members)
        self.pending_sync_members = set(before.pending_sync_members)
        self.join_deadline_ms, self.sync_deadline_ms = before.join_deadline_ms, before.sync_deadline_ms
        self.initial_delay_remaining_ms = before.initial_delay_remaining_ms
        self.new_member_added = before.new_member_added

    def set_assignment(self, assignment: dict[str, bytes]) -> None:
        for member in self.members.values():
            member.assignment = assignment.get(member.member_id, b"")

    def propagate_assignment(self) -> None:
        """Kafka's propagateAssignment: every member waiting in SyncGroup gets its assignment."""
        for member in self.members.values():
            if member.sync_waiter is not None:
                waiter, member.sync_waiter = member.sync_waiter, None
                waiter.complete(SyncResult(ErrorCode.none, self.protocol_type, self.protocol_name, member.assignment))

    def propagate_assignment_error(self, error: ErrorCode) -> None:
        for member in self.members.values():
            member.assignment = b""
            if member.sync_waiter is not None:
                waiter, member.sync_waiter = member.sync_waiter, None
                waiter.complete(SyncResult(error))

    def join_response(self, member: Member, *, skip_assignment: bool) -> JoinResult:
        """The JoinGroup answer of the current generation; the leader's lists every member's metadata."""
        members: tuple[JoinedMember, ...] = ()
        if self.leader_id == member.member_id:
            members = tuple(JoinedMember(m.member_id, m.group_instance_id, m.metadata(self.protocol_name))
                            for m in self.members.values())
        return JoinResult(ErrorCode.none, member.member_id, self.generation_id, self.protocol_type,
                          self.protocol_name, self.leader_id or "", skip_assignment, members)

    def join_error(self, error: ErrorCode) -> JoinResult:
        """A JoinGroup whose write failed: the error, no member id, and the group as it is (Kafka answers
        a failed static-member replacement so)."""
        return JoinResult(error, "", self.generation_id, self.protocol_type, self.protocol_name, self.leader_id or "")

    def metadata_record(self, assignment: dict[str, bytes] | None = None) -> GroupRecord:
        """The group's GroupMetadata record (Kafka: GroupCoordinatorRecordHelpers.newGroupMetadataRecord)."""
        members = tuple(
            MemberMetadata(m.member_id, m.group_instance_id, m.client_id, m.client_host, m.rebalance_timeout_ms,
                           m.session_timeout_ms, m.metadata(self.protocol_name),
                           (assignment or {}).get(m.member_id, m.assignment))
            for m in self.members.values()
        )
        value = GroupMetadataValue(self.protocol_type or "", self.generation_id, self.protocol_name,
                                   self.leader_id, self.state_timestamp_ms, members)
        return GroupRecord(self.group_id, encode_key(GroupMetadataKey(self.group_id)),
                           encode_group_metadata_value(value))

    def replay(self, value: GroupMetadataValue, now_ms: int) -> None:
        """Take the state one GroupMetadata record stored: Stable with its members, or Empty (a replay
        restores a state, it is no transition)."""
        self.protocol_type = value.protocol_type or None
        self.generation_id = value.generation_id
        self.protocol_name = value.protocol_name
        self.leader_id = value.leader_id
        self.state_timestamp_ms = value.current_state_timestamp_ms
        self.members = {}
        self.static_members = {}
        for m in value.members:
            protocols = ((value.protocol_name, m.subscription),) if value.protocol_name is not None else ()
            member = Member(m.member_id, m.group_instance_id, m.client_id, m.client_host, m.rebalance_timeout_ms,
                            m.session_timeout_ms, value.protocol_type, protocols, assignment=m.assignment)
            member.heartbeat_deadline_ms = now_ms + m.session_timeout_ms
            self.members[m.member_id] = member
            if m.group_instance_id is not None:
                self.static_members[m.group_instance_id] = m.member_id
        self.state = GroupState.STABLE if self.members else GroupState.EMPTY
        self.previous_state = self.state
        if self.leader_id not in self.members:
            self.leader_id = next(iter(self.members), None)

    def describe(self) -> GroupDescription:
        """DescribeGroups: metadata, assignments and the protocol only once the group is Stable."""
        stable = self.state is GroupState.STABLE
        members = tuple(
            MemberDescription(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                              m.metadata(self.protocol_name) if stable else b"", m.assignment if stable else b"")
            for m in self.members.values()
        )
        return GroupDescription(self.group_id, self.state, self.protocol_type or "",
                                (self.protocol_name or "") if stable else "", members)

    def next_deadline_ms(self) -> int | None:
        """The earliest of the group's timers: pending members, heartbeats, the join and sync deadlines."""
        deadlines = [*self.pending_members.values(), *(m.heartbeat_deadline_ms for m in self.members.values())]
        if self.join_deadline_ms is not None:
            deadlines.append(self.join_deadline_ms)
        if self.sync_deadline_ms is not None:
            deadlines.append(self.sync_deadline_ms)
        return min(deadlines, default=None)
