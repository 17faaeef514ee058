"""Transactions on the wire (issue 5): coordinator, markers, LSO, read_committed, fencing, timeouts, restarts."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from samsa.broker.client import Connection
from samsa.kproto.records import decode_batches, encode_batch

TXN_ARGS = ("--override", "transaction.state.log.num.partitions=3", "--override", "offsets.topic.num.partitions=3",
            "--override", "transaction.abort.timed.out.transaction.cleanup.interval.ms=200",
            "--override", "group.initial.rebalance.delay.ms=0",
            # offsets are committed for an empty topic below; the past-log-end refusal has test_commit_bounds.py
            "--override", "samsa.offset.commit.past.log.end.enable=true")
READ_COMMITTED = 1


def wait_for_internal_topics(process: Any, key_types: tuple[int, ...]) -> None:
    """FindCoordinator until the coordinators' internal topics exist. Creating one is a metadata write,
    committed once fsynced off the event loop, so the first answers may be COORDINATOR_NOT_AVAILABLE (as
    Kafka's are); clients retry it, and the tests here start from a broker past that point."""
    with process.connect() as conn:
        for key_type in key_types:
            for _ in range(200):
                if conn.request(10, {"key": "warm-up", "key_type": key_type}, version=3).error_code.value == 0:
                    break
                time.sleep(0.05)
            else:
                raise AssertionError(f"no coordinator for key type {key_type}")


@pytest.fixture
def broker(samsa_factory: Any) -> Iterator[Any]:
    process = samsa_factory(extra_args=TXN_ARGS)
    process.start()
    wait_for_internal_topics(process, (0, 1))
    yield process
    assert process.proc is None or process.proc.poll() is None, f"samsa died:\n{process.log_tail()}"
    process.stop()


def create(conn: Connection, topic: str, partitions: int = 1) -> None:
    r = conn.request(19, {"topics": [{"name": topic, "num_partitions": partitions, "replication_factor": 1,
                                      "assignments": (), "configs": ()}], "timeout": 1000, "validate_only": False})
    assert r.topics[0].error_code.value == 0


def find_txn_coordinator(conn: Connection, txn_id: str) -> Any:
    return conn.request(10, {"key": txn_id, "key_type": 1}, version=3)


def init_pid(conn: Connection, txn_id: str, timeout_ms: int = 60000, pid: int = -1, epoch: int = -1,
             version: int = 5) -> Any:
    return conn.request(22, {"transactional_id": txn_id, "transaction_timeout": timeout_ms, "producer_id": pid,
                             "producer_epoch": epoch}, version=version)


def add_partitions(conn: Connection, txn_id: str, pid: int, epoch: int, parts: list[tuple[str, int]],
                   version: int = 3) -> dict[tuple[str, int], int]:
    by_topic: dict[str, list[int]] = {}
    for t, p in parts:
        by_topic.setdefault(t, []).append(p)
    r = conn.request(24, {"v3_and_below_transactional_id": txn_id, "v3_and_below_producer_id": pid,
                          "v3_and_below_producer_epoch": epoch,
                          "v3_and_below_topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]},
                     version=version)
    return {(t.name, p.partition_index): p.partition_error_code.value
            for t in r.results_by_topic_v3_and_below for p in t.results_by_partition}


def end_txn(conn: Connection, txn_id: str, pid: int, epoch: int, commit: bool, version: int = 3) -> int:
    r = conn.request(26, {"transactional_id": txn_id, "producer_id": pid, "producer_epoch": epoch,
                          "committed": commit}, version=version)
    return int(r.error_code.value)


def txn_batch(pid: int, epoch: int, seq: int, values: list[bytes]) -> bytes:
    return encode_batch([(None, v, ()) for v in values], timestamp_ms=int(time.time() * 1000),
                        producer_id=pid, producer_epoch=epoch, base_sequence=seq, is_transactional=True)


def produce(conn: Connection, topic: str, batch: bytes, partition: int = 0, txn_id: str | None = None) -> Any:
    r = conn.request(0, {"transactional_id": txn_id, "acks": -1, "timeout": 5000,
                         "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": batch}]}]})
    return r.responses[0].partition_responses[0]


