"""Admin requests a broker forwards to the active controller are authorized as their client (Envelope, KIP-590),
on a real three-node cluster: a topic the client may create is created through a broker that is not the
controller, one it may not is TOPIC_AUTHORIZATION_FAILED, and ACLs written through any broker are seen by all.

Everyone is User:ANONYMOUS on PLAINTEXT, so the ACLs tell requests apart by resource: allow.everyone.if.no.acl.found
lets the first ACLs in; ACLs for another principal on the cluster and on every topic ("*") then take CREATE away
from ANONYMOUS, which keeps DESCRIBE on the cluster and CREATE on one topic only."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cluster"))

from cluster_harness import Cluster, running_cluster, wait_for

from samsa.broker.security.acl import STANDARD_AUTHORIZER
from samsa.kproto.errors import ErrorCode

RETRIABLE = (ErrorCode.not_controller, ErrorCode.request_timed_out)


def _acl(name: str, resource_type: int, principal: str, operation: int) -> dict[str, Any]:
    return {"resource_type": resource_type, "resource_name": name, "resource_pattern_type": 3,
            "principal": principal, "host": "*", "operation": operation, "permission_type": 3}


def _create_acls(cluster: Cluster, node_id: int) -> list[ErrorCode] | None:
    with cluster.connect(node_id) as conn:
        r = conn.request(30, {"creations": [_acl("kafka-cluster", 4, "User:admin", 2),
                                            _acl("kafka-cluster", 4, "User:ANONYMOUS", 8),
                                            _acl("*", 2, "User:admin", 2),
                                            _acl("free", 2, "User:ANONYMOUS", 5)]})
    codes = [ErrorCode(x.error_code) for x in r.results]
    return None if set(codes) & set(RETRIABLE) else codes


def _acl_count(cluster: Cluster, node_id: int) -> int | None:
    with cluster.connect(node_id) as conn:
        r = conn.request(29, {"resource_type_filter": 1, "resource_name_filter": None, "pattern_type_filter": 1,
                              "principal_filter": None, "host_filter": None, "operation": 1, "permission_type": 1})
    if r.error_code != ErrorCode.none:
        return None
    count = sum(len(res.acls) for res in r.resources)
    return count if count == 4 else None


def _created(cluster: Cluster, node_id: int, name: str) -> ErrorCode | None:
    error, _ = cluster.create_topic(node_id, name)
    return None if error in RETRIABLE else error


@pytest.mark.timeout(180)
def test_forwarded_requests_are_authorized_as_their_client(tmp_path: Path) -> None:
    overrides = (f"authorizer.class.name={STANDARD_AUTHORIZER}", "allow.everyone.if.no.acl.found=true",
                 "default.replication.factor=1")
    with running_cluster(tmp_path / "cluster", 3, overrides) as cluster:
        leader, _ = wait_for("a quorum leader", cluster.quorum_leader, 30)
        other = next(n for n in cluster.node_ids if n != leader.leader_id)
        codes, _ = wait_for("CreateAcls through a broker that forwards", lambda: _create_acls(cluster, other), 30)
        assert codes == [ErrorCode.none] * 4
        # DescribeAcls is the broker's own answer from its image: the ACLs reached every node
        for node in cluster.node_ids:
            wait_for(f"the ACLs on node {node}", lambda node=node: _acl_count(cluster, node), 30)  # type: ignore[misc]
        created, _ = wait_for("CreateTopics free", lambda: _created(cluster, other, "free"), 30)
        assert created == ErrorCode.none
        refused, _ = wait_for("CreateTopics blocked", lambda: _created(cluster, other, "blocked"), 30)
        assert refused == ErrorCode.topic_authorization_failed
        assert cluster.metadata(other, ["blocked"]).topics[0].error_code == ErrorCode.topic_authorization_failed
