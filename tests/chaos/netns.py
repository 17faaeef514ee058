"""A small network of our own for a chaos run: one network namespace per node, one for the clients,
and a hub namespace whose bridge joins them, so that the nemesis can cut one node off from every other
node and every client (a real partition: packets vanish, connections hang) and mend it again.

    lab = NetworkLab.create(3)              # raises NetworkLabUnavailable (with the reason) if it cannot
    plan = lab.plan(directory, overrides)   # nodes at 10.99.0.11-13, broker port 9092, controller 9093
    with lab.inside_clients():              # this thread (and every thread it starts) in the client namespace
        ...
        lab.cut(2); ...; lab.mend(2)
    lab.destroy()

Nothing here touches the caller's own network namespace: the bridge and every address live in the
namespaces the lab creates, so two labs (two runs at once) never see each other and may use the same
addresses. Namespaces are named samsa-chaos-<pid>-<n>-<role>; a lab deletes leftovers whose PID no longer
runs (a run killed before its clean-up), and no others.

Why a thread and not the process enters the client namespace: setns(2) moves only the calling thread,
and threads it starts inherit its namespace. The run's thread (pytest's main thread) enters for the run
and leaves after; the clients' threads, librdkafka's own threads among them, are started inside.
"""

from __future__ import annotations

import contextlib
import ctypes
import itertools
import os
import re
import shutil
import subprocess
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from samsa.broker.cli import cluster as cluster_cli

SUBNET = "10.99.0"  # inside the lab's own namespaces only
CLIENT_HOST = f"{SUBNET}.100"
BROKER_PORT = 9092  # every node has its own address, so every node can use Kafka's ports
CONTROLLER_PORT = 9093
NETNS_DIR = Path("/run/netns")
CLONE_NEWNET = 0x40000000
IP_TIMEOUT_S = 10.0
_counter = itertools.count()


class NetworkLabUnavailable(Exception):
    """No namespaces here (not root, no `ip`, or the kernel refused); the message says which."""


def _ip(*args: str) -> None:
    done = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=IP_TIMEOUT_S)
    if done.returncode != 0:
        raise NetworkLabUnavailable(f"`ip {' '.join(args)}` failed: {done.stderr.strip() or done.returncode}")


def _setns(fd: int) -> None:
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    if libc.setns(fd, CLONE_NEWNET) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"setns: {os.strerror(errno)}")


def node_host(node_id: int) -> str:
    return f"{SUBNET}.{10 + node_id}"


def remove_stale() -> list[str]:
    """Delete namespaces an earlier lab of a process that no longer runs left behind; returns their names."""
    removed = []
    with contextlib.suppress(OSError):
        for entry in NETNS_DIR.iterdir():
            m = re.fullmatch(r"samsa-chaos-(\d+)-\d+-\w+", entry.name)
            if m and not cluster_cli.pid_alive(int(m.group(1))):
                with contextlib.suppress(NetworkLabUnavailable, subprocess.TimeoutExpired):
                    _ip("netns", "delete", entry.name)
                    removed.append(entry.name)
    return removed


@dataclass
class NetworkLab:
    prefix: str
    node_ids: tuple[int, ...]
    created: list[str]
    cut_nodes: set[int]

    @property
    def hub(self) -> str:
        return f"{self.prefix}-hub"

    @property
    def clients(self) -> str:
        return f"{self.prefix}-clients"

    def namespace(self, node_id: int) -> str:
        return f"{self.prefix}-n{node_id}"

    @classmethod
    def create(cls, nodes: int) -> NetworkLab:
        if os.geteuid() != 0:
            raise NetworkLabUnavailable("network namespaces need root (ip netns add)")
        if shutil.which("ip") is None:
            raise NetworkLabUnavailable("no `ip` command (Debian's iproute2)")
        remove_stale()
        lab = cls(f"samsa-chaos-{os.getpid()}-{next(_counter)}", tuple(range(1, nodes + 1)), [], set())
        try:
            lab._build()
        except BaseException:
            lab.destroy()
            raise
        return lab

    def _add_namespace(self, name: str) -> None:
        _ip("netns", "add", name)
        self.created.append(name)
        _ip("-n", name, "link", "set", "lo", "up")

    def _attach(self, name: str, port: str, address: str) -> None:
        """A veth pair: `port` on the hub's bridge, eth0 with `address` in namespace `name`."""
        _ip("-n", self.hub, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", name)
        _ip("-n", self.hub, "link", "set", port, "master", "br0")
        _ip("-n", self.hub, "link", "set", port, "up")
        _ip("-n", name, "addr", "add", f"{address}/24", "dev", "eth0")
        _ip("-n", name, "link", "set", "eth0", "up")

    def _build(self) -> None:
        self._add_namespace(self.hub)
        _ip("-n", self.hub, "link", "add", "br0", "type", "bridge")
        _ip("-n", self.hub, "link", "set", "br0", "up")
        self._add_namespace(self.clients)
        self._attach(self.clients, "vc", CLIENT_HOST)
        for node_id in self.node_ids:
            self._add_namespace(self.namespace(node_id))
            self._attach(self.namespace(node_id), f"v{node_id}", node_host(node_id))

    def plan(self, directory: Path, overrides: Sequence[str] = (), log_level: str = "INFO") -> cluster_cli.ClusterPlan:
        """The cluster's layout: node N at node_host(N), in its own namespace."""
        directory = directory.resolve()
        specs = tuple(cluster_cli.NodeSpec(
            node_id=n, broker_port=BROKER_PORT, controller_port=CONTROLLER_PORT, data_dir=directory / f"node-{n}",
            log_path=directory / f"node-{n}.log", host=node_host(n), netns=self.namespace(n)) for n in self.node_ids)
        return cluster_cli.ClusterPlan(directory, specs, tuple(overrides), log_level)

    @contextlib.contextmanager
    def inside_clients(self) -> Iterator[None]:
        """The calling thread in the client namespace until the block ends (threads it starts meanwhile
        stay there for good)."""
        own = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
        try:
            target = os.open(NETNS_DIR / self.clients, os.O_RDONLY)
            try:
                _setns(target)
            finally:
                os.close(target)
            try:
                yield
            finally:
                _setns(own)
        finally:
            os.close(own)

    def cut(self, node_id: int) -> None:
        """Node `node_id` hears from nobody and reaches nobody (its bridge port down) until mended."""
        _ip("-n", self.hub, "link", "set", f"v{node_id}", "down")
        self.cut_nodes.add(node_id)

    def mend(self, node_id: int) -> None:
        _ip("-n", self.hub, "link", "set", f"v{node_id}", "up")
        self.cut_nodes.discard(node_id)

    def destroy(self) -> None:
        """Delete every namespace the lab made (their veths go with them). Processes still inside keep
        theirs until they exit; the caller stops its nodes first."""
        for name in reversed(self.created):
            with contextlib.suppress(NetworkLabUnavailable, subprocess.TimeoutExpired):
                _ip("netns", "delete", name)
        self.created.clear()
