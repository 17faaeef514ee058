"""AlterConfigs (key 33, v0-v2) and IncrementalAlterConfigs (key 44, v0-v1).

AlterConfigs replaces a resource's whole set of overrides (configs not named are removed);
IncrementalAlterConfigs applies SET / DELETE / APPEND / SUBTRACT per config (KIP-339). Topic configs,
dynamic broker configs (resource name "" for the cluster-wide default, or this broker's id) and group
configs (the GROUP resource, broker.group_configs) are stored as metadata records; only the broker
configs Kafka can change at run time are accepted.
Before the controller sees a request, Kafka's ConfigAdminManager.preprocess checks: a resource named twice,
a config key named twice, a null value (except DELETE) are INVALID_REQUEST. A topic's whole new set of
overrides is then validated as Kafka's LogConfig.validate does (INVALID_CONFIG with Kafka's message),
which accepts an empty cleanup.policy; APPEND/SUBTRACT start from the current override, else Kafka's
default, and need a LIST config ("Can't APPEND to key K because its type is not LIST.").
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, TypeVar

from samsa.broker.config import BROKER_SCHEMA, TOPIC_CONFIGS, ConfigType, check_topic_configs
from samsa.broker.context import ApiSpec, RequestContext
from samsa.broker.controller_types import ConfigChange, TooManyRecordsError
from samsa.broker.dynamic_broker_configs import static_config
from samsa.broker.group_configs import GROUP_RESOURCE, check_group_configs
from samsa.broker.log_cleaner import threads_reconfiguration_error
from samsa.broker.security.acl import AclOperation
from samsa.broker.security.acl_requests import config_resource_error
from samsa.broker.wire import build
from samsa.kproto.errors import ErrorCode
from samsa.kproto.messages import response_class

if TYPE_CHECKING:
    from kio.schema.alter_configs import v0, v1, v2
    from kio.schema.incremental_alter_configs import v0 as i0
    from kio.schema.incremental_alter_configs import v1 as i1
    AlterConfigsRequest = v0.AlterConfigsRequest | v1.AlterConfigsRequest | v2.AlterConfigsRequest
    AlterConfigsResponse = v0.AlterConfigsResponse | v1.AlterConfigsResponse | v2.AlterConfigsResponse
    IncrementalAlterConfigsRequest = i0.IncrementalAlterConfigsRequest | i1.IncrementalAlterConfigsRequest
    IncrementalAlterConfigsResponse = i0.IncrementalAlterConfigsResponse | i1.IncrementalAlterConfigsResponse

ALTER_CONFIGS = ApiSpec(key=33, min_version=0, max_version=2)
INCREMENTAL_ALTER_CONFIGS = ApiSpec(key=44, min_version=0, max_version=1)

TOPIC = 2
BROKER = 4
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


class ConfigQuery(Protocol):
    """The fields of a request's AlterableConfig (both APIs, every version) the checks read."""

    @property
    def name(self) -> str: ...

    @property
    def value(self) -> str | None: ...


class IncrementalConfigQuery(ConfigQuery, Protocol):
    """IncrementalAlterConfigs' AlterableConfig also names its operation (KIP-339)."""

    @property
    def config_operation(self) -> int: ...


_Config = TypeVar("_Config", bound=ConfigQuery, covariant=True)
_SomeConfig = TypeVar("_SomeConfig", bound=ConfigQuery)


class ResourceQuery(Protocol[_Config]):
    """The fields of a request's AlterConfigsResource (both APIs, every version) the checks read."""

    @property
    def resource_type(self) -> int: ...

    @property
    def resource_name(self) -> str: ...

    @property
    def configs(self) -> Sequence[_Config]: ...


@dataclass(frozen=True, slots=True)
class ResourceAnswer:
    """One resource's answer (an AlterConfigsResourceResponse of either API before it is built for the version)."""

    resource_type: int
    resource_name: str
    error: ErrorCode
    message: str | None


def _refuse(r: ResourceQuery[ConfigQuery], error: ErrorCode, message: str) -> ResourceAnswer:
    return ResourceAnswer(r.resource_type, r.resource_name, error, message)


