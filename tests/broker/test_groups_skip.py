"""`samsa groups skip` against a real `samsa serve` process: refused unless the group is stuck at the offset or
empty, the quarantine topic's copies, the committed offset, and the audit record `history` shows."""

from __future__ import annotations

import json
import struct
import subprocess
import sys
import time
from typing import Any

import pytest

from samsa.broker.client import Connection
from samsa.kproto.records import Header, Record, decode_batches, encode_batch

REPO_CLI = [sys.executable, "-m", "samsa.broker.cli", "groups"]
DAY_MS = 86_400_000


@pytest.fixture
def broker(group_broker: Any) -> Any:
    return group_broker


def groups_cli(broker: Any, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*REPO_CLI, *args[:1], "--bootstrap-server", broker.bootstrap, *args[1:]],
                          capture_output=True, text=True, timeout=90)


def originals(base_ms: int, count: int) -> list[Record]:
    return [Record(i, base_ms + i * 1000, b"k%d" % i, b"v%d" % i, (Header("trace", b"t%d" % i),))
            for i in range(count)]


def setup(conn: Connection, topic: str, records: list[Record]) -> None:
    r = conn.request(19, {"topics": [{"name": topic, "num_partitions": 1, "replication_factor": 1}],
                          "timeout": 30000})
    assert r.topics[0].error_code.value == 0
    batch = encode_batch(records, timestamp_ms=records[0].timestamp_ms)
    p = conn.request(0, {"acks": -1, "timeout": 30000, "topic_data": [
        {"name": topic, "partition_data": [{"index": 0, "records": batch}]}]})
    assert p.responses[0].partition_responses[0].error_code.value == 0


def join(conn: Connection, group: str, topic: str) -> tuple[str, int]:
    """One member owning partition 0 (a long session: it never heartbeats while the CLI runs)."""
    sub = struct.pack(">hih", 0, 1, len(topic)) + topic.encode() + struct.pack(">i", -1)
    values = {"group_id": group, "session_timeout": 120000, "rebalance_timeout": 120000, "member_id": "",
              "protocol_type": "consumer", "protocols": [{"name": "range", "metadata": sub}]}
    j = conn.request(11, values)
    if j.error_code.value == 79:
        j = conn.request(11, {**values, "member_id": j.member_id})
    assert j.error_code.value == 0
    assignment = (struct.pack(">hih", 0, 1, len(topic)) + topic.encode() + struct.pack(">ii", 1, 0)
                  + struct.pack(">i", -1))
    s = conn.request(14, {"group_id": group, "generation_id": j.generation_id, "member_id": j.member_id,
                          "assignments": [{"member_id": j.member_id, "assignment": assignment}]})
    assert s.error_code.value == 0
    return j.member_id, j.generation_id


def commit(conn: Connection, group: str, member: str, generation: int, topic: str, offset: int) -> None:
    c = conn.request(8, {"group_id": group, "generation_id_or_member_epoch": generation, "member_id": member,
                         "topics": [{"name": topic, "partitions": [
                             {"partition_index": 0, "committed_offset": offset, "committed_metadata": ""}]}]})
    assert c.topics[0].partitions[0].error_code.value == 0


def committed(conn: Connection, group: str, topic: str) -> int:
    r = conn.request(9, {"group_id": group, "topics": [{"name": topic, "partition_indexes": [0]}]}, version=7)
    return int(r.topics[0].partitions[0].committed_offset)


def fetch_all(conn: Connection, topic: str) -> list[Record]:
    r = conn.request(1, {"max_wait": 0, "min_bytes": 0, "max_bytes": 1 << 24, "isolation_level": 0,
                         "session_id": 0, "session_epoch": -1, "replica_id": -1,
                         "topics": [{"topic": topic, "partitions": [{"partition": 0, "fetch_offset": 0,
                                                                     "partition_max_bytes": 1 << 24}]}],
                         "forgotten_topics_data": (), "rack_id": ""}, version=12)
    part = r.responses[0].partitions[0]
    assert part.error_code.value == 0
    return [rec for _, recs in decode_batches(part.records or b"", max_decompressed_bytes=1 << 26) for rec in recs]


