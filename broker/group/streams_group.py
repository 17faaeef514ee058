"""A KIP-1071 streams group and its members (Kafka's StreamsGroup, StreamsGroupMember, TasksTuple).

A streams group is a consumer group whose unit of work is a *task* (subtopology id, partition) rather
than a partition; the broker knows the application's topology (its subtopologies and their source,
repartition and changelog topics), decides how many tasks each subtopology has from the partitions of
its input topics, and assigns active, standby and warm-up tasks to members.

Epochs work as in KIP-848 (consumer_group.py): a group epoch bumped when what the assignor sees
changes, a target assignment epoch, each member's epoch. An active task has at most one owner at any
time: a member first revokes what the target takes away (UNREVOKED_TASKS), and gets an active task
only once no other member holds it, and a standby or warm-up task only once its own process no longer
holds that task in another role (UNRELEASED_TASKS).

States (Kafka's StreamsGroup.StreamsGroupState): Empty, NotReady (the topology is not configured:
missing source or internal topics), Assigning, Reconciling, Stable.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field

# subtopology id -> partitions (task ids of one role)
Tasks = Mapping[str, frozenset[int]]

LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2


def tasks_of(pairs: Mapping[str, set[int]] | Tasks) -> Tasks:
    """Normalized: no empty subtopology entries, frozen sets."""
    return {s: frozenset(ps) for s, ps in sorted(pairs.items()) if ps}


def task_count(tasks: Tasks) -> int:
    return sum(len(ps) for ps in tasks.values())


def union(a: Tasks, b: Tasks) -> Tasks:
    out: dict[str, set[int]] = {s: set(ps) for s, ps in a.items()}
    for s, ps in b.items():
        out.setdefault(s, set()).update(ps)
    return tasks_of(out)


@dataclass(frozen=True, slots=True)
class TasksTuple:
    """Active, standby and warm-up tasks (Kafka's TasksTuple)."""

    active: Tasks = field(default_factory=dict)
    standby: Tasks = field(default_factory=dict)
    warmup: Tasks = field(default_factory=dict)

    def is_empty(self) -> bool:
        return not (self.active or self.standby or self.warmup)

    def contains_any(self, other: TasksTuple) -> bool:
        return any(_overlap(mine, theirs) for mine, theirs in
                   ((self.active, other.active), (self.standby, other.standby), (self.warmup, other.warmup)))

    def merge(self, other: TasksTuple) -> TasksTuple:
        return TasksTuple(union(self.active, other.active), union(self.standby, other.standby),
                          union(self.warmup, other.warmup))


EMPTY_TASKS = TasksTuple()


def _overlap(a: Tasks, b: Tasks) -> bool:
    return any(a.get(s, frozenset()) & ps for s, ps in b.items())


class StreamsMemberState(enum.IntEnum):
    """Kafka's org.apache.kafka.coordinator.group.streams.MemberState."""

    STABLE = 0
    UNREVOKED_TASKS = 1
    UNRELEASED_TASKS = 2
    UNKNOWN = 127


class StreamsGroupState(enum.Enum):
    EMPTY = "Empty"
    NOT_READY = "NotReady"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


# (subtopology id, partition, offset): a member's cumulative changelog offsets per task (StreamsGroupHeartbeat's
# TaskOffsets and TaskEndOffsets).
TaskOffsets = tuple[tuple[str, int, int], ...]


class StreamsStatus(enum.IntEnum):
    """StreamsGroupHeartbeatResponse.Status: a condition of the group the member is told of."""

    STALE_TOPOLOGY = 0
    MISSING_SOURCE_TOPICS = 1
    INCORRECTLY_PARTITIONED_TOPICS = 2
    MISSING_INTERNAL_TOPICS = 3
    SHUTDOWN_APPLICATION = 4
    ASSIGNMENT_DELAYED = 5
    MISSING_CLIENT_TAGS = 6  # Kafka 4.4, StreamsGroupHeartbeat v1 only


@dataclass(frozen=True, slots=True)
class TopicInfo:
    """An internal topic of the topology: partitions 0 = decided by the broker (always 0 for changelogs),
    replication factor 0 = the broker's default."""

    name: str
    partitions: int = 0
    replication_factor: int = 0
    configs: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class Subtopology:
    subtopology_id: str
    source_topics: tuple[str, ...] = ()
    repartition_sink_topics: tuple[str, ...] = ()
    state_changelog_topics: tuple[TopicInfo, ...] = ()
    repartition_source_topics: tuple[TopicInfo, ...] = ()
    copartition_groups: tuple[frozenset[str], ...] = ()  # topic names that must have as many partitions

    @property
    def stateful(self) -> bool:
        return bool(self.state_changelog_topics)


@dataclass(frozen=True, slots=True)
class Topology:
    epoch: int
    subtopologies: tuple[Subtopology, ...]

    def subtopology_of(self, topic: str) -> str | None:
        """The subtopology reading `topic` (a source or repartition source topic; Kafka's sourceTopicMap)."""
        for s in self.subtopologies:
            if topic in s.source_topics or any(r.name == topic for r in s.repartition_source_topics):
                return s.subtopology_id
        return None

    def required_topics(self) -> set[str]:
        """Every topic the topology reads or creates (Kafka's StreamsTopology.requiredTopics)."""
        out: set[str] = set()
        for s in self.subtopologies:
            out.update(s.source_topics)
            out.update(t.name for t in s.repartition_source_topics)
            out.update(t.name for t in s.state_changelog_topics)
        return out


@dataclass(frozen=True, slots=True)
class StreamsGroupMember:
    member_id: str
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: StreamsMemberState = StreamsMemberState.STABLE
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout_ms: int = -1
    topology_epoch: int = 0
    process_id: str = ""
    user_endpoint: tuple[str, int] | None = None
    client_tags: tuple[tuple[str, str], ...] = ()
    assigned: TasksTuple = EMPTY_TASKS
    pending_revocation: TasksTuple = EMPTY_TASKS
    # (subtopology, partition) -> the member epoch at which each active task (held or being revoked) was
    # assigned: an offset commit with an older member epoch is accepted for a task assigned by then (Kafka 4.4).
    active_epochs: Mapping[tuple[str, int], int] = field(default_factory=dict)

    def is_reconciled_to(self, target_assignment_epoch: int) -> bool:
        return self.state is StreamsMemberState.STABLE and self.member_epoch == target_assignment_epoch


class StreamsGroup:
    """One streams group's state; streams_coordinator.py changes it."""

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        # As a KIP-848 group in Kafka 4.3+: epoch 1 with an empty target at epoch 1.
        self.group_epoch = 1
        self.assignment_epoch = 1
        self.assignment_timestamp_ms = 0  # when the target was last computed (0: never)
        self.assignment_not_before_ms = 0  # group.streams.initial.rebalance.delay.ms of a new group
        self.metadata_hash = 0  # the hash of the topology's topics at the last epoch bump
        self.topology: Topology | None = None
        self.configured: object | None = None  # streams_topology.ConfiguredTopology of the current hash
        self.members: dict[str, StreamsGroupMember] = {}
        self.target_assignment: dict[str, TasksTuple] = {}
        self.static_members: dict[str, str] = {}  # instance id -> member id
        self.endpoint_information_epoch = 0
        self.endpoints: tuple[object, ...] = ()  # what the last endpoint information epoch told
        self.shutdown_requested: str | None = None  # the member that asked the whole application to shut down
        # What the log holds of the group (streams_records.py): record key -> (what its value was encoded from,
        # None after a load; the value). Replaced, not changed, by a write: copy() shares it.
        self.written: dict[bytes, tuple[object, bytes]] = {}
        self.written_fingerprint: tuple[object, ...] | None = None  # what it was written from
        self.session_deadlines_ms: dict[str, int] = {}
        self.rebalance_deadlines_ms: dict[str, tuple[int, int]] = {}  # member -> (epoch, deadline)
        # member -> (task offsets, task end offsets) it last reported: Kafka 4.4's MemberTaskOffsets, kept in
        # memory only (no record), dropped with the member; StreamsGroupDescribe shows them.
        self.task_offsets: dict[str, tuple[TaskOffsets, TaskOffsets]] = {}
        self._owners: tuple[dict[tuple[str, int], str], dict[tuple[str, int], set[str]],
                            dict[tuple[str, int], set[str]]] | None = None

    def is_ready(self) -> bool:
        return bool(getattr(self.configured, "ready", False))

    @property
    def state(self) -> StreamsGroupState:
        if not self.members:
            return StreamsGroupState.EMPTY
        if not self.is_ready():
            return StreamsGroupState.NOT_READY
        if self.group_epoch > self.assignment_epoch:
            return StreamsGroupState.ASSIGNING
        if any(not m.is_reconciled_to(self.assignment_epoch) for m in self.members.values()):
            return StreamsGroupState.RECONCILING
        return StreamsGroupState.STABLE

    # --- who holds which task (Kafka's currentActiveTaskToProcessId and friends) -----------------------

    def _index(self) -> tuple[dict[tuple[str, int], str], dict[tuple[str, int], set[str]],
                              dict[tuple[str, int], set[str]]]:
        if self._owners is None:
            active: dict[tuple[str, int], str] = {}
            standby: dict[tuple[str, int], set[str]] = {}
            warmup: dict[tuple[str, int], set[str]] = {}
            for m in self.members.values():
                held = m.assigned.merge(m.pending_revocation)
                for s, ps in held.active.items():
                    for p in ps:
                        active[(s, p)] = m.process_id
                for role, index in ((held.standby, standby), (held.warmup, warmup)):
                    for s, ps in role.items():
                        for p in ps:
                            index.setdefault((s, p), set()).add(m.process_id)
            self._owners = (active, standby, warmup)
        return self._owners

    def active_task_process(self, subtopology: str, partition: int) -> str | None:
        return self._index()[0].get((subtopology, partition))

    def standby_task_processes(self, subtopology: str, partition: int) -> set[str]:
        return self._index()[1].get((subtopology, partition), set())

    def warmup_task_processes(self, subtopology: str, partition: int) -> set[str]:
        return self._index()[2].get((subtopology, partition), set())

    def update_member(self, member: StreamsGroupMember) -> None:
        self.members[member.member_id] = member
        if member.instance_id is not None:
            self.static_members[member.instance_id] = member.member_id
        self._owners = None

    def remove_member(self, member_id: str) -> StreamsGroupMember | None:
        old = self.members.pop(member_id, None)
        if old is None:
            return None
        self._owners = None
        if old.instance_id is not None and self.static_members.get(old.instance_id) == member_id:
            del self.static_members[old.instance_id]
        self.session_deadlines_ms.pop(member_id, None)
        self.rebalance_deadlines_ms.pop(member_id, None)
        self.task_offsets.pop(member_id, None)
        self.target_assignment.pop(member_id, None)
        return old

    def static_member(self, instance_id: str) -> StreamsGroupMember | None:
        member_id = self.static_members.get(instance_id)
        return None if member_id is None else self.members.get(member_id)

    def copy(self) -> StreamsGroup:
        """A copy to put back if a change cannot be written (members and assignments are immutable)."""
        other = StreamsGroup(self.group_id)
        for name in ("group_epoch", "assignment_epoch", "assignment_timestamp_ms", "assignment_not_before_ms",
                     "metadata_hash", "topology", "configured", "endpoint_information_epoch", "endpoints",
                     "shutdown_requested", "written",
                     "written_fingerprint"):
            setattr(other, name, getattr(self, name))
        other.members, other.target_assignment = dict(self.members), dict(self.target_assignment)
        other.static_members = dict(self.static_members)
        other.session_deadlines_ms = dict(self.session_deadlines_ms)
        other.rebalance_deadlines_ms = dict(self.rebalance_deadlines_ms)
        other.task_offsets = dict(self.task_offsets)
        return other
