"""The classic group coordinator: a pure state machine of groups, members, generations and offsets.

It mirrors Kafka 4.1's GroupMetadataManager (the classic rebalance protocol over ClassicGroup, in
`classic_group.py`) and OffsetMetadataManager (`offsets.py`). No I/O and no clock: every call takes
`now_ms`, `tick(now_ms)` fires the timers (session expiry, join/sync deadlines, the initial rebalance
delay), and randomness comes from a seeded `random.Random`. The shell (`broker/group/service.py`)
persists what `drain_records()` returns to `__consumer_offsets` before it answers, and turns `Pending`
results (JoinGroup and SyncGroup are delayed operations) into awaitable events.

Every state change is an event of the table in `broker/group/state.py`, (state, event) -> state:

    PREPARE_REBALANCE  Empty | CompletingRebalance | Stable -> PreparingRebalance
    JOIN_COMPLETED     PreparingRebalance -> CompletingRebalance
    ALL_MEMBERS_LEFT   PreparingRebalance -> Empty
    LEADER_SYNCED      CompletingRebalance -> Stable
    DELETED            any -> Dead
"""

from __future__ import annotations

import logging
import random
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace

from samsa.broker.group import offsets as offset_manager
from samsa.broker.group.classic_group import (
    Group,
    GroupDescription,
    GroupRecord,
    JoinRequest,
    JoinResult,
    Member,
    OffsetAndMetadata,
    Pending,
    SyncResult,
)
from samsa.broker.group.classic_loading import ClassicLoading
from samsa.broker.group.offsets import OffsetExpiry
from samsa.broker.group.records import GroupMetadataKey, encode_key
from samsa.broker.group.state import GroupEvent, GroupState, can_handle
from samsa.broker.observability.rebalance import RebalanceMetrics
from samsa.kproto.errors import ErrorCode

__all__ = ["GroupConfig", "GroupCoordinator", "GroupDescription", "GroupRecord", "JoinRequest", "JoinResult",
           "OffsetAndMetadata", "OffsetExpiry", "Pending", "SyncResult"]

logger = logging.getLogger(__name__)


# A timer of 0 ms fires 1 ms on, after the requests already under way (Kafka's goes to the back of its queue).
TIMER_RESOLUTION_MS = 1


@dataclass(frozen=True, slots=True)
class GroupConfig:
    """The broker settings the coordinator obeys (Kafka's names in the comments)."""

    min_session_timeout_ms: int = 6000  # group.min.session.timeout.ms
    max_session_timeout_ms: int = 1_800_000  # group.max.session.timeout.ms
    initial_rebalance_delay_ms: int = 3000  # group.initial.rebalance.delay.ms
    max_size: int = 2**31 - 1  # group.max.size
    offsets_retention_ms: int = 7 * 24 * 3600 * 1000  # offsets.retention.minutes
    offset_metadata_max_bytes: int = 4096  # offset.metadata.max.bytes
    new_member_join_timeout_ms: int = 300_000  # Kafka's classicGroupNewMemberJoinTimeoutMs


