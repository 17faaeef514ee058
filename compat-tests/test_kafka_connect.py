"""Kafka Connect (compat.mk's CONNECT_VERSION) in distributed mode against each broker (issue 16's Connect test).

A real worker (``org.apache.kafka.connect.cli.ConnectDistributed``, jars from ``make compat-deps`` in
``compat-tests/connect/lib``) keeps its connector configs, source offsets and statuses in three
topics of the broker. It creates them with ``cleanup.policy=compact`` and refuses to start when one
is not compacted (``TopicAdmin.verifyTopicCleanupPolicyOnlyCompact`` reads the policy from the
broker's DescribeConfigs answer). A line-file source connector (the test's own, in
``compat-tests/connect/plugin``, loaded from ``plugin.path``; Kafka's FileStream plugin is not served for 4.4)
reads a file into a topic and a line-file sink connector writes that topic to
another file; the sink file must end up with every line, in order, exactly once. The worker is then
stopped and a new one started on the same topics: it must find its connectors in the config topic
and resume from the offsets in the offset topic (no line read twice, none lost). Another test gives
the worker a config topic with ``cleanup.policy=delete`` and expects its refusal: Connect skips the
check with a log line when DescribeConfigs fails, so only the refusal shows the broker's answer was read.
A third lets the broker's log cleaner compact the offset topic while the source connector commits, and
checks that the latest offset (what a restarted worker resumes from) is what remains.

Runs against both targets (``-m samsa`` / ``-m kafka``); the worker is stopped by its process group.
``SAMSA_KEEP_DATA=1`` keeps the temporary directory with the workers' logs.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest
from compat_targets import Target
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, ResourceType
from oracle_fixture import COMPAT_DIR, HOST, QUICK_JVM_OPTS, die_with_parent_hook, free_port, java_command

CONNECT_DIR = COMPAT_DIR / "connect"
CONNECT_LIB = Path(os.environ.get("CONNECT_LIB_DIR", CONNECT_DIR / "lib"))
PLUGIN_PATH = CONNECT_LIB / "plugins"
CONNECT_LOG4J = CONNECT_DIR / "log4j2-connect.xml"
DISTRIBUTED = "org.apache.kafka.connect.cli.ConnectDistributed"
# The version make compat-deps installed (compat.mk's CONNECT_VERSION: the reference Kafka's).
CONNECT_VERSION = next((p.name.removeprefix("connect-runtime-").removesuffix(".jar")
                        for p in CONNECT_LIB.glob("connect-runtime-*.jar")), None)

WORKER_START_TIMEOUT_S = 150.0  # JVM start, internal topics, group join, on a shared 2-core machine
CONNECTORS_RUNNING_TIMEOUT_S = 120.0
DELIVERY_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 30.0

# Against Samsa in make test; against Kafka too with COMPAT_CONNECT_KAFKA=1 (the three tests cost about two minutes
# a broker on this 2-core machine, and Kafka's side shows only that the test itself is right: it passed there).
BROKERS = pytest.mark.parametrize("broker", [
    pytest.param("samsa", marks=pytest.mark.samsa, id="samsa"),
    pytest.param("kafka", marks=[pytest.mark.kafka, pytest.mark.skipif(
        os.environ.get("COMPAT_CONNECT_KAFKA") != "1",
        reason="the same tests against the reference Kafka take two more minutes: opt in with COMPAT_CONNECT_KAFKA=1")],
        id="kafka"),
], indirect=True)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(2 * WORKER_START_TIMEOUT_S + 2 * CONNECTORS_RUNNING_TIMEOUT_S + 2 * DELIVERY_TIMEOUT_S + 120),
]

T = TypeVar("T")


def _installed() -> bool:
    return any(CONNECT_LIB.glob("connect-runtime-*.jar")) and any(PLUGIN_PATH.glob("samsa-line-file/*.jar"))


@dataclass(frozen=True, slots=True)
class ConnectTopics:
    config: str
    offset: str
    status: str


@dataclass
class Worker:
    proc: subprocess.Popen[bytes]
    rest_url: str
    log_path: Path

    def log_tail(self, lines: int = 80) -> str:
        try:
            text = self.log_path.read_text(errors="replace").splitlines()[-lines:]
        except OSError:
            return f"(no log at {self.log_path})"
        return f"--- last {len(text)} lines of {self.log_path}\n" + "\n".join(text)

    def stop(self) -> None:
        """SIGTERM the worker's process group (a graceful Connect shutdown commits offsets), then SIGKILL."""
        if self.proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)


