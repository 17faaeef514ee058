"""The Java consumer (the reference kafka-clients) with group.protocol=consumer, in one group with a librdkafka
member, and Kafka's own kafka-consumer-groups.sh describing that group, against Samsa.

Two Java members and a confluent-kafka member share 6 partitions (2 each, never one partition held by
two); kafka-consumer-groups.sh --list/--describe/--members/--state show the group as it does on Kafka;
a Java member closes (it leaves) and the others take its partitions; every record is consumed once; once
the group is empty, the tool resets its offsets.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from harness848 import (
    PARTITIONS,
    consumed,
    java_classes,
    java_member,
    produce,
    python_member,
    stop_all,
    wait_balanced,
    wait_consumed,
)
from oracle_fixture import QUICK_JVM_OPTS, OracleError, ensure_installed, run_kafka_tool
from samsa_fixture import SamsaProcess

TOOL = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"


def tool(bootstrap: str, *args: str) -> str:
    return run_kafka_tool(TOOL, "--bootstrap-server", bootstrap, *args, jvm_opts=QUICK_JVM_OPTS, timeout=90).stdout


def test_java_and_librdkafka_members_and_the_group_tool(samsa_kip848: SamsaProcess, tmp_path: Path) -> None:
    try:
        ensure_installed()
    except OracleError as e:
        pytest.skip(f"Kafka's jars are not installed ({e}); run make compat-deps")
    if java_classes() is None:
        pytest.skip("javac or the kafka-clients jars are missing; run make compat-deps")
    bootstrap = samsa_kip848.bootstrap
    topic, group = "kip848-java", "kip848-java-group"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, PARTITIONS, 1)]).values():
        future.result(30)
    outputs = [tmp_path / f"member-{i}.out" for i in range(3)]
    members = [java_member(bootstrap, group, topic, outputs[0]), java_member(bootstrap, group, topic, outputs[1]),
               python_member(bootstrap, group, topic, outputs[2])]
    try:
        wait_balanced(outputs, samsa_kip848)
        batch1 = produce(bootstrap, topic, "j1")
        wait_consumed(outputs, batch1, samsa_kip848)

        assert group in tool(bootstrap, "--list").split()
        described = tool(bootstrap, "--describe", "--group", group)
        rows = {int(cols[2]): cols for line in described.splitlines()
                if len(cols := line.split()) >= 9 and cols[1] == topic and cols[2].isdigit()}
        assert sorted(rows) == list(range(PARTITIONS)), described
        # GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG CONSUMER-ID HOST CLIENT-ID
        assert all(c[3] == c[4] and c[5] == "0" and c[6] != "-" for c in rows.values()), described
        assert {c[8] for c in rows.values()} == {"java-kip848", "rdkafka"}, described
        assert len({c[6] for c in rows.values()}) == 3, described
        state = tool(bootstrap, "--describe", "--state", "--group", group)
        assert "Stable" in state and "uniform" in state, state
        members_out = tool(bootstrap, "--describe", "--members", "--group", group)
        assert members_out.count("java-kip848") == 2 and "rdkafka" in members_out, members_out

        members[0].terminate()  # the shutdown hook closes the consumer: it leaves the group
        assert members[0].wait(60) in (0, 143)  # the JVM exits 128+SIGTERM after its shutdown hooks
        assert outputs[0].read_text().splitlines()[-1] == "closed"
        batch2 = produce(bootstrap, topic, "j2")
        wait_consumed(outputs[1:], batch2, samsa_kip848)
    finally:
        stop_all(members)
    seen = consumed(outputs)
    assert set(seen) == batch1 | batch2
    assert [v for v, n in seen.items() if n != 1] == []

    # All gone, the group is Empty and the tool may reset its offsets (refused while it had members).
    deadline = time.monotonic() + 60
    while "Empty" not in tool(bootstrap, "--describe", "--state", "--group", group):
        assert time.monotonic() < deadline, "the group never became Empty"
        time.sleep(1)
    reset = tool(bootstrap, "--reset-offsets", "--group", group, "--topic", topic, "--to-earliest", "--execute")
    reset_to = sorted(int(cols[2]) for line in reset.splitlines() if len(cols := line.split()) == 4
                      and cols[1] == topic and cols[3] == "0")
    assert reset_to == list(range(PARTITIONS)), reset
    after = tool(bootstrap, "--describe", "--group", group)
    current = [cols[3] for line in after.splitlines() if len(cols := line.split()) >= 6 and cols[1] == topic]
    assert current == ["0"] * PARTITIONS, after
