"""Broker and topic configuration under Kafka's names, with Kafka 4.1's defaults, typed and parsed once.

`BROKER_DEFAULTS` is the broker half of the schema (the topic half, `TOPIC_CONFIGS`, and the types,
parsing and validators are in `config_schema`); `BrokerConfig` holds what a broker runs with, as strings
and as a parsed, typed view built once (at start and on each dynamic change); `check_static_config`
validates a `server.properties` / `--override` set before the broker listens.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from samsa.broker.config_schema import (
    AUTHORIZER_KEYS,
    CONSUMER_GROUP_KEYS,
    LONG_MAX,
    SECURITY_BROKER_KEYS,
    TOPIC_CONFIGS,
    ConfigDef,
    ConfigError,
    ConfigSource,
    ConfigType,
    ConfigValue,
    Endpoints,
    HostPort,
    QuorumVoters,
    Validator,
    at_least,
    between,
    check_topic_configs,
    check_value,
    closest,
    consumer_assignment_interval_errors,
    expected,
    listener_base_key,
    one_of,
)
from samsa.storage.config import LogConfig

__all__ = [
    "BROKER_DEFAULTS", "BROKER_SCHEMA", "DYNAMIC_BROKER_CONFIGS", "LONG_MAX", "TOPIC_CONFIGS", "BrokerConfig",
    "BrokerKey", "ConfigDef", "ConfigSource", "ConfigType", "K", "check_static_config", "check_topic_configs",
    "effective_topic_config", "log_config_for", "parse_topic_config", "validate_broker_config", "validate_topic_config",
]

logger = logging.getLogger("samsa.config")


class BrokerKey(NamedTuple):
    """One broker config: type, default ("" = none, Kafka's null), one documentation line, validator
    (beyond the type), dynamic (AlterConfigs may change it) and implemented (Samsa honours it)."""

    type: ConfigType
    default: str
    documentation: str = ""
    validator: Validator | None = None
    dynamic: bool = False
    implemented: bool = True


def K(ctype: ConfigType, default: str, documentation: str, validator: Validator | None = None, *,
      dynamic: bool = False, implemented: bool = True) -> BrokerKey:
    return BrokerKey(ctype, default, documentation, validator, dynamic, implemented)


BOOLEAN, STRING, INT, SHORT, LONG, DOUBLE, LIST = (
    ConfigType.BOOLEAN, ConfigType.STRING, ConfigType.INT, ConfigType.SHORT, ConfigType.LONG, ConfigType.DOUBLE,
    ConfigType.LIST)

# Broker configs, Kafka's name -> K(type, default, doc, validator, dynamic=..., implemented=...).
# The short form `"name": (ConfigType.X, "default"),` is accepted too (type-checked only, static,
# implemented; its doc line goes in BROKER_DOCS). Broker keys that supply a topic config's default
# (TOPIC_CONFIGS[...].broker_key) take that topic config's validator and are dynamic, as Kafka's.
BROKER_DEFAULTS: Mapping[str, BrokerKey | tuple[ConfigType, str]] = {
    "node.id": K(INT, "1", "this node's id in the cluster", at_least(0)),
    "broker.id": K(INT, "1", "the pre-KRaft name of node.id", at_least(0)),
    "listeners": K(STRING, "PLAINTEXT://:9092", "NAME://host:port this broker listens on (the first is served)",
                   Endpoints()),
    "advertised.listeners": K(STRING, "", "NAME://host:port clients are told to connect to", Endpoints()),
    "log.dirs": K(STRING, "./samsa-data", "the data directory (the first of the list is used)"),
    "log.dir": K(STRING, "/tmp/kafka-logs", "the data directory when log.dirs is not set"),
    "num.partitions": K(INT, "1", "partitions of a topic created without a count", at_least(1)),
    "default.replication.factor": K(INT, "1", "replication factor of a topic created without one", at_least(1)),
    "auto.create.topics.enable": K(BOOLEAN, "true", "Metadata may create a topic it is asked about"),
    "delete.topic.enable": K(BOOLEAN, "true", "DeleteTopics is allowed"),
    "message.max.bytes": K(INT, "1048588", "the largest record batch a topic accepts by default"),
    "socket.request.max.bytes": K(INT, "104857600", "the largest request frame", at_least(1)),
    "log.retention.hours": K(INT, "168", "retention.ms's default in hours", dynamic=True),
    "log.retention.minutes": K(INT, "", "retention.ms's default in minutes (over hours)", dynamic=True),
    "log.retention.ms": K(LONG, "", "retention.ms's default (over minutes and hours)"),
    "log.retention.bytes": K(LONG, "-1", "retention.bytes's default"),
    "log.retention.check.interval.ms": K(LONG, "300000", "how often retention runs", at_least(1)),
    "log.segment.bytes": K(INT, "1073741824", "segment.bytes's default"),
    "log.roll.hours": K(INT, "168", "segment.ms's default in hours", at_least(1), dynamic=True),
    "log.roll.ms": K(LONG, "", "segment.ms's default (over hours)"),
    "log.roll.jitter.ms": K(LONG, "", "segment.jitter.ms's default", implemented=False),
    "log.roll.jitter.hours": K(INT, "0", "segment.jitter.ms's default in hours", at_least(0), dynamic=True,
                               implemented=False),
    "log.index.interval.bytes": K(INT, "4096", "index.interval.bytes's default"),
    "log.index.size.max.bytes": K(INT, "10485760", "segment.index.bytes's default"),
    "log.flush.interval.messages": K(LONG, str(LONG_MAX), "flush.messages's default"),
    "log.flush.interval.ms": K(LONG, "", "flush.ms's default (else log.flush.scheduler.interval.ms)"),
    "log.flush.scheduler.interval.ms": K(LONG, str(LONG_MAX), "flush.ms's default when log.flush.interval.ms is unset"),
    "log.message.timestamp.type": K(STRING, "CreateTime", "message.timestamp.type's default"),
    "log.message.timestamp.after.max.ms": K(LONG, "3600000", "message.timestamp.after.max.ms's default"),
    "log.message.timestamp.before.max.ms": K(LONG, str(LONG_MAX), "message.timestamp.before.max.ms's default"),
    "log.cleanup.policy": K(LIST, "delete", "cleanup.policy's default"),
    "log.cleaner.delete.retention.ms": K(LONG, "86400000", "delete.retention.ms's default"),
    "log.cleaner.max.compaction.lag.ms": K(LONG, str(LONG_MAX), "max.compaction.lag.ms's default"),
    "log.cleaner.min.compaction.lag.ms": K(LONG, "0", "min.compaction.lag.ms's default"),
    "log.cleaner.min.cleanable.ratio": K(DOUBLE, "0.5", "min.cleanable.dirty.ratio's default"),
    # the log cleaner (broker/log_cleaner.py): dynamic as Kafka's LogCleaner.ReconfigurableConfigs (the next
    # cleaning reads them; a change of threads starts or retires cleaner tasks); log.cleaner.enable is static.
    # The four topic defaults above are dynamic through their topic configs (_entry), as in DynamicLogConfig.
    "log.cleaner.enable": K(BOOLEAN, "true", "compacted topics are cleaned"),
    "log.cleaner.threads": K(INT, "1", "cleanings run at once", at_least(0), dynamic=True),
    "log.cleaner.dedupe.buffer.size": K(LONG, "134217728", "offset map bytes, shared by the cleaner threads",
                                        at_least(0), dynamic=True),
    "log.cleaner.io.buffer.load.factor": K(DOUBLE, "0.9", "how full an offset map may get", between(0.01, 1),
                                           dynamic=True),
    "log.cleaner.io.buffer.size": K(INT, "524288", "the cleaners' read and write buffers, shared by the threads",
                                    at_least(0), dynamic=True),
    "log.cleaner.io.max.bytes.per.second": K(DOUBLE, "1.7976931348623157E308",
                                             "the cleaners' read + write rate (all threads)", dynamic=True),
    "log.cleaner.backoff.ms": K(LONG, "15000", "sleep when no log needs cleaning", at_least(0), dynamic=True),
    "log.segment.delete.delay.ms": K(LONG, "60000", "file.delete.delay.ms's default"),
    "log.preallocate": K(BOOLEAN, "false", "preallocate's default", implemented=False),
    "compression.type": K(STRING, "producer", "compression.type's default"),
    "compression.gzip.level": K(INT, "-1", "compression.gzip.level's default"),
    "compression.lz4.level": K(INT, "9", "compression.lz4.level's default", implemented=False),
    "compression.zstd.level": K(INT, "3", "compression.zstd.level's default"),
    "min.insync.replicas": K(INT, "1", "min.insync.replicas's default"),
    "unclean.leader.election.enable": K(BOOLEAN, "false", "unclean.leader.election.enable's default"),
    "offsets.topic.num.partitions": K(INT, "50", "partitions of __consumer_offsets", at_least(1)),
    "offsets.topic.replication.factor": K(SHORT, "3", "replication factor of __consumer_offsets", at_least(1)),
    # segment.bytes of the compacted internal topics when they are created (Kafka's defaults, 100 MiB)
    "offsets.topic.segment.bytes": K(INT, "104857600", "segment.bytes of __consumer_offsets", at_least(1)),
    "transaction.state.log.segment.bytes": K(INT, "104857600", "segment.bytes of __transaction_state",
                                             at_least(1)),
    "offsets.retention.minutes": K(INT, "10080", "how long an empty group's offsets are kept", at_least(1)),
    "group.initial.rebalance.delay.ms": K(INT, "3000", "how long a new group waits for more members to join"),
    "group.min.session.timeout.ms": K(INT, "6000", "the shortest session timeout a member may ask for"),
    "group.max.session.timeout.ms": K(INT, "1800000", "the longest session timeout a member may ask for"),
    "transaction.state.log.num.partitions": K(INT, "50", "partitions of __transaction_state", at_least(1)),
    "queued.max.requests": K(INT, "500", "requests read but not yet answered, broker-wide, before reading pauses",
                             at_least(1)),
    "samsa.max.open.files": K(INT, "1000", "segment files kept open at once (Samsa)", at_least(1)),
    "samsa.min.free.disk.bytes": K(LONG, "104857600", "appends are refused below this free disk space (Samsa)",
                                   at_least(0)),
    "samsa.max.decompressed.batch.bytes": K(INT, "67108864", "the largest batch decompressed for validation (Samsa)",
                                            at_least(1)),
    "samsa.offset.commit.past.log.end.enable": K(
        BOOLEAN, "false", "accept offset commits past a partition's log end, as Kafka does (Samsa refuses them "
        "unless they are an administrative reset)", dynamic=True),
    "producer.id.expiration.ms": K(INT, "86400000", "how long an idle producer id's state is kept", at_least(1)),
    "producer.id.expiration.check.interval.ms": K(INT, "600000", "how often idle producer ids are expired",
                                                  at_least(1)),
    "transactional.id.expiration.ms": K(INT, "604800000", "how long an idle transactional id is kept", at_least(1)),
    "transaction.max.timeout.ms": K(INT, "900000", "the longest transaction timeout a producer may ask for",
                                    at_least(1)),
    "transaction.state.log.replication.factor": K(SHORT, "3", "replication factor of __transaction_state",
                                                  at_least(1)),
    # Kafka's default is 10 s; Samsa looks for timed-out transactions every second.
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": K(
        INT, "1000", "how often timed-out transactions are aborted", at_least(1)),
    "transaction.remove.expired.transaction.cleanup.interval.ms": K(
        INT, "3600000", "how often expired transactional ids are removed", at_least(1)),
    "group.max.size": K(INT, "2147483647", "the most members a group may have", at_least(1)),
    **{name: K(*entry[:4], dynamic=entry[4]) for name, entry in CONSUMER_GROUP_KEYS.items()},  # KIP-848
    "offset.metadata.max.bytes": K(INT, "4096", "the longest metadata string of a committed offset"),
    "offsets.retention.check.interval.ms": K(LONG, "600000", "how often expired offsets are removed", at_least(1)),
    "offsets.commit.timeout.ms": K(INT, "5000", "how long an offset commit waits for replication", at_least(1)),
    # Authorization (broker/security/authorizer.py): authorizer.class.name, super.users, ...
    **{name: K(*entry) for name, entry in AUTHORIZER_KEYS.items()},
    # KRaft: the metadata quorum and broker liveness (Kafka's names and defaults).
    "process.roles": K(LIST, "broker,controller", "broker, controller, or both (combined mode)",
                       one_of("broker", "controller")),
    "controller.quorum.voters": K(LIST, "", "the metadata quorum's voters, id@host:port (empty: this node alone)",
                                  QuorumVoters()),
    "controller.quorum.election.timeout.ms": K(INT, "1000", "how long without a leader before an election"),
    "controller.quorum.fetch.timeout.ms": K(INT, "2000", "how long without a fetch from the leader before an election"),
    "broker.session.timeout.ms": K(INT, "9000", "a broker without a heartbeat this long is fenced"),
    "broker.heartbeat.interval.ms": K(INT, "2000", "how often a broker heartbeats to the controller"),
    "replica.lag.time.max.ms": K(LONG, "30000", "a follower this far behind leaves the ISR"),
    "samsa.controller.listen": K(STRING, "", "HOST:PORT of this node's controller listener (Samsa)", HostPort()),
    "samsa.cluster.id": K(STRING, "", "the cluster id to format the data directory with (Samsa)"),
    # Entries between metadata snapshots (Kafka counts bytes: metadata.log.max.record.bytes.between.snapshots).
    "samsa.metadata.snapshot.interval.entries": K(INT, "10000", "metadata entries between snapshots (Samsa)",
                                                  at_least(1)),
    # The active controller moves leadership back to preferred replicas (broker.reassignment).
    "auto.leader.rebalance.enable": (ConfigType.BOOLEAN, "true"),
    "leader.imbalance.check.interval.seconds": (ConfigType.LONG, "300"),
    "leader.imbalance.per.broker.percentage": (ConfigType.INT, "10"),
    # Observability (broker/observability): the HTTP listener of /metrics and /health/*, off unless set.
    "samsa.metrics.listen": K(STRING, "", "HOST:PORT of the /metrics and /health HTTP listener, off if empty (Samsa)",
                              HostPort()),
    "samsa.metrics.per.partition.enable": K(BOOLEAN, "true",
                                            "export per-partition and per-topic series in /metrics (Samsa)"),
    "samsa.metrics.per.group.enable": K(BOOLEAN, "true", "export per-group, per-partition lag series (Samsa)"),
    # One INFO line per request on logger samsa.request (broker/observability/request_log.py); Kafka's
    # kafka.request.logger, which is off (WARN) unless its log4j level is lowered.
    "samsa.request.log.enable": K(BOOLEAN, "false", "log every request on logger samsa.request (Samsa)",
                                  dynamic=True),
    # Connection and memory bounds (broker/connection_quotas.py, the Fetch handler), Kafka's names and defaults.
    "fetch.max.bytes": K(INT, "57671680", "the most a consumer Fetch response holds, whatever it asks", at_least(1024)),
    "replica.fetch.max.bytes": K(INT, "1048576", "the most a follower asks of one partition per fetch", at_least(0)),
    "replica.fetch.response.max.bytes": K(INT, "10485760", "the most a follower asks of one fetch response",
                                          at_least(0)),
    "queued.max.request.bytes": K(LONG, "-1", "bytes of requests read but not answered; -1: no bound"),
    "max.connections": K(INT, "2147483647", "connections the broker accepts in all", at_least(0)),
    "max.connections.per.ip": K(INT, "2147483647", "connections one address may hold", at_least(0)),
    "max.connections.per.ip.overrides": K(STRING, "", "host:count,... exceptions to max.connections.per.ip"),
    "max.connection.creation.rate": K(INT, "2147483647", "new connections accepted per second", at_least(0)),
    "connections.max.idle.ms": K(LONG, "600000", "an idle connection is closed after this long"),
    # listeners, TLS and SASL (broker/security); their schema sits with config_schema's validators
    **{name: K(*spec) for name, spec in SECURITY_BROKER_KEYS.items()},
    "max.request.partition.size.limit": K(INT, "2000", "the most partitions a DescribeTopicPartitions answer lists",
                                          at_least(1)),
}

# A topic name is at most 249 characters of [a-zA-Z0-9._-] and not "." or "..".
MAX_TOPIC_NAME_LENGTH = 249
_LEGAL_TOPIC_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")


def is_valid_topic_name(name: str | None) -> bool:
    if not name or name in (".", "..") or len(name) > MAX_TOPIC_NAME_LENGTH:
        return False
    return all(c in _LEGAL_TOPIC_CHARS for c in name)


def read_properties(path: Path) -> dict[str, str]:
    """A Java .properties subset: key=value or key: value lines, # and ! comments."""
    result: dict[str, str] = {}
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        for sep_index, ch in enumerate(line):
            if ch in "=:":
                result[line[:sep_index].strip()] = line[sep_index + 1 :].strip()
                break
        else:
            result[line] = ""
    return result


# Doc lines of the entries of BROKER_DEFAULTS declared in the short form (ConfigType, default).
BROKER_DOCS: dict[str, str] = {
    "auto.leader.rebalance.enable": "the active controller moves leadership back to preferred replicas",
    "leader.imbalance.check.interval.seconds": "how often the controller checks the leader balance",
    "leader.imbalance.per.broker.percentage": "the share of non-preferred leaders per broker that triggers a move",
}

_TOPIC_BY_BROKER_KEY = {d.broker_key: d for d in TOPIC_CONFIGS.values() if d.broker_key is not None}


def _entry(name: str, raw: BrokerKey | tuple[ConfigType, str]) -> BrokerKey:
    entry = raw if isinstance(raw, BrokerKey) else BrokerKey(raw[0], raw[1], BROKER_DOCS.get(name, ""))
    topic = _TOPIC_BY_BROKER_KEY.get(name)
    if topic is not None:
        # Kafka's DynamicLogConfig: a topic config's broker default is dynamic and validated as the topic config.
        entry = entry._replace(validator=entry.validator or topic.validator, dynamic=True,
                               implemented=entry.implemented and topic.implemented)
    return entry


# The broker schema, every entry in its full form. A topic config's broker key that BROKER_DEFAULTS does not declare
# only carries that config's default (log.local.retention.*, log.remote.copy.lag.*, max.decompressed.message.bytes).
BROKER_SCHEMA: Mapping[str, BrokerKey] = {name: _entry(name, raw) for name, raw in BROKER_DEFAULTS.items()} | {
    key: _entry(key, K(d.type, d.default, f"{d.name}'s default")) for key, d in _TOPIC_BY_BROKER_KEY.items()
    if key not in BROKER_DEFAULTS}

# Broker configs that AlterConfigs / IncrementalAlterConfigs may change at run time (per broker or as
# the cluster-wide default), like Kafka's DynamicLogConfig: the broker keys behind topic configs.
DYNAMIC_BROKER_CONFIGS = frozenset(name for name, entry in BROKER_SCHEMA.items() if entry.dynamic)

# Kafka broker configs Samsa knows and does not implement: given at start, each gets one WARN line.
KAFKA_UNIMPLEMENTED_KEYS = frozenset({
    "principal.builder.class", "controller.quorum.bootstrap.servers", "controller.quorum.request.timeout.ms",
    "controller.quorum.retry.backoff.ms", "controller.quorum.append.linger.ms", "early.start.listeners",
    "num.network.threads", "num.io.threads", "num.replica.fetchers",
    "num.recovery.threads.per.data.dir", "background.threads", "socket.send.buffer.bytes",
    "socket.receive.buffer.bytes", "socket.listen.backlog.size", "replica.fetch.min.bytes", "replica.fetch.wait.max.ms",
    "replica.fetch.backoff.ms", "replica.socket.timeout.ms", "replica.socket.receive.buffer.bytes",
    "replica.high.watermark.checkpoint.interval.ms", "replica.selector.class", "broker.rack",
    "log.flush.offset.checkpoint.interval.ms", "log.flush.start.offset.checkpoint.interval.ms",
    "log.dir.failure.timeout.ms", "log.initial.task.delay.ms", "log.message.timestamp.difference.max.ms",
    "create.topic.policy.class.name", "alter.config.policy.class.name", "client.quota.callback.class",
    "metric.reporters", "auto.include.jmx.reporter", "metadata.log.dir", "metadata.log.segment.bytes",
    "metadata.log.segment.ms", "metadata.max.retention.bytes", "metadata.max.retention.ms",
    "metadata.log.max.record.bytes.between.snapshots", "metadata.log.max.snapshot.interval.ms",
    "transaction.state.log.min.isr", "transaction.state.log.load.buffer.size",
    "transaction.partition.verification.enable", "offsets.load.buffer.size",
    "offsets.topic.compression.codec", "offsets.commit.required.acks", "group.coordinator.rebalance.protocols",
    "group.coordinator.threads", "unstable.api.versions.enable", "unstable.feature.versions.enable",
    "reserved.broker.max.id", "fetch.purgatory.purge.interval.requests", "producer.purgatory.purge.interval.requests",
    "delete.records.purgatory.purge.interval.requests", "request.timeout.ms", "initial.broker.registration.timeout.ms",
    "broker.heartbeat.interval.ms.max", "controlled.shutdown.enable", "node.id.generation", "num.quota.samples",
    "quota.window.num", "quota.window.size.seconds",
})
KAFKA_UNIMPLEMENTED_PREFIXES = (
    "log.cleaner.", "sasl.", "ssl.", "remote.log.", "share.", "group.share.", "group.consumer.",
    "delegation.token.", "metrics.", "kafka.metrics.", "password.encoder.", "zookeeper.", "transaction.two.phase.",
    "client.telemetry.", "config.providers",
)


def is_unimplemented_kafka_key(name: str) -> bool:
    return name in KAFKA_UNIMPLEMENTED_KEYS or name.startswith(KAFKA_UNIMPLEMENTED_PREFIXES)


# Families where one broker key can be given in several units; the most precise wins (Kafka's rule).
_FAMILIES = {
    "log.retention.ms": (
        ("log.retention.ms", 1), ("log.retention.minutes", 60_000), ("log.retention.hours", 3_600_000)
    ),
    "log.roll.ms": (("log.roll.ms", 1), ("log.roll.hours", 3_600_000)),
    "log.roll.jitter.ms": (("log.roll.jitter.ms", 1), ("log.roll.jitter.hours", 3_600_000)),
    "log.flush.interval.ms": (("log.flush.interval.ms", 1), ("log.flush.scheduler.interval.ms", 1)),
}


@dataclass(frozen=True, slots=True)
class BrokerConfig:
    """Broker configuration: per-broker dynamic > cluster-default dynamic > server.properties > default.

    The strings are kept as given (DescribeConfigs reports them); every schema key's value is also
    parsed once, when the config is built, into a typed view that the typed accessors read.
    """

    overrides: Mapping[str, str] = dataclasses.field(default_factory=dict)
    listen_host: str = "127.0.0.1"
    listen_port: int = 9092
    advertised_host: str = "127.0.0.1"
    advertised_port: int = 9092
    data_dir: Path = Path("samsa-data")
    dynamic_default: Mapping[str, str] = dataclasses.field(default_factory=dict)
    dynamic_node: Mapping[str, str] = dataclasses.field(default_factory=dict)
    _values: Mapping[str, ConfigValue] = dataclasses.field(default_factory=dict, init=False, repr=False,
                                                           compare=False)

    def __post_init__(self) -> None:
        values: dict[str, ConfigValue] = {}
        for name, entry in BROKER_SCHEMA.items():
            try:
                raw, _source = self.lookup(name)
                if raw != "":
                    values[name] = check_value(name, entry.type, None, raw)
            except (KeyError, ValueError):
                continue  # unparsable (refused at start-up by check_static_config): the accessors raise
        object.__setattr__(self, "_values", values)

    def with_dynamic(self, default: Mapping[str, str], node: Mapping[str, str]) -> BrokerConfig:
        if default == self.dynamic_default and node == self.dynamic_node:
            return self  # nothing changed: keep the parsed view
        return dataclasses.replace(self, dynamic_default=dict(default), dynamic_node=dict(node))

    def _layers(self) -> tuple[tuple[Mapping[str, str], ConfigSource], ...]:
        return (
            (self.dynamic_node, ConfigSource.DYNAMIC_BROKER_CONFIG),
            (self.dynamic_default, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
            (self.overrides, ConfigSource.STATIC_BROKER_CONFIG),
        )

    def lookup(self, key: str) -> tuple[str, ConfigSource]:
        """The value of broker config `key` and where it came from."""
        family = _FAMILIES.get(key)
        for layer, source in self._layers():
            if family is None:
                if key in layer:
                    return layer[key], source
                continue
            for member, factor in family:
                if member in layer:
                    return str(int(layer[member]) * factor), source
        if family is not None:
            for member, factor in family:
                default = BROKER_SCHEMA[member].default if member in BROKER_SCHEMA else ""
                if default:
                    return str(int(default) * factor), ConfigSource.DEFAULT_CONFIG
        if key in BROKER_SCHEMA:
            return BROKER_SCHEMA[key].default, ConfigSource.DEFAULT_CONFIG
        raise KeyError(key)

    def get(self, key: str) -> str:
        return self.lookup(key)[0]

    def value(self, key: str) -> ConfigValue:
        """The typed value of schema key `key` (parsed once); KeyError if it has none."""
        return self._values[key]

    def get_int(self, key: str) -> int:
        found = self._values.get(key)
        if type(found) is int:
            return found
        return int(self.get(key))

    get_long = get_int

    def get_bool(self, key: str) -> bool:
        found = self._values.get(key)
        if type(found) is bool:
            return found
        return self.get(key).strip().lower() == "true"

    def get_float(self, key: str) -> float:
        found = self._values.get(key)
        if type(found) is float:
            return found
        return float(self.get(key))

    def get_list(self, key: str) -> tuple[str, ...]:
        found = self._values.get(key)
        if type(found) is tuple:
            return found
        return tuple(item.strip() for item in self.get(key).split(",") if item.strip())

    def source(self, key: str) -> ConfigSource:
        return self.lookup(key)[1]

    @property
    def node_id(self) -> int:
        if "node.id" in self.overrides:
            return self.get_int("node.id")
        return self.get_int("broker.id")

    @property
    def roles(self) -> frozenset[str]:
        return frozenset(self.get_list("process.roles"))

    def quorum_voters(self) -> dict[int, tuple[str, int]]:
        """controller.quorum.voters ("1@host:port,2@host:port"); empty means a one-voter quorum of this
        node (combined mode, like `make run`)."""
        voters: dict[int, tuple[str, int]] = {}
        for item in self.get_list("controller.quorum.voters"):
            if not item:
                continue
            node, _, address = item.partition("@")
            host, _, port = address.rpartition(":")
            voters[int(node)] = (host.strip("[]"), int(port))
        return voters

    def controller_listen(self) -> tuple[str, int] | None:
        """Where this node's controller listener binds: samsa.controller.listen (HOST:PORT), else a voter's
        own address in controller.quorum.voters; None for a single node or a broker-only node."""
        value = self.overrides.get("samsa.controller.listen")
        if not value:
            return self.quorum_voters().get(self.node_id)
        host, _, port = value.rpartition(":")
        return host.strip("[]") or "0.0.0.0", int(port)

    def topic_default(self, name: str) -> tuple[str, ConfigSource]:
        """The broker-level default of topic config `name` and where it came from."""
        d = TOPIC_CONFIGS[name]
        if d.broker_key is not None:
            try:
                return self.lookup(d.broker_key)
            except KeyError:
                pass
        return d.default, ConfigSource.DEFAULT_CONFIG


class StaticConfigCheck(NamedTuple):
    """What `check_static_config` found: refusals (the broker must not start) and warnings."""

    errors: tuple[str, ...]
    warnings: tuple[str, ...]


def check_static_config(given: Mapping[str, str]) -> StaticConfigCheck:
    """Validate the keys given at start (server.properties and --override) against the schema.

    A bad value is an error naming key, value and what is expected; an unknown key, a topic config given
    as a broker key and a Kafka key Samsa does not implement are one warning each.
    """
    errors: list[str] = []
    warnings: list[str] = []
    for name, raw in given.items():
        entry = BROKER_SCHEMA.get(listener_base_key(name) or name)
        if entry is None:
            if is_unimplemented_kafka_key(name):
                warnings.append(f"{name} is a Kafka broker config Samsa does not implement: ignored")
            elif name in TOPIC_CONFIGS:
                hint = TOPIC_CONFIGS[name].broker_key
                warnings.append(f"{name} is a topic config, not a broker config: ignored"
                                + (f" (its broker default is {hint})" if hint else ""))
            else:
                suggestion = closest(name, list(BROKER_SCHEMA))
                warnings.append(f"{name} is not a known broker config: ignored"
                                + (f" (did you mean {suggestion}?)" if suggestion else ""))
            continue
        try:
            check_value(name, entry.type, entry.validator, raw)
        except ConfigError as e:
            errors.append(f"{e} (expected {expected(entry.type, entry.validator)})")
            continue
        if not entry.implemented:
            warnings.append(f"{name} is a Kafka broker config Samsa accepts but does not implement yet")
    errors += consumer_assignment_interval_errors(given)
    return StaticConfigCheck(tuple(errors), tuple(warnings))


def validate_broker_config(name: str, value: str | None) -> str | None:
    """None if broker config `name` may be set to `value` at run time, else an error message."""
    if name not in DYNAMIC_BROKER_CONFIGS:
        return f"Cannot update these configs dynamically: [{name}]"
    if value is None:
        return None
    entry = BROKER_SCHEMA[name]
    try:
        check_value(name, entry.type, entry.validator, value)
    except ConfigError as e:
        return str(e)
    return None


_warned_topic_configs: set[str] = set()


def validate_topic_config(name: str, value: str | None) -> str | None:
    """None if `value` is acceptable for topic config `name` (Kafka's LogConfig validators), else
    INVALID_CONFIG's message, Kafka's. None as a value (a deletion) is acceptable."""
    d = TOPIC_CONFIGS.get(name)
    if d is None:
        return f"Unknown topic config name: {name}"
    if value is None:
        return None
    try:
        check_value(name, d.type, d.validator, value)
    except ConfigError as e:
        return str(e)
    if not d.implemented and name not in _warned_topic_configs:
        _warned_topic_configs.add(name)
        logger.warning("topic config %s is accepted as Kafka does but Samsa does not implement it yet", name)
    return None


def effective_topic_config(broker: BrokerConfig, topic_overrides: Mapping[str, str]) -> dict[str, str]:
    return {
        name: topic_overrides[name] if name in topic_overrides else broker.topic_default(name)[0]
        for name in TOPIC_CONFIGS
    }


def typed_topic_config(broker: BrokerConfig, topic_overrides: Mapping[str, str]) -> dict[str, ConfigValue]:
    """A topic's effective configs, parsed (a value that does not parse falls back to its Kafka default)."""
    return parse_topic_config(effective_topic_config(broker, topic_overrides))


def parse_topic_config(effective: Mapping[str, str]) -> dict[str, ConfigValue]:
    """`effective_topic_config`'s strings, parsed (one that does not parse falls back to its Kafka default)."""
    out: dict[str, ConfigValue] = {}
    for name, raw in effective.items():
        d = TOPIC_CONFIGS[name]
        try:
            out[name] = check_value(name, d.type, None, raw)
        except ConfigError:
            out[name] = check_value(name, d.type, None, d.default)
    return out


def log_config_for(broker: BrokerConfig, topic_overrides: Mapping[str, str]) -> LogConfig:
    c = typed_topic_config(broker, topic_overrides)

    def number(name: str) -> int:
        found = c[name]
        assert isinstance(found, int), (name, found)
        return found

    policy = c["cleanup.policy"]
    assert isinstance(policy, tuple)
    # Kafka's UnifiedLog.deleteOldSegments: retention.ms / retention.bytes delete segments only when
    # cleanup.policy includes delete; a compact-only topic (__consumer_offsets) or an empty policy keeps them.
    deletes = "delete" in policy
    return LogConfig(
        segment_bytes=number("segment.bytes"),
        segment_ms=number("segment.ms"),
        segment_index_bytes=number("segment.index.bytes"),
        index_interval_bytes=number("index.interval.bytes"),
        retention_ms=number("retention.ms") if deletes else -1,
        retention_bytes=number("retention.bytes") if deletes else -1,
        message_timestamp_type=str(c["message.timestamp.type"]),
        flush_messages=number("flush.messages"),
        flush_ms=number("flush.ms"),
        file_delete_delay_ms=number("file.delete.delay.ms"),
        cleanup_policy=",".join(policy),
        min_free_disk_bytes=broker.get_int("samsa.min.free.disk.bytes"),
        delete_retention_ms=number("delete.retention.ms"),
        min_compaction_lag_ms=number("min.compaction.lag.ms"),
        max_compaction_lag_ms=number("max.compaction.lag.ms"),
        min_cleanable_dirty_ratio=float(c["min.cleanable.dirty.ratio"]),  # type: ignore[arg-type]
    )
