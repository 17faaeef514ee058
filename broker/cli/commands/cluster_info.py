"""`samsa cluster info|health`: brokers, controller, metadata quorum, under-replicated and offline partitions,
and (health, for a cluster `samsa cluster up` started) each node's own /health/ready."""

from __future__ import annotations

import argparse
import json
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from samsa.broker.cli.commands.client import ClusterView, RoutingClient
from samsa.broker.cli.commands.errors import guarded
from samsa.broker.cli.commands.output import emit, records, table
from samsa.broker.cli.commands.settings import settings_from_args

METADATA_TOPIC = "__cluster_metadata"
READY_TIMEOUT_S = 3.0


def quorum(client: RoutingClient) -> dict[str, Any] | None:
    """DescribeQuorum through a broker (a broker forwards it to the controller, KIP-836); None if refused."""
    values = {"topics": [{"topic_name": METADATA_TOPIC, "partitions": [{"partition_index": 0}]}]}
    conn = client.any_connection()
    if 55 not in conn.versions:
        return None
    r = client.request(conn, 55, values)
    if r.error_code.value != 0 or not r.topics or not r.topics[0].partitions:
        return None
    p = r.topics[0].partitions[0]
    if p.error_code.value != 0:
        return None

    def replica(v: Any) -> dict[str, Any]:
        return {"node": v.replica_id, "log_end_offset": v.log_end_offset, "lag": p.high_watermark - v.log_end_offset}

    return {"leader": p.leader_id, "leader_epoch": p.leader_epoch, "high_watermark": p.high_watermark,
            "voters": [replica(v) for v in p.current_voters], "observers": [replica(v) for v in p.observers]}


def partition_health(view: ClusterView) -> dict[str, Any]:
    under: list[str] = []
    offline: list[str] = []
    missing_replicas: set[int] = set()
    for t in view.topics.values():
        for p in t.partitions.values():
            name = f"{t.name}-{p.partition}"
            if p.leader_id < 0:
                offline.append(name)
            elif len(p.isr) < len(p.replicas):
                under.append(name)
            missing_replicas.update(r for r in p.replicas if r not in view.brokers)
    return {"under_replicated": sorted(under), "offline": sorted(offline),
            "brokers_down": sorted(missing_replicas)}


def cmd_info(client: RoutingClient, args: argparse.Namespace) -> int:
    view = client.refresh(None)
    q = quorum(client)
    health = partition_health(view)
    brokers = [[n, h, p, r] for n, (h, p, r) in sorted(view.brokers.items())]
    data = {"cluster_id": view.cluster_id, "controller": view.controller_id,
            "brokers": records(["NODE", "HOST", "PORT", "RACK"], brokers), "quorum": q,
            "topics": len(view.topics), "partitions": sum(len(t.partitions) for t in view.topics.values()),
            **health}
    if args.output == "json":
        emit(args, data, [], [])
        return 0
    print(f"Cluster: {view.cluster_id}  Controller: {view.controller_id}  Topics: {data['topics']}  "
          f"Partitions: {data['partitions']}")
    print()
    table(["NODE", "HOST", "PORT", "RACK"], [[f"{n}*" if n == view.controller_id else n, h, p, r]
                                            for n, h, p, r in brokers])
    if q is not None:
        print()
        print(f"Quorum: leader {q['leader']}, epoch {q['leader_epoch']}, high watermark {q['high_watermark']}")
        table(["REPLICA", "ROLE", "LOG-END-OFFSET", "LAG"],
              [[v["node"], "voter" + (" (leader)" if v["node"] == q["leader"] else ""), v["log_end_offset"],
                v["lag"]] for v in q["voters"]] + [[v["node"], "observer", v["log_end_offset"], v["lag"]]
                                                   for v in q["observers"]])
    print()
    print(f"Under-replicated partitions: {len(health['under_replicated'])}  Offline partitions: "
          f"{len(health['offline'])}")
    return 0


def ready_of(host: str, port: int, timeout_s: float = READY_TIMEOUT_S) -> dict[str, Any]:
    """A node's /health/ready (broker.observability.health: caught up with the quorum, registered, unfenced,
    listening), as {"ready": bool, "reasons": [...]}; a node that does not answer is not ready."""
    try:
        with urllib.request.urlopen(f"http://{host}:{port}/health/ready", timeout=timeout_s) as r:
            body = r.read()
    except urllib.error.HTTPError as e:
        body = e.read()
    except (OSError, ValueError) as e:
        return {"ready": False, "reasons": [f"no answer from {host}:{port}: {getattr(e, 'reason', e)}"]}
    try:
        answer = json.loads(body)
        return {"ready": answer["status"] == "ready", "reasons": list(answer.get("reasons", ()))}
    except (ValueError, KeyError, TypeError):
        return {"ready": False, "reasons": [f"{host}:{port} answered {body[:80]!r}"]}


def node_readiness(directory: str | None, view: ClusterView) -> dict[int, dict[str, Any]] | None:
    """Each node's readiness, when `directory` holds the cluster.json of the cluster `view` describes (one of
    its brokers is at an address the file names) and its nodes serve /health; None otherwise."""
    from samsa.broker.cli.cluster import ClusterError, read_state

    if directory is None:
        return None
    try:
        state = read_state(Path(directory))
    except ClusterError:
        return None
    if state is None:
        return None
    seen = {(host, port) for host, port, _ in view.brokers.values()}
    nodes = [n for n in state["nodes"] if n.get("metrics_port") is not None]
    if not any((n.get("host"), n.get("broker_port")) in seen for n in nodes):
        return None  # another cluster than the one asked
    return {int(n["node_id"]): ready_of(str(n["host"]), int(n["metrics_port"])) for n in nodes}


def cmd_health(client: RoutingClient, args: argparse.Namespace) -> int:
    view = client.refresh(None)
    health = partition_health(view)
    q = quorum(client)
    readiness = node_readiness(getattr(args, "dir", None), view)
    not_ready = {} if readiness is None else {n: r["reasons"] for n, r in readiness.items() if not r["ready"]}
    healthy = not (health["under_replicated"] or health["offline"] or health["brokers_down"] or not_ready) and \
        view.controller_id >= 0
    data = {"healthy": healthy, "controller": view.controller_id, "brokers": sorted(view.brokers),
            "quorum_leader": q["leader"] if q else None, **health, "readiness": readiness,
            "checked_at_ms": int(time.time() * 1000)}
    if args.output == "json":
        emit(args, data, [], [])
    else:
        # rpk cluster health's layout
        print(f"Healthy:                          {str(healthy).lower()}")
        print(f"Controller ID:                    {view.controller_id}")
        print(f"All nodes:                        {sorted(view.brokers)}")
        print(f"Nodes down:                       {health['brokers_down']}")
        print(f"Quorum leader:                    {q['leader'] if q else '-'}")
        print(f"Leaderless partitions ({len(health['offline'])}):       {health['offline']}")
        print(f"Under-replicated partitions ({len(health['under_replicated'])}): {health['under_replicated']}")
        if readiness is not None:
            print(f"Nodes ready (/health/ready):      {sorted(n for n, r in readiness.items() if r['ready'])}")
            for node_id, reasons in sorted(not_ready.items()):
                print(f"  node {node_id} not ready: {'; '.join(reasons)}")
    return 1 if (args.exit_status and not healthy) else 0


@guarded
def cmd_cluster_view(args: argparse.Namespace) -> int:
    with RoutingClient(settings_from_args(args)) as client:
        return (cmd_info if args.action == "info" else cmd_health)(client, args)
