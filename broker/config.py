"""Broker and topic configuration under Kafka's names, with Kafka 4.1's defaults.

`BrokerConfig` reads a Kafka `server.properties`; `TOPIC_CONFIGS` lists every topic config Samsa
understands, the broker key that supplies its default, and its type, so DescribeConfigs can report
value, source and type exactly as Kafka does.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from enum import IntEnum
from pathlib import Path

from samsa.storage.config import LogConfig

LONG_MAX = 9223372036854775807


class ConfigType(IntEnum):
    """DescribeConfigs config_type (KIP-336)."""

    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


class ConfigSource(IntEnum):
    """DescribeConfigs config_source."""

    UNKNOWN = 0
    TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5


@dataclass(frozen=True, slots=True)
class ConfigDef:
    name: str
    type: ConfigType
    default: str
    broker_key: str | None = None  # the broker config that supplies the topic default
    valid: tuple[str, ...] = ()  # allowed values for enumerations (lower-case compare)
    minimum: int | None = None
    documentation: str = ""


# Topic configs (Kafka's LogConfig / TopicConfig), with the broker key that supplies each default.
TOPIC_CONFIGS: Mapping[str, ConfigDef] = {
    d.name: d
    for d in (
        ConfigDef("cleanup.policy", ConfigType.LIST, "delete", "log.cleanup.policy", ("delete", "compact")),
        ConfigDef("compression.gzip.level", ConfigType.INT, "-1", "compression.gzip.level", minimum=-1),
        ConfigDef("compression.lz4.level", ConfigType.INT, "9", "compression.lz4.level", minimum=1),
        ConfigDef("compression.zstd.level", ConfigType.INT, "3", "compression.zstd.level", minimum=-131072),
        ConfigDef("compression.type", ConfigType.STRING, "producer", "compression.type",
                  ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")),
        ConfigDef("delete.retention.ms", ConfigType.LONG, "86400000", "log.cleaner.delete.retention.ms", minimum=0),
        ConfigDef("file.delete.delay.ms", ConfigType.LONG, "60000", "log.segment.delete.delay.ms", minimum=0),
        ConfigDef("follower.replication.throttled.replicas", ConfigType.LIST, ""),
        ConfigDef("flush.messages", ConfigType.LONG, str(LONG_MAX), "log.flush.interval.messages", minimum=1),
        ConfigDef("flush.ms", ConfigType.LONG, str(LONG_MAX), "log.flush.interval.ms", minimum=0),
        ConfigDef("index.interval.bytes", ConfigType.INT, "4096", "log.index.interval.bytes", minimum=0),
        ConfigDef("leader.replication.throttled.replicas", ConfigType.LIST, ""),
        ConfigDef("max.compaction.lag.ms", ConfigType.LONG, str(LONG_MAX), "log.cleaner.max.compaction.lag.ms",
                  minimum=1),
        ConfigDef("max.message.bytes", ConfigType.INT, "1048588", "message.max.bytes", minimum=0),
        ConfigDef("message.timestamp.after.max.ms", ConfigType.LONG, "3600000",
                  "log.message.timestamp.after.max.ms", minimum=0),
        ConfigDef("message.timestamp.before.max.ms", ConfigType.LONG, str(LONG_MAX),
                  "log.message.timestamp.before.max.ms", minimum=0),
        ConfigDef("message.timestamp.type", ConfigType.STRING, "CreateTime", "log.message.timestamp.type",
                  ("createtime", "logappendtime")),
        ConfigDef("min.cleanable.dirty.ratio", ConfigType.DOUBLE, "0.5", "log.cleaner.min.cleanable.ratio"),
        ConfigDef("min.compaction.lag.ms", ConfigType.LONG, "0", "log.cleaner.min.compaction.lag.ms", minimum=0),
        ConfigDef("min.insync.replicas", ConfigType.INT, "1", "min.insync.replicas", minimum=1),
        ConfigDef("preallocate", ConfigType.BOOLEAN, "false", "log.preallocate", ("true", "false")),
        ConfigDef("retention.bytes", ConfigType.LONG, "-1", "log.retention.bytes"),
        ConfigDef("retention.ms", ConfigType.LONG, "604800000", "log.retention.ms", minimum=-1),
        ConfigDef("segment.bytes", ConfigType.INT, "1073741824", "log.segment.bytes", minimum=14),
        ConfigDef("segment.index.bytes", ConfigType.INT, "10485760", "log.index.size.max.bytes", minimum=4),
        ConfigDef("segment.jitter.ms", ConfigType.LONG, "0", "log.roll.jitter.ms", minimum=0),
        ConfigDef("segment.ms", ConfigType.LONG, "604800000", "log.roll.ms", minimum=1),
        ConfigDef("unclean.leader.election.enable", ConfigType.BOOLEAN, "false",
                  "unclean.leader.election.enable", ("true", "false")),
    )
}

# Broker configs Samsa reads. Values are strings as in server.properties.
BROKER_DEFAULTS: Mapping[str, tuple[ConfigType, str]] = {
    "node.id": (ConfigType.INT, "1"),
    "broker.id": (ConfigType.INT, "1"),
    "num.partitions": (ConfigType.INT, "1"),
    "default.replication.factor": (ConfigType.INT, "1"),
    "auto.create.topics.enable": (ConfigType.BOOLEAN, "true"),
    "delete.topic.enable": (ConfigType.BOOLEAN, "true"),
    "message.max.bytes": (ConfigType.INT, "1048588"),
    "socket.request.max.bytes": (ConfigType.INT, "104857600"),
    "log.dirs": (ConfigType.STRING, "./samsa-data"),
    "log.retention.hours": (ConfigType.INT, "168"),
    "log.retention.minutes": (ConfigType.INT, ""),
    "log.retention.ms": (ConfigType.LONG, ""),
    "log.retention.bytes": (ConfigType.LONG, "-1"),
    "log.retention.check.interval.ms": (ConfigType.LONG, "300000"),
    "log.segment.bytes": (ConfigType.INT, "1073741824"),
    "log.roll.hours": (ConfigType.INT, "168"),
    "log.roll.ms": (ConfigType.LONG, ""),
    "log.roll.jitter.ms": (ConfigType.LONG, ""),
    "log.roll.jitter.hours": (ConfigType.INT, "0"),
    "log.index.interval.bytes": (ConfigType.INT, "4096"),
    "log.index.size.max.bytes": (ConfigType.INT, "10485760"),
    "log.flush.interval.messages": (ConfigType.LONG, str(LONG_MAX)),
    "log.flush.interval.ms": (ConfigType.LONG, ""),
    "log.flush.scheduler.interval.ms": (ConfigType.LONG, str(LONG_MAX)),
    "log.message.timestamp.type": (ConfigType.STRING, "CreateTime"),
    "log.message.timestamp.after.max.ms": (ConfigType.LONG, "3600000"),
    "log.message.timestamp.before.max.ms": (ConfigType.LONG, str(LONG_MAX)),
    "log.cleanup.policy": (ConfigType.LIST, "delete"),
    "log.cleaner.delete.retention.ms": (ConfigType.LONG, "86400000"),
    "log.cleaner.max.compaction.lag.ms": (ConfigType.LONG, str(LONG_MAX)),
    "log.cleaner.min.compaction.lag.ms": (ConfigType.LONG, "0"),
    "log.cleaner.min.cleanable.ratio": (ConfigType.DOUBLE, "0.5"),
    "log.segment.delete.delay.ms": (ConfigType.LONG, "60000"),
    "log.preallocate": (ConfigType.BOOLEAN, "false"),
    "compression.type": (ConfigType.STRING, "producer"),
    "compression.gzip.level": (ConfigType.INT, "-1"),
    "compression.lz4.level": (ConfigType.INT, "9"),
    "compression.zstd.level": (ConfigType.INT, "3"),
    "min.insync.replicas": (ConfigType.INT, "1"),
    "unclean.leader.election.enable": (ConfigType.BOOLEAN, "false"),
    "offsets.topic.num.partitions": (ConfigType.INT, "50"),
    "offsets.topic.replication.factor": (ConfigType.SHORT, "3"),
    "offsets.retention.minutes": (ConfigType.INT, "10080"),
    "group.initial.rebalance.delay.ms": (ConfigType.INT, "3000"),
    "group.min.session.timeout.ms": (ConfigType.INT, "6000"),
    "group.max.session.timeout.ms": (ConfigType.INT, "1800000"),
    "transaction.state.log.num.partitions": (ConfigType.INT, "50"),
    "queued.max.requests": (ConfigType.INT, "500"),
    "samsa.max.open.files": (ConfigType.INT, "1000"),
    "samsa.min.free.disk.bytes": (ConfigType.LONG, "104857600"),
    "samsa.max.decompressed.batch.bytes": (ConfigType.INT, "67108864"),
    "producer.id.expiration.ms": (ConfigType.INT, "86400000"),
    "producer.id.expiration.check.interval.ms": (ConfigType.INT, "600000"),
    "transactional.id.expiration.ms": (ConfigType.INT, "604800000"),
    "transaction.max.timeout.ms": (ConfigType.INT, "900000"),
    "transaction.state.log.replication.factor": (ConfigType.SHORT, "3"),
    "group.max.size": (ConfigType.INT, "2147483647"),
    "offset.metadata.max.bytes": (ConfigType.INT, "4096"),
    "offsets.retention.check.interval.ms": (ConfigType.LONG, "600000"),
    "offsets.commit.timeout.ms": (ConfigType.INT, "5000"),
    # KRaft: the metadata quorum and broker liveness (Kafka's names and defaults).
    "process.roles": (ConfigType.LIST, "broker,controller"),
    "controller.quorum.voters": (ConfigType.LIST, ""),
    "controller.quorum.election.timeout.ms": (ConfigType.INT, "1000"),
    "controller.quorum.fetch.timeout.ms": (ConfigType.INT, "2000"),
    "broker.session.timeout.ms": (ConfigType.INT, "9000"),
    "broker.heartbeat.interval.ms": (ConfigType.INT, "2000"),
    "replica.lag.time.max.ms": (ConfigType.LONG, "30000"),
    # Entries between metadata snapshots (Kafka counts bytes: metadata.log.max.record.bytes.between.snapshots).
    "samsa.metadata.snapshot.interval.entries": (ConfigType.INT, "10000"),
    # The active controller moves leadership back to preferred replicas (broker.reassignment).
    "auto.leader.rebalance.enable": (ConfigType.BOOLEAN, "true"),
    "leader.imbalance.check.interval.seconds": (ConfigType.LONG, "300"),
    "leader.imbalance.per.broker.percentage": (ConfigType.INT, "10"),
    # connection and memory bounds (wt/membounds)
    "fetch.max.bytes": (ConfigType.INT, "57671680"),
    "replica.fetch.max.bytes": (ConfigType.INT, "1048576"),
    "replica.fetch.response.max.bytes": (ConfigType.INT, "10485760"),
    "queued.max.request.bytes": (ConfigType.LONG, "-1"),
    "max.connections": (ConfigType.INT, "2147483647"),
    "max.connections.per.ip": (ConfigType.INT, "2147483647"),
    "max.connections.per.ip.overrides": (ConfigType.STRING, ""),
    "max.connection.creation.rate": (ConfigType.INT, "2147483647"),
    "connections.max.idle.ms": (ConfigType.LONG, "600000"),
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


# Broker configs that AlterConfigs / IncrementalAlterConfigs may change at run time (per broker or as
# the cluster-wide default), like Kafka's DynamicLogConfig: the broker keys behind topic configs.
DYNAMIC_BROKER_CONFIGS = frozenset(
    {d.broker_key for d in TOPIC_CONFIGS.values() if d.broker_key is not None}
    | {"log.retention.hours", "log.retention.minutes", "log.roll.hours", "log.roll.jitter.hours"}
)

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
    """Broker configuration: per-broker dynamic > cluster-default dynamic > server.properties > default."""

    overrides: Mapping[str, str] = dataclasses.field(default_factory=dict)
    listen_host: str = "127.0.0.1"
    listen_port: int = 9092
    advertised_host: str = "127.0.0.1"
    advertised_port: int = 9092
    data_dir: Path = Path("samsa-data")
    dynamic_default: Mapping[str, str] = dataclasses.field(default_factory=dict)
    dynamic_node: Mapping[str, str] = dataclasses.field(default_factory=dict)

    def with_dynamic(self, default: Mapping[str, str], node: Mapping[str, str]) -> BrokerConfig:
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
                default = BROKER_DEFAULTS.get(member, (ConfigType.STRING, ""))[1]
                if default:
                    return str(int(default) * factor), ConfigSource.DEFAULT_CONFIG
        if key in BROKER_DEFAULTS:
            return BROKER_DEFAULTS[key][1], ConfigSource.DEFAULT_CONFIG
        raise KeyError(key)

    def get(self, key: str) -> str:
        return self.lookup(key)[0]

    def get_int(self, key: str) -> int:
        return int(self.get(key))

    def get_bool(self, key: str) -> bool:
        return self.get(key).strip().lower() == "true"

    def source(self, key: str) -> ConfigSource:
        return self.lookup(key)[1]

    @property
    def node_id(self) -> int:
        if "node.id" in self.overrides:
            return int(self.overrides["node.id"])
        return int(self.get("broker.id"))

    @property
    def roles(self) -> frozenset[str]:
        return frozenset(r.strip() for r in self.get("process.roles").split(",") if r.strip())

    def quorum_voters(self) -> dict[int, tuple[str, int]]:
        """controller.quorum.voters ("1@host:port,2@host:port"); empty means a one-voter quorum of this
        node (combined mode, like `make run`)."""
        voters: dict[int, tuple[str, int]] = {}
        for item in self.get("controller.quorum.voters").split(","):
            item = item.strip()
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


def validate_broker_config(name: str, value: str | None) -> str | None:
    """None if broker config `name` may be set to `value` at run time, else an error message."""
    if name not in DYNAMIC_BROKER_CONFIGS:
        return f"Cannot update these configs dynamically: Set({name})"
    if value is None:
        return None
    for topic_name, d in TOPIC_CONFIGS.items():
        if d.broker_key == name:
            return validate_topic_config(topic_name, value)
    try:
        int(value)
    except ValueError:
        return f"Invalid value {value} for configuration {name}"
    return None


def validate_topic_config(name: str, value: str | None) -> str | None:
    """None if `value` is acceptable for topic config `name`, else an error message."""
    d = TOPIC_CONFIGS.get(name)
    if d is None:
        return f"Unknown topic config name: {name}"
    if value is None:
        return None
    try:
        if d.type in (ConfigType.INT, ConfigType.LONG, ConfigType.SHORT):
            n = int(value)
            if d.minimum is not None and n < d.minimum:
                return f"Invalid value {value} for configuration {name}: Value must be at least {d.minimum}"
        elif d.type == ConfigType.DOUBLE:
            float(value)
    except ValueError:
        return f"Invalid value {value} for configuration {name}: Not a number of type {d.type.name}"
    if d.valid:
        parts = [p.strip().lower() for p in value.split(",")] if d.type == ConfigType.LIST else [value.lower()]
        for p in parts:
            if p not in d.valid:
                return f"Invalid value {value} for configuration {name}: String must be one of: {', '.join(d.valid)}"
    return None


def effective_topic_config(broker: BrokerConfig, topic_overrides: Mapping[str, str]) -> dict[str, str]:
    return {
        name: topic_overrides[name] if name in topic_overrides else broker.topic_default(name)[0]
        for name in TOPIC_CONFIGS
    }


def log_config_for(broker: BrokerConfig, topic_overrides: Mapping[str, str]) -> LogConfig:
    c = effective_topic_config(broker, topic_overrides)
    return LogConfig(
        segment_bytes=int(c["segment.bytes"]),
        segment_ms=int(c["segment.ms"]),
        segment_index_bytes=int(c["segment.index.bytes"]),
        index_interval_bytes=int(c["index.interval.bytes"]),
        retention_ms=int(c["retention.ms"]),
        retention_bytes=int(c["retention.bytes"]),
        message_timestamp_type=c["message.timestamp.type"],
        flush_messages=int(c["flush.messages"]),
        flush_ms=int(c["flush.ms"]),
        file_delete_delay_ms=int(c["file.delete.delay.ms"]),
        cleanup_policy=c["cleanup.policy"],
        min_free_disk_bytes=int(broker.get("samsa.min.free.disk.bytes")),
    )
