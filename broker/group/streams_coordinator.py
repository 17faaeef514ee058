"""KIP-1071 streams groups: StreamsGroupHeartbeat, fencing and the timers (Kafka 4.4's
GroupMetadataManager.streamsGroupHeartbeat and its helpers), built like consumer_coordinator.py.

Pure: every call takes `now_ms`; `tick(now_ms)` fires the session and rebalance timeouts. A heartbeat:

1. validates the request, creates or finds the group and the member (static membership by instance id);
2. on a join with a topology, stores the group's topology (the first one; a later epoch is refused, as
   Kafka 4.4: "Topology updates are not supported yet.");
3. bumps the group epoch when a member joins, leaves or changes what the assignor reads, or when the
   topics of the topology changed (their hash), re-configuring the topology against the metadata image
   (streams_topology.py; internal topics that are missing are returned for the broker to create);
4. computes a new target with the sticky assignor when the group epoch is ahead, not before
   group.streams.initial.rebalance.delay.ms after the group got its first member, and at most once per
   group.streams.assignment.interval.ms (ASSIGNMENT_DELAYED status meanwhile);
5. reconciles the member towards its target, revocations first (streams_reconciliation.py).

Every change of a group goes to `emit` as Kafka 4.4's streams-group records of what changed
(streams_records.py); the shell appends them to `__consumer_offsets` in one batch before it answers, and a
restart or a coordinator move replays them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace

from samsa.broker.group import streams_records
from samsa.broker.group.classic_group import GroupRecord
from samsa.broker.group.classic_members import TopicCatalog
from samsa.broker.group.metadata_hash import subscription_hash
from samsa.broker.group.streams_assignor import AssignmentMember, assign
from samsa.broker.group.streams_checks import (
    StreamsHeartbeatError,
    canonical,
    check_epoch,
    check_tasks_exist,
    fingerprint,
    invalid,
    same,
)
from samsa.broker.group.streams_config import StreamsGroupConfig
from samsa.broker.group.streams_group import (
    EMPTY_TASKS,
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    StreamsGroup,
    StreamsGroupMember,
    StreamsGroupState,
    StreamsMemberState,
    StreamsStatus,
    TaskOffsets,
    TasksTuple,
    Topology,
)
from samsa.broker.group.streams_keys import StreamsGroupKey
from samsa.broker.group.streams_reconciliation import FencedStreamsMemberError, reconcile
from samsa.broker.group.streams_topology import ConfiguredTopology, InternalTopicToCreate, configure
from samsa.kproto.errors import ErrorCode

logger = logging.getLogger(__name__)

# Kafka 4.4's answer: the task offset interval of the group (the default).
TASK_OFFSET_INTERVAL_MS = 60_000


@dataclass(frozen=True, slots=True)
class StreamsHeartbeatRequest:
    group_id: str
    member_id: str
    member_epoch: int
    endpoint_information_epoch: int = 0
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    topology: Topology | None = None
    owned: TasksTuple | None = None  # None: not sent (unchanged)
    process_id: str | None = None
    user_endpoint: tuple[str, int] | None = None
    client_tags: tuple[tuple[str, str], ...] | None = None
    shutdown_application: bool = False
    client_id: str = ""
    client_host: str = ""
    source_topic_regex_used: bool = False
    invalid_changelog: str | None = None  # Kafka's throwIfInvalidTopology message, if any
    api_version: int = 0  # MISSING_CLIENT_TAGS only from v1 (KAFKA-20744: v0 clients do not know it)
    task_offsets: TaskOffsets | None = None  # None: not sent (unchanged)
    task_end_offsets: TaskOffsets | None = None


# (host, port), active (topic, partitions), standby (topic, partitions)
EndpointPartitions = tuple[tuple[str, int], tuple[tuple[str, tuple[int, ...]], ...],
                           tuple[tuple[str, tuple[int, ...]], ...]]


@dataclass(frozen=True, slots=True)
class StreamsHeartbeatResult:
    error: ErrorCode
    error_message: str | None = None
    member_id: str = ""
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    statuses: tuple[tuple[StreamsStatus, str], ...] = ()
    tasks: TasksTuple | None = None
    endpoint_information_epoch: int = 0
    endpoints: tuple[EndpointPartitions, ...] | None = None
    to_create: tuple[InternalTopicToCreate, ...] = field(default=())
    acceptable_recovery_lag: int = -1  # Kafka's default ("not supported"): set only by a member's heartbeat
    task_offset_interval_ms: int = 0


class StreamsGroupCoordinator:
    def __init__(self, config: StreamsGroupConfig, other_group_exists: Callable[[str], bool],
                 emit: Callable[[GroupRecord], None] | None = None) -> None:
        """`other_group_exists(group id)`: a classic or consumer group has that id (it is not a streams group);
        `emit`: where the records of a change go (None: kept in memory only)."""
        self.config = config
        self._other_group_exists = other_group_exists
        self._emit = emit
        self.groups: dict[str, StreamsGroup] = {}

    def _write(self, group: StreamsGroup) -> None:
        """The records of what changed in the group since the last write (streams_records.changes). Members and
        assignments are immutable values replaced on change, so an unchanged group is recognized at once."""
        if self._emit is None or self.groups.get(group.group_id) is not group:
            return
        seen = fingerprint(group)
        if group.written_fingerprint is not None and same(seen, group.written_fingerprint):
            return
        configs = {"num.standby.replicas": str(self.config.num_standby_replicas_for(group.group_id))}
        records, group.written = streams_records.changes(group, group.written, configs)
        group.written_fingerprint = seen
        for record in records:
            self._emit(record)

    # --- StreamsGroupHeartbeat -----------------------------------------------------------------

    def heartbeat(self, req: StreamsHeartbeatRequest, catalog: TopicCatalog, now_ms: int) -> StreamsHeartbeatResult:
        try:
            self._validate(req)
            group = self.groups.get(req.group_id)
            if group is not None:
                self._fire_timers(group, catalog, now_ms)
            if req.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
                return self._leave(req, catalog, now_ms)
            return self._heartbeat(req, catalog, now_ms)
        except StreamsHeartbeatError as e:
            return StreamsHeartbeatResult(e.error, e.message)
        except FencedStreamsMemberError as e:
            return StreamsHeartbeatResult(ErrorCode.fenced_member_epoch, str(e))
        finally:
            group = self.groups.get(req.group_id)
            if group is not None:
                self._write(group)

    def _validate(self, req: StreamsHeartbeatRequest) -> None:
        if req.source_topic_regex_used:
            raise invalid("Regular expressions for source topics are not supported yet.")
        if not req.member_id.strip():
            raise invalid("MemberId can't be empty.")
        if not req.group_id.strip():
            raise invalid("GroupId can't be empty.")
        if req.instance_id is not None and not req.instance_id.strip():
            raise invalid("InstanceId can't be empty.")
        if req.rack_id is not None and not req.rack_id.strip():
            raise invalid("RackId can't be empty.")
        if req.member_epoch == 0:
            if req.rebalance_timeout_ms == -1:
                raise invalid("RebalanceTimeoutMs must be provided in first request.")
            if req.owned is not None and req.owned.active:
                raise invalid("ActiveTasks must be empty when (re-)joining.")
            if req.owned is not None and req.owned.standby:
                raise invalid("StandbyTasks must be empty when (re-)joining.")
            if req.owned is not None and req.owned.warmup:
                raise invalid("WarmupTasks must be empty when (re-)joining.")
            if req.topology is None:
                raise invalid("Topology must be non-null when (re-)joining.")
            if req.invalid_changelog is not None:
                raise StreamsHeartbeatError(ErrorCode.streams_invalid_topology, req.invalid_changelog)
        elif req.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            if req.instance_id is None:
                raise invalid("InstanceId can't be null.")
        elif req.member_epoch < LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            raise invalid(f"MemberEpoch is {req.member_epoch}, but must be greater than or equal to -2.")
        if req.member_epoch != 0 and req.topology is not None:
            raise invalid("Topology can only be provided when (re-)joining.")

    def _get_member(self, group: StreamsGroup, req: StreamsHeartbeatRequest
                    ) -> tuple[StreamsGroupMember, StreamsGroupMember | None]:
        """The member (new, or a static member taking its instance's place) and the static member it replaces."""
        joining = req.member_epoch == 0
        if req.instance_id is None:
            member = group.members.get(req.member_id)
            if member is None:
                if not joining:
                    raise StreamsHeartbeatError(ErrorCode.unknown_member_id,
                                                f"Member {req.member_id} is not a member of group {group.group_id}.")
                return StreamsGroupMember(req.member_id), None
            if not joining:
                check_epoch(member, req.member_epoch, req.owned)
            return member, None
        existing = group.static_member(req.instance_id)
        if joining:
            if existing is None or existing.member_id == req.member_id:
                return group.members.get(req.member_id) or StreamsGroupMember(req.member_id), None
            if existing.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                raise StreamsHeartbeatError(
                    ErrorCode.unreleased_instance_id,
                    f"Static member {req.member_id} with instance id {req.instance_id} cannot join the group "
                    f"because the instance id is owned by {existing.member_id} member.")
            return replace(existing, member_id=req.member_id, member_epoch=0, previous_member_epoch=0), existing
        if existing is None:
            raise StreamsHeartbeatError(ErrorCode.unknown_member_id, f"Instance id {req.instance_id} is unknown.")
        if existing.member_id != req.member_id:
            raise StreamsHeartbeatError(ErrorCode.fenced_instance_id,
                                        f"Static member {req.member_id} with instance id {req.instance_id} was "
                                        f"fenced by member {existing.member_id}.")
        check_epoch(existing, req.member_epoch, req.owned)
        return existing, None

    def _heartbeat(self, req: StreamsHeartbeatRequest, catalog: TopicCatalog, now_ms: int) -> StreamsHeartbeatResult:
        group = self.groups.get(req.group_id)
        if group is None:
            if req.member_epoch != 0:
                raise StreamsHeartbeatError(ErrorCode.group_id_not_found, f"Streams group {req.group_id} not found.")
            if self._other_group_exists(req.group_id):
                raise StreamsHeartbeatError(ErrorCode.group_id_not_found,
                                            f"Group {req.group_id} is not a streams group.")
            group = StreamsGroup(req.group_id)
        if len(group.members) >= self.config.max_size and req.member_id not in group.members:
            raise StreamsHeartbeatError(ErrorCode.group_max_size_reached, "The streams group has reached its maximum "
                                        f"capacity of {self.config.max_size} members.")
        member, replaced = self._get_member(group, req)
        configured_now = group.configured if isinstance(group.configured, ConfiguredTopology) else None
        if configured_now is not None and configured_now.ready and req.owned is not None:
            check_tasks_exist(configured_now, req.owned)  # before anything changes
        bump = False
        if req.topology is not None:
            # Kafka 4.4's maybeUpdateTopology: the first topology stays the group's; an older epoch is stale (the
            # member is told so); any other difference is refused.
            if group.topology is None:
                group.topology, group.configured = req.topology, None
                bump = True
            elif group.topology.epoch <= req.topology.epoch and canonical(group.topology) != canonical(
                    req.topology):
                raise invalid("Topology updates are not supported yet.")
        self.groups[group.group_id] = group
        if not group.members and group.assignment_timestamp_ms == 0:
            group.assignment_not_before_ms = now_ms + self.config.initial_rebalance_delay_for(group.group_id)
        if replaced is not None:
            target = group.target_assignment.get(replaced.member_id)
            group.remove_member(replaced.member_id)
            if target is not None:
                group.target_assignment[member.member_id] = target
            logger.info("streams group %s: static member %s rejoins as %s", group.group_id, req.instance_id,
                        member.member_id)
        updated = replace(
            member,
            instance_id=req.instance_id if req.instance_id is not None else member.instance_id,
            rack_id=req.rack_id if req.rack_id is not None else member.rack_id,
            rebalance_timeout_ms=req.rebalance_timeout_ms if req.rebalance_timeout_ms != -1
            else member.rebalance_timeout_ms,
            topology_epoch=req.topology.epoch if req.topology is not None else member.topology_epoch,
            process_id=req.process_id if req.process_id is not None else member.process_id,
            user_endpoint=req.user_endpoint if req.user_endpoint is not None else member.user_endpoint,
            client_tags=req.client_tags if req.client_tags is not None else member.client_tags,
            client_id=req.client_id, client_host=req.client_host)
        if req.task_offsets is not None or req.task_end_offsets is not None:  # MemberTaskOffsets.update
            offsets, end_offsets = group.task_offsets.get(req.member_id, ((), ()))
            group.task_offsets[req.member_id] = (offsets if req.task_offsets is None else req.task_offsets,
                                                 end_offsets if req.task_end_offsets is None else req.task_end_offsets)
        if req.shutdown_application and group.shutdown_requested is None:
            group.shutdown_requested = req.member_id
        is_new = member.member_id not in group.members
        if is_new or updated != member:
            if is_new or (updated.process_id, updated.rack_id, updated.client_tags, updated.instance_id) != (
                    member.process_id, member.rack_id, member.client_tags, member.instance_id):
                bump = True
            group.update_member(updated)
            if is_new:
                logger.info("streams group %s: member %s joins (process %s)", group.group_id, updated.member_id,
                            updated.process_id)
        if self._refresh_metadata(group, catalog):
            bump = True
        if bump:
            group.group_epoch += 1
        delay = self._maybe_assign(group, now_ms)
        final = self._reconcile(group, updated, req.owned, now_ms)
        group.session_deadlines_ms[final.member_id] = now_ms + self.config.session_timeout_for(group.group_id)
        changed = final.assigned != member.assigned or req.member_epoch == 0
        statuses: list[tuple[StreamsStatus, str]] = []  # in Kafka 4.4's order
        if group.topology is not None and final.topology_epoch < group.topology.epoch:
            statuses.append((StreamsStatus.STALE_TOPOLOGY,
                             f"The member's topology epoch {final.topology_epoch} is behind the group's topology "
                             f"epoch {group.topology.epoch}."))
        if delay is not None:
            statuses.append((StreamsStatus.ASSIGNMENT_DELAYED, delay))
        configured = group.configured if isinstance(group.configured, ConfiguredTopology) else None
        if configured is not None and configured.status is not None:
            statuses.append(configured.status)
        if group.shutdown_requested is not None:
            statuses.append((StreamsStatus.SHUTDOWN_APPLICATION,
                             f"Streams group member {group.shutdown_requested} encountered a fatal error and "
                             "requested a shutdown for the entire application."))
        missing_tags = self._missing_client_tags(group.group_id, final, req.api_version)
        if missing_tags:
            statuses.append((StreamsStatus.MISSING_CLIENT_TAGS,
                             "Missing required client tags for rack-aware standby assignment: "
                             f"[{', '.join(missing_tags)}]. Configure them via 'client.tag.<tagKey>' in your "
                             "Streams config."))
        endpoints = self._endpoints(group, catalog)
        return StreamsHeartbeatResult(
            ErrorCode.none, None, final.member_id, final.member_epoch,
            self.config.heartbeat_interval_for(group.group_id), tuple(statuses),
            final.assigned if changed else None, group.endpoint_information_epoch,
            endpoints if req.endpoint_information_epoch != group.endpoint_information_epoch else None,
            configured.to_create if configured is not None else (),
            self.config.acceptable_recovery_lag_for(group.group_id), TASK_OFFSET_INTERVAL_MS)

    def _missing_client_tags(self, group_id: str, member: StreamsGroupMember, api_version: int) -> list[str]:
        """Kafka 4.4: the rack-aware assignment tags (group.streams.rack.aware.assignment.tags, or the group's own)
        the member did not send as client tags, told from v1 on."""
        if api_version < 1:
            return []
        sent = {k for k, _ in member.client_tags}
        return [t for t in self.config.rack_aware_assignment_tags_for(group_id) if t not in sent]

    def _reconcile(self, group: StreamsGroup, member: StreamsGroupMember, owned: TasksTuple | None,
                   now_ms: int) -> StreamsGroupMember:
        if member.is_reconciled_to(group.assignment_epoch):
            return member
        target = group.target_assignment.get(member.member_id, EMPTY_TASKS)
        final = reconcile(member, group, group.assignment_epoch, target, owned)
        if final != member:
            group.update_member(final)
            if final.state is StreamsMemberState.UNREVOKED_TASKS:
                group.rebalance_deadlines_ms[final.member_id] = (final.member_epoch,
                                                                 now_ms + max(final.rebalance_timeout_ms, 0))
            else:
                group.rebalance_deadlines_ms.pop(final.member_id, None)
        return final

    def _maybe_assign(self, group: StreamsGroup, now_ms: int) -> str | None:
        """A new target if the group epoch is ahead and the delays allow; the reason it waits, if it does."""
        if group.group_epoch <= group.assignment_epoch:
            return None
        if now_ms < group.assignment_not_before_ms:
            return "Assignment delayed due to the configured initial rebalance delay."
        interval = self.config.assignment_interval_for(group.group_id)
        last = group.assignment_timestamp_ms
        if last != 0 and interval != 0 and now_ms < last + interval:
            return "Assignment delayed due to the configured assignment interval."
        self._update_target(group, now_ms)
        return None

    def _update_target(self, group: StreamsGroup, now_ms: int) -> None:
        configured = group.configured if isinstance(group.configured, ConfiguredTopology) else None
        if configured is None or not configured.ready or group.topology is None:
            target = {m: EMPTY_TASKS for m in group.members}
        else:
            stateful = {s.subtopology_id for s in group.topology.subtopologies if s.stateful}
            members = {m.member_id: AssignmentMember(m.process_id or m.member_id,
                                                     group.target_assignment.get(m.member_id, EMPTY_TASKS))
                       for m in group.members.values()}
            target = assign(members, configured.tasks, stateful,
                            self.config.num_standby_replicas_for(group.group_id))
        group.target_assignment = dict(target)
        group.assignment_epoch, group.assignment_timestamp_ms = group.group_epoch, now_ms
        logger.info("streams group %s: target assignment computed for epoch %d", group.group_id, group.group_epoch)

    def _refresh_metadata(self, group: StreamsGroup, catalog: TopicCatalog) -> bool:
        """Re-configure the topology when its topics changed (their hash, KIP-1101 style); whether they did."""
        if group.topology is None:
            return False
        topics = catalog.topics_by_name
        metadata = {name: (topics[name].topic_id, len(topics[name].partitions))
                    for name in sorted(group.topology.required_topics()) if name in topics}
        metadata_hash = subscription_hash(metadata, catalog)
        changed = metadata_hash != group.metadata_hash
        if changed or group.configured is None:
            group.metadata_hash = metadata_hash
            group.configured = configure(
                group.topology, lambda t: len(topics[t].partitions) if t in topics else None)
        return changed

    def _endpoints(self, group: StreamsGroup, catalog: TopicCatalog) -> tuple[EndpointPartitions, ...]:
        """Which source partitions each member with a user endpoint serves (Kafka's EndpointToPartitionsManager,
        for interactive queries); the group's endpoint information epoch moves when this changes."""
        if group.topology is None:
            return ()
        inputs = {s.subtopology_id: (*s.source_topics, *(r.name for r in s.repartition_source_topics))
                  for s in group.topology.subtopologies}

        def partitions(tasks: Mapping[str, frozenset[int]]) -> tuple[tuple[str, tuple[int, ...]], ...]:
            by_topic: dict[str, set[int]] = {}
            for s, ps in tasks.items():
                for topic in inputs.get(s, ()):
                    by_topic.setdefault(topic, set()).update(ps)
            return tuple((t, tuple(sorted(ps))) for t, ps in sorted(by_topic.items()))

        out = tuple(sorted((m.user_endpoint, partitions(m.assigned.active), partitions(m.assigned.standby))
                           for m in group.members.values() if m.user_endpoint is not None))
        if group.endpoints != out:
            group.endpoint_information_epoch += 1
            group.endpoints = out
        return out

    # --- leaving and fencing ------------------------------------------------------------------

    def _leave(self, req: StreamsHeartbeatRequest, catalog: TopicCatalog, now_ms: int) -> StreamsHeartbeatResult:
        group = self.groups.get(req.group_id)
        if group is None:
            raise StreamsHeartbeatError(ErrorCode.group_id_not_found, f"Streams group {req.group_id} not found.")
        if req.instance_id is not None:
            member = group.static_member(req.instance_id)
            if member is None:
                raise StreamsHeartbeatError(ErrorCode.unknown_member_id, f"Instance id {req.instance_id} is unknown.")
            if member.member_id != req.member_id:
                raise StreamsHeartbeatError(ErrorCode.fenced_instance_id,
                                            f"Static member {req.member_id} with instance id {req.instance_id} was "
                                            f"fenced by member {member.member_id}.")
        else:
            member = group.members.get(req.member_id)
            if member is None:
                raise StreamsHeartbeatError(ErrorCode.unknown_member_id,
                                            f"Member {req.member_id} is not a member of group {group.group_id}.")
        if req.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            # A static member that will come back keeps its place (and tasks) until its session expires.
            group.update_member(replace(member, member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH))
            logger.info("streams group %s: static member %s leaves for now", group.group_id, member.member_id)
        else:
            logger.info("streams group %s: member %s leaves", group.group_id, member.member_id)
            self.fence_member(group, member.member_id, catalog, now_ms)
        return StreamsHeartbeatResult(ErrorCode.none, None, req.member_id, req.member_epoch)

    def fence_member(self, group: StreamsGroup, member_id: str, catalog: TopicCatalog | None, now_ms: int) -> None:
        """The member is gone (left, or its session or rebalance timeout passed): its tasks are freed and the
        group epoch moves so the others get them."""
        group.remove_member(member_id)
        group.group_epoch += 1
        if not group.members:
            group.shutdown_requested = None
            group.assignment_epoch, group.assignment_timestamp_ms = group.group_epoch, 0
            group.target_assignment.clear()

    # --- timers -------------------------------------------------------------------------------

    def tick(self, catalog: TopicCatalog, now_ms: int) -> None:
        for group in list(self.groups.values()):
            self._fire_timers(group, catalog, now_ms)
            self._write(group)

    def fire_timers(self, group_id: str, catalog: TopicCatalog, now_ms: int) -> None:
        group = self.groups.get(group_id)
        if group is not None:
            self._fire_timers(group, catalog, now_ms)
            self._write(group)

    def _fire_timers(self, group: StreamsGroup, catalog: TopicCatalog, now_ms: int) -> None:
        for member_id, deadline in list(group.session_deadlines_ms.items()):
            if now_ms >= deadline and member_id in group.members:
                logger.info("streams group %s: member %s fenced: its session expired", group.group_id, member_id)
                self.fence_member(group, member_id, catalog, now_ms)
        for member_id, (epoch, deadline) in list(group.rebalance_deadlines_ms.items()):
            if now_ms < deadline:
                continue
            group.rebalance_deadlines_ms.pop(member_id, None)
            member = group.members.get(member_id)
            if (member is not None and member.member_epoch == epoch
                    and member.state is StreamsMemberState.UNREVOKED_TASKS):
                logger.info("streams group %s: member %s fenced: it did not revoke its tasks in time",
                            group.group_id, member_id)
                self.fence_member(group, member_id, catalog, now_ms)

    def next_deadline_ms(self) -> int | None:
        deadlines = [d for g in self.groups.values() for d in g.session_deadlines_ms.values()]
        deadlines += [d for g in self.groups.values() for _, d in g.rebalance_deadlines_ms.values()]
        return min(deadlines, default=None)

    # --- offsets, describe, list, delete ------------------------------------------------------

    def is_streams_group(self, group_id: str) -> bool:
        return group_id in self.groups

    def validate_offset_commit(self, group_id: str, member_id: str, member_epoch: int, api_version: int,
                               committed: Iterable[tuple[str, int]] = (), transactional: bool = False,
                               instance_id: str | None = None) -> ErrorCode:
        """Kafka 4.4's StreamsGroup.validateOffsetCommit. A member epoch older than the member's is checked
        against each committed (topic, partition): its task must be one the member holds, or is revoking,
        since that epoch or before; one that is not fails the whole commit, as Kafka's validator throws."""
        group = self.groups[group_id]
        if member_epoch < 0 and not group.members:
            return ErrorCode.none
        if transactional and member_epoch == -1 and not member_id and instance_id is None:
            return ErrorCode.none
        member = group.members.get(member_id)
        if member is None:
            return ErrorCode.unknown_member_id
        if api_version < 9 and not transactional:
            return ErrorCode.unsupported_version
        if member_epoch == member.member_epoch:
            return ErrorCode.none
        if member_epoch > member.member_epoch or group.topology is None:
            return ErrorCode.stale_member_epoch
        for topic, partition in committed:
            subtopology = group.topology.subtopology_of(topic)
            epoch = None if subtopology is None else member.active_epochs.get((subtopology, partition))
            if epoch is None or member_epoch < epoch:
                return ErrorCode.stale_member_epoch
        return ErrorCode.none

    def validate_offset_fetch(self, group_id: str, member_id: str | None, member_epoch: int) -> ErrorCode:
        if member_id is None and member_epoch < 0:
            return ErrorCode.none
        member = self.groups[group_id].members.get(member_id or "")
        if member is None:
            return ErrorCode.unknown_member_id
        return ErrorCode.none if member_epoch == member.member_epoch else ErrorCode.stale_member_epoch

    def delete_group(self, group_id: str) -> ErrorCode:
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.group_id_not_found
        if group.members:
            return ErrorCode.non_empty_group
        del self.groups[group_id]
        if self._emit is not None:
            for record in streams_records.tombstones(group_id, group.written):
                self._emit(record)
        return ErrorCode.none

    def list_groups(self) -> list[tuple[str, StreamsGroupState]]:
        return [(g.group_id, g.state) for g in self.groups.values()]

    # --- persistence: reverting a refused change, loading ---------------------------------------

    def snapshot(self, group_id: str) -> tuple[str, StreamsGroup | None]:
        group = self.groups.get(group_id)
        return group_id, None if group is None else group.copy()

    def revert(self, snapshot: tuple[str, StreamsGroup | None]) -> None:
        """Put a group back as `snapshot` had it (its record was not appended)."""
        group_id, group = snapshot
        if group is None:
            self.groups.pop(group_id, None)
        else:
            self.groups[group_id] = group

    def replay(self, key: StreamsGroupKey, value: bytes | None) -> None:
        """One of Kafka's streams-group records (None: a tombstone), in log order."""
        streams_records.replay(self.groups, key, value)

    def replay_legacy(self, group_id: str, value: bytes | None) -> None:
        """Samsa's record of before (type 32002): the whole group, replaced."""
        streams_records.replay_legacy(self.groups, group_id, value)

    def finish_loading(self, now_ms: int) -> None:
        """After replay: every member of a group just loaded gets a fresh session, a member still revoking a
        fresh rebalance timeout (Kafka schedules both on load)."""
        for group in self.groups.values():
            if group.session_deadlines_ms or not group.members:
                continue  # live already
            for member in group.members.values():
                group.session_deadlines_ms[member.member_id] = now_ms + self.config.session_timeout_for(
                    group.group_id)
                if member.state is StreamsMemberState.UNREVOKED_TASKS:
                    group.rebalance_deadlines_ms[member.member_id] = (member.member_epoch,
                                                                      now_ms + max(member.rebalance_timeout_ms, 0))

    def unload(self, owned: Callable[[str], bool]) -> int:
        gone = [g for g in self.groups if owned(g)]
        for group_id in gone:
            del self.groups[group_id]
        return len(gone)
