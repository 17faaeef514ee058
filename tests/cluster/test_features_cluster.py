"""Feature levels on a 3-node cluster: UpdateFeatures sent to any broker is carried out by the active
controller (forwarded, KIP-590), written as a FeatureLevelRecord and seen by every broker's ApiVersions."""

from __future__ import annotations

from collections.abc import Callable

from cluster_harness import Cluster, wait_for

from samsa.kproto.errors import ErrorCode


def _level(cluster: Cluster, node: int) -> int | None:
    with cluster.connect(node, 10) as conn:
        r = conn.request(18, {"client_software_name": "t", "client_software_version": "1"}, version=4)
    return {f.name: f.max_version_level for f in r.finalized_features}.get("transaction.version", 0)


def test_update_features_through_every_broker_reaches_every_broker(cluster_factory: Callable[..., Cluster]) -> None:
    cluster = cluster_factory(3)
    assert [_level(cluster, node) for node in (1, 2, 3)] == [2, 2, 2]
    for node, level in ((1, 1), (2, 0), (3, 2)):
        with cluster.connect(node, 15) as conn:
            r = conn.request(57, {"timeout": 15000, "validate_only": False, "feature_updates": [
                {"feature": "transaction.version", "max_version_level": level, "upgrade_type": 2 if level < 2 else 1}]},
                version=1)
        assert r.error_code == ErrorCode.none, r
        wait_for(f"transaction.version={level} on every broker",
                 lambda lv=level: all(_level(cluster, n) == lv for n in (1, 2, 3)) or None, 30)
