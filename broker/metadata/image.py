"""The metadata image: an immutable view of topics, partitions and configs built by applying records.

Like Kafka's MetadataImage, a new image is produced for each batch of records; readers hold an
image and never see it change under them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType

from broker.metadata.records import (
    TOPIC_RESOURCE,
    ConfigRecord,
    MetadataRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RemoveTopicRecord,
    TopicRecord,
)


@dataclass(frozen=True, slots=True)
class PartitionImage:
    partition_id: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int
    partition_epoch: int


@dataclass(frozen=True, slots=True)
class TopicImage:
    name: str
    topic_id: str
    partitions: Mapping[int, PartitionImage]


def _frozen(d: dict[str, str]) -> Mapping[str, str]:
    return MappingProxyType(d)


_EMPTY: Mapping[str, str] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class MetadataImage:
    offset: int = -1
    topics_by_name: Mapping[str, TopicImage] = field(default_factory=lambda: MappingProxyType({}))
    topics_by_id: Mapping[str, TopicImage] = field(default_factory=lambda: MappingProxyType({}))
    configs: Mapping[tuple[int, str], Mapping[str, str]] = field(default_factory=lambda: MappingProxyType({}))
    next_producer_id: int = 0

    def topic_configs(self, topic: str) -> Mapping[str, str]:
        return self.configs.get((TOPIC_RESOURCE, topic), _EMPTY)

    def apply(self, records: Iterable[MetadataRecord], offset: int) -> MetadataImage:
        by_name = dict(self.topics_by_name)
        by_id = dict(self.topics_by_id)
        configs = dict(self.configs)
        next_producer_id = self.next_producer_id
        for record in records:
            match record:
                case TopicRecord(name=name, topic_id=topic_id):
                    topic = TopicImage(name, topic_id, MappingProxyType({}))
                    by_name[name] = topic
                    by_id[topic_id] = topic
                case PartitionRecord():
                    topic = by_id[record.topic_id]
                    parts = dict(topic.partitions)
                    parts[record.partition_id] = PartitionImage(
                        record.partition_id, record.replicas, record.isr, record.leader,
                        record.leader_epoch, record.partition_epoch,
                    )
                    topic = replace(topic, partitions=MappingProxyType(parts))
                    by_name[topic.name] = topic
                    by_id[topic.topic_id] = topic
                case PartitionChangeRecord():
                    topic = by_id[record.topic_id]
                    old = topic.partitions[record.partition_id]
                    leader_changed = record.leader is not None and record.leader != old.leader
                    new = replace(
                        old,
                        isr=record.isr if record.isr is not None else old.isr,
                        leader=record.leader if record.leader is not None else old.leader,
                        replicas=record.replicas if record.replicas is not None else old.replicas,
                        leader_epoch=old.leader_epoch + 1 if leader_changed else old.leader_epoch,
                        partition_epoch=old.partition_epoch + 1,
                    )
                    parts = dict(topic.partitions)
                    parts[record.partition_id] = new
                    topic = replace(topic, partitions=MappingProxyType(parts))
                    by_name[topic.name] = topic
                    by_id[topic.topic_id] = topic
                case RemoveTopicRecord(topic_id=topic_id):
                    topic = by_id.pop(topic_id)
                    by_name.pop(topic.name, None)
                    configs.pop((TOPIC_RESOURCE, topic.name), None)
                case ConfigRecord():
                    key = (record.resource_type, record.resource_name)
                    current = dict(configs.get(key, _EMPTY))
                    if record.value is None:
                        current.pop(record.name, None)
                    else:
                        current[record.name] = record.value
                    if current:
                        configs[key] = _frozen(current)
                    else:
                        configs.pop(key, None)
                case ProducerIdsRecord(next_producer_id=npid):
                    next_producer_id = max(next_producer_id, npid)
        return MetadataImage(
            offset=offset,
            topics_by_name=MappingProxyType(by_name),
            topics_by_id=MappingProxyType(by_id),
            configs=MappingProxyType(configs),
            next_producer_id=next_producer_id,
        )
