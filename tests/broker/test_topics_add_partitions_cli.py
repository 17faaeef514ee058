"""`samsa topics add-partitions` on a topic whose records carry keys: the key -> partition mapping would
change, so it refuses (one line, non-zero exit) unless --force (issue 20: the seeds call expansion "a
routing transition with ordering consequences, not a harmless capacity toggle")."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest

from samsa.broker.client import Connection
from samsa.kproto.records import encode_batch

CLI = [sys.executable, "-m", "samsa.broker.cli", "topics"]


@pytest.fixture
def broker(samsa_factory: Any) -> Iterator[Any]:
    process = samsa_factory()
    process.start()
    yield process
    process.stop()


def topics_cli(broker: Any, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args, "--bootstrap-server", broker.bootstrap], capture_output=True, text=True,
                          timeout=60)


def create(conn: Connection, topic: str, partitions: int) -> None:
    r = conn.request(19, {"topics": [{"name": topic, "num_partitions": partitions, "replication_factor": 1,
                                      "assignments": (), "configs": ()}], "timeout": 5000, "validate_only": False})
    assert r.topics[0].error_code.value == 0


def produce(conn: Connection, topic: str, partition: int, records: list[tuple[bytes | None, bytes]]) -> None:
    batch = encode_batch([(k, v, ()) for k, v in records], timestamp_ms=int(time.time() * 1000))
    for _ in range(100):  # the new topic's leader may not be ready for a moment: retriable, as for clients
        r = conn.request(0, {"transactional_id": None, "acks": -1, "timeout": 5000, "topic_data": [
            {"name": topic, "partition_data": [{"index": partition, "records": batch}]}]})
        code = r.responses[0].partition_responses[0].error_code.value
        if code == 0:
            return
        time.sleep(0.05)
    raise AssertionError(f"produce to {topic}-{partition}: error {code}")


def partition_count(conn: Connection, topic: str) -> int:
    r = conn.request(3, {"topics": [{"name": topic}], "allow_auto_topic_creation": False})
    return len(r.topics[0].partitions)


def test_keyed_topic_needs_force(broker: Any) -> None:
    with broker.connect() as conn:
        create(conn, "keyed", 2)
        produce(conn, "keyed", 0, [(None, b"unkeyed")])
        # the key is in partition 1 only, behind unkeyed records: every partition is looked at
        produce(conn, "keyed", 1, [(b"user-7", b"first"), (None, b"x"), (None, b"y")])
    r = topics_cli(broker, "add-partitions", "keyed", "--num", "2")
    assert r.returncode != 0
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), r.stderr
    assert "keys" in lines[0] and "partitions 1" in lines[0] and "--force" in lines[0], lines[0]
    assert "2 to 4 partitions" in lines[0] and "stop the producers" in lines[0]
    with broker.connect() as conn:
        assert partition_count(conn, "keyed") == 2  # nothing changed
    r = topics_cli(broker, "add-partitions", "keyed", "--total", "4", "--force")
    assert r.returncode == 0, r.stderr
    assert "2 -> 4 partitions" in r.stdout
    with broker.connect() as conn:
        assert partition_count(conn, "keyed") == 4


def test_unkeyed_and_empty_topics_grow_without_force(broker: Any) -> None:
    with broker.connect() as conn:
        create(conn, "unkeyed", 2)
        create(conn, "empty", 1)
        produce(conn, "unkeyed", 0, [(None, b"a"), (None, b"b")])
        produce(conn, "unkeyed", 1, [(None, b"c")])
    r = topics_cli(broker, "add-partitions", "unkeyed", "--num", "1")
    assert r.returncode == 0, r.stderr
    r = topics_cli(broker, "add-partitions", "empty", "--total", "3")
    assert r.returncode == 0, r.stderr
    with broker.connect() as conn:
        assert partition_count(conn, "unkeyed") == 3
        assert partition_count(conn, "empty") == 3
