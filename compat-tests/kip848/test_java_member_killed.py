"""The Java consumer (group.protocol=consumer) against Samsa: three members join, one is SIGKILLed, one leaves.

The killed member's partitions move to the others once group.consumer.session.timeout.ms (3 s here) expires;
the member that closes leaves with epoch -1 and the last member takes everything. Each member commits a
record (synchronously, with its member epoch) before it counts it, so a partition held by two members at once
shows as a record counted twice, and a partition that never moved as records never consumed.
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from harness848 import PARTITIONS, consumed, java_classes, java_member, produce, stop_all, wait_balanced, wait_consumed
from samsa_fixture import SamsaProcess


def test_java_members_join_one_killed_one_leaves_every_record_once(samsa_kip848: SamsaProcess,
                                                                     tmp_path: Path) -> None:
    if java_classes() is None:
        pytest.skip("javac or the kafka-clients jars are missing; run make compat-deps")
    bootstrap = samsa_kip848.bootstrap
    topic, group = "kip848-java-kill", "kip848-java-kill-group"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, PARTITIONS, 1)]).values():
        future.result(30)
    outputs = [tmp_path / f"member-{i}.out" for i in range(3)]
    members = [java_member(bootstrap, group, topic, out) for out in outputs]
    try:
        wait_balanced(outputs, samsa_kip848)
        batch1 = produce(bootstrap, topic, "k1")
        wait_consumed(outputs, batch1, samsa_kip848)

        members[0].send_signal(signal.SIGKILL)  # no leave: its partitions move when its session expires
        assert members[0].wait(10) == -signal.SIGKILL
        batch2 = produce(bootstrap, topic, "k2")
        wait_consumed(outputs[1:], batch2, samsa_kip848)
        wait_balanced(outputs[1:], samsa_kip848)  # 3 partitions each, none held twice

        members[1].terminate()  # the shutdown hook closes the consumer: it leaves the group
        assert members[1].wait(60) in (0, 143)
        assert outputs[1].read_text().splitlines()[-1] == "closed"
        batch3 = produce(bootstrap, topic, "k3")
        wait_consumed(outputs[2:], batch3, samsa_kip848)
    finally:
        stop_all(members)
    seen = consumed(outputs)
    assert set(seen) == batch1 | batch2 | batch3
    assert [v for v, n in seen.items() if n != 1] == []
    for out in outputs:  # each member consumed something before it went
        assert any(line.startswith("record ") for line in out.read_text().splitlines()), out.read_text()
