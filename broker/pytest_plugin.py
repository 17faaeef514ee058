"""A pytest plugin (the `pytest11` entry point `samsa`): real Samsa brokers as fixtures for a user's tests.

    def test_round_trip(samsa_broker, samsa_topic):
        producer = KafkaProducer(bootstrap_servers=samsa_broker.bootstrap_servers)
        producer.send(samsa_topic, b"hello").get(timeout=10)

- `samsa_broker` (session): one `samsa serve` on a free loopback port with a temporary data directory,
  stopped by its PID at the end of the session. Under pytest-xdist every worker has its own session,
  so its own broker.
- `samsa_cluster` (session): an N-node cluster (ini `samsa_cluster_nodes`, default 3), each node a combined
  broker and controller, same attribute `bootstrap_servers`.
- `samsa_topic` (function): a fresh topic per test, created on the session broker; partitions and configs
  from `@pytest.mark.samsa_topic(partitions=3, configs={"cleanup.policy": "compact"})`.

A failing test that used a broker gets the tail of that broker's log in its report; one that used the
cluster, the tail of every node's log. Importing this module is cheap (pytest imports it in every session
of every environment Samsa is installed in): the broker's own modules load only when a fixture is used.
"""

from __future__ import annotations

import itertools
import os
import re
from collections.abc import Generator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from samsa.broker.client import Connection
    from samsa.broker.launcher import ServeProcess

READY_TIMEOUT_S = 60.0
REPORT_LOG_LINES = 40
_STASH_BROKERS = pytest.StashKey[list["SamsaBroker"]]()
_STASH_CLUSTERS = pytest.StashKey[list["SamsaCluster"]]()


