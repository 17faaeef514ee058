"""Metadata records: the facts appended to `__cluster_metadata`, one JSON object per record.

They mirror Kafka's KRaft records (TopicRecord, PartitionRecord, ConfigRecord, RemoveTopicRecord,
PartitionChangeRecord, ProducerIdsRecord) by name and field. Each record value carries its type and
version so that a later version of Samsa can still replay an older log.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any

TOPIC_RESOURCE = 2
BROKER_RESOURCE = 4


@dataclass(frozen=True, slots=True)
class TopicRecord:
    name: str
    topic_id: str  # UUID, canonical string


@dataclass(frozen=True, slots=True)
class PartitionRecord:
    topic_id: str
    partition_id: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int
    partition_epoch: int


@dataclass(frozen=True, slots=True)
class PartitionChangeRecord:
    topic_id: str
    partition_id: int
    isr: tuple[int, ...] | None
    leader: int | None
    replicas: tuple[int, ...] | None


@dataclass(frozen=True, slots=True)
class RemoveTopicRecord:
    topic_id: str


@dataclass(frozen=True, slots=True)
class ConfigRecord:
    resource_type: int
    resource_name: str
    name: str
    value: str | None  # None deletes the override


@dataclass(frozen=True, slots=True)
class ProducerIdsRecord:
    broker_id: int
    broker_epoch: int
    next_producer_id: int


MetadataRecord = (
    TopicRecord | PartitionRecord | PartitionChangeRecord | RemoveTopicRecord | ConfigRecord | ProducerIdsRecord
)

_TYPES: dict[str, type[Any]] = {
    cls.__name__: cls
    for cls in (TopicRecord, PartitionRecord, PartitionChangeRecord, RemoveTopicRecord, ConfigRecord,
                ProducerIdsRecord)
}
_TUPLE_FIELDS = {"replicas", "isr"}
RECORD_VERSION = 0


def encode_record(record: MetadataRecord) -> bytes:
    body = {"type": type(record).__name__, "version": RECORD_VERSION, **asdict(record)}
    return json.dumps(body, separators=(",", ":"), sort_keys=True).encode()


def decode_record(data: bytes) -> MetadataRecord:
    body = json.loads(data)
    cls = _TYPES[body.pop("type")]
    body.pop("version", None)
    for key in _TUPLE_FIELDS & body.keys():
        if body[key] is not None:
            body[key] = tuple(body[key])
    record: MetadataRecord = cls(**body)
    return record
