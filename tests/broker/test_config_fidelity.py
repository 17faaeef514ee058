"""DescribeConfigs answers with Kafka's codes and messages (compared with Kafka 4.1.2's in
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
