"""DescribeConfigs (key 32), v1-v4.

v1 adds include_synonyms and config_source; v3 adds config_type and documentation (KIP-336); v4 is
flexible. Topic configs report each value with its source (topic override, static broker config or
default) and, on request, the synonyms chain Kafka reports. A broker reports every config the reference Kafka lists
(broker.kafka_broker_configs) with Kafka's flags and what it runs with, plus Samsa's samsa.* configs; the ""
broker resource only the cluster-wide dynamic defaults. A GROUP resource (type 32) reports its ten group
configs (broker.group_configs). Messages are Kafka's ("" on success and for an unknown topic).
"""

from __future__ import annotations

from collections.abc import Mapping, Set
from dataclasses import dataclass
from typing import TYPE_CHECKING

from samsa.broker.config import (
    BROKER_SCHEMA,
    MAX_TOPIC_NAME_LENGTH,
    TOPIC_CONFIGS,
    BrokerConfig,
    ConfigSource,
    ConfigType,
    is_valid_topic_name,
)
from samsa.broker.context import ApiSpec, RequestContext
from samsa.broker.dynamic_broker_configs import is_dynamic
from samsa.broker.group_configs import GROUP_CONFIGS, GROUP_RESOURCE, group_default
from samsa.broker.kafka_broker_configs import KAFKA_BROKER_CONFIGS
from samsa.broker.security.acl import AclOperation
from samsa.broker.security.acl_requests import config_resource_error
from samsa.broker.wire import build, field
from samsa.kproto.errors import ErrorCode
from samsa.kproto.messages import response_class

if TYPE_CHECKING:
    from kio.schema.describe_configs import v1, v2, v3, v4
    DescribeConfigsRequest = (v1.DescribeConfigsRequest | v2.DescribeConfigsRequest | v3.DescribeConfigsRequest
                              | v4.DescribeConfigsRequest)
    DescribeConfigsResponse = (v1.DescribeConfigsResponse | v2.DescribeConfigsResponse | v3.DescribeConfigsResponse
                               | v4.DescribeConfigsResponse)

API = ApiSpec(key=32, min_version=1, max_version=4)

TOPIC = 2
BROKER = 4
# Kafka's ConfigResource.Type ids (UNKNOWN 0 aside): a request naming any other type fails as a whole.
KNOWN_RESOURCE_TYPES = frozenset({2, 4, 8, 16, 32})
# Errors.INVALID_REQUEST's own message: what Kafka answers each resource of a request it refuses as a whole.
INVALID_REQUEST_MESSAGE = ("This most likely occurs because of a request being malformed by the client library or "
                           "the message was sent to an incompatible broker. See the broker logs for more details.")


@dataclass(frozen=True, slots=True)
class Synonym:
    """One DescribeConfigsSynonym: a layer that holds the key (Kafka's ConfigEntry.ConfigSynonym)."""

    name: str
    value: str | None
    source: ConfigSource


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    """One DescribeConfigsResourceResult (a config of a resource) before it is built for the version."""

    name: str
    value: str | None
    read_only: bool
    source: ConfigSource
    is_sensitive: bool
    synonyms: tuple[Synonym, ...]
    config_type: ConfigType
    documentation: str | None


@dataclass(frozen=True, slots=True)
class ResourceResult:
    """One resource's answer (a DescribeConfigsResult before it is built for the version)."""

    resource_type: int
    resource_name: str
    error: ErrorCode
    message: str | None
    configs: tuple[ConfigEntry, ...] = ()


