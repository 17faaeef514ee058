"""Differential scenario of transactions V2 (KIP-890 part 2) on the wire, step by step on the reference Kafka and on
Samsa (transaction.version=2, both brokers' default): Produce v12 without AddPartitionsToTxn, TxnOffsetCommit
v5 without AddOffsetsToTxn, EndTxn v5's bumped epoch and its retries, a late batch of an ended transaction,
an abort and a commit with nothing added, wrong ids and epochs. Producer ids differ between the brokers:
epochs are shown relative to InitProducerId's."""

from __future__ import annotations

import time
import uuid
from typing import Any

from differential.framework import Ctx, err, error_name, scenario
from samsa.broker.client import Connection
from samsa.kproto.records import encode_batch


def init_producer_id(c: Connection, txn_id: str) -> Any:
    """InitProducerId v5 for `txn_id`, retried while the transaction coordinator loads __transaction_state on
    first use (up to 30 s); the last answer."""
    deadline = time.monotonic() + 30
    while True:
        r = c.request(22, {"transactional_id": txn_id, "transaction_timeout": 60000, "producer_id": -1,
                           "producer_epoch": -1}, version=5)
        if err(r) not in ("COORDINATOR_LOAD_IN_PROGRESS(14)", "COORDINATOR_NOT_AVAILABLE(15)",
                          "NOT_COORDINATOR(16)") or time.monotonic() > deadline:
            return r
        time.sleep(0.3)


@scenario
def transactions_v2(ctx: Ctx) -> Any:
    c = ctx.connect()
    t = ctx.topic()
    group = ctx.topic("group")
    out: dict[str, Any] = {"create": err(ctx.create_topic(c, t, 1))}
    txn_id = ctx.topic("txn")
    out["find_coordinator"] = ctx.find_coordinator(c, txn_id, 1)
    out["find_group_coordinator"] = ctx.find_coordinator(c, group, 0)
    r = init_producer_id(c, txn_id)
    out["init_producer_id"] = err(r)
    pid, base = int(r.producer_id), int(r.producer_epoch)

    def produce(epoch: int, seq: int, value: bytes) -> str:
        b = encode_batch([(None, value, ())], timestamp_ms=ctx.t0, producer_id=pid, producer_epoch=base + epoch,
                         base_sequence=seq, is_transactional=True)
        for _ in range(50):  # a leader still asking the coordinator answers with a retriable error
            r = c.request(0, {"transactional_id": txn_id, "acks": -1, "timeout": 10000,
                              "topic_data": [{"name": t, "partition_data": [{"index": 0, "records": b}]}]}, version=12)
            p = r.responses[0].partition_responses[0]
            if err(p) not in ("NOT_ENOUGH_REPLICAS(19)", "CONCURRENT_TRANSACTIONS(51)"):
                return err(p)
            time.sleep(0.1)
        return err(p)

    def end(epoch: int, commit: bool, producer_id: int | None = None) -> dict[str, Any]:
        for _ in range(50):
            r = c.request(26, {"transactional_id": txn_id, "producer_id": pid if producer_id is None else producer_id,
                               "producer_epoch": base + epoch, "committed": commit}, version=5)
            if err(r) != "CONCURRENT_TRANSACTIONS(51)" or epoch < 0:
                break
            time.sleep(0.1)
        same_id = int(r.producer_id) == pid
        return {"error": err(r), "same_producer_id": same_id if r.producer_id >= 0 else None,
                "epoch": int(r.producer_epoch) - base if r.producer_epoch >= 0 else None}

    def commit_offset(epoch: int, offset: int) -> list[str]:
        r = c.request(28, {"transactional_id": txn_id, "group_id": group, "producer_id": pid,
                           "producer_epoch": base + epoch, "generation_id": -1, "member_id": "",
                           "group_instance_id": None,
                           "topics": [{"name": t, "partitions": [{"partition_index": 0, "committed_offset": offset,
                                                                  "committed_leader_epoch": -1,
                                                                  "committed_metadata": ""}]}]}, version=5)
        return [error_name(p.error_code.value) for x in r.topics for p in x.partitions]

    steps: list[Any] = []
    steps.append({"produce": produce(0, 0, b"a")})
    steps.append({"txn_offset_commit": commit_offset(0, 1)})
    steps.append({"commit": end(0, True)})
    time.sleep(0.5)  # markers may be written after EndTxn is answered
    steps.append({"commit_retry": end(0, True)})
    steps.append({"abort_retry_of_a_commit": end(0, False)})
    steps.append({"late_batch": produce(0, 1, b"late")})
    steps.append({"next_produce": produce(1, 0, b"b")})
    steps.append({"abort": end(1, False)})
    time.sleep(0.5)
    steps.append({"abort_retry": end(1, False)})
    steps.append({"commit_nothing": end(2, True)})
    steps.append({"abort_nothing": end(2, False)})
    steps.append({"older_epoch": end(1, True)})
    steps.append({"future_epoch": end(9, True)})
    steps.append({"other_producer_id": end(3, True, pid + 1000)})
    out["steps"] = steps
    time.sleep(0.5)
    fetched = ctx.fetch(c, t, 0, 0, isolation_level=1)
    out["last_stable_offset"] = fetched.last_stable_offset
    out["aborted_transactions"] = len(fetched.aborted_transactions or ())
    r = c.request(9, {"groups": [{"group_id": group, "topics": [{"name": t, "partition_indexes": [0]}]}]}, version=9)
    out["committed_offset"] = int(r.groups[0].topics[0].partitions[0].committed_offset)
    r = c.request(61, {"topics": [{"name": t, "partition_indexes": [0]}]}, version=0)
    out["marker_epochs"] = [p.producer_epoch - base for x in r.topics for part in x.partitions
                            for p in part.active_producers]
    return out




