"""The replication benchmark's harness works (Samsa side, tiny runs, one failover):
bench/replication/replication_bench.py."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(300)
def test_replication_bench_smoke(tmp_path: Path) -> None:
    out = tmp_path / "replication.json"
    res = subprocess.run(
        [sys.executable, "bench/replication/replication_bench.py", "--skip-kafka", "--records", "3000",
         "--rate", "500", "--rate-seconds", "2", "--reps", "1", "--out", str(out)],
        cwd=REPO, capture_output=True, text=True, timeout=280)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "samsa failover 1: killed broker" in res.stdout
    result = json.loads(out.read_text())
    assert "kafka" not in result and result["machine"]["cores"] > 0
    figures = result["samsa"]
    assert figures["throughput"]["records"] == 3000
    assert figures["throughput"]["records_per_s"] > 0 and figures["throughput"]["mib_per_s"] > 0
    latency = figures["latency"]["fixed"]
    assert latency["target_rate"] == 500 and latency["records"] == 1000
    assert 0 <= latency["p50_ms"] <= latency["p99_ms"] <= latency["p99.9_ms"]
    run = figures["failover"]["runs"][0]
    assert run["victim_was_controller"] is False  # three partitions on three brokers: one leader is not
    assert run["failover_ms"] > 0 and run["longest_ack_gap_ms"] >= run["failover_ms"] * 0.5
    assert run["errors"] == 0 and run["undelivered"] == 0 and run["acked"] == run["sent"]
    assert figures["failover"]["isr_full_after_restart_s"] > 0
