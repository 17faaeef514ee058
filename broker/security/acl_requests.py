"""The authorization steps handlers share, as Kafka's KafkaApis takes them: an error code per resource
(ErrorCode.none when allowed, so `denied or next_check` reads in order), Produce's checks, and the
binding of producer ids to the principal they were issued to.

The binding is Samsa's (stricter than Kafka, from the seeds): InitProducerId records which principal a
producer id went to, and a Produce by another principal with that id is refused with
INVALID_PRODUCER_ID_MAPPING and a message saying why. It is kept in memory (bounded, oldest forgotten
first) by each broker: an id this broker did not issue (another broker did, or it did before a restart) is
bound to the first principal that produces with it here. While no id went to a principal other than
User:ANONYMOUS and the producer is anonymous too, there is nothing to tell apart and nothing is checked.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable
from typing import Any

from samsa.broker.security.acl import CLUSTER_NAME, AclOperation, ResourceType
from samsa.broker.security.authorizer import (
    AuthContext,
    authorize,
    authorize_by_resource_type,
    authorize_cluster,
    authorized_operations,
    enabled,
    filter_authorized,
)
from samsa.kproto.errors import ErrorCode

PRODUCER_PRINCIPALS_MAX_COUNT = 100_000
ANONYMOUS = "User:ANONYMOUS"
_ATTRIBUTES_AT, _PRODUCER_ID_AT, _BATCH_HEADER_BYTES = 21, 43, 61
_TRANSACTIONAL_FLAG = 0x10


def group_error(ctx: AuthContext, operation: AclOperation, group_id: str) -> ErrorCode:
    if authorize(ctx, operation, ResourceType.GROUP, group_id):
        return ErrorCode.none
    return ErrorCode.group_authorization_failed


def topic_error(ctx: AuthContext, operation: AclOperation, topic: str) -> ErrorCode:
    if authorize(ctx, operation, ResourceType.TOPIC, topic):
        return ErrorCode.none
    return ErrorCode.topic_authorization_failed


def cluster_error(ctx: AuthContext, operation: AclOperation) -> ErrorCode:
    return ErrorCode.none if authorize_cluster(ctx, operation) else ErrorCode.cluster_authorization_failed


def transactional_id_error(ctx: AuthContext, operation: AclOperation, transactional_id: str | None) -> ErrorCode:
    if transactional_id is not None and authorize(ctx, operation, ResourceType.TRANSACTIONAL_ID, transactional_id):
        return ErrorCode.none
    return ErrorCode.transactional_id_authorization_failed


# ConfigResource.Type ids: which resource's ACLs guard its configs (ConfigHelper / ControllerApis).
_CONFIG_TOPIC, _CONFIG_GROUP = 2, 32
_CONFIG_CLUSTER_TYPES = frozenset({4, 8, 16})  # BROKER, BROKER_LOGGER, CLIENT_METRICS: the cluster's
# Kafka's Errors.message() of the three, which these APIs answer as error_message.
_AUTHORIZATION_MESSAGES = {
    ErrorCode.topic_authorization_failed: "Topic authorization failed.",
    ErrorCode.group_authorization_failed: "Group authorization failed.",
    ErrorCode.cluster_authorization_failed: "Cluster authorization failed.",
}


def config_resource_error(ctx: AuthContext, operation: AclOperation, config_resource_type: int,
                          name: str) -> tuple[ErrorCode, str] | None:
    """DESCRIBE_CONFIGS / ALTER_CONFIGS on a config resource: (error, Kafka's message) if denied, else None
    (an unknown resource type is left to the handler's own INVALID_REQUEST)."""
    if config_resource_type in _CONFIG_CLUSTER_TYPES:
        error = cluster_error(ctx, operation)
    elif config_resource_type == _CONFIG_TOPIC:
        error = topic_error(ctx, operation, name)
    elif config_resource_type == _CONFIG_GROUP:
        error = group_error(ctx, operation, name)
    else:
        return None
    return (error, _AUTHORIZATION_MESSAGES[error]) if error else None


def authorized_topics(ctx: AuthContext, operation: AclOperation, names: Iterable[str]) -> set[str]:
    return filter_authorized(ctx, operation, ResourceType.TOPIC, names, lambda n: n)


def init_producer_id_error(ctx: AuthContext, transactional_id: str | None) -> ErrorCode:
    """KafkaApis.handleInitProducerIdRequest: WRITE on the transactional id; without one, IDEMPOTENT_WRITE
    on the cluster or WRITE on some topic (KIP-679), else CLUSTER_AUTHORIZATION_FAILED."""
    if transactional_id is not None:
        return transactional_id_error(ctx, AclOperation.WRITE, transactional_id)
    if authorize_cluster(ctx, AclOperation.IDEMPOTENT_WRITE, log_if_denied=False) or authorize_by_resource_type(
            ctx, AclOperation.WRITE, ResourceType.TOPIC):
        return ErrorCode.none
    return cluster_error(ctx, AclOperation.IDEMPOTENT_WRITE)  # denied: logged now


def fetch_readable(ctx: AuthContext, replica_id: int) -> Callable[[str], bool]:
    """KafkaApis.handleFetchRequest: a follower (replica_id >= 0) needs CLUSTER_ACTION on the cluster for
    every partition; a consumer READ on each topic (decided once per topic)."""
    if not enabled(ctx):
        return lambda _name: True
    if replica_id >= 0:
        follower_allowed = authorize_cluster(ctx, AclOperation.CLUSTER_ACTION)
        return lambda _name: follower_allowed
    return topic_authorization(ctx, AclOperation.READ)


def topic_authorization(ctx: AuthContext, operation: AclOperation, *, log_if_denied: bool = True
                        ) -> Callable[[str], bool]:
    """A predicate: may the principal `operation` on this topic (each topic decided once)."""
    return _TopicAuthorization(ctx, operation, log_if_denied)


class _TopicAuthorization:
    """One request's decisions on topics for one operation, each topic decided once."""

    def __init__(self, ctx: AuthContext, operation: AclOperation, log_if_denied: bool = True) -> None:
        self._ctx = ctx
        self._operation = operation
        self._log_if_denied = log_if_denied
        self._on = enabled(ctx)
        self._decided: dict[str, bool] = {}

    def __call__(self, name: str) -> bool:
        if not self._on:
            return True
        allowed = self._decided.get(name)
        if allowed is None:
            allowed = self._decided[name] = authorize(self._ctx, self._operation, ResourceType.TOPIC, name,
                                                      log_if_denied=self._log_if_denied)
        return allowed


class MetadataAuthorization:
    """KafkaApis.handleTopicMetadataRequest's checks."""

    def __init__(self, ctx: AuthContext, *, all_topics: bool) -> None:
        self._ctx = ctx
        self.all_topics = all_topics
        # An all-topics request is a filter, not a request for a resource: its denials are not logged.
        self.describable = _TopicAuthorization(ctx, AclOperation.DESCRIBE, log_if_denied=not all_topics)
        self._creatable = _TopicAuthorization(ctx, AclOperation.CREATE)
        self._cluster_create: bool | None = None

    def creatable(self, name: str) -> bool:
        """May this topic be auto-created: CREATE on the cluster, or on the topic."""
        if self._cluster_create is None:
            self._cluster_create = authorize_cluster(self._ctx, AclOperation.CREATE, log_if_denied=False)
        return self._cluster_create or self._creatable(name)

    def fill_topic_operations(self, topics: list[Any]) -> None:
        if not enabled(self._ctx):
            return
        for entry in topics:  # Kafka fills every topic it answers for, but the ones refused DESCRIBE
            if entry.get("name") is not None and entry["error_code"] != ErrorCode.topic_authorization_failed:
                entry["topic_authorized_operations"] = authorized_operations(self._ctx, ResourceType.TOPIC,
                                                                             entry["name"])

    def cluster_operations(self, all_operations: int) -> int:
        return cluster_authorized_operations(self._ctx, all_operations)


def cluster_authorized_operations(ctx: AuthContext, all_operations: int) -> int:
    """The cluster's authorized-operations field when asked for (AuthHelper): 0 without DESCRIBE on it;
    `all_operations` when authorization is off."""
    if not enabled(ctx):
        return all_operations
    if not authorize_cluster(ctx, AclOperation.DESCRIBE):
        return 0
    return authorized_operations(ctx, ResourceType.CLUSTER, CLUSTER_NAME)


def offset_for_leader_epoch_authorization(ctx: AuthContext) -> Callable[[str], bool]:
    """KafkaApis.handleOffsetForLeaderEpochRequest: CLUSTER_ACTION (a follower) allows every topic; else
    DESCRIBE on each."""
    if not enabled(ctx) or authorize_cluster(ctx, AclOperation.CLUSTER_ACTION, log_if_denied=False):
        return _everything
    return _TopicAuthorization(ctx, AclOperation.DESCRIBE)


class CreateTopicsAuthorization:
    """ControllerApis.createTopics: CREATE on the cluster, else on each topic; DESCRIBE_CONFIGS (not logged)
    to be answered a created topic's configs."""

    def __init__(self, ctx: AuthContext) -> None:
        self._cluster = authorize_cluster(ctx, AclOperation.CREATE, log_if_denied=False)
        self._creatable = _TopicAuthorization(ctx, AclOperation.CREATE)
        self.may_describe_configs = _TopicAuthorization(ctx, AclOperation.DESCRIBE_CONFIGS, log_if_denied=False)

    def __call__(self, name: str) -> bool:
        return self._cluster or self._creatable(name)


def create_topics_authorization(ctx: AuthContext) -> CreateTopicsAuthorization:
    return CreateTopicsAuthorization(ctx)


def _everything(_name: str) -> bool:
    return True


class DeleteTopicsAuthorization:
    """ControllerApis.deleteTopics: DELETE on the cluster allows all; else DESCRIBE and DELETE per topic."""

    def __init__(self, ctx: AuthContext) -> None:
        cluster = authorize_cluster(ctx, AclOperation.DELETE, log_if_denied=False)
        self.describable: Callable[[str], bool] = (
            _everything if cluster else _TopicAuthorization(ctx, AclOperation.DESCRIBE))
        self.deletable: Callable[[str], bool] = (
            _everything if cluster else _TopicAuthorization(ctx, AclOperation.DELETE))


def delete_topics_authorization(ctx: AuthContext) -> DeleteTopicsAuthorization:
    return DeleteTopicsAuthorization(ctx)


class ProducerPrincipals:
    """Which principal each producer id was issued to (bounded: the oldest are forgotten first)."""

    def __init__(self, max_count: int = PRODUCER_PRINCIPALS_MAX_COUNT) -> None:
        self._max_count = max_count
        self._by_id: OrderedDict[int, str] = OrderedDict()
        self._named = False

    def issued(self, producer_id: int, principal: str) -> None:
        if producer_id < 0:
            return
        self._note(principal)
        self._by_id[producer_id] = principal
        self._by_id.move_to_end(producer_id)
        while len(self._by_id) > self._max_count:
            self._by_id.popitem(last=False)

    def owner(self, producer_id: int) -> str | None:
        return self._by_id.get(producer_id)

    def any(self) -> bool:
        """Has any id been issued to a principal other than the anonymous one (else nothing to check)?"""
        return self._named

    def _note(self, principal: str) -> None:
        if principal != ANONYMOUS:
            self._named = True


producer_principals = ProducerPrincipals()


def _is_transactional(records: bytes | None) -> bool:
    return (records is not None and len(records) >= _BATCH_HEADER_BYTES
            and bool(records[_ATTRIBUTES_AT + 1] & _TRANSACTIONAL_FLAG))


def _producer_id(records: bytes | None) -> int:
    if records is None or len(records) < _BATCH_HEADER_BYTES:
        return -1
    return int.from_bytes(records[_PRODUCER_ID_AT:_PRODUCER_ID_AT + 8], "big", signed=True)


class ProduceAuthorization:
    """Produce's checks (KafkaApis.handleProduceRequest): transactional batches need WRITE on the
    transactional id (else every partition is TRANSACTIONAL_ID_AUTHORIZATION_FAILED); each topic needs
    WRITE (TOPIC_AUTHORIZATION_FAILED, decided before the topic's existence, so nothing leaks); then
    Samsa's producer-id binding."""

    __slots__ = ("_allowed", "_ctx", "_transactional_error")

    def __init__(self, ctx: AuthContext, transactional_id: str | None, topics: Iterable[str],
                 any_transactional: bool) -> None:
        self._ctx = ctx
        self._transactional_error = (transactional_id_error(ctx, AclOperation.WRITE, transactional_id)
                                     if any_transactional else ErrorCode.none)
        self._allowed = authorized_topics(ctx, AclOperation.WRITE, topics)

    def refusal(self, topic: str, records: bytes | None) -> tuple[ErrorCode, str | None] | None:
        if self._transactional_error:
            return self._transactional_error, None
        if topic not in self._allowed:
            return ErrorCode.topic_authorization_failed, None
        return _producer_refusal(self._ctx, records)


class ProducerBinding:
    """Produce with the authorizer off: only the producer-id binding."""

    __slots__ = ("_ctx",)

    def __init__(self, ctx: AuthContext) -> None:
        self._ctx = ctx

    def refusal(self, topic: str, records: bytes | None) -> tuple[ErrorCode, str | None] | None:
        return _producer_refusal(self._ctx, records)


def _producer_refusal(ctx: AuthContext, records: bytes | None) -> tuple[ErrorCode, str | None] | None:
    if ctx.principal == ANONYMOUS and not producer_principals.any():
        return None  # nothing issued to anyone else (the common case when nothing authenticates)
    producer_id = _producer_id(records)
    if producer_id >= 0:
        owner = producer_principals.owner(producer_id)
        if owner is None:
            # Issued by another broker (or before a restart): the first principal to use it here keeps it.
            producer_principals.issued(producer_id, ctx.principal)
        elif owner != ctx.principal:
            return (ErrorCode.invalid_producer_id_mapping,
                    f"Producer id {producer_id} was issued to another principal than {ctx.principal}")
    return None


ProduceChecks = ProduceAuthorization | ProducerBinding


def produce_authorization(ctx: AuthContext, transactional_id: str | None,
                          topic_records: Iterable[tuple[str, Iterable[bytes | None]]]) -> ProduceChecks:
    if not enabled(ctx):
        return ProducerBinding(ctx)
    topics: list[str] = []
    any_transactional = False
    for name, batches in topic_records:
        topics.append(name)
        any_transactional = any_transactional or any(_is_transactional(b) for b in batches)
    return ProduceAuthorization(ctx, transactional_id, topics, any_transactional)
