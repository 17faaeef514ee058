"""The controller: validates metadata changes and turns them into records on the metadata log.

Single node today (a one-voter quorum in the same process); issue 6 puts the same record-producing
code behind a Raft quorum.  Every method returns Kafka error codes as values.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from broker.config import BrokerConfig, is_valid_topic_name, validate_broker_config, validate_topic_config
from broker.metadata.image import MetadataImage
from broker.metadata.log import MetadataLog
from broker.metadata.records import (
    BROKER_RESOURCE,
    TOPIC_RESOURCE,
    ConfigRecord,
    MetadataRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RemoveTopicRecord,
    TopicRecord,
)
from kproto.errors import ErrorCode

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


class Controller:
    def __init__(
        self,
        config: BrokerConfig,
        metadata_log: MetadataLog,
        publish: Callable[[MetadataImage], None],
    ) -> None:
        self._config = config
        self._log = metadata_log
        self._publish = publish
        self.node_id = config.node_id
        self._next_producer_id = 0
        self._producer_id_block_end = 0

    @property
    def image(self) -> MetadataImage:
        return self._log.image

    def _commit(self, records: Sequence[MetadataRecord]) -> None:
        if records:
            image = self._log.append(records)
            self._publish(image)

    def generate_producer_id(self) -> int:
        if self._next_producer_id >= self._producer_id_block_end:
            start = self.image.next_producer_id
            end = start + PRODUCER_ID_BLOCK_SIZE
            self._commit([ProducerIdsRecord(self.node_id, 0, end)])
            self._next_producer_id, self._producer_id_block_end = start, end
        producer_id = self._next_producer_id
        self._next_producer_id += 1
        return producer_id

    def live_brokers(self) -> tuple[int, ...]:
        return (self.node_id,)

    def create_topics(self, specs: Sequence[TopicSpec], *, validate_only: bool) -> list[TopicResult]:
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
        self._commit(records)
        return results

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

    def delete_topics(self, names: Sequence[str]) -> list[tuple[str, str | None, ErrorCode]]:
        """Delete by name; returns (name, topic_id, error) per topic."""
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
        self._commit(records)
        return results

    def create_partitions(
        self, name: str, count: int, assignments: Sequence[tuple[int, ...]] | None, *, validate_only: bool
    ) -> tuple[ErrorCode, str | None]:
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
        rf = len(next(iter(topic.partitions.values())).replicas)
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
        self._commit(records)
        return ErrorCode.none, None

    def alter_topic_configs(
        self, name: str, changes: Mapping[str, str | None], *, replace_all: bool, validate_only: bool
    ) -> tuple[ErrorCode, str | None]:
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
        self._commit(records)
        return ErrorCode.none, None

    def alter_broker_configs(
        self, resource_name: str, changes: Mapping[str, str | None], *, replace_all: bool, validate_only: bool
    ) -> tuple[ErrorCode, str | None]:
        """Dynamic broker configs: resource "" is the cluster-wide default, "<node id>" one broker."""
        if resource_name not in ("", str(self.node_id)):
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
        self._commit(records)
        return ErrorCode.none, None
