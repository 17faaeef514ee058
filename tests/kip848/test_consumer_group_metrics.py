"""Consumer groups on /metrics with Kafka's GroupCoordinatorMetrics names (group-coordinator-metrics):
group-count by protocol, consumer-group-count by state, consumer-group-rebalance-rate/count (a rebalance
is a group epoch bump by a heartbeat: a member joining or changing its subscription), scraped over HTTP
from a real `samsa serve`."""

from __future__ import annotations

import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from samsa.broker import launcher

from .conftest import Broker
from .test_heartbeat_wire import heartbeat, join

PREFIX = "kafka_server_group_coordinator_metrics_"


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Broker, int]]:
    port = launcher.free_port()
    b = Broker(tmp_path / "data", launcher.free_port(), extra_overrides=(f"samsa.metrics.listen=127.0.0.1:{port}",))
    b.start()
    yield b, port
    b.stop()


def scrape(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        text = r.read().decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def described_state(broker: Broker, group: str) -> str:
    with broker.connect() as conn:
        r = conn.request(69, {"group_ids": [group], "include_authorized_operations": False}, version=1)
        return str(r.groups[0].group_state)


def test_consumer_group_counts_and_rebalances_on_the_metrics_endpoint(served: tuple[Broker, int]) -> None:
    broker, port = served
    before = scrape(port)
    assert before[(PREFIX + "consumer_group_rebalance_count", ())] == 0
    assert before[(PREFIX + "group_count", (("protocol", "consumer"),))] == 0
    broker.create_topic("mt", 4)
    broker.create_topic("mt2", 2)
    with broker.connect() as conn:
        a = join(conn, "a", ["mt"], group="mg")
        b = join(conn, "b", ["mt"], group="mg")
        assert (a.error_code.value, b.error_code.value) == (0, 0)
        # a heartbeat that changes nothing is no rebalance; a new subscription is one
        assert heartbeat(conn, "b", b.member_epoch, group="mg").error_code.value == 0
        assert heartbeat(conn, "b", b.member_epoch, topics=["mt", "mt2"], group="mg").error_code.value == 0
    after = scrape(port)
    assert after[(PREFIX + "consumer_group_rebalance_count", ())] == 3
    assert after[(PREFIX + "consumer_group_rebalance_rate", ())] > 0
    assert after[(PREFIX + "group_count", (("protocol", "consumer"),))] == 1
    by_state = {state: after[(PREFIX + "consumer_group_count", (("state", state),))]
                for state in ("Empty", "Assigning", "Reconciling", "Stable", "Dead")}
    assert sum(by_state.values()) == 1
    assert by_state[described_state(broker, "mg")] == 1
    # classic groups keep their own meter, untouched by consumer groups
    assert after[(PREFIX + "group_completed_rebalance_count", ())] == 0
    assert after[(PREFIX + "group_count", (("protocol", "classic"),))] == 0
