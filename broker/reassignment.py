"""Leader elections and partition reassignments, as the active controller decides them.

Mirrors Kafka's controller: ElectLeaders (ReplicationControlManager.electLeaders), the automatic
leader balancer (auto.leader.rebalance.enable), AlterPartitionReassignments and
ListPartitionReassignments (KIP-455), and the completion of a reassignment once the ISR holds every
target replica. Every partition change goes through `build_change`, a port of Kafka's
PartitionChangeBuilder: given the target ISR / replicas / adding / removing and an election type it
completes a reassignment when it can, elects a leader when the current one no longer qualifies, and
returns one PartitionChangeRecord (or None when nothing changes).

A reassignment lives in the metadata (PartitionRecord/PartitionChangeRecord adding_replicas and
removing_replicas), so a new active controller carries it on. While one is under way `replicas` is
the target followed by the replicas being removed (Kafka's PartitionReassignmentReplicas): the added
replicas start following at once, and join the ISR through their leader's AlterPartition.
"""

from __future__ import annotations

import enum
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from types import MappingProxyType

from samsa.broker.controller_types import ControllerCore, Pending, check_record_count
from samsa.broker.metadata.image import MetadataImage, PartitionImage, TopicImage
from samsa.broker.metadata.quorum import NotControllerError
from samsa.broker.metadata.records import MetadataRecord, PartitionChangeRecord
from samsa.kproto.errors import ErrorCode

logger = logging.getLogger(__name__)

NO_LEADER = -1
# Kafka's QuorumController.MAX_ELECTIONS_PER_IMBALANCE: at most this many leader moves per balancing
# pass; the rest wait for the next pass.
MAX_ELECTIONS_PER_IMBALANCE = 1000
# How often the active controller looks for finished reassignments and (when due) leader imbalance.
TICK_INTERVAL_S = 1.0


class ElectionType(enum.IntEnum):
    """ElectLeaders' election_type (KIP-460)."""

    PREFERRED = 0
    UNCLEAN = 1


class Election(enum.Enum):
    """PartitionChangeBuilder.Election: how a leader is chosen when the current one does not qualify."""

    ONLINE = "online"  # keep a qualifying leader, else the first in-sync acceptable replica
    PREFERRED = "preferred"  # the first replica if it qualifies, else as ONLINE
    UNCLEAN = "unclean"  # as ONLINE, else any acceptable replica outside the ISR (may lose records)


@dataclass(frozen=True, slots=True)
class PartitionResult:
    partition_id: int
    error_code: ErrorCode
    error_message: str | None = None


@dataclass(frozen=True, slots=True)
class TopicResults:
    topic: str
    partitions: tuple[PartitionResult, ...]


@dataclass(frozen=True, slots=True)
class OngoingReassignment:
    """One row of ListPartitionReassignments."""

    partition_id: int
    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...]
    removing_replicas: tuple[int, ...]


def is_reassigning(p: PartitionImage) -> bool:
    return bool(p.adding_replicas or p.removing_replicas)


def acceptable_leaders(image: MetadataImage) -> frozenset[int]:
    """Brokers that may lead (Kafka's ClusterControlManager.isActive): unfenced, not shutting down."""
    return frozenset(b.broker_id for b in image.brokers.values() if not b.fenced and not b.in_controlled_shutdown)


# --- the partition change builder ---------------------------------------------------------------


def _merge(current: Sequence[int], target: Sequence[int]) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """(replicas, removing, adding) of a reassignment from `current` to `target`: the target first,
    then the replicas being removed (Kafka's PartitionReassignmentReplicas)."""
    removing = tuple(sorted(set(current) - set(target)))
    adding = tuple(sorted(set(target) - set(current)))
    return tuple(target) + removing, removing, adding


