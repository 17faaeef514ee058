"""CreateTopics (key 19), v2-v7.

v4 lets num_partitions / replication_factor be -1 (broker defaults, KIP-464); v5 is flexible and
returns the resulting configs, partition count and replication factor (KIP-525); v7 returns topic_id.
"""

from __future__ import annotations

import uuid
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING

from samsa.broker.config import TOPIC_CONFIGS, effective_topic_config
from samsa.broker.context import ApiSpec, RequestContext
from samsa.broker.controller import TopicSpec
from samsa.broker.controller_types import EXCESSIVE_BATCH_MESSAGE, TopicResult
from samsa.broker.forwarding import error_response
from samsa.broker.security.acl_requests import create_topics_authorization
from samsa.broker.wire import build
from samsa.kproto.errors import ErrorCode
from samsa.kproto.messages import response_class

if TYPE_CHECKING:
    from kio.schema.create_topics import v2, v3, v4, v5, v6, v7
    CreateTopicsRequest = (v2.CreateTopicsRequest | v3.CreateTopicsRequest | v4.CreateTopicsRequest
                           | v5.CreateTopicsRequest | v6.CreateTopicsRequest | v7.CreateTopicsRequest)
    CreateTopicsResponse = (v2.CreateTopicsResponse | v3.CreateTopicsResponse | v4.CreateTopicsResponse
                            | v5.CreateTopicsResponse | v6.CreateTopicsResponse | v7.CreateTopicsResponse)
    CreatableTopic = (v2.request.CreatableTopic | v3.request.CreatableTopic | v4.request.CreatableTopic
                      | v5.request.CreatableTopic | v6.request.CreatableTopic | v7.request.CreatableTopic)

API = ApiSpec(key=19, min_version=2, max_version=7)

ZERO_UUID = uuid.UUID(int=0)


@dataclass(frozen=True, slots=True)
class TopicConfig:
    """One config of a created topic (a CreatableTopicConfigs, v5+, KIP-525)."""

    name: str
    value: str | None
    config_source: int


@dataclass(frozen=True, slots=True)
class TopicCreation:
    """One topic's answer (a CreatableTopicResult before it is built for the version)."""

    name: str
    error: ErrorCode
    message: str | None = None
    topic_id: uuid.UUID = ZERO_UUID
    num_partitions: int = -1
    replication_factor: int = -1
    configs: tuple[TopicConfig, ...] = ()
    config_error: ErrorCode = ErrorCode.none  # topic_config_error_code (v5+): TOPIC_AUTHORIZATION_FAILED


def _spec(t: CreatableTopic) -> TopicSpec:
    return TopicSpec(
        name=t.name,
        num_partitions=t.num_partitions,
        replication_factor=t.replication_factor,
        assignments={a.partition_index: tuple(a.broker_ids) for a in t.assignments},
        configs={c.name: c.value for c in t.configs},
    )


async def handle_create_topics(request: CreateTopicsRequest, ctx: RequestContext) -> CreateTopicsResponse:
    names = [t.name for t in request.topics]
    # Kafka refuses a topic named twice in one request with a single INVALID_REQUEST, creating nothing.
    duplicated = {n for n, times in Counter(names).items() if times > 1}  # (list.count was quadratic)
    duplicates = sorted(duplicated)
    # ControllerApis.createTopics: CREATE on the cluster or on each topic; DESCRIBE_CONFIGS to see its configs.
    creatable = create_topics_authorization(ctx)
    denied = [n for n in dict.fromkeys(names) if n not in duplicated and not creatable(n)]
    duplicated.update(denied)
    results = await ctx.broker.controller.create_topics([_spec(t) for t in request.topics if t.name not in duplicated],
                                                  validate_only=request.validate_only)
    if results and all(r.error_code == ErrorCode.policy_violation and r.error_message == EXCESSIVE_BATCH_MESSAGE
                       for r in results):
        # More records than one operation may write (Kafka's MAX_RECORDS_PER_USER_OP): the whole
        # request failed, and Kafka answers every topic it named with that error.
        refused: CreateTopicsResponse = error_response(19, ctx.version, request, ErrorCode.policy_violation,
                                                       EXCESSIVE_BATCH_MESSAGE)
        return refused
    specs: dict[str, TopicSpec] = {t.name: _spec(t) for t in request.topics}
    answers = [TopicCreation(name, ErrorCode.invalid_request, "Create topics request from client contains multiple "
                                                              f"entries for the following topics: {name}")
               for name in duplicates]
    answers.extend(_created(ctx, r, specs[r.name]) for r in results)
    answers += [TopicCreation(name, ErrorCode.topic_authorization_failed, "Authorization failed.") for name in denied]
    return _response(ctx, [a if a.error or creatable.may_describe_configs(a.name) else
                           TopicCreation(a.name, a.error, a.message, a.topic_id,
                                         config_error=ErrorCode.topic_authorization_failed) for a in answers])


def _created(ctx: RequestContext, r: TopicResult, spec: TopicSpec) -> TopicCreation:
    """The controller's result; a created topic (v5+) also reports its effective configs."""
    configs: tuple[TopicConfig, ...] = ()
    if r.error_code == ErrorCode.none:
        overrides = {k: v for k, v in spec.configs.items() if v is not None}
        values = effective_topic_config(ctx.broker.config, overrides)
        configs = tuple(
            TopicConfig(name, values[name],
                        1 if name in overrides else int(ctx.broker.config.topic_default(name)[1]))
            for name in TOPIC_CONFIGS)
    return TopicCreation(r.name, r.error_code, r.error_message, uuid.UUID(r.topic_id) if r.topic_id else ZERO_UUID,
                         r.num_partitions, r.replication_factor, configs)


def _response(ctx: RequestContext, answers: list[TopicCreation]) -> CreateTopicsResponse:
    """The one place the answers become the kio response of the request's version."""
    cls: type[CreateTopicsResponse] = response_class(19, ctx.version)
    return build(cls, {"throttle_time": 0, "topics": [
        {"name": a.name, "topic_id": a.topic_id, "error_code": a.error, "error_message": a.message,
         "num_partitions": a.num_partitions, "replication_factor": a.replication_factor,
         "topic_config_error_code": a.config_error,
         "configs": [{"name": c.name, "value": c.value, "read_only": False, "config_source": c.config_source,
                      "is_sensitive": False} for c in a.configs]}
        for a in answers]})
