"""Three real voters: one leader is elected, every node lists every broker, a topic created through a
non-controller node reaches all three, and a real client produces and consumes across brokers."""

from __future__ import annotations

import time

import pytest
from cluster_harness import Cluster, QuorumView, unique, wait_for
from kafka import KafkaConsumer, KafkaProducer

from samsa.kproto.errors import ErrorCode

ELECTION_BOUND_S = 20.0


@pytest.mark.timeout(90)
def test_one_leader_and_every_broker_listed_everywhere(cluster: Cluster) -> None:
    started = time.monotonic()
    views, took = wait_for("every node to describe the same leader",
                           lambda: _agreeing_views(cluster), ELECTION_BOUND_S)
    leader = views[0]
    print(f"leader {leader.leader_id} in epoch {leader.leader_epoch}, agreed on by all in {took:.2f} s")
    assert leader.leader_id in cluster.node_ids
    assert leader.leader_epoch >= 1
    assert set(leader.voters) == set(cluster.node_ids)
    assert leader.observers == {}
    for node_id in cluster.node_ids:
        assert cluster.brokers(node_id) == set(cluster.node_ids), f"node {node_id}"
        md = cluster.metadata(node_id, [])
        assert {(b.host, b.port) for b in md.brokers} == {("127.0.0.1", cluster.port(n)) for n in cluster.node_ids}
        assert md.cluster_id == cluster.metadata(cluster.node_ids[0], []).cluster_id
    print(f"checked in {time.monotonic() - started:.2f} s")


def _agreeing_views(cluster: Cluster) -> list[QuorumView] | None:
    """DescribeQuorum from every node, if each names the same leader and epoch."""
    views = [v for n in cluster.node_ids if (v := cluster.describe_quorum(n)) is not None
             and v.error_code == ErrorCode.none and v.leader_id >= 0]
    if len(views) != len(cluster.node_ids) or len({(v.leader_id, v.leader_epoch) for v in views}) != 1:
        return None
    return views


@pytest.mark.timeout(120)
def test_topic_through_a_follower_reaches_every_node_and_clients_use_all_brokers(cluster: Cluster) -> None:
    leader = wait_for("a leader", cluster.quorum_leader, ELECTION_BOUND_S)[0]
    follower = next(n for n in cluster.node_ids if n != leader.leader_id)
    topic, partitions = unique("spread"), 6

    started = time.monotonic()
    error, message = cluster.create_topic(follower, topic, partitions)
    created = time.monotonic() - started
    assert error == ErrorCode.none, message
    seen = {}
    for node_id in cluster.node_ids:
        seen[node_id] = wait_for(f"{topic} in node {node_id}'s Metadata",
                                 lambda n=node_id: cluster.topic_visible(n, topic, partitions), 10)[1]
    print(f"CreateTopics through follower {follower} (leader {leader.leader_id}) answered in {created * 1000:.0f} ms; "
          "visible on every node within " + ", ".join(f"node {n}: {s * 1000:.0f} ms" for n, s in seen.items()))
    leaders = {n: cluster.leaders(n, topic) for n in cluster.node_ids}
    assert len({tuple(sorted(v.items())) for v in leaders.values() if v}) == 1, leaders
    placement = leaders[follower]
    assert placement is not None
    assert {leader_id for leader_id, _ in placement.values()} == set(cluster.node_ids), placement

    count = 60
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers.split(",")[-1], acks="all",
                             enable_idempotence=False, linger_ms=5, request_timeout_ms=15000)
    try:
        futures = [producer.send(topic, key=f"k{i}".encode(), value=f"v{i}".encode(), partition=i % partitions)
                   for i in range(count)]
        producer.flush(timeout=30)
        offsets = [f.get(timeout=30) for f in futures]
    finally:
        producer.close(timeout=10)
    assert {m.partition for m in offsets} == set(range(partitions))

    consumer = KafkaConsumer(topic, bootstrap_servers=cluster.bootstrap_servers.split(",")[0],
                             group_id=unique("group"), auto_offset_reset="earliest", enable_auto_commit=True,
                             client_id="cluster-test-consumer")
    try:
        values: dict[int, set[str]] = {}
        deadline = time.monotonic() + 45
        while sum(map(len, values.values())) < count and time.monotonic() < deadline:
            for tp, messages in consumer.poll(timeout_ms=500).items():
                values.setdefault(tp.partition, set()).update(m.value.decode() for m in messages)
    finally:
        consumer.close()
    assert set().union(*values.values()) == {f"v{i}" for i in range(count)}
    assert {p: len(v) for p, v in values.items()} == {p: count // partitions for p in range(partitions)}