def _completed(replicas: Sequence[int], removing: Sequence[int], adding: Sequence[int],
               isr: Sequence[int]) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    """(replicas, ISR) once a reassignment can finish: every remaining replica is in the ISR and
    neither would be empty (PartitionReassignmentReplicas.maybeCompleteReassignment)."""
    if not removing and not adding:
        return None
    new_isr = tuple(r for r in isr if r not in removing)
    new_replicas = tuple(r for r in replicas if r not in removing)
    if not new_isr or not new_replicas or not set(new_replicas) <= set(new_isr):
        return None
    return new_replicas, new_isr


def build_change(
    topic_id: str,
    p: PartitionImage,
    acceptable: frozenset[int],
    *,
    isr: Sequence[int] | None = None,
    replicas: Sequence[int] | None = None,
    removing: Sequence[int] | None = None,
    adding: Sequence[int] | None = None,
    election: Election = Election.ONLINE,
) -> PartitionChangeRecord | None:
    """The record that takes partition `p` to the given targets (None: keep), or None for no change."""
    target_isr = tuple(p.isr if isr is None else isr)
    target_replicas = tuple(p.replicas if replicas is None else replicas)
    target_removing = tuple(p.removing_replicas if removing is None else removing)
    target_adding = tuple(p.adding_replicas if adding is None else adding)
    done = _completed(target_replicas, target_removing, target_adding, target_isr)
    if done is not None:
        target_replicas, target_isr = done
        target_removing = target_adding = ()

    leader, unclean = _elect(p, target_replicas, target_isr, acceptable, election)
    if unclean:
        target_isr = (leader,)  # Kafka: an unclean leader starts a new ISR of its own
    new_isr = target_isr if target_isr and target_isr != p.isr else None
    new_leader = leader if leader != p.leader else None
    record = PartitionChangeRecord(
        topic_id, p.partition_id, new_isr, new_leader,
        target_replicas if target_replicas != p.replicas else None,
        target_removing if target_removing != p.removing_replicas else None,
        target_adding if target_adding != p.adding_replicas else None,
    )
    if (record.isr, record.leader, record.replicas, record.removing_replicas,
            record.adding_replicas) == (None, None, None, None, None):
        return None
    return record


def _elect(p: PartitionImage, replicas: Sequence[int], isr: Sequence[int], acceptable: frozenset[int],
           election: Election) -> tuple[int, bool]:
    """(leader, unclean) as PartitionChangeBuilder.electLeader chooses it."""

    def valid(r: int) -> bool:
        return r in isr and r in acceptable

    if election == Election.PREFERRED and replicas and valid(replicas[0]):
        return replicas[0], False
    if valid(p.leader):
        return p.leader, False
    for r in replicas:
        if valid(r):
            return r, False
    if election == Election.UNCLEAN:
        for r in replicas:
            if r in acceptable:
                return r, True
    return NO_LEADER, False


# --- ElectLeaders ---------------------------------------------------------------------------------


def elect_leaders(
    image: MetadataImage, election_type: ElectionType, partitions: Sequence[tuple[str, Sequence[int]]] | None
) -> tuple[list[TopicResults], list[MetadataRecord]]:
    """ElectLeaders: PREFERRED makes the first replica lead if it is in the ISR and acceptable;
    UNCLEAN elects a leader for a partition that has none, from outside the ISR if it must.
    `partitions` None means every partition, and then those that need no election are not listed."""
    acceptable = acceptable_leaders(image)
    results: list[TopicResults] = []
    records: list[MetadataRecord] = []
    if partitions is None:
        for topic in image.topics_by_name.values():
            rows = [_elect_one(topic, pid, election_type, acceptable, records) for pid in sorted(topic.partitions)]
            results.append(TopicResults(topic.name, tuple(r for r in rows
                                                          if r.error_code != ErrorCode.election_not_needed)))
        return results, records
    for name, ids in partitions:
        found = image.topics_by_name.get(name)
        rows = [_elect_one(found, pid, election_type, acceptable, records) if found is not None
                else PartitionResult(pid, ErrorCode.unknown_topic_or_partition, f"No such topic as {name}")
                for pid in ids]
        results.append(TopicResults(name, tuple(rows)))
    return results, records


