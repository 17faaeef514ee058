"""A Samsa process for the KIP-848 client tests: consumer groups with short sessions and heartbeats, so a
SIGKILLed member's partitions move within seconds (Kafka's floor, group.consumer.min.session.timeout.ms =
45 s, would make the same test against the oracle take minutes: these run against Samsa only)."""

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
    log_tail), for scenarios that only use graceful leaves (Kafka's consumer session floor is 45 s)."""

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
    cluster = start_kafka(overrides={"group.initial.rebalance.delay.ms": "0"})
    try:
        yield KafkaBroker(cluster)
    finally:
        cluster.stop()
