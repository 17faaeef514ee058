"""Transactions on a real 3-node cluster: the transaction coordinator writes the commit and abort
markers on partitions other brokers lead (Kafka's WriteTxnMarkers to each partition leader), so a
read_committed consumer sees committed transactions on every partition and never an aborted one."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest
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


JAVA = Path(__file__).resolve().parents[2] / "compat-tests" / "java" / "target"


@pytest.mark.skipif(not (JAVA / "classes" / "TxnExactlyOnce.class").exists(),
                    reason="the Java programs are not built (`make compat-java`)")
def test_java_transactions_v2_across_brokers(cluster_factory: Callable[..., Cluster]) -> None:
    """The reference Java producer on its transactions V2 path (transaction.version=2, the default): partitions
    led by brokers other than the transaction coordinator are added by their leaders (AddPartitionsToTxn v5
    to the coordinator, broker/txn/verification.py); read-process-write with an abort and a fenced zombie
    leaves exactly one copy of each input record."""
    cluster = cluster_factory(3, FAST)
    source, output = unique("v2-in"), unique("v2-out")
    for topic in (source, output):
        wait_for("the topic", lambda t=topic: _create(cluster, t), 30)
        wait_for("a leader for every partition", lambda t=topic: _leaders(cluster, t), 30)
    values = [f"v-{i}" for i in range(120)]
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
    for i, value in enumerate(values):
        producer.produce(source, value=value.encode(), partition=i % PARTITIONS)
    assert producer.flush(60) == 0
    r = subprocess.run(
        ["java", "-Xmx256m", "-XX:TieredStopAtLevel=1", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
         "-cp", f"{JAVA / 'classes'}:{JAVA / 'lib' / '*'}", "TxnExactlyOnce", cluster.bootstrap_servers, source,
         output, unique("v2-g"), str(len(values))],
        capture_output=True, timeout=300, check=False)
    out = r.stdout.decode() + r.stderr.decode()
    assert r.returncode == 0, out[-3000:]
    assert "aborts=1" in out and "fenced=none" not in out, out[-1000:]
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": unique("g"),
                         "isolation.level": "read_committed", "enable.auto.commit": False,
                         "auto.offset.reset": "earliest"})
    expected = sorted([f"out-{v}" for v in values] + ["from-second"])
    seen: list[str] = []
    try:
        consumer.assign([TopicPartition(output, p, 0) for p in range(PARTITIONS)])
        deadline = time.monotonic() + 60
        while len(seen) < len(expected) and time.monotonic() < deadline:
            seen += [m.value().decode() for m in consumer.consume(100, 0.5) if m.error() is None]
    finally:
        consumer.close()
    assert sorted(seen) == expected, (len(seen), len(set(seen)))
    # The V2 path ran: each transaction end bumped the epoch its markers carry (V1 keeps it until the fence).
    summary = dict(item.split("=") for item in r.stdout.decode().strip().splitlines()[-1].split())
    transactions = int(summary["commits"]) + int(summary["aborts"])
    leaders, _ = wait_for("leaders", lambda: _leaders(cluster, output), 30)
    epochs = []
    for p, leader in leaders.items():
        with cluster.connect(leader, 10) as conn:
            r = conn.request(61, {"topics": [{"name": output, "partition_indexes": [p]}]}, version=0)
        epochs += [x.producer_epoch for t in r.topics for part in t.partitions for x in part.active_producers]
    assert epochs and max(epochs) >= transactions, (epochs, summary)