def _elect_one(topic: TopicImage, partition_id: int, election_type: ElectionType, acceptable: frozenset[int],
               records: list[MetadataRecord]) -> PartitionResult:
    p = topic.partitions.get(partition_id)
    if p is None:
        return PartitionResult(partition_id, ErrorCode.unknown_topic_or_partition,
                               f"No such partition as {topic.name}-{partition_id}")
    if election_type == ElectionType.PREFERRED:
        if p.replicas and p.leader == p.replicas[0]:
            return PartitionResult(partition_id, ErrorCode.election_not_needed,
                                   "Leader election not needed for topic partition.")
        record = build_change(topic.topic_id, p, acceptable, election=Election.PREFERRED)
        if record is None:
            return PartitionResult(partition_id, ErrorCode.preferred_leader_not_available,
                                   f"Failed to elect leader for partition {topic.name}-{partition_id} under "
                                   "strategy PreferredReplicaPartitionLeaderElectionStrategy")
    else:
        if p.leader != NO_LEADER:
            return PartitionResult(partition_id, ErrorCode.election_not_needed,
                                   "Leader election not needed for topic partition.")
        record = build_change(topic.topic_id, p, acceptable, election=Election.UNCLEAN)
        if record is None:
            return PartitionResult(partition_id, ErrorCode.eligible_leaders_not_available,
                                   f"Failed to elect leader for partition {topic.name}-{partition_id} under "
                                   "strategy UncleanLeaderElectionStrategy")
    records.append(record)
    check_record_count(len(records))  # Kafka's BoundedList: refused whole, before anything is written
    if record.leader is not None and record.isr is not None and record.leader not in p.isr:
        logger.warning("unclean leader election for %s-%d: %d leads from outside the ISR", topic.name,
                       partition_id, record.leader)
    return PartitionResult(partition_id, ErrorCode.none)


# --- the automatic leader balancer ------------------------------------------------------------------


def balance_leaders(image: MetadataImage, imbalance_percentage: int) -> list[MetadataRecord]:
    """Preferred elections for the partitions of every broker whose leader imbalance exceeds the
    percentage: of the partitions whose first replica it is, the share it does not lead (the ZooKeeper
    controller's checkAndTriggerAutoLeaderRebalance; only a preferred replica in the ISR takes over)."""
    acceptable = acceptable_leaders(image)
    by_preferred: dict[int, list[tuple[str, PartitionImage]]] = {}
    for topic in image.topics_by_id.values():
        for p in topic.partitions.values():
            if p.replicas:
                by_preferred.setdefault(p.replicas[0], []).append((topic.topic_id, p))
    records: list[MetadataRecord] = []
    for broker, parts in sorted(by_preferred.items()):
        behind = [(topic_id, p) for topic_id, p in parts if p.leader != broker]
        if len(behind) * 100 <= imbalance_percentage * len(parts):
            continue
        for topic_id, p in behind:
            if len(records) >= MAX_ELECTIONS_PER_IMBALANCE:
                return records
            record = build_change(topic_id, p, acceptable, election=Election.PREFERRED)
            if record is not None and record.leader == broker:
                records.append(record)
    return records


# --- AlterPartitionReassignments / ListPartitionReassignments -------------------------------------


class ReassignmentError(Exception):
    """A refused reassignment of one partition: the error code and message its row gets."""

    def __init__(self, error_code: ErrorCode, message: str, *, answered: bool = True) -> None:
        super().__init__(message)
        self.error_code = error_code
        self.message = message
        # Whether the row's error_message carries it (Kafka answers some refusals with a null message).
        self.answered = answered