def fetch(conn: Connection, topic: str, isolation: int, partition: int = 0, offset: int = 0) -> Any:
    r = conn.request(1, {"max_wait": 0, "min_bytes": 0, "max_bytes": 1 << 24, "isolation_level": isolation,
                         "session_id": 0, "session_epoch": -1, "replica_id": -1,
                         "topics": [{"topic": topic, "partitions": [{"partition": partition, "fetch_offset": offset,
                                                                     "partition_max_bytes": 1 << 24}]}],
                         "forgotten_topics_data": (), "rack_id": ""}, version=12)
    return r.responses[0].partitions[0]


def committed_values(conn: Connection, topic: str, partition: int = 0) -> list[bytes | None]:
    """What a read_committed client delivers: drop records of aborted transactions (KIP-98 client logic)."""
    p = fetch(conn, topic, READ_COMMITTED, partition)
    aborted = sorted((a.first_offset, a.producer_id) for a in p.aborted_transactions or ())
    active: set[int] = set()
    out = []
    for header, records in decode_batches(p.records, max_decompressed_bytes=1 << 26):
        while aborted and aborted[0][0] <= header.last_offset:
            active.add(aborted.pop(0)[1])
        if header.is_control:
            if records and records[0].key is not None and records[0].key[2:4] == b"\x00\x00":  # ABORT
                active.discard(header.producer_id)
            continue
        if header.is_transactional and header.producer_id in active:
            continue
        out.extend(r.value for r in records)
    return out


def all_values(conn: Connection, topic: str, partition: int = 0) -> list[bytes | None]:
    p = fetch(conn, topic, 0, partition)
    return [r.value for h, recs in decode_batches(p.records, max_decompressed_bytes=1 << 26) if not h.is_control
            for r in recs]


def list_offset(conn: Connection, topic: str, isolation: int) -> int:
    r = conn.request(2, {"replica_id": -1, "isolation_level": isolation, "topics": [
        {"name": topic, "partitions": [{"partition_index": 0, "timestamp": -1, "current_leader_epoch": -1}]}]},
        version=7)
    return int(r.topics[0].partitions[0].offset)


def describe_txn(conn: Connection, txn_id: str) -> Any:
    return conn.request(65, {"transactional_ids": [txn_id]}, version=0).transaction_states[0]


def fetch_offsets(conn: Connection, group: str, topic: str) -> int:
    r = conn.request(9, {"groups": [{"group_id": group, "topics": [{"name": topic, "partition_indexes": [0]}]}]},
                     version=9)
    return int(r.groups[0].topics[0].partitions[0].committed_offset)


def begin(conn: Connection, txn_id: str, timeout_ms: int = 60000) -> tuple[int, int]:
    assert find_txn_coordinator(conn, txn_id).error_code.value == 0
    r = init_pid(conn, txn_id, timeout_ms)
    assert r.error_code.value == 0, r
    return r.producer_id, r.producer_epoch


def wait_for(check: Any, timeout_s: float = 15.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.1)


