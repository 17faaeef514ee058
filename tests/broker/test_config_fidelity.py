"""DescribeConfigs answers with Kafka's codes and messages (compared with the reference Kafka's in
compat-tests/differential/config_fidelity.py)."""

from __future__ import annotations

from typing import Any

from samsa.broker.client import Connection


def _describe(conn: Connection, resources: list[tuple[int, str, list[str] | None]]) -> list[Any]:
    r = conn.request(32, {"resources": [{"resource_type": t, "resource_name": n, "configuration_keys": k}
                                        for t, n, k in resources],
                          "include_synonyms": False, "include_documentation": False}, version=4)
    return [(x.error_code.value, x.error_message, len(x.configs)) for x in r.results]


def test_describe_configs_messages(conn: Connection) -> None:
    r = conn.request(19, {"topics": [{"name": "dc", "num_partitions": 1, "replication_factor": 1,
                                      "assignments": (), "configs": ()}], "timeout": 5000, "validate_only": False})
    assert r.topics[0].error_code.value == 0
    assert _describe(conn, [(2, "dc", ["cleanup.policy"])]) == [(0, "", 1)]  # "" on success, not null
    assert _describe(conn, [(2, "nope", None)]) == [(3, "", 0)]
    assert _describe(conn, [(2, "bad name!", None)]) == [
        (17, "Topic name is invalid: 'bad name!' contains one or more characters other than ASCII alphanumerics, "
             "'.', '_' and '-'", 0)]
    assert _describe(conn, [(2, "", None)]) == [(17, "Topic name is invalid: the empty string is not allowed", 0)]
    assert _describe(conn, [(2, "..", None)]) == [(17, "Topic name is invalid: '..' is not allowed", 0)]
    assert _describe(conn, [(4, "1", ["log.retention.hours"])]) == [(0, "", 1)]
    assert _describe(conn, [(4, "x", None)]) == [(42, "Broker id must be an integer, but it is: x", 0)]
    assert _describe(conn, [(4, "7", None)]) == [
        (42, "Unexpected broker id, expected 1 or empty string, but received 7", 0)]
    # A resource type Kafka does not know fails the whole request.
    refused = _describe(conn, [(2, "dc", None), (3, "x", None)])
    assert [(code, configs) for code, _, configs in refused] == [(42, 0), (42, 0)]
    assert refused[0][1] is not None and refused[0][1].startswith("This most likely occurs because of a request")


def _alter_group(conn: Connection, group: str, configs: list[tuple[str, int, str | None]],
                 validate: bool = False) -> tuple[int, str | None]:
    r = conn.request(44, {"resources": [{"resource_type": 32, "resource_name": group, "configs": [
        {"name": k, "config_operation": op, "value": v} for k, op, v in configs]}], "validate_only": validate},
        version=1)
    return r.responses[0].error_code.value, r.responses[0].error_message


def _group_configs(conn: Connection, group: str) -> dict[str, tuple[str | None, int]]:
    r = conn.request(32, {"resources": [{"resource_type": 32, "resource_name": group, "configuration_keys": None}],
                          "include_synonyms": False, "include_documentation": False}, version=4)
    assert r.results[0].error_code.value == 0
    return {x.name: (x.value, x.config_source) for x in r.results[0].configs}


def test_group_config_resource() -> None:
    """Pure checks of broker.group_configs (Kafka's GroupConfig.validate messages)."""
    from samsa.broker.group_configs import check_group_configs

    assert check_group_configs({"consumer.session.timeout.ms": "50000"}, {}) is None
    assert check_group_configs({"consumer.session.timeout.ms": "1000"}, {}) == (
        "consumer.session.timeout.ms must be in the range 45000 to 60000 inclusive.")  # Kafka 4.4's words
    assert check_group_configs({"streams.num.standby.replicas": "3"}, {}) == (
        "streams.num.standby.replicas must be less than or equal to 2")
    assert check_group_configs({"share.delivery.count.limit": "11"}, {}) == (
        "share.delivery.count.limit must be in the range 2 to 10 inclusive.")
    # A broker that widens the bound accepts more; without the broker's configs only values are checked.
    assert check_group_configs({"consumer.session.timeout.ms": "6000"},
                               {"group.consumer.min.session.timeout.ms": "1000"}) is None
    assert check_group_configs({"consumer.session.timeout.ms": "1000"}, None) is None
    assert check_group_configs({"nope": "1"}, {}) == "Unknown group config name: nope"
    assert check_group_configs({"share.auto.offset.reset": "by_duration:P1DT2H3M4.5S"}, {}) is None
    assert check_group_configs({"share.auto.offset.reset": "by_duration:PT"}, {}) is not None


