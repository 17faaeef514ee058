"""The Samsa-vs-Kafka benchmark harness (bench/compare) works: a tiny run of every scenario against both brokers.

Checks only that the harness runs, measures both brokers and writes its JSON and charts; no figure is
judged (the machine is shared, timings mean nothing here). Needs the reference Kafka's jars (`make compat-deps`).
"""

from __future__ import annotations

import json
import struct
import subprocess
import sys
import time
import zlib
from pathlib import Path

import pytest

from bench.compare import perf_tools, png, runner
from bench.compare.common import Metric, ScenarioResult, percentiles

REPO = Path(__file__).resolve().parents[2]

PRODUCER_OUT = """\
49876 records sent, 9971.2 records/sec (9.74 MB/sec), 5.5 ms avg latency, 180.0 ms max latency.
100000 records sent, 9998.000400 records/sec (9.76 MB/sec), 4.21 ms avg latency, 180.00 ms max latency, \
3 ms 50th, 9 ms 95th, 25 ms 99th, 120 ms 99.9th.
"""

PRODUCER_WARM_OUT = """\
Warmup first 100000 records. Steady state results will print after the complete test summary.
In steady state.
99941 records sent, 19988.2 records/sec (19.52 MB/sec), 0.8 ms avg latency, 7.0 ms max latency.
400000 records sent, 19989.006047 records/sec (19.52 MB/sec), 6.86 ms avg latency, 301.00 ms max latency, \
1 ms 50th, 7 ms 95th, 195 ms 99th, 249 ms 99.9th.
300000 steady state records sent, 19952.114924 records/sec (19.48 MB/sec), 0.83 ms avg latency, 8.00 ms max \
latency, 0 ms 50th, 3 ms 95th, 4 ms 99th, 6 ms 99.9th.
"""

CONSUMER_OUT = """\
start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, rebalance.time.ms, \
fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec
2026-11-29 09:03:18:663, 2026-11-29 09:03:27:928, 19.5313, 2.1081, 20000, 2158.6616, 6640, 2625, 7.4405, 7619.0476
"""


def test_parse_producer_final_line() -> None:
    out = perf_tools.parse_producer(PRODUCER_OUT)
    assert out["records"] == 100000
    assert out["records_per_s"] == pytest.approx(9998.0004)
    assert (out["p50_ms"], out["p99_ms"], out["p99.9_ms"]) == (3, 25, 120)


def test_parse_producer_steady_state_line() -> None:
    out = perf_tools.parse_producer(PRODUCER_WARM_OUT)
    assert (out["records"], out["p99_ms"]) == (400000, 195)  # the whole run, warm-up included
    assert (out["steady_records"], out["steady_p50_ms"], out["steady_p99_ms"], out["steady_p99.9_ms"]) == (
        300000, 0, 4, 6)
    assert "steady_p99_ms" not in perf_tools.parse_producer(PRODUCER_OUT)


def test_parse_consumer_line() -> None:
    out = perf_tools.parse_consumer(CONSUMER_OUT)
    assert out["records"] == 20000
    assert out["rebalance_ms"] == 6640
    assert out["fetch_records_per_s"] == pytest.approx(7619.0476)


def test_percentiles_nearest_rank() -> None:
    p = percentiles([float(i) for i in range(1, 1001)])
    assert (p["p50"], p["p99"], p["p99.9"], p["max"]) == (500.0, 990.0, 999.0, 1000.0)


def _png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    length, kind = struct.unpack(">I4s", data[8:16])
    assert kind == b"IHDR"
    assert zlib.crc32(data[12:16 + length]) == struct.unpack(">I", data[16 + length:20 + length])[0]
    w, h = struct.unpack(">II", data[16:24])
    return w, h


