"""UnregisterBroker (kafka-cluster unregister --id N) on a real 3-node cluster: a stopped broker's registration
is removed by the active controller (the request forwarded from another broker), its leadership and ISR
membership move off it as when it is fenced, Metadata and DescribeCluster stop listing it (fenced or not),
and it registers again when it restarts. An id without a registration answers BROKER_ID_NOT_REGISTERED."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from cluster_harness import Cluster, unique, wait_for

from samsa.kproto.errors import ErrorCode

# Sessions and replica lag long enough that the stopped broker stays registered, unfenced and in every ISR
# until it is unregistered: what moves off it below is unregistration's doing, not fencing's.
SLOW = ("broker.session.timeout.ms=120000", "broker.heartbeat.interval.ms=500", "replica.lag.time.max.ms=120000")


def _unregister(cluster: Cluster, via: int, broker_id: int) -> tuple[ErrorCode, str | None]:
    with cluster.connect(via, 20) as conn:
        r = conn.request(64, {"broker_id": broker_id}, version=0)
    return ErrorCode(r.error_code), r.error_message


def _registered(cluster: Cluster, node_id: int) -> dict[int, bool] | None:
    """broker id -> fenced, as DescribeCluster v2 with fenced brokers lists them through `node_id`."""
    try:
        with cluster.connect(node_id, 10) as conn:
            r = conn.request(60, {"include_cluster_authorized_operations": False, "endpoint_type": 1,
                                  "include_fenced_brokers": True}, version=2)
    except Exception:  # a node still starting: ask again
        return None
    return {int(b.broker_id): bool(b.is_fenced) for b in r.brokers}


def _partitions(cluster: Cluster, node_id: int, topic: str) -> dict[int, tuple[int, list[int], list[int]]] | None:
    try:
        t = cluster.metadata(node_id, [topic]).topics[0]
    except Exception:  # a node still starting: ask again
        return None
    if t.error_code != ErrorCode.none or not t.partitions:
        return None
    return {int(p.partition_index): (int(p.leader_id), sorted(p.isr_nodes), sorted(p.replica_nodes))
            for p in t.partitions}


@pytest.mark.timeout(240)
def test_unregister_a_stopped_broker_then_restart_it(cluster_factory: Callable[..., Cluster]) -> None:
    cluster = cluster_factory(3, SLOW)
    leader = wait_for("a quorum leader", cluster.quorum_leader, 30)[0].leader_id
    victim, observer = (n for n in cluster.node_ids if n != leader)
    topic = unique("unreg")
    # Three partitions, each on all three brokers, the victim leading partition 0.
    order = [[victim, leader, observer], [leader, victim, observer], [observer, leader, victim]]
    with cluster.connect(observer, 20) as conn:
        r = conn.request(19, {"timeout": 15000, "validate_only": False, "topics": [{
            "name": topic, "num_partitions": -1, "replication_factor": -1, "configs": [],
            "assignments": [{"partition_index": i, "broker_ids": b} for i, b in enumerate(order)]}]})
    assert r.topics[0].error_code == ErrorCode.none

    def settled() -> Any:
        parts = _partitions(cluster, observer, topic)
        if parts is None or any(len(isr) != 3 or lead != order[p][0] for p, (lead, isr, _) in parts.items()):
            return None
        return parts

    wait_for("every replica in sync", settled, 30)

    assert _unregister(cluster, observer, 42) == (ErrorCode.broker_id_not_registered,
                                                 "Broker ID 42 is not currently registered")

    cluster.kill(victim)
    assert (_registered(cluster, observer) or {}).get(victim) is False  # still registered and unfenced
    assert _unregister(cluster, observer, victim) == (ErrorCode.none, None)

    def gone() -> Any:
        registered = _registered(cluster, observer)
        parts = _partitions(cluster, observer, topic)
        if registered is None or victim in registered or parts is None:
            return None
        if any(lead == victim or victim in isr for lead, isr, _ in parts.values()):
            return None
        return registered, parts

    (registered, parts), _ = wait_for(f"broker {victim} unregistered", gone, 30)
    assert registered == {leader: False, observer: False}
    assert cluster.brokers(observer) == {leader, observer}
    # Partition 0 is led by the next in-sync replica; the victim stays among every partition's replicas.
    assert parts[0][0] == leader
    assert all(sorted(isr) == sorted([leader, observer]) and replicas == sorted(cluster.node_ids)
               for _, isr, replicas in parts.values())
    assert _unregister(cluster, leader, victim)[0] == ErrorCode.broker_id_not_registered  # once only

    cluster.start(victim)

    def back() -> Any:
        registered = _registered(cluster, observer)
        parts = _partitions(cluster, observer, topic)
        if registered != {n: False for n in cluster.node_ids} or parts is None:
            return None
        return parts if all(victim in isr for _, isr, _ in parts.values()) else None

    wait_for(f"broker {victim} registered again and back in sync", back, 60)
