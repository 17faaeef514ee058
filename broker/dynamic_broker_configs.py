"""Which broker configs AlterConfigs / IncrementalAlterConfigs may change at run time, as the reference Kafka decides.

Kafka's list (broker.kafka_broker_configs: read-only false in its DescribeConfigs) decides for its own keys;
Samsa's schema for samsa.* keys. A key neither knows is accepted, as Kafka accepts custom configs. Some of
Kafka's dynamic keys are per broker only (refused at the cluster-default level with Kafka's message). Values
are checked against Samsa's validator where Samsa implements the key, else against Kafka's type. Accepted,
not always honoured: a Kafka key Samsa does not implement (num.io.threads, ...) is stored and described.
"""

from __future__ import annotations

from collections.abc import Callable

from samsa.broker.config import BROKER_SCHEMA
from samsa.broker.config_schema import ConfigError, ConfigType, check_value
from samsa.broker.kafka_broker_configs import KAFKA_BROKER_CONFIGS

# Kafka's dynamic broker configs Samsa cannot change at run time (listeners: no new listener while running);
# README "Behaviour that differs", differential KNOWN_DIFFERENCES.
SAMSA_READ_ONLY = frozenset({"listeners"})
# Kafka's DynamicSecurityConfigs (SslConfigs.RECONFIGURABLE_CONFIGS): dynamic only per listener
# (listener.name.<listener>.<key>), refused without the prefix.
PER_LISTENER_SECURITY = frozenset({
    "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password",
    "ssl.truststore.type", "ssl.truststore.location", "ssl.truststore.password", "ssl.keystore.certificate.chain",
    "ssl.keystore.key", "ssl.truststore.certificates"})
# Kafka's DynamicThreadPool: a thread count changes by at most half or double its current value at a time.
THREAD_COUNTS = frozenset({"num.io.threads", "num.replica.fetchers", "num.recovery.threads.per.data.dir",
                           "background.threads"})


def is_dynamic(name: str) -> bool:
    """Whether `name` may change at run time (a key unknown to Kafka and Samsa: yes)."""
    kafka = KAFKA_BROKER_CONFIGS.get(name)
    if kafka is not None:
        return kafka.dynamic and name not in SAMSA_READ_ONLY
    entry = BROKER_SCHEMA.get(name)
    return entry is None or entry.dynamic


def static_config(name: str) -> bool:
    """Kafka's read-only broker configs (and Samsa's own static samsa.* keys): refused as "Cannot update these
    configs dynamically" before any other check, authorization included (Kafka's ConfigAdminManager)."""
    kafka = KAFKA_BROKER_CONFIGS.get(name)
    if kafka is not None:
        return not kafka.dynamic
    entry = BROKER_SCHEMA.get(name)
    return entry is not None and not entry.dynamic


def current_value(name: str, layers: tuple[dict[str, str], ...]) -> str | None:
    """`name`'s value in the first layer holding it (most precedent first), else its default."""
    for layer in layers:
        if name in layer:
            return layer[name]
    entry = BROKER_SCHEMA.get(name)
    if entry is not None and entry.default:
        return entry.default
    kafka = KAFKA_BROKER_CONFIGS.get(name)
    return kafka.default if kafka is not None else None


def check_dynamic_broker_config(name: str, value: str | None, *, cluster_default: bool,
                                current: Callable[[str], str | None] = lambda _name: None) -> str | None:
    """None if `name` may be set to `value` (None: removed) at run time, for one broker or (`cluster_default`)
    as the cluster-wide default; else INVALID_REQUEST's message, Kafka's. `current`: the value the broker
    runs with now (for the thread counts' rule)."""
    kafka = KAFKA_BROKER_CONFIGS.get(name)
    # Kafka's DynamicBrokerConfig.validateConfigs order: not dynamic, security without a listener prefix, per
    # broker only (Samsa's own read-only listeners come last: Kafka would take them).
    if kafka is not None and not kafka.dynamic:
        return f"Cannot update these configs dynamically: [{name}]"
    if name in PER_LISTENER_SECURITY:
        return ("These security configs can be dynamically updated only per-listener using the listener prefix: "
                f"[{name}]")
    if kafka is not None and kafka.per_broker_only and cluster_default:
        return f"Cannot update these configs at default cluster level, broker id must be specified: [{name}]"
    if not is_dynamic(name):
        return f"Cannot update these configs dynamically: [{name}]"
    if value is None:
        return None
    entry = BROKER_SCHEMA.get(name)
    try:
        if entry is not None:
            check_value(name, entry.type, entry.validator, value)
        elif kafka is not None:
            check_value(name, ConfigType(kafka.type), None, value)
    except ConfigError as e:
        return str(e)
    if name in THREAD_COUNTS:
        return _thread_count_problem(name, value, current(name))
    return None


def _thread_count_problem(name: str, value: str, current: str | None) -> str | None:
    try:
        new, old = int(value.strip()), int(current) if current is not None else None
    except ValueError:
        return None
    if old is None or new == old:
        return None
    failed = f"Dynamic thread count update validation failed for {name}={value}"
    if new <= 0:
        reason = f"{failed}, value should be at least 1"
    elif new < old // 2:
        reason = f"{failed}, value should be at least half the current value {old}"
    elif new > old * 2:
        reason = f"{failed}, value should not be greater than double the current value {old}"
    else:
        return None
    return f"Invalid value org.apache.kafka.common.config.ConfigException: {reason} for configuration Invalid " \
           "dynamic configuration"