@dataclass
class SamsaBroker:
    """A running `samsa serve` started by the plugin."""

    process: ServeProcess
    data_dir: Path
    _admin: Connection | None = field(default=None, repr=False)

    @property
    def bootstrap_servers(self) -> str:
        return self.process.bootstrap

    @property
    def pid(self) -> int:
        return self.process.pid

    def log_tail(self, lines: int = REPORT_LOG_LINES) -> str:
        return self.process.log_tail(lines)

    def create_topic(self, name: str, partitions: int = 1, configs: dict[str, str] | None = None,
                     replication_factor: int = 1) -> str:
        """CreateTopics on this broker; raises RuntimeError with Kafka's error name if it is refused."""
        from samsa.broker.client import Connection

        if self._admin is None:
            host, _, port = self.bootstrap_servers.rpartition(":")
            self._admin = Connection(host, int(port), client_id="samsa-pytest")
        r = self._admin.request(19, {
            "topics": [{"name": name, "num_partitions": partitions, "replication_factor": replication_factor,
                        "assignments": (), "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()]}],
            "timeout": 30_000, "validate_only": False})
        result = r.topics[0]
        if result.error_code.value != 0:
            raise RuntimeError(f"CreateTopics {name}: {result.error_code.name.upper()} {result.error_message or ''}")
        return name

    def stop(self) -> int | None:
        if self._admin is not None:
            self._admin.close()
            self._admin = None
        return self.process.stop()


@dataclass
class SamsaCluster:
    """A running N-node Samsa cluster started by the plugin (`samsa cluster up`'s code)."""

    directory: Path
    bootstrap_servers: str
    _processes: dict[int, Any]

    def log_tail(self, lines: int = REPORT_LOG_LINES) -> str:
        return "\n".join(tail for *_, tail in self.node_log_tails(lines))

    def node_log_tails(self, lines: int = REPORT_LOG_LINES) -> list[tuple[int, str, int, str]]:
        """(node id, address, PID, the tail of its log) for every node (node N is the Nth bootstrap address)."""
        from samsa.broker import launcher

        addresses = self.bootstrap_servers.split(",")
        return [(n, addresses[i], self._processes[n].pid, launcher.log_tail(self.directory / f"node-{n}.log", lines))
                for i, n in enumerate(sorted(self._processes))]

    def stop(self) -> None:
        from samsa.broker import launcher

        launcher.stop_pids([launcher.owned(p) for p in self._processes.values()])


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini("samsa_overrides", "broker configs for the plugin's brokers, KEY=VALUE per line", type="linelist",
                  default=[])
    parser.addini("samsa_log_level", "log level of the plugin's brokers", default="INFO")
    parser.addini("samsa_cluster_nodes", "nodes of the samsa_cluster fixture", default="3")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "samsa_topic(partitions=1, configs=None): the samsa_topic fixture's topic")
    config.stash[_STASH_BROKERS] = []
    config.stash[_STASH_CLUSTERS] = []


def _start_broker(config: pytest.Config, directory: Path) -> SamsaBroker:
    from samsa.broker import launcher

    port = launcher.free_port()
    options = launcher.ServeOptions(data_dir=directory / "data", port=port, log_level=config.getini("samsa_log_level"),
                                    overrides=tuple(config.getini("samsa_overrides")))
    process = launcher.start_serve(options, directory / "samsa.log", cwd=directory)
    try:
        process.wait_listening(READY_TIMEOUT_S)
    except launcher.LaunchError:
        process.stop(kill=True)
        raise
    return SamsaBroker(process, options.data_dir)


@pytest.fixture(scope="session")
def samsa_broker(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SamsaBroker]:
    """A Samsa broker for the whole session (one per xdist worker)."""
    broker = _start_broker(request.config, tmp_path_factory.mktemp("samsa-broker"))
    request.config.stash[_STASH_BROKERS].append(broker)
    try:
        yield broker
    finally:
        request.config.stash[_STASH_BROKERS].remove(broker)
        broker.stop()


@pytest.fixture(scope="session")
def samsa_cluster(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SamsaCluster]:
    """An N-node Samsa cluster for the whole session; every node lists every broker before it is handed out."""
    from samsa.broker.cli import cluster as cluster_cli

    directory = tmp_path_factory.mktemp("samsa-cluster")
    nodes = int(request.config.getini("samsa_cluster_nodes"))
    plan = cluster_cli.plan_cluster(directory, nodes, overrides=tuple(request.config.getini("samsa_overrides")),
                                    log_level=request.config.getini("samsa_log_level"))
    processes = cluster_cli.start_cluster(plan, ready_timeout_s=READY_TIMEOUT_S)
    cluster = SamsaCluster(directory, plan.bootstrap_servers, processes)
    request.config.stash[_STASH_CLUSTERS].append(cluster)
    try:
        yield cluster
    finally:
        request.config.stash[_STASH_CLUSTERS].remove(cluster)
        cluster.stop()


_topic_counter = itertools.count()


@pytest.fixture
def samsa_topic(request: pytest.FixtureRequest, samsa_broker: SamsaBroker) -> str:
    """A new topic on the session broker, named after the test (unique within the session)."""
    marker = request.node.get_closest_marker("samsa_topic")
    kwargs: dict[str, Any] = dict(marker.kwargs) if marker else {}
    stem = re.sub(r"[^a-zA-Z0-9._-]+", "-", request.node.name)[:180].strip("-.") or "topic"
    name = f"{stem}-{os.getpid()}-{next(_topic_counter)}"
    return samsa_broker.create_topic(name, partitions=int(kwargs.get("partitions", 1)), configs=kwargs.get("configs"))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item,
                              call: pytest.CallInfo[None]) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if not report.failed:
        return report
    fixtures = getattr(item, "fixturenames", ())
    if "samsa_broker" in fixtures:
        for broker in item.config.stash.get(_STASH_BROKERS, []):
            report.sections.append((f"samsa broker {broker.bootstrap_servers} (pid {broker.pid}) log",
                                    broker.log_tail()))
    if "samsa_cluster" in fixtures:
        for cluster in item.config.stash.get(_STASH_CLUSTERS, []):
            for node_id, address, pid, tail in cluster.node_log_tails():
                report.sections.append((f"samsa cluster node {node_id} {address} (pid {pid}) log", tail))
    return report
