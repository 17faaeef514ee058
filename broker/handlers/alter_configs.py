"""AlterConfigs (key 33, v0-v2) and IncrementalAlterConfigs (key 44, v0-v1).

AlterConfigs replaces a resource's whole set of overrides (configs not named are removed);
IncrementalAlterConfigs applies SET / DELETE / APPEND / SUBTRACT per config (KIP-339). Topic configs
and dynamic broker configs (resource name "" for the cluster-wide default, or this broker's id) are
stored as metadata records; only the broker configs Kafka can change at run time are accepted.
Before the controller sees a request, Kafka's ConfigAdminManager.preprocess checks: a resource named twice,
a config key named twice, a null value (except DELETE) are INVALID_REQUEST. A topic's whole new set of
overrides is then validated as Kafka's LogConfig.validate does (INVALID_CONFIG with Kafka's message),
which accepts an empty cleanup.policy; APPEND/SUBTRACT start from the current override, else Kafka's
default, and need a LIST config ("Can't APPEND to key K because its type is not LIST.").
"""

from __future__ import annotations

from typing import Any

from samsa.broker.config import BROKER_SCHEMA, TOPIC_CONFIGS, ConfigType, check_topic_configs
from samsa.broker.context import RequestContext
from samsa.broker.wire import build
from samsa.kproto.errors import ErrorCode
from samsa.kproto.messages import response_class

TOPIC = 2
BROKER = 4
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def _refuse(r: Any, error: ErrorCode, message: str) -> dict[str, Any]:
    return {"error_code": error, "error_message": message, "resource_type": r.resource_type,
            "resource_name": r.resource_name}


def _preprocess(resources: Any, null_ok: Any) -> dict[int, tuple[ErrorCode, str]]:
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


def _check_topic(ctx: RequestContext, r: Any, changes: dict[str, str | None], replace_all: bool) -> str | None:
    """The topic's overrides as they would be, validated whole (Kafka's LogConfig.validate)."""
    overrides: dict[str, str | None] = {} if replace_all else dict(ctx.broker.image.topic_configs(r.resource_name))
    for name, value in changes.items():
        if value is None:
            overrides.pop(name, None)
        else:
            overrides[name] = value
    return check_topic_configs(overrides)


async def _apply(ctx: RequestContext, r: Any, changes: dict[str, str | None], replace_all: bool,
           validate_only: bool) -> dict[str, Any]:
    if r.resource_type == BROKER:
        error, message = await ctx.broker.controller.alter_broker_configs(
            r.resource_name, changes, replace_all=replace_all, validate_only=validate_only
        )
        return {"error_code": error, "error_message": message, "resource_type": r.resource_type,
                "resource_name": r.resource_name}
    if r.resource_type != TOPIC:
        return _refuse(r, ErrorCode.invalid_request, f"Unsupported resource type {r.resource_type}")
    if r.resource_name in ctx.broker.image.topics_by_name:
        problem = _check_topic(ctx, r, changes, replace_all)
        if problem is not None:
            return _refuse(r, ErrorCode.invalid_config, problem)
    error, message = await ctx.broker.controller.alter_topic_configs(
        r.resource_name, changes, replace_all=replace_all, validate_only=validate_only
    )
    return {"error_code": error, "error_message": message, "resource_type": r.resource_type,
            "resource_name": r.resource_name}


async def handle_alter_configs(request: Any, ctx: RequestContext) -> Any:
    refused = _preprocess(request.resources, lambda c: False)
    responses = []
    for i, r in enumerate(request.resources):
        if i in refused:
            responses.append(_refuse(r, *refused[i]))
            continue
        changes: dict[str, str | None] = {c.name: c.value for c in r.configs}
        responses.append(await _apply(ctx, r, changes, True, request.validate_only))
    return build(response_class(33, ctx.version), {"throttle_time": 0, "responses": responses})


def _list_default(resource_type: int, name: str) -> str | None:
    """Kafka's schema default of a LIST config (KafkaConfigSchema.getDefault), None if `name` is not one."""
    if resource_type == TOPIC:
        d = TOPIC_CONFIGS.get(name)
        return d.default if d is not None and d.type == ConfigType.LIST else None
    entry = BROKER_SCHEMA.get(name)
    return entry.default if entry is not None and entry.type == ConfigType.LIST else None


async def handle_incremental_alter_configs(request: Any, ctx: RequestContext) -> Any:
    refused = _preprocess(request.resources, lambda c: c.config_operation == DELETE)
    responses = []
    for i, r in enumerate(request.resources):
        if i in refused:
            responses.append(_refuse(r, *refused[i]))
            continue
        changes: dict[str, str | None] = {}
        problem: tuple[ErrorCode, str] | None = None
        if r.resource_type == TOPIC:
            current: dict[str, str] = dict(ctx.broker.image.topic_configs(r.resource_name))
        else:
            current = dict(ctx.broker.image.configs.get((BROKER, r.resource_name), {}))
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
                if op == APPEND:
                    items += [i for i in given if i not in items]
                else:
                    for item in given:
                        if item in items:
                            items.remove(item)
                changes[c.name] = ",".join(items)
            else:
                problem = (ErrorCode.invalid_request, f"Unknown config operation {op}")
                break
        if problem is not None:
            responses.append(_refuse(r, *problem))
            continue
        responses.append(await _apply(ctx, r, changes, False, request.validate_only))
    return build(response_class(44, ctx.version), {"throttle_time": 0, "responses": responses})
