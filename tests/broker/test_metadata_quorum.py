"""The metadata quorum's driver and the controller's broker lifecycle, in process (a one-voter quorum).

Multi-node behaviour over real processes is in tests/cluster; these check what one node persists,
replays and decides: commits, restarts, snapshots, registration, heartbeats and fencing.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from samsa.broker.config import BrokerConfig
from samsa.broker.controller import AlterPartitionChange, Controller, TopicSpec
from samsa.broker.metadata.image import MetadataImage
from samsa.broker.metadata.log import METADATA_LOG_CONFIG
from samsa.broker.metadata.quorum import (
    Endpoint,
    MetadataQuorum,
    NotControllerError,
    latest_snapshot,
    read_quorum_state,
)
from samsa.broker.metadata.records import (
    ConfigRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    TopicRecord,
)
from samsa.kproto.errors import ErrorCode
from samsa.storage.log import Log


def _open(directory: Path, *, snapshot_every: int = 10_000) -> tuple[Log, MetadataQuorum]:
    log = Log.open(directory, METADATA_LOG_CONFIG, now_ms=int(time.time() * 1000))
    quorum = MetadataQuorum(node_id=1, cluster_id="c", voters={1: Endpoint("127.0.0.1", 0)}, log=log,
                            snapshot_every_entries=snapshot_every)
    return log, quorum


def test_single_voter_commits_at_once_and_survives_restart(tmp_path: Path) -> None:
    d = tmp_path / "__cluster_metadata-0"
    log, quorum = _open(d)
    assert quorum.is_leader and quorum.epoch == 1
    offset = quorum.write_nowait([TopicRecord("a", "id-a"), ConfigRecord(2, "a", "retention.ms", "5")])
    assert isinstance(offset, int)  # committed before returning: no network, one voter
    assert quorum.image.topics_by_name["a"].topic_id == "id-a"
    assert quorum.image.topic_configs("a") == {"retention.ms": "5"}
    log.close()

    state = json.loads((d / "quorum-state").read_text())
    assert state["leaderId"] == 1 and state["leaderEpoch"] == 1

    log, quorum = _open(d)
    # A restarted leader never resumes its epoch: it elects itself in a new one and replays the log.
    assert quorum.is_leader and quorum.epoch == 2
    assert quorum.image.topics_by_name["a"].topic_id == "id-a"
    assert quorum.image.topic_configs("a") == {"retention.ms": "5"}
    assert read_quorum_state(d) is not None
    log.close()


def test_snapshot_replaces_the_log_prefix_and_replays_identically(tmp_path: Path) -> None:
    d = tmp_path / "__cluster_metadata-0"
    log, quorum = _open(d, snapshot_every=5)
    for i in range(12):
        quorum.write_nowait([TopicRecord(f"t{i}", f"id{i}"), ProducerIdsRecord(1, 0, 1000 * (i + 1))])
    quorum.write_nowait([RegisterBrokerRecord(7, 3, "inc", "h", 9, "r1", False)])
    before = quorum.image
    snapshot = latest_snapshot(d)
    assert snapshot is not None and snapshot.snapshot_id.end_offset >= 5
    assert log.log_start_offset == snapshot.snapshot_id.end_offset
    log.close()

    log, quorum = _open(d, snapshot_every=5)
    after = quorum.image
    assert set(after.topics_by_name) == set(before.topics_by_name) == {f"t{i}" for i in range(12)}
    assert after.next_producer_id == before.next_producer_id == 12_000
    assert after.brokers[7] == before.brokers[7]
    log.close()


def test_a_damaged_snapshot_is_ignored(tmp_path: Path) -> None:
    d = tmp_path / "__cluster_metadata-0"
    log, quorum = _open(d, snapshot_every=3)
    for i in range(4):
        quorum.write_nowait([TopicRecord(f"t{i}", f"id{i}")])
    log.close()
    (path,) = d.glob("*.checkpoint")
    raw = bytearray(path.read_bytes())
    raw[-1] ^= 0xFF
    path.write_bytes(bytes(raw))
    assert latest_snapshot(d) is None


def test_image_to_records_rebuilds_the_image(tmp_path: Path) -> None:
    d = tmp_path / "__cluster_metadata-0"
    log, quorum = _open(d)
    config = BrokerConfig(overrides={"node.id": "1"}, data_dir=tmp_path)
    controller = Controller(config, quorum)
    controller.register_broker(1, "inc-1", "127.0.0.1", 9092, None, 0).result()
    controller.create_topics([TopicSpec("x", 3, 1, configs={"cleanup.policy": "compact"})],
                             validate_only=False).result()
    controller.alter_broker_configs("", {"log.retention.ms": "1000"}, replace_all=False,
                                    validate_only=False).result()
    image = quorum.image
    rebuilt = MetadataImage().apply(image.to_records(), image.offset)
    assert dict(rebuilt.topics_by_name) == dict(image.topics_by_name)
    assert {k: dict(v) for k, v in rebuilt.configs.items()} == {k: dict(v) for k, v in image.configs.items()}
    assert dict(rebuilt.brokers) == dict(image.brokers)
    log.close()


@pytest.fixture
def controller(tmp_path: Path) -> Controller:
    _log, quorum = _open(tmp_path / "__cluster_metadata-0")
    config = BrokerConfig(overrides={"node.id": "1", "broker.session.timeout.ms": "1000"}, data_dir=tmp_path)
    return Controller(config, quorum)


def test_registration_heartbeat_and_fencing(controller: Controller) -> None:
    now = 1_000_000.0
    epoch1 = controller.register_broker(1, "inc-1", "h", 1, None, now).result()
    epoch2 = controller.register_broker(2, "inc-2", "h", 2, None, now).result()
    assert controller.image.brokers[2].fenced  # fenced until it has caught up
    assert controller.live_brokers() == ()

    # A heartbeat from behind its own registration does not unfence.
    error, beat = controller.heartbeat(2, epoch2, -1, False, False, now)
    assert error == ErrorCode.none and beat is not None and beat.result().is_fenced
    offset = controller.image.brokers[2].registration_offset
    error, beat = controller.heartbeat(2, epoch2, offset, False, False, now)
    assert beat is not None and not beat.result().is_fenced
    controller.heartbeat(1, epoch1, controller.image.offset, False, False, now)
    assert controller.live_brokers() == (1, 2)

    # A stale epoch is refused; the broker must register again.
    error, beat = controller.heartbeat(2, epoch2 - 1, offset, False, False, now)
    assert error == ErrorCode.stale_broker_epoch and beat is None

    (result,) = controller.create_topics([TopicSpec("t", assignments={0: (2,), 1: (1,)})],
                                         validate_only=False).result()
    assert result.error_code == ErrorCode.none
    parts = controller.image.topics_by_name["t"].partitions
    assert parts[0].leader == 2 and parts[1].leader == 1

    # No heartbeat from 2 for the session timeout: fenced, and its partition has no leader left
    # (its only replica); this node's own broker is never fenced by its own controller.
    assert controller.fence_expired_brokers(now + 999) is None
    fenced = controller.fence_expired_brokers(now + 1001)
    assert fenced is not None and fenced.result() == [2]
    assert controller.image.brokers[2].fenced
    parts = controller.image.topics_by_name["t"].partitions
    assert parts[0].leader == -1 and parts[0].isr == (2,)
    assert parts[1].leader == 1
    epoch_before = parts[0].leader_epoch

    # It comes back (same incarnation heartbeats again) from behind its fencing: its image may still
    # show it leading, so it stays fenced until it has applied the record that fenced it.
    fenced_at = controller.image.brokers[2].registration_offset
    assert fenced_at > offset
    error, beat = controller.heartbeat(2, epoch2, fenced_at - 1, False, False, now + 2000)
    assert beat is not None and beat.result().is_fenced
    assert controller.image.topics_by_name["t"].partitions[0].leader == -1
    # Caught up: unfenced, and leads its partition again.
    error, beat = controller.heartbeat(2, epoch2, controller.image.offset, False, False, now + 2000)
    assert beat is not None and not beat.result().is_fenced
    part = controller.image.topics_by_name["t"].partitions[0]
    assert part.leader == 2 and part.leader_epoch > epoch_before


def test_replicas_are_placed_on_live_brokers_only(controller: Controller) -> None:
    now = 0.0
    for node in (1, 2):
        epoch = controller.register_broker(node, f"inc-{node}", "h", node, None, now).result()
        controller.heartbeat(node, epoch, controller.image.offset, False, False, now)
    controller.register_broker(3, "inc-3", "h", 3, None, now).result()  # registered, still fenced
    assert controller.live_brokers() == (1, 2)
    (ok,) = controller.create_topics([TopicSpec("r2", 4, 2)], validate_only=False).result()
    assert ok.error_code == ErrorCode.none
    for p in controller.image.topics_by_name["r2"].partitions.values():
        assert sorted(p.replicas) == [1, 2] and p.isr == p.replicas and p.leader == p.replicas[0]
    leaders = {p.leader for p in controller.image.topics_by_name["r2"].partitions.values()}
    assert leaders == {1, 2}  # leadership spread over the brokers
    (refused,) = controller.create_topics([TopicSpec("r3", 1, 3)], validate_only=False).result()
    assert refused.error_code == ErrorCode.invalid_replication_factor


def test_a_follower_cannot_write(tmp_path: Path) -> None:
    d = tmp_path / "__cluster_metadata-0"
    log = Log.open(d, METADATA_LOG_CONFIG, now_ms=int(time.time() * 1000))
    # Three voters, none reachable: this node is not the leader, and writes say who to ask (nobody yet).
    quorum = MetadataQuorum(node_id=1, cluster_id="c", log=log, voters={
        1: Endpoint("127.0.0.1", 1), 2: Endpoint("127.0.0.1", 2), 3: Endpoint("127.0.0.1", 3)})
    assert not quorum.is_leader
    with pytest.raises(NotControllerError):
        quorum.write_nowait([TopicRecord("a", "id")])
    log.close()


def test_alter_partition_changes_the_isr_only_from_the_current_leader_and_epochs(controller: Controller) -> None:
    now = 0.0
    epochs = {}
    for node in (1, 2, 3):
        epochs[node] = controller.register_broker(node, f"inc-{node}", "h", node, None, now).result()
        controller.heartbeat(node, epochs[node], controller.image.offset, False, False, now)
    # Replicated partitions cannot be created yet (RF 1): write one as the replication issue will.
    controller._quorum.write_nowait(
        [TopicRecord("r", "id-r"), PartitionRecord("id-r", 0, (1, 2, 3), (1, 2, 3), 1, 0, 0)])

    def change(isr: tuple[int, ...], leader_epoch: int = 0, partition_epoch: int = 0) -> AlterPartitionChange:
        return AlterPartitionChange("id-r", 0, leader_epoch, partition_epoch, isr)

    error, pending = controller.alter_partition(1, epochs[1], [change((1, 2))])
    assert error == ErrorCode.none and pending is not None
    (result,) = pending.result()
    assert result.error_code == ErrorCode.none and result.isr == (1, 2) and result.partition_epoch == 1
    part = controller.image.topics_by_id["id-r"].partitions[0]
    assert part.isr == (1, 2) and part.partition_epoch == 1 and part.leader_epoch == 0

    # The same (now stale) partition epoch again: refused, nothing written.
    (stale,) = controller.alter_partition(1, epochs[1], [change((1, 2, 3))])[1].result()  # type: ignore[union-attr]
    assert stale.error_code == ErrorCode.invalid_update_version
    # Not the leader; a wrong leader epoch; an ISR without the leader; an old broker epoch.
    (other,) = controller.alter_partition(2, epochs[2], [change((2,), 0, 1)])[1].result()  # type: ignore[union-attr]
    assert other.error_code == ErrorCode.not_leader_or_follower
    (fenced,) = controller.alter_partition(1, epochs[1], [change((1,), 5, 1)])[1].result()  # type: ignore[union-attr]
    assert fenced.error_code == ErrorCode.fenced_leader_epoch
    (bad,) = controller.alter_partition(1, epochs[1], [change((2, 3), 0, 1)])[1].result()  # type: ignore[union-attr]
    assert bad.error_code == ErrorCode.invalid_request
    assert controller.alter_partition(1, epochs[1] - 1, [change((1,), 0, 1)])[0] == ErrorCode.stale_broker_epoch
    assert controller.image.topics_by_id["id-r"].partitions[0].isr == (1, 2)


def test_a_fenced_leader_is_replaced_from_the_isr_only_unless_unclean_election_is_enabled(
        controller: Controller) -> None:
    now = 0.0
    epochs = {}
    for node in (1, 2, 3):
        epochs[node] = controller.register_broker(node, f"inc-{node}", "h", node, None, now).result()
        controller.heartbeat(node, epochs[node], controller.image.offset, False, False, now)
    controller._quorum.write_nowait([
        TopicRecord("in-sync", "id-a"), PartitionRecord("id-a", 0, (2, 3, 1), (2, 3), 2, 0, 0),
        TopicRecord("alone", "id-b"), PartitionRecord("id-b", 0, (2, 3), (2,), 2, 0, 0),
        TopicRecord("unclean", "id-c"), PartitionRecord("id-c", 0, (2, 3), (2,), 2, 0, 0),
        ConfigRecord(2, "unclean", "unclean.leader.election.enable", "true"),
    ])
    for node in (1, 3):  # 2 goes silent
        controller.heartbeat(node, epochs[node], controller.image.offset, False, False, now + 900)
    assert controller.fence_expired_brokers(now + 1001) is not None
    parts = {t.name: t.partitions[0] for t in controller.image.topics_by_name.values()}
    # the next in-sync replica leads, with a new leader epoch; 2 leaves the ISR
    assert (parts["in-sync"].leader, parts["in-sync"].isr, parts["in-sync"].leader_epoch) == (3, (3,), 1)
    # 3 is a replica but not in sync: no leader rather than lost records
    assert (parts["alone"].leader, parts["alone"].isr) == (-1, (2,))
    # unless the topic opts in: then 3 leads, counted
    assert (parts["unclean"].leader, parts["unclean"].isr) == (3, (3,))
    assert controller.unclean_elections == 1
