"""The typed config schema (Kafka's ConfigDef): types, parsing, validators and the topic config table.

Every value is parsed once, by `parse_value`, exactly as Kafka's `ConfigDef.parseType` reads a string
(trimmed; Java integer ranges; LIST split on commas), then checked by the key's validator; a refusal
is a `ConfigError` whose message is Kafka's ("Invalid value X for configuration Y: reason").
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import Protocol

from samsa.broker.security.acl import AUTHORIZER_CLASS_NAMES

LONG_MAX = 9223372036854775807

ConfigValue = bool | int | float | str | tuple[str, ...]


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
    DYNAMIC_BROKER_LOGGER_CONFIG = 6
    CLIENT_METRICS_CONFIG = 7
    GROUP_CONFIG = 8


class ConfigError(ValueError):
    """A value Kafka's ConfigDef refuses; str() is Kafka's ConfigException message."""

    def __init__(self, name: str, value: object, reason: str, *, message: str | None = None) -> None:
        super().__init__(message or f"Invalid value {value} for configuration {name}: {reason}")
        self.name = name
        self.value = value
        self.reason = reason


# --- parsing (ConfigDef.parseType) ------------------------------------------------------------------

_INTEGER = re.compile(r"[+-]?[0-9]+")
_DOUBLE = re.compile(r"[+-]?(NaN|Infinity|([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?[fFdD]?)")
_COMMA = re.compile(r"\s*,\s*")
_INT_BITS = {ConfigType.SHORT: 16, ConfigType.INT: 32, ConfigType.LONG: 64}


def parse_value(name: str, ctype: ConfigType, raw: str) -> ConfigValue:
    """`raw` as Kafka's ConfigDef.parseType reads it for type `ctype`; ConfigError if it cannot."""
    trimmed = raw.strip()
    if ctype == ConfigType.BOOLEAN:
        if trimmed.lower() in ("true", "false"):
            return trimmed.lower() == "true"
        raise ConfigError(name, raw, "Expected value to be either true or false")
    if ctype in _INT_BITS:
        bits = _INT_BITS[ctype]
        if _INTEGER.fullmatch(trimmed) and -(2 ** (bits - 1)) <= int(trimmed) < 2 ** (bits - 1):
            return int(trimmed)
        raise ConfigError(name, raw, f"Not a number of type {ctype.name}")
    if ctype == ConfigType.DOUBLE:
        if _DOUBLE.fullmatch(trimmed):
            return float(trimmed.rstrip("fFdD").replace("Infinity", "inf"))
        raise ConfigError(name, raw, f"Not a number of type {ctype.name}")
    if ctype == ConfigType.LIST:
        return tuple(_COMMA.split(trimmed)) if trimmed else ()
    return trimmed