def alter_reassignments(
    image: MetadataImage,
    topics: Sequence[tuple[str, Sequence[tuple[int, Sequence[int] | None]]]],
    unclean_allowed: Callable[[str], bool],
    allow_replication_factor_change: bool = True,
) -> tuple[list[TopicResults], list[MetadataRecord]]:
    """Start (target replicas), replace, or cancel (None) reassignments; all records are written as one
    entry. A partition named twice sees the first change (kept in `changed`, so that each change costs
    the same however large the image: applying each record to the whole image was quadratic). More
    than MAX_RECORDS_PER_USER_OP records raise TooManyRecordsError (Kafka's BoundedList).
    Without `allow_replication_factor_change` (KIP-860) a target of another size than the replica set
    the partition is headed for is refused with INVALID_REPLICATION_FACTOR."""
    results: list[TopicResults] = []
    records: list[MetadataRecord] = []
    changed: dict[tuple[str, int], PartitionImage] = {}
    for name, partitions in topics:
        rows: list[PartitionResult] = []
        for partition_id, target in partitions:
            try:
                record = _alter_one(image, name, partition_id, target, unclean_allowed, changed,
                                    allow_replication_factor_change)
            except ReassignmentError as e:
                logger.info("refused to reassign %s-%d: %s", name, partition_id, e.message)
                rows.append(PartitionResult(partition_id, e.error_code, e.message if e.answered else None))
                continue
            if record is not None:
                records.append(record)
                check_record_count(len(records))
                topic = image.topics_by_name[name]
                changed[(name, partition_id)] = _after(topic, changed.get((name, partition_id))
                                                       or topic.partitions[partition_id], record)
            rows.append(PartitionResult(partition_id, ErrorCode.none))
        results.append(TopicResults(name, tuple(rows)))
    return results, records


def _after(topic: TopicImage, p: PartitionImage, record: PartitionChangeRecord) -> PartitionImage:
    """Partition `p` once `record` is applied (applied to an image holding only that partition)."""
    alone = replace(topic, partitions=MappingProxyType({p.partition_id: p}))
    image = MetadataImage(topics_by_name=MappingProxyType({topic.name: alone}),
                          topics_by_id=MappingProxyType({topic.topic_id: alone}))
    return image.apply([record], image.offset).topics_by_id[topic.topic_id].partitions[p.partition_id]


def _alter_one(image: MetadataImage, name: str, partition_id: int, target: Sequence[int] | None,
               unclean_allowed: Callable[[str], bool], changed: Mapping[tuple[str, int], PartitionImage],
               allow_replication_factor_change: bool = True) -> PartitionChangeRecord | None:
    topic = image.topics_by_name.get(name)
    if topic is None:
        raise ReassignmentError(ErrorCode.unknown_topic_or_partition, f"Unable to find a topic named {name}.")
    p = changed.get((name, partition_id)) or topic.partitions.get(partition_id)
    if p is None:
        raise ReassignmentError(ErrorCode.unknown_topic_or_partition,
                                f"Unable to find partition {name}:{partition_id}.")
    if target is None:
        return _cancel(image, topic, p, unclean_allowed(name))
    _validate_assignment(image, target)
    if not allow_replication_factor_change:
        _validate_replication_factor_unchanged(p, target)
    replicas, removing, adding = _merge(p.replicas, target)
    # From the current replicas (the union, when a reassignment is under way): a new target replaces
    # the old one, and finishes once every replica of the new target is in the ISR (Kafka does this).
    record = build_change(topic.topic_id, p, acceptable_leaders(image), replicas=replicas, removing=removing,
                          adding=adding)
    logger.info("reassigning %s-%d from %s to %s", name, partition_id, list(p.replicas), list(target))
    return record


