"""DescribeClientQuotas (KIP-546): no quota is stored, so a valid filter matches nothing; a bad filter gets Kafka's
error and message; DESCRIBE_CONFIGS on the cluster is needed (the differential scenario describe_client_quotas
compares all of it with Kafka 4.4.0)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from samsa.broker.security.acl import AclOperation, ResourceType
from tests.acl.harness import ALICE, acl_broker, allow, call


def _describe(broker: Any, components: list[tuple[str, int, str | None]], version: int = 1) -> Any:
    return call(broker, 48, version, {"components": [{"entity_type": t, "match_type": m, "match": v}
                                                     for t, m, v in components], "strict": False})


def test_filters_answers_and_authorization(tmp_path: Path) -> None:
    broker = acl_broker(tmp_path)
    try:
        denied = _describe(broker, [])
        assert (denied.error_code.value, denied.entries) == (31, None)  # CLUSTER_AUTHORIZATION_FAILED
        allow(broker, ALICE, AclOperation.DESCRIBE_CONFIGS, ResourceType.CLUSTER, "kafka-cluster")
        for version in (0, 1):
            r = _describe(broker, [("user", 0, "alice"), ("client-id", 2, None)], version)
            assert (r.error_code.value, r.error_message, r.entries) == (0, "", ())
        r = _describe(broker, [("group", 0, "g")])
        assert (r.error_code.value, r.error_message) == (35, "Unsupported entity type group")
        r = _describe(broker, [("user", 0, "a"), ("user", 2, None)])
        assert (r.error_code.value, r.error_message) == (42, "Entity type user cannot appear more than once in the "
                                                             "filter.")
        r = _describe(broker, [("ip", 2, None), ("user", 2, None)])
        assert r.error_code.value == 42 and r.error_message.startswith("Invalid entity filter component combination")
        assert _describe(broker, [("user", 0, None)]).error_message == (
            "Request specified MATCH_TYPE_EXACT, but set match string to null.")
    finally:
        broker.close()