def test_commit_and_abort_markers_lso_and_read_committed(broker: Any) -> None:
    with broker.connect() as conn:
        create(conn, "t", 2)
        pid, epoch = begin(conn, "txn-a")
        assert epoch == 0
        assert add_partitions(conn, "txn-a", pid, epoch, [("t", 0), ("t", 1)]) == {("t", 0): 0, ("t", 1): 0}
        assert produce(conn, "t", txn_batch(pid, epoch, 0, [b"a1", b"a2"])).error_code.value == 0
        assert produce(conn, "t", txn_batch(pid, epoch, 0, [b"b1"]), partition=1).error_code.value == 0
        # The transaction is open: read_committed sees nothing, read_uncommitted sees the records.
        p = fetch(conn, "t", READ_COMMITTED)
        assert (p.high_watermark, p.last_stable_offset, p.records) == (2, 0, b"")
        assert all_values(conn, "t") == [b"a1", b"a2"]
        # read_uncommitted reads to the high watermark but reports the LSO too, as Kafka does.
        p = fetch(conn, "t", 0)
        assert (p.high_watermark, p.last_stable_offset) == (2, 0)
        assert list_offset(conn, "t", READ_COMMITTED) == 0 and list_offset(conn, "t", 0) == 2
        assert describe_txn(conn, "txn-a").transaction_state == "Ongoing"
        assert end_txn(conn, "txn-a", pid, epoch, commit=False) == 0
        assert describe_txn(conn, "txn-a").transaction_state == "CompleteAbort"
        p = fetch(conn, "t", READ_COMMITTED)
        assert (p.high_watermark, p.last_stable_offset) == (3, 3)  # two records + the ABORT marker
        assert fetch(conn, "t", 0).last_stable_offset == 3
        assert [(a.producer_id, a.first_offset) for a in p.aborted_transactions] == [(pid, 0)]
        assert committed_values(conn, "t") == [] and committed_values(conn, "t", 1) == []

        # Next transaction, committed.
        assert add_partitions(conn, "txn-a", pid, epoch, [("t", 0)]) == {("t", 0): 0}
        assert produce(conn, "t", txn_batch(pid, epoch, 2, [b"c1"])).error_code.value == 0
        # A partition that was not added refuses transactional data (INVALID_TXN_STATE).
        assert produce(conn, "t", txn_batch(pid, epoch, 1, [b"x"]), partition=1).error_code.value == 48
        assert end_txn(conn, "txn-a", pid, epoch, commit=True) == 0
        assert end_txn(conn, "txn-a", pid, epoch, commit=True) == 0  # a retry is answered the same
        assert end_txn(conn, "txn-a", pid, epoch, commit=False) == 48
        assert committed_values(conn, "t") == [b"c1"]
        assert list_offset(conn, "t", READ_COMMITTED) == 5
        # Reading from past the aborted transaction gets no aborted entries for it.
        assert fetch(conn, "t", READ_COMMITTED, offset=3).aborted_transactions == ()


def test_zombie_is_fenced_and_its_transaction_aborted(broker: Any) -> None:
    with broker.connect() as conn:
        create(conn, "z")
        pid, epoch = begin(conn, "txn-z")
        assert add_partitions(conn, "txn-z", pid, epoch, [("z", 0)]) == {("z", 0): 0}
        assert produce(conn, "z", txn_batch(pid, epoch, 0, [b"zombie"])).error_code.value == 0
        # A new instance with the same transactional id: the open transaction is aborted, the epoch bumped.
        r = init_pid(conn, "txn-z")
        assert r.error_code.value == 0 and r.producer_id == pid and r.producer_epoch > epoch
        new_epoch = r.producer_epoch
        assert add_partitions(conn, "txn-z", pid, epoch, [("z", 0)]) == {("z", 0): 90}  # PRODUCER_FENCED
        assert add_partitions(conn, "txn-z", pid, epoch, [("z", 0)], version=1) == {("z", 0): 47}
        assert end_txn(conn, "txn-z", pid, epoch, commit=True) == 90
        assert end_txn(conn, "txn-z", pid, epoch, commit=True, version=1) == 47
        assert produce(conn, "z", txn_batch(pid, epoch, 1, [b"late"])).error_code.value == 47
        assert init_pid(conn, "txn-z", pid=pid, epoch=epoch).error_code.value == 90
        assert init_pid(conn, "txn-z", pid=pid, epoch=epoch, version=3).error_code.value == 47
        assert committed_values(conn, "z") == []
        assert add_partitions(conn, "txn-z", pid, new_epoch, [("z", 0)]) == {("z", 0): 0}
        assert produce(conn, "z", txn_batch(pid, new_epoch, 0, [b"real"])).error_code.value == 0
        assert end_txn(conn, "txn-z", pid, new_epoch, commit=True) == 0
        assert committed_values(conn, "z") == [b"real"]
        # Unknown producer id mapping, bad timeout.
        assert add_partitions(conn, "txn-z", pid + 1000, 0, [("z", 0)]) == {("z", 0): 49}
        assert init_pid(conn, "txn-big", timeout_ms=10**9).error_code.value == 50
        # Unknown partitions: nothing is added.
        assert add_partitions(conn, "txn-z", pid, new_epoch, [("z", 0), ("nope", 0)]) == {
            ("z", 0): 55, ("nope", 0): 3}


