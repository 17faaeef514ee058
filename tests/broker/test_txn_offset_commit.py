"""TxnOffsetCommit v6 on the wire (KIP-1319, Kafka 4.4): topics named by id in the request and the answer, the
offsets stored by name; the errors v6 tells as they are (UNKNOWN_TOPIC_ID, GROUP_ID_NOT_FOUND, STALE_MEMBER_EPOCH)
and v5 as ILLEGAL_GENERATION; the answer's order (topic errors first, then the coordinator's)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from samsa.broker.client import Connection

from .test_txn import TXN_ARGS, create, describe_txn, end_txn, find_txn_coordinator, init_pid, wait_for_internal_topics

ZERO = uuid.UUID(int=0)
UNKNOWN = uuid.UUID("6ba7b810-9dad-11d1-80b4-00c04fd430c8")


@pytest.fixture
def broker(samsa_factory: Any) -> Iterator[Any]:
    process = samsa_factory(extra_args=TXN_ARGS)
    process.start()
    wait_for_internal_topics(process, (0, 1))
    yield process
    assert process.proc is None or process.proc.poll() is None, f"samsa died:\n{process.log_tail()}"
    process.stop()


def topic_id(conn: Connection, topic: str) -> uuid.UUID:
    r = conn.request(3, {"topics": [{"name": topic, "topic_id": None}], "allow_auto_topic_creation": False,
                         "include_topic_authorized_operations": False}, version=12)
    return uuid.UUID(str(r.topics[0].topic_id))


def begin_v2(conn: Connection, txn_id: str) -> tuple[int, int]:
    """A transactions V2 producer (InitProducerId v5): TxnOffsetCommit v5+ adds the group's partition itself."""
    assert find_txn_coordinator(conn, txn_id).error_code.value == 0
    r = init_pid(conn, txn_id, version=5)
    assert r.error_code.value == 0, r
    return int(r.producer_id), int(r.producer_epoch)


def txn_commit(conn: Connection, version: int, txn_id: str, pid: int, epoch: int, group: str,
               topics: list[tuple[Any, list[int]]], generation: int = -1, member: str = "",
               metadata: str = "") -> list[tuple[Any, list[tuple[int, int]]]]:
    """TxnOffsetCommit of offset 7 for each (topic id for v6, else name, partitions); the answer as
    (topic key, [(partition, error)])."""
    key = "topic_id" if version >= 6 else "name"
    gen = "generation_id_or_member_epoch" if version >= 6 else "generation_id"
    r = conn.request(28, {"transactional_id": txn_id, "group_id": group, "producer_id": pid, "producer_epoch": epoch,
                          gen: generation, "member_id": member, "group_instance_id": None,
                          "topics": [{key: t, "partitions": [
                              {"partition_index": p, "committed_offset": 7, "committed_leader_epoch": -1,
                               "committed_metadata": metadata} for p in ps]} for t, ps in topics]}, version=version)
    return [(getattr(t, key), [(p.partition_index, p.error_code.value) for p in t.partitions]) for t in r.topics]


def committed(conn: Connection, group: str, topic: str, partitions: list[int]) -> list[int]:
    r = conn.request(9, {"groups": [{"group_id": group, "topics": [{"name": topic, "partition_indexes": partitions}]}],
                         "require_stable": True}, version=9)
    return [int(p.committed_offset) for p in r.groups[0].topics[0].partitions]


def test_v6_names_topics_by_id_and_the_offsets_are_stored_by_name(broker: Any) -> None:
    with broker.connect() as conn:
        assert conn.versions[28] == (0, 6)
        create(conn, "src", 2)
        tid = topic_id(conn, "src")
        assert conn.request(10, {"key": "g6", "key_type": 0}, version=3).error_code.value == 0
        pid, epoch = begin_v2(conn, "txn-6")
        answer = txn_commit(conn, 6, "txn-6", pid, epoch, "g6",
                            [(UNKNOWN, [0]), (tid, [0, 9]), (ZERO, [1]), (tid, [1])])
        # Topic errors first, in request order (UNKNOWN_TOPIC_ID 100, UNKNOWN_TOPIC_OR_PARTITION 3), then the
        # coordinator's answers appended to their topic's entry; one entry per topic id.
        # (kio reads the zero id as None.)
        assert answer == [(UNKNOWN, [(0, 100)]), (tid, [(9, 3), (0, 0), (1, 0)]), (None, [(1, 100)])]
        assert committed(conn, "g6", "src", [0, 1]) == [-1, -1]  # pending until the transaction commits
        assert end_txn(conn, "txn-6", pid, epoch, commit=True, version=5) == 0
        assert committed(conn, "g6", "src", [0, 1]) == [7, 7]


def test_v6_tells_group_errors_as_they_are_and_v5_as_illegal_generation(broker: Any) -> None:
    with broker.connect() as conn:
        create(conn, "src", 2)
        tid = topic_id(conn, "src")
        pid, epoch = begin_v2(conn, "txn-g")
        nogroup = "no-such-group"
        assert conn.request(10, {"key": nogroup, "key_type": 0}, version=3).error_code.value == 0
        # A generation for a group that does not exist: GROUP_ID_NOT_FOUND (69) at v6, ILLEGAL_GENERATION (22) below.
        assert txn_commit(conn, 6, "txn-g", pid, epoch, nogroup, [(tid, [0])], 5, "m") == [(tid, [(0, 69)])]
        assert txn_commit(conn, 5, "txn-g", pid, epoch, nogroup, [("src", [0])], 5, "m") == [("src", [(0, 22)])]
        # The transaction is checked first, as Kafka's coordinator does: the refused commit has still added the
        # group's partition to the transaction.
        state = describe_txn(conn, "txn-g")
        assert state.transaction_state == "Ongoing"
        assert [t.topic for t in state.topics] == ["__consumer_offsets"]
        # A KIP-848 member's epoch: STALE_MEMBER_EPOCH (113) at v6, ILLEGAL_GENERATION below; its own epoch passes.
        group = "g848"
        assert conn.request(10, {"key": group, "key_type": 0}, version=3).error_code.value == 0
        joined = conn.request(68, {"group_id": group, "member_id": "member-a", "member_epoch": 0, "instance_id": None,
                                   "rebalance_timeout": 30000, "subscribed_topic_names": ["src"],
                                   "subscribed_topic_regex": None, "server_assignor": None,
                                   "topic_partitions": []}, version=1)
        assert joined.error_code.value == 0
        member_epoch = int(joined.member_epoch)
        ahead = member_epoch + 1
        assert txn_commit(conn, 6, "txn-g", pid, epoch, group, [(tid, [0])], ahead, "member-a") == [(tid, [(0, 113)])]
        assert txn_commit(conn, 5, "txn-g", pid, epoch, group, [("src", [0])], ahead, "member-a") == \
            [("src", [(0, 22)])]
        assert txn_commit(conn, 6, "txn-g", pid, epoch, group, [(tid, [0])], member_epoch, "member-a") == \
            [(tid, [(0, 0)])]
        # Metadata past offset.metadata.max.bytes (4096): OFFSET_METADATA_TOO_LARGE (12) for that partition only.
        assert txn_commit(conn, 6, "txn-g", pid, epoch, group, [(tid, [0])], member_epoch, "member-a",
                          metadata="x" * 5000) == [(tid, [(0, 12)])]
        assert end_txn(conn, "txn-g", pid, epoch, commit=True, version=5) == 0
        assert committed(conn, group, "src", [0]) == [7]
