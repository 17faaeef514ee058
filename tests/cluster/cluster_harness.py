"""A running N-voter Samsa cluster for tests: start, kill, pause and restart its nodes by PID, and ask
them things (Metadata, DescribeQuorum, CreateTopics) over the raw client, `broker.client.Connection`.

Processes are started by `broker.cluster_cli`, the code behind `samsa cluster up`: one code path for
the command and the tests.
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from samsa.broker.cli import cluster as cluster_cli
from samsa.broker.client import Connection, KafkaClientError
from samsa.kproto.errors import ErrorCode

T = TypeVar("T")
HOST = cluster_cli.HOST
REQUEST_TIMEOUT_S = 3.0  # one probe; a SIGSTOPped node must not stall a poll loop for long
POLL_INTERVAL_S = 0.1


@dataclass(frozen=True, slots=True)
class QuorumView:
    """DescribeQuorum as one node answered it."""

    node_id: int  # who was asked
    error_code: int
    leader_id: int
    leader_epoch: int
    high_watermark: int
    voters: dict[int, int]  # replica id -> log end offset
    observers: dict[int, int]


def wait_for(what: str, probe: Callable[[], T | None], timeout_s: float) -> tuple[T, float]:
    """Poll `probe` until it returns something other than None (or False); returns it and the seconds
    it took. Fails the test with `what` and the last value when `timeout_s` passes."""
    started = time.monotonic()
    deadline = started + timeout_s
    last: T | None = None
    while True:
        last = probe()
        if last is not None and last is not False:
            return last, time.monotonic() - started
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what} (last: {last!r})")
        time.sleep(POLL_INTERVAL_S)


class Cluster:
    def __init__(self, directory: Path, nodes: int = 3, overrides: Sequence[str] = (),
                 plan: cluster_cli.ClusterPlan | None = None) -> None:
        """`plan`: a layout of one's own (nodes on other addresses or in network namespaces), else
        `nodes` on loopback ports."""
        self.plan = plan or cluster_cli.plan_cluster(directory, nodes, overrides=overrides)
        self.processes: dict[int, subprocess.Popen[bytes]] = {}
        self.paused: set[int] = set()
        # Linux sends PR_SET_PDEATHSIG when the forking *thread* exits: only ask for it from the main one.
        self._die_with_parent = threading.current_thread() is threading.main_thread()

    # --- processes ------------------------------------------------------------------------------------

    @property
    def node_ids(self) -> list[int]:
        return [n.node_id for n in self.plan.nodes]

    @property
    def bootstrap_servers(self) -> str:
        return self.plan.bootstrap_servers

    def port(self, node_id: int) -> int:
        return self.plan.node(node_id).broker_port

    def host(self, node_id: int) -> str:
        return self.plan.node(node_id).host

    def listening(self, node_id: int) -> bool:
        return cluster_cli.port_open(self.port(node_id), host=self.host(node_id))

    def up(self, ready_timeout_s: float = 60.0) -> float:
        """Start every node and wait until each lists all brokers; returns the seconds it took."""
        started = time.monotonic()
        self.processes = cluster_cli.start_cluster(self.plan, die_with_parent=self._die_with_parent,
                                                   ready_timeout_s=ready_timeout_s)
        return time.monotonic() - started

    def start(self, node_id: int, *, wait: bool = True) -> None:
        """(Re)start one node with its data directory; returns once its broker port accepts connections
        (`wait`; a member opens it only after catching up with the quorum, so restarting a whole
        cluster must start every node before waiting for any: see wait_listening)."""
        assert not self.running(node_id), f"node {node_id} is running"
        node = self.plan.node(node_id)
        proc = cluster_cli.start_node(self.plan, node, die_with_parent=self._die_with_parent)
        self.processes[node_id] = proc
        cluster_cli.write_state(self.plan, self.processes)
        if wait:
            self.wait_listening(node_id)

    def wait_listening(self, node_id: int) -> None:
        proc = self.processes[node_id]
        deadline = time.monotonic() + 30
        while not self.listening(node_id):
            assert proc.poll() is None, f"node {node_id} exited with {proc.returncode}\n{self.log_tail(node_id)}"
            assert time.monotonic() < deadline, f"node {node_id} did not listen\n{self.log_tail(node_id)}"
            time.sleep(0.05)

    def running(self, node_id: int) -> bool:
        proc = self.processes.get(node_id)
        return proc is not None and proc.poll() is None

    def kill(self, node_id: int) -> None:
        """kill -9, and reap it."""
        proc = self.processes[node_id]
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)

    def pause(self, node_id: int) -> None:
        self.processes[node_id].send_signal(signal.SIGSTOP)
        self.paused.add(node_id)

    def resume(self, node_id: int) -> None:
        if self.running(node_id):
            self.processes[node_id].send_signal(signal.SIGCONT)
        self.paused.discard(node_id)

    def stop(self) -> None:
        """Everything we started, by PID: SIGCONT the paused, SIGTERM, SIGKILL after a timeout."""
        for node_id in list(self.paused):
            self.resume(node_id)
        cluster_cli.stop_pids([cluster_cli.owned(p) for p in self.processes.values()], timeout_s=10)

    def log_tail(self, node_id: int, lines: int = 40) -> str:
        return cluster_cli.log_tail(self.plan.node(node_id).log_path, lines)

    def log_tails(self) -> str:
        return "\n".join(self.log_tail(n) for n in self.node_ids)

    # --- requests ---------------------------------------------------------------------------------------

    def connect(self, node_id: int, timeout_s: float = REQUEST_TIMEOUT_S) -> Connection:
        return Connection(self.host(node_id), self.port(node_id), client_id="cluster-test", timeout_s=timeout_s)

    def metadata(self, node_id: int, topics: Sequence[str] | None = None) -> Any:
        return cluster_cli.metadata(self.port(node_id), topics, timeout_s=REQUEST_TIMEOUT_S, host=self.host(node_id))

    def brokers(self, node_id: int) -> set[int] | None:
        """The brokers node `node_id` lists in Metadata (None: no answer)."""
        return cluster_cli.listed_brokers(self.port(node_id), timeout_s=REQUEST_TIMEOUT_S, host=self.host(node_id))

    def leaders(self, node_id: int, topic: str) -> dict[int, tuple[int, int]] | None:
        """partition -> (leader id, error code) for `topic` as node `node_id` sees it; None if unknown."""
        try:
            t = self.metadata(node_id, [topic]).topics[0]
        except (OSError, KafkaClientError):
            return None
        if t.error_code != ErrorCode.none or not t.partitions:
            return None
        return {int(p.partition_index): (int(p.leader_id), int(p.error_code)) for p in t.partitions}

    def describe_quorum(self, node_id: int, timeout_s: float = REQUEST_TIMEOUT_S) -> QuorumView | None:
        """DescribeQuorum on node `node_id`'s broker listener (forwarded to the active controller)."""
        try:
            with self.connect(node_id, timeout_s) as conn:
                r = conn.request(55, {"topics": [{"topic_name": "__cluster_metadata",
                                                  "partitions": [{"partition_index": 0}]}]})
        except (OSError, KafkaClientError):
            return None
        if r.error_code != ErrorCode.none or not r.topics or not r.topics[0].partitions:
            return None
        p = r.topics[0].partitions[0]
        return QuorumView(node_id, int(p.error_code), int(p.leader_id), int(p.leader_epoch), int(p.high_watermark),
                          {int(v.replica_id): int(v.log_end_offset) for v in p.current_voters},
                          {int(v.replica_id): int(v.log_end_offset) for v in p.observers})

    def quorum_leader(self, asked: Sequence[int] | None = None) -> QuorumView | None:
        """The quorum as its leader describes it, asking each node in `asked` (default: all running)."""
        for node_id in asked if asked is not None else self.node_ids:
            if not self.running(node_id) or node_id in self.paused:
                continue
            view = self.describe_quorum(node_id)
            if view is not None and view.error_code == ErrorCode.none and view.leader_id >= 0:
                return view
        return None

    def create_topic(self, node_id: int, name: str, partitions: int = 1, *,
                     timeout_s: float = 30.0) -> tuple[ErrorCode, str | None]:
        """CreateTopics through node `node_id`; the per-topic error (REQUEST_TIMED_OUT if no answer)."""
        try:
            with self.connect(node_id, timeout_s) as conn:
                r = conn.request(19, {"topics": [{"name": name, "num_partitions": partitions,
                                                  "replication_factor": -1, "assignments": (), "configs": ()}],
                                      "timeout": int(timeout_s * 1000), "validate_only": False})
        except (OSError, KafkaClientError) as e:
            return ErrorCode.request_timed_out, f"no answer: {e}"
        t = r.topics[0]
        return ErrorCode(t.error_code), t.error_message

    def topic_visible(self, node_id: int, topic: str, partitions: int) -> bool:
        leaders = self.leaders(node_id, topic)
        return leaders is not None and len(leaders) == partitions


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@contextlib.contextmanager
def running_cluster(directory: Path, nodes: int = 3, overrides: Sequence[str] = ()) -> Any:
    cluster = Cluster(directory, nodes, overrides)
    try:
        cluster.up()
        yield cluster
    finally:
        cluster.stop()
