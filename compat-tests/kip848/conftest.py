"""A Samsa process for the KIP-848 client tests: consumer groups with short sessions and heartbeats, so a
SIGKILLed member's partitions move within seconds; and the Kafka oracle with the same settings (Kafka's floors,
group.consumer.min.session.timeout.ms = 45 s and group.consumer.min.heartbeat.interval.ms = 5 s, lowered), for
the scenarios that also run against Kafka."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from oracle_fixture import KafkaCluster, start_kafka
from samsa_fixture import SamsaProcess, start_samsa

SESSION_MS = 3000
HEARTBEAT_MS = 300
ARGS = ("--override", f"group.consumer.session.timeout.ms={SESSION_MS}",
        "--override", f"group.consumer.heartbeat.interval.ms={HEARTBEAT_MS}",
        "--override", "group.initial.rebalance.delay.ms=0")


@pytest.fixture
def samsa_kip848() -> Iterator[SamsaProcess]:
    s = start_samsa(extra_args=ARGS, ready_timeout=90.0)
    try:
        yield s
    finally:
        s.stop()


class KafkaBroker:
    """The Kafka oracle with the face the KIP-848 helpers use of a SamsaProcess (bootstrap, check_alive,
    log_tail), with the same consumer-group session and heartbeat as Samsa's here (Kafka's floors lowered)."""

    def __init__(self, cluster: KafkaCluster) -> None:
        self.cluster = cluster

    @property
    def bootstrap(self) -> str:
        return self.cluster.bootstrap

    def check_alive(self) -> None:
        self.cluster.check_alive()

    def log_tail(self, lines: int = 60) -> str:
        return "\n".join(n.log_tail(lines) for n in self.cluster.nodes)


@pytest.fixture(scope="module")
def kafka_kip848() -> Iterator[KafkaBroker]:
    cluster = start_kafka(overrides={
        "group.initial.rebalance.delay.ms": "0",
        "group.consumer.min.session.timeout.ms": str(SESSION_MS), "group.consumer.session.timeout.ms": str(SESSION_MS),
        "group.consumer.min.heartbeat.interval.ms": str(HEARTBEAT_MS),
        "group.consumer.heartbeat.interval.ms": str(HEARTBEAT_MS)})
    try:
        yield KafkaBroker(cluster)
    finally:
        cluster.stop()