def _worker_properties(bootstrap: str, port: int, group_id: str, topics: ConnectTopics) -> str:
    values = {
        "bootstrap.servers": bootstrap,
        "group.id": group_id,
        "config.storage.topic": topics.config,
        "offset.storage.topic": topics.offset,
        "status.storage.topic": topics.status,
        "config.storage.replication.factor": "1",
        "offset.storage.replication.factor": "1",
        "status.storage.replication.factor": "1",
        # Fewer than the defaults (25 and 5): lighter on a shared machine, still several partitions.
        "offset.storage.partitions": "5",
        "status.storage.partitions": "2",
        "key.converter": "org.apache.kafka.connect.storage.StringConverter",
        "value.converter": "org.apache.kafka.connect.storage.StringConverter",
        "listeners": f"http://{HOST}:{port}",
        "rest.advertised.host.name": HOST,
        "rest.advertised.port": str(port),
        "plugin.path": str(PLUGIN_PATH),
        "plugin.discovery": "service_load",  # the plugin ships ServiceLoader manifests (KIP-898): no scan
        "offset.flush.interval.ms": "500",
    }
    return "".join(f"{k}={v}\n" for k, v in values.items())


def _start_worker(workdir: Path, name: str, properties: str, rest_url: str) -> Worker:
    props = workdir / f"{name}.properties"
    props.write_text(properties)
    log_path = workdir / f"{name}.log"
    cmd = java_command(DISTRIBUTED, [str(props)], heap=["-Xmx256m"], log4j=CONNECT_LOG4J,
                       jvm_opts=QUICK_JVM_OPTS, lib_dir=CONNECT_LIB)
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, cwd=workdir,
                                start_new_session=True, preexec_fn=die_with_parent_hook())
    return Worker(proc=proc, rest_url=rest_url, log_path=log_path)


@contextlib.contextmanager
def _worker(workdir: Path, name: str, properties: str, rest_url: str) -> Iterator[Worker]:
    worker = _start_worker(workdir, name, properties, rest_url)
    try:
        yield worker
    finally:
        worker.stop()


def _rest(worker: Worker, method: str, path: str, body: object | None = None) -> Any:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(worker.rest_url + path, data=data, method=method,
                                 headers={"Content-Type": "application/json", "Accept": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as resp:
        raw = resp.read()
    return json.loads(raw) if raw else None


def _wait(worker: Worker, what: str, timeout_s: float, probe: Callable[[], T | None]) -> T:
    """Call ``probe`` until it returns something other than None; fail with the worker's log otherwise."""
    deadline = time.monotonic() + timeout_s
    last_error = ""
    while time.monotonic() < deadline:
        if worker.proc.poll() is not None:
            pytest.fail(f"the Connect worker exited ({worker.proc.returncode}) while waiting for {what}\n"
                        f"{worker.log_tail()}", pytrace=False)
        try:
            result = probe()
        except (OSError, urllib.error.URLError, ValueError) as e:  # REST not up yet, or busy rebalancing (409)
            last_error = repr(e)
            result = None
        if result is not None:
            return result
        time.sleep(0.5)
    pytest.fail(f"timed out after {timeout_s:.0f}s waiting for {what} (last error: {last_error})\n"
                f"{worker.log_tail()}", pytrace=False)


def _wait_rest_up(worker: Worker) -> None:
    info = _wait(worker, "the REST API (GET /)", WORKER_START_TIMEOUT_S, lambda: _rest(worker, "GET", "/"))
    assert info["version"] == CONNECT_VERSION


def _all_running(worker: Worker, names: list[str]) -> bool | None:
    for name in names:
        status = _rest(worker, "GET", f"/connectors/{name}/status")
        tasks = status["tasks"]
        if status["connector"]["state"] != "RUNNING" or not tasks or any(t["state"] != "RUNNING" for t in tasks):
            failed = [t for t in tasks if t["state"] == "FAILED"]
            if status["connector"]["state"] == "FAILED" or failed:
                pytest.fail(f"connector {name} failed: {json.dumps(status)[:4000]}\n{worker.log_tail()}",
                            pytrace=False)
            return None
    return True


def _lines(path: Path) -> list[str]:
    try:
        return path.read_text().splitlines()
    except FileNotFoundError:
        return []


def _wait_sink(worker: Worker, sink: Path, expected: list[str]) -> None:
    def probe() -> bool | None:
        got = _lines(sink)
        assert got == expected[: len(got)], f"sink file diverged: {got[-5:]} vs expected prefix"
        return True if len(got) == len(expected) else None

    _wait(worker, f"{len(expected)} lines in the sink file", DELIVERY_TIMEOUT_S, probe)


def _append(path: Path, lines: list[str]) -> None:
    with open(path, "a") as f:
        f.write("".join(line + "\n" for line in lines))


def _admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 20000})


def _create_topic(bootstrap: str, topic: str, config: dict[str, str] | None = None) -> None:
    admin = _admin(bootstrap)  # held until the futures are done: a collected client cancels them
    new = NewTopic(topic, num_partitions=1, replication_factor=1, config=config or {})
    (future,) = admin.create_topics([new]).values()
    future.result(timeout=30)