def test_transactional_offsets_visible_only_on_commit(broker: Any) -> None:
    with broker.connect() as conn:
        create(conn, "src")
        pid, epoch = begin(conn, "txn-o")
        for commit, offset in ((False, 5), (True, 7)):
            assert conn.request(10, {"key": "g", "key_type": 0}, version=3).error_code.value == 0
            r = conn.request(25, {"transactional_id": "txn-o", "producer_id": pid, "producer_epoch": epoch,
                                  "group_id": "g"}, version=3)
            assert r.error_code.value == 0
            r = conn.request(28, {"transactional_id": "txn-o", "group_id": "g", "producer_id": pid,
                                  "producer_epoch": epoch, "generation_id": -1, "member_id": "",
                                  "group_instance_id": None, "topics": [{"name": "src", "partitions": [
                                      {"partition_index": 0, "committed_offset": offset,
                                       "committed_leader_epoch": -1, "committed_metadata": ""}]}]}, version=3)
            assert r.topics[0].partitions[0].error_code.value == 0
            assert fetch_offsets(conn, "g", "src") == -1  # not visible before the commit
            assert end_txn(conn, "txn-o", pid, epoch, commit=commit) == 0
            assert fetch_offsets(conn, "g", "src") == (-1 if not commit else 7)
    broker.stop()
    broker.start()
    with broker.connect() as conn:
        assert fetch_offsets(conn, "g", "src") == 7


def test_describe_and_list(broker: Any) -> None:
    with broker.connect() as conn:
        create(conn, "d")
        pid, epoch = begin(conn, "txn-d")
        assert add_partitions(conn, "txn-d", pid, epoch, [("d", 0)]) == {("d", 0): 0}
        assert produce(conn, "d", txn_batch(pid, epoch, 0, [b"v"])).error_code.value == 0
        d = describe_txn(conn, "txn-d")
        assert (d.error_code.value, d.transaction_state, d.producer_id) == (0, "Ongoing", pid)
        assert [(t.topic, list(t.partitions)) for t in d.topics] == [("d", [0])]
        assert describe_txn(conn, "nobody").error_code.value == 105
        r = conn.request(66, {"state_filters": ["Ongoing", "Bogus"], "producer_id_filters": [],
                              "duration_filter": -1}, version=1)
        assert [(s.transactional_id, s.transaction_state) for s in r.transaction_states] == [("txn-d", "Ongoing")]
        assert list(r.unknown_state_filters) == ["Bogus"]
        r = conn.request(61, {"topics": [{"name": "d", "partition_indexes": [0]}]}, version=0)
        (state,) = r.topics[0].partitions[0].active_producers
        assert (state.producer_id, state.current_txn_start_offset, state.last_sequence) == (pid, 0, 0)
        # WriteTxnMarkers over the wire completes the partition's transaction (as a coordinator would).
        r = conn.request(27, {"markers": [{"producer_id": pid, "producer_epoch": epoch, "transaction_result": True,
                                           "topics": [{"name": "d", "partition_indexes": [0]}],
                                           "coordinator_epoch": 0}]}, version=1)
        assert r.markers[0].topics[0].partitions[0].error_code.value == 0
        assert fetch(conn, "d", READ_COMMITTED).last_stable_offset == 2