def test_group_config_checks_of_kafka_4_4() -> None:
    """The rest of Kafka 4.4.0's GroupConfig.validate (read from kafka-group-coordinator-4.4.0.jar): its internal
    configs are accepted and checked, duplicate rack tags, an unregistered streams assignor, a session not longer
    than the heartbeat interval and an internal dead-letter topic name are refused, with Kafka's messages."""
    from samsa.broker.group_configs import check_group_configs

    for name, value in (("consumer.assignor.offload.enable", "false"), ("share.assignor.offload.enable", "true"),
                        ("streams.assignor.offload.enable", "false"), ("streams.num.warmup.replicas", "20"),
                        ("streams.acceptable.recovery.lag", "99999999999"),
                        ("streams.task.offset.interval.ms", "15000")):
        assert check_group_configs({name: value}, {}) is None, name
        assert check_group_configs({name: value}, None) is None, name
    assert check_group_configs({"streams.num.warmup.replicas": "21"}, {}) == (
        "streams.num.warmup.replicas must be less than or equal to 20")
    assert check_group_configs({"streams.num.warmup.replicas": "21"}, {"group.streams.max.warmup.replicas": "30"}) \
        is None
    assert check_group_configs({"streams.task.offset.interval.ms": "10"}, {}) == (
        "streams.task.offset.interval.ms must be greater than or equal to 15000")
    assert check_group_configs({"streams.acceptable.recovery.lag": "-1"}, {}) == (
        "Invalid value -1 for configuration streams.acceptable.recovery.lag: Value must be at least 0")
    assert check_group_configs({"streams.assignor.offload.enable": "maybe"}, None) is not None

    assert check_group_configs({"streams.rack.aware.assignment.tags": "zone, rack"}, {}) is None
    duplicate = "streams.rack.aware.assignment.tags must not contain duplicate tag keys."
    assert check_group_configs({"streams.rack.aware.assignment.tags": "zone, rack ,zone"}, None) == duplicate
    # before the values are parsed, after the names
    assert check_group_configs({"streams.rack.aware.assignment.tags": "a,a", "streams.num.warmup.replicas": "x"},
                               {}) == duplicate
    assert check_group_configs({"streams.rack.aware.assignment.tags": "a,a", "nope": "1"}, {}) == (
        "Unknown group config name: nope")

    assert check_group_configs({"streams.assignor.name": "sticky"}, {}) is None
    assert check_group_configs({"streams.assignor.name": "balanced"}, {}) == (
        "streams.assignor.name 'balanced' is not a registered task assignor. Registered assignors are: [sticky].")
    assert check_group_configs({"streams.assignor.name": "balanced"},
                               {"group.streams.assignors": "sticky,balanced"}) is None
    assert check_group_configs({"streams.assignor.name": "balanced"}, None) is None  # the broker's to check

    # A session must outlast the heartbeat interval, the broker's default standing in for the unset one.
    wide = {"group.consumer.min.session.timeout.ms": "1000", "group.consumer.max.heartbeat.interval.ms": "60000"}
    assert check_group_configs({"consumer.session.timeout.ms": "5000"}, wide) == (
        "consumer.session.timeout.ms must be greater than consumer.heartbeat.interval.ms")
    assert check_group_configs({"consumer.session.timeout.ms": "6000"}, wide) is None
    assert check_group_configs({"consumer.heartbeat.interval.ms": "45000"}, wide) == (
        "consumer.session.timeout.ms must be greater than consumer.heartbeat.interval.ms")

    assert check_group_configs({"errors.deadletterqueue.topic.name": "__dlq"}, None) == (
        "errors.deadletterqueue.topic.name: DLQ topic name must not start with '__'")
    assert check_group_configs({"errors.deadletterqueue.topic.name": "dlq"}, {}) is None


def test_group_configs_over_the_wire(conn: Connection) -> None:
    defaults = _group_configs(conn, "g1")
    assert len(defaults) == 21 and defaults["consumer.session.timeout.ms"] == ("45000", 5)  # as Kafka 4.4.0
    assert defaults["streams.assignor.name"] == ("sticky", 5)
    assert _alter_group(conn, "g1", [("consumer.session.timeout.ms", 0, "70000")]) == (
        40, "consumer.session.timeout.ms must be in the range 45000 to 60000 inclusive.")
    assert _alter_group(conn, "", [("consumer.session.timeout.ms", 0, "50000")]) == (
        42, "Default group resources are not allowed.")
    assert _alter_group(conn, "g1", [("consumer.session.timeout.ms", 0, "50000")]) == (0, None)
    assert _group_configs(conn, "g1")["consumer.session.timeout.ms"] == ("50000", 8)  # GROUP_CONFIG
    r = conn.request(74, {"resource_types": [32]}, version=1)
    assert [(x.resource_name, x.resource_type) for x in r.config_resources] == [("g1", 32)]
    assert _alter_group(conn, "g1", [("consumer.session.timeout.ms", 1, None)]) == (0, None)
    assert _group_configs(conn, "g1")["consumer.session.timeout.ms"] == ("45000", 5)