def _topic_configs(ctx: RequestContext, name: str, keys: Set[str] | None, synonyms: bool,
                   docs: bool) -> tuple[ConfigEntry, ...]:
    broker_config = ctx.broker.config
    overrides = ctx.broker.image.topic_configs(name)
    out: list[ConfigEntry] = []
    for config_name, d in TOPIC_CONFIGS.items():
        if keys is not None and config_name not in keys:
            continue
        default_value, default_source = broker_config.topic_default(config_name)
        chain: list[Synonym] = []
        if config_name in overrides:
            value, source = overrides[config_name], ConfigSource.TOPIC_CONFIG
            chain.append(Synonym(config_name, value, ConfigSource.TOPIC_CONFIG))
        else:
            value, source = default_value, default_source
        if default_source != ConfigSource.DEFAULT_CONFIG and d.broker_key is not None:
            chain.append(Synonym(d.broker_key, default_value, default_source))
        if d.broker_key is not None and d.broker_key in BROKER_SCHEMA and BROKER_SCHEMA[d.broker_key].default != "":
            # Kafka lists a broker default synonym only where the broker key itself has a default;
            # derived keys (log.retention.ms from log.retention.hours, ...) have none.
            chain.append(Synonym(d.broker_key, d.default, ConfigSource.DEFAULT_CONFIG))
        out.append(ConfigEntry(config_name, value, False, source, False, tuple(chain) if synonyms else (), d.type,
                               d.documentation if docs else None))
    return tuple(out)


def _broker_default(name: str) -> str | None:
    """What the broker runs with when nothing sets `name`: Samsa's default for a key it implements (None for
    a derived key such as log.retention.ms, as Kafka reports it), else the reference Kafka's."""
    entry = BROKER_SCHEMA.get(name)
    if entry is not None and entry.default:
        return entry.default
    kafka = KAFKA_BROKER_CONFIGS.get(name)  # Kafka tells an empty default ("") from none (null)
    return kafka.default if kafka is not None else None


def _broker_value(config: BrokerConfig, name: str) -> tuple[str | None, ConfigSource]:
    """`name`'s raw value and source: per-broker dynamic > cluster-wide dynamic > given at start > default.
    The data directory `samsa serve` was started with is its log.dirs (Kafka's comes from its properties)."""
    for layer, source in _layers(config):
        if name in layer:
            return layer[name], source
    if name == "log.dirs" and "log.dir" not in config.overrides:
        return str(config.data_dir), ConfigSource.STATIC_BROKER_CONFIG
    return _broker_default(name), ConfigSource.DEFAULT_CONFIG


