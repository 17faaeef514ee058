"""Kafka's own kafka-metadata-quorum.sh (MetadataQuorumCommand, the reference's) against a Samsa broker port: it
asks a broker, which forwards DescribeQuorum to the active controller."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from cluster_harness import Cluster, wait_for

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "compat-tests"))
import oracle_fixture

TOOL = "org.apache.kafka.tools.MetadataQuorumCommand"


def _tool(bootstrap: str, *args: str) -> str:
    result = oracle_fixture.run_kafka_tool(TOOL, "--bootstrap-server", bootstrap, "describe", *args,
                                           jvm_opts=oracle_fixture.QUICK_JVM_OPTS, timeout=90)
    print(result.stdout)
    return str(result.stdout)


@pytest.mark.timeout(180)
def test_kafka_metadata_quorum_describes_the_samsa_quorum(cluster: Cluster) -> None:
    try:
        oracle_fixture.ensure_installed()
    except oracle_fixture.OracleError as e:
        pytest.skip(f"Kafka's tools are not installed: {e}")
    leader = wait_for("a leader", cluster.quorum_leader, 20)[0]
    follower = next(n for n in cluster.node_ids if n != leader.leader_id)
    bootstrap = f"127.0.0.1:{cluster.port(follower)}"

    status = dict(line.split(":", 1) for line in _tool(bootstrap, "--status").splitlines() if ":" in line)
    status = {k.strip(): v.strip() for k, v in status.items()}
    assert status["ClusterId"] == cluster.metadata(follower, []).cluster_id
    assert int(status["LeaderId"]) == leader.leader_id
    assert int(status["LeaderEpoch"]) == leader.leader_epoch
    assert int(status["HighWatermark"]) >= leader.high_watermark > 0
    voters = json.loads(status["CurrentVoters"])
    assert sorted(v["id"] for v in voters) == cluster.node_ids
    for v in voters:
        assert v["endpoints"] == [f"CONTROLLER://127.0.0.1:{cluster.plan.node(v['id']).controller_port}"]
    assert json.loads(status["CurrentObservers"]) == []

    rows = [line.split() for line in _tool(bootstrap, "--replication").splitlines()]
    assert rows[0][:3] == ["NodeId", "DirectoryId", "LogEndOffset"] and rows[0][-1] == "Status"
    status_of = {int(r[0]): r[-1] for r in rows[1:] if r}
    assert status_of == {n: "Leader" if n == leader.leader_id else "Follower" for n in cluster.node_ids}
    for r in rows[1:]:
        assert int(r[2]) >= leader.high_watermark
