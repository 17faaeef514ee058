"""The metadata quorum benchmark's harness works (Samsa side, one election): bench/quorum/quorum_bench.py."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(300)
def test_quorum_bench_smoke(tmp_path: Path) -> None:
    out = tmp_path / "quorum.json"
    res = subprocess.run(
        [sys.executable, "bench/quorum/quorum_bench.py", "--skip-kafka", "--reps", "1", "--changes", "3",
         "--out", str(out)],
        cwd=REPO, capture_output=True, text=True, timeout=280)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "samsa election 1: new leader after" in res.stdout
    figures = json.loads(out.read_text())["samsa"]
    assert figures["election_ms"] > 0 and figures["writable_after_kill_ms"] >= figures["election_ms"]
    assert figures["metadata_latency_p50_ms"] > 0
