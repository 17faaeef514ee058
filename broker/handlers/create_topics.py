"""CreateTopics (key 19), v2-v7.

v4 lets num_partitions / replication_factor be -1 (broker defaults, KIP-464); v5 is flexible and
returns the resulting configs, partition count and replication factor (KIP-525); v7 returns topic_id.
"""

from __future__ import annotations

import uuid
from collections import Counter
from typing import Any

from samsa.broker.config import TOPIC_CONFIGS, effective_topic_config
from samsa.broker.context import ApiSpec, RequestContext
from samsa.broker.controller import TopicSpec
from samsa.broker.controller_types import EXCESSIVE_BATCH_MESSAGE
from samsa.broker.forwarding import error_response
from samsa.broker.wire import build
from samsa.kproto.errors import ErrorCode
from samsa.kproto.messages import response_class

API = ApiSpec(key=19, min_version=2, max_version=7)

ZERO_UUID = uuid.UUID(int=0)


def _spec(t: Any) -> TopicSpec:
    return TopicSpec(
        name=t.name,
        num_partitions=t.num_partitions,
        replication_factor=t.replication_factor,
        assignments={a.partition_index: tuple(a.broker_ids) for a in t.assignments},
        configs={c.name: c.value for c in t.configs},
    )


async def handle_create_topics(request: Any, ctx: RequestContext) -> Any:
    names = [t.name for t in request.topics]
    # Kafka refuses a topic named twice in one request with a single INVALID_REQUEST, creating nothing.
    duplicated = {n for n, times in Counter(names).items() if times > 1}  # (list.count was quadratic)
    duplicates = sorted(duplicated)
    results = await ctx.broker.controller.create_topics([_spec(t) for t in request.topics if t.name not in duplicated],
                                                  validate_only=request.validate_only)
    if results and all(r.error_code == ErrorCode.policy_violation and r.error_message == EXCESSIVE_BATCH_MESSAGE
                       for r in results):
        # More records than one operation may write (Kafka's MAX_RECORDS_PER_USER_OP): the whole
        # request failed, and Kafka answers every topic it named with that error.
        return error_response(19, ctx.version, request, ErrorCode.policy_violation, EXCESSIVE_BATCH_MESSAGE)
    specs = {t.name: _spec(t) for t in request.topics}
    topics: list[dict[str, Any]] = [
        {"name": name, "topic_id": ZERO_UUID, "error_code": ErrorCode.invalid_request,
         "error_message": f"Create topics request from client contains multiple entries for the following "
                          f"topics: {name}", "num_partitions": -1, "replication_factor": -1, "configs": ()}
        for name in duplicates
    ]
    for r in results:
        entry: dict[str, Any] = {
            "name": r.name,
            "topic_id": uuid.UUID(r.topic_id) if r.topic_id else ZERO_UUID,
            "error_code": r.error_code,
            "error_message": r.error_message,
            "num_partitions": r.num_partitions,
            "replication_factor": r.replication_factor,
            "configs": (),
        }
        if r.error_code == ErrorCode.none:
            spec = specs[r.name]
            overrides = {k: v for k, v in spec.configs.items() if v is not None}
            values = effective_topic_config(ctx.broker.config, overrides)
            entry["configs"] = [
                {"name": name, "value": values[name], "read_only": False,
                 "config_source": 1 if name in overrides else int(ctx.broker.config.topic_default(name)[1]),
                 "is_sensitive": False}
                for name in TOPIC_CONFIGS
            ]
        topics.append(entry)
    return build(response_class(19, ctx.version), {"throttle_time": 0, "topics": topics})
