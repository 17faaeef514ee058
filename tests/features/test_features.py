"""Feature levels (KIP-584): ApiVersions' supported/finalized features, UpdateFeatures' checks, and the
levels as FeatureLevelRecord in the metadata log (replayed after a restart, carried by snapshots)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from samsa.broker import launcher
from samsa.broker.client import Connection
from samsa.broker.metadata.features import UpgradeType, check_update, finalized_levels
from samsa.broker.metadata.image import MetadataImage
from samsa.broker.metadata.records import FeatureLevelRecord, decode_records, encode_records

REPO = Path(__file__).resolve().parents[2]

# What Kafka 4.4.0 finalizes on a fresh node, less share.version 2 (share groups: Samsa does not have them).
KAFKA_DEFAULTS = {"group.version": 1, "streams.version": 1, "transaction.version": 2,
                  "eligible.leader.replicas.version": 1, "kraft.version": 1, "metadata.version": 33}


def test_a_fresh_image_finalizes_what_kafka_finalizes_on_a_fresh_node() -> None:
    # kraft.version is the quorum's: 1 as Kafka formatted --standalone; a static quorum's 0 is not listed
    assert MetadataImage(kraft_version=1).finalized_features() == KAFKA_DEFAULTS
    assert list(finalized_levels({}, 1)) == list(KAFKA_DEFAULTS)  # Kafka's order
    static = dict(KAFKA_DEFAULTS)
    del static["kraft.version"]
    assert MetadataImage().finalized_features() == static


def test_a_record_sets_a_level_and_level_zero_unfinalizes() -> None:
    image = MetadataImage().apply([FeatureLevelRecord("transaction.version", 0),
                                   FeatureLevelRecord("share.version", 1)], 5)
    features = image.finalized_features()
    assert "transaction.version" not in features
    assert features["share.version"] == 1
    again = MetadataImage().apply(decode_records(encode_records(image.to_records())), 9)
    assert again.finalized_features() == features


@pytest.mark.parametrize(("name", "level", "kind", "current", "reason"), [
    ("transaction.version", 3, 1, {}, "Local controller 1 only supports versions 0-2"),
    ("nosuch", 1, 1, {}, "Local controller 1 does not support this feature."),
    ("transaction.version", 1, 1, {"transaction.version": 2}, "without setting the upgrade type"),
    ("transaction.version", -1, 2, {}, "cannot be less than 0"),
    ("transaction.version", 1, 0, {}, "does not support the given upgrade type"),
    ("metadata.version", 20, 2, {"metadata.version": 33},
     "Unsupported metadata.version downgrade from 33 to 20. Refusing to perform the requested downgrade"),
    ("metadata.version", 20, 3, {"metadata.version": 33}, "Unsafe metadata downgrade is not supported"),
    ("metadata.version", 27, 1, {"metadata.version": 33}, "without setting the upgrade type"),
    ("metadata.version", 6, 2, {"metadata.version": 33}, "only supports versions 7-33"),
    ("kraft.version", 0, 2, {"kraft.version": 1}, "Can't downgrade the version of this feature."),
    ("share.version", 3, 1, {}, "only supports versions 0-2"),
    ("group.version", 1, 2, {}, "Can't downgrade to a newer version."),
])
def test_refused_updates_say_why_as_kafka_does(name: str, level: int, kind: int, current: dict[str, int],
                                               reason: str) -> None:
    refused = check_update(name, level, kind, current, 1)
    assert refused is not None and reason in refused


@pytest.mark.parametrize(("name", "level", "kind"), [
    ("transaction.version", 0, UpgradeType.SAFE_DOWNGRADE), ("transaction.version", 2, UpgradeType.UPGRADE),
    ("group.version", 0, UpgradeType.UNSAFE_DOWNGRADE), ("kraft.version", 1, UpgradeType.UPGRADE),
    ("metadata.version", 33, UpgradeType.UPGRADE), ("share.version", 2, UpgradeType.UPGRADE),
    ("streams.version", 1, UpgradeType.UPGRADE),
])
def test_allowed_updates(name: str, level: int, kind: int) -> None:
    assert check_update(name, level, kind, KAFKA_DEFAULTS, 1) is None


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Any]:
    processes: list[launcher.ServeProcess] = []

    def start() -> int:
        """Start the broker on its data directory, stopping the previous process first (a restart)."""
        for running in processes:
            running.stop(15.0)
        port = launcher.free_ports(1)[0]
        process = launcher.start_serve(launcher.ServeOptions(data_dir=tmp_path / "data", port=port),
                                       tmp_path / f"samsa-{len(processes)}.log", cwd=REPO)
        processes.append(process)
        process.wait_listening(60.0)
        return port

    yield start
    for process in processes:
        process.stop(15.0)


def features(conn: Connection, version: int = 4) -> tuple[dict[str, tuple[int, int]], dict[str, int], int]:
    r = conn.request(18, {"client_software_name": "t", "client_software_version": "1"}, version=version)
    return ({f.name: (f.min_version, f.max_version) for f in r.supported_features},
            {f.name: f.max_version_level for f in r.finalized_features}, r.finalized_features_epoch)


def update(conn: Connection, version: int, *updates: tuple[str, int, int], validate_only: bool = False) -> Any:
    return conn.request(57, {"timeout": 5000, "validate_only": validate_only, "feature_updates": [
        {"feature": f, "max_version_level": level, "upgrade_type": kind, "allow_downgrade": kind > 1}
        for f, level, kind in updates]}, version=version)


def test_update_features_on_the_wire_and_after_a_restart(serve: Any) -> None:
    port = serve()
    with Connection("127.0.0.1", port) as conn:
        supported, finalized, first_epoch = features(conn)
        assert supported["transaction.version"] == (0, 2) and supported["metadata.version"] == (7, 33)
        assert supported["share.version"] == (0, 2) and supported["streams.version"] == (0, 1)
        assert finalized == KAFKA_DEFAULTS
        # v3 leaves out the ranges that start at 0 (KIP-1022), and lists the same finalized levels
        assert features(conn, 3)[:2] == ({"metadata.version": (7, 33)}, KAFKA_DEFAULTS)

        refused = update(conn, 1, ("transaction.version", 1, 1))  # a downgrade without saying so
        assert refused.error_code.value == 95 and refused.results == ()
        assert refused.error_message.startswith("The update failed for all features since the following feature")

        checked = update(conn, 1, ("transaction.version", 1, 2), validate_only=True)
        assert checked.error_code.value == 0
        assert [(r.feature, r.error_code.value, r.error_message) for r in checked.results] == [
            ("transaction.version", 0, "NONE")]
        assert features(conn)[1]["transaction.version"] == 2  # validate_only wrote nothing

        assert update(conn, 2, ("transaction.version", 1, 2)).error_code.value == 0
        assert update(conn, 0, ("group.version", 0, 2)).error_code.value == 0  # v0: allow_downgrade
        _s, finalized, epoch = features(conn)
        assert finalized["transaction.version"] == 1 and "group.version" not in finalized
        assert epoch > first_epoch
    port = serve()
    with Connection("127.0.0.1", port) as conn:
        _s, finalized, _e = features(conn)
        assert finalized["transaction.version"] == 1 and "group.version" not in finalized
        assert update(conn, 2, ("transaction.version", 2, 1)).error_code.value == 0
        assert features(conn)[1]["transaction.version"] == 2


def test_update_features_needs_alter_on_the_cluster(tmp_path: Path) -> None:
    from samsa.broker.security.acl import AclOperation, ResourceType
    from tests.acl.harness import ALICE, acl_broker, allow, call

    broker = acl_broker(tmp_path)
    try:
        values = {"timeout": 5000, "validate_only": False, "feature_updates": [
            {"feature": "transaction.version", "max_version_level": 1, "upgrade_type": 2}]}
        denied = call(broker, 57, 1, values)
        assert (denied.error_code.value, denied.results) == (31, ())  # CLUSTER_AUTHORIZATION_FAILED
        assert broker.image.finalized_features()["transaction.version"] == 2
        allow(broker, ALICE, AclOperation.ALTER, ResourceType.CLUSTER, "kafka-cluster")
        assert call(broker, 57, 1, values).error_code.value == 0
        assert broker.image.finalized_features()["transaction.version"] == 1
    finally:
        broker.close()


def test_kraft_version_comes_from_the_quorum_log_and_snapshot() -> None:
    """A snapshot carrying a voter set (a log an older Samsa wrote with its first voter change, or one
    upgraded since) means kraft.version 1; a static quorum's snapshot without one, 0."""
    from samsa.broker.metadata.raft_disk import image_from_snapshot
    from samsa.raft.log import Snapshot, SnapshotId
    from samsa.raft.voter_set import VoterNode, VoterSet

    data = encode_records(MetadataImage().to_records())
    voters = VoterSet((VoterNode(1, uuid.UUID(int=1)),)).encode()
    assert image_from_snapshot(Snapshot(SnapshotId(10, 1), data, voters)).finalized_features()["kraft.version"] == 1
    assert "kraft.version" not in image_from_snapshot(Snapshot(SnapshotId(10, 1), data)).finalized_features()
    assert image_from_snapshot(Snapshot(SnapshotId(10, 1), data, voters)).apply([], 11).kraft_version == 1
