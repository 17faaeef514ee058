"""AlterConfigs (key 33, v0-v2) and IncrementalAlterConfigs (key 44, v0-v1).

AlterConfigs replaces a resource's whole set of overrides (configs not named are removed);
IncrementalAlterConfigs applies SET / DELETE / APPEND / SUBTRACT per config (KIP-339). Topic configs
and dynamic broker configs (resource name "" for the cluster-wide default, or this broker's id) are
stored as metadata records; only the broker configs Kafka can change at run time are accepted.
"""

from __future__ import annotations

from typing import Any

from samsa.broker.config import TOPIC_CONFIGS, ConfigType, effective_topic_config
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
    error, message = await ctx.broker.controller.alter_topic_configs(
        r.resource_name, changes, replace_all=replace_all, validate_only=validate_only
    )
    return {"error_code": error, "error_message": message, "resource_type": r.resource_type,
            "resource_name": r.resource_name}


async def handle_alter_configs(request: Any, ctx: RequestContext) -> Any:
    responses = []
    for r in request.resources:
        changes: dict[str, str | None] = {c.name: c.value for c in r.configs}
        responses.append(await _apply(ctx, r, changes, True, request.validate_only))
    return build(response_class(33, ctx.version), {"throttle_time": 0, "responses": responses})


async def handle_incremental_alter_configs(request: Any, ctx: RequestContext) -> Any:
    responses = []
    for r in request.resources:
        changes: dict[str, str | None] = {}
        problem: str | None = None
        current = (effective_topic_config(ctx.broker.config, ctx.broker.image.topic_configs(r.resource_name))
                   if r.resource_type == TOPIC else {})
        for c in r.configs:
            op = c.config_operation
            if op == SET:
                changes[c.name] = c.value
            elif op == DELETE:
                changes[c.name] = None
            elif op in (APPEND, SUBTRACT):
                d = TOPIC_CONFIGS.get(c.name)
                if r.resource_type != TOPIC or d is None or d.type != ConfigType.LIST:
                    problem = f"Config value append/subtract is not allowed for config key {c.name}"
                    break
                items = [i for i in (changes.get(c.name) or current.get(c.name) or "").split(",") if i]
                given = [i.strip() for i in (c.value or "").split(",") if i.strip()]
                if op == APPEND:
                    items += [i for i in given if i not in items]
                else:
                    items = [i for i in items if i not in given]
                changes[c.name] = ",".join(items)
            else:
                problem = f"Unknown config operation {op}"
                break
        if problem is not None:
            responses.append(_refuse(r, ErrorCode.invalid_request, problem))
            continue
        responses.append(await _apply(ctx, r, changes, False, request.validate_only))
    return build(response_class(44, ctx.version), {"throttle_time": 0, "responses": responses})