def _cleanup_policies(bootstrap: str, topics: list[str]) -> dict[str, str]:
    admin = _admin(bootstrap)
    futures = admin.describe_configs([ConfigResource(ResourceType.TOPIC, t) for t in topics])
    return {resource.name: future.result(timeout=30)["cleanup.policy"].value for resource, future in futures.items()}


@pytest.mark.skipif(not _installed(), reason=f"Kafka Connect jars missing in {CONNECT_LIB}: run `make compat-deps`")
@BROKERS
def test_distributed_file_source_to_sink(broker: Target) -> None:
    run = uuid.uuid4().hex[:8]
    topics = ConnectTopics(config=f"connect-configs-{run}", offset=f"connect-offsets-{run}",
                           status=f"connect-status-{run}")
    data_topic = f"connect-lines-{run}"
    _create_topic(broker.bootstrap, data_topic)
    port = free_port()
    properties = _worker_properties(broker.bootstrap, port, f"connect-{run}", topics)
    rest_url = f"http://{HOST}:{port}"

    workdir = Path(tempfile.mkdtemp(prefix="samsa-connect-"))
    try:
        source, sink = workdir / "source.txt", workdir / "sink.txt"
        source.touch()
        first = [f"line {i} of {run}" for i in range(50)]
        second = [f"after restart {i} of {run}" for i in range(30)]
        connectors = {
            f"file-source-{run}": {"connector.class": "samsa.connect.LineFileSourceConnector",
                                   "tasks.max": "1", "file": str(source), "topic": data_topic},
            f"file-sink-{run}": {"connector.class": "samsa.connect.LineFileSinkConnector",
                                 "tasks.max": "1", "file": str(sink), "topics": data_topic},
        }

        with _worker(workdir, "worker-1", properties, rest_url) as worker:
            _wait_rest_up(worker)
            # The worker created its three topics and checked their policy before its REST API
            # served requests; the broker's own answer must say compact too.
            policies = _cleanup_policies(broker.bootstrap, [topics.config, topics.offset, topics.status])
            assert policies == {topics.config: "compact", topics.offset: "compact", topics.status: "compact"}
            for name, config in connectors.items():
                _wait(worker, f"POST /connectors {name}", CONNECTORS_RUNNING_TIMEOUT_S,
                      lambda name=name, config=config: _rest(worker, "POST", "/connectors",
                                                             {"name": name, "config": config}))
            _wait(worker, "both connectors RUNNING", CONNECTORS_RUNNING_TIMEOUT_S,
                  lambda: _all_running(worker, list(connectors)))
            _append(source, first[:20])
            _append(source, first[20:])
            _wait_sink(worker, sink, first)
            # Leaving the block stops the worker gracefully: the source task's file position goes to
            # the offset topic and the sink's consumer group commits.
            assert sorted(_rest(worker, "GET", "/connectors")) == sorted(connectors)

        # A second worker on the same topics: connectors come back from the config topic, the source
        # resumes at its stored file position, the sink at its group's committed offset.
        _append(source, second)
        with _worker(workdir, "worker-2", properties, rest_url) as worker:
            _wait_rest_up(worker)
            _wait(worker, "both connectors RUNNING after the restart", CONNECTORS_RUNNING_TIMEOUT_S,
                  lambda: _all_running(worker, list(connectors)))
            _wait_sink(worker, sink, first + second)
    finally:
        if os.environ.get("SAMSA_KEEP_DATA") != "1":  # as samsa_fixture: keep the workers' logs to debug
            shutil.rmtree(workdir, ignore_errors=True)


@pytest.mark.skipif(not _installed(), reason=f"Kafka Connect jars missing in {CONNECT_LIB}: run `make compat-deps`")
@BROKERS
def test_distributed_refuses_a_config_topic_that_is_not_compacted(broker: Target) -> None:
    """The other side of the check above: Connect reads the policy from the broker's DescribeConfigs
    answer and stops when it says delete. (When DescribeConfigs fails Connect only logs and goes on,
    so the passing test alone would not show that the broker's answer was read.)"""
    run = uuid.uuid4().hex[:8]
    topics = ConnectTopics(config=f"connect-configs-{run}", offset=f"connect-offsets-{run}",
                           status=f"connect-status-{run}")
    _create_topic(broker.bootstrap, topics.config, {"cleanup.policy": "delete"})
    port = free_port()
    properties = _worker_properties(broker.bootstrap, port, f"connect-{run}", topics)
    workdir = Path(tempfile.mkdtemp(prefix="samsa-connect-"))
    try:
        with _worker(workdir, "worker", properties, f"http://{HOST}:{port}") as worker:
            # The herder thread dies with the ConfigException at once; the JVM then takes tens of
            # seconds to wind its executors down, so the test stops it rather than waiting for it.
            refusal = f"Topic '{topics.config}' supplied via the 'config.storage.topic' property is required to have"

            def refused() -> bool | None:
                log = worker.log_path.read_text(errors="replace")
                return True if refusal in log and "Uncaught exception in herder work thread" in log else None

            deadline = time.monotonic() + WORKER_START_TIMEOUT_S
            while refused() is None and worker.proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.5)
            log = worker.log_path.read_text(errors="replace")
            assert refused(), f"no refusal of the delete-policy config topic\n{worker.log_tail()}"
            assert "found the topic currently has 'cleanup.policy=delete'" in log
    finally:
        if os.environ.get("SAMSA_KEEP_DATA") != "1":
            shutil.rmtree(workdir, ignore_errors=True)


