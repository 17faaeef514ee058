"""Kafka's own kafka-consumer-groups.sh (ConsumerGroupCommand from the reference jars) lists, describes
and resets a group on Samsa exactly as on Kafka (the same test runs against both)."""

from __future__ import annotations

import struct
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition
from harness import Member, wait_until
from oracle_fixture import QUICK_JVM_OPTS, OracleError, ensure_installed, run_kafka_tool
from test_group_clients import PARTITIONS, committed, create_topic, produce

from samsa.broker.client import Connection

TOOL = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"


def tool(bootstrap: str, *args: str) -> str:
    return run_kafka_tool(TOOL, "--bootstrap-server", bootstrap, *args, jvm_opts=QUICK_JVM_OPTS, timeout=90).stdout


def rows(output: str, topic: str) -> dict[int, list[str]]:
    """partition -> the columns of kafka-consumer-groups --describe (GROUP TOPIC PARTITION CURRENT LEO LAG ...)."""
    out = {}
    for line in output.splitlines():
        cols = line.split()
        if len(cols) >= 6 and cols[1] == topic and cols[2].isdigit():
            out[int(cols[2])] = cols
    return out


# Real clients racing real rebalances: kafka-python has failed these against Apache Kafka 4.1.2 itself
# (a member joining before its metadata arrived got no partitions), so a failure is retried twice
# before it counts; a Samsa bug fails every attempt.
@pytest.mark.flaky(reruns=2, reruns_delay=1)
def test_consumer_group_command(group_target: Any, tmp_path: Path) -> None:
    try:
        ensure_installed()
    except OracleError as e:
        pytest.skip(f"Kafka's tools are not installed ({e}); run make compat-deps")
    bootstrap = group_target.bootstrap
    tag = uuid.uuid4().hex[:8]
    topic, group = f"tool-{tag}", f"tool-g-{tag}"
    create_topic(bootstrap, topic)
    produce(bootstrap, topic, 10, 0)
    member = Member.start("kafka-python", "m", bootstrap, topic, group, workdir=tmp_path)
    try:
        wait_until("offsets 10 committed", lambda: committed(bootstrap, group, topic) == dict.fromkeys(
            range(PARTITIONS), 10), 60, [member])
        assert group in tool(bootstrap, "--list").split()
        active = rows(tool(bootstrap, "--describe", "--group", group), topic)
        assert sorted(active) == list(range(PARTITIONS))
        assert all(c[3] == "10" and c[4] == "10" and c[5] == "0" and c[6] != "-" for c in active.values()), active
        members = tool(bootstrap, "--describe", "--members", "--group", group)
        assert "kafka-python" in members
        state = tool(bootstrap, "--describe", "--state", "--group", group)
        assert "Stable" in state
        refused = run_kafka_tool(TOOL, "--bootstrap-server", bootstrap, "--reset-offsets", "--group", group,
                                 "--topic", topic, "--to-earliest", "--execute", jvm_opts=QUICK_JVM_OPTS,
                                 timeout=90, check=False)
        assert "inactive" in refused.stdout + refused.stderr
    finally:
        member.terminate()
    produce(bootstrap, topic, 5, 10)
    idle = rows(tool(bootstrap, "--describe", "--group", group), topic)
    assert all(c[3] == "10" and c[4] == "15" and c[5] == "5" for c in idle.values()), idle
    reset = tool(bootstrap, "--reset-offsets", "--group", group, "--topic", topic, "--to-offset", "3", "--execute")
    new_offsets = {int(c[2]): c[3] for c in (line.split() for line in reset.splitlines())
                   if len(c) == 4 and c[1] == topic and c[2].isdigit()}
    assert new_offsets == dict.fromkeys(range(PARTITIONS), "3"), reset
    assert committed(bootstrap, group, topic) == dict.fromkeys(range(PARTITIONS), 3)
    after = rows(tool(bootstrap, "--describe", "--group", group), topic)
    assert all(c[5] == "12" for c in after.values()), after
    # Past the log end: the tool itself clamps to the end (it never sends a commit past it, so Samsa's refusal of
    # such commits leaves it working), on both brokers.
    tool(bootstrap, "--reset-offsets", "--group", group, "--topic", topic, "--to-offset", "1000", "--execute")
    assert committed(bootstrap, group, topic) == dict.fromkeys(range(PARTITIONS), 15)
    tool(bootstrap, "--reset-offsets", "--group", group, "--topic", topic, "--to-offset", "3", "--execute")
    if group_target.name == "samsa":
        # Samsa recorded the reset by Kafka's tool in the group's audit history
        import subprocess
        import sys

        history = subprocess.run([sys.executable, "-m", "samsa.broker.cli", "groups", "history", "--bootstrap-server",
                                  bootstrap, group], capture_output=True, text=True, timeout=60)
        assert f"{topic}-0: 10 -> 3" in history.stdout, history.stdout + history.stderr
    deleted = tool(bootstrap, "--delete", "--group", group)
    assert "successful" in deleted.lower(), deleted
    assert group not in tool(bootstrap, "--list").split()


def _coordinator(bootstrap: str, group: str) -> Connection:
    """A connection to the group's coordinator, once FindCoordinator names one (the offsets topic may be new)."""
    host, _, port = bootstrap.rpartition(":")
    with Connection(host, int(port)) as conn:
        for _ in range(300):
            found = conn.request(10, {"key": group, "key_type": 0}, version=3)
            if found.error_code.value == 0:
                return Connection(found.host, found.port)
            time.sleep(0.1)
    raise AssertionError(f"no coordinator for {group}: {found}")