def _java(value: object) -> str:
    """How Java's toString prints a parsed value in a ConfigException message."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return "[" + ", ".join(value) + "]"
    return str(value)


# --- validators (ConfigDef.Range, ValidString, ValidList, ...) -----------------------------------------


class Validator(Protocol):
    def check(self, name: str, value: ConfigValue) -> None:
        """Raise ConfigError if `value` (already parsed) is not allowed."""

    def describe(self) -> str:
        """What is expected, for a human ("[1,...]", "one of: a, b")."""


def _number(n: float) -> str:
    return str(int(n)) if float(n).is_integer() else str(n)


# The validators are plain slotted classes, not dataclasses: building a dataclass costs ~0.2 ms of the
# broker's start-up each.


class Range:
    """ConfigDef.Range: atLeast(min) or between(min, max)."""

    __slots__ = ("maximum", "minimum")

    def __init__(self, minimum: float | None = None, maximum: float | None = None) -> None:
        self.minimum = minimum
        self.maximum = maximum

    def check(self, name: str, value: ConfigValue) -> None:
        assert isinstance(value, int | float) and not isinstance(value, bool), value
        if self.minimum is not None and value < self.minimum:
            raise ConfigError(name, value, f"Value must be at least {_number(self.minimum)}")
        if self.maximum is not None and value > self.maximum:
            raise ConfigError(name, value, f"Value must be no more than {_number(self.maximum)}")

    def describe(self) -> str:
        low = "..." if self.minimum is None else _number(self.minimum)
        high = "..." if self.maximum is None else _number(self.maximum)
        return f"[{low},...,{high}]" if self.maximum is not None else f"[{low},...]"


def at_least(minimum: float) -> Range:
    return Range(minimum=minimum)


def between(minimum: float, maximum: float) -> Range:
    return Range(minimum, maximum)


class OneOf:
    """ConfigDef.ValidString (case-sensitive, as Kafka's) or, on a LIST, ValidList.in: no empty item (as "compact,"
    gives: Kafka 4.4's own message), every item one of. Duplicates pass, as in Kafka 4.4.0."""

    __slots__ = ("allowed",)

    def __init__(self, allowed: tuple[str, ...]) -> None:
        self.allowed = allowed

    def check(self, name: str, value: ConfigValue) -> None:
        for item in value if isinstance(value, tuple) else (str(value),):
            if item == "" and isinstance(value, tuple):
                raise ConfigError(name, item, "", message=f"Configuration '{name}' values must not be empty.")
            if item not in self.allowed:
                raise ConfigError(name, item, f"String must be one of: {', '.join(self.allowed)}")

    def describe(self) -> str:
        return f"one of: {', '.join(self.allowed)}"


def one_of(*allowed: str) -> OneOf:
    return OneOf(allowed)


class GzipLevel:
    """GzipCompression.LevelValidator: 1..9, or -1 for zlib's default."""

    __slots__ = ()

    def check(self, name: str, value: ConfigValue) -> None:
        assert isinstance(value, int), value
        if value != -1 and not 1 <= value <= 9:
            raise ConfigError(name, value, "Value must be between 1 and 9 or equal to -1")

    def describe(self) -> str:
        return "[1,...,9] or -1"


_REPLICA = re.compile(r"([0-9]+:[0-9]+)?")


class ThrottledReplicas:
    """Kafka's ThrottledReplicaListValidator: "*" or partitionId:brokerId pairs."""

    __slots__ = ()

    def check(self, name: str, value: ConfigValue) -> None:
        assert isinstance(value, tuple), value
        if "".join(value).strip() == "*" or all(_REPLICA.fullmatch(v.strip()) for v in value):
            return
        raise ConfigError(name, _java(value), f"{name} must be the literal '*' or a list of replicas in the "
                          "following format: [partitionId]:[brokerId],[partitionId]:[brokerId],...")

    def describe(self) -> str:
        return "[partitionId]:[brokerId],[partitionId]:[brokerId],..."


_ENDPOINT = re.compile(r"([A-Za-z0-9_]+)://(\[[0-9a-fA-F:.]*\]|[^:\[\]]*):([0-9]+)")


class Endpoints:
    """listeners / advertised.listeners (STRING, as Kafka's): comma-separated NAME://host:port items."""

    __slots__ = ()

    def check(self, name: str, value: ConfigValue) -> None:
        for item in _COMMA.split(str(value)) if str(value) else ():
            found = _ENDPOINT.fullmatch(item)
            if found is None or int(found.group(3)) > 65535:
                raise ConfigError(name, value, f"Unable to parse {item} to a broker endpoint")

    def describe(self) -> str:
        return "a list of NAME://host:port"


class QuorumVoters:
    """controller.quorum.voters: id@host:port items."""

    __slots__ = ()

    def check(self, name: str, value: ConfigValue) -> None:
        assert isinstance(value, tuple), value
        for item in value:
            node, sep, address = item.partition("@")
            host, colon, port = address.rpartition(":")
            if not (sep and colon and host and _INTEGER.fullmatch(node) and port.isdigit()):
                raise ConfigError(name, _java(value), f"Failed to parse {item}: expected id@host:port")

    def describe(self) -> str:
        return "a list of id@host:port"


class HostPort:
    """A Samsa HOST:PORT (samsa.controller.listen)."""

    __slots__ = ()

    def check(self, name: str, value: ConfigValue) -> None:
        _host, colon, port = str(value).rpartition(":")
        if not colon or not port.isdigit() or int(port) > 65535:
            raise ConfigError(name, value, "Expected HOST:PORT")

    def describe(self) -> str:
        return "HOST:PORT"


def expected(ctype: ConfigType, validator: Validator | None) -> str:
    """What a key expects, in words, for start-up error messages."""
    if ctype == ConfigType.BOOLEAN:
        return "true or false"
    if ctype in (ConfigType.INT, ConfigType.SHORT, ConfigType.LONG, ConfigType.DOUBLE):
        article = "an" if ctype == ConfigType.INT else "a"
        return f"{article} {ctype.name}" + (f" in {validator.describe()}" if validator is not None else "")
    if validator is not None:
        return validator.describe()
    return "a comma-separated list" if ctype == ConfigType.LIST else "a string"


def check_value(name: str, ctype: ConfigType, validator: Validator | None, raw: str) -> ConfigValue:
    """Parse then validate: the typed value, or ConfigError with Kafka's message."""
    value = parse_value(name, ctype, raw)
    if validator is not None:
        validator.check(name, value)
    return value


# --- the topic configs (Kafka's LogConfig / TopicConfig) -------------------------------------------


@dataclass(frozen=True, slots=True)
class ConfigDef:
    """A topic config: its type, Kafka's default, the broker key that supplies the cluster default,
    its validator, one documentation line, and whether Samsa honours it yet."""

    name: str
    type: ConfigType
    default: str
    broker_key: str | None = None
    validator: Validator | None = None
    documentation: str = ""
    implemented: bool = True


def _t(name: str, ctype: ConfigType, default: str, broker_key: str | None, validator: Validator | None,
       doc: str, implemented: bool = True) -> ConfigDef:
    return ConfigDef(name, ctype, default, broker_key, validator, doc, implemented)


BOOLEAN, STRING, INT, LONG, DOUBLE, LIST = (
    ConfigType.BOOLEAN, ConfigType.STRING, ConfigType.INT, ConfigType.LONG, ConfigType.DOUBLE, ConfigType.LIST)
COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
SEGMENT_BYTES_MIN = 1048576  # Kafka 4.1: segment.bytes at least 1 MiB (KIP-1030)

TOPIC_CONFIGS: Mapping[str, ConfigDef] = {
    d.name: d
    for d in (
        _t("cleanup.policy", LIST, "delete", "log.cleanup.policy", one_of("compact", "delete"),
           "delete (retention), compact (keep the latest record per key), both, or neither (empty)"),
        # compression.* are honoured on append: storage.validator recompresses a batch whose codec differs.
        _t("compression.gzip.level", INT, "-1", "compression.gzip.level", GzipLevel(),
           "the gzip level when compression.type is gzip"),
        _t("compression.lz4.level", INT, "9", "compression.lz4.level", between(1, 17),
           "the lz4 level when compression.type is lz4 (accepted, not applied: LZ4 is written at its default)",
           implemented=False),
        _t("compression.zstd.level", INT, "3", "compression.zstd.level", between(-131072, 22),
           "the zstd level when compression.type is zstd"),
        _t("compression.type", STRING, "producer", "compression.type", one_of(*COMPRESSION_TYPES),
           "the codec batches are stored with; producer keeps the producer's"),
        _t("delete.retention.ms", LONG, "86400000", "log.cleaner.delete.retention.ms", at_least(0),
           "how long tombstones of a compacted topic are kept"),
        # Kafka 4.4 (KIP-1191): a share group's dead-letter topic may be this one. Samsa has no share groups.
        _t("errors.deadletterqueue.group.enable", BOOLEAN, "false", None, None,
           "let a share group use this topic as its dead-letter queue", implemented=False),
        _t("file.delete.delay.ms", LONG, "60000", "log.segment.delete.delay.ms", at_least(0),
           "how long a deleted segment's files wait before removal"),
        _t("flush.messages", LONG, str(LONG_MAX), "log.flush.interval.messages", at_least(1),
           "fsync the log after this many messages"),
        _t("flush.ms", LONG, str(LONG_MAX), "log.flush.interval.ms", at_least(0),
           "fsync the log after this many milliseconds"),
        _t("follower.replication.throttled.replicas", LIST, "", None, ThrottledReplicas(),
           "replicas whose follower fetches are throttled", implemented=False),
        _t("index.interval.bytes", INT, "4096", "log.index.interval.bytes", at_least(0),
           "bytes between offset index entries"),
        _t("leader.replication.throttled.replicas", LIST, "", None, ThrottledReplicas(),
           "replicas whose leader side of replication is throttled", implemented=False),
        # Tiered storage (KIP-405, KIP-950): listed and validated as Kafka does; Samsa has no remote tier, so
        # remote.storage.enable=true is refused as by a Kafka broker whose remote log storage system is off.
        _t("local.retention.bytes", LONG, "-2", "log.local.retention.bytes", at_least(-2),
           "the local share of retention.bytes with a remote tier (-2: retention.bytes)", implemented=False),
        _t("local.retention.ms", LONG, "-2", "log.local.retention.ms", at_least(-2),
           "the local share of retention.ms with a remote tier (-2: retention.ms)", implemented=False),
        _t("max.compaction.lag.ms", LONG, str(LONG_MAX), "log.cleaner.max.compaction.lag.ms", at_least(1),
           "the longest a record stays ineligible for compaction"),
        _t("max.decompressed.message.bytes", INT, "2147483639", "max.decompressed.message.bytes",
           between(1, 2147483639), "the largest a batch may decompress to (accepted, not enforced)",
           implemented=False),
        _t("max.message.bytes", INT, "1048588", "message.max.bytes", at_least(0),
           "the largest record batch the topic accepts"),
        _t("message.timestamp.after.max.ms", LONG, "3600000", "log.message.timestamp.after.max.ms", at_least(0),
           "how far in the future a CreateTime timestamp may be"),
        _t("message.timestamp.before.max.ms", LONG, str(LONG_MAX), "log.message.timestamp.before.max.ms",
           at_least(0), "how far in the past a CreateTime timestamp may be"),
        _t("message.timestamp.type", STRING, "CreateTime", "log.message.timestamp.type",
           one_of("CreateTime", "LogAppendTime"), "CreateTime (the producer's) or LogAppendTime (the broker's)"),
        _t("min.cleanable.dirty.ratio", DOUBLE, "0.5", "log.cleaner.min.cleanable.ratio", between(0, 1),
           "the dirty share of the log that triggers compaction"),
        _t("min.compaction.lag.ms", LONG, "0", "log.cleaner.min.compaction.lag.ms", at_least(0),
           "the shortest a record stays uncompacted"),
        _t("min.insync.replicas", INT, "1", "min.insync.replicas", at_least(1),
           "the in-sync replicas an acks=all write needs"),
        _t("preallocate", BOOLEAN, "false", "log.preallocate", None, "preallocate segment files", implemented=False),
        _t("remote.copy.lag.bytes", LONG, "-1", "log.remote.copy.lag.bytes", at_least(-1),
           "how far the remote tier's copy may lag, in bytes (Kafka 4.4)", implemented=False),
        _t("remote.copy.lag.ms", LONG, "0", "log.remote.copy.lag.ms", at_least(-1),
           "how far the remote tier's copy may lag, in milliseconds (Kafka 4.4)", implemented=False),
        _t("remote.log.copy.disable", BOOLEAN, "false", None, None,
           "stop copying segments to the remote tier", implemented=False),
        _t("remote.log.delete.on.disable", BOOLEAN, "false", None, None,
           "delete the remote copy when tiered storage is turned off", implemented=False),
        _t("remote.storage.enable", BOOLEAN, "false", None, None,
           "keep segments in a remote tier (refused: Samsa has none)", implemented=False),
        _t("retention.bytes", LONG, "-1", "log.retention.bytes", None,
           "the size a partition may reach before old segments are deleted (-1: no limit)"),
        _t("retention.ms", LONG, "604800000", "log.retention.ms", at_least(-1),
           "how long a segment is kept (-1: forever)"),
        _t("segment.bytes", INT, "1073741824", "log.segment.bytes", at_least(SEGMENT_BYTES_MIN),
           "the size of a segment file"),
        _t("segment.index.bytes", INT, "10485760", "log.index.size.max.bytes", at_least(4),
           "the size of a segment's offset index"),
        _t("segment.jitter.ms", LONG, "0", "log.roll.jitter.ms", at_least(0),
           "a random jitter subtracted from segment.ms", implemented=False),
        _t("segment.ms", LONG, "604800000", "log.roll.ms", at_least(1),
           "roll a new segment after this many milliseconds"),
        _t("unclean.leader.election.enable", BOOLEAN, "false", "unclean.leader.election.enable", None,
           "allow an out-of-sync replica to become leader (data loss)"),
    )
}


# Authorization (broker/security/authorizer.py), Kafka's StandardAuthorizer keys: name -> (type, default, doc,
# validator), static as Kafka's. super.users is Kafka's ;-separated list of principals.
AUTHORIZER_KEYS: Mapping[str, tuple[ConfigType, str, str, Validator | None]] = {
    "authorizer.class.name": (ConfigType.STRING, "", "org.apache.kafka.metadata.authorizer.StandardAuthorizer turns "
                              "ACLs on; empty allows every request", one_of("", *AUTHORIZER_CLASS_NAMES)),
    "super.users": (ConfigType.STRING, "", "principals allowed everything, ;-separated (User:admin;User:broker)",
                    None),
    "allow.everyone.if.no.acl.found": (ConfigType.BOOLEAN, "false", "allow a request on a resource no ACL names",
                                       None),
}


# KIP-848 consumer groups (group.protocol=consumer), Kafka 4.4's names and defaults: name -> (type, default, doc,
# validator, dynamic). The assignment interval (KIP-1263) is dynamic; Kafka clamps a dynamic value into
# [group.consumer.min.assignment.interval.ms, group.consumer.max.assignment.interval.ms] (broker.group.service).
CONSUMER_GROUP_KEYS: Mapping[str, tuple[ConfigType, str, str, Validator | None, bool]] = {
    "group.consumer.session.timeout.ms": (ConfigType.INT, "45000", "a consumer group member's session timeout",
                                          at_least(1), False),
    "group.consumer.heartbeat.interval.ms": (ConfigType.INT, "5000", "how often consumer group members heartbeat",
                                             at_least(1), False),
    "group.consumer.max.size": (ConfigType.INT, "2147483647", "the most members a consumer group may have",
                                at_least(1), False),
    "group.consumer.assignors": (ConfigType.LIST, "uniform,range", "the server-side assignors; the first is the "
                                 "default", None, False),
    "group.consumer.assignment.interval.ms": (ConfigType.INT, "1000", "the least time between two target "
                                              "assignments of a consumer group", at_least(0), True),
    "group.consumer.min.assignment.interval.ms": (ConfigType.INT, "0", "the least consumer.assignment.interval.ms "
                                                  "of a group", at_least(0), False),
    "group.consumer.max.assignment.interval.ms": (ConfigType.INT, "15000", "the most "
                                                  "consumer.assignment.interval.ms of a group", at_least(0), False),
}


def consumer_assignment_interval_errors(given: Mapping[str, str]) -> list[str]:
    """Kafka's GroupCoordinatorConfig checks at start: min <= max, and min <= the assignment interval <= max
    (a later dynamic value out of the bounds is clamped instead)."""
    def value(name: str) -> int:
        try:
            return int(given.get(name, CONSUMER_GROUP_KEYS[name][1]))
        except ValueError:  # reported as a bad value already
            return int(CONSUMER_GROUP_KEYS[name][1])

    interval, low, high = (f"group.consumer.{k}assignment.interval.ms" for k in ("", "min.", "max."))
    checks = ((high, ">=", low, value(high) >= value(low)), (interval, ">=", low, value(interval) >= value(low)),
              (interval, "<=", high, value(interval) <= value(high)))
    words = {">=": "greater than or equal to", "<=": "less than or equal to"}
    return [f"{a} must be {words[op]} {b}" for a, op, b, ok in checks if not ok]


def check_topic_config(name: str, raw: str) -> ConfigValue:
    """One topic config's typed value; ConfigError (Kafka's message) if refused. `name` must be known."""
    d = TOPIC_CONFIGS[name]
    return check_value(name, d.type, d.validator, raw)


def check_topic_configs(configs: Mapping[str, str | None]) -> str | None:
    """Kafka's LogConfig.validate of a topic's whole set of overrides: None, or INVALID_CONFIG's message."""
    for name in configs:
        if name not in TOPIC_CONFIGS:
            return f"Unknown topic config name: {name}"
    nulls = [name for name, value in configs.items() if value is None]
    if nulls:
        return f"Null value not supported for topic configs: {','.join(nulls)}"
    parsed: dict[str, ConfigValue] = {}
    try:
        for name, value in configs.items():
            assert value is not None
            parsed[name] = check_topic_config(name, value)
    except ConfigError as e:
        return str(e)
    if parsed.get("remote.storage.enable") is True:  # LogConfig.validateRemoteStorageOnlyIfSystemEnabled
        return ("Tiered Storage functionality is disabled in the broker. Topic cannot be configured with remote "
                "log storage.")
    # LogConfig.validateValues: the one cross-key rule.
    min_lag = parsed.get("min.compaction.lag.ms", 0)
    max_lag = parsed.get("max.compaction.lag.ms", LONG_MAX)
    assert isinstance(min_lag, int) and isinstance(max_lag, int)
    if min_lag > max_lag:
        return (f"conflict topic config setting min.compaction.lag.ms ({min_lag}) > "
                f"max.compaction.lag.ms ({max_lag})")
    return None


def closest(name: str, candidates: Sequence[str]) -> str | None:
    """The known key a misspelt one most resembles (for the start-up warning)."""
    import difflib

    found = difflib.get_close_matches(name, candidates, n=1, cutoff=0.85)
    return found[0] if found else None


# --- listeners, TLS and SASL (broker/security) --------------------------------------------------------

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "GSSAPI", "OAUTHBEARER")


