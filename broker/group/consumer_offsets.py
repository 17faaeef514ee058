"""The committed offsets of a KIP-848 consumer group, which live in the classic coordinator's offset store
under the group's id: the rules of Kafka's ConsumerGroup that differ from a classic group's there.

- Expiry (Kafka's ConsumerGroup.offsetExpirationCondition and isSubscribedToTopic): an offset of a topic
  the group subscribes to never expires while the group has members; the others expire by commit time.
- OffsetDelete: refused (GROUP_SUBSCRIBED_TO_TOPIC) for a topic the group subscribes to.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from samsa.broker.group.consumer_coordinator import ConsumerGroupCoordinator
from samsa.broker.group.coordinator import GroupCoordinator, OffsetAndMetadata
from samsa.kproto.errors import ErrorCode

TopicPartition = tuple[str, int]


@contextmanager
def subscribed_offsets_hidden(classic: GroupCoordinator, consumer: ConsumerGroupCoordinator) -> Iterator[None]:
    """While inside, the offsets that must not expire are out of the classic store's sight (then put back)."""
    hidden: dict[str, dict[TopicPartition, OffsetAndMetadata]] = {}
    for group_id, group in consumer.groups.items():
        store = classic.groups.get(group_id)
        if store is None or not group.members:
            continue
        hidden[group_id] = {tp: o for tp, o in store.offsets.items() if group.is_subscribed_to(tp[0])}
        for tp in hidden[group_id]:
            del store.offsets[tp]
    try:
        yield
    finally:
        for group_id, offsets in hidden.items():
            store = classic.groups.get(group_id)
            if store is not None:
                store.offsets.update(offsets)


def delete_offsets(classic: GroupCoordinator, consumer: ConsumerGroupCoordinator, group_id: str,
                   partitions: list[TopicPartition], now_ms: int
                   ) -> tuple[ErrorCode, dict[TopicPartition, ErrorCode]]:
    group = consumer.groups[group_id]
    refused = {tp: ErrorCode.group_subscribed_to_topic for tp in partitions if group.is_subscribed_to(tp[0])}
    rest = [tp for tp in partitions if tp not in refused]
    if group_id in classic.groups:
        error, per_partition = classic.delete_offsets(group_id, rest, now_ms)
        if error != ErrorCode.none:
            return error, {}
    else:
        per_partition = dict.fromkeys(rest, ErrorCode.none)
    return ErrorCode.none, {**per_partition, **refused}


