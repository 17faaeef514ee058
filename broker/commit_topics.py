"""The topic checks OffsetCommit and TxnOffsetCommit make before the group coordinator sees a commit.

Both name topics by name, or by id from OffsetCommit v10 / TxnOffsetCommit v6 (KIP-848, KIP-1319); both
answer, per topic in request order, UNKNOWN_TOPIC_ID (an id no topic has), TOPIC_AUTHORIZATION_FAILED (no
READ), UNKNOWN_TOPIC_OR_PARTITION (no such topic or partition), and hand the rest on. The response's topics
come in Kafka's order (its response builders): a topic's entry is made by its first answered partition,
keyed by topic id when the version names topics by id.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import Any

from samsa.broker.context import RequestContext
from samsa.broker.security.acl import AclOperation
from samsa.broker.security.acl_requests import topic_authorization
from samsa.kproto.errors import ErrorCode

# (topic name, topic id as the request gave it, the request's partition entry)
Forwarded = tuple[str, uuid.UUID | None, Any]


class TopicAnswers:
    """The response's topics, in Kafka's order."""

    def __init__(self, by_id: bool) -> None:
        self.by_id = by_id
        self.topics: dict[object, dict[str, Any]] = {}

    def add(self, name: str, topic_id: uuid.UUID | None, partition: int, error: ErrorCode) -> None:
        key = topic_id if self.by_id else name
        entry = self.topics.setdefault(key, {"name": name, "topic_id": topic_id, "partitions": []})
        entry["partitions"].append({"partition_index": partition, "error_code": error})


def named_topic(ctx: RequestContext, topic: Any, ids_from: int) -> tuple[str | None, uuid.UUID | None]:
    """The topic's name (None: an id that names no topic) and its id as the request gave it (from `ids_from`)."""
    if ctx.version < ids_from:
        return topic.name, None
    topic_id: uuid.UUID | None = topic.topic_id
    found = ctx.broker.image.topics_by_id.get(str(topic_id)) if topic_id is not None else None
    return (found.name if found is not None else None), topic_id


def check_topics(ctx: RequestContext, topics: Iterable[Any], answers: TopicAnswers, ids_from: int) -> list[Forwarded]:
    """Answer the partitions the checks refuse; the rest, in request order, for the coordinator."""
    image = ctx.broker.image
    readable = topic_authorization(ctx, AclOperation.READ)
    forwarded: list[Forwarded] = []
    for topic in topics:
        name, topic_id = named_topic(ctx, topic, ids_from)
        known = image.topics_by_name.get(name) if name is not None else None
        topic_error = (ErrorCode.unknown_topic_id if name is None
                       else ErrorCode.topic_authorization_failed if not readable(name)
                       else ErrorCode.unknown_topic_or_partition if known is None else None)
        for p in topic.partitions:
            if topic_error is not None:
                answers.add(name or "", topic_id, p.partition_index, topic_error)
            elif known is not None and p.partition_index not in known.partitions:
                answers.add(name or "", topic_id, p.partition_index, ErrorCode.unknown_topic_or_partition)
            else:
                forwarded.append((name or "", topic_id, p))
    return forwarded
