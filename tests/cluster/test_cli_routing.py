"""`samsa produce|consume|groups|cluster info|health` on a 3-node cluster through one bootstrap node: the CLI
routes by metadata to each partition's leader and to the group's coordinator (it used to send everything to the
bootstrap broker and fail with NOT_LEADER_OR_FOLLOWER / NOT_COORDINATOR)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from cluster_harness import Cluster, unique, wait_for

REPO = Path(__file__).resolve().parents[2]
RECORDS = 300


def samsa(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "samsa.broker.cli", *args], cwd=REPO, input=stdin,
                          capture_output=True, timeout=120, check=False)


def ok(r: subprocess.CompletedProcess[bytes]) -> str:
    assert r.returncode == 0, r.stderr.decode()
    assert b"Traceback" not in r.stderr
    return r.stdout.decode()


@pytest.mark.timeout(240)
def test_cli_routes_to_leaders_and_coordinators_through_any_bootstrap_node(cluster: Cluster) -> None:
    topic = unique("spread")
    node_ids = cluster.node_ids
    address = {n: f"{cluster.host(n)}:{cluster.port(n)}" for n in node_ids}
    ok(samsa("topics", "create", topic, "-p", "3", "-r", "1", "-b", address[node_ids[0]]))
    leaders, _ = wait_for("the topic on every node", lambda: all(
        cluster.topic_visible(n, topic, 3) for n in node_ids) and cluster.leaders(node_ids[0], topic), 30)
    # The point of the test: the partitions' leaders are on three different nodes.
    assert len({leader for leader, _ in leaders.values()}) == 3, leaders

    lines = b"".join(b"key-%d:value-%d\n" % (i % 30, i) for i in range(RECORDS))
    produced = samsa("produce", topic, "-k", ":", "-b", address[node_ids[0]], stdin=lines)
    ok(produced)
    assert f"produced {RECORDS} records" in produced.stderr.decode()

    consumed = samsa("consume", topic, "--format", "json", "-b", address[node_ids[1]])
    records = [json.loads(line) for line in ok(consumed).splitlines()]
    assert sorted(r["value"] for r in records) == sorted(f"value-{i}" for i in range(RECORDS))
    assert {r["partition"] for r in records} == {0, 1, 2}
    assert "reached the end" in consumed.stderr.decode()

    group = unique("billing")
    ok(samsa("consume", topic, "-g", group, "-b", address[node_ids[2]]))
    ends = {r["partition"]: 0 for r in records}
    for r in records:
        ends[r["partition"]] = max(ends[r["partition"]], r["offset"] + 1)
    for n in node_ids:  # the coordinator is one node; every bootstrap node gets the same answer
        described = json.loads(ok(samsa("groups", "describe", "-g", group, "--output", "json", "-b", address[n])))
        got = {row["partition"]: row["current_offset"] for row in described["partitions"]}
        assert got == ends, (n, described)
        assert described["state"] == "Empty"
        listed = ok(samsa("groups", "list", "-b", address[n]))
        assert group in [line.split("\t")[0] for line in listed.splitlines()], (n, listed)

    # a second run of the group starts at its committed offsets: nothing new to read
    again = samsa("consume", topic, "-g", group, "-b", address[node_ids[0]])
    assert ok(again) == ""
    assert "consumed 0 records" in again.stderr.decode()

    info = json.loads(ok(samsa("cluster", "info", "--output", "json", "-b", address[node_ids[1]])))
    assert sorted(b["node"] for b in info["brokers"]) == node_ids
    assert info["controller"] in node_ids
    assert sorted(v["node"] for v in info["quorum"]["voters"]) == node_ids
    health = json.loads(ok(samsa("cluster", "health", "--output", "json", "--exit-status",
                                 "-b", address[node_ids[2]])))
    assert health["healthy"] is True and health["offline"] == [] and health["under_replicated"] == []


@pytest.mark.timeout(240)
def test_cluster_health_names_the_partitions_of_a_stopped_node(cluster: Cluster) -> None:
    topic = unique("health")
    node_ids = cluster.node_ids
    first = f"{cluster.host(node_ids[0])}:{cluster.port(node_ids[0])}"
    ok(samsa("topics", "create", topic, "-p", "3", "-r", "3", "-b", first))
    wait_for("the topic on every node", lambda: all(cluster.topic_visible(n, topic, 3) for n in node_ids), 30)
    victim = node_ids[-1]
    cluster.kill(victim)

    def unhealthy() -> dict[str, object] | None:
        r = samsa("cluster", "health", "--output", "json", "--exit-status", "-b", first)
        assert b"Traceback" not in r.stderr
        if r.returncode != 1:
            return None
        report: dict[str, object] = json.loads(r.stdout)
        return report if report["under_replicated"] else None

    report, _ = wait_for("health to report under-replicated partitions", unhealthy, 60)
    assert report["healthy"] is False
    assert {f"{topic}-{p}" for p in range(3)} <= set(report["under_replicated"])  # type: ignore[arg-type]
    # produce and consume still work through the survivors
    lines = b"".join(b"v%d\n" % i for i in range(50))
    ok(samsa("produce", topic, "-b", first, stdin=lines))
    out = ok(samsa("consume", topic, "-b", first))
    assert sorted(out.split()) == sorted(f"v{i}" for i in range(50))


@pytest.mark.timeout(240)
def test_produce_follows_the_leader_when_its_node_is_killed(cluster: Cluster) -> None:
    """An open `samsa produce` pipe keeps going when the partition's leader dies: the send fails
    (connection lost / NOT_LEADER_OR_FOLLOWER), the CLI refreshes metadata and sends to the new leader."""
    topic = unique("failover")
    node_ids = cluster.node_ids
    bootstrap = ",".join(f"{cluster.host(n)}:{cluster.port(n)}" for n in node_ids)
    ok(samsa("topics", "create", topic, "-p", "1", "-r", "3", "-b", bootstrap))
    wait_for("the topic on every node", lambda: all(cluster.topic_visible(n, topic, 1) for n in node_ids), 30)
    proc = subprocess.Popen([sys.executable, "-m", "samsa.broker.cli", "produce", topic, "-b", bootstrap],
                            cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert proc.stdin is not None
        proc.stdin.write(b"".join(b"before-%d\n" % i for i in range(10)))
        proc.stdin.flush()

        def consumed() -> list[str] | None:
            r = samsa("consume", topic, "-b", bootstrap)
            values = r.stdout.decode().split() if r.returncode == 0 else []
            return values if len(values) >= 10 else None

        wait_for("the first records", consumed, 30)
        leaders = cluster.leaders(node_ids[0], topic)
        assert leaders is not None
        old_leader = leaders[0][0]
        cluster.kill(old_leader)
        proc.stdin.write(b"".join(b"after-%d\n" % i for i in range(10)))
        proc.stdin.close()
        assert proc.wait(90) == 0, proc.stderr.read().decode() if proc.stderr else ""
        stderr = proc.stderr.read().decode() if proc.stderr else ""
        assert "produced 20 records" in stderr and "Traceback" not in stderr, stderr
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    survivors = ",".join(f"{cluster.host(n)}:{cluster.port(n)}" for n in node_ids if n != old_leader)
    values = ok(samsa("consume", topic, "-b", survivors)).split()
    assert sorted(values) == sorted([f"before-{i}" for i in range(10)] + [f"after-{i}" for i in range(10)])
    new_leader = (cluster.leaders(next(n for n in node_ids if n != old_leader), topic) or {0: (-1, 0)})[0][0]
    assert new_leader not in (old_leader, -1)
