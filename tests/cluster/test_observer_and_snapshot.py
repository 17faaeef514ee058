"""A broker-only node (a quorum observer) and a voter that fell behind the leader's log start and
catches up from a snapshot (FetchSnapshot), with real processes."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from cluster_harness import HOST, Cluster, unique, wait_for

from samsa.broker import launcher
from samsa.broker.client import Connection, KafkaClientError
from samsa.kproto.errors import ErrorCode

REPO = Path(__file__).resolve().parents[2]


def _created(cluster: Cluster, node_id: int, topic: str, partitions: int = 1) -> bool | None:
    error, _message = cluster.create_topic(node_id, topic, partitions, timeout_s=15)
    return True if error in (ErrorCode.none, ErrorCode.topic_already_exists) else None


@pytest.fixture
def observer(cluster: Cluster, tmp_path: Path) -> Iterator[tuple[int, int]]:
    """Node 4: roles=broker, following the three voters' quorum without a vote (no controller listener)."""
    port = launcher.free_port()
    served = launcher.start_serve(
        launcher.ServeOptions(data_dir=tmp_path / "node-4", port=port, host=HOST, node_id=4, roles="broker",
                              controller_quorum=cluster.plan.quorum),
        tmp_path / "node-4.log", cwd=REPO)
    try:
        yield 4, port
    finally:
        code = served.stop(10)
        if code not in (0, None):
            print(served.log_tail(60))


@pytest.mark.timeout(120)
def test_a_broker_only_node_observes_the_quorum_and_hosts_partitions(
        cluster: Cluster, observer: tuple[int, int]) -> None:
    node_id, port = observer
    wait_for("node 4 listed by node 1", lambda: (cluster.brokers(1) or set()) >= {1, 2, 3, 4} or None, 30)
    view = wait_for("a leader", cluster.quorum_leader, 20)[0]
    assert node_id not in view.voters, view  # it follows without voting
    wait_for("node 4 among the observers",
             lambda: ((v := cluster.quorum_leader()) is not None and node_id in v.observers) or None, 20)

    topic = unique("spread")
    wait_for(f"{topic} created through node 4", lambda: _created_via(port, topic, 8), 30)
    leaders = wait_for(f"{topic} on node 1", lambda: cluster.leaders(1, topic), 20)[0]
    assert {leader for leader, _ in leaders.values()} == {1, 2, 3, 4}, leaders  # placed on the observer too


def _created_via(port: int, topic: str, partitions: int) -> bool | None:
    try:
        with Connection(HOST, port, client_id="cluster-test", timeout_s=15) as conn:
            r = conn.request(19, {"topics": [{"name": topic, "num_partitions": partitions, "replication_factor": -1,
                                              "assignments": (), "configs": ()}],
                                  "timeout": 15000, "validate_only": False})
    except (OSError, KafkaClientError):
        return None
    return True if r.topics[0].error_code in (ErrorCode.none, ErrorCode.topic_already_exists) else None


@pytest.mark.timeout(150)
def test_a_voter_behind_the_log_start_catches_up_from_a_snapshot(cluster_factory: Callable[..., Cluster]) -> None:
    cluster = cluster_factory(overrides=("samsa.metadata.snapshot.interval.entries=5",))
    leader = wait_for("a leader", cluster.quorum_leader, 20)[0].leader_id
    behind = next(n for n in cluster.node_ids if n != leader)
    cluster.kill(behind)
    topics = [unique(f"while-down-{i}") for i in range(15)]
    for topic in topics:
        wait_for(f"{topic} created", lambda t=topic: _created(cluster, leader, t), 20)  # type: ignore[misc]
    leader_dir = cluster.plan.node(leader).data_dir / "__cluster_metadata-0"
    assert list(leader_dir.glob("*.checkpoint")), "the leader took no snapshot"

    started = time.monotonic()
    cluster.start(behind)
    for topic in topics:
        wait_for(f"{topic} on node {behind}", lambda t=topic: cluster.leaders(behind, t), 30)  # type: ignore[misc]
    print(f"node {behind} caught up {time.monotonic() - started:.2f} s after its restart")
    assert "installed the leader's metadata snapshot" in cluster.log_tail(behind, 400)
    # a restarted follower finds the active controller from its quorum state: registered and unfenced
    wait_for(f"node {behind} listed again", lambda: behind in (cluster.brokers(cluster.node_ids[0]) or set())
             or None, 20)
    # and it is a voter in good standing again: its log reaches the leader's high watermark
    wait_for("node back in step", lambda: ((v := cluster.quorum_leader()) is not None
             and v.voters.get(behind, -1) >= v.high_watermark) or None, 20)
