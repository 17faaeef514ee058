"""The metrics and health listener of a real `samsa serve --metrics-listen`: routes, status codes, and
readiness that turns 200 only once the broker has caught up with a quorum, registered and been unfenced."""

from __future__ import annotations

import json
import socket
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from samsa.broker import launcher

START_TIMEOUT_S = 60.0


def get(port: int, path: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def wait_http(port: int) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while not launcher.port_open(port):
        assert time.monotonic() < deadline, f"metrics port {port} never opened"
        time.sleep(0.1)


def wait_ready(port: int, timeout_s: float = START_TIMEOUT_S) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while True:
        status, body = get(port, "/health/ready")
        if status == 200:
            return dict(json.loads(body))
        assert status == 503, (status, body)
        assert time.monotonic() < deadline, f"never ready: {body!r}"
        time.sleep(0.2)


@pytest.fixture
def processes(tmp_path: Path) -> Iterator[list[launcher.ServeProcess]]:
    started: list[launcher.ServeProcess] = []
    yield started
    for p in started:
        p.stop(15.0, kill=True)


def start(processes: list[launcher.ServeProcess], tmp_path: Path, name: str, port: int, metrics_port: int,
          **options: Any) -> launcher.ServeProcess:
    served = launcher.start_serve(
        launcher.ServeOptions(data_dir=tmp_path / name, port=port,
                              extra_args=("--metrics-listen", f"127.0.0.1:{metrics_port}"), **options),
        tmp_path / f"{name}.log", cwd=tmp_path)
    processes.append(served)
    return served


def test_single_node_routes(processes: list[launcher.ServeProcess], tmp_path: Path) -> None:
    port, metrics_port = launcher.free_ports(2)
    start(processes, tmp_path, "one", port, metrics_port).wait_listening(START_TIMEOUT_S)
    wait_http(metrics_port)
    assert get(metrics_port, "/health/live") == (200, b'{"status": "live"}\n')
    ready = wait_ready(metrics_port)
    assert ready["status"] == "ready" and all(ready["checks"].values())
    status, body = get(metrics_port, "/metrics")
    assert status == 200
    names = {s.name for f in text_string_to_metric_families(body.decode()) for s in f.samples}
    assert {"kafka_server_replicamanager_partitioncount", "kafka_controller_kafkacontroller_activecontrollercount",
            "kafka_server_raftmetrics_current_epoch", "samsa_log_dir_free_bytes",
            "samsa_event_loop_lag_seconds_count"} <= names
    assert get(metrics_port, "/nope")[0] == 404
    with socket.create_connection(("127.0.0.1", metrics_port), timeout=10) as s:
        s.sendall(b"garbage\r\n\r\n")
        assert s.recv(100).startswith(b"HTTP/1.1 400 ")
    with socket.create_connection(("127.0.0.1", metrics_port), timeout=10) as s:
        s.sendall(b"GET /" + b"x" * 20_000)  # a head past the bound: refused, not buffered
        assert s.recv(100).startswith(b"HTTP/1.1 400 ")


def test_ready_only_once_the_quorum_forms_and_the_broker_is_unfenced(
        processes: list[launcher.ServeProcess], tmp_path: Path) -> None:
    p1, p2, c1, c2, m1, m2 = launcher.free_ports(6)
    quorum = f"1@127.0.0.1:{c1},2@127.0.0.1:{c2}"
    common = {"controller_quorum": quorum, "roles": "broker,controller"}
    start(processes, tmp_path, "n1", p1, m1, node_id=1, controller_listen=f"127.0.0.1:{c1}", **common)
    wait_http(m1)
    # Alone, node 1 cannot elect a leader: it is live, not ready, and says why.
    assert get(m1, "/health/live")[0] == 200
    time.sleep(2.0)
    status, body = get(m1, "/health/ready")
    assert status == 503
    not_ready = json.loads(body)
    assert not_ready["checks"]["caught_up"] is False and not_ready["checks"]["listeners_open"] is False
    assert not not_ready["checks"]["registered"] or not not_ready["checks"]["unfenced"]
    assert not launcher.port_open(p1)
    start(processes, tmp_path, "n2", p2, m2, node_id=2, controller_listen=f"127.0.0.1:{c2}", **common)
    for m in (m1, m2):
        ready = wait_ready(m)
        assert all(ready["checks"].values()) and ready["reasons"] == []
    assert launcher.port_open(p1) and launcher.port_open(p2)


def test_request_metrics_count_what_was_asked(processes: list[launcher.ServeProcess], tmp_path: Path) -> None:
    """Produce requests sent are Produce requests counted, with their total time in the histogram."""
    from samsa.broker.client import Connection
    from samsa.kproto.records import encode_batch

    port, metrics_port = launcher.free_ports(2)
    start(processes, tmp_path, "req", port, metrics_port).wait_listening(START_TIMEOUT_S)
    wait_http(metrics_port)

    def samples() -> dict[tuple[str, str], float]:
        body = get(metrics_port, "/metrics")[1].decode()
        return {(s.name, s.labels.get("request", "")): s.value for f in text_string_to_metric_families(body)
                for s in f.samples if s.name.startswith("kafka_network_requestmetrics") and "le" not in s.labels}

    with Connection("127.0.0.1", port) as conn:
        conn.request(19, {"topics": [{"name": "counted", "num_partitions": 1, "replication_factor": 1,
                                      "assignments": (), "configs": ()}], "timeout": 10000, "validate_only": False})
        before = samples()
        for i in range(25):
            batch = encode_batch([(None, b"v%d" % i, ())], timestamp_ms=int(time.time() * 1000))
            r = conn.request(0, {"transactional_id": None, "acks": 1, "timeout": 5000, "topic_data": [
                {"name": "counted", "partition_data": [{"index": 0, "records": batch}]}]})
            assert r.responses[0].partition_responses[0].error_code.value == 0
        open_now = {s.labels["listener"]: s.value for f in text_string_to_metric_families(
            get(metrics_port, "/metrics")[1].decode()) for s in f.samples
            if s.name == "kafka_server_socket_server_metrics_connection_count"}
        assert open_now.get("PLAINTEXT", 0) >= 1  # this connection
    after = samples()
    produced = after[("kafka_network_requestmetrics_requests_total", "Produce")] - before.get(
        ("kafka_network_requestmetrics_requests_total", "Produce"), 0.0)
    assert produced == 25
    assert after[("kafka_network_requestmetrics_totaltime_seconds_count", "Produce")] >= 25
    assert after[("kafka_network_requestmetrics_totaltime_seconds_sum", "Produce")] > 0
    assert after[("kafka_network_requestmetrics_requests_total", "CreateTopics")] == 1
    # The connection timed each Produce's phases (answered at once: no remote time).
    for phase in ("requestqueuetime", "localtime", "remotetime", "responsesendtime"):
        assert after[(f"kafka_network_requestmetrics_{phase}_seconds_count", "Produce")] >= 25
    assert after[("kafka_network_requestmetrics_remotetime_seconds_sum", "Produce")] == 0
    assert after[("kafka_network_requestmetrics_errors_total", "Produce")] >= 25  # error="NONE", per partition