def topic_exists(conn: Connection, topic: str) -> bool:
    r = conn.request(3, {"topics": [{"name": topic}], "allow_auto_topic_creation": False})
    return bool(r.topics[0].error_code.value == 0)


def test_skip_refused_while_members_are_not_stuck_at_the_offset(broker: Any) -> None:
    with broker.connect() as conn:
        setup(conn, "orders", originals(int(time.time() * 1000) - DAY_MS, 10))
        member, generation = join(conn, "billing", "orders")
        commit(conn, "billing", member, generation, "orders", 3)

        ahead = groups_cli(broker, "skip", "--group", "billing", "--topic", "orders", "--partition", "0",
                           "--offset", "5", "--reason", "bad json")
        assert ahead.returncode == 1
        assert len(ahead.stderr.strip().splitlines()) == 1
        assert "committed offset of orders-0 is 3, not 5" in ahead.stderr

        # Stuck exactly there, but live: the broker refuses an admin commit while the group has members.
        live = groups_cli(broker, "skip", "--group", "billing", "--topic", "orders", "--partition", "0",
                          "--offset", "3", "--reason", "bad json")
        assert live.returncode == 1 and "1 member(s)" in live.stderr and "samsa.broker.poison" in live.stderr

        assert committed(conn, "billing", "orders") == 3
        assert not topic_exists(conn, "orders.quarantine")  # nothing was copied
    history = groups_cli(broker, "history", "--json", "billing")
    assert history.returncode == 0 and "No offset resets or skips recorded" in history.stdout


def test_skip_on_an_empty_group_copies_commits_and_audits(broker: Any) -> None:
    base_ms = int(time.time() * 1000) - DAY_MS
    source = originals(base_ms, 10)
    with broker.connect() as conn:
        setup(conn, "orders", source)
        member, generation = join(conn, "billing", "orders")
        commit(conn, "billing", member, generation, "orders", 4)
        conn.request(13, {"group_id": "billing", "members": [{"member_id": member}]})

    too_many = groups_cli(broker, "skip", "--group", "billing", "--topic", "orders", "--partition", "0",
                          "--offset", "4", "--count", "100", "--reason", "bad json")
    assert too_many.returncode == 1 and "has 6 record(s) from offset 4" in too_many.stderr

    skipped = groups_cli(broker, "skip", "--group", "billing", "--topic", "orders", "--partition", "0",
                         "--offset", "4", "--count", "2", "--reason", "bad json in v4", "--operator", "alice")
    assert skipped.returncode == 0, skipped.stderr
    assert "copied to orders.quarantine, committed offset 6" in skipped.stdout

    with broker.connect() as conn:
        assert committed(conn, "billing", "orders") == 6
        copies = fetch_all(conn, "orders.quarantine")
        assert [(c.key, c.value, c.timestamp_ms) for c in copies] == [
            (b"k4", b"v4", base_ms + 4000), (b"k5", b"v5", base_ms + 5000)]
        for copy, offset in zip(copies, (4, 5), strict=True):
            assert [(h.key, h.value) for h in copy.headers] == [
                ("trace", b"t%d" % offset),
                ("samsa.quarantine.source.topic", b"orders"), ("samsa.quarantine.source.partition", b"0"),
                ("samsa.quarantine.source.offset", str(offset).encode()), ("samsa.quarantine.group", b"billing"),
                ("samsa.quarantine.reason", b"bad json in v4"), ("samsa.quarantine.operator", b"alice")]
        assert [r.value for r in fetch_all(conn, "orders")] == [r.value for r in source]  # the source is untouched

    # Another skip, into a named quarantine topic, then a reset: history shows all three, in order.
    again = groups_cli(broker, "skip", "--group", "billing", "--topic", "orders", "--partition", "0",
                       "--offset", "6", "--reason", "schema v9", "--quarantine", "orders.dlq")
    assert again.returncode == 0, again.stderr
    reset = groups_cli(broker, "reset-offsets", "--group", "billing", "--topic", "orders", "--to-offset", "2",
                       "--reason", "replay")
    assert reset.returncode == 0, reset.stderr
    with broker.connect() as conn:
        assert [c.key for c in fetch_all(conn, "orders.dlq")] == [b"k6"]
        assert committed(conn, "billing", "orders") == 2

    history = groups_cli(broker, "history", "--json", "billing")
    assert history.returncode == 0, history.stderr
    audits = [json.loads(line) for line in history.stdout.splitlines()]
    assert [a.get("kind", "reset") for a in audits] == ["skip", "skip", "reset"]
    first = audits[0]
    assert (first["count"], first["first"], first["last"], first["quarantine"], first["reason"], first["operator"],
            first["why"]) == (2, 4, 5, "orders.quarantine", "bad json in v4", "alice", "bad json in v4")
    assert first["changes"] == [{"topic": "orders", "partition": 0, "from": 4, "to": 6}]
    assert first["who"].startswith("samsa-groups/")
    assert (audits[1]["quarantine"], audits[1]["count"], audits[1]["changes"][0]["to"]) == ("orders.dlq", 1, 7)
    text = groups_cli(broker, "history", "billing").stdout
    assert "skip  by samsa-groups/" in text and "2 record(s) 4-5 copied to orders.quarantine  operator: alice" in text
    assert "reset  by" in text and "orders-0: 7 -> 2" in text


