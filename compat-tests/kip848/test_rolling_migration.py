"""KIP-848's online migration with real clients: a rolling upgrade of a classic group to the consumer protocol, and
the rolling downgrade back, each member restarted in turn with the other group.protocol while records flow.

Three members share a 6-partition topic. At every step one member closes (it leaves the group) and a new one
starts with the other protocol; a batch is produced and must be consumed by the members running then. The first
consumer-protocol member to join the classic group converts it to a consumer group whose classic members keep
working through JoinGroup/SyncGroup/Heartbeat; the last classic member's replacement leaves a consumer group of
consumer-protocol members. Downgrading, the last consumer-protocol member's departure converts the group back to
a classic group. Every record is consumed exactly once across the roll: each member commits a record
(synchronously) before counting it, so two owners of a partition at once would count a record twice.

librdkafka (confluent-kafka), the Java consumer (kafka-clients 4.1.2) and franz-go (classic: cooperative-sticky;
consumer: kgo.ServerSideBalancer), against Samsa, and against the Kafka oracle with COMPAT_KIP848_KAFKA=1: the same
rolls there take about two and a half more minutes of `make test` on this 2-core machine, and show only that the
tests themselves are right (they passed there).
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from conftest import KafkaBroker
from harness848 import (
    FRANZ_MEMBER,
    PARTITIONS,
    WAIT_S,
    consumed,
    franz_member,
    java_classes,
    java_member,
    owned,
    produce,
    python_member,
    stop_all,
    wait_consumed,
)
from samsa_fixture import SamsaProcess

Starter = Callable[[str, str, str, Path, str, str | None], "subprocess.Popen[bytes]"]


def group_type(admin: AdminClient, group: str) -> str:
    """The group's type as ListGroups v5 answers it (classic or consumer), by the admin client."""
    listed = admin.list_consumer_groups().result(30)
    types = {g.group_id: str(getattr(g, "type", "")) for g in listed.valid}
    return types.get(group, "missing")


def wait_covered(outputs: list[Path], samsa: SamsaProcess | KafkaBroker) -> None:
    """Until the running members together hold every partition, each some, and no partition twice."""
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        held = [owned(p) for p in outputs]
        if all(held) and sum(len(h) for h in held) == PARTITIONS and set().union(*held) == set(range(PARTITIONS)):
            return
        samsa.check_alive()
        time.sleep(0.2)
    raise AssertionError(f"partitions never covered: {[sorted(owned(p)) for p in outputs]}\n{samsa.log_tail()}")


def roll(samsa: SamsaProcess | KafkaBroker, tmp_path: Path, start: Starter, topic: str, group: str, before: str,
         after: str, static: bool = False) -> tuple[list[Path], set[str]]:
    """Three `before` members, replaced one at a time by `after` members; every batch produced along the way.
    `static`: each member has a group.instance.id, and its replacement the same one."""
    bootstrap = samsa.bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, PARTITIONS, 1)]).values():
        future.result(30)
    outputs = [tmp_path / f"{before}-{i}.out" for i in range(3)]
    running = list(outputs)
    instances = [f"instance-{i}" if static else None for i in range(3)]
    workers = [start(bootstrap, group, topic, out, before, instances[i]) for i, out in enumerate(outputs)]
    produced: set[str] = set()
    try:
        wait_covered(running, samsa)
        batch = produce(bootstrap, topic, "b0")
        produced |= batch
        wait_consumed(running, batch, samsa)
        for i in range(3):
            workers[i].terminate()  # close(): leaves the group
            assert workers[i].wait(60) in (0, 143)  # the JVM exits 128+SIGTERM after its shutdown hooks
            assert outputs[i].read_text().splitlines()[-1] == "closed"
            replacement = tmp_path / f"{after}-{i}.out"
            outputs.append(replacement)
            running[i] = replacement
            workers.append(start(bootstrap, group, topic, replacement, after, instances[i]))
            wait_covered(running, samsa)
            batch = produce(bootstrap, topic, f"b{i + 1}")
            produced |= batch
            wait_consumed(running, batch, samsa)
            expected = after if i == 2 else "consumer"  # mixed groups are consumer groups
            assert group_type(admin, group).lower().endswith(expected), group_type(admin, group)
    finally:
        stop_all(workers)
    return outputs, produced


