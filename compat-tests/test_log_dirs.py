"""DescribeLogDirs against Samsa with the real tools: Kafka's kafka-log-dirs.sh (LogDirsCommand, the reference's)
and kafka-python's KafkaAdminClient.describe_log_dirs. Sizes are checked against the segment files on
disk after producing N records of S bytes, not only for presence."""

from __future__ import annotations

import json
import os
import sys
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from kafka import KafkaAdminClient, KafkaProducer
from kafka.admin import NewTopic
from oracle_fixture import QUICK_JVM_OPTS, run_kafka_tool

LOG_DIRS = "org.apache.kafka.tools.LogDirsCommand"
RECORDS = 200
RECORD_BYTES = 1000


def on_disk(data_dir: Path, topic: str, partition: int) -> int:
    return sum(p.stat().st_size for p in (data_dir / f"{topic}-{partition}").glob("*.log"))


def produce(bootstrap: str, topic: str) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks=1, linger_ms=5, compression_type=None)
    try:
        for i in range(RECORDS):
            producer.send(topic, value=bytes([i % 256]) * RECORD_BYTES, partition=0)
        producer.flush(timeout=30)
    finally:
        producer.close(timeout=10)


def make_topic(bootstrap: str) -> str:
    topic = f"logdirs-{uuid.uuid4().hex[:6]}"
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=20000)
    try:
        admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=1)])
    finally:
        admin.close()
    produce(bootstrap, topic)
    return topic


def test_kafka_log_dirs_describe(samsa_server: Any) -> None:
    topic = make_topic(samsa_server.bootstrap)
    out = run_kafka_tool(LOG_DIRS, "--bootstrap-server", samsa_server.bootstrap, "--describe",
                         "--topic-list", topic, jvm_opts=QUICK_JVM_OPTS, timeout=90).stdout
    # The tool prints two status lines, then the JSON document.
    doc = json.loads(next(line for line in out.splitlines() if line.startswith("{")))
    (broker,) = doc["brokers"]
    (log_dir,) = broker["logDirs"]
    assert log_dir["error"] is None
    assert log_dir["logDir"] == os.path.abspath(samsa_server.data_dir)
    by_name = {p["partition"]: p for p in log_dir["partitions"]}
    assert set(by_name) == {f"{topic}-0", f"{topic}-1"}
    size = by_name[f"{topic}-0"]["size"]
    assert size == on_disk(samsa_server.data_dir, topic, 0) >= RECORDS * RECORD_BYTES
    assert by_name[f"{topic}-1"]["size"] == 0
    assert all(p["offsetLag"] == 0 and p["isFuture"] is False for p in by_name.values())


def test_kafka_python_describe_log_dirs(samsa_server: Any) -> None:
    topic = make_topic(samsa_server.bootstrap)
    admin = KafkaAdminClient(bootstrap_servers=samsa_server.bootstrap, request_timeout_ms=20000)
    try:
        answer = admin.describe_log_dirs({topic: [0]})
    finally:
        admin.close()
    (per_broker,) = answer
    (log_dir,) = per_broker["log_dirs"]
    assert log_dir["error_code"] == 0
    assert log_dir["log_dir"] == os.path.abspath(samsa_server.data_dir)
    (entry,) = log_dir["topics"]
    assert entry["name"] == topic
    (partition,) = entry["partitions"]
    assert partition["partition_index"] == 0
    assert partition["partition_size"] == on_disk(samsa_server.data_dir, topic, 0) >= RECORDS * RECORD_BYTES
    assert log_dir["total_bytes"] >= log_dir["usable_bytes"] > 0
