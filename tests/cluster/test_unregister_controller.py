"""UnregisterController (key 94, kafka-cluster unregister-controller) on a real 3-node cluster, sent to a broker
listener (forwarded to the active controller): every controller is registered (KIP-919) and listed by
DescribeCluster on the controller listener; the active controller cannot unregister itself; an unknown id answers
CONTROLLER_ID_NOT_REGISTERED; a stopped controller's registration is removed (no longer listed, still a voter) and
comes back when it restarts; a running one registers again, as Kafka's controllers do."""

from __future__ import annotations

from collections.abc import Callable
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