def _marker(conn: Connection, pid: int, epoch: int, topic: str, version: int, transaction_version: int) -> int:
    r = conn.request(27, {"markers": [{"producer_id": pid, "producer_epoch": epoch, "transaction_result": True,
                                       "topics": [{"name": topic, "partition_indexes": [0]}], "coordinator_epoch": 0,
                                       "transaction_version": transaction_version}]}, version=version)
    return int(r.markers[0].topics[0].partitions[0].error_code.value)


def test_write_txn_markers_v2_takes_the_transaction_version(broker: Any) -> None:
    """KIP-1228: a transaction version 2 marker must be newer than the epoch of the producer's open transaction
    (its coordinator bumped it before writing); an equal one is INVALID_PRODUCER_EPOCH and writes nothing. With no
    transaction open, the same marker again is a coordinator's retry: written (Kafka 4.4, KAFKA-19999). Older
    markers (v1, or v2 with version 0) keep the rule "not older"."""
    with broker.connect() as conn:
        for topic in ("tv2", "tv0"):
            create(conn, topic)
        pid, epoch = begin(conn, "txn-tv")
        assert add_partitions(conn, "txn-tv", pid, epoch, [("tv2", 0), ("tv0", 0)]) == {("tv2", 0): 0, ("tv0", 0): 0}
        for topic in ("tv2", "tv0"):
            assert produce(conn, topic, txn_batch(pid, epoch, 0, [b"v"])).error_code.value == 0
        assert _marker(conn, pid, epoch, "tv2", 2, 2) == 47
        assert fetch(conn, "tv2", READ_COMMITTED).last_stable_offset == 0  # nothing written
        assert _marker(conn, pid, epoch + 1, "tv2", 2, 2) == 0
        assert fetch(conn, "tv2", READ_COMMITTED).last_stable_offset == 2
        assert _marker(conn, pid, epoch + 1, "tv2", 2, 2) == 0  # the same marker again: a retry
        assert _marker(conn, pid, epoch, "tv2", 2, 2) == 47  # older
        assert fetch(conn, "tv2", READ_COMMITTED).high_watermark == 3
        assert _marker(conn, pid, epoch, "tv0", 2, 0) == 0
        assert _marker(conn, pid, epoch, "tv0", 1, 0) == 0  # v1: version 0 (a second marker, as Kafka writes it)
        assert _marker(conn, pid, epoch - 1, "tv0", 1, 0) == 47
        assert fetch(conn, "tv0", READ_COMMITTED).high_watermark == 3


def test_timeout_aborts_and_restart_never_leaves_a_transaction_hanging(broker: Any) -> None:
    with broker.connect() as conn:
        create(conn, "to")
        pid, epoch = begin(conn, "txn-t", timeout_ms=1000)
        assert add_partitions(conn, "txn-t", pid, epoch, [("to", 0)]) == {("to", 0): 0}
        assert produce(conn, "to", txn_batch(pid, epoch, 0, [b"abandoned"])).error_code.value == 0
        wait_for(lambda: describe_txn(conn, "txn-t").transaction_state == "CompleteAbort")
        assert describe_txn(conn, "txn-t").producer_epoch == epoch + 1  # fenced
        assert end_txn(conn, "txn-t", pid, epoch, commit=True) == 90
        assert fetch(conn, "to", READ_COMMITTED).last_stable_offset == 2
        assert committed_values(conn, "to") == []

        # An open transaction when the broker dies: after the restart it is still known and is aborted.
        pid2, epoch2 = begin(conn, "txn-r", timeout_ms=3000)
        assert add_partitions(conn, "txn-r", pid2, epoch2, [("to", 0)]) == {("to", 0): 0}
        assert produce(conn, "to", txn_batch(pid2, epoch2, 0, [b"in-flight"])).error_code.value == 0
        assert produce(conn, "to", encode_batch([(None, b"plain", ())], timestamp_ms=int(time.time() * 1000))
                       ).error_code.value == 0
        assert fetch(conn, "to", READ_COMMITTED).last_stable_offset == 2
    broker.stop(kill=True)
    broker.start()
    with broker.connect() as conn:
        assert fetch(conn, "to", READ_COMMITTED).last_stable_offset == 2  # still open after the restart
        wait_for(lambda: describe_txn(conn, "txn-r").transaction_state == "CompleteAbort")
        p = fetch(conn, "to", READ_COMMITTED)
        assert p.last_stable_offset == p.high_watermark == 5
        assert committed_values(conn, "to") == [b"plain"]
    broker.stop()
    broker.start()
    with broker.connect() as conn:  # the aborted-transaction index survives a restart
        assert committed_values(conn, "to") == [b"plain"]
        assert all_values(conn, "to") == [b"abandoned", b"in-flight", b"plain"]