@scenario
def write_txn_markers_v2(ctx: Ctx) -> Any:
    """WriteTxnMarkers v2 (KIP-1228), sent as a coordinator would to the leader of a V2 transaction's partitions:
    a transaction version 2 marker must be newer than the producer's epoch (an equal one, or the same marker
    again, is refused and writes nothing); version 0 markers (v2 with version 0, or v1) only not older."""
    c = ctx.connect()
    t2, t0 = ctx.topic("tv2"), ctx.topic("tv0")
    txn_id = ctx.topic("txn")
    out: dict[str, Any] = {"create": [err(ctx.create_topic(c, x, 1)) for x in (t2, t0)],
                           "find_coordinator": ctx.find_coordinator(c, txn_id, 1)}
    r = init_producer_id(c, txn_id)
    out["init_producer_id"] = err(r)
    pid, base = int(r.producer_id), int(r.producer_epoch)
    produced = []
    for t in (t2, t0):
        b = encode_batch([(None, b"v", ())], timestamp_ms=ctx.t0, producer_id=pid, producer_epoch=base,
                         base_sequence=0, is_transactional=True)
        for _ in range(50):
            p = c.request(0, {"transactional_id": txn_id, "acks": -1, "timeout": 10000, "topic_data": [
                {"name": t, "partition_data": [{"index": 0, "records": b}]}]}, version=12).responses[0]
            if err(p.partition_responses[0]) not in ("NOT_ENOUGH_REPLICAS(19)", "CONCURRENT_TRANSACTIONS(51)"):
                break
            time.sleep(0.1)
        produced.append(err(p.partition_responses[0]))
    out["produce"] = produced

    def marker(t: str, epoch: int, version: int, transaction_version: int) -> dict[str, Any]:
        r = c.request(27, {"markers": [{"producer_id": pid, "producer_epoch": base + epoch, "transaction_result": True,
                                        "topics": [{"name": t, "partition_indexes": [0]}], "coordinator_epoch": 0,
                                        "transaction_version": transaction_version}]}, version=version)
        f = ctx.fetch(c, t, 0, 0, isolation_level=1)
        return {"error": error_name(r.markers[0].topics[0].partitions[0].error_code.value),
                "high_watermark": f.high_watermark, "last_stable_offset": f.last_stable_offset}

    out["tv2_same_epoch"] = marker(t2, 0, 2, 2)
    out["tv2_bumped_epoch"] = marker(t2, 1, 2, 2)
    out["tv2_again"] = marker(t2, 1, 2, 2)
    out["tv2_older"] = marker(t2, 0, 2, 2)
    out["tv0_same_epoch"] = marker(t0, 0, 2, 0)
    out["v1_same_epoch"] = marker(t0, 0, 1, 0)
    out["v1_bumped"] = marker(t0, 1, 1, 0)
    out["v1_older"] = marker(t0, 0, 1, 0)
    return out


