"""`samsa cluster up` and `samsa cluster down` as a user runs them: separate processes, state in
DIR/cluster.json, bootstrap servers on stdout."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from samsa.broker.cli import cluster as cluster_cli

REPO = Path(__file__).resolve().parents[2]


def _samsa(*args: str, timeout_s: float = 90) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "samsa.broker.cli", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=timeout_s, stdin=subprocess.DEVNULL)


@pytest.mark.timeout(150)
def test_cluster_up_prints_a_working_bootstrap_and_down_stops_every_pid(tmp_path: Path) -> None:
    directory = tmp_path / "cluster"
    try:
        up = _samsa("cluster", "up", "--nodes", "3", "--dir", str(directory))
        print(up.stderr)
        assert up.returncode == 0, up.stderr
        bootstrap = up.stdout.strip()
        assert re.fullmatch(r"127\.0\.0\.1:\d+(,127\.0\.0\.1:\d+){2}", bootstrap), up.stdout
        state = json.loads((directory / "cluster.json").read_text())
        assert state["bootstrap_servers"] == bootstrap
        nodes = state["nodes"]
        assert [n["node_id"] for n in nodes] == [1, 2, 3]
        assert all(cluster_cli.pid_alive(n["pid"], n["start_time"]) for n in nodes)
        assert all(Path(n["data_dir"], "meta.properties").is_file() for n in nodes)
        for address in bootstrap.split(","):
            port = int(address.rpartition(":")[2])
            assert cluster_cli.listed_brokers(port) == {1, 2, 3}, address

        # Every node serves /metrics and /health on its own port, printed by `up` and kept in cluster.json.
        for n in nodes:
            url = f"http://127.0.0.1:{n['metrics_port']}"
            assert url + "/metrics" in up.stderr
            with urllib.request.urlopen(url + "/health/live", timeout=10) as r:
                assert r.status == 200
            with urllib.request.urlopen(url + "/metrics", timeout=10) as r:
                assert "kafka_server_replicamanager_partitioncount" in r.read().decode()

        # Every node's directory is locked by its broker: a stray `samsa serve` on one exits at once.
        stray = _samsa("serve", "--data-dir", nodes[0]["data_dir"], "--listen", "127.0.0.1:0", timeout_s=30)
        assert stray.returncode != 0 and ".lock" in stray.stderr, stray.stderr
        assert cluster_cli.listed_brokers(int(bootstrap.split(",")[0].rpartition(":")[2])) == {1, 2, 3}

        again = _samsa("cluster", "up", "--nodes", "3", "--dir", str(directory))
        assert again.returncode == 1 and "running cluster" in again.stderr, again.stderr
        assert json.loads((directory / "cluster.json").read_text()) == state  # left alone

        down = _samsa("cluster", "down", "--dir", str(directory))
        print(down.stderr)
        assert down.returncode == 0, down.stderr
        # Gone: no such process, or a zombie the (non-reaping) init of a container has not collected.
        assert not [n["pid"] for n in nodes if cluster_cli.process_start_time(n["pid"]) is not None]
        for address in bootstrap.split(","):
            assert not cluster_cli.port_open(int(address.rpartition(":")[2]))
        assert all("shut down cleanly" in Path(n["log"]).read_text() for n in nodes)  # SIGTERM, not SIGKILL
    finally:
        if (directory / "cluster.json").exists():
            cluster_cli.cluster_down(directory)