def test_odd_requests_get_error_codes(broker: Any) -> None:
    with broker.connect() as conn:
        assert init_pid(conn, "").error_code.value == 42  # INVALID_REQUEST
        assert find_txn_coordinator(conn, "").error_code.value == 42
        r = conn.request(10, {"key_type": 1, "coordinator_keys": ["a", "b"]}, version=4)
        assert [(c.key, c.error_code.value) for c in r.coordinators] == [("a", 0), ("b", 0)]
        assert end_txn(conn, "never-seen", 5, 0, commit=True) == 49  # INVALID_PRODUCER_ID_MAPPING
        r = conn.request(25, {"transactional_id": "never-seen", "producer_id": 5, "producer_epoch": 0,
                              "group_id": "g"}, version=3)
        assert r.error_code.value == 49
        r = conn.request(28, {"transactional_id": "never-seen", "group_id": "g", "producer_id": 5,
                              "producer_epoch": 0, "topics": [{"name": "nope", "partitions": [
                                  {"partition_index": 0, "committed_offset": 1, "committed_metadata": ""}]}]},
                         version=0)
        assert r.topics[0].partitions[0].error_code.value == 3
        r = conn.request(27, {"markers": [{"producer_id": 5, "producer_epoch": 0, "transaction_result": False,
                                           "topics": [{"name": "nope", "partition_indexes": [0]}],
                                           "coordinator_epoch": 0}]}, version=1)
        assert r.markers[0].topics[0].partitions[0].error_code.value == 3
        r = conn.request(61, {"topics": [{"name": "nope", "partition_indexes": [0]}]}, version=0)
        assert r.topics[0].partitions[0].error_code.value == 3
        r = conn.request(66, {"state_filters": [], "producer_id_filters": [], "duration_filter": -1,
                              "transactional_id_pattern": "("}, version=2)
        assert r.error_code.value == 128  # INVALID_REGULAR_EXPRESSION
        # A transactional batch from a producer id no transaction owns.
        create(conn, "odd")
        assert produce(conn, "odd", txn_batch(123456, 0, 0, [b"x"])).error_code.value == 49
        # AddPartitionsToTxn v4 (brokers' batched form), including verify_only.
        pid, epoch = begin(conn, "txn-v4")
        for verify_only, expected in ((True, 48), (False, 0), (True, 0)):
            r = conn.request(24, {"transactions": [{"transactional_id": "txn-v4", "producer_id": pid,
                                                    "producer_epoch": epoch, "verify_only": verify_only,
                                                    "topics": [{"name": "odd", "partitions": [0]}]}]}, version=4)
            (result,) = r.results_by_transaction
            assert result.topic_results[0].results_by_partition[0].partition_error_code.value == expected
        assert conn.request(18, {}, version=0).error_code.value == 0  # the connection is still fine
