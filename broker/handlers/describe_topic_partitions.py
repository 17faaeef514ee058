"""DescribeTopicPartitions (key 75), v0 (KIP-966): the topics' partitions, paginated.

v0 is the only version (flexible). The admin client's describeTopics uses it (4.0+) instead of Metadata.
The topics named (or, when none are named, every topic) are answered in name order from the cursor on:
topics sorting before the cursor's topic are skipped and the cursor's topic starts at its partition index.
An answer holds at most max(1, min(response_partition_limit, max.request.partition.size.limit)) partitions;
when a topic's partitions do not all fit, next_cursor names the first one left out, and when the limit is
reached exactly at a topic's end, next_cursor names the next topic at partition 0 (Kafka's
KRaftMetadataCache.getTopicMetadataForDescribeTopicResponse). Named topics that do not exist answer
UNKNOWN_TOPIC_OR_PARTITION (INVALID_TOPIC_EXCEPTION for an illegal name) and take no room; when every topic
is asked for there are none. A cursor whose topic the named list lacks, or whose partition index is negative,
makes the request invalid: every named topic answers INVALID_REQUEST, as Kafka's error response does.
Samsa has no eligible leader replicas (KIP-966 ELR is off in Kafka 4.1 by default): both lists are empty.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, TypedDict

from samsa.broker.config import is_valid_topic_name
from samsa.broker.context import ApiSpec, RequestContext
from samsa.broker.handlers.metadata import INTERNAL_TOPICS, TOPIC_OPERATIONS
from samsa.broker.metadata.image import MetadataImage, PartitionImage, TopicImage
from samsa.broker.wire import build
from samsa.kproto.errors import ErrorCode
from samsa.kproto.messages import response_class

if TYPE_CHECKING:
    from kio.schema.describe_topic_partitions.v0 import (
        DescribeTopicPartitionsRequest,
        DescribeTopicPartitionsResponse,
    )

API = ApiSpec(key=75, min_version=0, max_version=0)

ZERO_UUID = uuid.UUID(int=0)


class PartitionEntry(TypedDict):
    """One DescribeTopicPartitionsResponsePartition."""

    error_code: ErrorCode
    partition_index: int
    leader_id: int
    leader_epoch: int
    replica_nodes: tuple[int, ...]
    isr_nodes: tuple[int, ...]
    eligible_leader_replicas: tuple[int, ...]
    last_known_elr: tuple[int, ...]
    offline_replicas: tuple[int, ...]


class TopicEntry(TypedDict, total=False):
    """One DescribeTopicPartitionsResponseTopic."""

    error_code: ErrorCode
    name: str
    topic_id: uuid.UUID
    is_internal: bool
    partitions: list[PartitionEntry]
    topic_authorized_operations: int


class Cursor(TypedDict):
    topic_name: str
    partition_index: int


def handle_describe_topic_partitions(request: DescribeTopicPartitionsRequest,
                                     ctx: RequestContext) -> DescribeTopicPartitionsResponse:
    cls: type[DescribeTopicPartitionsResponse] = response_class(75, ctx.version)
    image = ctx.broker.image
    cursor = request.cursor
    cursor_topic = cursor.topic_name if cursor is not None else ""
    every_topic = not request.topics
    candidates = image.topics_by_name.keys() if every_topic else {t.name for t in request.topics}
    names = sorted(name for name in candidates if name >= cursor_topic)
    if cursor is not None and ((not every_topic and cursor.topic_name not in names) or cursor.partition_index < 0):
        return build(cls, {"throttle_time": 0, "topics": [
            {"error_code": ErrorCode.invalid_request, "name": t.name, "topic_id": ZERO_UUID, "is_internal": False,
             "partitions": []} for t in request.topics]})
    limit = max(1, min(int(request.response_partition_limit),
                       ctx.broker.config.get_int("max.request.partition.size.limit")))
    start = (cursor.topic_name, cursor.partition_index) if cursor is not None else None
    topics, next_cursor = _page(image, names, start, limit, every_topic)
    return build(cls, {"throttle_time": 0, "topics": topics, "next_cursor": next_cursor})


def _page(image: MetadataImage, names: list[str], cursor: tuple[str, int] | None, limit: int,
          every_topic: bool) -> tuple[list[TopicEntry], Cursor | None]:
    """The topics' entries from the cursor (topic, partition index) on, at most `limit` partitions, and the
    cursor after them."""
    remaining = limit
    out: list[TopicEntry] = []
    for name in names:
        if remaining == 0:
            return out, {"topic_name": name, "partition_index": 0}
        topic = image.topics_by_name.get(name)
        if topic is None:
            if not every_topic:
                error = ErrorCode.unknown_topic_or_partition if is_valid_topic_name(name) \
                    else ErrorCode.invalid_topic_exception
                out.append({"error_code": error, "name": name, "topic_id": ZERO_UUID,
                            "is_internal": name in INTERNAL_TOPICS, "partitions": [],
                            "topic_authorized_operations": TOPIC_OPERATIONS})
            continue
        start = cursor[1] if cursor is not None and name == cursor[0] else 0
        count = len(topic.partitions)
        end = min(count, start + remaining)
        out.append(_topic_entry(image, topic, range(start, end)))
        if end < count:
            return out, {"topic_name": name, "partition_index": end}
        remaining -= max(0, end - start)
    return out, None


def _topic_entry(image: MetadataImage, topic: TopicImage, indexes: range) -> TopicEntry:
    partitions = [_partition_entry(image, p) for i in indexes if (p := topic.partitions.get(i)) is not None]
    return {"error_code": ErrorCode.none, "name": topic.name, "topic_id": uuid.UUID(topic.topic_id),
            "is_internal": topic.name in INTERNAL_TOPICS, "partitions": partitions,
            "topic_authorized_operations": TOPIC_OPERATIONS}


def _partition_entry(image: MetadataImage, p: PartitionImage) -> PartitionEntry:
    """A replica is offline when its broker is not registered or is fenced; the leader is named while its
    broker is registered (Kafka's getAliveEndpoint), -1 otherwise."""
    brokers = image.brokers
    leader = p.leader if p.leader >= 0 and p.leader in brokers else -1
    offline = tuple(r for r in p.replicas if (b := brokers.get(r)) is None or b.fenced)
    return {"error_code": ErrorCode.none, "partition_index": p.partition_id, "leader_id": leader,
            "leader_epoch": p.leader_epoch, "replica_nodes": p.replicas, "isr_nodes": p.isr,
            "eligible_leader_replicas": (), "last_known_elr": (), "offline_replicas": offline}
