"""Metadata quorum figures, Samsa vs the reference Apache Kafka's KRaft, three combined nodes each, one run.

    .venv/bin/python bench/quorum/quorum_bench.py [--reps 3] [--changes 20] [--skip-kafka] [--out F]

- metadata-change latency: CreateTopics (1 partition) through node i (round robin), timed until a
  Metadata request to every node lists the topic with a leader; p50 and max over --changes topics.
- election: SIGKILL the active controller (found with DescribeQuorum); the figures are the time until
  a survivor reports a new leader in a higher epoch, and until a CreateTopics through a survivor
  succeeds. The killed node is restarted between repetitions.

Every request uses the raw protocol client (broker/client.py), so both systems see the same requests.
Prints each repetition, the medians and the Samsa/Kafka ratios, and the machine; the JSON result goes
to bench/results/quorum.json.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "compat-tests"))
sys.path.insert(0, str(REPO))

from oracle_fixture import kafka_cluster  # noqa: E402

from bench.cluster_probes import connect, quorum_leader_and_epoch, wait_for  # noqa: E402
from bench.machine import describe  # noqa: E402
from samsa.broker.client import Connection, KafkaClientError  # noqa: E402


@dataclass
class Node:
    node_id: int
    bootstrap: str
    kill: Callable[[], None]
    restart: Callable[[], None]


def _conn(bootstrap: str) -> Connection:
    return connect(bootstrap, "quorum-bench")


leader_and_epoch = quorum_leader_and_epoch


def create_topic(bootstrap: str, name: str) -> int:
    """CreateTopics through `bootstrap`: the error code (0 = created)."""
    try:
        with _conn(bootstrap) as c:
            r = c.request(19, {"topics": [{"name": name, "num_partitions": 1, "replication_factor": 1}],
                               "timeout": 5000})
    except (OSError, KafkaClientError):
        return -1
    return int(r.topics[0].error_code.value)


def visible(bootstrap: str, name: str) -> bool:
    try:
        with _conn(bootstrap) as c:
            r = c.request(3, {"topics": [{"name": name}], "allow_auto_topic_creation": False})
    except (OSError, KafkaClientError):
        return False
    t = r.topics[0]
    return t.error_code.value == 0 and bool(t.partitions) and all(p.leader_id >= 0 for p in t.partitions)


def metadata_latency(nodes: list[Node], changes: int) -> list[float]:
    """Seconds from sending CreateTopics until every node's Metadata lists the topic with a leader."""
    out: list[float] = []
    for i in range(changes):
        name = f"q-{uuid.uuid4().hex[:10]}"
        start = time.monotonic()
        error = create_topic(nodes[i % len(nodes)].bootstrap, name)
        if error != 0:
            raise RuntimeError(f"CreateTopics {name} failed with error {error}")
        for n in nodes:
            if wait_for(lambda n=n, name=name: visible(n.bootstrap, name), 30) is None:  # type: ignore[misc]
                raise RuntimeError(f"{name} never became visible on node {n.node_id}")
        out.append(time.monotonic() - start)
    return out


def election(nodes: list[Node]) -> tuple[float, float]:
    """(seconds until a new leader is known, seconds until CreateTopics succeeds) after SIGKILL of the leader."""
    found = None
    for n in nodes:
        found = leader_and_epoch(n.bootstrap)
        if found is not None:
            break
    if found is None:
        raise RuntimeError("no quorum leader is known")
    leader_id, epoch = found
    victim = next(n for n in nodes if n.node_id == leader_id)
    survivors = [n for n in nodes if n is not victim]
    start = time.monotonic()
    victim.kill()

    def new_leader() -> bool:
        for n in survivors:
            got = leader_and_epoch(n.bootstrap)
            if got is not None and got[0] != leader_id and got[1] > epoch:
                return True
        return False

    elected = wait_for(new_leader, 60)
    if elected is None:
        raise RuntimeError("no new leader within 60 s")
    name = f"e-{uuid.uuid4().hex[:10]}"
    created = wait_for(lambda: create_topic(survivors[0].bootstrap, name) in (0, 36), 60)
    if created is None:
        raise RuntimeError("CreateTopics never succeeded after the election")
    total = time.monotonic() - start
    victim.restart()
    return elected + 0.0, total


