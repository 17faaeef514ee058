"""The typed config schema: parsing as Kafka's ConfigDef reads strings, the reference Kafka's topic config messages,
the broker table, the parsed view of BrokerConfig, and the start-up check."""

from __future__ import annotations

import pytest

from samsa.broker.config import (
    BROKER_SCHEMA,
    DYNAMIC_BROKER_CONFIGS,
    TOPIC_CONFIGS,
    BrokerConfig,
    BrokerKey,
    ConfigSource,
    ConfigType,
    _entry,
    check_static_config,
    check_topic_configs,
    log_config_for,
    validate_broker_config,
    validate_topic_config,
)
from samsa.broker.config_schema import ConfigError, check_value, parse_value


@pytest.mark.parametrize(("ctype", "raw", "parsed"), [
    (ConfigType.INT, " 5 ", 5), (ConfigType.INT, "+7", 7), (ConfigType.INT, "-2147483648", -2147483648),
    (ConfigType.LONG, "9223372036854775807", 9223372036854775807), (ConfigType.SHORT, "32767", 32767),
    (ConfigType.BOOLEAN, "TRUE", True), (ConfigType.BOOLEAN, " false", False),
    (ConfigType.DOUBLE, "0.5", 0.5), (ConfigType.DOUBLE, "1e-1", 0.1), (ConfigType.DOUBLE, ".5", 0.5),
    (ConfigType.LIST, "", ()), (ConfigType.LIST, "compact, delete", ("compact", "delete")),
    (ConfigType.LIST, "a,,b", ("a", "", "b")), (ConfigType.STRING, " x ", "x"),
])
def test_parse_value_reads_strings_as_kafkas_configdef(ctype: ConfigType, raw: str, parsed: object) -> None:
    assert parse_value("k", ctype, raw) == parsed
    assert type(parse_value("k", ctype, raw)) is type(parsed)


@pytest.mark.parametrize(("ctype", "raw"), [
    (ConfigType.INT, "abc"), (ConfigType.INT, "2147483648"), (ConfigType.INT, "1e3"), (ConfigType.INT, "5_0"),
    (ConfigType.INT, "\u0663"), (ConfigType.INT, ""), (ConfigType.SHORT, "32768"), (ConfigType.LONG, "1.5"),
    (ConfigType.BOOLEAN, "yes"), (ConfigType.BOOLEAN, "1"), (ConfigType.DOUBLE, "x"), (ConfigType.DOUBLE, "1_0"),
])
def test_parse_value_refuses_what_java_refuses(ctype: ConfigType, raw: str) -> None:
    with pytest.raises(ConfigError) as e:
        parse_value("k", ctype, raw)
    assert str(e.value).startswith(f"Invalid value {raw} for configuration k: ")


# Kafka's own answers: LogConfig.validate run on these values with the oracle's jars (the list rules: 4.4.0's).
KAFKA_TOPIC_MESSAGES = [
    ("retention.ms", "soon", "Invalid value soon for configuration retention.ms: Not a number of type LONG"),
    ("retention.ms", "-2", "Invalid value -2 for configuration retention.ms: Value must be at least -1"),
    ("retention.ms", " 5 ", None),
    ("cleanup.policy", "Compact",
     "Invalid value Compact for configuration cleanup.policy: String must be one of: compact, delete"),
    ("cleanup.policy", "", None),
    ("cleanup.policy", "compact,,delete", "Configuration 'cleanup.policy' values must not be empty."),
    ("cleanup.policy", "compact,", "Configuration 'cleanup.policy' values must not be empty."),
    ("cleanup.policy", "compact,compact", None),
    ("cleanup.policy", "compact, delete", None),
    ("message.timestamp.type", "createtime", "Invalid value createtime for configuration message.timestamp.type: "
                                             "String must be one of: CreateTime, LogAppendTime"),
    ("compression.type", "GZIP", "Invalid value GZIP for configuration compression.type: String must be one of: "
                                 "uncompressed, zstd, lz4, snappy, gzip, producer"),
    ("compression.gzip.level", "0", "Invalid value 0 for configuration compression.gzip.level: Value must be "
                                    "between 1 and 9 or equal to -1"),
    ("compression.gzip.level", "-1", None),
    ("compression.lz4.level", "18",
     "Invalid value 18 for configuration compression.lz4.level: Value must be no more than 17"),
    ("compression.zstd.level", "-131073",
     "Invalid value -131073 for configuration compression.zstd.level: Value must be at least -131072"),
    ("min.cleanable.dirty.ratio", "1.5",
     "Invalid value 1.5 for configuration min.cleanable.dirty.ratio: Value must be no more than 1"),
    ("preallocate", "yes",
     "Invalid value yes for configuration preallocate: Expected value to be either true or false"),
    ("preallocate", "TRUE", None),
    ("segment.bytes", "13", "Invalid value 13 for configuration segment.bytes: Value must be at least 1048576"),
    ("segment.bytes", "3000000000",
     "Invalid value 3000000000 for configuration segment.bytes: Not a number of type INT"),
    ("max.message.bytes", "1e3", "Invalid value 1e3 for configuration max.message.bytes: Not a number of type INT"),
    ("leader.replication.throttled.replicas", "x", "Invalid value [x] for configuration "
     "leader.replication.throttled.replicas: leader.replication.throttled.replicas must be the literal '*' or a "
     "list of replicas in the following format: [partitionId]:[brokerId],[partitionId]:[brokerId],..."),
    ("leader.replication.throttled.replicas", "*", None),
    ("leader.replication.throttled.replicas", "0:1,1:2", None),
    ("retention.bytes", "-5", None),
    ("no.such", "1", "Unknown topic config name: no.such"),
    ("message.format.version", "3.0", "Unknown topic config name: message.format.version"),
]


