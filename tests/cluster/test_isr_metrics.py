"""ISR shrinks and expands as a partition leader's /metrics counts them (Kafka's ReplicaManager
IsrShrinksPerSec / IsrExpandsPerSec), with real processes: a killed follower is dropped from the ISR (one
shrink on the leader) and added back once it has caught up after its restart (one expansion)."""

from __future__ import annotations

import urllib.request
from collections.abc import Callable

import pytest
from cluster_harness import Cluster, unique, wait_for
from prometheus_client.parser import text_string_to_metric_families
from test_replication import _create, _isr_full, _partitions

# The follower must leave the ISR because its leader asks (the counters count the leader's AlterPartition, as
# Kafka's do), not because the controller fenced it first (which removes it from every ISR on its own): a
# short replica.lag.time.max.ms, a long session.
LEADER_SHRINKS = ("replica.lag.time.max.ms=2000", "broker.session.timeout.ms=60000",
                  "broker.heartbeat.interval.ms=500")


def _counter(cluster: Cluster, node: int, name: str) -> float:
    url = cluster.plan.node(node).metrics_url
    assert url is not None, "the cluster plan gives every node a metrics listener"
    with urllib.request.urlopen(url, timeout=10) as r:
        text = r.read().decode()
    return sum(s.value for f in text_string_to_metric_families(text) for s in f.samples if s.name == name)


@pytest.mark.timeout(150)
def test_a_killed_follower_is_one_isr_shrink_and_its_return_one_expansion(
        cluster_factory: Callable[..., Cluster]) -> None:
    cluster = cluster_factory(overrides=LEADER_SHRINKS)
    leader = wait_for("a quorum leader", cluster.quorum_leader, 20)[0].leader_id
    others = [n for n in cluster.node_ids if n != leader]
    topic = unique("isrm")
    # Two replicas on the brokers that are not the quorum leader, so the quorum survives losing one.
    wait_for(f"{topic} created", lambda: _create(cluster, leader, topic, 1, 2, {}, {0: others}), 20)
    wait_for("ISR full", lambda: _isr_full(cluster, leader, topic), 20)
    part = _partitions(cluster, leader, topic)
    assert part is not None
    partition_leader = part[0].leader_id
    follower = next(n for n in others if n != partition_leader)
    shrinks = _counter(cluster, partition_leader, "kafka_server_replicamanager_isrshrinks_total")
    expands = _counter(cluster, partition_leader, "kafka_server_replicamanager_isrexpands_total")
    cluster.kill(follower)
    wait_for("the ISR shrunk to the leader", lambda: ((p := _partitions(cluster, leader, topic))
             and list(p[0].isr_nodes) == [partition_leader]) or None, 30)
    wait_for("the shrink counted", lambda: _counter(
        cluster, partition_leader, "kafka_server_replicamanager_isrshrinks_total") == shrinks + 1 or None, 10)
    cluster.start(follower)
    wait_for("ISR full again", lambda: _isr_full(cluster, leader, topic), 30)
    wait_for("the expansion counted", lambda: _counter(
        cluster, partition_leader, "kafka_server_replicamanager_isrexpands_total") == expands + 1 or None, 10)
    assert _counter(cluster, partition_leader, "kafka_server_replicamanager_isrshrinks_total") == shrinks + 1
