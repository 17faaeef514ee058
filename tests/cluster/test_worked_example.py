"""The seeds' worked example, end to end on three `samsa serve` processes (issue 20 item 5): leader L
acknowledges offset 91 under acks=all, the reply is lost, the producer's retry gets 91 again; L is SIGKILLed, a
new leader from the ISR serves 91 (and answers the same retry with 91 too); a consumer from the previous
generation cannot commit (ILLEGAL_GENERATION), and its replacement resumes at the committed next offset and
replays what was processed but not committed.

Raw requests with a fixed producer id, epoch and sequence, so the test (not a client library) decides when a
batch is retried; raw group requests, so the generations are the test's too."""

from __future__ import annotations

import struct
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from cluster_harness import Cluster, unique, wait_for

from samsa.broker.client import Connection, KafkaClientError
from samsa.kproto.errors import ErrorCode
from samsa.kproto.records import Record, decode_batches, encode_batch

FAST = ("replica.lag.time.max.ms=3000", "broker.session.timeout.ms=3000", "broker.heartbeat.interval.ms=500",
        "group.initial.rebalance.delay.ms=0")
ACKED_OFFSET = 91
COMMITTED_BY_A = 80  # A processed 0..91 but committed only up to here (next offset to read)
SESSION_MS = 60000  # no member may expire while the machine is busy: the generations are the test's


def partitions(cluster: Cluster, node: int, topic: str) -> dict[int, Any] | None:
    try:
        t = cluster.metadata(node, [topic]).topics[0]
    except (OSError, KafkaClientError):
        return None
    if t.error_code != ErrorCode.none or not t.partitions:
        return None
    return {int(p.partition_index): p for p in t.partitions}


def isr_full(cluster: Cluster, node: int, topic: str) -> dict[int, Any] | None:
    parts = partitions(cluster, node, topic)
    if parts is None or not all(sorted(p.isr_nodes) == sorted(p.replica_nodes) and p.leader_id >= 0
                                for p in parts.values()):
        return None
    return parts


def create(cluster: Cluster, topic: str) -> bool | None:
    with cluster.connect(1, 15) as conn:
        r = conn.request(19, {"timeout": 15000, "validate_only": False, "topics": [{
            "name": topic, "num_partitions": 1, "replication_factor": 3, "assignments": (),
            "configs": [{"name": "min.insync.replicas", "value": "2"}]}]})
    return True if r.topics[0].error_code in (ErrorCode.none, ErrorCode.topic_already_exists) else None


def produce(cluster: Cluster, node: int, topic: str, batch: bytes) -> Any:
    with cluster.connect(node, 20) as conn:
        r = conn.request(0, {"transactional_id": None, "acks": -1, "timeout": 15000, "topic_data": [
            {"name": topic, "partition_data": [{"index": 0, "records": batch}]}]}, version=9)
    return r.responses[0].partition_responses[0]


def fetch(cluster: Cluster, node: int, topic: str, offset: int) -> tuple[int, list[Record]] | None:
    """(high watermark, records from `offset`) as node `node` (the leader) serves them."""
    try:
        with cluster.connect(node, 10) as conn:
            r = conn.request(1, {"max_wait": 0, "min_bytes": 0, "max_bytes": 1 << 24, "isolation_level": 0,
                                 "session_id": 0, "session_epoch": -1, "replica_id": -1,
                                 "topics": [{"topic": topic, "partitions": [
                                     {"partition": 0, "fetch_offset": offset, "partition_max_bytes": 1 << 24}]}],
                                 "forgotten_topics_data": (), "rack_id": ""}, version=12)
    except (OSError, KafkaClientError):
        return None
    part = r.responses[0].partitions[0]
    if part.error_code != ErrorCode.none:
        return None
    records = [rec for _, recs in decode_batches(part.records or b"", max_decompressed_bytes=1 << 26)
               for rec in recs if rec.offset >= offset]
    return int(part.high_watermark), records


def coordinator(cluster: Cluster, nodes: list[int], group: str) -> int | None:
    for node in nodes:
        try:
            with cluster.connect(node, 10) as conn:
                r = conn.request(10, {"key": group, "key_type": 0}, version=3)
        except (OSError, KafkaClientError):
            continue
        if r.error_code == ErrorCode.none and r.node_id in nodes:
            return int(r.node_id)
    return None


def subscription(topic: str) -> bytes:
    return struct.pack(">hih", 0, 1, len(topic)) + topic.encode() + struct.pack(">i", -1)