def exactly_once(outputs: list[Path], produced: set[str]) -> None:
    seen = consumed(outputs)
    assert set(seen) == produced
    assert [v for v, n in seen.items() if n != 1] == []


def python_start(bootstrap: str, group: str, topic: str, out: Path, protocol: str,
                 instance: str | None) -> subprocess.Popen[bytes]:
    return python_member(bootstrap, group, topic, out, protocol, instance)


def java_start(bootstrap: str, group: str, topic: str, out: Path, protocol: str,
               instance: str | None) -> subprocess.Popen[bytes]:
    return java_member(bootstrap, group, topic, out, protocol, instance)


def franz_start(bootstrap: str, group: str, topic: str, out: Path, protocol: str,
                instance: str | None) -> subprocess.Popen[bytes]:
    assert instance is None, "the franz-go member has no group.instance.id option"
    return franz_member(bootstrap, group, topic, out, protocol)


STARTERS = {"confluent": python_start, "java": java_start, "franz": franz_start}


def skip_missing(client: str) -> None:
    if client == "java" and java_classes() is None:
        pytest.skip("javac or the kafka-clients jars are missing (make compat-deps)")
    if client == "franz" and not FRANZ_MEMBER.exists():
        pytest.skip("the franz-go member is not built (make compat-deps, which needs go)")


@pytest.mark.parametrize("client", sorted(STARTERS))
def test_rolling_upgrade_classic_to_consumer(client: str, samsa_kip848: SamsaProcess, tmp_path: Path) -> None:
    skip_missing(client)
    outputs, produced = roll(samsa_kip848, tmp_path, STARTERS[client], f"roll-up-{client}", f"roll-up-{client}",
                             "classic", "consumer")
    exactly_once(outputs, produced)


@pytest.mark.parametrize("client", sorted(STARTERS))
def test_rolling_downgrade_consumer_to_classic(client: str, samsa_kip848: SamsaProcess, tmp_path: Path) -> None:
    skip_missing(client)
    outputs, produced = roll(samsa_kip848, tmp_path, STARTERS[client], f"roll-down-{client}",
                             f"roll-down-{client}", "consumer", "classic")
    exactly_once(outputs, produced)


ON_KAFKA = pytest.mark.skipif(os.environ.get("COMPAT_KIP848_KAFKA") != "1",
                              reason="the same rolls against the reference Kafka take 2.5 more minutes: opt in with "
                                     "COMPAT_KIP848_KAFKA=1")


@ON_KAFKA
@pytest.mark.parametrize("client", sorted(STARTERS))
@pytest.mark.parametrize(("before", "after"), [("classic", "consumer"), ("consumer", "classic")])
def test_rolling_migration_on_kafka(client: str, before: str, after: str, kafka_kip848: KafkaBroker,
                                    tmp_path: Path) -> None:
    """The same rolls against Apache Kafka: the same outcome as on Samsa."""
    skip_missing(client)
    name = f"roll-{before}-{after}-{client}-kafka"
    outputs, produced = roll(kafka_kip848, tmp_path, STARTERS[client], name, name, before, after)
    exactly_once(outputs, produced)


@pytest.mark.parametrize("client", ["confluent", "java"])
@pytest.mark.parametrize(("before", "after"), [("classic", "consumer"), ("consumer", "classic")])
@pytest.mark.parametrize("target", ["samsa", pytest.param("kafka", marks=ON_KAFKA)])
def test_rolling_migration_of_static_members(client: str, before: str, after: str, target: str,
                                             request: pytest.FixtureRequest, tmp_path: Path) -> None:
    """Static members (group.instance.id) restarted with the other protocol and the same instance id: a classic
    static member does not leave when it stops, and its consumer-protocol successor takes its place at once; a
    consumer-protocol static member leaves "for now" (epoch -2) and its classic successor takes its place, the
    last such replacement turning the group back into a classic group without a rebalance."""
    skip_missing(client)
    broker: SamsaProcess | KafkaBroker = request.getfixturevalue(f"{target}_kip848")
    name = f"roll-static-{before}-{after}-{client}-{target}"
    outputs, produced = roll(broker, tmp_path, STARTERS[client], name, name, before, after, static=True)
    exactly_once(outputs, produced)