def test_chart_is_a_valid_png() -> None:
    r = ScenarioResult("x", "A title")
    r.metrics.append(Metric("throughput", "records/s", "higher", kafka=100.0, samsa=50.0))
    r.metrics.append(Metric("latency", "ms", "lower", kafka=3.0, samsa=None, samsa_status="unsupported"))
    data = png.chart(r, "subtitle\nnote")
    w, h = _png_size(data)
    assert w >= 2 * png.PANEL_W and h > png.PANEL_H
    idat = data[data.index(b"IDAT") + 4:]
    raw = zlib.decompressobj().decompress(idat)
    assert len(raw) >= h * (1 + 3 * w) - 1  # every row decodes


@pytest.mark.timeout(900)
def test_smoke_every_scenario_against_both_brokers(tmp_path: Path) -> None:
    sys.path.insert(0, str(REPO / "compat-tests"))
    import oracle_fixture

    try:
        oracle_fixture.ensure_installed()
    except oracle_fixture.OracleError as e:
        pytest.skip(str(e))
    t0 = time.monotonic()
    res = subprocess.run([sys.executable, "-m", "bench.compare", "--smoke", "--out", str(tmp_path)], cwd=REPO,
                         capture_output=True, text=True, timeout=840, stdin=subprocess.DEVNULL)
    print(res.stdout[-20000:])
    print(res.stderr[-5000:], file=sys.stderr)
    print(f"smoke run took {time.monotonic() - t0:.0f} s")
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    results = list(tmp_path.glob("compare-*.json"))
    assert len(results) == 1
    run = json.loads(results[0].read_text())
    assert run["machine"]["cores"] and run["load_average_start"]
    assert set(run["scenarios"]) == set(runner.SCENARIOS)
    for name, scenario in run["scenarios"].items():
        assert scenario["error"] is None, (name, scenario["error"])
        assert scenario["metrics"], name
        for m in scenario["metrics"]:
            assert m["kafka"] is not None, (name, m)
            assert m["samsa"] is not None or m["samsa_status"] != "ok", (name, m)
        assert _png_size((tmp_path / f"compare-{name}.png").read_bytes())
        assert f"--- {name}:" in res.stdout
    assert "Samsa/Kafka" in res.stdout


def test_pytest_fixture_bench_smoke() -> None:
    """bench.pytest_fixtures runs and prints both figures (not judged: the machine is shared)."""
    done = subprocess.run([sys.executable, "-m", "bench.pytest_fixtures", "--smoke"], cwd=REPO, capture_output=True,
                          text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    assert "session broker ready: median" in done.stdout and "fresh topic: median" in done.stdout


@pytest.mark.timeout(600)
def test_kip848_bench_smoke(tmp_path: Path) -> None:
    """bench.kip848 --smoke measures failover and a 10th member's join for both protocols on both brokers, and
    writes them (figures not judged beyond being positive and finite: the machine is shared)."""
    sys.path.insert(0, str(REPO / "compat-tests"))
    import oracle_fixture

    try:
        oracle_fixture.ensure_installed()
    except oracle_fixture.OracleError as e:
        pytest.skip(str(e))
    res = subprocess.run([sys.executable, "-m", "bench.kip848", "--smoke", "--out", str(tmp_path)], cwd=REPO,
                         capture_output=True, text=True, timeout=560, stdin=subprocess.DEVNULL)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    (result,) = tmp_path.glob("kip848-*.json")
    run = json.loads(result.read_text())
    for target in ("samsa", "kafka"):
        for protocol in ("consumer", "classic"):
            for scenario in ("failover", "join10"):
                (seconds,) = run["runs"][target][protocol][scenario]
                assert 0 < seconds < 120, (target, protocol, scenario, seconds)
    # A SIGKILLed member's partitions cannot move before its session (6 s) expires, on either broker.
    assert all(run["runs"][t][p]["failover"][0] >= 5.0 for t in ("samsa", "kafka") for p in ("consumer", "classic"))
    assert set(run["summary"]) == {f"{p}.{s}" for p in ("consumer", "classic") for s in ("failover", "join10")}
    assert "samsa/kafka" in res.stdout