def _validate_assignment(image: MetadataImage, target: Sequence[int]) -> None:
    """ReplicationControlManager.validateManualPartitionAssignment: not empty, registered, no repeats."""
    if not target:
        raise ReassignmentError(ErrorCode.invalid_replica_assignment,
                                "The manual partition assignment includes an empty replica list.")
    previous: int | None = None
    for broker in sorted(target):
        if broker not in image.brokers:
            raise ReassignmentError(ErrorCode.invalid_replica_assignment,
                                    f"The manual partition assignment includes broker {broker}, but no such "
                                    "broker is registered.")
        if broker == previous:
            raise ReassignmentError(ErrorCode.invalid_replica_assignment,
                                    f"The manual partition assignment includes the broker {broker} more than once.")
        previous = broker


def _validate_replication_factor_unchanged(p: PartitionImage, target: Sequence[int]) -> None:
    """KIP-860 (ReplicationControlManager.validatePartitionReplicationFactorUnchanged): the target has as
    many replicas as the partition has, or, during a reassignment, as the replica set it is headed for."""
    if is_reassigning(p):
        current = len((set(p.replicas) | set(p.adding_replicas)) - set(p.removing_replicas))
    else:
        current = len(p.replicas)
    if current != len(target):
        raise ReassignmentError(ErrorCode.invalid_replication_factor,
                                f"The replication factor is changed from {current} to {len(target)}")


def _cancel(image: MetadataImage, topic: TopicImage, p: PartitionImage,
            unclean_allowed: bool) -> PartitionChangeRecord | None:
    """Revert to the replicas the reassignment started from (Kafka's PartitionReassignmentRevert): the
    added replicas leave the replica list and the ISR. When only added replicas are in sync, the
    revert needs an unclean election, refused unless the topic allows one."""
    if not is_reassigning(p):
        raise ReassignmentError(ErrorCode.no_reassignment_in_progress,
                                "No partition reassignment is in progress for this topic or partition.",
                                answered=False)  # Kafka 4.1.2 answers it with a null message
    replicas = tuple(r for r in p.replicas if r not in p.adding_replicas)
    isr = tuple(r for r in p.isr if r not in p.adding_replicas)
    if not isr:
        if not unclean_allowed:
            raise ReassignmentError(ErrorCode.invalid_replica_assignment,
                                    f"Unable to revert partition assignment for {topic.name}:{p.partition_id} "
                                    "because it would require an unclean leader election.")
        isr = replicas[:1]
    logger.info("cancelling the reassignment of %s-%d: back to %s", topic.name, p.partition_id, list(replicas))
    return build_change(topic.topic_id, p, acceptable_leaders(image), isr=isr, replicas=replicas, removing=(),
                        adding=(), election=Election.UNCLEAN if unclean_allowed else Election.ONLINE)


def list_reassignments(image: MetadataImage, topics: Sequence[tuple[str, Sequence[int]]] | None
                       ) -> list[tuple[str, list[OngoingReassignment]]]:
    """Ongoing reassignments: all of them (None), or those among the named partitions (unknown topics
    and partitions not being reassigned are left out, as Kafka does)."""
    if topics is None:
        wanted = [(t, sorted(t.partitions)) for t in sorted(image.topics_by_name.values(), key=lambda t: t.name)]
    else:
        wanted = [(t, list(ids)) for name, ids in topics if (t := image.topics_by_name.get(name)) is not None]
    out: list[tuple[str, list[OngoingReassignment]]] = []
    for topic, ids in wanted:
        rows = [OngoingReassignment(pid, p.replicas, p.adding_replicas, p.removing_replicas)
                for pid in ids if (p := topic.partitions.get(pid)) is not None and is_reassigning(p)]
        if rows:
            out.append((topic.name, rows))
    return out


# --- ISR changes and the periodic pass --------------------------------------------------------------


