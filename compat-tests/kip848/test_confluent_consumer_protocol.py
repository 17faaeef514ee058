"""librdkafka (confluent-kafka) consumers with group.protocol=consumer (KIP-848) against Samsa.

Three members share a 6-partition topic. One is SIGKILLed: its partitions move to the others once its
session expires. One closes: it leaves (member epoch -1) and the last member gets everything. Every
record is consumed exactly once across the members: each commits a record (synchronously, with its
member epoch) before counting it, so a record taken by two owners at once would be counted twice,
and a partition that never moved would leave records unconsumed.
"""

from __future__ import annotations

from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from harness848 import consumed, join_kill_leave, python_member, stop_all, wait_consumed
from samsa_fixture import SamsaProcess


def test_members_join_one_dies_one_leaves_every_record_once(samsa_kip848: SamsaProcess, tmp_path: Path) -> None:
    join_kill_leave(samsa_kip848, tmp_path, python_member, "kip848-confluent", "kip848-confluent-group")


def test_regex_subscription_follows_new_topics(samsa_kip848: SamsaProcess, tmp_path: Path) -> None:
    """librdkafka sends a `^`-subscription as the group's regex (RE2): the coordinator resolves it, and a
    topic created later that matches is assigned too; one that does not match is not."""
    bootstrap = samsa_kip848.bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(t, 2, 1) for t in ("rx-a", "rx-b", "other")]).values():
        future.result(30)
    producer = Producer({"bootstrap.servers": bootstrap})
    for topic in ("rx-a", "rx-b", "other"):
        for i in range(4):
            producer.produce(topic, f"{topic}-{i}".encode())
    assert producer.flush(30) == 0
    out = tmp_path / "member.out"
    member = python_member(bootstrap, "kip848-regex", "^rx-.*", out)
    try:
        wait_consumed([out], {f"{t}-{i}" for t in ("rx-a", "rx-b") for i in range(4)}, samsa_kip848)
        for future in admin.create_topics([NewTopic("rx-new", 1, 1)]).values():
            future.result(30)
        producer.produce("rx-new", b"rx-new-0")
        assert producer.flush(30) == 0
        wait_consumed([out], {"rx-new-0"}, samsa_kip848)
    finally:
        stop_all([member])
    assert not [v for v in consumed([out]) if v.startswith("other")]
