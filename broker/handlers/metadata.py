"""Metadata (key 3), v0-v13.

v1 adds is_internal, rack, controller_id and "empty list = no topics" (v0: empty = all); v2 adds
cluster_id; v4 allow_auto_topic_creation; v5 offline_replicas; v7 leader_epoch; v8-v10 authorized
operations; v9 is flexible; v10 adds topic_id; v12 allows lookup by topic id; v13 adds a top-level
error_code.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING, NotRequired, TypedDict

from samsa.broker.config import is_valid_topic_name
from samsa.broker.context import ApiSpec, RequestContext
from samsa.broker.controller import TopicSpec
from samsa.broker.metadata.image import PartitionImage, TopicImage
from samsa.broker.security.acl_requests import MetadataAuthorization
from samsa.broker.security.listeners import endpoint_on
from samsa.broker.wire import build, field
from samsa.kproto.errors import ErrorCode
from samsa.kproto.messages import response_class

API = ApiSpec(key=3, min_version=0, max_version=13)

INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})
AUTHORIZED_OPERATIONS_OMITTED = -2147483648
# AclOperation codes a topic supports: READ 3, WRITE 4, CREATE 5, DELETE 6, ALTER 7, DESCRIBE 8,
# DESCRIBE_CONFIGS 10, ALTER_CONFIGS 11. Without ACLs every principal may do all of them.
TOPIC_OPERATIONS = sum(1 << op for op in (3, 4, 5, 6, 7, 8, 10, 11))
# The cluster's (Kafka's AclEntry.supportedOperations(CLUSTER)): CREATE 5, ALTER 7, DESCRIBE 8, CLUSTER_ACTION 9,
# DESCRIBE_CONFIGS 10, ALTER_CONFIGS 11, IDEMPOTENT_WRITE 12 -- 8096, as Kafka 4.1.2 reports; WRITE is not one.
CLUSTER_OPERATIONS = sum(1 << op for op in (5, 7, 8, 9, 10, 11, 12))
ZERO_UUID = uuid.UUID(int=0)

if TYPE_CHECKING:
    from kio.schema.metadata import v0, v1, v2, v3, v4, v5, v6, v7, v8, v9, v10, v11, v12, v13

    from samsa.broker.broker import Broker
    MetadataRequest = (v0.MetadataRequest | v1.MetadataRequest | v2.MetadataRequest | v3.MetadataRequest
                       | v4.MetadataRequest | v5.MetadataRequest | v6.MetadataRequest | v7.MetadataRequest
                       | v8.MetadataRequest | v9.MetadataRequest | v10.MetadataRequest | v11.MetadataRequest
                       | v12.MetadataRequest | v13.MetadataRequest)
    MetadataResponse = (v0.MetadataResponse | v1.MetadataResponse | v2.MetadataResponse | v3.MetadataResponse
                        | v4.MetadataResponse | v5.MetadataResponse | v6.MetadataResponse | v7.MetadataResponse
                        | v8.MetadataResponse | v9.MetadataResponse | v10.MetadataResponse | v11.MetadataResponse
                        | v12.MetadataResponse | v13.MetadataResponse)
    RequestTopic = (v0.request.MetadataRequestTopic | v1.request.MetadataRequestTopic | v2.request.MetadataRequestTopic
                    | v3.request.MetadataRequestTopic | v4.request.MetadataRequestTopic
                    | v5.request.MetadataRequestTopic | v6.request.MetadataRequestTopic
                    | v7.request.MetadataRequestTopic | v8.request.MetadataRequestTopic
                    | v9.request.MetadataRequestTopic | v10.request.MetadataRequestTopic
                    | v11.request.MetadataRequestTopic | v12.request.MetadataRequestTopic
                    | v13.request.MetadataRequestTopic)


# The answer's entries are TypedDicts, not dataclasses: a metadata answer can list every partition of the
# cluster, and these are the very dicts `build` reads (no object per partition beyond what it builds).
class BrokerEntry(TypedDict):
    """One MetadataResponseBroker (DescribeCluster's DescribeClusterBroker reads it too)."""

    node_id: int
    host: str
    port: int
    rack: str | None


class PartitionEntry(TypedDict):
    """One MetadataResponsePartition."""

    error_code: ErrorCode
    partition_index: int
    leader_id: int
    leader_epoch: int
    replica_nodes: tuple[int, ...]
    isr_nodes: tuple[int, ...]
    offline_replicas: tuple[int, ...]


class TopicEntry(TypedDict):
    """One MetadataResponseTopic; a topic answered with an error has no partitions and omits the rest
    (`build` gives the version's zero values)."""

    error_code: ErrorCode
    name: str | None
    topic_id: uuid.UUID
    partitions: Sequence[PartitionEntry]
    is_internal: NotRequired[bool]
    topic_authorized_operations: NotRequired[int]


def topic_entry(topic: TopicImage, *, include_ops: bool, live: frozenset[int] | None = None) -> TopicEntry:
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


def broker_entries(broker: Broker, listener: str | None = None) -> list[BrokerEntry]:
    """The live (registered, unfenced) brokers; this broker alone before its registration lands. This
    broker's own entry is what it advertises on `listener` (the request's), as Kafka answers."""
    live = [b for b in broker.image.brokers.values() if not b.fenced]
    config = broker.config
    if not live:
        host, port = config.advertised_host, config.advertised_port
        if listener is not None:
            host, port = endpoint_on(config, broker.image, broker.node_id, listener, broker.node_id, host, port)
        return [{"node_id": broker.node_id, "host": host, "port": port, "rack": None}]
    entries: list[BrokerEntry] = []
    for b in sorted(live, key=lambda b: b.broker_id):
        host, port = b.host, b.port
        if listener is not None:
            host, port = endpoint_on(config, broker.image, broker.node_id, listener, b.broker_id, host, port)
        entries.append({"node_id": b.broker_id, "host": host, "port": port, "rack": b.rack})
    return entries


def _error_entry(name: str | None, topic_id: uuid.UUID | None, error: ErrorCode) -> TopicEntry:
    return {"error_code": error, "name": name, "topic_id": topic_id or ZERO_UUID, "partitions": ()}


def handle_metadata(request: MetadataRequest, ctx: RequestContext) -> MetadataResponse:
    broker = ctx.broker
    version = ctx.version
    brokers = broker_entries(broker, ctx.listener_name)
    live = frozenset(b["node_id"] for b in brokers)
    include_ops = bool(field(request, "include_topic_authorized_operations", False))
    allow_auto_create = bool(field(request, "allow_auto_topic_creation", True)) and broker.config.get_bool(
        "auto.create.topics.enable"
    )
    topics: list[TopicEntry] = []
    # KafkaApis: DESCRIBE on each topic, decided before its existence (no leaks); CREATE (cluster or
    # topic) to auto-create; all-topics requests list only the describable ones.
    all_topics = request.topics is None or (version == 0 and not request.topics)
    auth = MetadataAuthorization(ctx, all_topics=all_topics)
    if request.topics is None or (version == 0 and not request.topics):
        image = broker.image
        topics = [topic_entry(t, include_ops=include_ops, live=live) for t in image.topics_by_name.values()
                  if auth.describable(t.name)]
    else:
        # Each topic once, however often the request names it (Kafka takes the names and ids as sets):
        # a repeated name must not repeat a topic of thousands of partitions in the answer.
        unique: dict[object, RequestTopic] = {}
        for t in request.topics:
            unique.setdefault(t.name if t.name is not None else ("id", field(t, "topic_id")), t)
        requested = list(unique.values())
        to_create: dict[str, None] = {}  # insertion-ordered set (a list's `in` made many names quadratic)
        for t in requested:
            name = t.name
            topic_id: uuid.UUID | None = field(t, "topic_id")  # v10+
            if name is None and topic_id is not None and topic_id != ZERO_UUID:
                found = broker.image.topics_by_id.get(str(topic_id))
                if found is None:
                    topics.append(_error_entry(None, topic_id, ErrorCode.unknown_topic_id))
                elif not auth.describable(found.name):  # topic ids are not secret (KafkaApis)
                    topics.append(_error_entry(None, topic_id, ErrorCode.topic_authorization_failed))
                else:
                    topics.append(topic_entry(found, include_ops=include_ops, live=live))
                continue
            if name is None:
                topics.append(_error_entry(None, topic_id, ErrorCode.invalid_request))
                continue
            if not auth.describable(name) or name in broker.image.topics_by_name:
                continue
            if not is_valid_topic_name(name):
                continue
            if allow_auto_create and auth.creatable(name):
                to_create[name] = None
        creating: set[str] = set()
        if to_create and broker.create_topics_soon([TopicSpec(name) for name in to_create]) is None:
            creating = set(to_create)  # through the active controller: LEADER_NOT_AVAILABLE until it lands
        image = broker.image
        for t in requested:
            name = t.name
            if name is None:
                continue
            found = image.topics_by_name.get(name)
            if not auth.describable(name):
                topics.append(_error_entry(name, None, ErrorCode.topic_authorization_failed))
            elif found is None and allow_auto_create and not auth.creatable(name):
                topics.append({**_error_entry(name, None, ErrorCode.topic_authorization_failed),
                               "is_internal": name in INTERNAL_TOPICS})
            elif found is not None:
                topics.append(topic_entry(found, include_ops=include_ops, live=live))
            elif not is_valid_topic_name(name):
                topics.append(_error_entry(name, None, ErrorCode.invalid_topic_exception))
            elif name in creating:
                topics.append(_error_entry(name, None, ErrorCode.leader_not_available))
            else:
                topics.append(_error_entry(name, None, ErrorCode.unknown_topic_or_partition))
    if include_ops:
        auth.fill_topic_operations(topics)
    cls: type[MetadataResponse] = response_class(3, version)
    return build(
        cls,
        {
            "throttle_time": 0,
            "brokers": brokers,
            "cluster_id": broker.cluster_id,
            "controller_id": broker.node_id,
            "topics": topics,
            "cluster_authorized_operations": (
                auth.cluster_operations(CLUSTER_OPERATIONS)
                if field(request, "include_cluster_authorized_operations", False)
                else AUTHORIZED_OPERATIONS_OMITTED
            ),
            "error_code": ErrorCode.none,
        },
    )