class GroupCoordinator(ClassicLoading):
    """All groups of one broker (every `__consumer_offsets` partition it leads; one broker today)."""

    def __init__(self, config: GroupConfig, rng: random.Random | None = None) -> None:
        self.config = config
        self._rng = rng or random.Random()
        self.groups: dict[str, Group] = {}
        self._records: list[GroupRecord] = []
        self.rebalances = RebalanceMetrics()

    # --- plumbing ------------------------------------------------------------------------------

    def unload(self, owned: Callable[[str], bool]) -> int:
        """Forget the groups `owned` picks (their partition moved to another broker: Kafka's
        onResignation); that broker replays them from the log. Returns how many went."""
        gone = [g for g in self.groups if owned(g)]
        for group_id in gone:
            del self.groups[group_id]
        return len(gone)

    def drain_records(self) -> list[GroupRecord]:
        """Records the shell must append to `__consumer_offsets` (in order) before answering."""
        records, self._records = self._records, []
        return records

    def _new_member_id(self, prefix: str) -> str:
        return f"{prefix}-{uuid.UUID(int=self._rng.getrandbits(128), version=4)}"

    def _get_or_create(self, group_id: str, now_ms: int) -> Group:
        group = self.groups.get(group_id)
        if group is None or group.state is GroupState.DEAD:
            group = Group(group_id, state_timestamp_ms=now_ms)
            self.groups[group_id] = group
        return group

    def _live_group(self, group_id: str) -> Group | None:
        group = self.groups.get(group_id)
        return None if group is None or group.state is GroupState.DEAD else group

    def _store_group(self, group: Group, assignment: dict[str, bytes] | None = None) -> None:
        self._records.append(group.metadata_record(assignment))

    def prepare_rebalance(self, group: Group, now_ms: int, reason: str) -> None:
        """Start a rebalance of a group the consumer protocol handed back (KIP-848's online downgrade)."""
        self.schedule_heartbeats(group, now_ms)
        self._prepare_rebalance(group, now_ms, reason)

    def schedule_heartbeats(self, group: Group, now_ms: int) -> None:
        for member in group.members.values():
            self._schedule_heartbeat(member, now_ms)

    def _schedule_heartbeat(self, member: Member, now_ms: int, timeout_ms: int | None = None) -> None:
        member.heartbeat_deadline_ms = now_ms + (member.session_timeout_ms if timeout_ms is None else timeout_ms)

    # --- JoinGroup ----------------------------------------------------------------------------

    def join_group(self, req: JoinRequest, now_ms: int) -> Pending[JoinResult]:
        def fail(error: ErrorCode, member_id: str = req.member_id) -> Pending[JoinResult]:
            return Pending(JoinResult(error, member_id))

        if not req.group_id:
            return fail(ErrorCode.invalid_group_id)
        if not self.config.min_session_timeout_ms <= req.session_timeout_ms <= self.config.max_session_timeout_ms:
            return fail(ErrorCode.invalid_session_timeout)
        existing = self._live_group(req.group_id)
        if existing is not None:
            self._fire_timers(existing, now_ms)
            existing = self._live_group(req.group_id)
        if existing is None and req.member_id:
            return fail(ErrorCode.unknown_member_id)
        group = existing or self._get_or_create(req.group_id, now_ms)
        names = [name for name, _ in req.protocols]
        known = bool(req.member_id) and (req.member_id in group.members or req.member_id in group.pending_members)
        if (not known and req.group_instance_id not in group.static_members
                and len(group.members) + len(group.pending_members) >= self.config.max_size):
            return fail(ErrorCode.group_max_size_reached)
        if not group.supports_protocols(req.protocol_type, names):
            if existing is None:
                del self.groups[req.group_id]
            return fail(ErrorCode.inconsistent_group_protocol)
        if not req.member_id:
            return self._join_new_member(group, req, now_ms)
        return self._join_existing_member(group, req, now_ms)

    def _join_new_member(self, group: Group, req: JoinRequest, now_ms: int) -> Pending[JoinResult]:
        if req.group_instance_id is not None:
            member_id = self._new_member_id(req.group_instance_id)
            if req.group_instance_id in group.static_members:
                return self._replace_static_member(group, req, member_id, now_ms)
            return self._add_member_and_rebalance(group, req, member_id, now_ms)
        member_id = self._new_member_id(req.client_id)
        if req.require_known_member_id:
            # KIP-394: hand out the id first, so a client that times out on a long join can retry
            # with it instead of leaving a trail of unknown members behind.
            group.pending_members[member_id] = now_ms + req.session_timeout_ms
            return Pending(JoinResult(ErrorCode.member_id_required, member_id))
        return self._add_member_and_rebalance(group, req, member_id, now_ms)

    def _join_existing_member(self, group: Group, req: JoinRequest, now_ms: int) -> Pending[JoinResult]:
        if req.member_id in group.pending_members:
            if req.group_instance_id is not None:
                return Pending(JoinResult(ErrorCode.invalid_request, req.member_id))
            return self._add_member_and_rebalance(group, req, req.member_id, now_ms)
        error = group.validate_member(req.member_id, req.group_instance_id)
        if error != ErrorCode.none:
            return Pending(JoinResult(error, req.member_id))
        member = group.members[req.member_id]
        match group.state:
            case GroupState.PREPARING_REBALANCE:
                return self._update_member_and_rebalance(group, member, req, now_ms)
            case GroupState.COMPLETING_REBALANCE:
                if member.matches(req.protocols):
                    # The member lost its join response: give it the current generation again.
                    return Pending(group.join_response(member, skip_assignment=False))
                return self._update_member_and_rebalance(group, member, req, now_ms)
            case GroupState.STABLE:
                if group.leader_id == member.member_id or not member.matches(req.protocols):
                    # A leader's JoinGroup forces a rebalance (its assignment may depend on metadata
                    # the coordinator cannot see, e.g. new partitions).
                    return self._update_member_and_rebalance(group, member, req, now_ms)
                return Pending(JoinResult(ErrorCode.none, member.member_id, group.generation_id, group.protocol_type,
                                          group.protocol_name, group.leader_id or ""))
            case _:
                return Pending(JoinResult(ErrorCode.unknown_member_id, req.member_id))

    def _add_member_and_rebalance(self, group: Group, req: JoinRequest, member_id: str,
                                  now_ms: int) -> Pending[JoinResult]:
        member = Member(member_id, req.group_instance_id, req.client_id, req.client_host, req.rebalance_timeout_ms,
                        req.session_timeout_ms, req.protocol_type, req.protocols, is_new=True)
        if group.state is GroupState.PREPARING_REBALANCE and group.previous_state is GroupState.EMPTY:
            group.new_member_added = True
        waiter: Pending[JoinResult] = Pending()
        member.join_waiter = waiter
        if not group.members:
            group.protocol_type = req.protocol_type
        group.members[member_id] = member
        group.pending_members.pop(member_id, None)
        if req.group_instance_id is not None:
            group.static_members[req.group_instance_id] = member_id
        if group.leader_id is None:
            group.leader_id = member_id
        # New members cannot heartbeat yet; bound how long a vanished one can hold up the join phase.
        self._schedule_heartbeat(member, now_ms, self.config.new_member_join_timeout_ms)
        self._maybe_prepare_rebalance_or_complete_join(group, now_ms, f"adding member {member_id}")
        return waiter

    def _update_member_and_rebalance(self, group: Group, member: Member, req: JoinRequest,
                                     now_ms: int) -> Pending[JoinResult]:
        member.protocols = req.protocols
        member.rebalance_timeout_ms = req.rebalance_timeout_ms
        member.session_timeout_ms = req.session_timeout_ms
        member.client_id = req.client_id
        member.client_host = req.client_host
        waiter: Pending[JoinResult] = Pending()
        if member.join_waiter is not None:
            # A retried JoinGroup replaces the one the client gave up on.
            member.join_waiter.complete(JoinResult(ErrorCode.unknown_member_id, member.member_id))
        member.join_waiter = waiter
        self._maybe_prepare_rebalance_or_complete_join(group, now_ms, f"member {member.member_id} rejoined")
        return waiter

    def _replace_static_member(self, group: Group, req: JoinRequest, new_member_id: str,
                               now_ms: int) -> Pending[JoinResult]:
        """KIP-345: a static member that comes back gets the old member's place, fencing the old id."""
        assert req.group_instance_id is not None
        member = Member(new_member_id, req.group_instance_id, req.client_id, req.client_host,
                        req.rebalance_timeout_ms, req.session_timeout_ms, req.protocol_type, req.protocols)
        group.replace_static_member(req.group_instance_id, member)
        self._schedule_heartbeat(member, now_ms)
        match group.state:
            case GroupState.STABLE:
                if group.select_protocol() == group.protocol_name:
                    # Same protocol for the next generation: no rebalance, the member resumes its assignment.
                    self._store_group(group)
                    is_leader = group.leader_id == new_member_id
                    result = group.join_response(member, skip_assignment=is_leader)
                    if is_leader and not req.supports_skip_assignment:
                        result = JoinResult(result.error, result.member_id, result.generation_id,
                                            result.protocol_type, result.protocol_name, result.leader_id)
                    return Pending(result)
                waiter: Pending[JoinResult] = Pending()
                member.join_waiter = waiter
                self._prepare_rebalance(group, now_ms, f"static member {req.group_instance_id} changed protocols")
                return waiter
            case GroupState.COMPLETING_REBALANCE | GroupState.PREPARING_REBALANCE:
                waiter = Pending()
                member.join_waiter = waiter
                if group.state is GroupState.COMPLETING_REBALANCE:
                    self._prepare_rebalance(group, now_ms, f"static member {req.group_instance_id} rejoined")
                else:
                    self._maybe_complete_join(group, now_ms)
                return waiter
            case _:
                raise AssertionError(f"static member of group {group.group_id} in state {group.state}")

    # --- rebalance phases ---------------------------------------------------------------------

    def _maybe_prepare_rebalance_or_complete_join(self, group: Group, now_ms: int, reason: str) -> None:
        if can_handle(group.state, GroupEvent.PREPARE_REBALANCE):
            self._prepare_rebalance(group, now_ms, reason)
        else:
            self._maybe_complete_join(group, now_ms)

    def _prepare_rebalance(self, group: Group, now_ms: int, reason: str) -> None:
        logger.info("group %s: preparing to rebalance in state %s with generation %d: %s", group.group_id,
                    group.state.value, group.generation_id, reason)
        if group.state is GroupState.COMPLETING_REBALANCE:
            group.propagate_assignment_error(ErrorCode.rebalance_in_progress)
        group.pending_sync_members.clear()
        group.sync_deadline_ms = None
        initial = group.state is GroupState.EMPTY
        group.transition(GroupEvent.PREPARE_REBALANCE, now_ms)
        if initial:
            # From a timer even with a delay of 0 (Kafka's): JoinGroups queued behind share generation 1.
            delay_ms = self.config.initial_rebalance_delay_ms
            group.join_deadline_ms = now_ms + max(delay_ms, TIMER_RESOLUTION_MS)
            group.initial_delay_remaining_ms = max(group.rebalance_timeout_ms - delay_ms, 0)
        else:
            group.join_deadline_ms = now_ms + group.rebalance_timeout_ms
            group.initial_delay_remaining_ms = None
            self._maybe_complete_join(group, now_ms)

    def _maybe_complete_join(self, group: Group, now_ms: int) -> None:
        # The first rebalance of a group waits out the initial delay even when everyone has joined.
        if (group.state is GroupState.PREPARING_REBALANCE and group.initial_delay_remaining_ms is None
                and group.has_all_members_joined()):
            self._complete_join(group, now_ms)

    def _on_join_deadline(self, group: Group, now_ms: int) -> None:
        if group.initial_delay_remaining_ms is not None:
            remaining = group.initial_delay_remaining_ms
            if group.new_member_added and remaining > 0:
                # Kafka's tryCompleteInitialRebalanceElseSchedule: a member arrived, so one more round.
                group.new_member_added = False
                delay_ms = min(self.config.initial_rebalance_delay_ms, remaining)
                group.initial_delay_remaining_ms = max(remaining - delay_ms, 0)
                group.join_deadline_ms = now_ms + max(delay_ms, TIMER_RESOLUTION_MS)
                return
            group.new_member_added = False
        self._complete_join(group, now_ms)

    def _complete_join(self, group: Group, now_ms: int) -> None:
        assert group.state is GroupState.PREPARING_REBALANCE
        group.join_deadline_ms = None
        group.initial_delay_remaining_ms = None
        group.new_member_added = False
        for member in [m for m in group.members.values() if not m.awaiting_join and m.group_instance_id is None]:
            group.remove_member(member, ErrorCode.unknown_member_id)
        # Pending members stay: their JoinGroup starts the next rebalance (Kafka's completeClassicGroupJoin).
        if group.members and not group.maybe_elect_joined_leader():
            # Nobody rejoined (only static members that went quiet): wait for session timeouts.
            group.join_deadline_ms = now_ms + group.rebalance_timeout_ms
            return
        group.generation_id += 1
        if not group.members:
            group.protocol_name = None
            group.leader_id = None
            group.transition(GroupEvent.ALL_MEMBERS_LEFT, now_ms)
            self._store_group(group)
            return
        group.protocol_name = group.select_protocol()
        rebalance_ms = now_ms - group.state_timestamp_ms  # since it entered PreparingRebalance
        group.transition(GroupEvent.JOIN_COMPLETED, now_ms)
        self.rebalances.observe(rebalance_ms)
        logger.info("group %s: rebalance completed in %d ms: generation %d (%s) with %d member(s), leader %s",
                    group.group_id, rebalance_ms, group.generation_id, group.protocol_name, len(group.members),
                    group.leader_id)
        for member in group.members.values():
            waiter = member.join_waiter
            member.join_waiter = None
            if waiter is not None:
                waiter.complete(group.join_response(member, skip_assignment=False))
            self._schedule_heartbeat(member, now_ms)
            member.is_new = False
            group.pending_sync_members.add(member.member_id)
        group.sync_deadline_ms = now_ms + group.rebalance_timeout_ms

    def _remove_member_and_update_group(self, group: Group, member: Member, now_ms: int) -> None:
        group.remove_member(member, ErrorCode.unknown_member_id)
        match group.state:
            case GroupState.STABLE | GroupState.COMPLETING_REBALANCE:
                self._prepare_rebalance(group, now_ms, f"removing member {member.member_id}")
            case GroupState.PREPARING_REBALANCE:
                self._maybe_complete_join(group, now_ms)
            case _:
                pass

    # --- SyncGroup ----------------------------------------------------------------------------

    def sync_group(self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None,
                   protocol_type: str | None, protocol_name: str | None,
                   assignments: dict[str, bytes], now_ms: int) -> Pending[SyncResult]:
        group = self._live_group(group_id)
        if group is None:
            return Pending(SyncResult(ErrorCode.unknown_member_id))
        self._fire_timers(group, now_ms)
        error = group.validate_member(member_id, group_instance_id)
        if error == ErrorCode.none and generation_id != group.generation_id:
            error = ErrorCode.illegal_generation
        if error == ErrorCode.none and (
            (protocol_type is not None and protocol_type != group.protocol_type)
            or (protocol_name is not None and protocol_name != group.protocol_name)
        ):
            error = ErrorCode.inconsistent_group_protocol
        if error != ErrorCode.none:
            return Pending(SyncResult(error))
        member = group.members[member_id]
        match group.state:
            case GroupState.EMPTY:
                return Pending(SyncResult(ErrorCode.unknown_member_id))
            case GroupState.PREPARING_REBALANCE:
                return Pending(SyncResult(ErrorCode.rebalance_in_progress))
            case GroupState.COMPLETING_REBALANCE:
                waiter: Pending[SyncResult] = Pending()
                if member.sync_waiter is not None:
                    member.sync_waiter.complete(SyncResult(ErrorCode.unknown_member_id))
                member.sync_waiter = waiter
                group.pending_sync_members.discard(member_id)
                if group.leader_id == member_id:
                    # Kafka's classicGroupSyncToLeader: the group turns Stable and the members get their
                    # assignment only once its record is written (`on_assignment_stored`).
                    full = {m: assignments.get(m, b"") for m in group.members}
                    self._store_group(group, full)
                    group.assignment_in_flight = (group.generation_id, full)
                return waiter
            case GroupState.STABLE:
                group.pending_sync_members.discard(member_id)
                self._schedule_heartbeat(member, now_ms)
                return Pending(SyncResult(ErrorCode.none, group.protocol_type, group.protocol_name,
                                          member.assignment))
            case _:
                return Pending(SyncResult(ErrorCode.coordinator_not_available))

    def on_assignment_stored(self, group_id: str, member_id: str, generation_id: int, error: ErrorCode,
                             now_ms: int) -> None:
        """The shell wrote (or failed to write) the record of the leader's SyncGroup: Kafka's append
        callback in classicGroupSyncToLeader.  Only while the group still waits for that generation's
        assignment: written, it is handed out and the group is Stable; not written, every member is
        answered `error` and the group rebalances, so no member works from an assignment no log holds."""
        group = self._live_group(group_id)
        if (group is None or group.leader_id != member_id or group.assignment_in_flight is None
                or group.state is not GroupState.COMPLETING_REBALANCE or group.generation_id != generation_id
                or group.assignment_in_flight[0] != generation_id):
            return
        assignment = group.assignment_in_flight[1]
        group.assignment_in_flight = None
        if error != ErrorCode.none:
            group.propagate_assignment_error(error)
            self._maybe_prepare_rebalance_or_complete_join(group, now_ms, f"assignment not stored: {error.name}")
            return
        group.set_assignment(assignment)
        group.transition(GroupEvent.LEADER_SYNCED, now_ms)
        group.propagate_assignment()

    # --- Heartbeat / LeaveGroup ---------------------------------------------------------------

    def heartbeat(self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None,
                  now_ms: int) -> ErrorCode:
        group = self._live_group(group_id)
        if group is None:
            return ErrorCode.unknown_member_id
        self._fire_timers(group, now_ms)
        error = group.validate_member(member_id, group_instance_id)
        if error != ErrorCode.none:
            return error
        if generation_id != group.generation_id:
            return ErrorCode.illegal_generation
        member = group.members[member_id]
        match group.state:
            case GroupState.EMPTY:
                return ErrorCode.unknown_member_id
            case GroupState.PREPARING_REBALANCE:
                self._schedule_heartbeat(member, now_ms)
                return ErrorCode.rebalance_in_progress
            case _:
                self._schedule_heartbeat(member, now_ms)
                return ErrorCode.none

    def leave_group(self, group_id: str, members: list[tuple[str, str | None]],
                    now_ms: int) -> tuple[ErrorCode, list[tuple[str, str | None, ErrorCode]]]:
        """Remove members (member_id, group_instance_id); the top-level error and one per member."""
        group = self._live_group(group_id)
        if group is None:
            return ErrorCode.unknown_member_id, [(m, i, ErrorCode.unknown_member_id) for m, i in members]
        self._fire_timers(group, now_ms)
        results, leaving, pending_left = group.leaving_members(members)
        for member in leaving:
            group.remove_member(member, ErrorCode.unknown_member_id)
        if leaving:
            if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
                self._prepare_rebalance(group, now_ms, f"{len(leaving)} member(s) left")
            elif group.state is GroupState.PREPARING_REBALANCE:
                self._maybe_complete_join(group, now_ms)
        elif pending_left:
            self._maybe_complete_join(group, now_ms)
        return ErrorCode.none, results

    # --- timers -------------------------------------------------------------------------------

    def tick(self, now_ms: int) -> None:
        """Fire every timer that is due: join/sync deadlines, member and pending-member expiry."""
        for group in list(self.groups.values()):
            self._fire_timers(group, now_ms)

    def fire_timers(self, group_id: str, now_ms: int) -> None:
        """The due timers of one group, before a request's own change (so that change can be reverted
        alone, leaving the timers' effects, whose records are retried, in place)."""
        group = self._live_group(group_id)
        if group is not None:
            self._fire_timers(group, now_ms)

    def _fire_timers(self, group: Group, now_ms: int) -> None:
        """The due timers of one group.  Every request for a group fires them first, so what a request
        sees does not depend on how often the shell ticks (a heartbeat arriving just after another
        member's session expired already gets REBALANCE_IN_PROGRESS, as with Kafka's exact timers)."""
        written = len(self._records)
        self._fire_due_timers(group, now_ms)
        self._records[written:] = [replace(r, by_timer=True) for r in self._records[written:]]

    def _fire_due_timers(self, group: Group, now_ms: int) -> None:
        if group.state is not GroupState.DEAD:
            for member_id, deadline in list(group.pending_members.items()):
                if now_ms >= deadline:
                    del group.pending_members[member_id]
                    self._maybe_complete_join(group, now_ms)
            for member in list(group.members.values()):
                if member.member_id not in group.members or now_ms < member.heartbeat_deadline_ms:
                    continue
                if member.is_new or not (member.awaiting_join or member.awaiting_sync):
                    self._remove_member_and_update_group(group, member, now_ms)
            if (group.state is GroupState.PREPARING_REBALANCE and group.join_deadline_ms is not None
                    and now_ms >= group.join_deadline_ms):
                self._on_join_deadline(group, now_ms)
            if group.sync_deadline_ms is not None and now_ms >= group.sync_deadline_ms:
                group.sync_deadline_ms = None
                if group.state in (GroupState.COMPLETING_REBALANCE, GroupState.STABLE) and group.pending_sync_members:
                    group.remove_pending_sync_members()
                    self._prepare_rebalance(group, now_ms, "members did not sync in time")

    def next_deadline_ms(self) -> int | None:
        deadlines = [d for g in self.groups.values() if g.state is not GroupState.DEAD
                     and (d := g.next_deadline_ms()) is not None]
        return min(deadlines, default=None)

    # --- offsets ------------------------------------------------------------------------------

    def validate_offset_commit(self, group_id: str, generation_id: int, member_id: str,
                               group_instance_id: str | None, api_version: int, now_ms: int,
                               transactional: bool = False) -> ErrorCode:
        """Kafka's OffsetMetadataManager/ClassicGroup.validateOffsetCommit, before anything is written."""
        group = self._live_group(group_id)
        if group is not None:
            self._fire_timers(group, now_ms)
        return offset_manager.validate_offset_commit(group, generation_id, member_id, group_instance_id,
                                                     api_version, transactional)

    def commit_offsets(self, group_id: str, member_id: str, offsets: dict[tuple[str, int], OffsetAndMetadata],
                       now_ms: int) -> dict[tuple[str, int], ErrorCode]:
        """Store validated offsets; returns the per-partition error (metadata too large)."""
        errors, records = offset_manager.commit_offsets(self._get_or_create(group_id, now_ms), offsets,
                                                        self.config.offset_metadata_max_bytes)
        self._records.extend(records)
        return errors

    def committed_offsets(self, group_id: str) -> dict[tuple[str, int], OffsetAndMetadata]:
        group = self._live_group(group_id)
        return dict(group.offsets) if group is not None else {}

    def delete_offsets(self, group_id: str, partitions: list[tuple[str, int]],
                       now_ms: int) -> tuple[ErrorCode, dict[tuple[str, int], ErrorCode]]:
        """OffsetDelete: refused per partition while the group is subscribed to its topic."""
        group = self._live_group(group_id)
        if group is None:
            return ErrorCode.group_id_not_found, {}
        errors, records = offset_manager.delete_offsets(group, partitions)
        self._records.extend(records)
        self._maybe_delete_empty_group(group, now_ms)
        return ErrorCode.none, errors

    def expire_offsets(self, now_ms: int) -> list[OffsetExpiry]:
        """Offsets past offsets.retention.ms and the groups they leave empty: their tombstones are queued,
        and the shell removes them with `apply_expiry` once those are written (Kafka's cleanupExpiredOffsets)."""
        expiries, records = offset_manager.plan_expiry(self.groups, now_ms, self.config.offsets_retention_ms)
        self._records.extend(records)
        return expiries

    def apply_expiry(self, expiry: OffsetExpiry, now_ms: int) -> None:
        offset_manager.apply_expiry(self.groups, expiry, now_ms)

    def _maybe_delete_empty_group(self, group: Group, now_ms: int) -> None:
        if group.state is GroupState.EMPTY and not group.offsets:
            group.transition(GroupEvent.DELETED, now_ms)
            del self.groups[group.group_id]
            self._records.append(GroupRecord(group.group_id, encode_key(GroupMetadataKey(group.group_id)), None))

    # --- admin --------------------------------------------------------------------------------

    def delete_groups(self, group_ids: list[str], now_ms: int) -> dict[str, ErrorCode]:
        results: dict[str, ErrorCode] = {}
        for group_id in group_ids:
            group = self._live_group(group_id)
            if group is None:
                results[group_id] = ErrorCode.group_id_not_found
                continue
            if group.state is not GroupState.EMPTY:
                results[group_id] = ErrorCode.non_empty_group
                continue
            self._records.extend(offset_manager.delete_all_offsets(group))
            self._maybe_delete_empty_group(group, now_ms)
            results[group_id] = ErrorCode.none
        return results

    def describe_group(self, group_id: str) -> GroupDescription | None:
        group = self._live_group(group_id)
        return group.describe() if group is not None else None

    def list_groups(self, states: set[GroupState] | None = None) -> list[tuple[str, str, GroupState]]:
        """(group id, protocol type, state) of every live group, optionally only those in `states`."""
        return [(g.group_id, g.protocol_type or "", g.state) for g in self.groups.values()
                if g.state is not GroupState.DEAD and (not states or g.state in states)]