def assignment(topic: str, parts: list[int]) -> bytes:
    return (struct.pack(">hih", 0, 1, len(topic)) + topic.encode() + struct.pack(">i", len(parts))
            + b"".join(struct.pack(">i", p) for p in parts) + struct.pack(">i", -1))


def join(conn: Connection, group: str, topic: str, member_id: str = "") -> Any:
    values = {"group_id": group, "session_timeout": SESSION_MS, "rebalance_timeout": SESSION_MS,
              "member_id": member_id, "protocol_type": "consumer",
              "protocols": [{"name": "range", "metadata": subscription(topic)}]}
    j = conn.request(11, values)
    if j.error_code == ErrorCode.member_id_required:  # KIP-394: join again with the id given
        j = conn.request(11, {**values, "member_id": j.member_id})
    assert j.error_code == ErrorCode.none, j
    return j


def sync(conn: Connection, group: str, generation: int, member_id: str,
         assignments: dict[str, bytes]) -> Any:
    s = conn.request(14, {"group_id": group, "generation_id": generation, "member_id": member_id,
                          "assignments": [{"member_id": m, "assignment": a} for m, a in assignments.items()]})
    assert s.error_code == ErrorCode.none, s
    return s


def commit(conn: Connection, group: str, generation: int, member_id: str, topic: str, offset: int) -> ErrorCode:
    r = conn.request(8, {"group_id": group, "generation_id_or_member_epoch": generation, "member_id": member_id,
                         "topics": [{"name": topic, "partitions": [
                             {"partition_index": 0, "committed_offset": offset, "committed_metadata": ""}]}]})
    return ErrorCode(r.topics[0].partitions[0].error_code)


