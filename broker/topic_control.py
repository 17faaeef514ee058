"""Topics and their configs, as the active controller decides them: CreateTopics, DeleteTopics,
CreatePartitions, AlterConfigs and IncrementalAlterConfigs.

Mirrors the topic half of Kafka's ReplicationControlManager and its ConfigurationControlManager,
with Kafka's bound on one user operation (MAX_RECORDS_PER_USER_OP records, else POLICY_VIOLATION
and nothing written), checked on counts before any record is built.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Mapping, Sequence

from samsa.broker.config import (
    check_topic_configs,
    is_valid_topic_name,
    validate_topic_config,
)
from samsa.broker.controller_types import (
    BROKER_RESOURCE_TYPE,
    TOPIC_RESOURCE_TYPE,
    ConfigChange,
    ControllerCore,
    PartitionsSpec,
    Pending,
    TooManyRecordsError,
    TopicResult,
    TopicSpec,
    check_record_count,
    new_topic_id,
)
from samsa.broker.dynamic_broker_configs import check_dynamic_broker_config, current_value
from samsa.broker.group_configs import GROUP_RESOURCE, check_group_configs
from samsa.broker.metadata.image import MetadataImage
from samsa.broker.metadata.records import (
    BROKER_RESOURCE,
    TOPIC_RESOURCE,
    ConfigRecord,
    MetadataRecord,
    PartitionRecord,
    RemoveTopicRecord,
    TopicRecord,
)
from samsa.kproto.errors import ErrorCode

logger = logging.getLogger(__name__)


class TopicControl:
    """Validates topic and config changes against the controller's image and writes their records."""

    def __init__(self, core: ControllerCore, node_id: int) -> None:
        self._core = core
        self._node_id = node_id

    def create_topics(self, specs: Sequence[TopicSpec], *, validate_only: bool) -> Pending[list[TopicResult]]:
        """Every topic that passes its checks is created in one entry. An operation that would write
        more than MAX_RECORDS_PER_USER_OP records is refused whole (every topic POLICY_VIOLATION),
        counted before any record is built, so a request for 100,000 partitions costs nothing."""
        self._core.require_active()  # never decide on a follower's image, even when nothing is written
        image = self._core.image
        seen: set[str] = set()
        existing_keys = {_collision_key(n): n for n in image.topics_by_name}
        checked: list[tuple[TopicSpec, TopicResult]] = []
        record_count = 0
        for spec in specs:
            result = self._check_create(spec, image, existing_keys, seen)
            seen.add(spec.name)
            checked.append((spec, result))
            if result.error_code == ErrorCode.none:
                existing_keys[_collision_key(spec.name)] = spec.name
                # Kafka's records: one TopicRecord, its ConfigRecords, one PartitionRecord per partition
                record_count += 1 + sum(1 for v in spec.configs.values() if v is not None) + result.num_partitions
        try:
            check_record_count(record_count)
        except TooManyRecordsError as e:
            logger.info("refused CreateTopics of %d topics: %s", len(specs), e)
            return Pending([TopicResult(spec.name, e.error_code, e.message) for spec in specs], None)
        results: list[TopicResult] = []
        records: list[MetadataRecord] = []
        live = image.live_brokers()
        for spec, result in checked:
            if result.error_code != ErrorCode.none or validate_only:
                results.append(result)
                continue
            topic_id = new_topic_id()
            records.append(TopicRecord(spec.name, topic_id))
            for name, value in spec.configs.items():
                if value is not None:
                    records.append(ConfigRecord(TOPIC_RESOURCE, spec.name, name, value))
            for pid in range(result.num_partitions):
                replicas = spec.assignments.get(pid) or _place(live, pid, result.replication_factor)
                records.append(PartitionRecord(topic_id, pid, replicas, replicas, replicas[0], 0, 0))
            results.append(
                TopicResult(spec.name, ErrorCode.none, None, topic_id, result.num_partitions,
                            result.replication_factor)
            )
        return self._core.commit(results, records)

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
            live = set(self._core.image.live_brokers())
            for replicas in spec.assignments.values():
                if len(set(replicas)) != len(replicas) or not set(replicas) <= live:
                    return TopicResult(name, ErrorCode.invalid_replica_assignment,
                                       f"Replica assignment {list(replicas)} refers to unknown or repeated brokers.")
            rf = rfs.pop()
        else:
            config = self._core.config
            partitions = spec.num_partitions if spec.num_partitions != -1 else config.get_int("num.partitions")
            rf = (spec.replication_factor if spec.replication_factor != -1
                  else config.get_int("default.replication.factor"))
            if partitions <= 0:
                return TopicResult(name, ErrorCode.invalid_partitions, "Number of partitions must be larger than 0.")
            if rf <= 0:
                return TopicResult(name, ErrorCode.invalid_replication_factor,
                                   "Replication factor must be larger than 0.")
            live_count = len(self._core.image.live_brokers())
            if rf > live_count:
                return TopicResult(name, ErrorCode.invalid_replication_factor,
                                   f"Unable to replicate the partition {rf} time(s): The target replication factor "
                                   f"of {rf} cannot be reached because only {live_count} broker(s) are registered.")
        # The whole set, as Kafka's LogConfig.validate: each value, null values, the cross-key rules.
        problem = check_topic_configs(spec.configs)
        if problem is not None:
            return TopicResult(name, ErrorCode.invalid_config, problem)
        return TopicResult(name, ErrorCode.none, None, None, partitions, rf)

    def delete_topics(self, names: Sequence[str]) -> Pending[list[tuple[str, str | None, ErrorCode]]]:
        """Delete by name; returns (name, topic_id, error) per topic. Raises TooManyRecordsError (and
        deletes nothing) when more than MAX_RECORDS_PER_USER_OP topics would go."""
        self._core.require_active()
        image = self._core.image
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
                check_record_count(len(records))
            results.append((name, topic.topic_id, ErrorCode.none))
        return self._core.commit(results, records)

    def create_partitions(
        self, specs: Sequence[PartitionsSpec], *, validate_only: bool
    ) -> Pending[list[tuple[str, ErrorCode, str | None]]]:
        """(name, error, message) per topic; the new partitions of every topic that passes its checks
        are written as one entry. Raises TooManyRecordsError, before building any record, when the
        request names more than MAX_RECORDS_PER_USER_OP topics or would add more partitions than that
        (Kafka bounds both CreatePartitions lists)."""
        self._core.require_active()
        check_record_count(len(specs))
        image = self._core.image
        outcomes = [_check_partitions(image, spec) for spec in specs]
        check_record_count(sum(len(o) for o in outcomes if isinstance(o, range)))
        results: list[tuple[str, ErrorCode, str | None]] = []
        records: list[MetadataRecord] = []
        live = image.live_brokers()
        for spec, outcome in zip(specs, outcomes, strict=True):
            if isinstance(outcome, tuple):
                results.append((spec.name, *outcome))
                continue
            results.append((spec.name, ErrorCode.none, None))
            if validate_only:
                continue
            topic = image.topics_by_name[spec.name]
            # The replication factor of partition 0 as it will be once any reassignment of it ends (its
            # replica list meanwhile holds the replicas being removed as well).
            first = topic.partitions[min(topic.partitions)]
            rf = len(first.replicas) - len(first.removing_replicas)
            for i, pid in enumerate(outcome):
                replicas = tuple(spec.assignments[i]) if spec.assignments is not None else _place(live, pid, rf)
                records.append(PartitionRecord(topic.topic_id, pid, replicas, replicas, replicas[0], 0, 0))
        return self._core.commit(results, records)

    def alter_topic_configs(
        self, name: str, changes: Mapping[str, str | None], *, replace_all: bool, validate_only: bool
    ) -> Pending[tuple[ErrorCode, str | None]]:
        self._core.require_active()
        return self._checked(self._alter_topic_configs(name, changes, replace_all=replace_all,
                                                       validate_only=validate_only))

    def _alter_topic_configs(
        self, name: str, changes: Mapping[str, str | None], *, replace_all: bool, validate_only: bool
    ) -> tuple[ErrorCode, str | None] | list[MetadataRecord]:
        """Set (or with None, delete) topic overrides. `replace_all` is legacy AlterConfigs semantics."""
        image = self._core.image
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
        self._core.require_active()
        return self._checked(self._alter_broker_configs(resource_name, changes, replace_all=replace_all,
                                                        validate_only=validate_only))

    def _alter_broker_configs(
        self, resource_name: str, changes: Mapping[str, str | None], *, replace_all: bool, validate_only: bool
    ) -> tuple[ErrorCode, str | None] | list[MetadataRecord]:
        """Dynamic broker configs: resource "" is the cluster-wide default, "<node id>" one broker."""
        known = {str(b) for b in self._core.image.brokers} | {str(self._node_id)}
        if resource_name != "" and resource_name not in known:
            return ErrorCode.invalid_request, (
                f"Unexpected broker id, expected {self._node_id}, but received {resource_name}")
        image = self._core.image
        layers = (dict(image.configs.get((BROKER_RESOURCE, str(self._node_id)), {})),
                  dict(image.configs.get((BROKER_RESOURCE, ""), {})), dict(self._core.config.overrides))
        for name, value in changes.items():
            problem = check_dynamic_broker_config(name, value, cluster_default=resource_name == "",
                                                  current=lambda key: current_value(key, layers))
            if problem is not None:
                return ErrorCode.invalid_request, problem  # Kafka answers every broker config refusal so
        if validate_only:
            return ErrorCode.none, None
        current = self._core.image.configs.get((BROKER_RESOURCE, resource_name), {})
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

    def _alter_group_configs(
        self, name: str, changes: Mapping[str, str | None], *, replace_all: bool, validate_only: bool
    ) -> tuple[ErrorCode, str | None] | list[MetadataRecord]:
        """A group's own configs (broker.group_configs); the group need not exist, as in Kafka."""
        if not name:
            return ErrorCode.invalid_request, "Default group resources are not allowed."
        current = self._core.image.configs.get((GROUP_RESOURCE, name), {})
        merged: dict[str, str | None] = {} if replace_all else dict(current)
        merged.update(changes)
        problem = check_group_configs({k: v for k, v in merged.items() if v is not None}, None)
        if problem is not None:
            return ErrorCode.invalid_config, problem
        if validate_only:
            return ErrorCode.none, None
        records: list[MetadataRecord] = []
        if replace_all:
            records += [ConfigRecord(GROUP_RESOURCE, name, old, None) for old in current if old not in changes]
        for key, value in changes.items():
            if value is None and key not in current:
                continue
            records.append(ConfigRecord(GROUP_RESOURCE, name, key, value))
        return records

    def alter_configs(
        self, resources: Sequence[ConfigChange], *, replace_all: bool, validate_only: bool
    ) -> Pending[list[tuple[ErrorCode, str | None]]]:
        """(error, message) per resource, in request order, and every accepted change written as one
        entry (Kafka's ConfigurationControlManager: one atomic operation, not one write per resource,
        so 2,000 resources no longer mean 2,000 metadata writes). A resource named twice is refused
        everywhere it appears ("Duplicate resource.", as Kafka's ControllerApis); more than
        MAX_RECORDS_PER_USER_OP records raise TooManyRecordsError and nothing is written."""
        self._core.require_active()
        keys = [(r.resource_type, r.resource_name) for r in resources]
        duplicated = {k for k, n in Counter(keys).items() if n > 1}
        results: list[tuple[ErrorCode, str | None]] = []
        records: list[MetadataRecord] = []
        for key, r in zip(keys, resources, strict=True):
            if key in duplicated:
                results.append((ErrorCode.invalid_request, "Duplicate resource."))
                continue
            if r.resource_type == TOPIC_RESOURCE_TYPE:
                outcome = self._alter_topic_configs(r.resource_name, r.changes, replace_all=replace_all,
                                                    validate_only=validate_only)
            elif r.resource_type == BROKER_RESOURCE_TYPE:
                outcome = self._alter_broker_configs(r.resource_name, r.changes, replace_all=replace_all,
                                                     validate_only=validate_only)
            elif r.resource_type == GROUP_RESOURCE:
                outcome = self._alter_group_configs(r.resource_name, r.changes, replace_all=replace_all,
                                                    validate_only=validate_only)
            else:
                outcome = ErrorCode.invalid_request, f"Unsupported resource type {r.resource_type}"
            if isinstance(outcome, tuple):
                results.append(outcome)
                continue
            records += outcome
            check_record_count(len(records))
            results.append((ErrorCode.none, None))
        return self._core.commit(results, records)

    def _checked(
        self, outcome: tuple[ErrorCode, str | None] | list[MetadataRecord]
    ) -> Pending[tuple[ErrorCode, str | None]]:
        if isinstance(outcome, tuple):
            return Pending(outcome, None)
        try:
            check_record_count(len(outcome))
        except TooManyRecordsError as e:
            return Pending((e.error_code, e.message), None)
        return self._core.commit((ErrorCode.none, None), outcome)


