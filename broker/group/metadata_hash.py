"""KIP-1101: the hash of the topics a consumer group subscribes to, as Kafka 4.4 computes it (Utils.computeTopicHash
and computeGroupHash, XXH3-64 through hash4j's HashStream64). The group epoch record carries it
(ConsumerGroupMetadataValue, tag 0), and a heartbeat that finds a different hash bumps the group epoch: a topic
that was created, deleted, recreated, grew partitions or whose replicas' racks changed.

hash4j's stream puts a byte as itself, an int and a long little-endian, and a string as its UTF-16LE chars
followed by its length (an int); the hash is XXH3-64 with seed 0 of those bytes, as a signed long.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Mapping, Sequence

import xxhash

TOPIC_HASH_MAGIC_BYTE = 0
_I32 = struct.Struct("<i")
_I64 = struct.Struct("<q")


def _string(value: str) -> bytes:
    return value.encode("utf-16-le") + _I32.pack(len(value))


def _signed(unsigned: int) -> int:
    return unsigned - (1 << 64) if unsigned >= 1 << 63 else unsigned


def topic_hash(topic_id: str, name: str, partition_racks: Sequence[Sequence[str]]) -> int:
    """Kafka's computeTopicHash: magic byte, the topic id's two longs, the name, the partition count, then per
    partition its index and the sorted racks of its replicas' brokers (each as its length, then the string)."""
    most_least = uuid.UUID(topic_id).int
    parts = [bytes([TOPIC_HASH_MAGIC_BYTE]), _I64.pack(_signed(most_least >> 64)),
             _I64.pack(_signed(most_least & ((1 << 64) - 1))), _string(name), _I32.pack(len(partition_racks))]
    for index, racks in enumerate(partition_racks):
        parts.append(_I32.pack(index))
        for rack in sorted(racks):
            parts.append(_I32.pack(len(rack)) + _string(rack))
    return _signed(xxhash.xxh3_64_intdigest(b"".join(parts)))


def group_hash(topic_hashes: Mapping[str, int]) -> int:
    """Kafka's computeGroupHash: 0 for no topics, else the hash of each topic's hash in the order of their names."""
    if not topic_hashes:
        return 0
    return _signed(xxhash.xxh3_64_intdigest(b"".join(_I64.pack(topic_hashes[name]) for name in sorted(topic_hashes))))


def partition_racks(catalog: object, name: str) -> list[list[str]]:
    """Per partition of the topic, the racks of its replicas' registered brokers (Kafka's partitionRacks: a
    replica whose broker is unknown or has no rack adds none); no racks where the catalog has no brokers."""
    topic = getattr(catalog, "topics_by_name", {}).get(name)
    if topic is None:
        return []
    brokers = getattr(catalog, "brokers", {})
    out: list[list[str]] = []
    for index in range(len(topic.partitions)):
        replicas = getattr(topic.partitions.get(index), "replicas", ())
        racks = [getattr(brokers.get(replica), "rack", None) for replica in replicas]
        out.append([rack for rack in racks if rack is not None])
    return out


def subscription_hash(metadata: Mapping[str, tuple[str, int]], catalog: object) -> int:
    """The group hash of the subscribed topics that exist (name -> (topic id, partition count))."""
    return group_hash({name: topic_hash(topic_id, name, partition_racks(catalog, name) or [[]] * partitions)
                       for name, (topic_id, partitions) in metadata.items()})