def _preprocess(resources: Sequence[ResourceQuery[_SomeConfig]],
                null_ok: Callable[[_SomeConfig], bool]) -> dict[int, tuple[ErrorCode, str]]:
    """ConfigAdminManager.preprocess: refusals by position in the request."""
    refused: dict[int, tuple[ErrorCode, str]] = {}
    seen: dict[tuple[int, str], int] = {}
    for i, r in enumerate(resources):
        first = seen.setdefault((r.resource_type, r.resource_name), i)
        if first != i:
            for j in (first, i):
                refused[j] = (ErrorCode.invalid_request, "Each resource must appear at most once.")
    for i, r in enumerate(resources):
        if i in refused:
            continue
        names = [c.name for c in r.configs]
        if len(set(names)) != len(names):
            refused[i] = (ErrorCode.invalid_request, "Error due to duplicate config keys")
            continue
        nulls = [c.name for c in r.configs if c.value is None and not null_ok(c)]
        if nulls:
            refused[i] = (ErrorCode.invalid_request, f"Null value not supported for : {', '.join(nulls)}")
    return refused


def _check_topic(ctx: RequestContext, r: ResourceQuery[ConfigQuery], changes: dict[str, str | None],
                 replace_all: bool) -> str | None:
    """The topic's overrides as they would be, validated whole (Kafka's LogConfig.validate)."""
    overrides: dict[str, str | None] = {} if replace_all else dict(ctx.broker.image.topic_configs(r.resource_name))
    for name, value in changes.items():
        if value is None:
            overrides.pop(name, None)
        else:
            overrides[name] = value
    return check_topic_configs(overrides)


def _prechecked(ctx: RequestContext, r: ResourceQuery[ConfigQuery], changes: dict[str, str | None],
                replace_all: bool) -> tuple[ErrorCode, str] | ConfigChange:
    """What the handler refuses itself, else the resource's change for the controller. A static broker config is
    refused before authorizing by AlterConfigs (ConfigAdminManager.preprocess), after it by IncrementalAlterConfigs
    (Kafka 4.4.0: a principal without ALTER_CONFIGS on the cluster gets CLUSTER_AUTHORIZATION_FAILED)."""
    static = [f"Cannot update these configs dynamically: [{name}]" for name, value in changes.items()
              if value is not None and static_config(name)] if r.resource_type == BROKER else []
    if static and replace_all:
        return ErrorCode.invalid_request, static[0]
    denied = config_resource_error(ctx, AclOperation.ALTER_CONFIGS, r.resource_type, r.resource_name)
    if denied is not None:  # ControllerApis.authorizeAlterResource
        return denied
    if static:
        return ErrorCode.invalid_request, static[0]
    if r.resource_type not in (BROKER, TOPIC, GROUP_RESOURCE):
        return ErrorCode.invalid_request, f"Unsupported resource type {r.resource_type}"
    if r.resource_type == TOPIC and r.resource_name in ctx.broker.image.topics_by_name:
        problem = _check_topic(ctx, r, changes, replace_all)
        if problem is not None:
            return ErrorCode.invalid_config, problem
    threads = changes.get("log.cleaner.threads")
    if r.resource_type == BROKER and threads is not None and threads.strip().lstrip("-").isdigit():
        # Kafka's DynamicBrokerConfig.validate runs LogCleaner.validateReconfiguration against this broker's
        # cleaner (a malformed value is left to the schema check, which answers it)
        problem = threads_reconfiguration_error(ctx.broker.log_cleaner.threads, int(threads))
        if problem is not None:
            return ErrorCode.invalid_config, problem
    if r.resource_type == GROUP_RESOURCE and r.resource_name:
        # The bounds come from this broker's group.* configs (the controller checks names and values only).
        merged: dict[str, str | None] = {} if replace_all else dict(
            ctx.broker.image.configs.get((GROUP_RESOURCE, r.resource_name), {}))
        merged.update(changes)
        problem = check_group_configs({k: v for k, v in merged.items() if v is not None},
                                      ctx.broker.config.overrides)
        if problem is not None:
            return ErrorCode.invalid_config, problem
    return ConfigChange(r.resource_type, r.resource_name, changes)


async def _apply_all(ctx: RequestContext, resources: Sequence[ResourceQuery[ConfigQuery]], validate_only: bool,
                     outcomes: list[tuple[ErrorCode, str] | ConfigChange], replace_all: bool) -> list[ResourceAnswer]:
    """Every accepted resource's change goes to the controller as ONE operation, written as one metadata
    entry (Kafka's ConfigurationControlManager), not one write per resource: 2,000 resources were 2,000
    metadata writes (17 s of a held loop). Past Kafka's 10,000 records the whole request is refused."""
    changes = [o for o in outcomes if isinstance(o, ConfigChange)]
    try:
        pending = ctx.broker.controller.alter_configs(changes, replace_all=replace_all,
                                                      validate_only=validate_only)
    except TooManyRecordsError as e:
        return [_refuse(r, e.error_code, e.message) for r in resources]
    results = iter(await pending if changes else [])
    responses = []
    for r, outcome in zip(resources, outcomes, strict=True):
        error, message = next(results) if isinstance(outcome, ConfigChange) else outcome
        responses.append(ResourceAnswer(r.resource_type, r.resource_name, error, message))
    return responses