def _collision_key(name: str) -> str:
    # Kafka: '.' and '_' collide in metric names, so topics differing only there are refused.
    return name.replace(".", "_")


def _place(brokers: Sequence[int], partition_id: int, replication_factor: int) -> tuple[int, ...]:
    start = partition_id % len(brokers)
    return tuple(brokers[(start + i) % len(brokers)] for i in range(replication_factor))


def _check_partitions(image: MetadataImage, spec: PartitionsSpec) -> tuple[ErrorCode, str | None] | range:
    """The ids of the partitions one CreatePartitions topic adds, or its error (counting only: the
    partitions are not placed here, so a refused request never builds them)."""
    name, count, assignments = spec.name, spec.count, spec.assignments
    topic = image.topics_by_name.get(name)
    if topic is None:
        return ErrorCode.unknown_topic_or_partition, f"The topic '{name}' does not exist."
    current = len(topic.partitions)
    if count < current:
        return ErrorCode.invalid_partitions, (
            f"Topic currently has {current} partitions, which is higher than the requested {count}.")
    if count == current:
        return ErrorCode.invalid_partitions, f"Topic already has {current} partitions."
    new_ids = range(current, count)
    if assignments is not None:
        if len(assignments) != len(new_ids):
            return ErrorCode.invalid_replica_assignment, (
                f"Increasing the number of partitions by {len(new_ids)} but {len(assignments)} "
                "assignments provided.")
        live = set(image.live_brokers())
        for replicas in assignments:
            if not replicas or not set(replicas) <= live or len(set(replicas)) != len(replicas):
                return ErrorCode.invalid_replica_assignment, f"Invalid replica assignment {list(replicas)}."
    return new_ids
