"""Transactions V2 across brokers: the first transactional Produce (v12) to a partition whose leader is not
the transaction coordinator is appended on its first attempt. The leader asks the coordinator to add the
partition (AddPartitionsToTxn v5, broker/txn/verification.py) and waits for its answer before appending,
as Kafka's produce path waits on AddPartitionsToTxnManager (KIP-890): no retriable error, no retry. The
same for TxnOffsetCommit v5's add of the group's __consumer_offsets partition."""

from __future__ import annotations

import time
from collections.abc import Callable

from cluster_harness import Cluster, unique, wait_for
from test_transactions import FAST, _coordinator, _create, _leaders

from samsa.kproto.errors import ErrorCode
from samsa.kproto.records import encode_batch


def _init_producer(cluster: Cluster, node: int, transactional_id: str) -> tuple[int, int] | None:
    with cluster.connect(node, 10) as conn:
        r = conn.request(22, {"transactional_id": transactional_id, "transaction_timeout": 60000,
                              "producer_id": -1, "producer_epoch": -1}, version=5)
    return (r.producer_id, r.producer_epoch) if r.error_code == ErrorCode.none else None


def test_first_v2_produce_to_a_remote_coordinators_transaction_is_appended_at_once(
        cluster_factory: Callable[..., Cluster]) -> None:
    cluster = cluster_factory(3, FAST)
    topic = unique("v2add")
    wait_for("the topic", lambda: _create(cluster, topic), 30)
    leaders, _ = wait_for("a leader for every partition", lambda: _leaders(cluster, topic), 30)
    transactional_id = unique("tx")
    coordinator, _ = wait_for("the transaction coordinator", lambda: _coordinator(cluster, transactional_id, 1), 30)
    (producer_id, epoch), _ = wait_for("a producer id", lambda: _init_producer(cluster, coordinator, transactional_id),
                                       30)
    remote = sorted(p for p, leader in leaders.items() if leader != coordinator)
    assert remote, leaders
    for partition in remote:
        records = encode_batch([(None, b"v", ())], timestamp_ms=int(time.time() * 1000), producer_id=producer_id,
                               producer_epoch=epoch, base_sequence=0, is_transactional=True)
        with cluster.connect(leaders[partition], 10) as conn:
            r = conn.request(0, {"transactional_id": transactional_id, "acks": -1, "timeout": 15000, "topic_data": [
                {"name": topic, "partition_data": [{"index": partition, "records": records}]}]}, version=12)
        answer = r.responses[0].partition_responses[0]
        assert answer.error_code == ErrorCode.none, (partition, answer)
        assert answer.base_offset == 0
    # TxnOffsetCommit v5 to a group coordinator that is not the transaction's: its offsets partition is
    # added the same way, on the first attempt too.
    for _ in range(100):  # a group whose coordinator is another broker
        group = unique("g")
        group_coordinator, _ = wait_for("a group coordinator", lambda g=group: _coordinator(cluster, g, 0), 30)
        if group_coordinator != coordinator:
            break
    assert group_coordinator != coordinator
    with cluster.connect(group_coordinator, 10) as conn:
        r = conn.request(28, {"transactional_id": transactional_id, "group_id": group, "producer_id": producer_id,
                              "producer_epoch": epoch, "generation_id": -1, "member_id": "",
                              "group_instance_id": None, "topics": [{"name": topic, "partitions": [
                                  {"partition_index": remote[0], "committed_offset": 1,
                                   "committed_leader_epoch": -1, "committed_metadata": ""}]}]}, version=5)
    assert r.topics[0].partitions[0].error_code == ErrorCode.none, r
    with cluster.connect(coordinator, 10) as conn:
        described = conn.request(65, {"transactional_ids": [transactional_id]}, version=0)
    (state,) = described.transaction_states
    assert state.transaction_state == "Ongoing"
    assert sorted(p for t in state.topics if t.topic == topic for p in t.partitions) == remote
    assert [t.topic for t in state.topics if t.topic == "__consumer_offsets"] == ["__consumer_offsets"]
