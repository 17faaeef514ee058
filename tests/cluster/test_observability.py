"""Observability of a real 3-node cluster: a killed follower shows up in the leader's
kafka_server_replicamanager_underreplicatedpartitions on /metrics and leaves it once restarted and back in the
ISR; `samsa cluster health` reports each node's own /health/ready beside the Metadata figures, so the killed
node is named as not ready and the cluster unhealthy until it rejoins."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from cluster_harness import Cluster, unique, wait_for
from prometheus_client.parser import text_string_to_metric_families

from samsa.kproto.errors import ErrorCode

REPO = Path(__file__).resolve().parents[2]
# replica.lag.time.max.ms bounds how long a dead follower stays in the ISR; the session timeout how long
# before the controller fences it. The waits below are generous multiples of both (a shared machine).
FAST = ("replica.lag.time.max.ms=3000", "broker.session.timeout.ms=3000", "broker.heartbeat.interval.ms=500")
WAIT_S = 60.0
URP = "kafka_server_replicamanager_underreplicatedpartitions"


def scrape(cluster: Cluster, node_id: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float] | None:
    node = cluster.plan.node(node_id)
    assert node.metrics_port is not None, "the harness gives every node samsa.metrics.listen"
    try:
        with urllib.request.urlopen(f"http://{node.host}:{node.metrics_port}/metrics", timeout=5) as r:
            text = r.read().decode()
    except OSError:
        return None
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def health(cluster: Cluster, bootstrap: str) -> dict[str, Any]:
    r = subprocess.run([sys.executable, "-m", "samsa.broker.cli", "cluster", "health", "--output", "json",
                        "--dir", str(cluster.plan.directory), "-b", bootstrap],
                       cwd=REPO, capture_output=True, timeout=60, check=False)
    assert b"Traceback" not in r.stderr, r.stderr.decode()
    report: dict[str, Any] = json.loads(r.stdout)
    return report


def partition(cluster: Cluster, node_id: int, topic: str) -> Any:
    try:
        t = cluster.metadata(node_id, [topic]).topics[0]
    except OSError:
        return None
    return t.partitions[0] if t.error_code == ErrorCode.none and t.partitions else None


@pytest.mark.timeout(300)
def test_killed_follower_is_under_replicated_on_the_leader_and_not_ready_in_cluster_health(
        cluster_factory: Callable[..., Cluster]) -> None:
    cluster = cluster_factory(overrides=FAST)
    nodes = cluster.node_ids
    topic = unique("urp")
    with cluster.connect(nodes[0], 15) as conn:
        r = conn.request(19, {"timeout": 15000, "validate_only": False, "topics": [{
            "name": topic, "num_partitions": 1, "replication_factor": 3, "assignments": (), "configs": ()}]})
    assert r.topics[0].error_code == ErrorCode.none
    p, _ = wait_for("the partition with its full ISR", lambda: (p := partition(cluster, nodes[0], topic)) and
                    p.leader_id >= 0 and sorted(p.isr_nodes) == nodes and p, 30)
    leader = int(p.leader_id)
    quorum, _ = wait_for("the quorum leader", cluster.quorum_leader, 30)
    # a follower that is neither the partition's leader nor the active controller
    victim = next(n for n in nodes if n not in (leader, quorum.leader_id))
    bootstrap = f"{cluster.host(leader)}:{cluster.port(leader)}"
    labels = (("partition", "0"), ("topic", topic))

    def urp(expected: int) -> bool | None:
        samples = scrape(cluster, leader)
        if samples is None:
            return None
        return (samples.get((URP, ())) == expected and
                samples.get(("kafka_cluster_partition_underreplicated", labels)) == expected) or None

    wait_for("no under-replicated partition on the leader", lambda: urp(0), WAIT_S)
    before, _ = wait_for("every node ready", lambda: (h := health(cluster, bootstrap))["healthy"] and h, WAIT_S)
    assert {int(n): r["ready"] for n, r in before["readiness"].items()} == dict.fromkeys(nodes, True)
    samples = scrape(cluster, leader)
    assert samples is not None and ("samsa_group_rebalance_duration_seconds_count", ()) in samples

    cluster.kill(victim)
    _, took = wait_for(f"{topic}-0 under-replicated on leader {leader}", lambda: urp(1), WAIT_S)
    print(f"under-replicated on /metrics {took:.1f} s after the kill (replica.lag.time.max.ms=3000)")
    report = health(cluster, bootstrap)
    assert report["healthy"] is False
    assert report["readiness"][str(victim)]["ready"] is False
    assert "no answer" in report["readiness"][str(victim)]["reasons"][0]
    assert all(report["readiness"][str(n)]["ready"] for n in nodes if n != victim), report["readiness"]

    cluster.start(victim)
    _, took = wait_for(f"{topic}-0 fully replicated again", lambda: urp(0), WAIT_S)
    print(f"left under-replicated {took:.1f} s after the restart")
    after, _ = wait_for("every node ready again", lambda: (h := health(cluster, bootstrap))["healthy"] and h, WAIT_S)
    assert {int(n): r["ready"] for n, r in after["readiness"].items()} == dict.fromkeys(nodes, True)
