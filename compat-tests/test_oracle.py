"""The reference Kafka itself: its tools run from the Maven jars, and the three-node cluster works.

These check the oracle machinery (oracle_fixture.py), not Samsa. Marked ``kafka``.
"""

from __future__ import annotations

import os
import time
import uuid

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from oracle_fixture import QUICK_JVM_OPTS, KafkaCluster, run_kafka_tool

pytestmark = pytest.mark.kafka


@pytest.mark.timeout(240)
def test_kafka_tools_run_from_the_maven_jars(kafka_oracle: KafkaCluster) -> None:
    b = kafka_oracle.bootstrap
    topic = f"oracle-tools-{uuid.uuid4().hex[:8]}"
    run_kafka_tool("org.apache.kafka.tools.TopicCommand", "--bootstrap-server", b, "--create",
                   "--topic", topic, "--partitions", "2", "--replication-factor", "1", jvm_opts=QUICK_JVM_OPTS)
    res = run_kafka_tool("org.apache.kafka.tools.ProducerPerformance", "--topic", topic, "--num-records", "1000",
                         "--record-size", "100", "--throughput", "-1",
                         "--producer-props", f"bootstrap.servers={b}", "acks=1")
    assert "1000 records sent" in res.stdout, res.stdout
    res = run_kafka_tool("org.apache.kafka.tools.GetOffsetShell", "--bootstrap-server", b, "--topic", topic,
                         jvm_opts=QUICK_JVM_OPTS)
    ends = dict(line.rsplit(":", 2)[1:] for line in res.stdout.split())
    assert sorted(ends) == ["0", "1"] and sum(int(v) for v in ends.values()) == 1000, res.stdout


@pytest.mark.slow
@pytest.mark.timeout(240)
@pytest.mark.skipif(
    os.environ.get("COMPAT_ORACLE_3NODE") != "1",
    reason="three Kafka JVMs take 25-75 s to start on 2 busy cores: opt in with COMPAT_ORACLE_3NODE=1",
)
def test_three_node_cluster_replicates(kafka_oracle_3: KafkaCluster) -> None:
    c = kafka_oracle_3
    assert len(c.nodes) == 3 and len(c.bootstrap.split(",")) == 3
    topic = f"oracle-rf3-{uuid.uuid4().hex[:8]}"
    admin = KafkaAdminClient(bootstrap_servers=c.bootstrap, request_timeout_ms=20000)
    try:
        admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=3)], timeout_ms=20000)
        deadline = time.monotonic() + 30
        while True:
            (t,) = admin.describe_topics([topic])
            parts = t["partitions"]
            if (len(parts) == 3 and all(len(p["isr_nodes"]) == 3 for p in parts)) or time.monotonic() > deadline:
                break
            time.sleep(0.3)
        assert sorted(p["partition_index"] for p in parts) == [0, 1, 2]
        assert all(sorted(p["replica_nodes"]) == [1, 2, 3] and len(p["isr_nodes"]) == 3 for p in parts), parts
        assert {p["leader_id"] for p in parts} <= {1, 2, 3}
    finally:
        admin.close()

    producer = KafkaProducer(bootstrap_servers=c.bootstrap, acks="all", enable_idempotence=False)
    try:
        futures = [producer.send(topic, key=f"k{i % 7}".encode(), value=f"v{i}".encode()) for i in range(100)]
        producer.flush(timeout=30)
        acked = [f.get(timeout=30) for f in futures]
    finally:
        producer.close(timeout=10)
    consumer = KafkaConsumer(bootstrap_servers=c.bootstrap, group_id=None, enable_auto_commit=False)
    try:
        tps = [TopicPartition(topic, p) for p in range(3)]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        got: list[tuple[int, int]] = []
        deadline = time.monotonic() + 30
        while len(got) < 100 and time.monotonic() < deadline:
            for tp, msgs in consumer.poll(timeout_ms=500).items():
                got += [(tp.partition, m.offset) for m in msgs]
    finally:
        consumer.close()
    assert sorted(got) == sorted((md.partition, md.offset) for md in acked)
    c.check_alive()
