"""KIP-848 consumer groups: ConsumerGroupHeartbeat, member fencing and the timers (Kafka 4.1's
GroupMetadataManager.consumerGroupHeartbeat and its helpers).

Pure like the classic coordinator: every call takes `now_ms`, `tick(now_ms)` fires the session and
rebalance timeouts, and the records a change produces go to `emit` (the shell appends them to
`__consumer_offsets` before it answers). A heartbeat runs in three steps, as in Kafka:

1. the member is created or updated; a change of its subscription, or of the partitions of the topics
   the group subscribes to, bumps the group epoch;
2. a group epoch above the target assignment epoch recomputes the target with the server-side assignor;
3. the member is reconciled towards its target (`reconciliation.py`): revocations first.

Offsets of a consumer group live with the classic coordinator's offset store (the group's id there
holds only offsets); this module only validates who may commit and fetch them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

from samsa.broker.group import consumer_group_records as cg_records
from samsa.broker.group import offset_validation
from samsa.broker.group.assignors import ASSIGNORS, MemberSubscription
from samsa.broker.group.classic_group import GroupRecord
from samsa.broker.group.classic_members import ClassicMemberError, ClassicMembers, TopicCatalog
from samsa.broker.group.consumer_config import ConsumerGroupConfig as ConsumerGroupConfig  # re-exported
from samsa.broker.group.consumer_group import (
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    ConsumerGroup,
    ConsumerGroupMember,
    ConsumerGroupState,
    MemberState,
    uniform_epochs,
)
from samsa.broker.group.consumer_regex import InvalidRegexError, RegexCache
from samsa.broker.group.metadata_hash import subscription_hash
from samsa.broker.group.reconciliation import FencedMemberError, Owned, reconcile, subscribed_topic_ids
from samsa.broker.group.records import TopicPartitions
from samsa.broker.observability.rebalance import RebalanceMeter
from samsa.kproto.errors import ErrorCode

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class HeartbeatRequest:
    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None
    rack_id: str | None
    rebalance_timeout_ms: int
    subscribed_topic_names: tuple[str, ...] | None
    subscribed_topic_regex: str | None
    server_assignor: str | None
    owned: Owned  # topic id -> partitions, None when not sent
    client_id: str = ""
    client_host: str = ""
    api_version: int = 1


@dataclass(frozen=True, slots=True)
class HeartbeatResult:
    error: ErrorCode
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: TopicPartitions | None = None


class HeartbeatError(ClassicMemberError):
    def __init__(self, error: ErrorCode, message: str) -> None:
        super().__init__(error)
        self.message = message


def _invalid(message: str) -> HeartbeatError:
    return HeartbeatError(ErrorCode.invalid_request, message)


class ConsumerGroupCoordinator(ClassicMembers):
    def __init__(self, config: ConsumerGroupConfig, emit: Callable[[GroupRecord], None],
                 classic_group_in_use: Callable[[str], bool],
                 upgrade: Callable[[str, TopicCatalog, int], ConsumerGroup | None] | None = None,
                 downgrade: Callable[[ConsumerGroup, str | None, int], bool] | None = None) -> None:
        """`upgrade(group id, catalog, now)`: the classic group with members converted to a consumer group for
        a consumer-protocol member joining it, or None when the migration policy or the group refuses it.
        `downgrade(group, leaving member id, now)`: the group converted to a classic one as its last
        consumer-protocol member goes (True), or not (False); leaving member id None: a classic static member has
        just taken that member's place. Both are KIP-848's online migration."""
        self.config = config
        self._emit = emit
        self._classic_group_in_use = classic_group_in_use
        self._upgrade = upgrade
        self._downgrade = downgrade
        self.groups: dict[str, ConsumerGroup] = {}
        self.rebalances = RebalanceMeter()  # Kafka's consumer-group-rebalance-rate/count
        self._regex = RegexCache()
        self._catalog: TopicCatalog | None = None

    # --- ConsumerGroupHeartbeat ----------------------------------------------------------------

    def heartbeat(self, req: HeartbeatRequest, catalog: TopicCatalog, now_ms: int) -> HeartbeatResult:
        self._catalog = catalog
        try:
            self._validate(req)
            group = self.groups.get(req.group_id)
            if group is not None:
                self._fire_timers(group, now_ms)
            if req.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
                return self._leave(req, now_ms)
            return self._heartbeat(req, catalog, now_ms)
        except HeartbeatError as e:
            return HeartbeatResult(e.error, e.message)

    def _validate(self, req: HeartbeatRequest) -> None:
        if not req.member_id.strip():
            raise _invalid("MemberId can't be empty.")
        if not req.group_id.strip():
            raise _invalid("GroupId can't be empty.")
        if req.instance_id is not None and not req.instance_id.strip():
            raise _invalid("InstanceId can't be empty.")
        if req.rack_id is not None and not req.rack_id.strip():
            raise _invalid("RackId can't be empty.")
        if req.member_epoch == 0:
            if req.rebalance_timeout_ms == -1:
                raise _invalid("RebalanceTimeoutMs must be provided in first request.")
            if req.owned is None or req.owned:
                raise _invalid("TopicPartitions must be empty when (re-)joining.")
            if req.subscribed_topic_names is None and req.subscribed_topic_regex is None:
                raise _invalid("Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when "
                               "(re-)joining.")
        elif req.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            if req.instance_id is None:
                raise _invalid("InstanceId can't be null.")
        elif req.member_epoch < LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            raise _invalid("MemberEpoch is invalid.")
        if req.server_assignor is not None and req.server_assignor not in self._enabled_assignors():
            raise HeartbeatError(ErrorCode.unsupported_assignor,
                                 f"ServerAssignor {req.server_assignor} is not supported. Supported assignors: "
                                 f"{', '.join(self._enabled_assignors())}.")
        if req.subscribed_topic_regex:
            self._compile(req.subscribed_topic_regex)

    def _max_size(self) -> int:
        return self.config.max_size

    def _enabled_assignors(self) -> list[str]:
        return [a for a in self.config.assignors if a in ASSIGNORS]

    def _compile(self, regex: str) -> object:
        try:
            return self._regex.compile(regex)
        except InvalidRegexError as e:
            raise HeartbeatError(ErrorCode.invalid_regular_expression, str(e)) from None

    def _get_member(self, group: ConsumerGroup, req: HeartbeatRequest) -> tuple[ConsumerGroupMember,
                                                                                ConsumerGroupMember | None]:
        """The member the heartbeat is for (new, or a static member taking its instance's place) and the
        static member it replaces, after Kafka's checks of ids and epochs."""
        joining = req.member_epoch == 0
        if req.instance_id is None:
            member = group.members.get(req.member_id)
            if member is None:
                if not joining:
                    raise HeartbeatError(ErrorCode.unknown_member_id,
                                         f"Member {req.member_id} is not a member of group {group.group_id}.")
                return ConsumerGroupMember(req.member_id), None
            _check_epoch(member, req.member_epoch, req.owned)
            return member, None
        existing = group.static_member(req.instance_id)
        if joining:
            if existing is None:
                return group.members.get(req.member_id) or ConsumerGroupMember(req.member_id), None
            # A classic static member may be replaced at once (a rolling upgrade restarts it with the consumer
            # protocol, and static classic members do not leave); a consumer-protocol one only once it left (-2).
            if existing.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH and existing.classic is None:
                raise HeartbeatError(ErrorCode.unreleased_instance_id,
                                     f"Static member {req.member_id} with instance id {req.instance_id} cannot join "
                                     f"the group because the instance id is owned by {existing.member_id} member.")
            return replace(existing, member_id=req.member_id, member_epoch=0, previous_member_epoch=0), existing
        if existing is None:
            raise HeartbeatError(ErrorCode.unknown_member_id, f"Instance id {req.instance_id} is unknown.")
        if existing.member_id != req.member_id:
            raise HeartbeatError(ErrorCode.fenced_instance_id,
                                 f"Static member {req.member_id} with instance id {req.instance_id} was fenced by "
                                 f"member {existing.member_id}.")
        _check_epoch(existing, req.member_epoch, req.owned)
        return existing, None

    def _heartbeat(self, req: HeartbeatRequest, catalog: TopicCatalog, now_ms: int) -> HeartbeatResult:
        group = self.groups.get(req.group_id)
        if group is None:
            if req.member_epoch != 0:
                raise HeartbeatError(ErrorCode.group_id_not_found, f"Consumer group {req.group_id} not found.")
            if self._classic_group_in_use(req.group_id):
                upgraded = self._upgrade(req.group_id, catalog, now_ms) if self._upgrade is not None else None
                if upgraded is None:
                    raise HeartbeatError(ErrorCode.group_id_not_found, f"Group {req.group_id} is not a consumer group")
                group = upgraded
            else:
                group = ConsumerGroup(req.group_id)
        if len(group.members) >= self.config.max_size and req.member_id not in group.members:
            raise HeartbeatError(ErrorCode.group_max_size_reached, "The consumer group has reached its maximum "
                                 f"capacity of {self.config.max_size} members.")
        member, replaced = self._get_member(group, req)
        self.groups[group.group_id] = group
        if replaced is not None:
            target_of_replaced = group.target_assignment.get(replaced.member_id)
            self._remove_member(group, replaced.member_id)
            self._emit_member(group, member)
            if target_of_replaced is not None:
                group.target_assignment[member.member_id] = target_of_replaced
                self._emit_target(group, member.member_id)
            self._emit_current(group, member)
            logger.info("group %s: static member %s rejoins as %s", group.group_id, req.instance_id, member.member_id)
        updated = replace(
            member,
            instance_id=req.instance_id if req.instance_id is not None else member.instance_id,
            rack_id=req.rack_id if req.rack_id is not None else member.rack_id,
            rebalance_timeout_ms=req.rebalance_timeout_ms if req.rebalance_timeout_ms != -1
            else member.rebalance_timeout_ms,
            server_assignor=req.server_assignor if req.server_assignor is not None else member.server_assignor,
            subscribed_topic_names=req.subscribed_topic_names if req.subscribed_topic_names is not None
            else member.subscribed_topic_names,
            subscribed_topic_regex=req.subscribed_topic_regex if req.subscribed_topic_regex is not None
            else member.subscribed_topic_regex,
            client_id=req.client_id, client_host=req.client_host, classic=None)
        final = self.update_and_reconcile(group, member, updated, req.owned, catalog, now_ms)
        group.session_deadlines_ms[final.member_id] = now_ms + self.session_timeout_ms(group.group_id, final)
        full = req.member_epoch == 0 or (req.rebalance_timeout_ms != -1 and req.subscribed_topic_names is not None
                                         and req.owned is not None)
        changed = final.assigned_partitions != member.assigned_partitions
        return HeartbeatResult(ErrorCode.none, None, final.member_id, final.member_epoch,
                               self.config.heartbeat_interval_for(group.group_id),
                               final.assigned_partitions if full or changed else None)

    def update_and_reconcile(self, group: ConsumerGroup, member: ConsumerGroupMember, updated: ConsumerGroupMember,
                             owned: Owned, catalog: TopicCatalog, now_ms: int) -> ConsumerGroupMember:
        """Steps 1-3 of a heartbeat (or of a classic member's JoinGroup): store the member as `updated`, bump the
        group epoch when its subscription or the subscribed topics changed, recompute the target if it is behind,
        and move the member towards its target. Returns the member as it is now."""
        is_new = member.member_id not in group.members
        bump = False
        if updated != member or is_new:
            group.update_member(updated)
            self._emit_member(group, updated)
            bump = (updated.subscribed_topic_names != member.subscribed_topic_names
                    or (updated.subscribed_topic_regex or None) != (member.subscribed_topic_regex or None))
            if is_new:
                logger.info("group %s: member %s joins with the %s protocol", group.group_id, updated.member_id,
                            "classic" if updated.uses_classic_protocol else "consumer")
        self._write_regexes(group, catalog, now_ms)
        # Kafka's hasMemberSubscriptionChanged || regexUpdated (only ever with a changed regex): the member may lose
        # topics at once.
        subscription_changed = bump
        if self.refresh_metadata(group, catalog):
            bump = True  # KIP-1101: the subscribed topics' hash changed
        if bump:
            self._bump_group_epoch(group)
            self.rebalances.record()  # as Kafka: an epoch bump by a heartbeat (a join or a new subscription)
        if group.group_epoch > group.assignment_epoch and can_compute_next_target_assignment(
                group.assignment_timestamp_ms, self.config.assignment_interval_for(group.group_id), now_ms):
            self._update_target_assignment(group, now_ms)
        target = group.target_assignment.get(updated.member_id, {})
        final = updated
        if subscription_changed or not updated.is_reconciled_to(group.assignment_epoch):
            try:
                final = reconcile(updated, group.assignment_epoch, target, group.current_partition_epoch, owned,
                                  subscribed_topic_ids(updated, group.resolved_regexes, catalog.topics_by_name),
                                  subscription_changed)
            except FencedMemberError as e:
                raise HeartbeatError(ErrorCode.fenced_member_epoch, str(e)) from None
            if final != updated:
                group.update_member(final)
                self._emit_current(group, final)
                # A classic member has join and sync timers instead (Kafka's maybeReconcile).
                if final.state is MemberState.UNREVOKED_PARTITIONS and not final.uses_classic_protocol:
                    timeout_ms = max(final.rebalance_timeout_ms, 0)
                    group.rebalance_deadlines_ms[final.member_id] = (final.member_epoch, now_ms + timeout_ms)
                else:
                    group.rebalance_deadlines_ms.pop(final.member_id, None)
        return final

    def session_timeout_ms(self, group_id: str, member: ConsumerGroupMember) -> int:
        """A classic member keeps the session timeout it joined with; the others have the group's own
        consumer.session.timeout.ms, else the broker's (read at each heartbeat, as Kafka does)."""
        if member.classic is not None:
            return member.classic.session_timeout_ms
        return self.config.session_timeout_for(group_id)

    def _leave(self, req: HeartbeatRequest, now_ms: int) -> HeartbeatResult:
        group = self.groups.get(req.group_id)
        if group is None:
            raise HeartbeatError(ErrorCode.group_id_not_found, f"Consumer group {req.group_id} not found.")
        if req.instance_id is None:
            member = group.members.get(req.member_id)
            if member is None:
                raise HeartbeatError(ErrorCode.unknown_member_id,
                                     f"Member {req.member_id} is not a member of group {group.group_id}.")
            logger.info("group %s: member %s left", group.group_id, req.member_id)
            self.fence_member(group, member.member_id, now_ms)
            return HeartbeatResult(ErrorCode.none, None, req.member_id, req.member_epoch)
        member = group.static_member(req.instance_id)
        if member is None:
            raise HeartbeatError(ErrorCode.unknown_member_id, f"Instance id {req.instance_id} is unknown.")
        if member.member_id != req.member_id:
            raise HeartbeatError(ErrorCode.fenced_instance_id,
                                 f"Static member {req.member_id} with instance id {req.instance_id} was fenced by "
                                 f"member {member.member_id}.")
        if req.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            # KIP-345 for KIP-848: the instance keeps its partitions for a session timeout, so a restart
            # that rejoins in time gets them back without a rebalance (assigned at epoch 0: KIP-1251).
            away = replace(member, member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH, partitions_pending_revocation={},
                           assignment_epochs=uniform_epochs(member.assigned_partitions, 0))
            group.update_member(away)
            group.rebalance_deadlines_ms.pop(member.member_id, None)
            self._emit_current(group, away)
            logger.info("group %s: static member %s (%s) temporarily left", group.group_id, req.member_id,
                        req.instance_id)
            return HeartbeatResult(ErrorCode.none, None, member.member_id, LEAVE_GROUP_STATIC_MEMBER_EPOCH)
        self.fence_member(group, member.member_id, now_ms)
        return HeartbeatResult(ErrorCode.none, None, req.member_id, req.member_epoch)

    # --- group changes ------------------------------------------------------------------------

    def fence_member(self, group: ConsumerGroup, member_id: str, now_ms: int) -> None:
        """Remove a member (it left, or its session or rebalance timeout expired) and bump the group
        epoch so the others get its partitions; or, when it was the last member using the consumer protocol,
        hand the classic members back to a classic group (Kafka's consumerGroupFenceMember)."""
        if (self._downgrade is not None and len(group.members) > 1
                and group.all_members_use_classic_protocol_except(member_id)
                and self._downgrade(group, member_id, now_ms)):
            return
        self._remove_member(group, member_id)
        if self._catalog is not None:
            self._write_regexes(group, self._catalog, now_ms)
            self.refresh_metadata(group, self._catalog)
        self._bump_group_epoch(group)

    def _remove_member(self, group: ConsumerGroup, member_id: str) -> None:
        group.remove_member(member_id)
        group.target_assignment.pop(member_id, None)
        for record_type in (cg_records.CURRENT_ASSIGNMENT, cg_records.TARGET_MEMBER, cg_records.MEMBER_METADATA):
            self._emit(cg_records.tombstone(group.group_id, record_type, member_id))

    def _write_regexes(self, group: ConsumerGroup, catalog: TopicCatalog, now_ms: int) -> None:
        version = int(getattr(catalog, "offset", -1))  # Kafka: the metadata image's last offset
        for record in cg_records.regular_expressions(group, lambda regex: self._resolve(regex, catalog), version,
                                                     now_ms):
            self._emit(record)

    def _bump_group_epoch(self, group: ConsumerGroup) -> None:
        group.group_epoch += 1
        self._emit(cg_records.group_epoch(group))
        logger.info("group %s: bumped group epoch to %d", group.group_id, group.group_epoch)
        if not group.members:
            # The last member left: the (empty) target catches up at once, with no interval to wait for the
            # next one (Kafka 4.4's consumerGroupFenceMembers, KAFKA-20442).
            group.assignment_epoch, group.assignment_timestamp_ms = group.group_epoch, 0
            self._emit(cg_records.assignment_epoch(group))

    def _emit_member(self, group: ConsumerGroup, member: ConsumerGroupMember) -> None:
        self._emit(cg_records.member_metadata(group.group_id, member))

    def _emit_current(self, group: ConsumerGroup, member: ConsumerGroupMember) -> None:
        self._emit(cg_records.current_assignment(group.group_id, member))

    def _emit_target(self, group: ConsumerGroup, member_id: str) -> None:
        self._emit(cg_records.target_member(group.group_id, member_id, group.target_assignment[member_id]))

    def _resolve(self, regex: str, catalog: TopicCatalog) -> frozenset[str]:
        try:
            return self._regex.resolve(regex, catalog.topics_by_name)
        except InvalidRegexError as e:
            raise HeartbeatError(ErrorCode.invalid_regular_expression, str(e)) from None

    def refresh_metadata(self, group: ConsumerGroup, catalog: TopicCatalog) -> bool:
        """The subscribed topics as the catalog has them now, and their hash (Kafka's computeMetadataHash);
        whether the hash differs from the group's (which the next group epoch record carries)."""
        group.subscription_metadata = self._subscription_metadata(group, catalog)
        metadata_hash = subscription_hash(group.subscription_metadata, catalog)
        changed, group.metadata_hash = metadata_hash != group.metadata_hash, metadata_hash
        return changed

    def _subscription_metadata(self, group: ConsumerGroup, catalog: TopicCatalog) -> dict[str, tuple[str, int]]:
        names: set[str] = set()
        subscriptions = {(m.subscribed_topic_names, m.subscribed_topic_regex) for m in group.members.values()}
        for topic_names, regex in subscriptions:
            names.update(topic_names)
            if regex:
                names |= self._resolve(regex, catalog)
        out: dict[str, tuple[str, int]] = {}
        for name in sorted(names):
            topic = catalog.topics_by_name.get(name)
            if topic is not None:
                out[name] = (topic.topic_id, len(topic.partitions))
        return out

    def _preferred_assignor(self, group: ConsumerGroup) -> str:
        """Kafka's computePreferredServerAssignor: the one most members ask for, else the default."""
        enabled = self._enabled_assignors()
        votes: dict[str, int] = {}
        for m in group.members.values():
            if m.server_assignor in enabled:
                votes[m.server_assignor] = votes.get(m.server_assignor, 0) + 1
        if votes:
            return max(sorted(votes), key=lambda a: votes[a])
        return enabled[0] if enabled else "uniform"

    def _update_target_assignment(self, group: ConsumerGroup, now_ms: int) -> None:
        metadata = group.subscription_metadata
        counts = {topic_id: n for topic_id, n in metadata.values()}
        subscriptions = {}
        by_regex: dict[str, set[str]] = {}
        for member_id, m in group.members.items():
            ids = set()
            for name in m.subscribed_topic_names:
                if name in metadata:
                    ids.add(metadata[name][0])
            regex = m.subscribed_topic_regex
            if regex and self._catalog is not None:
                if regex not in by_regex:
                    by_regex[regex] = {metadata[n][0] for n in self._resolve(regex, self._catalog) if n in metadata}
                ids |= by_regex[regex]
            subscriptions[member_id] = MemberSubscription(frozenset(ids), group.target_assignment.get(member_id, {}))
        target = ASSIGNORS[self._preferred_assignor(group)](subscriptions, counts)
        for member_id, partitions in sorted(target.items()):
            if group.target_assignment.get(member_id) != partitions:
                group.target_assignment[member_id] = partitions
                self._emit_target(group, member_id)
        group.assignment_epoch, group.assignment_timestamp_ms = group.group_epoch, now_ms
        self._emit(cg_records.assignment_epoch(group))

    # --- timers -------------------------------------------------------------------------------

    def tick(self, now_ms: int) -> None:
        for group in list(self.groups.values()):
            self._fire_timers(group, now_ms)

    def fire_timers(self, group_id: str, now_ms: int) -> None:
        group = self.groups.get(group_id)
        if group is not None:
            self._fire_timers(group, now_ms)

    def _fire_timers(self, group: ConsumerGroup, now_ms: int) -> None:
        for member_id, deadline in list(group.session_deadlines_ms.items()):
            if now_ms >= deadline and member_id in group.members:
                logger.info("group %s: member %s fenced: its session expired", group.group_id, member_id)
                self.fence_member(group, member_id, now_ms)
                if group.group_id not in self.groups:
                    return  # downgraded to a classic group
        for member_id, (epoch, deadline) in list(group.rebalance_deadlines_ms.items()):
            member = group.members.get(member_id)
            if now_ms < deadline:
                continue
            group.rebalance_deadlines_ms.pop(member_id, None)
            if member is not None and member.member_epoch == epoch and member.state is MemberState.UNREVOKED_PARTITIONS:
                logger.info("group %s: member %s fenced: it did not revoke its partitions in time", group.group_id,
                            member_id)
                self.fence_member(group, member_id, now_ms)
                if group.group_id not in self.groups:
                    return
        for timers, what in ((group.join_deadlines_ms, "rejoin"), (group.sync_deadlines_ms, "sync")):
            for member_id, deadline in list(timers.items()):
                if now_ms < deadline:
                    continue
                del timers[member_id]
                if member_id in group.members:
                    logger.info("group %s: classic member %s fenced: it did not %s within its rebalance timeout",
                                group.group_id, member_id, what)
                    self.fence_member(group, member_id, now_ms)
                    if group.group_id not in self.groups:
                        return

    def next_deadline_ms(self) -> int | None:
        deadlines = [d for g in self.groups.values() for d in g.session_deadlines_ms.values()]
        deadlines += [d for g in self.groups.values() for _, d in g.rebalance_deadlines_ms.values()]
        deadlines += [d for g in self.groups.values() for t in (g.join_deadlines_ms, g.sync_deadlines_ms)
                      for d in t.values()]
        return min(deadlines, default=None)

    # --- reverting a change the log refused ---------------------------------------------------

    def snapshot(self, group_id: str) -> tuple[str, ConsumerGroup | None]:
        group = self.groups.get(group_id)
        return group_id, None if group is None else group.copy()

    def revert(self, snapshot: tuple[str, ConsumerGroup | None]) -> None:
        """Put a group back as `snapshot` had it (its records were not appended: Kafka's CoordinatorRuntime
        reverts to the last written state the same way)."""
        group_id, group = snapshot
        if group is None:
            self.groups.pop(group_id, None)
        else:
            self.groups[group_id] = group

    # --- offsets, describe, list ----------------------------------------------------------------

    def is_consumer_group(self, group_id: str) -> bool:
        return group_id in self.groups

    def validate_offset_commit(self, group_id: str, member_id: str, instance_id: str | None, member_epoch: int,
                               api_version: int, now_ms: int, partitions: Iterable[tuple[str, int]],
                               transactional: bool = False) -> ErrorCode:
        """offset_validation.validate_offset_commit (KIP-1251), once the group's timers have fired."""
        group = self.groups[group_id]
        self._fire_timers(group, now_ms)
        return offset_validation.validate_offset_commit(group, member_id, instance_id, member_epoch, api_version,
                                                        partitions, transactional)

    def validate_offset_fetch(self, group_id: str, member_id: str | None, member_epoch: int) -> ErrorCode:
        return offset_validation.validate_offset_fetch(self.groups[group_id], member_id, member_epoch)

    def delete_group(self, group_id: str) -> ErrorCode:
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.group_id_not_found
        if group.members:
            return ErrorCode.non_empty_group
        for member_id in list(group.target_assignment):
            self._emit(cg_records.tombstone(group_id, cg_records.TARGET_MEMBER, member_id))
        for record_type in (cg_records.TARGET_METADATA, cg_records.GROUP_METADATA):
            self._emit(cg_records.tombstone(group_id, record_type))
        del self.groups[group_id]
        return ErrorCode.none

    def list_groups(self) -> list[tuple[str, ConsumerGroupState]]:
        return [(g.group_id, g.state) for g in self.groups.values()]

    def assignor_name(self, group: ConsumerGroup) -> str:
        return self._preferred_assignor(group)

    # --- loading ------------------------------------------------------------------------------

    def replay(self, record_type: int, group_id: str, member_id: str, value: bytes | None) -> None:
        cg_records.replay(self.groups, record_type, group_id, member_id, value)

    def finish_loading(self, catalog: TopicCatalog, now_ms: int) -> None:
        """After replay, for the groups it brought: every member gets a fresh session (Kafka schedules them
        on load) and the subscription metadata is read from the image. A group that was live before keeps
        its own, so a topic change since its last heartbeat still bumps its epoch."""
        self._catalog = catalog
        for group in self.groups.values():
            if group.session_deadlines_ms or not group.members:
                continue  # live already (only the partitions this broker just took over were replayed)
            group.subscription_metadata = self._subscription_metadata(group, catalog)
            for member in group.members.values():
                group.session_deadlines_ms[member.member_id] = now_ms + self.session_timeout_ms(group.group_id, member)
                if member.state is MemberState.UNREVOKED_PARTITIONS:
                    group.rebalance_deadlines_ms[member.member_id] = (
                        member.member_epoch, now_ms + max(member.rebalance_timeout_ms, 0))

    def unload(self, owned: Callable[[str], bool]) -> int:
        gone = [g for g in self.groups if owned(g)]
        for group_id in gone:
            del self.groups[group_id]
        return len(gone)


def can_compute_next_target_assignment(last_ms: int, interval_ms: int, now_ms: int) -> bool:
    """Kafka 4.4's canComputeNextTargetAssignment (KIP-1263 batching): a group gets a new target at most once
    per assignment interval after the last one was computed; never computed (0) or no interval: at once."""
    return last_ms == 0 or interval_ms == 0 or now_ms >= last_ms + interval_ms


def _check_epoch(member: ConsumerGroupMember, received: int, owned: Owned) -> None:
    """Kafka's throwIfConsumerGroupMemberEpochIsInvalid: the previous epoch is accepted with a subset of
    the assignment, since the response that bumped the epoch may have been lost."""
    if received > member.member_epoch:
        raise HeartbeatError(ErrorCode.fenced_member_epoch,
                             f"The consumer group member has a greater member epoch ({received}) than the one known "
                             f"by the group coordinator ({member.member_epoch}). The member must abandon all its "
                             "partitions and rejoin.")
    if received < member.member_epoch:
        subset = owned is not None and all(
            topic_id in member.assigned_partitions and ps <= member.assigned_partitions[topic_id]
            for topic_id, ps in owned.items())
        if received != member.previous_member_epoch or not subset:
            raise HeartbeatError(ErrorCode.fenced_member_epoch,
                                 f"The consumer group member has a smaller member epoch ({received}) than the one "
                                 f"known by the group coordinator ({member.member_epoch}). The member must abandon "
                                 "all its partitions and rejoin.")
