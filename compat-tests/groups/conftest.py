"""Fixtures for the group compat tests: `group_target` runs a test against Samsa and against Kafka.

Both brokers run with group.initial.rebalance.delay.ms=0 (the oracle's server.properties sets it;
Samsa gets it as an override), so a figure measured on one is comparable with the other.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from oracle_fixture import KafkaCluster
from samsa_fixture import SamsaProcess, start_samsa

SAMSA_GROUP_ARGS = ("--override", "group.initial.rebalance.delay.ms=0")


@dataclass(frozen=True)
class GroupTarget:
    name: str
    bootstrap: str


@pytest.fixture(scope="session")
def samsa_groups() -> Iterator[SamsaProcess]:
    s = start_samsa(extra_args=SAMSA_GROUP_ARGS, ready_timeout=90.0)  # slow when the machine is busy
    try:
        yield s
    finally:
        s.stop()


@pytest.fixture(params=["samsa", pytest.param("kafka", marks=pytest.mark.kafka)])
def group_target(request: pytest.FixtureRequest) -> Iterator[GroupTarget]:
    if request.param == "samsa":
        s: SamsaProcess = request.getfixturevalue("samsa_groups")
        s.check_alive()
        yield GroupTarget("samsa", s.bootstrap)
        s.check_alive()
    else:
        try:
            cluster: KafkaCluster = request.getfixturevalue("kafka_oracle")
        except Exception as e:  # jars not installed: say so
            pytest.skip(f"the Kafka oracle is unavailable ({e}); run make compat-deps")
        yield GroupTarget("kafka", cluster.bootstrap)