class ProtocolMap:
    """listener.security.protocol.map: NAME:PROTOCOL items, each protocol one of Kafka's four."""

    __slots__ = ()

    def check(self, name: str, value: ConfigValue) -> None:
        for item in _COMMA.split(str(value)) if str(value) else ():
            listener, colon, protocol = item.partition(":")
            if not colon or not listener or protocol.upper() not in SECURITY_PROTOCOLS:
                raise ConfigError(name, value, f"Invalid listener security protocol entry {item}")

    def describe(self) -> str:
        return "a list of NAME:PROTOCOL (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL)"


# Kafka's names and defaults (SocketServerConfigs, BrokerSecurityConfigs, SslConfigs, SaslConfigs), as
# (type, default, documentation, validator). The ssl.* and sasl.* keys may also be given per listener as
# listener.name.<listener>.<key> (and sasl.jaas.config as listener.name.<listener>.<mechanism>.sasl.jaas.config).
SECURITY_BROKER_KEYS: Mapping[str, tuple[ConfigType, str, str, Validator | None]] = {
    "listener.security.protocol.map": (
        ConfigType.STRING, "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL",
        "each listener's security protocol", ProtocolMap()),
    "inter.broker.listener.name": (ConfigType.STRING, "", "the listener brokers use to reach each other", None),
    "security.inter.broker.protocol": (ConfigType.STRING, "PLAINTEXT", "the inter-broker listener's protocol, "
                                       "when inter.broker.listener.name is unset", one_of(*SECURITY_PROTOCOLS)),
    "controller.listener.names": (ConfigType.LIST, "", "the listeners of the controller quorum", None),
    "ssl.keystore.type": (ConfigType.STRING, "JKS", "PEM or PKCS12 (JKS is not read by Samsa)", None),
    "ssl.keystore.location": (ConfigType.STRING, "", "the key store file", None),
    "ssl.keystore.password": (ConfigType.PASSWORD, "", "the key store's password", None),
    "ssl.key.password": (ConfigType.PASSWORD, "", "the private key's password", None),
    "ssl.keystore.certificate.chain": (ConfigType.PASSWORD, "", "the certificate chain, PEM text", None),
    "ssl.keystore.key": (ConfigType.PASSWORD, "", "the private key, PEM text", None),
    "ssl.truststore.type": (ConfigType.STRING, "JKS", "PEM or PKCS12 (JKS is not read by Samsa)", None),
    "ssl.truststore.location": (ConfigType.STRING, "", "the trust store file", None),
    "ssl.truststore.password": (ConfigType.PASSWORD, "", "the trust store's password", None),
    "ssl.truststore.certificates": (ConfigType.PASSWORD, "", "trusted certificates, PEM text", None),
    "ssl.protocol": (ConfigType.STRING, "TLSv1.3", "the TLS protocol", one_of("TLSv1.2", "TLSv1.3", "TLS")),
    "ssl.enabled.protocols": (ConfigType.LIST, "TLSv1.2,TLSv1.3", "the TLS versions accepted",
                              one_of("TLSv1.2", "TLSv1.3")),
    "ssl.cipher.suites": (ConfigType.LIST, "", "allowed TLS 1.2 cipher suites (OpenSSL or IANA names)", None),
    "ssl.client.auth": (ConfigType.STRING, "none", "whether clients must present a certificate",
                        one_of("none", "requested", "required")),
    "ssl.principal.mapping.rules": (ConfigType.STRING, "DEFAULT", "client certificate DN to principal name rules",
                                    None),
    "ssl.endpoint.identification.algorithm": (ConfigType.STRING, "https", "host name verification by brokers "
                                              "connecting to brokers (empty: none)", None),
    "sasl.enabled.mechanisms": (ConfigType.LIST, "GSSAPI", "the SASL mechanisms a SASL listener accepts", None),
    "sasl.mechanism.inter.broker.protocol": (ConfigType.STRING, "GSSAPI", "the mechanism brokers use between them",
                                             None),
    "sasl.mechanism.controller.protocol": (ConfigType.STRING, "GSSAPI", "the mechanism used towards controllers",
                                           None),
    "sasl.jaas.config": (ConfigType.PASSWORD, "", "JAAS login module configuration (PlainLoginModule users, "
                         "ScramLoginModule's inter-broker username/password)", None),
    "sasl.server.max.receive.size": (ConfigType.INT, "524288", "the largest frame before authentication",
                                     Range(minimum=1)),
    "connections.max.reauth.ms": (ConfigType.LONG, "0", "a SASL session's lifetime (KIP-368), 0: unlimited",
                                  Range(minimum=0)),
    # OAUTHBEARER (KIP-255, KIP-768): broker/security/oauthbearer.py.
    "sasl.server.callback.handler.class": (
        ConfigType.CLASS, "", "OAUTHBEARER's validator: org.apache.kafka.common.security.oauthbearer."
        "OAuthBearerValidatorCallbackHandler for signed JWTs; unset: the unsecured (alg none) validator", None),
    "sasl.oauthbearer.jwks.endpoint.url": (ConfigType.STRING, "", "the JWKS (file:, http:// or https:// URL) that "
                                           "signed OAUTHBEARER tokens are verified with", None),
    "sasl.oauthbearer.jwks.endpoint.refresh.ms": (ConfigType.LONG, "3600000", "how often the JWKS is read again",
                                                  Range(minimum=0)),
    "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms": (
        ConfigType.LONG, "100", "the least time between two JWKS reads asked for by an unknown key id",
        Range(minimum=0)),
    "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms": (ConfigType.LONG, "10000", "accepted as Kafka does",
                                                            Range(minimum=0)),
    "sasl.oauthbearer.clock.skew.seconds": (ConfigType.INT, "30", "the leeway for a token's exp and iat",
                                            Range(minimum=0)),
    "sasl.oauthbearer.expected.audience": (ConfigType.LIST, "", "audiences a token's aud must include one of "
                                           "(empty: not checked)", None),
    "sasl.oauthbearer.expected.issuer": (ConfigType.STRING, "", "the token's iss must be this (empty: not checked)",
                                         None),
    "sasl.oauthbearer.scope.claim.name": (ConfigType.STRING, "scope", "the claim holding the token's scope", None),
    "sasl.oauthbearer.sub.claim.name": (ConfigType.STRING, "sub", "the claim holding the principal's name", None),
}

# Keys that may also be given per listener and mechanism (listener.name.<l>.<mechanism>.<key>).
_MECHANISM_KEYS = ("sasl.jaas.config", "sasl.server.callback.handler.class", "sasl.login.callback.handler.class")


def listener_base_key(name: str) -> str | None:
    """The ssl.* / sasl.* key behind a per-listener key (Kafka's listener.name.<listener>.<key>, and
    listener.name.<listener>.<mechanism>.sasl.jaas.config); None if `name` is not one."""
    if not name.startswith("listener.name."):
        return None
    rest = name[len("listener.name."):].partition(".")[2]
    if rest.startswith(("ssl.", "sasl.")) or rest == "connections.max.reauth.ms":
        return rest
    mechanism_key = rest.partition(".")[2]  # <mechanism>.sasl.jaas.config
    return mechanism_key if mechanism_key in _MECHANISM_KEYS or mechanism_key.startswith("sasl.oauthbearer.") else None
