"""DescribeConfigs (key 32), v1-v4.

v1 adds include_synonyms and config_source; v3 adds config_type and documentation (KIP-336); v4 is
flexible. Topic configs report each value with its source (topic override, static broker config or
default) and, on request, the synonyms chain Kafka reports.
"""

from __future__ import annotations

from typing import Any

from samsa.broker.config import BROKER_SCHEMA, DYNAMIC_BROKER_CONFIGS, TOPIC_CONFIGS, ConfigSource, ConfigType
from samsa.broker.context import ApiSpec, RequestContext
from samsa.broker.wire import build, field
from samsa.kproto.errors import ErrorCode
from samsa.kproto.messages import response_class

API = ApiSpec(key=32, min_version=1, max_version=4)

TOPIC = 2
BROKER = 4


def _topic_configs(ctx: RequestContext, name: str, keys: Any, synonyms: bool, docs: bool) -> list[dict[str, Any]]:
    broker_config = ctx.broker.config
    overrides = ctx.broker.image.topic_configs(name)
    out = []
    for config_name, d in TOPIC_CONFIGS.items():
        if keys is not None and config_name not in keys:
            continue
        default_value, default_source = broker_config.topic_default(config_name)
        chain = []
        if config_name in overrides:
            value, source = overrides[config_name], ConfigSource.TOPIC_CONFIG
            chain.append({"name": config_name, "value": value, "source": ConfigSource.TOPIC_CONFIG})
        else:
            value, source = default_value, default_source
        if default_source != ConfigSource.DEFAULT_CONFIG and d.broker_key is not None:
            chain.append({"name": d.broker_key, "value": default_value, "source": default_source})
        if d.broker_key is not None and d.broker_key in BROKER_SCHEMA and BROKER_SCHEMA[d.broker_key].default != "":
            # Kafka lists a broker default synonym only where the broker key itself has a default;
            # derived keys (log.retention.ms from log.retention.hours, ...) have none.
            chain.append({"name": d.broker_key, "value": d.default, "source": ConfigSource.DEFAULT_CONFIG})
        out.append({
            "name": config_name, "value": value, "read_only": False, "config_source": source,
            "is_sensitive": False, "synonyms": chain if synonyms else (), "config_type": d.type,
            "documentation": d.documentation if docs else None,
        })
    return out


def _broker_entry(ctx: RequestContext, name: str, value: str | None, source: ConfigSource, synonyms: bool,
                  docs: bool) -> dict[str, Any]:
    entry = BROKER_SCHEMA.get(name)
    # Kafka's ConfigHelper: a key it has no type for (not in its schema) or a PASSWORD is sensitive, its
    # value withheld.
    sensitive = entry is None or entry.type == ConfigType.PASSWORD
    chain = []
    if synonyms:
        # Kafka's synonyms: every layer that holds the key, most precedent first, then its default.
        config = ctx.broker.config
        for layer, layer_source in ((config.dynamic_node, ConfigSource.DYNAMIC_BROKER_CONFIG),
                                    (config.dynamic_default, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
                                    (config.overrides, ConfigSource.STATIC_BROKER_CONFIG)):
            if name in layer:
                chain.append({"name": name, "value": None if sensitive else layer[name], "source": layer_source})
        if entry is not None and entry.default != "":
            chain.append({"name": name, "value": entry.default, "source": ConfigSource.DEFAULT_CONFIG})
    return {
        "name": name, "value": None if sensitive else value, "read_only": name not in DYNAMIC_BROKER_CONFIGS,
        "config_source": source, "is_sensitive": sensitive, "synonyms": chain,
        "config_type": entry.type if entry is not None else ConfigType.UNKNOWN,
        "documentation": (entry.documentation if entry is not None else None) if docs else None,
    }


def _broker_configs(ctx: RequestContext, keys: Any, synonyms: bool, docs: bool) -> list[dict[str, Any]]:
    """Every schema key with a value, then every other key given at start (Kafka lists a broker's
    originals too: listeners, advertised.listeners and each --override key, STATIC_BROKER_CONFIG)."""
    config = ctx.broker.config
    out = []
    for key in BROKER_SCHEMA:
        if keys is not None and key not in keys:
            continue
        value, source = config.lookup(key)
        if value == "":
            continue
        out.append(_broker_entry(ctx, key, value, source, synonyms, docs))
    for key, value in config.overrides.items():
        if key in BROKER_SCHEMA or (keys is not None and key not in keys):
            continue
        out.append(_broker_entry(ctx, key, value, ConfigSource.STATIC_BROKER_CONFIG, synonyms, docs))
    return out


def _cluster_default_configs(ctx: RequestContext, keys: Any, synonyms: bool, docs: bool) -> list[dict[str, Any]]:
    """The "" broker resource: only the cluster-wide dynamic defaults set (Kafka's perBrokerConfig=false)."""
    return [_broker_entry(ctx, key, value, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG, synonyms, docs)
            for key, value in ctx.broker.config.dynamic_default.items() if keys is None or key in keys]


def handle_describe_configs(request: Any, ctx: RequestContext) -> Any:
    synonyms = bool(field(request, "include_synonyms", False))
    docs = bool(field(request, "include_documentation", False))
    results = []
    # A resource named again with the same keys gets INVALID_REQUEST and no configs (stricter than Kafka,
    # which repeats the whole answer: ~12 request bytes asked for ~40 configs each time, an amplification
    # bounded only by the request size). One result per resource is kept, so positions still match.
    seen: set[tuple[int, str, frozenset[str] | None]] = set()
    for r in request.resources:
        keys = set(r.configuration_keys) if r.configuration_keys is not None else None
        identity = (r.resource_type, r.resource_name, None if keys is None else frozenset(keys))
        if identity in seen:
            results.append({"error_code": ErrorCode.invalid_request, "error_message": "Duplicate resource.",
                            "resource_type": r.resource_type, "resource_name": r.resource_name, "configs": ()})
            continue
        seen.add(identity)
        # Kafka answers a described resource with error_message "" (not null).
        result: dict[str, Any] = {"error_code": ErrorCode.none, "error_message": "",
                                  "resource_type": r.resource_type, "resource_name": r.resource_name,
                                  "configs": ()}
        if r.resource_type == TOPIC:
            if r.resource_name not in ctx.broker.image.topics_by_name:
                result.update(error_code=ErrorCode.unknown_topic_or_partition,
                              error_message=f"Topic '{r.resource_name}' does not exist.")
            else:
                result["configs"] = _topic_configs(ctx, r.resource_name, keys, synonyms, docs)
        elif r.resource_type == BROKER:
            if r.resource_name not in ("", str(ctx.broker.node_id)):
                result.update(error_code=ErrorCode.invalid_request,
                              error_message=f"Unexpected broker id, expected {ctx.broker.node_id} or empty "
                                            f"string, but received {r.resource_name}")
            elif r.resource_name == "":
                result["configs"] = _cluster_default_configs(ctx, keys, synonyms, docs)
            else:
                result["configs"] = _broker_configs(ctx, keys, synonyms, docs)
        else:
            result.update(error_code=ErrorCode.invalid_request,
                          error_message=f"Unsupported resource type {r.resource_type}")
        results.append(result)
    return build(response_class(32, ctx.version), {"throttle_time": 0, "results": results})
