"""A streams group's topology against the metadata image (Kafka's InternalTopicManager.configureTopics).

Given the topics that exist, this decides how many tasks each subtopology has (the most partitions of
its source topics, repartition topics included), how many partitions the internal topics need
(a repartition topic: as many as the subtopology writing to it has tasks, unless the topology fixes
the number; a changelog topic: one per task of its subtopology), and enforces co-partitioning.
The outcome is either ready (tasks can be assigned), or a status the members are told of:
MISSING_SOURCE_TOPICS, INCORRECTLY_PARTITIONED_TOPICS or MISSING_INTERNAL_TOPICS; in the last case
`to_create` lists the internal topics to create, which the broker does (as Kafka 4.4's KafkaApis does
with the coordinator's creatable topics), after which a new metadata hash bumps the group epoch.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from samsa.broker.group.streams_group import StreamsStatus, Topology


@dataclass(frozen=True, slots=True)
class InternalTopicToCreate:
    name: str
    partitions: int
    replication_factor: int  # -1: the broker's default
    configs: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class ConfiguredTopology:
    ready: bool
    tasks: Mapping[str, int] = field(default_factory=dict)  # subtopology id -> number of tasks
    internal_partitions: Mapping[str, int] = field(default_factory=dict)  # internal topic -> partitions
    status: tuple[StreamsStatus, str] | None = None
    to_create: tuple[InternalTopicToCreate, ...] = ()


class _TopicConfigurationError(Exception):
    def __init__(self, status: StreamsStatus, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail


def _summarize(names: set[str] | list[str]) -> str:
    return ", ".join(sorted(names))


def _java_string_hash(s: str) -> int:
    h = 0
    for unit in s.encode("utf-16-be").hex(" ", 2).split():
        h = (31 * h + int(unit, 16)) & 0xFFFFFFFF
    return h


def java_hash_map_order(names: list[str], capacity_for: int) -> list[str]:
    """`names` (in insertion order) as a java.util.HashMap that held `capacity_for` entries iterates them:
    Kafka words "Internal topics are missing: ..." from such a map's key set."""
    capacity = 16
    while capacity_for > capacity * 3 // 4:
        capacity *= 2

    def bucket(name: str) -> int:
        h = _java_string_hash(name)
        return (h ^ (h >> 16)) & (capacity - 1)

    order = {name: i for i, name in enumerate(names)}
    return sorted(names, key=lambda n: (bucket(n), order[n]))


def configure(topology: Topology, partition_count: Callable[[str], int | None]) -> ConfiguredTopology:
    """`partition_count(topic)`: the topic's partitions in the metadata image, None if it does not exist."""
    try:
        missing = {t for s in topology.subtopologies for t in s.source_topics if partition_count(t) is None}
        if missing:
            raise _TopicConfigurationError(StreamsStatus.MISSING_SOURCE_TOPICS,
                                           f"Source topics {_summarize(missing)} are missing.")
        decided = _decide_partition_counts(topology, partition_count)

        def count(topic: str) -> int | None:
            found = partition_count(topic)
            return found if found is not None else decided.get(topic)

        tasks: dict[str, int] = {}
        for s in topology.subtopologies:
            inputs = [count(t) for t in (*s.source_topics, *(r.name for r in s.repartition_source_topics))]
            known = [n for n in inputs if n is not None]
            if len(known) != len(inputs) or not known:
                raise _TopicConfigurationError(StreamsStatus.MISSING_SOURCE_TOPICS,
                                               f"Subtopology {s.subtopology_id} has input topics whose number of "
                                               "partitions cannot be determined.")
            tasks[s.subtopology_id] = max(known)
        to_create: list[InternalTopicToCreate] = []
        internal: dict[str, int] = {}
        for s in sorted(topology.subtopologies, key=lambda sub: sub.subtopology_id):
            for info, partitions in ([(r, decided.get(r.name, r.partitions)) for r in s.repartition_source_topics]
                                     + [(c, tasks[s.subtopology_id]) for c in s.state_changelog_topics]):
                internal[info.name] = partitions
                existing = partition_count(info.name)
                if existing is None:
                    to_create.append(InternalTopicToCreate(info.name, partitions, info.replication_factor or -1,
                                                           info.configs))
                elif existing != partitions:
                    raise _TopicConfigurationError(
                        StreamsStatus.INCORRECTLY_PARTITIONED_TOPICS,
                        f"Existing topic {info.name} has different number of partitions: expected {partitions}, "
                        f"found {existing}")
        if to_create:
            names = java_hash_map_order([t.name for t in to_create], len(internal))
            return ConfiguredTopology(False, tasks, internal,
                                      (StreamsStatus.MISSING_INTERNAL_TOPICS,
                                       f"Internal topics are missing: {', '.join(names)}"),
                                      tuple(sorted(to_create, key=lambda t: t.name)))
        return ConfiguredTopology(True, tasks, internal)
    except _TopicConfigurationError as e:
        return ConfiguredTopology(False, status=(e.status, e.detail))


def _decide_partition_counts(topology: Topology, partition_count: Callable[[str], int | None]) -> dict[str, int]:
    """Partitions of the repartition topics (Kafka's RepartitionTopics.setup, then the co-partitioning
    enforcer): a fixed number where the topology gives one, else the most tasks of a subtopology writing
    to it, found by iterating until nothing changes (repartition topics can feed one another)."""
    decided: dict[str, int] = {}
    for s in topology.subtopologies:
        for r in s.repartition_source_topics:
            if r.partitions:
                decided[r.name] = r.partitions

    def count(topic: str) -> int | None:
        found = partition_count(topic)
        return found if found is not None else decided.get(topic)

    flexible = {r.name for s in topology.subtopologies for r in s.repartition_source_topics if not r.partitions}
    changed = True
    while changed:
        changed = False
        for s in topology.subtopologies:
            inputs = [count(t) for t in (*s.source_topics, *(r.name for r in s.repartition_source_topics))]
            known = [n for n in inputs if n is not None]
            if not known:
                continue
            for sink in s.repartition_sink_topics:
                if sink in flexible and decided.get(sink, 0) < max(known):
                    decided[sink] = max(known)
                    changed = True
    for s in topology.subtopologies:
        for group in s.copartition_groups:
            counts = {t: count(t) for t in group}
            fixed = {t: n for t, n in counts.items() if n is not None and t not in flexible}
            if len(set(fixed.values())) > 1:
                raise _TopicConfigurationError(
                    StreamsStatus.INCORRECTLY_PARTITIONED_TOPICS,
                    f"Following topics do not have the same number of partitions: [{_summarize(set(fixed))}]")
            target = next(iter(fixed.values()), None)
            if target is None:
                target = max((n for t, n in counts.items() if n is not None), default=None)
            if target is not None:
                for t in group:
                    if t in flexible:
                        decided[t] = target
    return decided