def _layers(config: BrokerConfig) -> tuple[tuple[Mapping[str, str], ConfigSource], ...]:
    return ((config.dynamic_node, ConfigSource.DYNAMIC_BROKER_CONFIG),
            (config.dynamic_default, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
            (config.overrides, ConfigSource.STATIC_BROKER_CONFIG))


def _broker_entry(ctx: RequestContext, name: str, value: str | None, source: ConfigSource, synonyms: bool,
                  docs: bool) -> ConfigEntry:
    entry = BROKER_SCHEMA.get(name)
    kafka = KAFKA_BROKER_CONFIGS.get(name)
    # Kafka's ConfigHelper: a key it has no type for (not in its schema) or a PASSWORD is sensitive, its
    # value withheld. Kafka's keys carry Kafka's type, flags and read-only-ness (Samsa's listeners stay
    # read-only: it cannot add listeners at run time).
    if kafka is not None:
        sensitive, config_type = kafka.sensitive, ConfigType(kafka.type)
    else:
        sensitive = entry is None or entry.type == ConfigType.PASSWORD
        config_type = entry.type if entry is not None else ConfigType.UNKNOWN
    # A custom key (unknown to Kafka and Samsa) is read-only in Kafka's answer, though it may be set.
    read_only = not is_dynamic(name) or (kafka is None and entry is None)
    chain: list[Synonym] = []
    if synonyms:
        # Kafka's synonyms: every layer that holds the key, most precedent first, then its default.
        for layer, layer_source in _layers(ctx.broker.config):
            if name in layer:
                chain.append(Synonym(name, None if sensitive else layer[name], layer_source))
        default = _broker_default(name)
        if default is not None and not sensitive:
            chain.append(Synonym(name, default, ConfigSource.DEFAULT_CONFIG))
    return ConfigEntry(name, None if sensitive else value, read_only, source, sensitive, tuple(chain), config_type,
                       (entry.documentation if entry is not None else None) if docs else None)


def _broker_configs(ctx: RequestContext, keys: Set[str] | None, synonyms: bool,
                    docs: bool) -> tuple[ConfigEntry, ...]:
    """Every config the reference Kafka lists for a broker (broker.kafka_broker_configs) with what this broker runs
    with, then Samsa's own (samsa.*), then any other key given at start or set at run time. Samsa keys that
    Kafka keeps internal (not listed by Kafka) are not listed either."""
    config = ctx.broker.config
    names = dict.fromkeys(KAFKA_BROKER_CONFIGS)
    names.update(dict.fromkeys(k for k in BROKER_SCHEMA if k.startswith("samsa.")))
    for _layer, _source in _layers(config):
        names.update(dict.fromkeys(k for k in _layer if k not in BROKER_SCHEMA or k.startswith("samsa.")))
    out: list[ConfigEntry] = []
    for key in names:
        if keys is not None and key not in keys:
            continue
        value, source = _broker_value(config, key)
        out.append(_broker_entry(ctx, key, value, source, synonyms, docs))
    return tuple(out)


def _cluster_default_configs(ctx: RequestContext, keys: Set[str] | None, synonyms: bool,
                             docs: bool) -> tuple[ConfigEntry, ...]:
    """The "" broker resource: only the cluster-wide dynamic defaults set (Kafka's perBrokerConfig=false)."""
    return tuple(_broker_entry(ctx, key, value, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG, synonyms, docs)
                 for key, value in ctx.broker.config.dynamic_default.items() if keys is None or key in keys)


def handle_describe_configs(request: DescribeConfigsRequest, ctx: RequestContext) -> DescribeConfigsResponse:
    synonyms = request.include_synonyms
    docs = bool(field(request, "include_documentation", False))  # v3+
    results: list[ResourceResult] = []
    # A resource named again with the same keys gets INVALID_REQUEST and no configs (stricter than Kafka,
    # which repeats the whole answer: ~12 request bytes asked for ~40 configs each time, an amplification
    # bounded only by the request size). One result per resource is kept, so positions still match.
    seen: set[tuple[int, str, frozenset[str] | None]] = set()
    if any(r.resource_type not in KNOWN_RESOURCE_TYPES for r in request.resources):
        # Kafka refuses the request before describing anything (its authorization step throws on the type).
        return _response(ctx, [ResourceResult(r.resource_type, r.resource_name, ErrorCode.invalid_request,
                                              INVALID_REQUEST_MESSAGE) for r in request.resources])
    for r in request.resources:
        keys = set(r.configuration_keys) if r.configuration_keys is not None else None
        identity = (r.resource_type, r.resource_name, None if keys is None else frozenset(keys))
        if identity in seen:
            results.append(ResourceResult(r.resource_type, r.resource_name, ErrorCode.invalid_request,
                                          "Duplicate resource."))
            continue
        seen.add(identity)
        denied = config_resource_error(ctx, AclOperation.DESCRIBE_CONFIGS, r.resource_type, r.resource_name)
        if denied is not None:  # ConfigHelper: DESCRIBE_CONFIGS on the cluster (brokers) or the resource
            results.append(ResourceResult(r.resource_type, r.resource_name, *denied))
            continue
        results.append(_describe(ctx, r.resource_type, r.resource_name, keys, synonyms, docs))
    return _response(ctx, results)


def invalid_topic_reason(name: str) -> str | None:
    """Why Kafka's Topic.validate refuses `name` (its detectInvalidTopic), None if it is legal."""
    if not name:
        return "the empty string is not allowed"
    if name in (".", ".."):
        return f"'{name}' is not allowed"
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        return f"the length of '{name}' is longer than the max allowed length {MAX_TOPIC_NAME_LENGTH}"
    if not is_valid_topic_name(name):
        return f"'{name}' contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'"
    return None


def _describe(ctx: RequestContext, resource_type: int, name: str, keys: Set[str] | None, synonyms: bool,
              docs: bool) -> ResourceResult:
    # Kafka's messages (ConfigHelper.describeConfigs): "" for a described resource and for an unknown topic
    # (not null), fixed texts otherwise; the differential scenario describe_configs_messages compares them.
    if resource_type == TOPIC:
        reason = invalid_topic_reason(name)
        if reason is not None:
            return ResourceResult(resource_type, name, ErrorCode.invalid_topic_exception,
                                  f"Topic name is invalid: {reason}")
        if name not in ctx.broker.image.topics_by_name:
            return ResourceResult(resource_type, name, ErrorCode.unknown_topic_or_partition, "")
        return ResourceResult(resource_type, name, ErrorCode.none, "",
                              _topic_configs(ctx, name, keys, synonyms, docs))
    if resource_type == BROKER:
        if name and not _is_java_int(name):
            return ResourceResult(resource_type, name, ErrorCode.invalid_request,
                                  f"Broker id must be an integer, but it is: {name}")
        if name and int(name) != ctx.broker.node_id:
            return ResourceResult(resource_type, name, ErrorCode.invalid_request,
                                  f"Unexpected broker id, expected {ctx.broker.node_id} or empty string, but "
                                  f"received {name}")
        configs = (_cluster_default_configs(ctx, keys, synonyms, docs) if name == ""
                   else _broker_configs(ctx, keys, synonyms, docs))
        return ResourceResult(resource_type, name, ErrorCode.none, "", configs)
    if resource_type == GROUP_RESOURCE:
        if not name:
            return ResourceResult(resource_type, name, ErrorCode.invalid_request, "Group name must not be empty")
        return ResourceResult(resource_type, name, ErrorCode.none, "", _group_configs(ctx, name, keys, synonyms, docs))
    return ResourceResult(resource_type, name, ErrorCode.invalid_request, f"Unsupported resource type {resource_type}")


def _group_configs(ctx: RequestContext, name: str, keys: Set[str] | None, synonyms: bool,
                   docs: bool) -> tuple[ConfigEntry, ...]:
    """A group's configs (broker.group_configs): its own value (GROUP_CONFIG) or the broker's default; the
    synonyms Kafka lists are the group's own value, then the broker config behind the default. An internal
    config (ConfigDef.defineInternal) is listed only when the group sets it, as in Kafka 4.4, whose list is
    the group's own values and the non-internal defaults."""
    own = ctx.broker.image.configs.get((GROUP_RESOURCE, name), {})
    out: list[ConfigEntry] = []
    for config_name, d in GROUP_CONFIGS.items():
        if (keys is not None and config_name not in keys) or (d.internal and config_name not in own):
            continue
        default = group_default(config_name, ctx.broker.config.overrides)
        chain = [Synonym(d.broker_key, default, ConfigSource.DEFAULT_CONFIG)]
        if config_name in own:
            value, source = own[config_name], ConfigSource.GROUP_CONFIG
            chain.insert(0, Synonym(config_name, value, source))
        else:
            value, source = default, ConfigSource.DEFAULT_CONFIG
        out.append(ConfigEntry(config_name, value, False, source, False,
                               tuple(chain) if synonyms else (), d.type,
                               None if not docs else f"the group's {config_name}"))
    return tuple(out)


def _is_java_int(text: str) -> bool:
    """Whether Java's Integer.parseInt reads `text` (an optional sign, ASCII digits, within int32)."""
    digits = text[1:] if text[:1] in "+-" else text
    return digits.isascii() and digits.isdigit() and -(2 ** 31) <= int(text) < 2 ** 31


def _response(ctx: RequestContext, results: list[ResourceResult]) -> DescribeConfigsResponse:
    """The one place the answers become the kio response of the request's version (v1-v2 drop config_type
    and documentation)."""
    cls: type[DescribeConfigsResponse] = response_class(32, ctx.version)
    return build(cls, {"throttle_time": 0, "results": [
        {"error_code": r.error, "error_message": r.message, "resource_type": r.resource_type,
         "resource_name": r.resource_name, "configs": [
             {"name": c.name, "value": c.value, "read_only": c.read_only, "config_source": c.source,
              "is_sensitive": c.is_sensitive, "config_type": c.config_type, "documentation": c.documentation,
              "synonyms": [{"name": y.name, "value": y.value, "source": y.source} for y in c.synonyms]}
             for c in r.configs]}
        for r in results]})
