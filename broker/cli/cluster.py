"""`samsa cluster up|down`: a local N-voter Samsa cluster on loopback, one `samsa serve` process per node.
(`samsa cluster info|health`, for any cluster, are client commands: broker/cli/commands/cluster_info.py.)

    samsa cluster up --nodes 3 --dir ./samsa-cluster     # prints 127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3
    samsa cluster down --dir ./samsa-cluster

Every node is a voter with both roles (Kafka's combined mode): its broker listener is a port of the
bootstrap list, its controller listener the port it has in the quorum string. Each node has its own
data directory (DIR/node-N) and log (DIR/node-N.log), and runs detached in its own session.
DIR/cluster.json records the layout and every PID (with the process's start time, so that a PID the
kernel has handed to another process since is never signalled); `down` stops exactly those PIDs,
never anything found by name. `up` on a DIR whose cluster is stopped restarts it with the same ports
and data; on a DIR whose cluster runs it refuses.

The tests in tests/cluster drive clusters through the same functions (`plan_cluster`, `start_node`,
`wait_ready`, `stop_pids`), so the command and the tests share one code path.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from samsa.broker import launcher
from samsa.broker.client import Connection, KafkaClientError
from samsa.broker.launcher import (  # noqa: F401  (re-exported: the tests and benches use them from here)
    HOST,
    LOG_TAIL_LINES,
    READY_TIMEOUT_S,
    STOP_TIMEOUT_S,
    OwnedProcess,
    ServeOptions,
    free_ports,
    log_tail,
    owned,
    pid_alive,
    port_open,
    process_start_time,
    start_serve,
    stop_pids,
)

STATE_FILE = "cluster.json"
STATE_VERSION = 1
DEFAULT_DIR = "./samsa-cluster"
MAX_NODES = 9  # a local toy cluster; Kafka recommends 3 or 5 voters
POLL_INTERVAL_S = 0.1
PROBE_TIMEOUT_S = 2.0  # one Metadata probe; a stopped (SIGSTOP) node must not stall the wait


class ClusterError(Exception):
    """The cluster could not be started or stopped; the message says why (with log tails)."""


@dataclass(frozen=True, slots=True)
class NodeSpec:
    node_id: int
    broker_port: int
    controller_port: int
    data_dir: Path
    log_path: Path
    host: str = HOST  # the address both listeners bind to and advertise
    # A network namespace (`ip netns`) to run the node in, or None: the caller's. Tests that cut nodes
    # off from each other give each node its own (tests/chaos/netns.py); `samsa cluster up` does not.
    netns: str | None = None
    # Where the node serves /metrics and /health (samsa.metrics.listen); None: not at all.
    metrics_port: int | None = None

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.broker_port}"

    @property
    def metrics_url(self) -> str | None:
        return None if self.metrics_port is None else f"http://{self.host}:{self.metrics_port}/metrics"


@dataclass(frozen=True, slots=True)
class ClusterPlan:
    directory: Path
    nodes: tuple[NodeSpec, ...]
    overrides: tuple[str, ...] = ()  # KEY=VALUE, passed to every node as --override
    log_level: str = "INFO"

    @property
    def quorum(self) -> str:
        return ",".join(f"{n.node_id}@{n.host}:{n.controller_port}" for n in self.nodes)

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(n.bootstrap for n in self.nodes)

    def node(self, node_id: int) -> NodeSpec:
        for n in self.nodes:
            if n.node_id == node_id:
                return n
        raise KeyError(node_id)


# --- planning ------------------------------------------------------------------------------------------


def plan_cluster(directory: Path, nodes: int, *, base_port: int | None = None, overrides: Sequence[str] = (),
                 log_level: str = "INFO") -> ClusterPlan:
    """Node ids 1..N. Broker ports base_port..base_port+N-1, controller ports the N after them and metrics
    ports (/metrics, /health) the N after those, or free ports when no base port is given."""
    if not 1 <= nodes <= MAX_NODES:
        raise ClusterError(f"--nodes must be between 1 and {MAX_NODES}, not {nodes}")
    if base_port is not None:
        if not 1024 <= base_port <= 65535 - 3 * nodes:
            raise ClusterError(f"--base-port {base_port} leaves no room for {3 * nodes} ports")
        ports = list(range(base_port, base_port + 3 * nodes))
    else:
        ports = free_ports(3 * nodes)
    directory = directory.resolve()
    specs = tuple(
        NodeSpec(node_id=i + 1, broker_port=ports[i], controller_port=ports[nodes + i],
                 data_dir=directory / f"node-{i + 1}", log_path=directory / f"node-{i + 1}.log",
                 metrics_port=ports[2 * nodes + i])
        for i in range(nodes))
    return ClusterPlan(directory, specs, tuple(overrides), log_level)


def serve_options(plan: ClusterPlan, node: NodeSpec) -> ServeOptions:
    overrides = plan.overrides
    if node.metrics_port is not None:
        overrides = (f"samsa.metrics.listen={node.host}:{node.metrics_port}", *overrides)
    return ServeOptions(data_dir=node.data_dir, port=node.broker_port, host=node.host, node_id=node.node_id,
                        controller_quorum=plan.quorum, controller_listen=f"{node.host}:{node.controller_port}",
                        overrides=overrides, log_level=plan.log_level, netns=node.netns)


def serve_command(plan: ClusterPlan, node: NodeSpec) -> list[str]:
    return launcher.serve_command(serve_options(plan, node))


# --- processes -----------------------------------------------------------------------------------------


def start_node(plan: ClusterPlan, node: NodeSpec, *, die_with_parent: bool = False) -> subprocess.Popen[bytes]:
    """Start one node detached (its own session), appending to its log. `die_with_parent` (tests, from
    the main thread only: Linux signals when the forking *thread* exits) kills it if we die first."""
    node.data_dir.mkdir(parents=True, exist_ok=True)
    return start_serve(serve_options(plan, node), node.log_path, cwd=plan.directory, new_session=True,
                       die_with_parent=die_with_parent).popen


# --- readiness -----------------------------------------------------------------------------------------


def metadata(port: int, topics: Iterable[str] | None = None, *, timeout_s: float = PROBE_TIMEOUT_S,
             host: str = HOST) -> Any:
    """One Metadata request to the broker on `host:port` (no auto-creation)."""
    with Connection(host, port, client_id="samsa-cluster", timeout_s=timeout_s) as conn:
        return conn.request(3, {"topics": None if topics is None else [{"name": t} for t in topics],
                                "allow_auto_topic_creation": False,
                                "include_topic_authorized_operations": False})


def listed_brokers(port: int, *, timeout_s: float = PROBE_TIMEOUT_S, host: str = HOST) -> set[int] | None:
    """The broker ids Metadata from `host:port` lists, or None when the node does not answer."""
    try:
        return {int(b.node_id) for b in metadata(port, [], timeout_s=timeout_s, host=host).brokers}
    except (OSError, KafkaClientError):
        return None


def wait_ready(plan: ClusterPlan, processes: dict[int, subprocess.Popen[bytes]], *,
               timeout_s: float = READY_TIMEOUT_S) -> float:
    """Wait until every node's broker port accepts connections and Metadata from every node lists all
    N brokers. Returns the seconds waited; raises ClusterError (with log tails) when a node exits or
    the time is up."""
    started = time.monotonic()
    deadline = started + timeout_s
    want = {n.node_id for n in plan.nodes}
    last: dict[int, set[int] | None] = {}
    while True:
        for node_id, proc in processes.items():
            if proc.poll() is not None:
                node = plan.node(node_id)
                raise ClusterError(f"node {node_id} exited with code {proc.returncode} during start-up\n"
                                   f"{log_tail(node.log_path)}")
        ready = True
        for node in plan.nodes:
            if not port_open(node.broker_port, host=node.host):
                last[node.node_id] = None
                ready = False
                continue
            last[node.node_id] = listed_brokers(node.broker_port, host=node.host)
            if last[node.node_id] != want:
                ready = False
        if ready:
            return time.monotonic() - started
        if time.monotonic() >= deadline:
            seen = "; ".join(f"node {n}: " + ("no answer" if b is None else f"lists brokers {sorted(b)}")
                             for n, b in sorted(last.items()))
            tails = "\n".join(log_tail(n.log_path) for n in plan.nodes)
            raise ClusterError(f"the cluster was not ready within {timeout_s:.0f} s ({seen})\n{tails}")
        time.sleep(POLL_INTERVAL_S)


# --- cluster.json ----------------------------------------------------------------------------------------


def state_path(directory: Path) -> Path:
    return directory / STATE_FILE


def write_state(plan: ClusterPlan, processes: dict[int, subprocess.Popen[bytes]]) -> Path:
    nodes = []
    for n in plan.nodes:
        proc = processes.get(n.node_id)
        nodes.append({"node_id": n.node_id, "pid": proc.pid if proc else None,
                      "start_time": process_start_time(proc.pid) if proc else None,
                      "broker_port": n.broker_port, "controller_port": n.controller_port,
                      "data_dir": str(n.data_dir), "log": str(n.log_path), "host": n.host, "netns": n.netns,
                      "metrics_port": n.metrics_port})
    state = {"version": STATE_VERSION, "bootstrap_servers": plan.bootstrap_servers,
             "controller_quorum": plan.quorum, "overrides": list(plan.overrides), "log_level": plan.log_level,
             "nodes": nodes}
    path = state_path(plan.directory)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(state, indent=2) + "\n")
    tmp.replace(path)
    return path


def read_state(directory: Path) -> dict[str, Any] | None:
    path = state_path(directory)
    try:
        state: dict[str, Any] = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        raise ClusterError(f"{path} is unreadable: {e}") from e
    if state.get("version") != STATE_VERSION or not isinstance(state.get("nodes"), list):
        raise ClusterError(f"{path} is not a cluster.json this samsa wrote (version {state.get('version')})")
    return state


def live_pids(state: dict[str, Any]) -> list[int]:
    return [int(n["pid"]) for n in state["nodes"]
            if n.get("pid") is not None and pid_alive(int(n["pid"]), n.get("start_time"))]


def plan_from_state(directory: Path, state: dict[str, Any]) -> ClusterPlan:
    nodes = tuple(NodeSpec(int(n["node_id"]), int(n["broker_port"]), int(n["controller_port"]),
                           Path(n["data_dir"]), Path(n["log"]), n.get("host", HOST), n.get("netns"),
                           n.get("metrics_port"))
                  for n in state["nodes"])
    return ClusterPlan(directory.resolve(), nodes, tuple(state.get("overrides", ())), state.get("log_level", "INFO"))


# --- up / down -------------------------------------------------------------------------------------------


def start_cluster(plan: ClusterPlan, *, die_with_parent: bool = False,
                  ready_timeout_s: float = READY_TIMEOUT_S) -> dict[int, subprocess.Popen[bytes]]:
    """Start every node of `plan`, record cluster.json, wait until ready. On failure, stop what was
    started and raise ClusterError."""
    plan.directory.mkdir(parents=True, exist_ok=True)
    processes: dict[int, subprocess.Popen[bytes]] = {}
    ok = False
    try:
        for node in plan.nodes:
            processes[node.node_id] = start_node(plan, node, die_with_parent=die_with_parent)
        write_state(plan, processes)
        wait_ready(plan, processes, timeout_s=ready_timeout_s)
        ok = True
        return processes
    finally:
        if not ok:
            stop_pids([owned(p) for p in processes.values()], timeout_s=5.0)


def cluster_up(directory: Path, nodes: int, *, base_port: int | None = None, overrides: Sequence[str] = (),
               log_level: str = "INFO", ready_timeout_s: float = READY_TIMEOUT_S) -> ClusterPlan:
    old = read_state(directory)
    if old is not None:
        running = live_pids(old)
        if running:
            raise ClusterError(f"{state_path(directory)} describes a running cluster (PIDs "
                               f"{', '.join(map(str, running))}); run `samsa cluster down --dir {directory}` first")
        previous = plan_from_state(directory, old)
        # The data directories belong to that cluster (its id derives from the quorum string): restart
        # it with the same layout rather than make nodes refuse their own data.
        if len(previous.nodes) != nodes or (base_port is not None and previous.nodes[0].broker_port != base_port):
            raise ClusterError(f"{directory} holds a stopped {len(previous.nodes)}-node cluster (bootstrap "
                               f"{previous.bootstrap_servers}); restart it with the same --nodes (and no "
                               "--base-port), or remove the directory / use another --dir")
        plan = ClusterPlan(previous.directory, previous.nodes, tuple(overrides) or previous.overrides, log_level)
    else:
        plan = plan_cluster(directory, nodes, base_port=base_port, overrides=overrides, log_level=log_level)
    start_cluster(plan, ready_timeout_s=ready_timeout_s)
    return plan


def cluster_down(directory: Path, *, timeout_s: float = STOP_TIMEOUT_S) -> list[int]:
    """Stop every recorded PID that is still the process we started; returns the PIDs signalled."""
    state = read_state(directory)
    if state is None:
        raise ClusterError(f"no {STATE_FILE} in {directory}: no cluster was started there")
    processes = [OwnedProcess(int(n["pid"]), n.get("start_time")) for n in state["nodes"] if n.get("pid") is not None]
    running = [p for p in processes if p.alive()]
    stop_pids(running, timeout_s=timeout_s)
    return [p.pid for p in running]


def cmd_cluster(args: argparse.Namespace) -> int:
    directory = Path(args.dir)
    try:
        if args.action == "up":
            started = time.monotonic()
            plan = cluster_up(directory, args.nodes, base_port=args.base_port, overrides=args.override or (),
                              log_level=args.log_level, ready_timeout_s=args.timeout or READY_TIMEOUT_S)
            print(f"{len(plan.nodes)} nodes ready in {time.monotonic() - started:.1f} s; state in "
                  f"{state_path(plan.directory)}", file=sys.stderr)
            metrics = [n.metrics_url for n in plan.nodes if n.metrics_url is not None]
            if metrics:
                print(f"metrics and health: {', '.join(metrics)}", file=sys.stderr)
            print(plan.bootstrap_servers, flush=True)
            return 0
        stopped = cluster_down(directory, timeout_s=args.timeout or STOP_TIMEOUT_S)
        print(f"stopped {len(stopped)} node(s)" + (f": PIDs {', '.join(map(str, stopped))}" if stopped else ""),
              file=sys.stderr)
        return 0
    except ClusterError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1


def add_commands(sub: Any) -> None:
    # info and health are added to this parser by samsa.broker.cli.commands (they are client commands, with
    # --bootstrap-server); the help names all four, as `samsa --help` lists only this line.
    summary = ("info, health: any cluster's brokers, controller, quorum and partitions; up, down: a local "
               "multi-node cluster (one process per node)")
    cluster = sub.add_parser("cluster", help=summary, description=f"samsa cluster: {summary}.")
    cluster.add_argument("action", choices=["up", "down"])
    cluster.add_argument("--nodes", type=int, default=3, help="how many voters (combined broker+controller)")
    cluster.add_argument("--dir", default=DEFAULT_DIR, help=f"data, logs and {STATE_FILE} (default {DEFAULT_DIR})")
    cluster.add_argument("--base-port", type=int, default=None,
                         help="broker ports P..P+N-1, controller ports P+N..P+2N-1 (default: free ports)")
    cluster.add_argument("--override", action="append", help="KEY=VALUE for every node (serve --override)")
    cluster.add_argument("--log-level", default=os.environ.get("SAMSA_LOG_LEVEL", "INFO"))
    cluster.add_argument("--timeout", type=float, default=None,
                         help=f"up: seconds to wait for readiness (default {READY_TIMEOUT_S:.0f}); "
                              f"down: seconds before SIGKILL (default {STOP_TIMEOUT_S:.0f})")
    cluster.set_defaults(func=cmd_cluster)

