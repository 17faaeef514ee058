"""Requests that need the active controller, sent to any broker of a real three-node cluster:
producer ids (AllocateProducerIds behind InitProducerId), config changes (forwarded), a produce to the
wrong broker (redirected, KIP-951), and a graceful shutdown of the quorum leader (EndQuorumEpoch)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from cluster_harness import Cluster, unique, wait_for

from samsa.kproto.errors import ErrorCode
from samsa.kproto.records import encode_batch

RETRIABLE = (ErrorCode.coordinator_load_in_progress, ErrorCode.not_controller, ErrorCode.request_timed_out)


def _producer_id(cluster: Cluster, node_id: int) -> int | None:
    with cluster.connect(node_id) as conn:
        r = conn.request(22, {"transactional_id": None, "transaction_timeout": 60000, "producer_id": -1,
                              "producer_epoch": -1})
    if r.error_code in RETRIABLE:
        return None  # a block is on its way from the controller
    assert r.error_code == ErrorCode.none, r
    return int(r.producer_id)


@pytest.mark.timeout(120)
def test_producer_ids_configs_and_redirects_through_any_broker(cluster: Cluster) -> None:
    wait_for("a leader", cluster.quorum_leader, 20)
    # InitProducerId on every broker at the same moment: each broker's first block is asked for
    # together, and the controller must not hand the same block out twice before the first commits.
    ids: list[int] = []
    threads = [threading.Thread(target=lambda n=n: ids.append(  # type: ignore[misc]
        wait_for(f"a producer id from node {n}", lambda: _producer_id(cluster, n), 20)[0]))
        for n in cluster.node_ids for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    ids += [wait_for(f"a producer id from node {n}", lambda n=n: _producer_id(cluster, n), 20)[0]  # type: ignore[misc]
            for n in cluster.node_ids]
    assert len(ids) == 9 and len(set(ids)) == len(ids), ids

    topic = unique("cfg")
    wait_for(f"{topic} created", lambda: cluster.create_topic(1, topic, 3)[0] == ErrorCode.none or None, 20)
    leaders = wait_for(f"{topic} everywhere", lambda: cluster.leaders(3, topic), 20)[0]
    controller = cluster.quorum_leader()
    assert controller is not None
    follower = next(n for n in cluster.node_ids if n != controller.leader_id)
    with cluster.connect(follower) as conn:
        r = conn.request(44, {"resources": [{"resource_type": 2, "resource_name": topic, "configs": [
            {"name": "retention.ms", "config_operation": 0, "value": "123456"}]}], "validate_only": False})
    assert r.responses[0].error_code == ErrorCode.none, r

    def retention_everywhere() -> bool | None:
        for n in cluster.node_ids:
            with cluster.connect(n) as conn:
                d = conn.request(32, {"resources": [{"resource_type": 2, "resource_name": topic,
                                                     "configuration_keys": ["retention.ms"]}],
                                      "include_synonyms": False, "include_documentation": False})
            if d.results[0].configs[0].value != "123456":
                return None
        return True

    wait_for("the config on every node", retention_everywhere, 20)

    # A produce to a broker that does not lead the partition names the leader and its endpoint.
    partition, (leader, _error) = next(iter(leaders.items()))
    wrong = next(n for n in cluster.node_ids if n != leader)
    batch = encode_batch([(None, b"v", ())], timestamp_ms=int(time.time() * 1000))
    with cluster.connect(wrong) as conn:
        r = conn.request(0, {"transactional_id": None, "acks": 1, "timeout": 5000, "topic_data": [
            {"name": topic, "partition_data": [{"index": partition, "records": batch}]}]}, version=12)
    p = r.responses[0].partition_responses[0]
    assert p.error_code == ErrorCode.not_leader_or_follower, p
    assert p.current_leader.leader_id == leader, p
    assert [(e.node_id, e.port) for e in r.node_endpoints] == [(leader, cluster.port(leader))], r.node_endpoints


@pytest.mark.timeout(120)
def test_graceful_shutdown_of_the_leader_hands_over_at_once(cluster_factory: Callable[..., Cluster]) -> None:
    # With a one-minute fetch timeout, followers would wait a minute before electing on their own:
    # a new leader well before that shows the old one handed over (EndQuorumEpoch) as it stopped.
    cluster = cluster_factory(overrides=("controller.quorum.fetch.timeout.ms=60000",))
    old = wait_for("a leader", cluster.quorum_leader, 30)[0]
    process = cluster.processes[old.leader_id]
    process.terminate()  # SIGTERM: a clean shutdown
    process.wait(30)
    survivors = [n for n in cluster.node_ids if n != old.leader_id]
    new, took = wait_for("a new leader", lambda: cluster.quorum_leader(survivors), 30)
    print(f"new leader {new.leader_id} in epoch {new.leader_epoch}, {took:.2f} s after the old one stopped")
    assert new.leader_id != old.leader_id and new.leader_epoch > old.leader_epoch
    assert "shut down cleanly" in cluster.log_tail(old.leader_id, 200)


@pytest.mark.timeout(120)
def test_metadata_never_names_a_leader_it_does_not_list(cluster: Cluster) -> None:
    """A broker that stopped (SIGTERM) keeps the leadership of partitions no one else has in sync until
    it returns; Metadata must still answer LEADER_NOT_AVAILABLE for them (clients look leaders up among
    the listed brokers), with the replica offline."""
    quorum_leader = wait_for("a leader", cluster.quorum_leader, 20)[0].leader_id
    victim = next(n for n in cluster.node_ids if n != quorum_leader)
    topic = unique("alone")
    with cluster.connect(quorum_leader) as conn:
        r = conn.request(19, {"timeout": 15000, "validate_only": False, "topics": [{
            "name": topic, "num_partitions": -1, "replication_factor": -1,
            "assignments": [{"partition_index": 0, "broker_ids": [victim]}], "configs": ()}]})
    assert r.topics[0].error_code == ErrorCode.none, r
    wait_for(f"{topic} led by {victim}", lambda: (cluster.leaders(quorum_leader, topic) or {}).get(0) == (victim, 0)
             or None, 20)
    process = cluster.processes[victim]
    process.terminate()
    process.wait(30)

    def answer() -> Any | None:
        m = cluster.metadata(quorum_leader, [topic])
        listed = {b.node_id for b in m.brokers}
        return m if victim not in listed else None

    m = wait_for(f"broker {victim} unlisted", answer, 30)[0]
    p = m.topics[0].partitions[0]
    assert (p.error_code, p.leader_id, list(p.offline_replicas)) == (ErrorCode.leader_not_available, -1, [victim])
    cluster.start(victim)
    wait_for(f"{topic} led by {victim} again", lambda: (cluster.leaders(quorum_leader, topic) or {}).get(0)
             == (victim, 0) or None, 30)
