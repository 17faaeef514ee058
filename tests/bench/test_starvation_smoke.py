"""bench.starvation runs: a 2-second smoke run against Samsa prints every case's figures (no figure is judged)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(300)
def test_smoke_prints_every_case() -> None:
    res = subprocess.run([sys.executable, "-m", "bench.starvation", "--smoke", "--no-kafka"], cwd=REPO,
                         capture_output=True, text=True, timeout=240, stdin=subprocess.DEVNULL)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert "'cores':" in res.stdout  # the machine
    figures = r"other Metadata p50 [\d.]+ / p99 [\d.]+ / max [\d.]+ ms \(n=[1-9]\d*\); other Produce p50 [\d.]+"
    for case in ("idle", "zstd-1M-empty", "plain-1MiB"):
        assert re.search(rf"samsa {case} +{figures}", res.stdout), res.stdout
    for case in ("zstd-1M-empty", "plain-1MiB"):
        line = next(x for x in res.stdout.splitlines() if f" {case} " in x)
        assert re.search(r"\d+/[1-9]\d* batches of \d+ B accepted, error codes \{", line), line
    assert "wrote" not in res.stdout  # --smoke writes no JSON
