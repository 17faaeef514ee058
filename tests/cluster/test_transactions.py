"""Transactions on a real 3-node cluster: the transaction coordinator writes the commit and abort
markers on partitions other brokers lead (Kafka's WriteTxnMarkers to each partition leader), so a
read_committed consumer sees committed transactions on every partition and never an aborted one."""

from __future__ import annotations

import time
from collections.abc import Callable

from cluster_harness import Cluster, unique, wait_for
from confluent_kafka import Consumer, Producer, TopicPartition

from samsa.kproto.errors import ErrorCode

FAST = ("replica.lag.time.max.ms=3000", "broker.session.timeout.ms=3000", "broker.heartbeat.interval.ms=500",
        # the transaction commits made-up positions of the topic it writes (markers, not offsets, are the subject
        # here): past its log end, which Samsa refuses by default (tests/broker/test_commit_bounds.py)
        "samsa.offset.commit.past.log.end.enable=true")
PARTITIONS = 3


def _create(cluster: Cluster, topic: str) -> bool | None:
    # One partition led by each broker: whichever broker coordinates the transaction, the others lead
    # partitions in it.
    assignments = [{"partition_index": i, "broker_ids": [i + 1, (i + 1) % 3 + 1]} for i in range(PARTITIONS)]
    with cluster.connect(1, 15) as conn:
        r = conn.request(19, {"timeout": 15000, "validate_only": False, "topics": [{
            "name": topic, "num_partitions": -1, "replication_factor": -1, "assignments": assignments,
            "configs": []}]})
    return True if r.topics[0].error_code in (ErrorCode.none, ErrorCode.topic_already_exists) else None


def _leaders(cluster: Cluster, topic: str) -> dict[int, int] | None:
    leaders = cluster.leaders(1, topic)
    if leaders is None or len(leaders) != PARTITIONS or any(lead < 0 for lead, _ in leaders.values()):
        return None
    return {p: lead for p, (lead, _) in leaders.items()}


def _coordinator(cluster: Cluster, key: str, key_type: int) -> int | None:
    with cluster.connect(1, 10) as conn:
        r = conn.request(10, {"key_type": key_type, "coordinator_keys": [key]})
    (c,) = r.coordinators
    return int(c.node_id) if c.error_code == ErrorCode.none else None


def test_commit_and_abort_markers_reach_partitions_led_by_other_brokers(
        cluster_factory: Callable[..., Cluster]) -> None:
    cluster = cluster_factory(3, FAST)
    topic = unique("txn")
    wait_for("the topic", lambda: _create(cluster, topic), 30)
    leaders, _ = wait_for("a leader for every partition", lambda: _leaders(cluster, topic), 30)
    assert len(set(leaders.values())) == 3, f"partitions should have three different leaders: {leaders}"

    transactional_id = unique("tx")
    txn_coordinator, _ = wait_for("the transaction coordinator", lambda: _coordinator(cluster, transactional_id, 1), 30)
    # A consumer group another broker coordinates: its offsets ride in the transaction.
    group = ""
    for _ in range(50):
        group = unique("g")
        group_coordinator, _ = wait_for("a group coordinator", lambda g=group: _coordinator(cluster, g, 0), 30)
        if group_coordinator != txn_coordinator:
            break
    assert group_coordinator != txn_coordinator
    group_member = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": group,
                             "enable.auto.commit": False})
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "transactional.id": transactional_id,
                         "enable.idempotence": True, "acks": "all", "transaction.timeout.ms": 60000})
    producer.init_transactions(60)
    expected: set[str] = set()
    for round_ in range(4):
        producer.begin_transaction()
        values = [f"r{round_}-p{p}-{i}" for p in range(PARTITIONS) for i in range(5)]
        for value in values:
            producer.produce(topic, value=value.encode(), partition=int(value.split("-p")[1].split("-")[0]))
        # Offsets in the transaction: 10 * (round + 1) on each partition of the source topic (this one).
        producer.send_offsets_to_transaction(
            [TopicPartition(topic, p, 10 * (round_ + 1)) for p in range(PARTITIONS)],
            group_member.consumer_group_metadata(), 30)
        if round_ % 2 == 0:
            producer.commit_transaction(60)
            expected.update(values)
        else:
            producer.abort_transaction(60)
    producer.flush(30)
    # The last committed round was round 2: its offsets count, round 3's were aborted.
    committed = group_member.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=30)
    group_member.close()
    assert {tp.partition: tp.offset for tp in committed} == {p: 30 for p in range(PARTITIONS)}

    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": unique("g"),
                         "isolation.level": "read_committed", "enable.auto.commit": False,
                         "auto.offset.reset": "earliest"})
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        seen: list[str] = []
        deadline = time.monotonic() + 60
        while set(seen) < expected and time.monotonic() < deadline:
            for m in consumer.consume(100, 0.5):
                if m.error() is None:
                    seen.append(m.value().decode())
        # Past the last transaction's markers every partition's last stable offset is its end: nothing
        # is held back behind an open (unmarked) transaction. Seeing every committed value does not mean
        # the consumer has read past the last (aborted) round and its marker yet, and the coordinator
        # writes markers after EndTxn is answered: keep consuming until the positions reach the ends.
        def reached() -> tuple[bool, dict[int, tuple[int, int]], dict[int, int]]:
            ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
                    for p in range(PARTITIONS)}
            positions = {tp.partition: tp.offset for tp in consumer.position(
                [TopicPartition(topic, p) for p in range(PARTITIONS)])}
            return all(positions[p] == ends[p][1] for p in range(PARTITIONS)), ends, positions

        done, ends, positions = reached()
        while not done and time.monotonic() < deadline:
            for m in consumer.consume(100, 0.5):
                if m.error() is None:
                    seen.append(m.value().decode())
            done, ends, positions = reached()
    finally:
        consumer.close()
    assert set(seen) == expected, (f"read_committed saw {len(set(seen) & expected)} of {len(expected)} committed "
                                   f"values; missing e.g. {sorted(expected - set(seen))[:3]}")
    assert len(seen) == len(set(seen)), "a committed value was read twice"
    aborted = [v for v in seen if v not in expected]
    assert not aborted, f"read_committed returned aborted values, e.g. {aborted[:3]}"
    # The consumer reached the end of each partition (past the final abort marker).
    for p in range(PARTITIONS):
        assert positions[p] == ends[p][1], f"partition {p}: position {positions[p]}, end {ends[p]}"