def isr_change(image: MetadataImage, topic_id: str, p: PartitionImage,
               new_isr: tuple[int, ...]) -> PartitionChangeRecord:
    """The record for a leader's AlterPartition: the new ISR, and, when a reassignment is under way and
    the ISR now holds every target replica, its completion (which may move leadership off a removed
    leader, as Kafka's PartitionChangeBuilder does in the same record)."""
    if not is_reassigning(p):
        return PartitionChangeRecord(topic_id, p.partition_id, new_isr, None, None)
    record = build_change(topic_id, p, acceptable_leaders(image), isr=new_isr)
    assert record is not None, "an ISR change always changes something"
    if record.replicas is not None:
        logger.info("reassignment of %s-%d complete: replicas %s, leader %d", image.topics_by_id[topic_id].name,
                    p.partition_id, list(record.replicas), p.leader if record.leader is None else record.leader)
    return record


def complete_reassignments(image: MetadataImage) -> list[MetadataRecord]:
    """Finish reassignments whose ISR already holds every target replica (a safety net: an
    AlterPartition normally finishes them in the record that expands the ISR)."""
    acceptable = acceptable_leaders(image)
    records: list[MetadataRecord] = []
    for topic in image.topics_by_id.values():
        for p in topic.partitions.values():
            if is_reassigning(p) and _completed(p.replicas, p.removing_replicas, p.adding_replicas, p.isr):
                record = build_change(topic.topic_id, p, acceptable)
                if record is not None:
                    records.append(record)
    return records


class ReassignmentControl:
    """The controller's side of ElectLeaders and reassignments, and its periodic pass."""

    def __init__(self, controller: ControllerCore) -> None:
        self._controller = controller
        self._next_balance_ms: float | None = None  # set while this node is the active controller

    def elect_leaders(self, election_type: ElectionType, partitions: Sequence[tuple[str, Sequence[int]]] | None
                      ) -> Pending[list[TopicResults]]:
        c = self._controller
        c.require_active()
        results, records = elect_leaders(c.image, election_type, partitions)
        return c.commit(results, records)

    def alter(self, topics: Sequence[tuple[str, Sequence[tuple[int, Sequence[int] | None]]]],
              allow_replication_factor_change: bool = True) -> Pending[list[TopicResults]]:
        c = self._controller
        c.require_active()
        image = c.image
        results, records = alter_reassignments(image, topics, lambda name: c.unclean_allowed(image, name),
                                               allow_replication_factor_change)
        return c.commit(results, records)

    def list_ongoing(self, topics: Sequence[tuple[str, Sequence[int]]] | None
                     ) -> list[tuple[str, list[OngoingReassignment]]]:
        self._controller.require_active()
        return list_reassignments(self._controller.image, topics)

    def tick(self, now_ms: float) -> Pending[int] | None:
        """Called every TICK_INTERVAL_S: on the active controller, finish reassignments that can finish
        and, every leader.imbalance.check.interval.seconds, balance leaders (auto.leader.rebalance.enable)."""
        c = self._controller
        if not c.active:
            self._next_balance_ms = None
            return None
        config = c.config
        interval_ms = config.get_int("leader.imbalance.check.interval.seconds") * 1000
        if self._next_balance_ms is None:
            self._next_balance_ms = now_ms + interval_ms  # Kafka: the first check one interval after activation
        image = c.image
        records = complete_reassignments(image)
        if now_ms >= self._next_balance_ms:
            self._next_balance_ms = now_ms + interval_ms
            if config.get_bool("auto.leader.rebalance.enable"):
                balanced = balance_leaders(image.apply(records, image.offset) if records else image,
                                           config.get_int("leader.imbalance.per.broker.percentage"))
                if balanced:
                    logger.info("leader balance: moving %d partition leaders back to their preferred replicas",
                                len(balanced))
                records += balanced
        if not records:
            return None
        return c.commit(len(records), records)

    async def run_periodic(self) -> None:
        """One pass, awaited until committed, so that the next pass decides on an image that shows it
        (broker.server runs this every TICK_INTERVAL_S)."""
        pending = self.tick(time.monotonic() * 1000)
        if pending is not None:
            try:
                await pending
            except NotControllerError:
                pass  # leadership moved on: the new active controller carries on