@scenario
def txn_offset_commit_v6(ctx: Ctx) -> Any:
    """TxnOffsetCommit v6 (KIP-1319, Kafka 4.4) names topics by id: a known id, an unknown one, the zero id, a
    partition the topic lacks; v5 by name alongside; a commit to an unknown group and a KIP-848 member's at a stale
    epoch (v6 tells GROUP_ID_NOT_FOUND and STALE_MEMBER_EPOCH, v5 ILLEGAL_GENERATION); an empty group id; metadata
    too long; the committed offsets read back by name once the transaction commits. Offset 0 throughout: Samsa
    refuses a commit past the log end (the seeds)."""
    from differential.kip848 import Members

    c = ctx.connect()
    t, t2 = ctx.topic("a"), ctx.topic("b")
    group, group848, nogroup = ctx.topic("group"), ctx.topic("group848"), ctx.topic("nogroup")
    out: dict[str, Any] = {"create": [err(ctx.create_topic(c, x, 2)) for x in (t, t2)]}
    tid, tid2 = uuid.UUID(str(ctx.topic_id(c, t))), uuid.UUID(str(ctx.topic_id(c, t2)))
    unknown = uuid.UUID("6ba7b810-9dad-11d1-80b4-00c04fd430c8")
    names: dict[Any, str] = {tid: "a", tid2: "b", unknown: "unknown", None: "zero", uuid.UUID(int=0): "zero",
                             t: "a", t2: "b"}
    txn_id = ctx.topic("txn")
    out["find_coordinator"] = ctx.find_coordinator(c, txn_id, 1)
    out["find_group_coordinators"] = [ctx.find_coordinator(c, g, 0) for g in (group, group848, nogroup)]
    r = init_producer_id(c, txn_id)
    out["init_producer_id"] = err(r)
    pid, epoch = int(r.producer_id), int(r.producer_epoch)

    def commit(version: int, g: str, topics: list[tuple[Any, list[int]]], generation: int = -1, member: str = "",
               metadata: str = "") -> Any:
        key = "topic_id" if version >= 6 else "name"
        values = {"transactional_id": txn_id, "group_id": g, "producer_id": pid, "producer_epoch": epoch,
                  "generation_id_or_member_epoch" if version >= 6 else "generation_id": generation,
                  "member_id": member, "group_instance_id": None,
                  "topics": [{key: x, "partitions": [{"partition_index": i, "committed_offset": 0,
                                                      "committed_leader_epoch": -1, "committed_metadata": metadata}
                                                     for i in parts]} for x, parts in topics]}
        for _ in range(50):  # the transaction coordinator may still be adding the group's partition
            answer = [[names.get(getattr(x, key), "?"), [[p.partition_index, err(p)] for p in x.partitions]]
                      for x in c.request(28, values, version=version).topics]
            if not any(e in ("CONCURRENT_TRANSACTIONS(51)", "COORDINATOR_LOAD_IN_PROGRESS(14)")
                       for _, ps in answer for _, e in ps):
                break
            time.sleep(0.1)
        return answer

    out["v6"] = commit(6, group, [(unknown, [0]), (tid, [0, 9]), (None, [1]), (tid2, [1])])
    out["v5_unknown_name"] = commit(5, group, [("nosuch-topic", [0]), (t2, [0])])
    out["v6_unknown_group"] = commit(6, nogroup, [(tid, [0]), (unknown, [0])], 5, "someone")
    out["v5_unknown_group"] = commit(5, nogroup, [(t, [0])], 5, "someone")
    out["v6_empty_group_id"] = commit(6, "", [(tid, [0])])
    out["v6_metadata_too_long"] = commit(6, group, [(tid2, [0])], metadata="m" * 5000)
    m = Members(ctx, c, group848, [t])
    joined = m.join("member-a", [t])
    out["join"] = joined["error"]
    member_epoch = joined["member_epoch"]
    out["member_v6_ahead"] = commit(6, group848, [(tid, [0])], member_epoch + 1, "member-a")
    out["member_v5_ahead"] = commit(5, group848, [(t, [0])], member_epoch + 1, "member-a")
    out["member_v6_unknown_member"] = commit(6, group848, [(tid, [0])], member_epoch, "who")
    out["member_v6"] = commit(6, group848, [(tid, [0]), (unknown, [0])], member_epoch, "member-a")
    for _ in range(50):
        r = c.request(26, {"transactional_id": txn_id, "producer_id": pid, "producer_epoch": epoch,
                           "committed": True}, version=5)
        if err(r) != "CONCURRENT_TRANSACTIONS(51)":
            break
        time.sleep(0.1)
    out["end_txn"] = err(r)

    def fetched(g: str) -> Any:
        for _ in range(100):  # require_stable: UNSTABLE_OFFSET_COMMIT until the markers are written
            f = c.request(9, {"groups": [{"group_id": g, "topics": [{"name": x, "partition_indexes": [0, 1]}
                                                                    for x in (t, t2)]}],
                              "require_stable": True}, version=9).groups[0]
            parts = [[names[x.name], p.partition_index, int(p.committed_offset), p.metadata, err(p)]
                     for x in f.topics for p in x.partitions]
            if err(f) != "UNSTABLE_OFFSET_COMMIT(88)" and all(p[4] != "UNSTABLE_OFFSET_COMMIT(88)" for p in parts):
                return {"error": err(f), "partitions": parts}
            time.sleep(0.1)
        return {"error": err(f), "partitions": parts}

    out["committed"] = fetched(group)
    out["committed_member"] = fetched(group848)
    m.heartbeat("member-a", -1)
    return out