@pytest.mark.parametrize(("name", "value", "message"), KAFKA_TOPIC_MESSAGES)
def test_topic_configs_are_refused_with_kafkas_message(name: str, value: str, message: str | None) -> None:
    assert validate_topic_config(name, value) == message
    assert check_topic_configs({name: value}) == message


def test_topic_config_set_rules() -> None:
    assert check_topic_configs({"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"}) == (
        "conflict topic config setting min.compaction.lag.ms (10) > max.compaction.lag.ms (5)")
    assert check_topic_configs({"min.compaction.lag.ms": "5", "max.compaction.lag.ms": "5"}) is None
    assert check_topic_configs({"retention.ms": None, "segment.ms": None}) == (
        "Null value not supported for topic configs: retention.ms,segment.ms")
    assert validate_topic_config("retention.ms", None) is None  # a deletion


def test_the_schema_is_complete_and_its_defaults_are_valid() -> None:
    for name, entry in BROKER_SCHEMA.items():
        assert entry.documentation, f"{name}: give it a doc line (K(type, default, doc) or BROKER_DOCS)"
        if entry.default != "":
            check_value(name, entry.type, entry.validator, entry.default)
    for name, d in TOPIC_CONFIGS.items():
        assert d.documentation, name
        check_value(name, d.type, d.validator, d.default)
        if d.broker_key is not None:
            broker = BROKER_SCHEMA[d.broker_key]
            assert broker.dynamic and broker.validator is d.validator, name
    assert "num.partitions" not in DYNAMIC_BROKER_CONFIGS and "log.retention.hours" in DYNAMIC_BROKER_CONFIGS
    assert BROKER_SCHEMA["queued.max.requests"].implemented  # broker.connection_quotas.RequestQueue
    assert not BROKER_SCHEMA["compression.lz4.level"].implemented  # LZ4 is written at its default level
    assert BROKER_SCHEMA["log.cleaner.delete.retention.ms"].implemented  # broker/log_cleaner.py


def test_a_broker_key_declared_in_the_short_form_is_a_full_schema_entry() -> None:
    entry = _entry("x.y", (ConfigType.INT, "5"))
    assert entry == BrokerKey(ConfigType.INT, "5", "", None, False, True)
    assert BROKER_SCHEMA["auto.leader.rebalance.enable"].documentation  # short form, doc from BROKER_DOCS
    # The short form still gets its type checked at start.
    report = check_static_config({"leader.imbalance.per.broker.percentage": "ten"})
    assert report.errors and "Not a number of type INT" in report.errors[0]