def test_count_is_records_not_offsets_across_a_transaction_marker(broker: Any) -> None:
    """Offsets have gaps: a committed transaction's marker takes an offset but is no record, so --count 2
    from offset 3 skips the records at 3 and 5 and commits 6."""
    now = int(time.time() * 1000)
    with broker.connect() as conn:
        setup(conn, "events", [Record(i, now, b"k%d" % i, b"v%d" % i) for i in range(3)])
        for _ in range(200):  # the transaction state topic is made by the first FindCoordinator
            if conn.request(10, {"key": "tx", "key_type": 1}, version=3).error_code.value == 0:
                break
            time.sleep(0.05)
        pid = conn.request(22, {"transactional_id": "tx", "transaction_timeout": 60000, "producer_id": -1,
                                "producer_epoch": -1}, version=5)
        assert pid.error_code.value == 0
        added = conn.request(24, {"v3_and_below_transactional_id": "tx", "v3_and_below_producer_id": pid.producer_id,
                                  "v3_and_below_producer_epoch": pid.producer_epoch,
                                  "v3_and_below_topics": [{"name": "events", "partitions": [0]}]}, version=3)
        assert added.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code.value == 0
        txn = encode_batch([(b"k3", b"v3", ())], timestamp_ms=now, producer_id=pid.producer_id,
                           producer_epoch=pid.producer_epoch, base_sequence=0, is_transactional=True)
        p = conn.request(0, {"transactional_id": "tx", "acks": -1, "timeout": 30000, "topic_data": [
            {"name": "events", "partition_data": [{"index": 0, "records": txn}]}]})
        assert p.responses[0].partition_responses[0].error_code.value == 0
        end = conn.request(26, {"transactional_id": "tx", "producer_id": pid.producer_id,
                                "producer_epoch": pid.producer_epoch, "committed": True}, version=3)
        assert end.error_code.value == 0
        after = encode_batch([(b"k%d" % i, b"v%d" % i, ()) for i in (5, 6, 7)], timestamp_ms=now)
        for _ in range(200):  # the marker at 4 is written as the transaction completes
            r = conn.request(2, {"replica_id": -1, "isolation_level": 0, "topics": [
                {"name": "events", "partitions": [{"partition_index": 0, "timestamp": -1}]}]})
            if r.topics[0].partitions[0].offset == 5:
                break
            time.sleep(0.05)
        p = conn.request(0, {"acks": -1, "timeout": 30000, "topic_data": [
            {"name": "events", "partition_data": [{"index": 0, "records": after}]}]})
        assert p.responses[0].partition_responses[0].base_offset == 5

    skipped = groups_cli(broker, "skip", "--group", "audit", "--topic", "events", "--partition", "0", "--offset", "3",
                         "--count", "2", "--reason", "bad batch")
    assert skipped.returncode == 0, skipped.stderr
    assert "(offsets 3-5)" in skipped.stdout
    with broker.connect() as conn:
        assert committed(conn, "audit", "events") == 6
        copies = fetch_all(conn, "events.quarantine")
        assert [(c.value, dict((h.key, h.value) for h in c.headers)["samsa.quarantine.source.offset"])
                for c in copies] == [(b"v3", b"3"), (b"v5", b"5")]
