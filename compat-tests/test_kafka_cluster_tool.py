"""kafka-cluster.sh unregister and unregister-controller (the reference Kafka's ClusterTool, UnregisterBroker v0,
UnregisterController v0) against Samsa. unregister: an id
without a registration fails with Kafka's BrokerIdNotRegisteredException message; the broker's own id is
unregistered ("Broker 1 is no longer registered.") and, still running, stays unregistered (DescribeCluster with
fenced brokers lists none) until it restarts, as Kafka 4.4.0's: its heartbeats get STALE_BROKER_EPOCH and it
does not register again. ``TOOLS_AGAINST_KAFKA=1`` runs it against Apache Kafka too, which proves the
expectations right. tests/cluster/test_unregister_broker.py has a stopped broker of three."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from oracle_fixture import QUICK_JVM_OPTS, kafka_cluster, run_kafka_tool
from samsa_fixture import start_samsa

from samsa.broker.client import Connection

CLUSTER_TOOL = "org.apache.kafka.tools.ClusterTool"
TARGETS = ["kafka", "samsa"] if os.environ.get("TOOLS_AGAINST_KAFKA") == "1" else ["samsa"]
HEARTBEATS_WATCHED_S = 6.0  # three heartbeat intervals: a re-registration would show within them


@pytest.fixture(params=TARGETS)
def target(request: pytest.FixtureRequest) -> Iterator[tuple[str, str]]:
    if request.param == "kafka":
        with kafka_cluster(nodes=1) as cluster:
            yield "kafka", cluster.bootstrap
    else:
        s = start_samsa(ready_timeout=90.0)
        try:
            yield "samsa", s.bootstrap
        finally:
            s.stop()


def _brokers(bootstrap: str) -> dict[int, bool]:
    host, port = bootstrap.rsplit(":", 1)
    with Connection(host, int(port), client_id="cluster-tool-test") as conn:
        r = conn.request(60, {"include_cluster_authorized_operations": False, "endpoint_type": 1,
                              "include_fenced_brokers": True}, version=2)
    return {int(b.broker_id): bool(b.is_fenced) for b in r.brokers}


@pytest.mark.samsa
def test_kafka_cluster_unregister(target: tuple[str, str]) -> None:
    _, bootstrap = target
    (broker_id,) = _brokers(bootstrap)
    missing = run_kafka_tool(CLUSTER_TOOL, "unregister", "--bootstrap-server", bootstrap, "--id", "42",
                             check=False, jvm_opts=QUICK_JVM_OPTS)
    assert missing.returncode == 1
    assert ("BrokerIdNotRegisteredException: Broker ID 42 is not currently registered" in missing.stderr
            ), missing.stderr[-2000:]
    done = run_kafka_tool(CLUSTER_TOOL, "unregister", "--bootstrap-server", bootstrap, "--id", str(broker_id),
                          jvm_opts=QUICK_JVM_OPTS)
    assert done.stdout.strip() == f"Broker {broker_id} is no longer registered."
    assert _brokers(bootstrap) == {}
    _brokers_after_heartbeats(bootstrap)


def _brokers_after_heartbeats(bootstrap: str) -> None:
    """Still none after the broker has heartbeated several times (broker.heartbeat.interval.ms is 2 s in Kafka's
    default and Samsa's): a broker that registered again would be listed by then."""
    deadline = time.monotonic() + HEARTBEATS_WATCHED_S
    while time.monotonic() < deadline:
        assert _brokers(bootstrap) == {}
        time.sleep(0.5)


@pytest.mark.samsa
def test_kafka_cluster_unregister_controller(target: tuple[str, str]) -> None:
    """kafka-cluster.sh unregister-controller (UnregisterController v0, forwarded to the active controller): an
    id without a registration, and the active controller itself, fail with Kafka's exceptions."""
    _, bootstrap = target
    (node_id,) = _brokers(bootstrap)  # combined: the broker is the one controller
    missing = run_kafka_tool(CLUSTER_TOOL, "unregister-controller", "--bootstrap-server", bootstrap, "--id", "42",
                             check=False, jvm_opts=QUICK_JVM_OPTS)
    assert missing.returncode == 1
    assert ("ControllerIdNotRegisteredException: Controller ID 42 is not currently registered." in missing.stderr
            ), missing.stderr[-2000:]
    itself = run_kafka_tool(CLUSTER_TOOL, "unregister-controller", "--bootstrap-server", bootstrap, "--id",
                            str(node_id), check=False, jvm_opts=QUICK_JVM_OPTS)
    assert itself.returncode == 1
    assert ("InvalidRequestException: Controller cannot unregister itself while it is active." in itself.stderr
            ), itself.stderr[-2000:]
    assert _brokers(bootstrap) == {node_id: False}  # nothing changed
