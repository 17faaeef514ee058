"""Partition replication with real processes: acks=all survives SIGKILL of a leader, the restarted
broker catches up and rejoins the ISR, replicas hold the same bytes, and min.insync.replicas is
enforced (NOT_ENOUGH_REPLICAS) once the ISR has shrunk."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from cluster_harness import Cluster, unique, wait_for
from confluent_kafka import Consumer, Producer, TopicPartition

from samsa.kproto.errors import ErrorCode
from samsa.kproto.records import encode_batch

FAST = ("replica.lag.time.max.ms=3000", "broker.session.timeout.ms=3000", "broker.heartbeat.interval.ms=500")


def _create(cluster: Cluster, node: int, topic: str, partitions: int, rf: int, configs: dict[str, str],
            assignments: dict[int, list[int]] | None = None) -> bool | None:
    with cluster.connect(node, 15) as conn:
        r = conn.request(19, {"timeout": 15000, "validate_only": False, "topics": [{
            "name": topic, "num_partitions": -1 if assignments else partitions,
            "replication_factor": -1 if assignments else rf,
            "assignments": [{"partition_index": i, "broker_ids": b} for i, b in (assignments or {}).items()],
            "configs": [{"name": k, "value": v} for k, v in configs.items()]}]})
    return True if r.topics[0].error_code in (ErrorCode.none, ErrorCode.topic_already_exists) else None


def _partitions(cluster: Cluster, node: int, topic: str) -> dict[int, Any] | None:
    try:
        t = cluster.metadata(node, [topic]).topics[0]
    except OSError:
        return None
    if t.error_code != ErrorCode.none or not t.partitions:
        return None
    return {int(p.partition_index): p for p in t.partitions}


def _isr_full(cluster: Cluster, node: int, topic: str) -> bool | None:
    parts = _partitions(cluster, node, topic)
    if parts is None:
        return None
    return all(sorted(p.isr_nodes) == sorted(p.replica_nodes) and p.leader_id >= 0 for p in parts.values()) or None


def _read_all(bootstrap: str, topic: str, partitions: int, expected: int) -> dict[tuple[int, int], bytes]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("reader"), "enable.auto.commit": False,
                  "auto.offset.reset": "earliest"})
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        seen: dict[tuple[int, int], bytes] = {}
        deadline = time.monotonic() + 60
        while len(seen) < expected and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None or m.error():
                continue
            seen[(m.partition(), m.offset())] = m.value()
        return seen
    finally:
        c.close()


@pytest.mark.timeout(180)
def test_acks_all_survives_a_leader_kill_and_the_broker_rejoins_the_isr(
        cluster_factory: Callable[..., Cluster]) -> None:
    cluster = cluster_factory(overrides=FAST)
    topic = unique("repl")
    wait_for(f"{topic} created", lambda: _create(cluster, 1, topic, 3, 3, {"min.insync.replicas": "2"}), 20)
    before = wait_for("partitions everywhere", lambda: _isr_full(cluster, 2, topic) and _partitions(cluster, 2, topic),
                      20)[0]
    victim = before[0].leader_id
    survivors = [n for n in cluster.node_ids if n != victim]

    acked: dict[bytes, tuple[int, int]] = {}
    failed: list[str] = []
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all", "enable.idempotence": True,
                         "linger.ms": 5, "message.timeout.ms": 60000})

    def delivered(err: Any, msg: Any) -> None:
        if err is None:
            acked[msg.value()] = (msg.partition(), msg.offset())
        else:
            failed.append(str(err))

    def produce(start: int, count: int) -> None:
        for i in range(start, start + count):
            producer.produce(topic, f"v{i}".encode(), callback=delivered)
            producer.poll(0)
            time.sleep(0.002)

    produce(0, 600)
    producer.flush(60)
    writer = threading.Thread(target=produce, args=(600, 900))
    writer.start()
    time.sleep(0.5)
    cluster.kill(victim)  # mid-stream
    writer.join(60)
    assert producer.flush(90) == 0
    assert not failed, failed[:5]
    assert len(acked) == 1500

    after = wait_for("a new leader for partition 0", lambda: (parts := _partitions(cluster, survivors[0], topic))
                     and parts[0].leader_id in survivors and parts, 30)[0]
    assert after[0].leader_epoch > before[0].leader_epoch
    assert victim not in after[0].isr_nodes  # it left the ISR; the new leader came from it

    cluster.start(victim)
    _, took = wait_for("the ISR full again", lambda: _isr_full(cluster, survivors[0], topic), 30)
    print(f"broker {victim} back in every ISR {took:.2f} s after its restart")

    seen = _read_all(cluster.bootstrap_servers, topic, 3, len(acked))
    lost = {v: at for v, at in acked.items() if seen.get(at) != v}
    assert not lost, f"{len(lost)} acknowledged writes not found where acked: {list(lost.items())[:5]}"
    assert len(set(seen.values())) == len(seen), "a value appears at two offsets"

    # Followers copy the leader's batches verbatim: every replica's log is the same bytes.
    def same_bytes() -> bool | None:
        for p in range(3):
            logs = {n: b"".join(f.read_bytes() for f in sorted(
                (cluster.plan.node(n).data_dir / f"{topic}-{p}").glob("*.log"))) for n in cluster.node_ids}
            if len(set(logs.values())) != 1:
                return None
        return True

    wait_for("identical replicas", same_bytes, 20)


@pytest.mark.timeout(120)
def test_min_insync_replicas_refuses_acks_all_once_the_isr_is_too_small(
        cluster_factory: Callable[..., Cluster]) -> None:
    cluster = cluster_factory(overrides=FAST)
    leader = wait_for("a quorum leader", cluster.quorum_leader, 20)[0].leader_id
    others = [n for n in cluster.node_ids if n != leader]
    topic = unique("minisr")
    # Two replicas on the brokers that are not the quorum leader, so the quorum survives losing one.
    wait_for(f"{topic} created", lambda: _create(cluster, leader, topic, 1, 2, {"min.insync.replicas": "2"},
                                                 {0: others}), 20)
    wait_for("ISR full", lambda: _isr_full(cluster, leader, topic), 20)
    part = _partitions(cluster, leader, topic)
    assert part is not None
    partition_leader = part[0].leader_id
    follower = next(n for n in others if n != partition_leader)

    def produce(acks: int) -> ErrorCode:
        batch = encode_batch([(None, b"x", ())], timestamp_ms=int(time.time() * 1000))
        with cluster.connect(partition_leader, 20) as conn:
            r = conn.request(0, {"transactional_id": None, "acks": acks, "timeout": 10000, "topic_data": [
                {"name": topic, "partition_data": [{"index": 0, "records": batch}]}]}, version=9)
        return ErrorCode(r.responses[0].partition_responses[0].error_code)

    # The controller's ISR is full from creation (Kafka's initial ISR is every replica), but the partition
    # leader makes its log when it applies the record, a moment later: UNKNOWN_TOPIC_OR_PARTITION until then,
    # which a client retries.
    wait_for("an acks=all produce accepted", lambda: produce(-1) == ErrorCode.none, 20)
    cluster.kill(follower)
    wait_for("the ISR shrunk to the leader", lambda: ((p := _partitions(cluster, leader, topic))
             and list(p[0].isr_nodes) == [partition_leader]) or None, 30)
    assert produce(-1) == ErrorCode.not_enough_replicas
    assert produce(1) == ErrorCode.none  # acks=1 does not ask for the ISR
    cluster.start(follower)
    wait_for("ISR full again", lambda: _isr_full(cluster, leader, topic), 30)
    # The partition leader learns of the expanded ISR when it applies the controller's record.
    wait_for("acks=all accepted again", lambda: produce(-1) == ErrorCode.none, 20)


def _coordinator(cluster: Cluster, node: int, group: str) -> int | None:
    try:
        with cluster.connect(node, 10) as conn:
            r = conn.request(10, {"key": group, "key_type": 0}, version=3)
    except OSError:
        return None
    return int(r.node_id) if r.error_code == ErrorCode.none else None


@pytest.mark.timeout(180)
def test_committed_offsets_survive_the_loss_of_their_coordinator(cluster_factory: Callable[..., Cluster]) -> None:
    cluster = cluster_factory(overrides=FAST)
    topic, group = unique("offs"), unique("group")
    wait_for(f"{topic} created", lambda: _create(cluster, 1, topic, 2, 3, {}), 20)
    wait_for("ISR full", lambda: _isr_full(cluster, 1, topic), 20)
    coordinator = wait_for("a coordinator", lambda: _coordinator(cluster, 1, group), 30)[0]
    wait_for("__consumer_offsets fully in sync", lambda: _isr_full(cluster, 1, "__consumer_offsets"), 30)
    c = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": group, "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition(topic, 0, 17), TopicPartition(topic, 1, 42)], asynchronous=False)
    c.close()
    survivor = next(n for n in cluster.node_ids if n != coordinator)
    wait_for("the commit replicated", lambda: _isr_full(cluster, survivor, "__consumer_offsets"), 10)
    time.sleep(1)  # followers fetch continuously; give the last batch a moment to reach them
    cluster.kill(coordinator)
    new = wait_for("a new coordinator", lambda: ((n := _coordinator(cluster, survivor, group)) is not None
                   and n != coordinator and n) or None, 30)[0]
    print(f"coordinator moved from {coordinator} to {new}")

    def committed() -> list[int] | None:
        c2 = Consumer({"bootstrap.servers": ",".join(cluster.plan.node(n).bootstrap for n in cluster.node_ids
                                                      if n != coordinator), "group.id": group})
        try:
            got = c2.committed([TopicPartition(topic, 0), TopicPartition(topic, 1)], timeout=10)
        except Exception:
            return None
        finally:
            c2.close()
        offsets = [tp.offset for tp in got]
        return offsets if all(o >= 0 for o in offsets) else None

    assert wait_for("the committed offsets from the new coordinator", committed, 30)[0] == [17, 42]