def test_a_new_cluster_has_kafkas_cluster_wide_min_insync_replicas(conn: Connection) -> None:
    """Kafka 4.1's `storage format` writes min.insync.replicas as a cluster-wide dynamic config (KIP-966), so a
    topic reports it as DYNAMIC_DEFAULT_BROKER_CONFIG; a new Samsa cluster writes it with its first broker."""
    r = conn.request(32, {"resources": [{"resource_type": 4, "resource_name": "", "configuration_keys": None}],
                          "include_synonyms": False, "include_documentation": False}, version=4)
    assert [(x.name, x.value, x.config_source) for x in r.results[0].configs] == [("min.insync.replicas", "1", 3)]
    r = conn.request(19, {"topics": [{"name": "mir", "num_partitions": 1, "replication_factor": 1,
                                      "assignments": (), "configs": ()}], "timeout": 5000, "validate_only": False})
    r = conn.request(32, {"resources": [{"resource_type": 2, "resource_name": "mir",
                                         "configuration_keys": ["min.insync.replicas"]}],
                          "include_synonyms": True, "include_documentation": False}, version=4)
    (entry,) = r.results[0].configs
    assert (entry.value, entry.config_source, [s.source for s in entry.synonyms]) == ("1", 3, [3, 5])


def test_dynamic_broker_config_rules() -> None:
    """the reference Kafka's rules (broker.dynamic_broker_configs): its dynamic keys, per-broker-only keys, security
    keys per listener, custom keys, thread counts by at most half or double."""
    from samsa.broker.dynamic_broker_configs import check_dynamic_broker_config as check

    assert check("log.retention.ms", "5000", cluster_default=True) is None
    assert check("log.retention.hours", "5", cluster_default=True) == (
        "Cannot update these configs dynamically: [log.retention.hours]")
    assert check("num.io.threads", "4", cluster_default=False) is None  # accepted, not honoured
    assert check("custom.key", "1", cluster_default=True) is None
    assert check("sasl.enabled.mechanisms", "PLAIN", cluster_default=True) == (
        "Cannot update these configs at default cluster level, broker id must be specified: "
        "[sasl.enabled.mechanisms]")
    assert check("ssl.keystore.location", "/x", cluster_default=False) == (
        "These security configs can be dynamically updated only per-listener using the listener prefix: "
        "[ssl.keystore.location]")
    assert check("log.segment.bytes", "100", cluster_default=False) == (
        "Invalid value 100 for configuration log.segment.bytes: Value must be at least 1048576")
    assert check("max.connections", "x", cluster_default=False) == (
        "Invalid value x for configuration max.connections: Not a number of type INT")
    assert check("background.threads", "3", cluster_default=True, current=lambda _: "10") == (
        "Invalid value org.apache.kafka.common.config.ConfigException: Dynamic thread count update validation "
        "failed for background.threads=3, value should be at least half the current value 10 for configuration "
        "Invalid dynamic configuration")
    assert check("background.threads", "20", cluster_default=True, current=lambda _: "10") is None
    assert check("listeners", "PLAINTEXT://:1", cluster_default=False) == (
        "Cannot update these configs dynamically: [listeners]")  # Samsa cannot add listeners


def test_broker_describe_lists_kafkas_configs(samsa: Any, conn: Connection) -> None:
    from samsa.broker.kafka_broker_configs import KAFKA_BROKER_CONFIGS

    def configs() -> dict[str, Any]:
        r = conn.request(32, {"resources": [{"resource_type": 4, "resource_name": "1", "configuration_keys": None}],
                              "include_synonyms": False, "include_documentation": False}, version=4)
        return {x.name: x for x in r.results[0].configs}

    listed = configs()
    assert set(KAFKA_BROKER_CONFIGS) <= set(listed)
    assert {k for k in set(listed) - set(KAFKA_BROKER_CONFIGS) if not k.startswith("samsa.")} == set()
    assert (listed["log.dirs"].value, listed["log.dirs"].config_source) == (str(samsa.data_dir), 4)
    assert (listed["log.retention.ms"].value, listed["log.retention.hours"].value) == (None, "168")
    assert listed["num.io.threads"].read_only is False and listed["log.retention.hours"].read_only is True
    r = conn.request(44, {"resources": [{"resource_type": 4, "resource_name": "1", "configs": [
        {"name": "num.io.threads", "config_operation": 0, "value": "9"}]}], "validate_only": False}, version=1)
    assert r.responses[0].error_code.value == 0
    entry = configs()["num.io.threads"]
    assert (entry.value, entry.config_source) == ("9", 2)