def _read_all(bootstrap: str, topic: str) -> tuple[int, list[tuple[bytes | None, bytes | None]]]:
    """Partition 0 of ``topic`` from the beginning: (its end offset, the (key, value) of every record left)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{uuid.uuid4().hex[:8]}",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        tp = TopicPartition(topic, 0)
        _, end = consumer.get_watermark_offsets(tp, timeout=20)
        consumer.assign([TopicPartition(topic, 0, 0)])
        records: list[tuple[bytes | None, bytes | None]] = []
        deadline = time.monotonic() + 60
        position = 0
        while position < end and time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is None or msg.error() is not None:
                continue
            records.append((msg.key(), msg.value()))
            position = msg.offset() + 1
        assert position >= end, f"read {topic} up to {position} of {end} in 60s"
        return end, records
    finally:
        consumer.close()


@pytest.mark.skipif(not _installed(), reason=f"Kafka Connect jars missing in {CONNECT_LIB}: run `make compat-deps`")
@BROKERS
def test_offset_topic_is_compacted_by_the_broker(broker: Target) -> None:
    """Connect writes its source offsets under one key per source partition, every flush: the broker's
    cleaner must reduce them to the latest one (what a restarted worker resumes from). The offset
    topic is created here, compacted, with short segments and a low dirty ratio so that the cleaner
    has closed segments to clean within the test; Connect accepts an existing compacted topic."""
    run = uuid.uuid4().hex[:8]
    topics = ConnectTopics(config=f"connect-configs-{run}", offset=f"connect-offsets-{run}",
                           status=f"connect-status-{run}")
    _create_topic(broker.bootstrap, topics.offset, {"cleanup.policy": "compact", "segment.ms": "100",
                                                    "min.cleanable.dirty.ratio": "0.01"})
    data_topic = f"connect-lines-{run}"
    _create_topic(broker.bootstrap, data_topic)
    port = free_port()
    properties = _worker_properties(broker.bootstrap, port, f"connect-{run}", topics)
    workdir = Path(tempfile.mkdtemp(prefix="samsa-connect-"))
    name = f"file-source-{run}"
    try:
        source = workdir / "source.txt"
        source.touch()
        with _worker(workdir, "worker", properties, f"http://{HOST}:{port}") as worker:
            _wait_rest_up(worker)
            config = {"connector.class": "samsa.connect.LineFileSourceConnector",
                      "tasks.max": "1", "file": str(source), "topic": data_topic}
            _wait(worker, f"POST /connectors {name}", CONNECTORS_RUNNING_TIMEOUT_S,
                  lambda: _rest(worker, "POST", "/connectors", {"name": name, "config": config}))
            _wait(worker, "the source connector RUNNING", CONNECTORS_RUNNING_TIMEOUT_S,
                  lambda: _all_running(worker, [name]))
            # One line per flush interval or so: each flush that finds a new file position writes an
            # offset record (how many is timing; the test needs several, and checks it got them).
            for i in range(12):  # offset.flush.interval.ms is 500: some ten offset records
                _append(source, [f"line {i} of {run}"])
                time.sleep(0.6)
            final_position = source.stat().st_size

            def latest_offset_record_count() -> list[bytes | None] | None:
                end, records = _read_all(broker.bootstrap, topics.offset)
                ours = [value for key, value in records if key is not None and name.encode() in key]
                if not ours or json.loads(ours[-1] or b"{}").get("position") != final_position:
                    return None  # the last flush has not landed yet
                # compacted: the closed segments keep one record for the key; the active one may hold one more
                return ours if end >= 5 and len(ours) <= 2 else None

            kept = _wait(worker, "the offset topic compacted to its latest offsets", DELIVERY_TIMEOUT_S + 60,
                         latest_offset_record_count)
            assert json.loads(kept[-1] or b"{}") == {"position": final_position}
    finally:
        if os.environ.get("SAMSA_KEEP_DATA") != "1":
            shutil.rmtree(workdir, ignore_errors=True)