def test_describe_members_marks_the_classic_members_of_a_consumer_group(group_target: Any) -> None:
    """A KIP-848 group with a member of each protocol (a classic member joined it: online migration):
    kafka-consumer-groups.sh --describe --members --verbose adds UPGRADED, false for the classic member (from
    ConsumerGroupDescribe v1's member type), on both brokers; `samsa groups describe --members` says the same."""
    try:
        ensure_installed()
    except OracleError as e:
        pytest.skip(f"Kafka's tools are not installed ({e}); run make compat-deps")
    bootstrap = group_target.bootstrap
    tag = uuid.uuid4().hex[:8]
    topic, group, consumer_id = f"mixed-{tag}", f"mixed-g-{tag}", str(uuid.uuid4())
    create_topic(bootstrap, topic)
    with _coordinator(bootstrap, group) as conn:
        for _ in range(300):  # a new offsets partition: the coordinator may still be loading it
            joined = conn.request(68, {"group_id": group, "member_id": consumer_id, "member_epoch": 0,
                                       "instance_id": None, "rebalance_timeout": 30000,
                                       "subscribed_topic_names": [topic], "subscribed_topic_regex": None,
                                       "server_assignor": None, "topic_partitions": []}, version=1)
            if joined.error_code.value not in (14, 15, 16):  # COORDINATOR_LOAD_IN_PROGRESS, _NOT_AVAILABLE, NOT_
                break
            time.sleep(0.1)
        assert joined.error_code.value == 0, joined
        # ConsumerProtocolSubscription v0: [topic], no user data.
        subscription = struct.pack(">hih", 0, 1, len(topic)) + topic.encode() + b"\xff\xff\xff\xff"
        classic = conn.request(11, {"group_id": group, "session_timeout": 30000, "rebalance_timeout": 30000,
                                    "member_id": "", "protocol_type": "consumer",
                                    "protocols": [{"name": "range", "metadata": subscription}]}, version=3)
        assert classic.error_code.value == 0, classic
        described = tool(bootstrap, "--describe", "--members", "--verbose", "--group", group).splitlines()
        header = next(line.split() for line in described if line.startswith("GROUP"))
        assert header[-1] == "UPGRADED", described
        flags = {cols[1]: cols[-1] for cols in (line.split() for line in described) if cols and cols[0] == group}
        assert flags == {consumer_id: "true", classic.member_id: "false"}, described
        if group_target.name == "samsa":
            import subprocess
            import sys

            out = subprocess.run([sys.executable, "-m", "samsa.broker.cli", "groups", "describe", "--members",
                                  "--bootstrap-server", bootstrap, "--group", group], capture_output=True, text=True,
                                 timeout=60)
            assert out.returncode == 0, out.stderr
            ours = {cols[0]: cols[-1] for cols in (line.split() for line in out.stdout.splitlines()[2:]) if cols}
            assert ours == flags, out.stdout


def test_kafka_dump_log_decodes_samsa_offsets_records(tmp_path: Path) -> None:
    """Kafka's DumpLogSegments --offsets-decoder reads the group metadata and offset commit records
    Samsa wrote to __consumer_offsets: the formats are Kafka's, byte for byte."""
    import shutil

    from samsa_fixture import start_samsa

    from samsa.broker.client import Connection
    from samsa.broker.group.records import partition_for_group

    try:
        ensure_installed()
    except OracleError as e:
        pytest.skip(f"Kafka's tools are not installed ({e}); run make compat-deps")
    s = start_samsa(extra_args=("--override", "group.initial.rebalance.delay.ms=0"), ready_timeout=90.0)
    try:
        create_topic(s.bootstrap, "dumped")
        produce(s.bootstrap, "dumped", 3, 0)
        # librdkafka in this process: the records to decode need one group and its commits, not another
        # client's rebalance timing (a kafka-python member has sat on its assignment for a minute under load).
        consumer = Consumer({"bootstrap.servers": s.bootstrap, "group.id": "dump-group",
                             "auto.offset.reset": "earliest", "enable.auto.commit": False})
        try:
            consumer.subscribe(["dumped"])
            seen = 0
            deadline = time.monotonic() + 60
            while seen < 3 * PARTITIONS and time.monotonic() < deadline:
                message = consumer.poll(0.5)
                if message is not None and message.error() is None:
                    seen += 1
            assert seen == 3 * PARTITIONS, f"consumed {seen} of {3 * PARTITIONS} records in 60 s"
            consumer.commit(offsets=[TopicPartition("dumped", p, 3) for p in range(PARTITIONS)], asynchronous=False)
            assert committed(s.bootstrap, "dump-group", "dumped") == dict.fromkeys(range(PARTITIONS), 3)
        finally:
            consumer.close()
        host, _, port = s.bootstrap.rpartition(":")
        with Connection(host, int(port)) as conn:  # the leave is stored before the answer; nothing else pending
            conn.request(16, {})
    finally:
        s.stop(keep=True)
    try:
        segment = s.data_dir / f"__consumer_offsets-{partition_for_group('dump-group', 50)}" / f"{0:020d}.log"
        out = run_kafka_tool("org.apache.kafka.tools.DumpLogSegments", "--offsets-decoder", "--files", str(segment),
                             jvm_opts=QUICK_JVM_OPTS, timeout=90).stdout
        assert '"group":"dump-group"' in out and '"protocolType":"consumer"' in out, out[-2000:]
        assert '"topic":"dumped","partition":0' in out and '"offset":3' in out, out[-2000:]
        assert "isvalid: true" in out and "isvalid: false" not in out
    finally:
        shutil.rmtree(s.workdir, ignore_errors=True)
