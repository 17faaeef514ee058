"""A conflicting replay is refused by the new leader after a failover: followers rebuild producer state,
batch CRCs included, from the batches they replicate (issue 20)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from cluster_harness import Cluster, unique, wait_for

from samsa.broker.client import KafkaClientError
from samsa.kproto.errors import ErrorCode
from samsa.kproto.records import encode_batch

FAST = ("replica.lag.time.max.ms=3000", "broker.session.timeout.ms=3000", "broker.heartbeat.interval.ms=500")
T0_MS = int(time.time() * 1000)


def _partition(cluster: Cluster, node: int, topic: str) -> Any:
    try:
        t = cluster.metadata(node, [topic]).topics[0]
    except (OSError, KafkaClientError):
        return None
    if t.error_code != ErrorCode.none or not t.partitions:
        return None
    return t.partitions[0]


def _produce(cluster: Cluster, node: int, topic: str, batch: bytes) -> Any:
    """The partition answer of an acks=all Produce to `node`; None on a retriable error or no answer."""
    try:
        with cluster.connect(node, 15) as conn:
            r = conn.request(0, {"transactional_id": None, "acks": -1, "timeout": 10000, "topic_data": [
                {"name": topic, "partition_data": [{"index": 0, "records": batch}]}]}, version=9)
    except (OSError, KafkaClientError):
        return None
    p = r.responses[0].partition_responses[0]
    if p.error_code in (ErrorCode.not_leader_or_follower, ErrorCode.unknown_topic_or_partition,
                        ErrorCode.not_enough_replicas, ErrorCode.request_timed_out):
        return None
    return p


def _init_pid(cluster: Cluster, node: int) -> int | None:
    with cluster.connect(node, 15) as conn:
        r = conn.request(22, {"transactional_id": None, "transaction_timeout": 60000, "producer_id": -1,
                              "producer_epoch": -1})
    return int(r.producer_id) if r.error_code == ErrorCode.none else None


@pytest.mark.timeout(150)
def test_new_leader_refuses_a_conflicting_replay(cluster_factory: Callable[..., Cluster]) -> None:
    cluster = cluster_factory(overrides=FAST)
    topic = unique("replay")
    with cluster.connect(1, 15) as conn:
        r = conn.request(19, {"timeout": 15000, "validate_only": False, "topics": [{
            "name": topic, "num_partitions": 1, "replication_factor": 3, "assignments": (),
            "configs": [{"name": "min.insync.replicas", "value": "2"}]}]})
    assert r.topics[0].error_code == ErrorCode.none
    before = wait_for("a full ISR", lambda: (p := _partition(cluster, 1, topic)) is not None and p.leader_id >= 0
                      and sorted(p.isr_nodes) == sorted(p.replica_nodes) and p, 30)[0]
    leader = before.leader_id
    pid = wait_for("a producer id", lambda: _init_pid(cluster, leader), 30)[0]

    def batch(seq: int, values: list[bytes]) -> bytes:
        return encode_batch([(None, v, ()) for v in values], timestamp_ms=T0_MS, producer_id=pid,
                            producer_epoch=0, base_sequence=seq)

    first = wait_for("acks=all append", lambda: _produce(cluster, leader, topic, batch(0, [b"a", b"b"])), 30)[0]
    assert first.error_code == ErrorCode.none and first.base_offset == 0
    second = _produce(cluster, leader, topic, batch(2, [b"c"]))
    assert second is not None and second.error_code == ErrorCode.none and second.base_offset == 2

    cluster.kill(leader)
    survivors = [n for n in cluster.node_ids if n != leader]
    after = wait_for("a new leader", lambda: (p := _partition(cluster, survivors[0], topic)) is not None
                     and p.leader_id in survivors and p, 30)[0]
    new_leader = after.leader_id

    same = wait_for("the retry answered", lambda: _produce(cluster, new_leader, topic, batch(0, [b"a", b"b"])), 30)[0]
    assert same.error_code == ErrorCode.none and same.base_offset == 0  # the original offset, as before
    other = _produce(cluster, new_leader, topic, batch(0, [b"a", b"CHANGED"]))
    assert other is not None and other.error_code == ErrorCode.invalid_record
    assert f"producer {pid}" in (other.error_message or "") and "offset 0" in (other.error_message or "")
    nxt = _produce(cluster, new_leader, topic, batch(3, [b"d"]))
    assert nxt is not None and nxt.error_code == ErrorCode.none and nxt.base_offset == 3
