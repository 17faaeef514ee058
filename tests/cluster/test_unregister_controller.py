"""UnregisterController (key 94, kafka-cluster unregister-controller) on a real 3-node cluster, sent to a broker
listener (forwarded to the active controller): every controller is registered (KIP-919) and listed by
DescribeCluster on the controller listener; the active controller cannot unregister itself; an unknown id answers
CONTROLLER_ID_NOT_REGISTERED; a stopped controller's registration is removed (no longer listed, still a voter) and
comes back when it restarts; a running one registers again, as Kafka's controllers do. And Kafka's
kafka-metadata-quorum.sh remove-controller --unregister on a stopped voter: removed from the voters, then
unregistered."""

from __future__ import annotations

import base64
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from cluster_harness import Cluster, wait_for

from samsa.broker.client import Connection
from samsa.broker.controller_registrations import CONTROLLER_ID_NOT_REGISTERED
from samsa.kproto.errors import ErrorCode


def _unregister(cluster: Cluster, via: int, controller_id: int) -> tuple[int, str | None]:
    with cluster.connect(via, 20) as conn:
        r = conn.request(94, {"controller_id": controller_id}, version=0)
    return int(r.error_code), r.error_message


def _controllers(cluster: Cluster, via: int) -> list[int] | None:
    """The controllers DescribeCluster (endpoint type 2) lists on node `via`'s controller listener."""
    node = cluster.plan.node(via)
    try:
        with Connection(node.host, node.controller_port, client_id="unregister-controller-test",
                        timeout_s=10) as conn:
            r = conn.request(60, {"include_cluster_authorized_operations": False, "endpoint_type": 2,
                                  "include_fenced_brokers": False}, version=2)
    except Exception:  # a node still starting: ask again
        return None
    if r.error_code != ErrorCode.none:
        return None
    return sorted(int(b.broker_id) for b in r.brokers)


@pytest.mark.timeout(240)
def test_unregister_controllers(cluster_factory: Callable[..., Cluster]) -> None:
    cluster = cluster_factory(3)
    everyone = sorted(cluster.node_ids)
    leader = wait_for("a quorum leader", cluster.quorum_leader, 30)[0].leader_id
    victim, observer = (n for n in cluster.node_ids if n != leader)

    def listed(expected: list[int]) -> Callable[[], Any]:
        return lambda: _controllers(cluster, observer) == expected or None

    wait_for("every controller registered", listed(everyone), 30)

    assert _unregister(cluster, observer, leader) == (ErrorCode.invalid_request,
                                                      "Controller cannot unregister itself while it is active.")
    assert _unregister(cluster, observer, 42) == (CONTROLLER_ID_NOT_REGISTERED,
                                                  "Controller ID 42 is not currently registered.")

    # A running controller unregistered registers again (Kafka's ControllerRegistrationManager does at once).
    assert _unregister(cluster, victim, observer) == (ErrorCode.none, None)
    wait_for(f"controller {observer} registered again", listed(everyone), 30)

    cluster.kill(victim)
    assert _unregister(cluster, observer, victim) == (ErrorCode.none, None)
    wait_for(f"controller {victim} unregistered", listed(sorted([leader, observer])), 30)
    assert _unregister(cluster, observer, victim)[0] == CONTROLLER_ID_NOT_REGISTERED  # once only
    view = wait_for("the quorum", lambda: cluster.describe_quorum(observer), 30)[0]
    assert victim in view.voters  # unregistering is not RemoveRaftVoter

    cluster.start(victim)
    wait_for(f"controller {victim} registered again after its restart", listed(everyone), 60)


def _directory_id(data_dir: Path) -> str:
    props = dict(line.split("=", 1) for line in (data_dir / "meta.properties").read_text().splitlines()
                 if "=" in line and not line.startswith("#"))
    return props["directory.id"]


@pytest.mark.timeout(240)
def _upgrade_kraft_version(port: int) -> bool:
    """UpdateFeatures kraft.version=1 (UPGRADE), as `kafka-features.sh upgrade --feature kraft.version=1` sends it."""
    try:
        with Connection("127.0.0.1", port, client_id="unregister-test", timeout_s=40) as conn:
            r = conn.request(57, {"timeout": 30_000, "validate_only": False, "feature_updates": [
                {"feature": "kraft.version", "max_version_level": 1, "upgrade_type": 1}]}, version=1)
    except OSError:
        return False
    return bool(r.error_code == ErrorCode.none)


def test_kafka_metadata_quorum_remove_controller_unregister(cluster_factory: Callable[..., Cluster]) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "compat-tests"))
    import oracle_fixture

    try:
        oracle_fixture.ensure_installed()
    except oracle_fixture.OracleError:
        pytest.skip("Kafka's tools are not installed (make compat-deps)")
    cluster = cluster_factory(3)
    leader = wait_for("a quorum leader", cluster.quorum_leader, 30)[0].leader_id
    victim, observer = (n for n in cluster.node_ids if n != leader)
    # A static quorum runs kraft.version 0 and refuses voter changes, as Kafka 4.4's does: upgrade it first.
    wait_for("kraft.version 1", lambda: _upgrade_kraft_version(cluster.port(leader)) or None, 60)
    wait_for("every controller registered", lambda: _controllers(cluster, observer) == sorted(cluster.node_ids)
             or None, 30)
    directory = _directory_id(cluster.plan.node(victim).data_dir)
    assert base64.urlsafe_b64decode(directory + "==")  # a Kafka uuid, as the tool takes it
    cluster.kill(victim)

    result = oracle_fixture.run_kafka_tool(
        "org.apache.kafka.tools.MetadataQuorumCommand", "--bootstrap-server", f"127.0.0.1:{cluster.port(observer)}",
        "remove-controller", "--controller-id", str(victim), f"--controller-directory-id={directory}",
        "--unregister", jvm_opts=oracle_fixture.QUICK_JVM_OPTS, timeout=90, check=False)
    assert result.returncode == 0, result.stdout + result.stderr[-2000:]
    assert result.stdout.splitlines() == [f"Removed KRaft controller {victim} with directory id {directory}",
                                          f"Unregistered KRaft controller {victim}"]
    rest = sorted([leader, observer])
    wait_for("the controller unregistered", lambda: _controllers(cluster, observer) == rest or None, 30)
    view = wait_for("two voters", lambda: (v := cluster.describe_quorum(observer)) is not None
                    and sorted(v.voters) == rest and v, 30)[0]
    assert victim not in view.voters
