"""A consumer group outlives its coordinator: three brokers, the group's coordinator is killed, and the
broker that leads its __consumer_offsets partition next replays the group (epochs, members, assignments)
from the records it replicated; the members carry on with their epochs, without a rebalance."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cluster"))

from cluster_harness import Cluster, unique, wait_for

from samsa.kproto.errors import ErrorCode

OVERRIDES = ("replica.lag.time.max.ms=3000", "broker.session.timeout.ms=3000", "broker.heartbeat.interval.ms=500",
             "group.consumer.session.timeout.ms=60000", "group.consumer.assignment.interval.ms=0")


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    c = Cluster(tmp_path / "cluster", 3, OVERRIDES)
    try:
        c.up()
        yield c
    finally:
        c.stop()


def coordinator_of(cluster: Cluster, node: int, group: str) -> int | None:
    try:
        with cluster.connect(node, 10) as conn:
            r = conn.request(10, {"key": group, "key_type": 0}, version=3)
    except OSError:
        return None
    return int(r.node_id) if r.error_code == ErrorCode.none else None


def heartbeat(cluster: Cluster, node: int, group: str, member: str, epoch: int, topics: list[str] | None,
              owned: Any) -> Any:
    with cluster.connect(node, 10) as conn:
        return conn.request(68, {
            "group_id": group, "member_id": member, "member_epoch": epoch, "instance_id": None,
            "rebalance_timeout": 30000 if epoch == 0 else -1, "subscribed_topic_names": topics,
            "subscribed_topic_regex": None, "server_assignor": None, "topic_partitions": owned}, version=1)


def owned_of(r: Any) -> list[dict[str, Any]]:
    return [{"topic_id": t.topic_id, "partitions": list(t.partitions)} for t in r.assignment.topic_partitions]


def describe(cluster: Cluster, node: int, group: str) -> Any:
    with cluster.connect(node, 10) as conn:
        return conn.request(69, {"group_ids": [group], "include_authorized_operations": False}, version=1).groups[0]


@pytest.mark.timeout(240)
def test_the_group_moves_with_its_coordinator(cluster: Cluster) -> None:
    topic, group = unique("t"), unique("g")
    with cluster.connect(1, 30) as conn:
        r = conn.request(19, {"topics": [{"name": topic, "num_partitions": 4, "replication_factor": 3}],
                              "timeout": 30000})
        assert r.topics[0].error_code.value == 0
    coordinator = wait_for("a coordinator", lambda: coordinator_of(cluster, 1, group), 60)[0]

    def joined() -> Any:
        r = heartbeat(cluster, coordinator, group, "m-a", 0, [topic], [])
        return r if r.error_code == ErrorCode.none and r.assignment.topic_partitions else None

    a = wait_for("m-a joined with partitions", joined, 60)[0]
    b = heartbeat(cluster, coordinator, group, "m-b", 0, [topic], [])
    assert b.error_code == ErrorCode.none
    a2 = heartbeat(cluster, coordinator, group, "m-a", a.member_epoch, None, owned_of(a))
    heartbeat(cluster, coordinator, group, "m-a", a2.member_epoch, None, owned_of(a2))
    b2 = heartbeat(cluster, coordinator, group, "m-b", b.member_epoch, None, [])
    assert b2.error_code == ErrorCode.none and sum(len(t.partitions) for t in b2.assignment.topic_partitions) == 2
    before = describe(cluster, coordinator, group)
    assert before.group_state == "Stable"

    cluster.kill(coordinator)
    survivor = next(n for n in cluster.node_ids if n != coordinator)
    new = wait_for("a new coordinator", lambda: ((n := coordinator_of(cluster, survivor, group)) is not None
                   and n != coordinator and n) or None, 60)[0]

    def described() -> Any:
        d = describe(cluster, new, group)
        return d if d.error_code == ErrorCode.none else None

    after = wait_for("the group on its new coordinator", described, 60)[0]
    assert (after.group_epoch, after.assignment_epoch, after.group_state) == (
        before.group_epoch, before.assignment_epoch, "Stable")
    assert sorted((m.member_id, m.member_epoch, m.assignment) for m in after.members) == sorted(
        (m.member_id, m.member_epoch, m.assignment) for m in before.members)
    again = heartbeat(cluster, new, group, "m-b", b2.member_epoch, None, owned_of(b2))
    assert again.error_code == ErrorCode.none and again.member_epoch == b2.member_epoch


@pytest.mark.timeout(240)
def test_a_mixed_group_moves_with_its_coordinator(cluster: Cluster) -> None:
    """KIP-848's online migration across a coordinator move: a classic group upgraded by a consumer-protocol member
    is replayed by the next coordinator with its classic member still classic (ClassicMemberMetadata)."""
    import struct

    from samsa.broker.group.consumer_protocol import encode_assignment

    topic, group = unique("t"), unique("g")
    with cluster.connect(1, 30) as conn:
        r = conn.request(19, {"topics": [{"name": topic, "num_partitions": 2, "replication_factor": 3}],
                              "timeout": 30000})
        assert r.topics[0].error_code.value == 0
    coordinator = wait_for("a coordinator", lambda: coordinator_of(cluster, 1, group), 60)[0]
    name = topic.encode()
    subscription = struct.pack(">hih", 1, 1, len(name)) + name + struct.pack(">ii", -1, 0)

    def classic(node: int, api: int, body: dict[str, Any], version: int) -> Any:
        with cluster.connect(node, 30) as conn:
            return conn.request(api, {"group_id": group, **body}, version=version)

    join = {"session_timeout": 30000, "rebalance_timeout": 30000, "member_id": "", "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": subscription}]}
    first = classic(coordinator, 11, join, 3)
    assert first.error_code == ErrorCode.none and first.leader == first.member_id
    a = first.member_id
    synced = classic(coordinator, 14, {"generation_id": 1, "member_id": a, "assignments": [
        {"member_id": a, "assignment": encode_assignment(1, [(topic, [0, 1])])}]}, 3)
    assert synced.error_code == ErrorCode.none
    b = heartbeat(cluster, coordinator, group, "m-b", 0, [topic], [])
    assert b.error_code == ErrorCode.none and b.member_epoch == 2  # the group was upgraded
    hb = {"generation_id": 1, "member_id": a}
    assert classic(coordinator, 12, hb, 3).error_code == ErrorCode.rebalance_in_progress
    before = describe(cluster, coordinator, group)

    cluster.kill(coordinator)
    survivor = next(n for n in cluster.node_ids if n != coordinator)
    new = wait_for("a new coordinator", lambda: ((n := coordinator_of(cluster, survivor, group)) is not None
                   and n != coordinator and n) or None, 60)[0]

    def described() -> Any:
        d = describe(cluster, new, group)
        return d if d.error_code == ErrorCode.none else None

    after = wait_for("the group on its new coordinator", described, 60)[0]
    assert (after.group_epoch, after.assignment_epoch) == (before.group_epoch, before.assignment_epoch)
    assert sorted((m.member_id, m.member_epoch, m.member_type) for m in after.members) == sorted(
        [(a, 1, 0), ("m-b", 2, 1)])
    # The classic member goes on as one: told to rejoin at its generation; rejoining owning nothing (an eager
    # consumer revokes everything first) it moves straight to the group's epoch.
    assert classic(new, 12, hb, 3).error_code == ErrorCode.rebalance_in_progress
    rejoined = classic(new, 11, {**join, "member_id": a}, 3)
    assert (rejoined.error_code, rejoined.generation_id, rejoined.leader) == (ErrorCode.none, 2, "")
    assert classic(new, 14, {"generation_id": 2, "member_id": a, "assignments": []}, 3).error_code == ErrorCode.none
