"""A Kafka Streams 4.4 word count (group.protocol=streams) across a Samsa restart: the streams group is
reloaded from __consumer_offsets, so the running instance keeps its member id and epoch and goes on (a
broker that forgot the group would answer GROUP_ID_NOT_FOUND, which Kafka Streams treats as fatal);
words produced before and after the restart are all counted exactly once."""

from __future__ import annotations

import shutil
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest
from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient, NewTopic
from oracle_fixture import KAFKA_VERSION, free_port
from samsa_fixture import start_samsa
from test_streams_word_count import JAVA_DIR, WORDS, Instance, _produce, _wait_for


def test_word_count_goes_on_across_a_broker_restart(tmp_path: Path) -> None:
    if not (JAVA_DIR / "target" / "lib" / f"kafka-streams-{KAFKA_VERSION}.jar").is_file():
        pytest.skip("the kafka-streams jars are missing: run make compat-deps")
    port, data = free_port(), Path(tempfile.mkdtemp(prefix="samsa-kip1071-")) / "data"
    samsa = start_samsa(port=port, data_dir=data, ready_timeout=90.0)
    bootstrap = samsa.bootstrap
    run = uuid.uuid4().hex[:8]
    app, topic_in, topic_out = f"wcr-{run}", f"wcr-in-{run}", f"wcr-out-{run}"
    instance: Instance | None = None
    try:
        admin = AdminClient({"bootstrap.servers": bootstrap})
        for f in admin.create_topics([NewTopic(topic_in, 2, 1), NewTopic(topic_out, 2, 1)]).values():
            f.result(60)
        first = [f"{WORDS[i % 12]} {WORDS[(i * 7) % 12]}" for i in range(200)]
        second = [f"{WORDS[(i * 5) % 12]} {WORDS[11]}" for i in range(200)]
        expected = Counter(w for line in first + second for w in line.split())
        instance = Instance(bootstrap, app, topic_in, topic_out, tmp_path / "state")
        _wait_for("the instance RUNNING", lambda: "RUNNING" in instance.states(), [instance])
        _produce(bootstrap, topic_in, first)
        time.sleep(3)
        samsa.stop()
        samsa = start_samsa(port=port, data_dir=data, ready_timeout=90.0)
        _produce(bootstrap, topic_in, second)
        latest: dict[str, int] = {}
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"wcr-check-{run}",
                             "auto.offset.reset": "earliest", "isolation.level": "read_committed"})
        consumer.subscribe([topic_out])
        try:
            def counted() -> bool:
                for msg in consumer.consume(500, 0.5):
                    if msg.error() is None and msg.key() is not None:
                        latest[msg.key().decode()] = int.from_bytes(msg.value(), "big", signed=True)
                return latest == dict(expected)
            _wait_for("every word counted", counted, [instance])
        finally:
            consumer.close()
        assert instance.proc.poll() is None, "the instance died"
        assert "ERROR" not in instance.states() and not any("GROUP_ID_NOT_FOUND" in line for line in instance.lines)
    finally:
        if instance is not None:
            instance.stop()
        samsa.stop()
        shutil.rmtree(data.parent, ignore_errors=True)