def test_broker_config_parses_once_into_a_typed_view() -> None:
    config = BrokerConfig(overrides={"num.partitions": " 4 ", "log.retention.minutes": "3",
                                     "auto.create.topics.enable": "FALSE", "process.roles": "broker"})
    assert config.value("num.partitions") == 4 and config.get_int("num.partitions") == 4
    assert config.get("num.partitions") == " 4 "  # the string as given, for DescribeConfigs
    assert config.value("log.retention.ms") == 180_000  # minutes win over hours
    assert config.get_bool("auto.create.topics.enable") is False
    assert config.get_float("log.cleaner.min.cleanable.ratio") == 0.5
    assert config.get_list("process.roles") == ("broker",) and config.roles == frozenset({"broker"})
    assert config.source("num.partitions") == ConfigSource.STATIC_BROKER_CONFIG
    with pytest.raises(KeyError):
        config.get_int("no.such.key")  # callers with their own default rely on KeyError
    same = config.with_dynamic({}, {})
    assert same is config
    changed = config.with_dynamic({"log.retention.ms": "1000"}, {})
    assert changed.value("log.retention.ms") == 1000
    assert changed.source("log.retention.ms") == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
    assert log_config_for(changed, {"cleanup.policy": "compact, delete"}).cleanup_policy == "compact,delete"
    assert log_config_for(changed, {"message.timestamp.type": " LogAppendTime"}).log_append_time


def test_static_check_sorts_errors_and_warnings() -> None:
    report = check_static_config({
        "num.partitions": "abc", "num.partitons": "3", "replica.selector.class": "x", "sasl.kerberos.service.name": "k",
        "remote.log.storage.system.enable": "false", "retention.ms": "5", "log.preallocate": "true",
        "default.replication.factor": "2",
        "listeners": "PLAINTEXT://127.0.0.1:9092,CONTROLLER://[::1]:9093",
    })
    assert report.errors == ("Invalid value abc for configuration num.partitions: Not a number of type INT "
                             "(expected an INT in [1,...])",)
    assert len(report.warnings) == 6
    text = "\n".join(report.warnings)
    assert "num.partitons is not a known broker config: ignored (did you mean num.partitions?)" in text
    for key in ("replica.selector.class", "sasl.kerberos.service.name", "remote.log.storage.system.enable"):
        assert f"{key} is a Kafka broker config Samsa does not implement: ignored" in text
    assert "retention.ms is a topic config, not a broker config" in text
    assert "log.preallocate is a Kafka broker config Samsa accepts but does not implement yet" in text
    assert check_static_config({"listeners": "PLAINTEXT//x:1"}).errors
    assert check_static_config({"controller.quorum.voters": "1@h:9093,2@h"}).errors
    assert check_static_config({"process.roles": "broker,leader"}).errors


def test_dynamic_broker_configs_are_validated_by_the_schema() -> None:
    assert validate_broker_config("num.partitions", "2") == (
        "Cannot update these configs dynamically: [num.partitions]")
    assert validate_broker_config("log.retention.ms", "x") == (
        "Invalid value x for configuration log.retention.ms: Not a number of type LONG")
    assert validate_broker_config("log.cleanup.policy", "") is None
    assert validate_broker_config("log.segment.bytes", "100") == (
        "Invalid value 100 for configuration log.segment.bytes: Value must be at least 1048576")
    assert validate_broker_config("log.retention.hours", None) is None


def test_retention_deletes_only_when_the_cleanup_policy_says_delete() -> None:
    config = BrokerConfig()
    for policy, deletes in (("delete", True), ("compact,delete", True), ("compact", False), ("", False)):
        log_config = log_config_for(config, {"cleanup.policy": policy, "retention.ms": "1000",
                                             "retention.bytes": "5000"})
        assert (log_config.retention_ms, log_config.retention_bytes) == ((1000, 5000) if deletes else (-1, -1))


def test_consumer_assignment_interval_is_checked_against_its_bounds_at_start() -> None:
    """Kafka's GroupCoordinatorConfig: min <= group.consumer.assignment.interval.ms <= max, min <= max."""
    assert check_static_config({"group.consumer.assignment.interval.ms": "0"}).errors == ()
    assert check_static_config({"group.consumer.assignment.interval.ms": "20000"}).errors == (
        "group.consumer.assignment.interval.ms must be less than or equal to "
        "group.consumer.max.assignment.interval.ms",)
    assert check_static_config({"group.consumer.min.assignment.interval.ms": "20000"}).errors == (
        "group.consumer.max.assignment.interval.ms must be greater than or equal to "
        "group.consumer.min.assignment.interval.ms",
        "group.consumer.assignment.interval.ms must be greater than or equal to "
        "group.consumer.min.assignment.interval.ms")
    assert "group.consumer.assignment.interval.ms" in DYNAMIC_BROKER_CONFIGS