@pytest.mark.timeout(240)
def test_the_worked_example_holds_end_to_end(cluster_factory: Callable[..., Cluster]) -> None:
    cluster = cluster_factory(overrides=FAST)
    topic, group = unique("ledger"), unique("billing")
    wait_for(f"{topic} created", lambda: create(cluster, topic), 20)
    before = wait_for("the ISR full", lambda: isr_full(cluster, 1, topic), 30)[0][0]
    leader = before.leader_id
    survivors = [n for n in cluster.node_ids if n != leader]
    # __consumer_offsets is made by the first FindCoordinator: while all three brokers are up, so it gets
    # its three replicas and its coordinator can move when L dies.
    wait_for("a group coordinator", lambda: coordinator(cluster, cluster.node_ids, group), 30)
    wait_for("__consumer_offsets fully in sync", lambda: isr_full(cluster, 1, "__consumer_offsets"), 30)

    # Offsets 0..90: ordinary records, so the idempotent batch lands at 91.
    now = int(time.time() * 1000)
    first = encode_batch([(b"k%d" % i, b"v%d" % i, ()) for i in range(ACKED_OFFSET)], timestamp_ms=now)
    wait_for("offsets 0-90 written", lambda: produce(cluster, leader, topic, first).error_code == ErrorCode.none
             or None, 20)

    def init_producer_id() -> Any:
        with cluster.connect(leader, 10) as conn:
            r = conn.request(22, {"transactional_id": None, "transaction_timeout_ms": 60000, "producer_id": -1,
                                  "producer_epoch": -1})
        return r if r.error_code == ErrorCode.none else None

    pid = wait_for("a producer id", init_producer_id, 20)[0]
    batch = encode_batch([(b"invoice-91", b"amount=42", ())], timestamp_ms=now, producer_id=pid.producer_id,
                         producer_epoch=pid.producer_epoch, base_sequence=0)

    acked = produce(cluster, leader, topic, batch)
    assert (acked.error_code, acked.base_offset) == (ErrorCode.none, ACKED_OFFSET)
    # The reply is lost: the producer sends the same batch, same (producer id, epoch, sequence), again.
    retried = produce(cluster, leader, topic, batch)
    assert (retried.error_code, retried.base_offset) == (ErrorCode.none, ACKED_OFFSET)
    served = fetch(cluster, leader, topic, 0)
    assert served is not None and served[0] == ACKED_OFFSET + 1  # one copy, on every ISR member (acks=all)

    cluster.kill(leader)  # SIGKILL
    after = wait_for("a new leader from the ISR", lambda: (p := partitions(cluster, survivors[0], topic))
                     and p[0].leader_id in survivors and p[0], 30)[0]
    assert after.leader_id in before.isr_nodes and after.leader_epoch > before.leader_epoch
    new_leader = after.leader_id
    # A new leader learns the high watermark from its followers' next fetches (Kafka's Partition.makeLeader):
    # until then it has offset 91 but does not serve it yet.
    def serving() -> tuple[int, list[Record]] | None:
        f = fetch(cluster, new_leader, topic, ACKED_OFFSET)
        return f if f and f[1] else None

    hw, records = wait_for("offset 91 served by the new leader", serving, 30)[0]
    assert hw == ACKED_OFFSET + 1
    assert [(r.offset, r.key, r.value) for r in records] == [(ACKED_OFFSET, b"invoice-91", b"amount=42")]
    # The producer state moved with the log: the same retry, now to the new leader, is still offset 91.
    again = wait_for("the retry answered by the new leader", lambda: (r := produce(cluster, new_leader, topic, batch))
                     .error_code == ErrorCode.none and r, 20)[0]
    assert again.base_offset == ACKED_OFFSET
    log = fetch(cluster, new_leader, topic, 0)
    assert log is not None and log[0] == hw and len(log[1]) == ACKED_OFFSET + 1  # nothing appended twice

    # Consumer A, generation g, reads everything, commits up to 80, processes 80..91 without committing.
    coord = wait_for("the group coordinator on a survivor", lambda: coordinator(cluster, survivors, group), 30)[0]
    with cluster.connect(coord, 60) as a_conn, cluster.connect(coord, 60) as b_conn:
        a = join(a_conn, group, topic)
        assert a.leader == a.member_id
        sync(a_conn, group, a.generation_id, a.member_id, {a.member_id: assignment(topic, [0])})
        seen_by_a = fetch(cluster, new_leader, topic, 0)
        assert seen_by_a is not None and [r.offset for r in seen_by_a[1]] == list(range(ACKED_OFFSET + 1))
        assert commit(a_conn, group, a.generation_id, a.member_id, topic, COMMITTED_BY_A) == ErrorCode.none

        # A is replaced: B joins, which starts generation g+1; A's heartbeat learns of it and A rejoins (its
        # old thread still thinks it owns the partition), and the leader gives the partition to B.
        b_join: list[Any] = []
        joiner = threading.Thread(target=lambda: b_join.append(join(b_conn, group, topic)))
        joiner.start()

        def rebalancing() -> bool | None:
            with cluster.connect(coord, 10) as conn:
                h = conn.request(12, {"group_id": group, "generation_id": a.generation_id,
                                      "member_id": a.member_id})
            return h.error_code == ErrorCode.rebalance_in_progress or None

        wait_for("A told to rejoin", rebalancing, 30)
        a2 = join(a_conn, group, topic, a.member_id)
        joiner.join(60)
        assert b_join, "B's JoinGroup never answered"
        b = b_join[0]
        assert a2.generation_id == b.generation_id > a.generation_id
        leader_conn, leader_join = (a_conn, a2) if a2.leader == a2.member_id else (b_conn, b)
        follower_conn, follower_join = (b_conn, b) if leader_conn is a_conn else (a_conn, a2)
        plan = {b.member_id: assignment(topic, [0]), a2.member_id: assignment(topic, [])}
        follower_sync: list[Any] = []
        syncing = threading.Thread(target=lambda: follower_sync.append(sync(
            follower_conn, group, follower_join.generation_id, follower_join.member_id, {})))
        syncing.start()
        leader_sync = sync(leader_conn, group, leader_join.generation_id, leader_join.member_id, plan)
        syncing.join(60)
        assert follower_sync, "the follower's SyncGroup never answered"
        b_sync = leader_sync if leader_conn is b_conn else follower_sync[0]
        assert bytes(b_sync.assignment) == assignment(topic, [0])  # B owns the partition now

        # The stale commit from generation g, claiming all of A's work, is refused.
        assert commit(a_conn, group, a.generation_id, a.member_id, topic, ACKED_OFFSET + 1) == \
            ErrorCode.illegal_generation

        # B resumes at the committed next offset and replays what A processed but did not commit.
        r = b_conn.request(9, {"group_id": group, "topics": [{"name": topic, "partition_indexes": [0]}]},
                           version=7)
        resume = r.topics[0].partitions[0].committed_offset
        assert resume == COMMITTED_BY_A
        replayed = fetch(cluster, new_leader, topic, resume)
        assert replayed is not None
        assert [r.offset for r in replayed[1]] == list(range(COMMITTED_BY_A, ACKED_OFFSET + 1))
        assert replayed[1][-1].value == b"amount=42"
        assert commit(b_conn, group, b.generation_id, b.member_id, topic, ACKED_OFFSET + 1) == ErrorCode.none