def measure(label: str, nodes: list[Node], reps: int, changes: int) -> dict[str, Any]:
    if wait_for(lambda: all(leader_and_epoch(n.bootstrap) is not None for n in nodes), 120) is None:
        raise RuntimeError(f"{label}: the quorum did not form")
    latency = metadata_latency(nodes, changes)
    elections = []
    for rep in range(reps):
        elected, writable = election(nodes)
        print(f"  {label} election {rep + 1}: new leader after {elected * 1000:.0f} ms, "
              f"CreateTopics works after {writable * 1000:.0f} ms", flush=True)
        elections.append((elected, writable))
        # the restarted node rejoins before the next kill
        wait_for(lambda: all(leader_and_epoch(n.bootstrap) is not None for n in nodes), 120)
    result = {
        "metadata_latency_p50_ms": statistics.median(latency) * 1000,
        "metadata_latency_max_ms": max(latency) * 1000,
        "election_ms": statistics.median(e for e, _ in elections) * 1000,
        "writable_after_kill_ms": statistics.median(w for _, w in elections) * 1000,
    }
    print(f"  {label}: " + ", ".join(f"{k} {v:.0f}" for k, v in result.items()), flush=True)
    return result


@contextlib.contextmanager
def kafka_nodes() -> Iterator[list[Node]]:
    with kafka_cluster(nodes=3) as cluster:
        nodes = []
        for kn in cluster.nodes:
            def kill(kn: Any = kn) -> None:
                if kn.proc is not None and kn.proc.poll() is None:
                    os.kill(kn.proc.pid, signal.SIGKILL)
                    kn.proc.wait()

            def restart(kn: Any = kn) -> None:
                cluster.restart_node(kn)

            nodes.append(Node(kn.node_id, kn.bootstrap, kill, restart))
        yield nodes


@contextlib.contextmanager
def samsa_nodes() -> Iterator[list[Node]]:
    """Three combined nodes started the way `samsa cluster up` starts them (broker.cluster_cli)."""
    from samsa.broker.cli import cluster as cluster_cli

    with tempfile.TemporaryDirectory(prefix="samsa-quorum-bench-") as tmp:
        plan = cluster_cli.plan_cluster(Path(tmp), 3, log_level="WARNING")
        processes = cluster_cli.start_cluster(plan, die_with_parent=True)
        try:
            nodes = []
            for spec in plan.nodes:
                def kill(spec: Any = spec) -> None:
                    proc = processes[spec.node_id]
                    proc.send_signal(signal.SIGKILL)
                    proc.wait()

                def restart(spec: Any = spec) -> None:
                    processes[spec.node_id] = cluster_cli.start_node(plan, spec, die_with_parent=True)
                    wait_for(lambda: cluster_cli.port_open(spec.broker_port), 60)

                nodes.append(Node(spec.node_id, spec.bootstrap, kill, restart))
            yield nodes
        finally:
            cluster_cli.stop_pids([cluster_cli.owned(p) for p in processes.values()])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--changes", type=int, default=20)
    parser.add_argument("--skip-kafka", action="store_true")
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "quorum.json")
    args = parser.parse_args(argv)
    results: dict[str, Any] = {"machine": describe()}
    with samsa_nodes() as nodes:
        results["samsa"] = measure("samsa", nodes, args.reps, args.changes)
    if not args.skip_kafka:
        with kafka_nodes() as nodes:
            results["kafka"] = measure("kafka", nodes, args.reps, args.changes)
        print("ratios (Samsa / Kafka, lower is better):")
        for key, value in results["samsa"].items():
            other = results["kafka"][key]
            print(f"  {key}: {value / other:.2f}" if other else f"  {key}: n/a")
    out: Path = args.out
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
