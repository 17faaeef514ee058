"""Metadata (key 3), v0-v13.

v1 adds is_internal, rack, controller_id and "empty list = no topics" (v0: empty = all); v2 adds
cluster_id; v4 allow_auto_topic_creation; v5 offline_replicas; v7 leader_epoch; v8-v10 authorized
operations; v9 is flexible; v10 adds topic_id; v12 allows lookup by topic id; v13 adds a top-level
error_code.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from samsa.broker.config import is_valid_topic_name
from samsa.broker.context import ApiSpec, RequestContext
from samsa.broker.controller import TopicSpec
from samsa.broker.metadata.image import PartitionImage, TopicImage
from samsa.broker.wire import build, field
from samsa.kproto.errors import ErrorCode
from samsa.kproto.messages import response_class

API = ApiSpec(key=3, min_version=0, max_version=13)

INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})
AUTHORIZED_OPERATIONS_OMITTED = -2147483648
# AclOperation codes a topic supports: READ 3, WRITE 4, CREATE 5, DELETE 6, ALTER 7, DESCRIBE 8,
# DESCRIBE_CONFIGS 10, ALTER_CONFIGS 11. Without ACLs every principal may do all of them.
TOPIC_OPERATIONS = sum(1 << op for op in (3, 4, 5, 6, 7, 8, 10, 11))
CLUSTER_OPERATIONS = sum(1 << op for op in (4, 5, 7, 8, 9, 10, 11, 12))
ZERO_UUID = uuid.UUID(int=0)

if TYPE_CHECKING:
    from samsa.broker.broker import Broker


def topic_entry(topic: TopicImage, *, include_ops: bool, live: frozenset[int] | None = None) -> dict[str, Any]:
    """`live`: the brokers the response lists. A leader among them is named; one that is not (fenced,
    stopping, gone) is answered LEADER_NOT_AVAILABLE with leader -1, as Kafka's KRaft metadata cache
    does, and replicas on unlisted brokers are offline_replicas. (Clients index leaders by the listed
    brokers: kafka-python fails on a leader it cannot find there.)"""

    def leader(p: PartitionImage) -> int:
        return p.leader if p.leader >= 0 and (live is None or p.leader in live) else -1

    return {
        "error_code": ErrorCode.none,
        "name": topic.name,
        "topic_id": uuid.UUID(topic.topic_id),
        "is_internal": topic.name in INTERNAL_TOPICS,
        "partitions": [
            {
                "error_code": ErrorCode.none if leader(p) >= 0 else ErrorCode.leader_not_available,
                "partition_index": p.partition_id,
                "leader_id": leader(p),
                "leader_epoch": p.leader_epoch,
                "replica_nodes": p.replicas,
                "isr_nodes": p.isr,
                "offline_replicas": tuple(r for r in p.replicas if live is not None and r not in live),
            }
            for p in sorted(topic.partitions.values(), key=lambda p: p.partition_id)
        ],
        "topic_authorized_operations": TOPIC_OPERATIONS if include_ops else AUTHORIZED_OPERATIONS_OMITTED,
    }


def broker_entries(broker: Broker) -> list[dict[str, Any]]:
    """The live (registered, unfenced) brokers; this broker alone before its registration lands."""
    live = [b for b in broker.image.brokers.values() if not b.fenced]
    if not live:
        config = broker.config
        return [{"node_id": broker.node_id, "host": config.advertised_host, "port": config.advertised_port,
                 "rack": None}]
    return [{"node_id": b.broker_id, "host": b.host, "port": b.port, "rack": b.rack}
            for b in sorted(live, key=lambda b: b.broker_id)]


def _error_entry(name: str | None, topic_id: uuid.UUID | None, error: ErrorCode) -> dict[str, Any]:
    return {"error_code": error, "name": name, "topic_id": topic_id or ZERO_UUID, "partitions": ()}


def handle_metadata(request: Any, ctx: RequestContext) -> Any:
    broker = ctx.broker
    version = ctx.version
    brokers = broker_entries(broker)
    live = frozenset(b["node_id"] for b in brokers)
    include_ops = bool(field(request, "include_topic_authorized_operations", False))
    allow_auto_create = bool(field(request, "allow_auto_topic_creation", True)) and broker.config.get_bool(
        "auto.create.topics.enable"
    )
    requested = request.topics
    topics: list[dict[str, Any]] = []
    if requested is None or (version == 0 and not requested):
        image = broker.image
        topics = [topic_entry(t, include_ops=include_ops, live=live) for t in image.topics_by_name.values()]
    else:
        # Each topic once, however often the request names it (Kafka takes the names and ids as sets):
        # a repeated name must not repeat a topic of thousands of partitions in the answer.
        unique: dict[object, Any] = {}
        for t in requested:
            name = field(t, "name")
            unique.setdefault(name if name is not None else ("id", field(t, "topic_id")), t)
        requested = list(unique.values())
        to_create: dict[str, None] = {}  # insertion-ordered set (a list's `in` made many names quadratic)
        for t in requested:
            name = field(t, "name")
            topic_id = field(t, "topic_id")
            if name is None and topic_id is not None and topic_id != ZERO_UUID:
                found = broker.image.topics_by_id.get(str(topic_id))
                if found is None:
                    topics.append(_error_entry(None, topic_id, ErrorCode.unknown_topic_id))
                else:
                    topics.append(topic_entry(found, include_ops=include_ops, live=live))
                continue
            if name is None:
                topics.append(_error_entry(None, topic_id, ErrorCode.invalid_request))
                continue
            if name in broker.image.topics_by_name:
                continue
            if not is_valid_topic_name(name):
                continue
            if allow_auto_create:
                to_create[name] = None
        creating: set[str] = set()
        if to_create and broker.create_topics_soon([TopicSpec(name) for name in to_create]) is None:
            creating = set(to_create)  # through the active controller: LEADER_NOT_AVAILABLE until it lands
        image = broker.image
        for t in requested:
            name = field(t, "name")
            if name is None:
                continue
            found = image.topics_by_name.get(name)
            if found is not None:
                topics.append(topic_entry(found, include_ops=include_ops, live=live))
            elif not is_valid_topic_name(name):
                topics.append(_error_entry(name, None, ErrorCode.invalid_topic_exception))
            elif name in creating:
                topics.append(_error_entry(name, None, ErrorCode.leader_not_available))
            else:
                topics.append(_error_entry(name, None, ErrorCode.unknown_topic_or_partition))
    return build(
        response_class(3, version),
        {
            "throttle_time": 0,
            "brokers": brokers,
            "cluster_id": broker.cluster_id,
            "controller_id": broker.node_id,
            "topics": topics,
            "cluster_authorized_operations": (
                CLUSTER_OPERATIONS if field(request, "include_cluster_authorized_operations", False)
                else AUTHORIZED_OPERATIONS_OMITTED
            ),
            "error_code": ErrorCode.none,
        },
    )
