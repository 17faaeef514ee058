"""The controller: validates metadata changes and turns them into records on the metadata quorum.

Every node with the controller role has one; only the active controller (the Raft leader) can
write, and a write is done when the quorum commits it. A mutating method validates against the
current image, proposes its records as one entry, and returns a `Pending` result: `await` it for
the commit (NotControllerError if leadership was lost meanwhile), or check `.done` — a one-voter
quorum commits before the method returns. Errors a client should see are Kafka error codes as values.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from samsa.broker.config import BrokerConfig, is_valid_topic_name, validate_broker_config, validate_topic_config
from samsa.broker.metadata.image import MetadataImage
from samsa.broker.metadata.quorum import MetadataQuorum, NotControllerError
from samsa.broker.metadata.records import (
    BROKER_RESOURCE,
    TOPIC_RESOURCE,
    BrokerRegistrationChangeRecord,
    ConfigRecord,
    MetadataRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    TopicRecord,
)
from samsa.broker.reassignment import ReassignmentControl, isr_change
from samsa.kproto.errors import ErrorCode

logger = logging.getLogger(__name__)
T = TypeVar("T")

MAX_PARTITIONS_PER_REQUEST = 100_000
# Producer ids are handed out from blocks recorded in the metadata log (Kafka's AllocateProducerIds,
# KIP-730): a block is persisted before any id in it is used, so ids are never reused, even across
# restarts (a restart abandons the rest of the current block).
PRODUCER_ID_BLOCK_SIZE = 1000


@dataclass(frozen=True, slots=True)
class TopicSpec:
    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    assignments: Mapping[int, tuple[int, ...]] = field(default_factory=dict)
    configs: Mapping[str, str | None] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class TopicResult:
    name: str
    error_code: ErrorCode
    error_message: str | None = None
    topic_id: str | None = None
    num_partitions: int = -1
    replication_factor: int = -1


def _collision_key(name: str) -> str:
    # Kafka: '.' and '_' collide in metric names, so topics differing only there are refused.
    return name.replace(".", "_")


def new_topic_id() -> str:
    while True:
        topic_id = uuid.uuid4()
        # Kafka reserves the zero UUID and the metadata topic's id; never hand them out.
        if topic_id.int not in (0, 1):
            return str(topic_id)


class Pending(Generic[T]):
    """A controller answer whose records may still await their commit."""

    __slots__ = ("_commit", "value")

    def __init__(self, value: T, commit: asyncio.Future[int] | int | None) -> None:
        self.value = value
        self._commit = commit

    @property
    def done(self) -> bool:
        return not isinstance(self._commit, asyncio.Future)

    def result(self) -> T:
        """The value, once committed (a one-voter quorum: at once)."""
        assert self.done, "the metadata write has not been committed yet"
        return self.value

    def __await__(self) -> Generator[Any, None, T]:
        if isinstance(self._commit, asyncio.Future):
            yield from self._commit.__await__()
        return self.value


@dataclass(frozen=True, slots=True)
class AlterPartitionChange:
    topic_id: str
    partition_id: int
    leader_epoch: int
    partition_epoch: int
    new_isr: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class AlterPartitionResult:
    change: AlterPartitionChange
    error_code: ErrorCode
    leader_id: int = -1
    leader_epoch: int = -1
    isr: tuple[int, ...] = ()
    partition_epoch: int = -1


@dataclass(frozen=True, slots=True)
class HeartbeatResult:
    is_caught_up: bool
    is_fenced: bool
    should_shut_down: bool


class Controller:
    def __init__(self, config: BrokerConfig, quorum: MetadataQuorum) -> None:
        self._config = config
        self._quorum = quorum
        self.node_id = config.node_id
        # broker id -> when its session ends (monotonic ms), kept by the active controller only
        self._sessions: dict[int, float] = {}
        self.unclean_elections = 0
        self._working: MetadataImage | None = None  # committed image + uncommitted own writes
        self._working_epoch = -1
        self._uncommitted = 0
        # ElectLeaders, partition reassignments and the leader balancer (broker.reassignment)
        self.reassignments = ReassignmentControl(self)

    @property
    def image(self) -> MetadataImage:
        """What the controller decides on: the committed image plus its own writes still waiting for
        their commit (Kafka's controller keeps uncommitted state the same way), so two requests in
        flight together cannot both take the same producer-id block or create the same topic."""
        working = self._working
        if working is not None and self._working_epoch == self._quorum.epoch and self._quorum.is_leader:
            return working
        return self._quorum.image

    @property
    def active(self) -> bool:
        return self._quorum.is_leader

    def _write(self, records: Sequence[MetadataRecord]) -> asyncio.Future[int] | int | None:
        if not records:
            return None
        base = self.image
        result = self._quorum.write_nowait(records)
        if isinstance(result, int):
            return result  # committed at once (one voter): the quorum's image has it
        self._working = base.apply(records, base.offset + 1)
        self._working_epoch = self._quorum.epoch
        self._uncommitted += 1
        result.add_done_callback(self._committed)
        return result

    def _committed(self, _future: asyncio.Future[int]) -> None:
        self._uncommitted -= 1
        if self._uncommitted == 0 or _future.cancelled() or _future.exception() is not None:
            # all in: the committed image is the whole truth again (or leadership was lost with it)
            self._working = None

    def _commit(self, value: T, records: Sequence[MetadataRecord]) -> Pending[T]:
        return Pending(value, self._write(records))

    def require_active(self) -> None:
        if not self._quorum.is_leader:
            raise NotControllerError(self._quorum.leader_id)

    # --- producer ids (Kafka's AllocateProducerIds, KIP-730) ---------------------------------------

    def allocate_producer_ids(self, broker_id: int, broker_epoch: int) -> Pending[tuple[int, int]]:
        """A block of PRODUCER_ID_BLOCK_SIZE ids, recorded before any of them is used."""
        self.require_active()
        start = self.image.next_producer_id
        end = start + PRODUCER_ID_BLOCK_SIZE
        return self._commit((start, PRODUCER_ID_BLOCK_SIZE), [ProducerIdsRecord(broker_id, broker_epoch, end)])

    # --- brokers: registration, heartbeats, fencing -------------------------------------------------

    def live_brokers(self) -> tuple[int, ...]:
        return self.image.live_brokers()

    def register_broker(self, broker_id: int, incarnation_id: str, host: str, port: int,
                        rack: str | None, now_ms: float) -> Pending[int]:
        """A broker (re)starts: a new registration with a new epoch, fenced until it catches up."""
        self.require_active()
        image = self.image
        old = image.brokers.get(broker_id)
        if old is not None and old.incarnation_id == incarnation_id:
            self._sessions[broker_id] = now_ms + self._session_timeout_ms()
            return Pending(old.broker_epoch, None)
        epoch = max([b.broker_epoch for b in image.brokers.values()] + [image.offset]) + 1
        records: list[MetadataRecord] = [RegisterBrokerRecord(broker_id, epoch, incarnation_id, host, port, rack, True)]
        if old is not None:
            # A new incarnation may have lost what the old one had not flushed: it leaves the ISRs
            # (leadership moves to another in-sync replica) and rejoins once its leaders see it caught up.
            records += self._move_leaders_away(image, broker_id, only_to_successor=True)
        self._sessions[broker_id] = now_ms + self._session_timeout_ms()
        return self._commit(epoch, records)

    def _session_timeout_ms(self) -> int:
        return self._config.get_int("broker.session.timeout.ms")

    def heartbeat(self, broker_id: int, broker_epoch: int, metadata_offset: int, want_fence: bool,
                  want_shut_down: bool, now_ms: float) -> tuple[ErrorCode, Pending[HeartbeatResult] | None]:
        self.require_active()
        image = self.image
        registration = image.brokers.get(broker_id)
        if registration is None or registration.broker_epoch != broker_epoch:
            return ErrorCode.stale_broker_epoch, None
        self._sessions[broker_id] = now_ms + self._session_timeout_ms()
        caught_up = metadata_offset >= registration.registration_offset
        records: list[MetadataRecord] = []
        fenced = registration.fenced
        if want_shut_down:
            # Controlled shutdown (Kafka): leadership moves to another in-sync replica first, then the
            # broker may stop. A partition with no other in-sync replica keeps its leader until the
            # session expires (a quick restart then finds it unchanged).
            records += self._move_leaders_away(image, broker_id, only_to_successor=True)
            if not registration.in_controlled_shutdown:
                records.append(BrokerRegistrationChangeRecord(broker_id, broker_epoch, None, True))
        elif want_fence and not fenced:
            records.append(BrokerRegistrationChangeRecord(broker_id, broker_epoch, True))
            records += self._move_leaders_away(image, broker_id)
            fenced = True
        elif fenced and caught_up and not want_fence:
            records.append(BrokerRegistrationChangeRecord(broker_id, broker_epoch, False))
            fenced = False
            records += self._elect_offline_leaders(image, broker_id)
        should_shut_down = want_shut_down and not any(
            p.leader == broker_id for t in image.topics_by_id.values() for p in t.partitions.values()
            if len(p.isr) > 1)
        if should_shut_down and not fenced:
            # It stops now: fenced at once rather than after its session, so acks=all waits on
            # partitions it followed end with this ISR change instead of a timeout.
            records.append(BrokerRegistrationChangeRecord(broker_id, broker_epoch, True))
            fenced = True
        return ErrorCode.none, self._commit(HeartbeatResult(caught_up, fenced, should_shut_down), records)

    def fence_expired_brokers(self, now_ms: float) -> Pending[list[int]] | None:
        """Fence every broker whose session ended (called periodically on the active controller)."""
        if not self._quorum.is_leader:
            self._sessions.clear()
            return None
        image = self.image
        records: list[MetadataRecord] = []
        fenced: list[int] = []
        for broker in image.brokers.values():
            if broker.fenced or broker.broker_id == self.node_id:
                continue  # this node's own broker lives exactly as long as this controller
            deadline = self._sessions.get(broker.broker_id)
            if deadline is None:
                # A new active controller gives every broker a full session to find it.
                self._sessions[broker.broker_id] = now_ms + self._session_timeout_ms()
                continue
            if now_ms >= deadline:
                logger.warning("fencing broker %d: no heartbeat for %d ms", broker.broker_id,
                               self._session_timeout_ms())
                records.append(BrokerRegistrationChangeRecord(broker.broker_id, broker.broker_epoch, True))
                records += self._move_leaders_away(image, broker.broker_id)
                fenced.append(broker.broker_id)
                # Until the commit shows it fenced, do not propose the same again every pass; if the
                # write is lost (leadership changed) the next session timeout proposes it again.
                self._sessions[broker.broker_id] = now_ms + self._session_timeout_ms()
        if not records:
            return None
        return self._commit(fenced, records)

    def _move_leaders_away(self, image: MetadataImage, broker_id: int, *,
                           only_to_successor: bool = False) -> list[MetadataRecord]:
        """Leadership and ISR membership leave `broker_id`: a new leader from the rest of the ISR, else
        none (offline) — or, with unclean.leader.election.enable, any other live replica."""
        live = set(image.live_brokers()) - {broker_id}
        records: list[MetadataRecord] = []
        for topic in image.topics_by_id.values():
            for p in topic.partitions.values():
                if broker_id not in p.isr and p.leader != broker_id:
                    continue
                isr = tuple(r for r in p.isr if r != broker_id)
                candidates = [r for r in isr if r in live]
                if only_to_successor and not candidates:
                    continue
                leader = p.leader
                if p.leader == broker_id or p.leader not in live:
                    if candidates:
                        leader = candidates[0]
                    elif self._unclean_allowed(image, topic.name):
                        others = [r for r in p.replicas if r in live]
                        leader = others[0] if others else -1
                        if others:
                            self.unclean_elections += 1
                            logger.warning("unclean leader election for %s-%d: %d leads from outside the ISR",
                                           topic.name, p.partition_id, leader)
                            isr = (leader,)
                    else:
                        leader = -1
                if not isr:
                    # Kafka keeps the last ISR member when no one else is in sync (it may come back).
                    isr = (broker_id,) if leader == -1 else (leader,)
                if leader != p.leader or isr != p.isr:
                    records.append(PartitionChangeRecord(topic.topic_id, p.partition_id, isr,
                                                         leader if leader != p.leader else None, None))
        return records

    def _elect_offline_leaders(self, image: MetadataImage, broker_id: int) -> list[MetadataRecord]:
        """A broker came back: partitions without a leader whose ISR holds it get it as leader."""
        records: list[MetadataRecord] = []
        for topic in image.topics_by_id.values():
            for p in topic.partitions.values():
                if p.leader == -1 and broker_id in p.isr:
                    records.append(PartitionChangeRecord(topic.topic_id, p.partition_id, None, broker_id, None))
        return records

    def _unclean_allowed(self, image: MetadataImage, topic: str) -> bool:
        value = image.topic_configs(topic).get("unclean.leader.election.enable")
        if value is None:
            value = self._config.get("unclean.leader.election.enable")
        return str(value).lower() == "true"

    # --- partition leaders and ISR (AlterPartition, for partition leaders) -------------------------

    def alter_partition(
        self, broker_id: int, broker_epoch: int, changes: Sequence[AlterPartitionChange]
    ) -> tuple[ErrorCode, Pending[list[AlterPartitionResult]] | None]:
        """A leader asks to change its partitions' ISR (Kafka: ReplicationControlManager.alterPartition).

        Each change names the leader epoch and partition epoch it was computed from; a stale one is
        refused (FENCED_LEADER_EPOCH / INVALID_UPDATE_VERSION) so two leaders cannot race. The new ISR
        must hold the leader, name only assigned replicas, and only live (unfenced) brokers.
        """
        self.require_active()
        image = self.image
        registration = image.brokers.get(broker_id)
        if registration is None or registration.broker_epoch != broker_epoch:
            return ErrorCode.stale_broker_epoch, None
        live = set(image.live_brokers())
        results: list[AlterPartitionResult] = []
        records: list[MetadataRecord] = []
        for change in changes:
            topic = image.topics_by_id.get(change.topic_id)
            p = topic.partitions.get(change.partition_id) if topic is not None else None
            if topic is None:
                results.append(AlterPartitionResult(change, ErrorCode.unknown_topic_id))
                continue
            if p is None:
                results.append(AlterPartitionResult(change, ErrorCode.unknown_topic_or_partition))
                continue
            error = ErrorCode.none
            if p.leader != broker_id:
                error = ErrorCode.not_leader_or_follower
            elif change.leader_epoch != p.leader_epoch:
                error = ErrorCode.fenced_leader_epoch
            elif change.partition_epoch != p.partition_epoch:
                error = ErrorCode.invalid_update_version
            elif broker_id not in change.new_isr or not set(change.new_isr) <= set(p.replicas):
                error = ErrorCode.invalid_request
            elif not set(change.new_isr) <= live | {broker_id}:
                error = ErrorCode.ineligible_replica
            if error != ErrorCode.none:
                results.append(AlterPartitionResult(change, error, p.leader, p.leader_epoch, p.isr,
                                                    p.partition_epoch))
                continue
            new_isr = tuple(change.new_isr)
            if new_isr != p.isr:
                # a reassignment under way may complete in the same record (broker.reassignment)
                record = isr_change(image, topic.topic_id, p, new_isr)
                records.append(record)
                epoch = p.partition_epoch + 1
                if record.leader is not None and record.leader != broker_id:
                    results.append(AlterPartitionResult(change, ErrorCode.new_leader_elected))  # as Kafka
                    continue
                new_isr = record.isr if record.isr is not None else p.isr
            else:
                epoch = p.partition_epoch
            results.append(AlterPartitionResult(change, ErrorCode.none, p.leader, p.leader_epoch, new_isr, epoch))
        return ErrorCode.none, self._commit(results, records)

    # --- topics --------------------------------------------------------------------------------------

    def create_topics(self, specs: Sequence[TopicSpec], *, validate_only: bool) -> Pending[list[TopicResult]]:
        self.require_active()  # never decide on a follower's image, even when nothing is written
        results: list[TopicResult] = []
        records: list[MetadataRecord] = []
        image = self.image
        seen: set[str] = set()
        existing_keys = {_collision_key(n): n for n in image.topics_by_name}
        for spec in specs:
            result = self._check_create(spec, image, existing_keys, seen)
            seen.add(spec.name)
            if result.error_code != ErrorCode.none or validate_only:
                results.append(result)
                continue
            topic_id = new_topic_id()
            records.append(TopicRecord(spec.name, topic_id))
            for name, value in spec.configs.items():
                if value is not None:
                    records.append(ConfigRecord(TOPIC_RESOURCE, spec.name, name, value))
            for pid in range(result.num_partitions):
                replicas = spec.assignments.get(pid) or self._place(pid, result.replication_factor)
                records.append(PartitionRecord(topic_id, pid, replicas, replicas, replicas[0], 0, 0))
            existing_keys[_collision_key(spec.name)] = spec.name
            results.append(
                TopicResult(spec.name, ErrorCode.none, None, topic_id, result.num_partitions,
                            result.replication_factor)
            )
        return self._commit(results, records)

    def _place(self, partition_id: int, replication_factor: int) -> tuple[int, ...]:
        brokers = self.live_brokers()
        start = partition_id % len(brokers)
        return tuple(brokers[(start + i) % len(brokers)] for i in range(replication_factor))

    def _check_create(
        self, spec: TopicSpec, image: MetadataImage, existing_keys: Mapping[str, str], seen: set[str]
    ) -> TopicResult:
        name = spec.name
        if name in seen:
            return TopicResult(name, ErrorCode.invalid_request, f"Create topics request contains {name} twice.")
        if not is_valid_topic_name(name):
            return TopicResult(name, ErrorCode.invalid_topic_exception,
                               f"Topic name '{name}' is illegal, it contains a character other than "
                               "ASCII alphanumerics, '.', '_' and '-', or is too long.")
        if name in image.topics_by_name:
            return TopicResult(name, ErrorCode.topic_already_exists, f"Topic '{name}' already exists.")
        other = existing_keys.get(_collision_key(name))
        if other is not None:
            return TopicResult(name, ErrorCode.invalid_topic_exception,
                               f"Topic '{name}' collides with existing topic: {other}")
        if spec.assignments:
            if spec.num_partitions != -1 or spec.replication_factor != -1:
                return TopicResult(name, ErrorCode.invalid_request,
                                   "Both numPartitions or replicationFactor and replicasAssignments were set. "
                                   "Both cannot be used at the same time.")
            partitions = len(spec.assignments)
            if sorted(spec.assignments) != list(range(partitions)):
                return TopicResult(name, ErrorCode.invalid_replica_assignment,
                                   "Partitions must be numbered consecutively from 0.")
            rfs = {len(r) for r in spec.assignments.values()}
            if len(rfs) != 1 or 0 in rfs:
                return TopicResult(name, ErrorCode.invalid_replica_assignment,
                                   "All partitions must have the same non-zero number of replicas.")
            live = set(self.live_brokers())
            for replicas in spec.assignments.values():
                if len(set(replicas)) != len(replicas) or not set(replicas) <= live:
                    return TopicResult(name, ErrorCode.invalid_replica_assignment,
                                       f"Replica assignment {list(replicas)} refers to unknown or repeated brokers.")
            rf = rfs.pop()
        else:
            partitions = spec.num_partitions if spec.num_partitions != -1 else self._config.get_int("num.partitions")
            rf = (spec.replication_factor if spec.replication_factor != -1
                  else self._config.get_int("default.replication.factor"))
            if partitions <= 0 or partitions > MAX_PARTITIONS_PER_REQUEST:
                return TopicResult(name, ErrorCode.invalid_partitions, "Number of partitions must be larger than 0.")
            if rf <= 0:
                return TopicResult(name, ErrorCode.invalid_replication_factor,
                                   "Replication factor must be larger than 0.")
            live_count = len(self.live_brokers())
            if rf > live_count:
                return TopicResult(name, ErrorCode.invalid_replication_factor,
                                   f"Unable to replicate the partition {rf} time(s): The target replication factor "
                                   f"of {rf} cannot be reached because only {live_count} broker(s) are registered.")
        for config_name, value in spec.configs.items():
            problem = validate_topic_config(config_name, value)
            if problem is not None:
                return TopicResult(name, ErrorCode.invalid_config, problem)
        return TopicResult(name, ErrorCode.none, None, None, partitions, rf)

    def delete_topics(self, names: Sequence[str]) -> Pending[list[tuple[str, str | None, ErrorCode]]]:
        """Delete by name; returns (name, topic_id, error) per topic."""
        self.require_active()
        image = self.image
        records: list[MetadataRecord] = []
        results: list[tuple[str, str | None, ErrorCode]] = []
        done: set[str] = set()
        for name in names:
            topic = image.topics_by_name.get(name)
            if topic is None:
                results.append((name, None, ErrorCode.unknown_topic_or_partition))
                continue
            if name.startswith("__"):
                results.append((name, topic.topic_id, ErrorCode.topic_authorization_failed))
                continue
            if name not in done:
                records.append(RemoveTopicRecord(topic.topic_id))
                done.add(name)
            results.append((name, topic.topic_id, ErrorCode.none))
        return self._commit(results, records)

    def create_partitions(
        self, name: str, count: int, assignments: Sequence[tuple[int, ...]] | None, *, validate_only: bool
    ) -> Pending[tuple[ErrorCode, str | None]]:
        self.require_active()
        return self._checked(self._create_partitions(name, count, assignments, validate_only=validate_only))

    def _checked(
        self, outcome: tuple[ErrorCode, str | None] | list[MetadataRecord]
    ) -> Pending[tuple[ErrorCode, str | None]]:
        if isinstance(outcome, tuple):
            return Pending(outcome, None)
        return self._commit((ErrorCode.none, None), outcome)

    def _create_partitions(
        self, name: str, count: int, assignments: Sequence[tuple[int, ...]] | None, *, validate_only: bool
    ) -> tuple[ErrorCode, str | None] | list[MetadataRecord]:
        topic = self.image.topics_by_name.get(name)
        if topic is None:
            return ErrorCode.unknown_topic_or_partition, f"The topic '{name}' does not exist."
        current = len(topic.partitions)
        if count < current:
            return ErrorCode.invalid_partitions, (
                f"Topic currently has {current} partitions, which is higher than the requested {count}.")
        if count == current:
            return ErrorCode.invalid_partitions, f"Topic already has {current} partitions."
        if count > MAX_PARTITIONS_PER_REQUEST:
            return ErrorCode.invalid_partitions, "Too many partitions requested."
        # The replication factor of partition 0 as it will be once any reassignment of it ends (its
        # replica list meanwhile holds the replicas being removed as well).
        first = topic.partitions[min(topic.partitions)]
        rf = len(first.replicas) - len(first.removing_replicas)
        new_ids = range(current, count)
        if assignments is not None:
            if len(assignments) != len(new_ids):
                return ErrorCode.invalid_replica_assignment, (
                    f"Increasing the number of partitions by {len(new_ids)} but {len(assignments)} "
                    "assignments provided.")
            live = set(self.live_brokers())
            for replicas in assignments:
                if not replicas or not set(replicas) <= live or len(set(replicas)) != len(replicas):
                    return ErrorCode.invalid_replica_assignment, f"Invalid replica assignment {list(replicas)}."
        if validate_only:
            return ErrorCode.none, None
        records: list[MetadataRecord] = []
        for i, pid in enumerate(new_ids):
            replicas = tuple(assignments[i]) if assignments is not None else self._place(pid, rf)
            records.append(PartitionRecord(topic.topic_id, pid, replicas, replicas, replicas[0], 0, 0))
        return records

    def alter_topic_configs(
        self, name: str, changes: Mapping[str, str | None], *, replace_all: bool, validate_only: bool
    ) -> Pending[tuple[ErrorCode, str | None]]:
        self.require_active()
        return self._checked(self._alter_topic_configs(name, changes, replace_all=replace_all,
                                                       validate_only=validate_only))

    def _alter_topic_configs(
        self, name: str, changes: Mapping[str, str | None], *, replace_all: bool, validate_only: bool
    ) -> tuple[ErrorCode, str | None] | list[MetadataRecord]:
        """Set (or with None, delete) topic overrides. `replace_all` is legacy AlterConfigs semantics."""
        image = self.image
        if name not in image.topics_by_name:
            return ErrorCode.unknown_topic_or_partition, f"The topic '{name}' does not exist."
        for config_name, value in changes.items():
            problem = validate_topic_config(config_name, value)
            if problem is not None:
                return ErrorCode.invalid_config, problem
        if validate_only:
            return ErrorCode.none, None
        records: list[MetadataRecord] = []
        current = image.topic_configs(name)
        if replace_all:
            for old in current:
                if old not in changes:
                    records.append(ConfigRecord(TOPIC_RESOURCE, name, old, None))
        for config_name, value in changes.items():
            if value is None and config_name not in current:
                continue
            records.append(ConfigRecord(TOPIC_RESOURCE, name, config_name, value))
        return records

    def alter_broker_configs(
        self, resource_name: str, changes: Mapping[str, str | None], *, replace_all: bool, validate_only: bool
    ) -> Pending[tuple[ErrorCode, str | None]]:
        self.require_active()
        return self._checked(self._alter_broker_configs(resource_name, changes, replace_all=replace_all,
                                                        validate_only=validate_only))

    def _alter_broker_configs(
        self, resource_name: str, changes: Mapping[str, str | None], *, replace_all: bool, validate_only: bool
    ) -> tuple[ErrorCode, str | None] | list[MetadataRecord]:
        """Dynamic broker configs: resource "" is the cluster-wide default, "<node id>" one broker."""
        known = {str(b) for b in self.image.brokers} | {str(self.node_id)}
        if resource_name != "" and resource_name not in known:
            return ErrorCode.invalid_request, (
                f"Unexpected broker id, expected {self.node_id} or empty string, but received {resource_name}")
        for name, value in changes.items():
            problem = validate_broker_config(name, value)
            if problem is not None:
                return ErrorCode.invalid_request if "dynamically" in problem else ErrorCode.invalid_config, problem
        if validate_only:
            return ErrorCode.none, None
        current = self.image.configs.get((BROKER_RESOURCE, resource_name), {})
        records: list[MetadataRecord] = []
        if replace_all:
            records += [
                ConfigRecord(BROKER_RESOURCE, resource_name, old, None) for old in current if old not in changes
            ]
        for name, value in changes.items():
            if value is None and name not in current:
                continue
            records.append(ConfigRecord(BROKER_RESOURCE, resource_name, name, value))
        return records
