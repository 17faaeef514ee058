"""Topic configs through CreateTopics, AlterConfigs and IncrementalAlterConfigs are validated as the reference Kafka
validates them: INVALID_CONFIG (40) with Kafka's message (compat-tests/differential/topic_config_validation
compares the same requests with Kafka itself)."""

from __future__ import annotations

from typing import Any

from samsa.broker.client import Connection

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def _create(conn: Connection, name: str, configs: dict[str, str], validate_only: bool = False) -> Any:
    r = conn.request(19, {"topics": [{"name": name, "num_partitions": 1, "replication_factor": 1, "assignments": (),
                                      "configs": [{"name": k, "value": v} for k, v in configs.items()]}],
                          "timeout": 5000, "validate_only": validate_only}, version=7)
    return r.topics[0]


def _incremental(conn: Connection, topic: str, ops: list[tuple[str, int, str | None]]) -> Any:
    r = conn.request(44, {"resources": [{"resource_type": 2, "resource_name": topic, "configs": [
        {"name": n, "config_operation": op, "value": v} for n, op, v in ops]}], "validate_only": False}, version=1)
    return r.responses[0]


def _describe(conn: Connection, topic: str, keys: list[str]) -> dict[str, tuple[str | None, int]]:
    r = conn.request(32, {"resources": [{"resource_type": 2, "resource_name": topic, "configuration_keys": keys}],
                          "include_synonyms": False, "include_documentation": False}, version=4)
    assert r.results[0].error_message == ""
    return {c.name: (c.value, c.config_source) for c in r.results[0].configs}


def test_create_topics_refuses_bad_values_with_kafkas_message(conn: Connection) -> None:
    t = _create(conn, "bad", {"retention.ms": "soon"}, validate_only=True)
    assert t.error_code.value == 40
    assert t.error_message == "Invalid value soon for configuration retention.ms: Not a number of type LONG"
    t = _create(conn, "bad", {"segment.bytes": "1000"}, validate_only=True)
    assert t.error_message == "Invalid value 1000 for configuration segment.bytes: Value must be at least 1048576"
    t = _create(conn, "bad", {"cleanup.policy": "Compact"}, validate_only=True)
    assert t.error_code.value == 40 and "String must be one of: compact, delete" in t.error_message
    assert _create(conn, "good", {"cleanup.policy": "compact, delete", "retention.ms": " 5 "}).error_code.value == 0


def test_incremental_alter_configs_as_kafka(conn: Connection) -> None:
    assert _create(conn, "t", {}).error_code.value == 0
    # Kafka accepts an empty cleanup.policy (an empty LIST).
    r = _incremental(conn, "t", [("cleanup.policy", SET, "")])
    assert r.error_code.value == 0, r.error_message
    assert _describe(conn, "t", ["cleanup.policy"]) == {"cleanup.policy": ("", 1)}
    r = _incremental(conn, "t", [("cleanup.policy", APPEND, "compact")])
    assert r.error_code.value == 0 and _describe(conn, "t", ["cleanup.policy"])["cleanup.policy"] == ("compact", 1)
    r = _incremental(conn, "t", [("retention.ms", APPEND, "5")])
    assert (r.error_code.value, r.error_message) == (
        40, "Can't APPEND to key retention.ms because its type is not LIST.")
    r = _incremental(conn, "t", [("retention.ms", SET, "5"), ("retention.ms", SET, "6")])
    assert (r.error_code.value, r.error_message) == (42, "Error due to duplicate config keys")
    r = _incremental(conn, "t", [("retention.ms", SET, None)])
    assert (r.error_code.value, r.error_message) == (42, "Null value not supported for : retention.ms")
    # The whole new set is validated: a max.compaction.lag.ms under the topic's min is refused.
    assert _incremental(conn, "t", [("min.compaction.lag.ms", SET, "10")]).error_code.value == 0
    r = _incremental(conn, "t", [("max.compaction.lag.ms", SET, "5")])
    assert r.error_code.value == 40
    assert r.error_message == "conflict topic config setting min.compaction.lag.ms (10) > max.compaction.lag.ms (5)"
    r = _incremental(conn, "t", [("min.insync.replicas", SET, "0")])
    assert r.error_message == "Invalid value 0 for configuration min.insync.replicas: Value must be at least 1"
    # min.insync.replicas comes from the cluster-wide dynamic default a new cluster writes (Kafka's KIP-966).
    assert _describe(conn, "t", ["min.insync.replicas", "max.compaction.lag.ms"]) == {
        "min.insync.replicas": ("1", 3), "max.compaction.lag.ms": ("9223372036854775807", 5)}


def test_legacy_alter_configs_refuses_null_and_bad_values(conn: Connection) -> None:
    assert _create(conn, "legacy", {}).error_code.value == 0

    def alter(configs: list[tuple[str, str | None]]) -> Any:
        r = conn.request(33, {"resources": [{"resource_type": 2, "resource_name": "legacy", "configs": [
            {"name": n, "value": v} for n, v in configs]}], "validate_only": False}, version=2)
        return r.responses[0]

    r = alter([("segment.ms", "0")])
    assert (r.error_code.value, r.error_message) == (
        40, "Invalid value 0 for configuration segment.ms: Value must be at least 1")
    r = alter([("segment.ms", None)])
    assert (r.error_code.value, r.error_message) == (42, "Null value not supported for : segment.ms")
    assert alter([("cleanup.policy", "")]).error_code.value == 0
    assert _describe(conn, "legacy", ["cleanup.policy"]) == {"cleanup.policy": ("", 1)}