_Response = TypeVar("_Response")


def _response(cls: type[_Response], answers: list[ResourceAnswer]) -> _Response:
    """The one place the answers become the kio response of the request's version (both APIs answer the
    same fields)."""
    return build(cls, {"throttle_time": 0, "responses": [
        {"error_code": a.error, "error_message": a.message, "resource_type": a.resource_type,
         "resource_name": a.resource_name} for a in answers]})


async def handle_alter_configs(request: AlterConfigsRequest, ctx: RequestContext) -> AlterConfigsResponse:
    resources: Sequence[ResourceQuery[ConfigQuery]] = request.resources
    refused = _preprocess(resources, lambda c: False)
    outcomes: list[tuple[ErrorCode, str] | ConfigChange] = []
    for i, r in enumerate(resources):
        if i in refused:
            outcomes.append(refused[i])
            continue
        outcomes.append(_prechecked(ctx, r, {c.name: c.value for c in r.configs}, True))
    responses = await _apply_all(ctx, resources, request.validate_only, outcomes, True)
    cls: type[AlterConfigsResponse] = response_class(33, ctx.version)
    return _response(cls, responses)


def _list_default(resource_type: int, name: str) -> str | None:
    """Kafka's schema default of a LIST config (KafkaConfigSchema.getDefault), None if `name` is not one."""
    if resource_type == TOPIC:
        d = TOPIC_CONFIGS.get(name)
        return d.default if d is not None and d.type == ConfigType.LIST else None
    entry = BROKER_SCHEMA.get(name)
    return entry.default if entry is not None and entry.type == ConfigType.LIST else None


async def handle_incremental_alter_configs(request: IncrementalAlterConfigsRequest,
                                           ctx: RequestContext) -> IncrementalAlterConfigsResponse:
    resources: Sequence[ResourceQuery[IncrementalConfigQuery]] = request.resources
    refused = _preprocess(resources, lambda c: c.config_operation == DELETE)
    outcomes: list[tuple[ErrorCode, str] | ConfigChange] = []
    for i, r in enumerate(resources):
        if i in refused:
            outcomes.append(refused[i])
            continue
        changes: dict[str, str | None] = {}
        problem: tuple[ErrorCode, str] | None = None
        if r.resource_type == TOPIC:
            current: dict[str, str] = dict(ctx.broker.image.topic_configs(r.resource_name))
        else:
            current = dict(ctx.broker.image.configs.get((r.resource_type, r.resource_name), {}))
        for c in r.configs:
            op = c.config_operation
            if op == SET:
                changes[c.name] = c.value
            elif op == DELETE:
                changes[c.name] = None
            elif op in (APPEND, SUBTRACT):
                default = _list_default(r.resource_type, c.name)
                if default is None:
                    problem = (ErrorCode.invalid_config, f"Can't {'APPEND' if op == APPEND else 'SUBTRACT'} to key "
                                                         f"{c.name} because its type is not LIST.")
                    break
                base = changes[c.name] if c.name in changes else current.get(c.name, default)
                items = [i for i in (base or "").split(",") if i]
                given = (c.value or "").split(",")
                # Membership by set: a list's `in` made a long value quadratic to change.
                if op == APPEND:
                    present = set(items)
                    for item in given:
                        if item not in present:
                            items.append(item)
                            present.add(item)
                else:  # Kafka's removeAll: every occurrence goes
                    drop = set(given)
                    items = [i for i in items if i not in drop]
                changes[c.name] = ",".join(items)
            else:
                problem = (ErrorCode.invalid_request, f"Unknown config operation {op}")
                break
        outcomes.append(problem if problem is not None else _prechecked(ctx, r, changes, False))
    responses = await _apply_all(ctx, resources, request.validate_only, outcomes, False)
    cls: type[IncrementalAlterConfigsResponse] = response_class(44, ctx.version)
    return _response(cls, responses)
