"""`samsa groups list|describe|delete|reset-offsets|history` against a real `samsa serve` process."""

from __future__ import annotations

import json
import struct
import subprocess
import sys
import time
from typing import Any

import pytest

from samsa.broker.client import Connection
from samsa.kproto.records import encode_batch

REPO_CLI = [sys.executable, "-m", "samsa.broker.cli", "groups"]


@pytest.fixture
def broker(group_broker: Any) -> Any:
    return group_broker


def groups_cli(broker: Any, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*REPO_CLI, *args[:1], "--bootstrap-server", broker.bootstrap, *args[1:]],
                          capture_output=True, text=True, timeout=60)


def subscription(topic: str) -> bytes:
    return struct.pack(">hih", 0, 1, len(topic)) + topic.encode() + struct.pack(">i", -1)


def assignment(topic: str, parts: list[int]) -> bytes:
    return (struct.pack(">hih", 0, 1, len(topic)) + topic.encode() + struct.pack(">i", len(parts))
            + b"".join(struct.pack(">i", p) for p in parts) + struct.pack(">i", -1))


def setup_group(conn: Connection, group: str, topic: str) -> tuple[str, int]:
    """A one-member consumer group over both partitions of `topic`; returns (member id, generation)."""
    # a long session: this member never heartbeats while the CLI runs (slowly, on a busy machine)
    values = {"group_id": group, "session_timeout": 120000, "rebalance_timeout": 120000, "member_id": "",
              "protocol_type": "consumer", "protocols": [{"name": "range", "metadata": subscription(topic)}]}
    j = conn.request(11, values)
    if j.error_code.value == 79:
        j = conn.request(11, {**values, "member_id": j.member_id})
    assert j.error_code.value == 0
    s = conn.request(14, {"group_id": group, "generation_id": j.generation_id, "member_id": j.member_id,
                          "assignments": [{"member_id": j.member_id, "assignment": assignment(topic, [0, 1])}]})
    assert s.error_code.value == 0
    return j.member_id, j.generation_id


def test_groups_commands(broker: Any) -> None:
    with broker.connect() as conn:
        conn.request(19, {"topics": [{"name": "orders", "num_partitions": 2, "replication_factor": 1}],
                          "timeout": 30000})
        now = int(time.time() * 1000)
        for p in (0, 1):
            batch = encode_batch([(None, b"v%d" % i, ()) for i in range(10)], timestamp_ms=now)
            r = conn.request(0, {"acks": -1, "timeout": 30000, "topic_data": [
                {"name": "orders", "partition_data": [{"index": p, "records": bytes(batch)}]}]})
            assert r.responses[0].partition_responses[0].error_code.value == 0
        member_id, gen = setup_group(conn, "billing", "orders")
        c = conn.request(8, {"group_id": "billing", "generation_id_or_member_epoch": gen, "member_id": member_id,
                             "topics": [{"name": "orders", "partitions": [
                                 {"partition_index": 0, "committed_offset": 7, "committed_metadata": ""},
                                 {"partition_index": 1, "committed_offset": 4, "committed_metadata": ""}]}]})
        assert all(p.error_code.value == 0 for p in c.topics[0].partitions)

        listed = groups_cli(broker, "list")
        assert listed.returncode == 0 and "billing\tStable\tconsumer" in listed.stdout
        described = groups_cli(broker, "describe", "--group", "billing")
        assert described.returncode == 0, described.stderr
        rows = [line.split("\t") for line in described.stdout.splitlines() if line.startswith("orders\t")]
        assert [(r[1], r[2], r[3], r[4], r[5]) for r in rows] == [
            ("0", "7", "10", "3", member_id), ("1", "4", "10", "6", member_id)]

        refused = groups_cli(broker, "reset-offsets", "--group", "billing", "--topic", "orders", "--to-earliest",
                             "--reason", "replay")
        assert refused.returncode == 1 and "inactive" in refused.stderr
        conn.request(13, {"group_id": "billing", "members": [{"member_id": member_id}]})

    reset = groups_cli(broker, "reset-offsets", "--group", "billing", "--topic", "orders", "--to-earliest",
                       "--reason", "replay after bug #12")
    assert reset.returncode == 0, reset.stderr
    shifted = groups_cli(broker, "reset-offsets", "--group", "billing", "--topic", "orders", "--partition", "1",
                         "--shift-by", "50", "--reason", "skip ahead")
    assert shifted.returncode == 0, shifted.stderr
    with broker.connect() as conn:
        r = conn.request(9, {"group_id": "billing", "topics": None}, version=7)
        assert {p.partition_index: p.committed_offset for p in r.topics[0].partitions} == {0: 0, 1: 10}

    history = groups_cli(broker, "history", "--json", "--group", "billing")
    assert history.returncode == 0, history.stderr
    audits = [json.loads(line) for line in history.stdout.splitlines()]
    assert [a["why"] for a in audits] == ["replay after bug #12", "skip ahead"]
    assert audits[0]["changes"] == [{"topic": "orders", "partition": 0, "from": 7, "to": 0},
                                    {"topic": "orders", "partition": 1, "from": 4, "to": 0}]
    assert audits[1]["changes"] == [{"topic": "orders", "partition": 1, "from": 0, "to": 10}]
    assert audits[0]["who"].startswith("samsa-groups/") and audits[0]["when_ms"] > 0
    text = groups_cli(broker, "history", "billing")
    assert "orders-0: 7 -> 0" in text.stdout and "replay after bug #12" in text.stdout

    # the audit trail survives a restart; deleting the group keeps the topic's data
    broker.stop()
    broker.start()
    again = groups_cli(broker, "history", "--json", "billing")
    assert len(again.stdout.splitlines()) == 2
    deleted = groups_cli(broker, "delete", "--group", "billing")
    assert deleted.returncode == 0, deleted.stderr
    assert "billing" not in groups_cli(broker, "list").stdout
    with broker.connect() as conn:
        r = conn.request(2, {"replica_id": -1, "isolation_level": 0, "topics": [
            {"name": "orders", "partitions": [{"partition_index": 0, "timestamp": -1}]}]})
        assert r.topics[0].partitions[0].offset == 10
